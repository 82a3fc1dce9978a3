/**
 * Logs for operators (issue 28, item 3): pino JSON lines, one per request from a child logger that carries the
 * request id, client, organisation, route template, status and duration; secrets and Health IDs never written,
 * whatever the requests carry; the same shape from a worker thread as from the main thread.
 */
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger, REDACTED, REDACTED_CONTAINERS, REDACTED_FIELDS, type LogDestination } from '../src/log';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

const CONNECT = '/api/v1/connect';

/** Captures the lines a logger writes, by stream. */
function capture() {
  const written = { out: '', err: '' };
  const parse = (text: string): Array<Record<string, unknown>> => text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const destination: LogDestination = { out: { write: (line: string) => (written.out += line) }, err: { write: (line: string) => (written.err += line) } };
  return { ...destination, written, text: () => written.out + written.err, lines: () => parse(written.out + written.err), parse };
}

describe('redaction (unit)', () => {
  it('hides every listed field at the top level and in each container (headers, body, query…), and bound to a child', () => {
    const sink = capture();
    const log = createLogger('debug', sink);
    REDACTED_FIELDS.forEach((field, i) => {
      const secret = `s3cret-${i}-value`;
      log.info('top', { [field]: secret });
      for (const container of REDACTED_CONTAINERS) log.info('nested', { [container]: { [field]: secret, kept: 'yes' } });
      log.child({ [field]: secret }).warn('bound to a child');
    });
    expect(sink.text()).not.toMatch(/s3cret-/);
    expect(sink.text()).toContain(REDACTED);
    // Everything else is kept.
    log.info('kept', { client_id: 'c-1', route: '/x/:id', status: 200 });
    expect(sink.parse(sink.written.out).at(-1)).toMatchObject({ msg: 'kept', client_id: 'c-1', route: '/x/:id', status: 200 });
  });

  it('scrubs anything shaped like a Health ID from text fields (error messages quote values)', () => {
    const sink = capture();
    createLogger('debug', sink).error('unhandled error', { error: 'Error: duplicate key (CM482930174629) at x', ok: 'AB12 not one' });
    expect(sink.lines()[0]).toMatchObject({ error: `Error: duplicate key (${REDACTED}) at x`, ok: 'AB12 not one' });
    // A child's bindings too (a caller may send a Health ID as its X-Request-ID).
    createLogger('debug', sink).child({ request_id: 'CM482930174629' }).info('request');
    expect(sink.parse(sink.written.out)[0]).toMatchObject({ request_id: REDACTED });
  });

  it('writes warn and error on stderr only, the rest on stdout, with the level as a word and an ISO time', () => {
    const sink = capture();
    const log = createLogger('debug', sink);
    log.debug('d');
    log.info('i');
    log.warn('w');
    log.error('e');
    expect(sink.parse(sink.written.out).map((l) => l.level)).toEqual(['debug', 'info']);
    expect(sink.parse(sink.written.err).map((l) => l.level)).toEqual(['warn', 'error']);
    const lines = sink.lines();
    for (const line of lines) expect(Object.keys(line)).toEqual(['level', 'time', 'pid', 'hostname', 'msg']);
    expect(new Date(lines[0]!.time as string).toISOString()).toBe(lines[0]!.time);
  });
});

describe('a worker thread', () => {
  it('writes the same shape as the main thread, with its thread id', async () => {
    const worker = new Worker(new URL('./log-thread.mjs', import.meta.url), { stdout: true });
    let text = '';
    worker.stdout.on('data', (c) => (text += c));
    await new Promise((resolve, reject) => {
      worker.once('exit', resolve);
      worker.once('error', reject);
    });
    const line = JSON.parse(text.trim().split('\n').at(-1)!);
    expect(Object.keys(line)).toEqual(['level', 'time', 'pid', 'hostname', 'thread', 'n', 'msg']);
    expect(line).toMatchObject({ level: 'info', pid: process.pid, thread: expect.any(Number), msg: 'from a thread', n: 1 });
  }, 60_000);
});

