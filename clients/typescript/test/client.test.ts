import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { inspect } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The package as it ships (dist/, built from src/ by `npm run build`).
import * as client from '../dist/index.js';
import { BridgeAgent, mayRetry, PatientApp, Pont, responseOf, retryDelay, webhooks } from '../dist/index.js';

const conformance = fileURLToPath(new URL('../../conformance/', import.meta.url));
const vectors = JSON.parse(readFileSync(`${conformance}vectors.json`, 'utf8'));
const surface = JSON.parse(readFileSync(`${conformance}surface.json`, 'utf8'));

type Call = { url: string; method: string; headers: Headers; body: string | undefined };
/** A fetch that answers from a function and records every request; the token endpoint answers a token. */
function fakeFetch(answer: (call: Call, n: number) => Response | Promise<Response>, tokenTtl = 3600) {
  const calls: Call[] = [];
  let tokens = 0;
  const fetchImpl = (async (url: string, init: RequestInit) => {
    const call = { url: String(url), method: init.method ?? 'GET', headers: new Headers(init.headers), body: init.body as string | undefined };
    if (call.url.endsWith('/auth/token')) return new Response(JSON.stringify({ access_token: `tok-${++tokens}`, expires_in: tokenTtl }), { status: 200 });
    calls.push(call);
    return answer(call, calls.length);
  }) as typeof fetch;
  return { calls, fetch: fetchImpl, tokens: () => tokens };
}
const json = (status: number, body: unknown, headers: Record<string, string> = {}) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });
/** Waits recorded instead of slept: no test waits a real backoff. */
function recordedSleep() {
  const delays: number[] = [];
  return { delays, sleep: async (ms: number) => void delays.push(ms) };
}
const local = { clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: 'http://pont.invalid' };

describe('conformance vectors', () => {
  it.each((vectors.signatures as any[]).map((v: any) => [v.name, v] as [string, any]))('signature: %s', (_name, v: any) => {
    const verify = () => webhooks.verifySignature(v.raw_body, v.header, vectors.secret, vectors.tolerance, vectors.now);
    if (v.valid) {
      expect(verify()).toBe(true);
      expect(webhooks.parseEvent(Buffer.from(v.raw_body, 'utf8'), v.header, vectors.secret, vectors.tolerance, vectors.now).type).toBe('lab_result.released');
    } else expect(verify).toThrow(client.WebhookSignatureError);
  });

  it.each((vectors.errors as any[]).map((v: any) => [v.name, v] as [string, any]))('error answer: %s', async (_name, v: any) => {
    const fake = fakeFetch(() => new Response(typeof v.body === 'string' ? v.body : JSON.stringify(v.body), { status: v.status, headers: v.headers }));
    const pont = new Pont({ ...local, fetch: fake.fetch, maxRetries: 0 });
    const error = await pont.healthIds.verify('CM482930174629').catch((e: any) => e);
    expect(error).toBeInstanceOf((client as any)[v.exception]);
    expect(error).toBeInstanceOf(client.PontError);
    expect(error).toBeInstanceOf(client.ServiceError); // the earlier name, kept
    expect(error.status).toBe(v.status);
    expect(error.errorCode).toBe(v.error_code);
    expect(error.requestId).toBe(v.headers['x-request-id'] ?? null);
    if (v.retry_after !== undefined) expect(error.retryAfter).toBe(v.retry_after);
    expect(String(error.message)).not.toContain('pcs_x');
  });

  it.each((vectors.retry.backoff as any[]).map((v: any) => [v.name, v] as [string, any]))('backoff: %s', (_name, v: any) => {
    const nowMs = (v.now ?? 1_795_000_000) * 1000;
    const remaining = v.deadline_remaining_ms ?? Infinity;
    for (const random of [0, 0.5, 0.999999]) {
      const delay = retryDelay(v.retry, v.retry_after, () => random, nowMs, remaining);
      if (v.delay_ms === null) expect(delay).toBeNull();
      else {
        expect(delay).toBeGreaterThanOrEqual(v.delay_ms[0]);
        expect(delay).toBeLessThanOrEqual(v.delay_ms[1]);
      }
    }
    // Full jitter: the top of the range is reached, not a fixed fraction of it.
    if (v.delay_ms && v.retry_after === null) expect(retryDelay(v.retry, null, () => 0.999999, nowMs)).toBeGreaterThan(v.delay_ms[1] * 0.99);
  });

  it.each((vectors.retry.decisions as any[]).map((v: any) => [`${v.method} ${v.idempotency_key ? "with" : "without"} key, ${v.outcome}`, v] as [string, any]))('retry decision: %s', (_name, v: any) => {
    expect(mayRetry(v.method, v.idempotency_key, v.outcome)).toBe(v.retry);
  });

  it('the defaults are the vectors', () => {
    const d = vectors.retry.defaults;
    expect(client.RETRY_DEFAULTS).toEqual({ maxRetries: d.max_retries, baseDelayMs: d.base_delay_ms, maxDelayMs: d.max_delay_ms, retryAfterCapSeconds: d.retry_after_cap_s, timeoutMs: d.timeout_ms, deadlineMs: d.deadline_ms });
  });

  it.each((vectors.paging as any[]).map((v: any) => [v.name, v] as [string, any]))('paging: %s', async (_name, v: any) => {
    const fake = fakeFetch((_call, n) => (n === 1 ? json(200, v.page) : json(200, v.kind === 'fhir' ? { resourceType: 'Bundle', type: 'searchset' } : { [v.items_field]: [], next_cursor: null, next_offset: null })));
    const pont = new Pont({ ...local, fetch: fake.fetch });
    const list = v.kind === 'fhir' ? pont.fhir.search('Observation') : v.kind === 'cursor' ? pont.webhooks.deliveries() : pont.inventory.pharmacyStock();
    const items: any[] = [];
    for await (const item of list as AsyncIterable<any>) items.push(item);
    const got = items.slice(0, v.items.length).map((i) => (v.kind === 'fhir' ? `${i.resourceType}/${i.id}` : i.id));
    expect(got).toEqual(v.items);
    if (v.next === null) expect(fake.calls).toHaveLength(1);
    else {
      expect(fake.calls).toHaveLength(2);
      if (typeof v.next === 'string') expect(fake.calls[1]!.url).toBe(v.next);
      else for (const [k, value] of Object.entries(v.next)) expect(new URL(fake.calls[1]!.url).searchParams.get(k)).toBe(String(value));
    }
  });
});

describe('retries, options and hooks (a fake server)', () => {
  it('makes no network call at construction, and never shows its credentials', async () => {
    const fake = fakeFetch(() => json(200, { valid: true }));
    const pont = new Pont({ ...local, clientSecret: 'pcs_secret_value', fetch: fake.fetch });
    const agent = new BridgeAgent({ agentId: 'agt', agentKey: 'pak_secret_value', facilityId: 'fac', baseUrl: local.baseUrl, fetch: fake.fetch });
    expect(fake.calls).toHaveLength(0);
    expect(fake.tokens()).toBe(0);
    await pont.healthIds.verify('CM482930174629');
    for (const shown of [inspect(pont, { depth: 20, showHidden: true }), inspect(agent, { depth: 20, showHidden: true }), JSON.stringify(agent)]) {
      expect(shown).not.toContain('secret_value');
      expect(shown).not.toContain('tok-1');
    }
  });

  it('retries a creating call on 429 (Retry-After) and 503 with one Idempotency-Key, refreshes an expiring token, never retries a 422', async () => {
    const answers = [json(429, { status: 'error', error_code: 'RATE_LIMITED', message: 'slow down', retry_after: 2 }, { 'retry-after': '2' }), json(503, { status: 'error', error_code: 'X', message: 'x' })];
    const fake = fakeFetch(() => answers.shift() ?? json(201, { lab_result_id: 'x' }, { 'x-request-id': 'req-ok' }), 30);
    const { delays, sleep } = recordedSleep();
    const pont = new Pont({ ...local, fetch: fake.fetch, sleep, random: () => 0.5 });
    const pushed = await pont.records.pushLabResult({ health_id: 'CM482930174629', test_name: 'K', result_value: '4', flagged: false });
    expect(pushed).toEqual({ lab_result_id: 'x' });
    expect(responseOf(pushed)).toMatchObject({ status: 201, requestId: 'req-ok', attempt: 3 });
    expect(fake.calls).toHaveLength(3);
    expect(new Set(fake.calls.map((c) => c.headers.get('idempotency-key'))).size).toBe(1);
    expect(fake.calls[0]!.headers.get('idempotency-key')).toMatch(/^[0-9a-f-]{36}$/);
    expect(delays).toEqual([2000, 500]); // Retry-After exactly, then jitter 0.5 × 1000 (the second retry)
    // The token expired within 60 s: every attempt asked for a new one.
    expect(fake.calls[2]!.headers.get('authorization')).toBe('Bearer tok-3');
    answers.push(json(422, { status: 'error', error_code: 'VALIDATION_FAILED', message: 'bad' }));
    await expect(pont.records.pushLabResult({ health_id: 'CM482930174629', test_name: 'K', result_value: '4', flagged: false })).rejects.toBeInstanceOf(client.ValidationError);
    expect(fake.calls).toHaveLength(4);
  });

  it('does not retry a write without a key, nor wait a Retry-After beyond 60 s', async () => {
    const fake = fakeFetch(() => json(503, { status: 'error', error_code: 'SERVICE_UNAVAILABLE', message: 'busy' }));
    const pont = new Pont({ ...local, fetch: fake.fetch, sleep: recordedSleep().sleep });
    await expect(pont.fhir.create({ resourceType: 'Patient' })).rejects.toBeInstanceOf(client.ServerError);
    await expect(pont.webhooks.unsubscribe('sub_1')).rejects.toBeInstanceOf(client.ServerError);
    expect(fake.calls).toHaveLength(2);
    // With the caller's key, the same write is retried.
    await expect(pont.fhir.delete('Patient', 'p1', { idempotencyKey: 'job-1', maxRetries: 2 })).rejects.toBeInstanceOf(client.ServerError);
    expect(fake.calls).toHaveLength(5);
    const limited = fakeFetch(() => json(429, { status: 'error', error_code: 'RATE_LIMITED', message: 'later' }, { 'retry-after': '3600' }));
    const error = await new Pont({ ...local, fetch: limited.fetch, sleep: recordedSleep().sleep }).healthIds.verify('CM482930174629').catch((e) => e);
    expect(error).toBeInstanceOf(client.RateLimitError);
    expect(error.retryAfter).toBe(3600);
    expect(limited.calls).toHaveLength(1);
  });

  it('stops at the deadline: no wait that would pass it', async () => {
    let clock = 0;
    const fake = fakeFetch(() => json(503, { status: 'error', error_code: 'X', message: 'x' }, { 'retry-after': '5' }));
    const sleep = async (ms: number) => void (clock += ms);
    const pont = new Pont({ ...local, fetch: fake.fetch, sleep, now: () => clock, maxRetries: 10, deadline: 12_000 });
    await expect(pont.healthIds.verify('CM482930174629')).rejects.toBeInstanceOf(client.ServerError);
    expect(fake.calls).toHaveLength(3); // at 0, 5 s and 10 s; the next would be at 15 s
  });

  it('sends the per-call options and the User-Agent, calls the hooks, and masks credentials there', async () => {
    const fake = fakeFetch(() => json(200, { valid: true }, { 'x-request-id': 'req-1' }));
    const events: any[] = [];
    const pont = new Pont({ ...local, fetch: fake.fetch, headers: { 'x-app': 'ehr' }, hooks: { request: (e) => events.push(['request', e]), response: (e) => events.push(['response', e]) } });
    const answer = await pont.healthIds.verify('CM482930174629', { purposeOfUse: 'TREAT', emergencyReason: 'unconscious in the ED', headers: { 'x-trace': 't1' }, idempotencyKey: 'k-1' });
    const sent = fake.calls[0]!.headers;
    expect(sent.get('x-purpose-of-use')).toBe('TREAT');
    expect(sent.get('x-emergency-reason')).toBe('unconscious in the ED');
    expect(sent.get('x-trace')).toBe('t1');
    expect(sent.get('x-app')).toBe('ehr');
    expect(sent.get('idempotency-key')).toBe('k-1');
    expect(sent.get('user-agent')).toBe(`pont-typescript/${client.VERSION}`);
    expect(responseOf(answer)?.requestId).toBe('req-1');
    expect(JSON.stringify(answer)).toBe('{"valid":true}'); // lastResponse is not part of the data
    // The token request, then the call.
    expect(events.map(([kind, e]) => `${kind} ${new URL(e.url).pathname}`)).toEqual(['request /api/v1/connect/auth/token', 'response /api/v1/connect/auth/token', 'request /api/v1/connect/patients/verify/CM482930174629', 'response /api/v1/connect/patients/verify/CM482930174629']);
    expect(events[2][1].headers.authorization).toBe('***');
    expect(events[3][1].response.requestId).toBe('req-1');
    await expect(pont.healthIds.verify('CM482930174629', { emergencyReason: 'line\r\nX-Injected: 1' })).rejects.toBeInstanceOf(client.ValidationError);
    expect(fake.calls).toHaveLength(1);
  });

  it('is cancelled by its AbortSignal, during a backoff too', async () => {
    const fake = fakeFetch(() => json(503, { status: 'error', error_code: 'X', message: 'x' }, { 'retry-after': '30' }));
    const pont = new Pont({ ...local, fetch: fake.fetch });
    const controller = new AbortController();
    const call = pont.healthIds.verify('CM482930174629', { signal: controller.signal });
    while (fake.calls.length < 1) await new Promise((r) => setImmediate(r));
    controller.abort(new Error('user gave up'));
    await expect(call).rejects.toThrow('user gave up');
    expect(fake.calls).toHaveLength(1);
  });

  it('asks for its next tokens with the new secret once it rotated it', async () => {
    const secretsUsed: string[] = [];
    const fetchFake = (async (url: string, init: RequestInit) => {
      const body = JSON.parse(String(init.body ?? '{}'));
      // Tokens that expire within 60 s: every call asks for a new one.
      if (String(url).endsWith('/auth/token')) return secretsUsed.push(body.client_secret), json(200, { access_token: 't', expires_in: 30 });
      if (String(url).endsWith('/api/v1/connect/auth/clients/cli_x/rotate-secret')) return json(200, { client_id: 'cli_x', client_secret: 'pcs_new', previous_secret_expires_at: null, overlap: body.overlap_seconds });
      return json(200, { subscriptions: [] });
    }) as typeof fetch;
    const pont = new Pont({ ...local, clientSecret: 'pcs_old', fetch: fetchFake });
    expect(await pont.auth.rotateClientSecret(0)).toMatchObject({ client_secret: 'pcs_new', overlap: 0 });
    await pont.webhooks.list();
    expect(secretsUsed).toEqual(['pcs_old', 'pcs_new']);
  });

  it('refuses a missing argument before any request', () => {
    const fake = fakeFetch(() => json(200, {}));
    const pont = new Pont({ ...local, fetch: fake.fetch });
    expect(() => pont.patients.getSummary('')).toThrow(/healthId is required/);
    expect(() => pont.records.pushLabResult({ health_id: 'CM482930174629' } as any)).toThrow(/test_name is required/);
    expect(() => pont.fhir.search('not a type' as any)).toThrow(client.ValidationError);
    expect(() => new Pont({ clientId: '', clientSecret: 'x' })).toThrow(client.ValidationError);
    expect(() => new Pont({ ...local, baseUrl: 'ftp://pont.example' })).toThrow(/baseUrl must be an http\(s\) URL/);
    expect(() => new Pont({ ...local, baseUrl: 'not a url' })).toThrow(client.ValidationError);
    expect(fake.calls).toHaveLength(0);
  });

  it('bulk export: a kick-off not retried, the status, a file streamed line by line, cancel', async () => {
    const base = 'http://pont.invalid/api/fhir/R4';
    const ndjson = ['{"resourceType":"Patient","id":"a"}', '{"resourceType":"Patient","id":"é"}', '{"resourceType":"Patient","id":"c"}'].join('\n') + '\n';
    const bytes = new TextEncoder().encode(ndjson);
    let statusCalls = 0;
    const fake = fakeFetch((call, n) => {
      const path = new URL(call.url).pathname;
      if (path.endsWith('/$export') && n === 1) return json(503, { resourceType: 'OperationOutcome', issue: [] });
      if (path.endsWith('/$export')) return new Response(null, { status: 202, headers: { 'content-location': `${base}/$export-status/job%201` } });
      if (path.endsWith('/file/1'))
        // Three chunks that cut a line and a multi-byte character in two.
        return new Response(new ReadableStream({
            start(c) {
              for (const b of [bytes.slice(0, 10), bytes.slice(10, 69), bytes.slice(69)]) c.enqueue(b);
              c.close();
            },
          }), { status: 200 });
      if (call.method === 'DELETE') return json(202, { resourceType: 'OperationOutcome', issue: [{ severity: 'information', code: 'informational' }] });
      return ++statusCalls === 1
        ? new Response(null, { status: 202, headers: { 'x-progress': 'queued', 'retry-after': '2' } })
        : json(200, { transactionTime: 't', request: 'r', requiresAccessToken: true, output: [{ type: 'Patient', url: `${base}/$export-status/job%201/file/1`, count: 3 }], error: [] });
    });
    const pont = new Pont({ ...local, fetch: fake.fetch, sleep: recordedSleep().sleep });
    await expect(pont.bulk.export({ _type: 'Patient' })).rejects.toBeInstanceOf(client.ServerError);
    expect(fake.calls).toHaveLength(1); // it starts a job: not repeated without a key
    const started = await pont.bulk.export({ level: 'group', groupId: 'g1', _type: 'Patient' });
    expect(started.id).toBe('job 1');
    expect(fake.calls[1]!.url).toBe(`${base}/Group/g1/$export?_type=Patient`);
    expect(fake.calls[1]!.headers.get('prefer')).toBe('respond-async');
    expect(await pont.bulk.status(started.id)).toMatchObject({ status: 'in-progress', progress: 'queued', retryAfter: 2 });
    const done = await pont.bulk.status(started.id);
    if (done.status !== 'completed') throw new Error('not completed');
    const ids: string[] = [];
    for await (const patient of pont.bulk.file(done.manifest.output[0]!.url)) ids.push(patient.id!);
    expect(ids).toEqual(['a', 'é', 'c']);
    expect(fake.calls.at(-1)!.headers.get('authorization')).toMatch(/^Bearer /);
    await pont.bulk.cancel(started.id);
    expect(fake.calls.at(-1)!.method).toBe('DELETE');
  });

  it('FHIR $validate (repeatable) and conditional patch send what the server expects', async () => {
    const fake = fakeFetch((_c, n) => (n === 1 ? json(503, {}) : json(200, { resourceType: 'OperationOutcome', issue: [] })));
    const pont = new Pont({ ...local, fetch: fake.fetch, sleep: recordedSleep().sleep });
    await pont.fhir.validate({ resourceType: 'Patient', id: 'p1' }, { id: 'p1', mode: 'delete' });
    expect(fake.calls.map((c) => c.url)).toEqual(['http://pont.invalid/api/fhir/R4/Patient/p1/$validate?mode=delete', 'http://pont.invalid/api/fhir/R4/Patient/p1/$validate?mode=delete']);
    await pont.fhir.conditionalPatch('Patient', { identifier: 'urn:x|1' }, [{ op: 'replace', path: '/active', value: false }]);
    const patch = fake.calls.at(-1)!;
    expect([patch.method, patch.url, patch.headers.get('content-type'), patch.body]).toEqual(['PATCH', 'http://pont.invalid/api/fhir/R4/Patient?identifier=urn%3Ax%7C1', 'application/json-patch+json', '[{"op":"replace","path":"/active","value":false}]']);
  });

  it('discovery and probes fetch no token; a patient app sends its pat_ token, retries reads, sends writes once', async () => {
    const fake = fakeFetch((call) => (new URL(call.url).pathname === '/readyz' ? json(503, { status: 'unavailable', checks: { database: 'failing' } }) : json(200, { status: 'ok', keys: [] })));
    const pont = new Pont({ ...local, fetch: fake.fetch, sleep: recordedSleep().sleep });
    expect((await pont.system.healthz()).status).toBe('ok');
    await pont.discovery.jwks();
    await pont.discovery.openapi();
    const notReady = await pont.system.readyz({ maxRetries: 0 }).catch((e) => e);
    expect(notReady).toBeInstanceOf(client.ServerError);
    expect(notReady.body).toMatchObject({ status: 'unavailable' });
    expect(fake.tokens()).toBe(0);
    expect(fake.calls.map((c) => [new URL(c.url).pathname, c.headers.get('authorization')])).toEqual([['/healthz', null], ['/.well-known/jwks.json', null], ['/api/openapi.json', null], ['/readyz', null]]);

    const answers = [json(503, {}), json(200, { items: [] }), json(503, {}), json(401, { status: 'error', error_code: 'UNAUTHENTICATED', message: 'expired' })];
    const patient = fakeFetch(() => answers.shift() ?? json(200, {}));
    const app = new PatientApp({ baseUrl: local.baseUrl, token: 'pat_secret_value', fetch: patient.fetch, sleep: recordedSleep().sleep });
    expect(inspect(app, { depth: 20, showHidden: true })).not.toContain('secret_value');
    expect((await app.consents()).items).toEqual([]); // a read: retried
    await expect(app.approveRequest('cr 1')).rejects.toBeInstanceOf(client.ServerError); // a write without a key: once
    await expect(app.accessLog()).rejects.toBeInstanceOf(client.AuthenticationError); // a pat_ token is not renewed: once
    expect(patient.calls.map((c) => [c.method, c.url, c.headers.get('authorization'), c.headers.get('idempotency-key')])).toEqual([
      ['GET', 'http://pont.invalid/api/v1/mobile/consents', 'Bearer pat_secret_value', null],
      ['GET', 'http://pont.invalid/api/v1/mobile/consents', 'Bearer pat_secret_value', null],
      ['POST', 'http://pont.invalid/api/v1/mobile/consent-requests/cr%201/approve', 'Bearer pat_secret_value', null],
      ['GET', 'http://pont.invalid/api/v1/mobile/access-log', 'Bearer pat_secret_value', null],
    ]);
    expect(patient.tokens()).toBe(0);
    await expect(new PatientApp({ baseUrl: local.baseUrl, fetch: patient.fetch }).consents()).rejects.toBeInstanceOf(client.ValidationError); // no token yet
    await expect(app.signIn('CM482930174629', '')).rejects.toBeInstanceOf(client.ValidationError);
    expect(patient.calls).toHaveLength(4);
  });

  it('names a method for every operation surface.json gives TypeScript', () => {
    const pont = new Pont(local) as any;
    const missing: string[] = [];
    for (const [operationId, entry] of Object.entries<any>(surface.operations)) {
      if (entry.excluded) continue;
      const [owner, method] = entry.typescript.split('.');
      const target = /^[A-Z]/.test(owner) ? (client as any)[owner]?.prototype : pont[owner];
      if (typeof target?.[method] !== 'function') missing.push(`${operationId}: ${entry.typescript}`);
    }
    expect(missing).toEqual([]);
  });

  it('has what surface.json `library` gives TypeScript: the eager Pont.create (static) and the paging of a list', () => {
    const { create, paging } = surface.library;
    const [createOwner, createMethod] = create.typescript.split('.');
    expect(typeof (client as any)[createOwner][createMethod]).toBe('function');
    const [pagingOwner, pagingMethod] = paging.typescript.split('.');
    expect(typeof (client as any)[pagingOwner].prototype[pagingMethod]).toBe('function');
  });
});