describe('request logs of the real service', () => {
  let pont: TestServer;
  let clinic: TestClient;
  let written = '';

  beforeAll(async () => {
    // Every line of the process, whatever the stream: the test server logs at debug.
    const keep = (chunk: unknown) => ((written += String(chunk)), true);
    vi.spyOn(process.stdout, 'write').mockImplementation(keep);
    vi.spyOn(process.stderr, 'write').mockImplementation(keep);
    pont = await startTestServer({ LOG_LEVEL: 'debug' });
    clinic = await createTestClient(pont, ['health_id:verify', 'webhooks:manage', 'fhir:read'], { organizationId: 'org-clinic' });
  });
  afterAll(async () => {
    await pont?.close();
    vi.restoreAllMocks();
  });

  it('one line per request from a child logger: request id, client, organisation, route template, status, ms', async () => {
    const res = await pont.fetch('/api/fhir/R4/Patient/does-not-exist', { headers: { ...clinic.headers, 'x-request-id': 'req-logs-1' } });
    expect(res.status).toBe(404);
    const line = written
      .split('\n')
      .filter((l) => l.includes('"req-logs-1"'))
      .map((l) => JSON.parse(l))
      .find((l) => l.msg === 'request');
    expect(line).toMatchObject({
      level: 'info',
      request_id: 'req-logs-1',
      method: 'GET',
      route: '/api/fhir/R4/Patient/:id',
      status: 404,
      client_id: clinic.client_id,
      org: 'org-clinic',
      ms: expect.any(Number),
    });
  });

  it('never writes a secret or a Health ID, whatever the requests carry', async () => {
    const secrets: string[] = [clinic.client_secret, clinic.access_token];
    const healthIds: string[] = [];
    // Token requests: JSON and form bodies, a wrong secret, and the client-secret headers.
    const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: clinic.client_id, client_secret: clinic.client_secret });
    const token = await pont.json(`${CONNECT}/auth/token`, { method: 'POST', body: form, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(token.status).toBe(200);
    secrets.push(token.body.access_token);
    const wrong = `wrong-${clinic.client_secret.slice(0, 12)}-secret`;
    secrets.push(wrong);
    expect((await pont.json(`${CONNECT}/auth/token`, { method: 'POST', json: { grant_type: 'client_credentials', client_id: clinic.client_id, client_secret: wrong } })).status).toBe(401);
    expect((await pont.fetch(`${CONNECT}/webhooks/subscriptions`, { headers: { 'x-client-id': clinic.client_id, 'x-client-secret': clinic.client_secret } })).status).toBe(200);

    // Patients: registered (a new Health ID), resolved by Health ID, verified with the Health ID in the path.
    const made = await pont.json(`${CONNECT}/patients/resolve`, {
      method: 'POST',
      headers: clinic.headers,
      json: { first_name: 'Logline', last_name: 'Ngo', date_of_birth: '1991-02-03', sex: 'female' },
    });
    expect(made.status).toBe(201);
    const healthId = made.body.health_id as string;
    healthIds.push(healthId);
    expect((await pont.json(`${CONNECT}/patients/resolve`, { method: 'POST', headers: clinic.headers, json: { health_id: healthId } })).body.status).toBe('found');
    expect((await pont.fetch(`${CONNECT}/patients/verify/${healthId}`, { headers: clinic.headers })).status).toBe(200);
    // A caller may send anything well-formed as its request id, a Health ID too.
    expect((await pont.fetch(`${CONNECT}/patients/verify/${healthId}`, { headers: { ...clinic.headers, 'x-request-id': healthId } })).status).toBe(200);
    // A malformed one, and one valid but not registered, are not written either.
    healthIds.push('CM48293017462X', 'ZZ000000000000');
    for (const id of healthIds.slice(1)) await pont.fetch(`${CONNECT}/patients/verify/${id}`, { headers: clinic.headers });

    // A webhook subscription: its secret is in the answer, and again after a rotation.
    const sub = await pont.json(`${CONNECT}/webhooks/subscriptions`, {
      method: 'POST',
      headers: clinic.headers,
      json: { callback_url: 'http://127.0.0.1:9/hook', subscribed_events: ['patient.created'] },
    });
    expect(sub.status).toBe(201);
    secrets.push(sub.body.webhook_secret);
    const rotated = await pont.json(`${CONNECT}/webhooks/subscriptions/${sub.body.subscription_id ?? sub.body.id}/rotate-secret`, { method: 'POST', headers: clinic.headers });
    expect(rotated.status).toBe(200);
    secrets.push(rotated.body.webhook_secret);

    const requestLines = written.split('\n').filter((l) => l.includes('"msg":"request"'));
    expect(requestLines.length).toBeGreaterThanOrEqual(10);
    for (const secret of secrets) expect(secret.length).toBeGreaterThan(8);
    for (const value of [...secrets, ...healthIds]) expect(written).not.toContain(value);
    // The Health ID routes are logged by template.
    expect(written).toContain('"route":"/api/v1/connect/patients/verify/:health_id"');
  });

  it('a transaction still losing to concurrent ones after its runs is a 503 logged as a warning that says so, not an "unhandled error"', async () => {
    // Every registration loses as if to a deadlock (40P01), so every run of the transaction fails the same way.
    await pont.services.db.exec(`CREATE FUNCTION lose_as_deadlocked() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected deadlock' USING ERRCODE = '40P01'; END $$;
      CREATE TRIGGER lose_as_deadlocked BEFORE INSERT ON health_ids FOR EACH ROW EXECUTE FUNCTION lose_as_deadlocked();`);
    try {
      const res = await pont.fetch(`${CONNECT}/patients/resolve`, {
        method: 'POST',
        headers: { ...clinic.headers, 'content-type': 'application/json', 'x-request-id': 'req-logs-contention' },
        body: JSON.stringify({ first_name: 'Contended', last_name: 'Ngo', date_of_birth: '1992-03-04', sex: 'female' }),
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      const lines = written.split('\n').filter((l) => l.includes('"req-logs-contention"')).map((l) => JSON.parse(l));
      expect(lines.find((l) => l.msg === 'unhandled error')).toBeUndefined();
      expect(lines.find((l) => l.level === 'warn')).toMatchObject({ msg: expect.stringContaining('concurrent'), route: '/api/v1/connect/patients/resolve', error: expect.stringContaining('injected deadlock') });
    } finally {
      await pont.services.db.exec('DROP TRIGGER lose_as_deadlocked ON health_ids; DROP FUNCTION lose_as_deadlocked();');
    }
  });
});