/** `hid` with one body digit changed: MOD 97-10 detects every single substitution (changing the check digits does not: 00 ≡ 97). */
const mistyped = (hid: string) => hid.slice(0, 2) + String((Number(hid[2]) + 1) % 10) + hid.slice(3);

describe('against a real Pont, through the fault proxy', () => {
  let server: ChildProcess;
  let info: { base_url: string; fault_url: string; receiver_url: string; unregistered_health_id: string; foreign_health_id: string; clinic: { organization_id: string; client_id: string; client_secret: string }; paging: any; demo: any };
  let full: { client_id: string; client_secret: string };
  const proxyStats = async (id: string) => (await (await fetch(`${info.fault_url}/__conformance/requests?id=${id}`)).json()) as { received: number; forwarded: number; idempotency_keys: Array<string | null> };
  let faults = 0;
  /** A per-call option that makes the proxy inject `mode` on the call's first attempt, and the id to ask about it. */
  const fault = (mode: string) => {
    const id = `ts-${mode}-${++faults}-${Date.now()}`;
    return { id, headers: { 'X-Conformance-Fault': `${mode}; id=${id}` } };
  };
  beforeAll(async () => {
    server = spawn(process.execPath, [`${conformance}server.mjs`], { stdio: ['pipe', 'pipe', 'inherit'] });
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: server.stdout! }).once('line', resolve);
      server.once('exit', (code) => reject(new Error(`conformance server exited ${code}`)));
    });
    info = JSON.parse(line);
    [full] = info.demo.clients;
  }, 300_000); // the server seeds the demo and 1,000 Observations: slow on a busy machine
  afterAll(() => {
    server?.stdin?.end();
  });
  const viaProxy = (options: Partial<client.PontOptions> = {}) => new Pont({ clientId: full.client_id, clientSecret: full.client_secret, baseUrl: info.fault_url, ...options });

  it('a creating call whose answer is lost is retried with its key: one lab result, the first answer replayed', async () => {
    const pont = viaProxy({ sleep: recordedSleep().sleep });
    const hid = info.demo.patients[1].health_id;
    const testName = `Lost answer ${Date.now()}`;
    const f = fault('lose-answer');
    const lab = await pont.records.pushLabResult({ health_id: hid, test_name: testName, result_value: '5.1', unit: 'mmol/L', flagged: false }, { headers: f.headers });
    expect(responseOf(lab)).toMatchObject({ replayed: true, attempt: 2 });
    const stats = await proxyStats(f.id);
    expect(stats).toMatchObject({ received: 2, forwarded: 2 });
    expect(stats.idempotency_keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(stats.idempotency_keys[1]).toBe(stats.idempotency_keys[0]);
    const records = await pont.records.get(hid, { type: 'lab_results', limit: 100 }).toArray();
    expect(records.filter((r: any) => r.test_name === testName)).toHaveLength(1);
  });

  it('a DELETE whose answer is lost: without a key, one attempt and a NetworkError (it took effect); with a key, retried to success', async () => {
    const pont = viaProxy({ sleep: recordedSleep().sleep });
    const sub = await pont.webhooks.subscribe(info.receiver_url, ['patient.created'], 'lost delete');
    const f = fault('lose-answer');
    const error = await pont.webhooks.unsubscribe(sub.id, { headers: f.headers }).catch((e) => e);
    expect(error).toBeInstanceOf(client.NetworkError);
    expect(error).not.toBeInstanceOf(client.ServerError);
    expect(error.requestId).toBeNull();
    expect(await proxyStats(f.id)).toMatchObject({ received: 1, forwarded: 1, idempotency_keys: [null] });
    expect((await pont.webhooks.list().toArray()).map((s) => s.id)).not.toContain(sub.id);

    // FHIR delete is idempotent on the server: with the caller's key the library retries it.
    const patient = await pont.fhir.create({ resourceType: 'Patient', name: [{ family: 'Deleted', given: ['Lost'] }], gender: 'male', birthDate: '1980-01-01' });
    const g = fault('lose-answer');
    await pont.fhir.delete('Patient', patient.id!, { headers: g.headers, idempotencyKey: `delete-${patient.id}` });
    expect(await proxyStats(g.id)).toMatchObject({ received: 2, forwarded: 2, idempotency_keys: [`delete-${patient.id}`, `delete-${patient.id}`] });
    await expect(pont.fhir.read('Patient', patient.id!)).rejects.toBeInstanceOf(client.PontError);
  });

  it('429 with Retry-After: waits exactly 1 s, then succeeds; a 503 on a POST without a key is not retried', async () => {
    const { delays, sleep } = recordedSleep();
    const pont = viaProxy({ sleep });
    const f = fault('status-429');
    expect((await pont.healthIds.verify(info.demo.patients[0].health_id, { headers: f.headers })).valid).toBe(true);
    expect(delays).toEqual([1000]);
    expect(await proxyStats(f.id)).toMatchObject({ received: 2, forwarded: 1 });
    const g = fault('status-503');
    await expect(pont.fhir.create({ resourceType: 'Patient', gender: 'female' }, { headers: g.headers })).rejects.toBeInstanceOf(client.ServerError);
    expect(await proxyStats(g.id)).toMatchObject({ received: 1, forwarded: 0 });
  });

  it('a reset connection is a NetworkError, retried on a GET; a slow answer is a TimeoutError', async () => {
    const pont = viaProxy({ sleep: recordedSleep().sleep });
    const f = fault('reset');
    expect((await pont.consents.status(info.demo.patients[0].health_id, { headers: f.headers })).status).toBe('active');
    expect(await proxyStats(f.id)).toMatchObject({ received: 2, forwarded: 1 });
    const g = fault('reset');
    await expect(pont.consents.status(info.demo.patients[0].health_id, { headers: g.headers, maxRetries: 0 })).rejects.toBeInstanceOf(client.NetworkError);
    const h = fault('slow');
    const error = await pont.fhir.create({ resourceType: 'Patient', gender: 'other' }, { headers: h.headers, timeout: 1500 }).catch((e) => e);
    expect(error).toBeInstanceOf(client.TimeoutError);
    expect(error).toBeInstanceOf(client.NetworkError);
    expect((await proxyStats(h.id)).received).toBe(1);
    const i = fault('slow');
    expect((await pont.consents.status(info.demo.patients[0].health_id, { headers: i.headers, timeout: 1500 })).status).toBe('active');
    expect((await proxyStats(i.id)).received).toBe(2);
  });

  it('pages over 1,000 resources one page at a time, the heap bounded (a control that keeps them all is not)', () => {
    const run = (keep: boolean) =>
      JSON.parse(
        execFileSync(
          process.execPath,
          ['--expose-gc', fileURLToPath(new URL('./page-memory.mjs', import.meta.url)), JSON.stringify({ baseUrl: info.fault_url, clientId: full.client_id, clientSecret: full.client_secret, type: info.paging.resource_type, params: { ...info.paging.params, _count: 50 }, total: info.paging.total, warmupPages: 3, keep })],
          { encoding: 'utf8' },
        ),
      );
    const streamed = run(false);
    const kept = run(true);
    console.log(`paging ${streamed.count} resources in ${streamed.pages} pages: heap growth ${(streamed.peakGrowthBytes / 1024).toFixed(0)} KiB (${(kept.peakGrowthBytes / 1024).toFixed(0)} KiB when every resource is kept); at most ${streamed.maxAlive} resources reachable (${kept.maxAlive} kept)`);
    expect(streamed).toMatchObject({ count: info.paging.total, unique: info.paging.total, pages: info.paging.total / 50 });
    // Reachable resources (WeakRefs after a full GC): at most the current page and the one before, not the 1,000.
    expect(streamed.maxAlive).toBeLessThanOrEqual(2 * 50);
    expect(kept.maxAlive).toBe(info.paging.total);
    expect(streamed.peakGrowthBytes).toBeLessThan(2 * 1024 * 1024);
  }, 120_000);

  it('break-glass: the purpose and the emergency reason reach the server, which audits the reason', async () => {
    const pont = viaProxy();
    await expect(pont.patients.getSummary(info.foreign_health_id)).rejects.toBeInstanceOf(client.ConsentRequiredError);
    const reason = `Unconscious patient in the ED ${Date.now()}`;
    const summary = await pont.patients.getSummary(info.foreign_health_id, { emergencyReason: reason, purposeOfUse: 'ETREAT' });
    const requestId = responseOf(summary)!.requestId;
    expect(requestId).toBeTruthy();
    let audited: any;
    for await (const event of pont.fhir.search('AuditEvent', { _count: 100 })) {
      if (event.purposeOfEvent?.some((p) => p.text === reason)) {
        audited = event;
        break;
      }
    }
    expect(audited?.purposeOfEvent?.[0]?.coding?.[0]?.code).toBe('BTG');
  });

  it('a Bridge agent: heartbeat, and a sync whose answer is lost counted once', async () => {
    const a = info.demo.bridge_agent;
    const agent = new BridgeAgent({ agentId: a.agent_id, agentKey: a.agent_key, facilityId: a.facility_id, baseUrl: info.fault_url, sleep: recordedSleep().sleep });
    expect((await agent.heartbeat('conformance-1.0')).status).toBe('ok');
    const batch = { batch_id: `ts-batch-${Date.now()}`, resources: [{ resourceType: 'Practitioner', id: `dr-${Date.now()}`, name: [{ family: 'Sync' }] }] };
    const f = fault('lose-answer');
    const synced = await agent.sync(batch, { headers: f.headers });
    expect(synced.counts).toMatchObject({ failed: 0 });
    expect(synced.counts.created + synced.counts.updated + synced.counts.unchanged).toBe(1);
    expect(await proxyStats(f.id)).toMatchObject({ received: 2, forwarded: 2, idempotency_keys: [batch.batch_id, batch.batch_id] });
    await expect(new BridgeAgent({ ...a, agentId: a.agent_id, agentKey: 'pak_wrong', facilityId: a.facility_id, baseUrl: info.base_url }).heartbeat('x')).rejects.toBeInstanceOf(client.AuthenticationError);
  });

  it('discovery documents and probes: public, no token fetched', async () => {
    const sent: Array<string | undefined> = [];
    const pont = new Pont({ clientId: 'cli_none', clientSecret: 'pcs_none', baseUrl: info.base_url, hooks: { request: (e) => void sent.push(e.headers.authorization) } });
    const smart = await pont.discovery.smartConfiguration();
    expect(smart.token_endpoint).toMatch(/\/api\/v1\/connect\/auth\/token$/);
    expect((await pont.discovery.fhirSmartConfiguration()).token_endpoint).toBe(smart.token_endpoint);
    const metadata = await pont.discovery.oauthServerMetadata();
    expect(metadata.jwks_uri).toMatch(/\/\.well-known\/jwks\.json$/);
    expect((await pont.discovery.jwks()).keys.length).toBeGreaterThan(0);
    expect(Object.keys((await pont.discovery.openapi()).paths as object)).toContain('/api/v1/mobile/consents');
    expect((await pont.system.healthz()).status).toBe('ok');
    expect((await pont.system.readyz()).checks).toMatchObject({ database: 'ok' });
    expect(sent).toEqual(Array(7).fill(undefined)); // bogus credentials, never used
  });

  it('Pont.create checks the credentials with one token request; new Pont makes none', async () => {
    const sent: string[] = [];
    const hooks = { request: (e: client.RequestEvent) => void sent.push(`${e.method} ${new URL(e.url).pathname}`) };
    const token = 'POST /api/v1/connect/auth/token';

    // The constructor is lazy, even with a wrong secret: no request.
    const lazy = new Pont({ clientId: full.client_id, clientSecret: 'pcs_wrong', baseUrl: info.base_url, hooks });
    expect(lazy).toBeInstanceOf(Pont);
    expect(sent).toEqual([]);

    // Eager, right secret: one token request before create answers; the next call reuses that token.
    const pont = await Pont.create({ clientId: full.client_id, clientSecret: full.client_secret, baseUrl: info.base_url, hooks });
    expect(sent).toEqual([token]);
    expect((await pont.healthIds.verify(info.demo.patients[0].health_id)).valid).toBe(true);
    expect(sent).toEqual([token, `GET /api/v1/connect/patients/verify/${info.demo.patients[0].health_id}`]);

    // Eager, wrong secret or unknown client: AuthenticationError from create itself, after one token request (a 401 is not retried).
    for (const [clientId, clientSecret] of [[full.client_id, 'pcs_wrong'], ['cli_unknown', full.client_secret]]) {
      sent.length = 0;
      const error = await Pont.create({ clientId, clientSecret, baseUrl: info.base_url, hooks }).catch((e) => e);
      expect(error).toBeInstanceOf(client.AuthenticationError);
      expect(error.status).toBe(401);
      expect(sent).toEqual([token]);
    }
  });

  it("the patient's own app: paired with a code, answers and revokes consents, reads its access log, signs out", async () => {
    const pont = new Pont({ clientId: full.client_id, clientSecret: full.client_secret, baseUrl: info.base_url });
    const clinic = new Pont({ clientId: info.clinic.client_id, clientSecret: info.clinic.client_secret, baseUrl: info.base_url });
    const { health_id: hid } = await pont.healthIds.resolve({ first_name: 'Kofi', last_name: `Mobile${Date.now()}`, date_of_birth: '1988-04-05', sex: 'male' });
    const { code } = await pont.patients.issuePairingCode(hid!); // the demo organisation registered the patient: it may pair
    await expect(new PatientApp({ baseUrl: info.base_url }).signIn(hid!, 'WRONG-CODE')).rejects.toBeInstanceOf(client.AuthenticationError);
    const app = new PatientApp({ baseUrl: info.fault_url, sleep: recordedSleep().sleep });
    expect(app.signedIn).toBe(false);
    const token = await app.signIn(hid!, code);
    expect(token.access_token).toMatch(/^pat_/);
    expect(app.signedIn).toBe(true);

    // The clinic asks; so does the demo organisation, which paired the app: the app never approves that one's requests.
    const asked = await clinic.consents.request({ health_id: hid!, purpose: 'follow-up', requested_scopes: ['labs:read'] });
    const own = await pont.consents.request({ health_id: hid!, purpose: 'second opinion', requested_scopes: ['labs:read'] });
    const mine = await app.consents();
    expect(mine.items.map((c) => [c.consent_id, c.status])).toEqual(expect.arrayContaining([[asked.consent_request_id, 'pending'], [own.consent_request_id, 'pending']]));
    const approved = await app.approveRequest(asked.consent_request_id);
    expect([approved.organization_id, approved.status]).toEqual([info.clinic.organization_id, 'active']);
    expect((await clinic.consents.status(hid!)).status).toBe('active');
    await expect(app.approveRequest(own.consent_request_id)).rejects.toBeInstanceOf(client.AuthorizationError);
    expect((await app.denyRequest(own.consent_request_id)).status).toBe('denied');
    await expect(app.denyRequest(own.consent_request_id)).rejects.toBeInstanceOf(client.ConflictError);

    // A revocation whose answer is lost: sent once (the server does not deduplicate mobile writes), and it took effect.
    const f = fault('lose-answer');
    expect(await app.revokeConsent(approved.consent_id!, { headers: f.headers }).catch((e) => e)).toBeInstanceOf(client.NetworkError);
    expect(await proxyStats(f.id)).toMatchObject({ received: 1, forwarded: 1, idempotency_keys: [null] });
    expect((await app.consents().toArray()).find((c) => c.consent_id === approved.consent_id)?.status).toBe('revoked');
    await expect(clinic.consents.status(hid!)).resolves.toMatchObject({ status: 'revoked' });

    // The access log: a reset connection on a read is retried; iterated in pages of two.
    const g = fault('reset');
    expect((await app.accessLog({ limit: 2 }, { headers: g.headers })).items).toHaveLength(2);
    expect((await proxyStats(g.id)).received).toBe(2);
    const log = await app.accessLog({ limit: 2 }).toArray();
    expect(log.length).toBeGreaterThan(2);
    expect(log.map((e) => e.operation)).toEqual(expect.arrayContaining(['issuePairingCode', 'approveConsentRequest']));

    await app.signOut();
    expect(app.signedIn).toBe(false);
    await expect(new PatientApp({ baseUrl: info.base_url, token: token.access_token }).consents()).rejects.toBeInstanceOf(client.AuthenticationError);
  });

  it('runs the scenario of the conformance README', async () => {
    await expect(Pont.create({ clientId: full.client_id, clientSecret: 'pcs_wrong', baseUrl: info.base_url })).rejects.toBeInstanceOf(client.AuthenticationError);
    const pont = new Pont({ clientId: full.client_id, clientSecret: full.client_secret, baseUrl: info.base_url });
    const hid = info.demo.patients[0].health_id;

    expect((await pont.healthIds.resolve({ health_id: hid })).status).toBe('found');
    const created = await pont.healthIds.resolve({ first_name: 'Ama', last_name: 'Conformance', date_of_birth: '1991-02-03', sex: 'female' });
    expect(created.status).toBe('created');
    expect((await pont.healthIds.verify(hid)).valid).toBe(true);

    expect((await pont.consents.status(hid)).status).toBe('active');
    const newHid = created.health_id!;
    expect((await pont.consents.grant(newHid, { consent_type: 'full_record', expires_at: new Date(Date.now() + 86_400_000).toISOString() })).status).toBe('active');
    expect((await pont.consents.revoke(newHid)).status).toBe('revoked');
    expect((await pont.consents.request({ health_id: newHid, purpose: 'follow-up', requested_scopes: ['labs:read'] })).status).toBe('pending');
    expect((await pont.patients.issuePairingCode(newHid)).code).toBeTruthy();

    const summary = await pont.patients.getSummary(hid);
    expect(summary.patient.first_name).toBe(info.demo.patients[0].first_name);
    expect((await pont.patients.search(hid)).health_id).toBe(hid);
    expect(Array.isArray((await pont.records.get(hid, { type: 'diagnoses' })).records.diagnoses)).toBe(true);
    expect((await pont.auth.introspectCurrent()).active).toBe(true);
    expect((await pont.auth.introspect(await pont.auth.token())).active).toBe(true);

    const sub = await pont.webhooks.subscribe(info.receiver_url, ['lab_result.released'], 'conformance');
    expect(sub.webhook_secret).toMatch(/^whsec_/);
    const lab = await pont.records.pushLabResult({ health_id: hid, test_name: 'Hemoglobin', result_value: '6.1', unit: 'g/dL', flagged: true, flag_level: 'critical_low' });
    expect(lab.flag).toBe('LL');
    const enc = await pont.records.pushEncounter({ health_id: hid, encounter_type: 'cdss_alert', alert_type: 'drug_interaction', severity: 'high', clinical_note: 'check INR' });
    expect(enc.detected_issue_id).toBeTruthy();

    for (const bundle of [
      await pont.fhir.medicationRequests(hid, { status: 'active' }),
      await pont.fhir.allergyIntolerances(hid),
      await pont.fhir.diagnosticReports(hid),
      await pont.fhir.conditions(hid, { 'clinical-status': 'active' }),
      await pont.fhir.patientEverything(hid, { _count: 20 }),
      await pont.fhir.everything(info.demo.patients[0].patient_id, { _count: 20 }),
    ])
      expect(bundle.resourceType).toBe('Bundle');
    const patientRef = `Patient/${info.demo.patients[0].patient_id}`;
    const firstPage = await pont.fhir.search('Observation', { _count: 10, patient: patientRef });
    expect(firstPage.entry).toHaveLength(10); // await: one page
    const every = await pont.fhir.search('Observation', { _count: 10, patient: patientRef }).toArray();
    expect(every.length).toBeGreaterThan(10); // iterated: every page
    expect(every.every((o) => o.resourceType === 'Observation')).toBe(true);
    expect((await pont.fhir.searchPost('Observation', { _count: 10, patient: patientRef }).toArray()).length).toBe(every.length);
    expect((await pont.fhir.searchCompartment(info.demo.patients[0].patient_id, 'Observation', { _count: 5 })).resourceType).toBe('Bundle');
    expect((await pont.fhir.read('Patient', info.demo.patients[0].patient_id)).resourceType).toBe('Patient');
    expect((await pont.fhir.capabilities()).resourceType).toBe('CapabilityStatement');

    // FHIR writes: create, update (If-Match), conditional update, history, vread, transaction, delete.
    const practitioner = await pont.fhir.create({ resourceType: 'Practitioner', name: [{ family: 'Writes', given: ['Ada'] }] });
    const v1 = practitioner.meta!.versionId!;
    const updated = await pont.fhir.update({ ...practitioner, name: [{ family: 'Writes', given: ['Ada', 'B.'] }] }, { ifMatch: v1 });
    expect(updated.meta!.versionId).not.toBe(v1);
    await expect(pont.fhir.update({ ...practitioner, active: true }, { ifMatch: v1 })).rejects.toBeInstanceOf(client.PreconditionFailedError);
    expect((await pont.fhir.vread('Practitioner', practitioner.id!, v1)).name![0]!.given).toEqual(['Ada']);
    expect(await pont.fhir.history('Practitioner', practitioner.id!).toArray()).toHaveLength(2);
    expect((await pont.fhir.history('Practitioner', undefined, { _count: 1 })).resourceType).toBe('Bundle');
    const identifier = `urn:conformance|${Date.now()}`;
    const upserted = await pont.fhir.conditionalUpdate({ resourceType: 'Practitioner', identifier: [{ system: 'urn:conformance', value: identifier.split('|')[1] }], name: [{ family: 'Upsert' }] }, { identifier });
    expect(upserted.id).toBeTruthy();
    const tx = await pont.fhir.transaction({ resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Practitioner', name: [{ family: 'InTx' }] }, request: { method: 'POST', url: 'Practitioner' } }] });
    expect(tx.type).toBe('transaction-response');
    await pont.fhir.conditionalDelete('Practitioner', { identifier });
    await expect(pont.fhir.read('Practitioner', upserted.id!)).rejects.toBeInstanceOf(client.PontError);
    await pont.fhir.delete('Practitioner', practitioner.id!);
    await expect(pont.fhir.read('Practitioner', practitioner.id!)).rejects.toBeInstanceOf(client.PontError);

    // The delivery Pont made, verified by this library.
    const deliveryOf = async (labResultId: string) => {
      let delivery: { raw_body: string; signature: string } | undefined;
      for (let i = 0; i < 100 && !delivery; i++) {
        delivery = ((await (await fetch(info.receiver_url)).json()) as any[]).find((d) => JSON.parse(d.raw_body).data.lab_result_id === labResultId);
        if (!delivery) await new Promise((r) => setTimeout(r, 100));
      }
      return delivery!;
    };
    const delivery = await deliveryOf(lab.lab_result_id);
    expect(pont.webhooks.verifySignature(delivery!.raw_body, delivery!.signature, sub.webhook_secret)).toBe(true);
    const event = pont.webhooks.parseEvent(delivery!.raw_body, delivery!.signature, sub.webhook_secret);
    expect(event.data).toMatchObject({ health_id: hid, lab_result_id: lab.lab_result_id, flagged: true });
    expect((await pont.webhooks.list()).subscriptions.map((s) => s.id)).toContain(sub.id);
    expect((await pont.webhooks.replay(event.id)).event_id).toBe(event.id);
    expect((await pont.webhooks.eventDeliveries(event.id)).deliveries.length).toBeGreaterThan(0);
    // A rotation with overlap: the next delivery is signed with both secrets, and either verifies it.
    const rotated = await pont.webhooks.rotateSecret(sub.id, 3600);
    expect(rotated.webhook_secret).toMatch(/^whsec_/);
    expect(rotated.previous_secret_expires_at).toBeTruthy();
    const lab2 = await pont.records.pushLabResult({ health_id: hid, test_name: 'Potassium', result_value: '6.9', unit: 'mmol/L', flagged: true, flag_level: 'critical_high' });
    const during = await deliveryOf(lab2.lab_result_id);
    expect(during.signature.match(/v1=/g)).toHaveLength(2);
    for (const secret of [rotated.webhook_secret, sub.webhook_secret]) expect(pont.webhooks.verifySignature(during.raw_body, during.signature, secret)).toBe(true);
    const deliveries = await pont.webhooks.deliveries({ subscription_id: sub.id, limit: 1 }).toArray(); // pages of one
    expect(deliveries.length).toBeGreaterThanOrEqual(2);
    expect(new Set(deliveries.map((d) => d.id)).size).toBe(deliveries.length);
    await pont.webhooks.unsubscribe(sub.id);

    expect((await pont.inventory.bloodInventory({ facility_id: 'fac-demo' })).items.length).toBeGreaterThan(0);
    expect((await pont.inventory.pharmacyStock({ facility_id: 'fac-demo', below_reorder_level: true })).items.map((i) => i.medication.code)).toEqual(['198440']);
    expect(await pont.inventory.pharmacyStock({ facility_id: 'fac-demo', limit: 1 }).toArray()).toHaveLength(3);
    expect((await pont.payments.reconciliation(info.demo.seeded.payments_date)).payments.length).toBe(5);

    await expect(pont.records.get(info.unregistered_health_id)).rejects.toBeInstanceOf(client.NotFoundError);
    await expect(pont.healthIds.verify(mistyped(hid))).rejects.toBeInstanceOf(client.ValidationError);
    await expect(pont.records.pushLabResult({ health_id: hid, test_name: 'K', result_value: '4', flagged: true, flag_level: 'normal' })).rejects.toBeInstanceOf(client.ValidationError);
    await expect(pont.patients.getSummary(info.foreign_health_id)).rejects.toBeInstanceOf(client.ConsentRequiredError);

    // The client's own secret, rotated with an overlap: both secrets get tokens until it ends.
    const newSecret = await pont.auth.rotateClientSecret(3600);
    expect(newSecret.client_secret).toMatch(/^pcs_/);
    for (const secret of [newSecret.client_secret, full.client_secret]) await Pont.create({ clientId: full.client_id, clientSecret: secret, baseUrl: info.base_url });
  }, 120_000);

  // Last: the reset replaces the clients the demo seeded, and keeps the one made beside it (the every-scope integrator
  // the tests above use, as a person would make it with the CLI).
  it('demo reset (the server runs in development: open), then the fresh demo with its new credentials', async () => {
    const pont = new Pont({ clientId: full.client_id, clientSecret: full.client_secret, baseUrl: info.base_url });
    const seeded = info.demo.clients[1]!;
    await pont.auth.introspectCurrent();
    const demo = await pont.demo.reset();
    expect(responseOf(demo)!.status).toBe(201);
    expect(demo.replaced.clients).toBe(2);
    expect(demo.patients).toHaveLength(5);
    const fresh = new Pont({ clientId: demo.clients[0]!.client_id, clientSecret: demo.clients[0]!.client_secret, baseUrl: info.base_url });
    expect((await fresh.healthIds.verify(demo.patients[0]!.health_id)).valid).toBe(true);
    await pont.auth.introspectCurrent(); // not the demo's: kept
    await expect(Pont.create({ clientId: seeded.client_id, clientSecret: seeded.client_secret, baseUrl: info.base_url })).rejects.toBeInstanceOf(client.AuthenticationError);
  }, 120_000);
});
