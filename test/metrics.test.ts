/**
 * Operators' metrics (issue 28, item 2): GET /metrics on a port of its own (METRICS_PORT) behind METRICS_TOKEN,
 * never on the integrators' port; series that move by exactly the traffic sent; labels that hold no path, id,
 * Health ID or secret; with `--workers`, one aggregated scrape from the supervisor.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig, ConfigError } from '../src/config';
import { importPaths } from '../src/fhir/import';
import { createAgent } from '../src/auth/agents';
import { bearerMatches } from '../src/metrics';
import { backend, createScratchDatabase, freePort, createTestClient, startTestServer, type TestClient, type TestServer, pontCommand } from './harness';

const CONNECT = '/api/v1/connect';
const TOKEN = randomBytes(24).toString('hex');

/** The value of the sample `name{labels…}` (labels matched as a subset), 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  let found = false;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const given = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => given[k] === v)) {
      if (found && Object.keys(labels).length === Object.keys(given).length) throw new Error(`${name} twice`);
      total += Number(m[3]);
      found = true;
    }
  }
  return total;
}

describe('GET /metrics', () => {
  let pont: TestServer;
  let clinic: TestClient;
  let other: TestClient;
  let limited: TestClient;
  const scrape = async (token = TOKEN) => {
    const res = await fetch(`${pont.metricsUrl}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    return res.text();
  };

  beforeAll(async () => {
    pont = await startTestServer({
      METRICS_PORT: '0',
      METRICS_TOKEN: TOKEN,
      PONT_RATE_LIMITS: 'fhir=20/60',
      PONT_WEBHOOK_RETRY_DELAYS: '1h,1h,1h,1h,1h,1h',
    });
    clinic = await createTestClient(pont, ['health_id:verify', 'webhooks:manage', 'fhir:read'], { organizationId: 'org-clinic' });
    other = await createTestClient(pont, ['fhir:read'], { organizationId: 'org-other' });
    limited = await createTestClient(pont, ['fhir:read'], { organizationId: 'org-limited' });
  });
  afterAll(async () => {
    await pont?.close();
  });

  it('is served on its own port behind the token, never on the integrators’ port', async () => {
    expect(pont.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(pont.metricsUrl).not.toBe(pont.url);
    // The API port has no /metrics, for anyone.
    expect((await pont.json('/metrics', { headers: clinic.headers })).status).toBe(404);
    expect((await pont.json('/metrics', { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
    // The metrics port wants the metrics token: none, a client's access token, a wrong one, another scheme: 401.
    for (const authorization of [undefined, `Bearer ${clinic.access_token}`, `Bearer ${TOKEN}x`, `Basic ${TOKEN}`, `Bearer ${TOKEN.slice(0, -1)}`]) {
      const res = await fetch(`${pont.metricsUrl}/metrics`, { headers: authorization ? { authorization } : {} });
      expect(res.status, authorization).toBe(401);
      expect(await res.json()).toMatchObject({ status: 'error', error_code: 'UNAUTHENTICATED' });
    }
    const ok = await fetch(`${pont.metricsUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await ok.text();
    for (const name of ['process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'pont_db_connections', 'pont_webhook_outbox_pending', 'pont_audit_materialiser_lag_seconds', 'pont_fhir_subscription_fanout_queued', 'pont_fhir_subscription_fanout_lag_seconds'])
      expect(text).toContain(`\n${name}`);
    // Nothing else is served there.
    expect((await fetch(`${pont.metricsUrl}/api/fhir/R4/metadata`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
    expect((await fetch(`${pont.metricsUrl}/metrics`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(405);
  });

  it('counts requests by route template and status, and statements, exactly as sent', async () => {
    const before = await scrape();
    const series = { method: 'GET', route: '/api/fhir/R4/Patient/:id', status: '404' };
    for (let i = 0; i < 5; i++) expect((await pont.fetch(`/api/fhir/R4/Patient/missing-${i}`, { headers: clinic.headers })).status).toBe(404);
    const after = await scrape();
    const count = 'pont_http_request_duration_seconds_count';
    expect(sample(after, count, series) - sample(before, count, series)).toBe(5);
    // The five are in the histogram's buckets too: all within +Inf, and the sum moved.
    expect(sample(after, 'pont_http_request_duration_seconds_bucket', { ...series, le: '+Inf' }) - sample(before, 'pont_http_request_duration_seconds_bucket', { ...series, le: '+Inf' })).toBe(5);
    expect(sample(after, 'pont_http_request_duration_seconds_sum', series)).toBeGreaterThan(sample(before, 'pont_http_request_duration_seconds_sum', series));
    // Each read ran statements (token check, rate limit, the read): at least one each; and waited for connections.
    expect(sample(after, 'pont_db_statement_duration_seconds_count') - sample(before, 'pont_db_statement_duration_seconds_count')).toBeGreaterThanOrEqual(5);
    expect(sample(after, 'pont_db_connection_wait_seconds_count')).toBeGreaterThan(sample(before, 'pont_db_connection_wait_seconds_count'));
    expect(sample(after, 'pont_db_connections', { state: 'total' })).toBeGreaterThanOrEqual(1);
  });

  it('counts the access policy’s refusals and rate-limit refusals', async () => {
    const made = await pont.json(`${CONNECT}/patients/resolve`, {
      method: 'POST',
      headers: clinic.headers,
      json: { first_name: 'Metric', last_name: 'Ngo', date_of_birth: '1990-01-02', sex: 'female' },
    });
    expect(made.status).toBe(201);
    const found = await pont.json(`/api/fhir/R4/Patient?identifier=${encodeURIComponent(`https://pont.health/fhir/sid/health-id|${made.body.health_id}`)}`, { headers: clinic.headers });
    const patientId = found.body.entry[0].resource.id as string;

    const before = await scrape();
    // Another organisation, without consent: 404 as if it did not exist, three times.
    for (let i = 0; i < 3; i++) expect((await pont.fetch(`/api/fhir/R4/Patient/${patientId}`, { headers: other.headers })).status).toBe(404);
    // A client over the FHIR group's limit (20 a minute): the 21st and 22nd are refused.
    const statuses: number[] = [];
    for (let i = 0; i < 22; i++) statuses.push((await pont.fetch('/api/fhir/R4/Patient/nobody', { headers: limited.headers })).status);
    expect(statuses.filter((s) => s === 429)).toHaveLength(2);
    const after = await scrape();
    const refusals = { channel: 'fhir', action: 'R' };
    expect(sample(after, 'pont_access_refusals_total', refusals) - sample(before, 'pont_access_refusals_total', refusals)).toBe(3);
    expect(sample(after, 'pont_rate_limit_refusals_total', { group: 'fhir' }) - sample(before, 'pont_rate_limit_refusals_total', { group: 'fhir' })).toBe(2);
    // No id, Health ID or secret in any label.
    for (const value of [patientId, made.body.health_id, clinic.client_secret, clinic.access_token, TOKEN]) expect(after).not.toContain(value);
  });

  it('reports the webhook outbox and delivery outcomes', async () => {
    // A subscription whose receiver refuses connections: each attempt fails and waits an hour for the next.
    const sub = await pont.json(`${CONNECT}/webhooks/subscriptions`, {
      method: 'POST',
      headers: clinic.headers,
      json: { callback_url: 'http://127.0.0.1:9/hook', subscribed_events: ['patient.created'] },
    });
    expect(sub.status).toBe(201);
    const before = await scrape();
    const failed = { outcome: 'failed' };
    for (const first_name of ['Outbox', 'Queue'])
      expect((await pont.json(`${CONNECT}/patients/resolve`, { method: 'POST', headers: clinic.headers, json: { first_name, last_name: 'Ngo', date_of_birth: '1980-03-04', sex: 'male' } })).status).toBe(201);
    await vi.waitFor(async () => expect(sample(await scrape(), 'pont_webhook_delivery_attempts_total', failed) - sample(before, 'pont_webhook_delivery_attempts_total', failed)).toBe(2), { timeout: 20_000, interval: 50 });
    const after = await scrape();
    const { rows } = await pont.services.db.query<{ n: string }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'pending'`);
    expect(Number(rows[0]!.n)).toBeGreaterThanOrEqual(2);
    expect(sample(after, 'pont_webhook_outbox_pending')).toBe(Number(rows[0]!.n));
    expect(sample(after, 'pont_webhook_outbox_oldest_pending_age_seconds')).toBeGreaterThan(0);
    expect(after).not.toContain(sub.body.webhook_secret);
  });

  it('counts Bridge sync batches and their items by status', async () => {
    const agent = await createAgent(pont.services.db, { organizationId: 'org-clinic', facilityId: 'fac-metrics' });
    const sync = (batch_id: string, resources: unknown[]) =>
      pont.json('/api/v1/bridge/sync', {
        method: 'POST',
        headers: { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)) },
        json: { batch_id, resources },
      });
    const patient = { resourceType: 'Patient', id: 'MRN-M1', name: [{ family: 'Ngono', given: ['Metric'] }], gender: 'female', birthDate: '1990-04-01' };
    const before = await scrape();
    expect((await sync('m-1', [patient, { ...patient, id: 'MRN-M2' }])).body.counts).toMatchObject({ created: 2 });
    expect((await sync('m-1', [patient, { ...patient, id: 'MRN-M2' }])).status).toBe(200); // the same batch again: replayed
    expect((await sync('m-2', [patient, { resourceType: 'Patient', id: 'MRN-M3', gender: 'no-such-gender' }])).body.counts).toMatchObject({ unchanged: 1, failed: 1 });
    const after = await scrape();
    const moved = (name: string, labels: Record<string, string>) => sample(after, name, labels) - sample(before, name, labels);
    expect(moved('pont_bridge_sync_batches_total', { outcome: 'written' })).toBe(2);
    expect(moved('pont_bridge_sync_batches_total', { outcome: 'replayed' })).toBe(1);
    expect(moved('pont_bridge_sync_items_total', { status: 'created' })).toBe(2);
    expect(moved('pont_bridge_sync_items_total', { status: 'unchanged' })).toBe(1);
    expect(moved('pont_bridge_sync_items_total', { status: 'failed' })).toBe(1);
    expect(after).not.toContain(agent.agent_key);
  });

  it('counts the resources and files an import wrote', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pont-metrics-import-'));
    try {
      const bundle = (n: number) => ({
        resourceType: 'Bundle',
        type: 'transaction',
        entry: Array.from({ length: n }, () => ({ resource: { resourceType: 'Organization', name: `Metrics org ${randomBytes(4).toString('hex')}` }, request: { method: 'POST', url: 'Organization' } })),
      });
      writeFileSync(join(dir, 'a.json'), JSON.stringify(bundle(3)));
      writeFileSync(join(dir, 'b.json'), JSON.stringify(bundle(2)));
      writeFileSync(join(dir, 'c.json'), '{"resourceType":');
      const before = await scrape();
      const summary = await importPaths(pont.services.fhir, [dir]);
      expect(summary.resources).toBe(5);
      const after = await scrape();
      expect(sample(after, 'pont_import_resources_total') - sample(before, 'pont_import_resources_total')).toBe(5);
      expect(sample(after, 'pont_import_files_total', { outcome: 'loaded' }) - sample(before, 'pont_import_files_total', { outcome: 'loaded' })).toBe(2);
      expect(sample(after, 'pont_import_files_total', { outcome: 'failed' }) - sample(before, 'pont_import_files_total', { outcome: 'failed' })).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('metrics configuration and token check (unit)', () => {
  it('wants a token when the metrics port listens beyond loopback', () => {
    expect(() => loadConfig({ METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0' })).toThrow(ConfigError);
    expect(() => loadConfig({ METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0' })).toThrow(/METRICS_TOKEN: required when METRICS_HOST/);
    expect(loadConfig({ METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0', METRICS_TOKEN: TOKEN }).metrics).toEqual({ port: 9464, host: '0.0.0.0', token: TOKEN });
    expect(loadConfig({ METRICS_PORT: '9464' }).metrics).toEqual({ port: 9464, host: '127.0.0.1', token: undefined });
    expect(loadConfig({}).metrics).toBeUndefined();
    expect(() => loadConfig({ METRICS_PORT: '9464', METRICS_TOKEN: 'short' })).toThrow(/METRICS_TOKEN: must be at least 16 characters/);
  });

  it('compares the bearer token whole', () => {
    expect(bearerMatches(`Bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(bearerMatches(`bearer ${TOKEN}`, TOKEN)).toBe(true);
    for (const header of [undefined, '', 'Bearer ', `Bearer ${TOKEN} `, `Bearer ${TOKEN.slice(1)}`, TOKEN]) expect(bearerMatches(header, TOKEN)).toBe(false);
  });
});

/** GET on a new connection each time, so that the cluster hands each to the next worker. */
const getOnce = (url: string) =>
  new Promise<number>((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end();
  });

describe('pont serve --workers 2', () => {
  let server: ChildProcess | undefined;
  afterAll(() => {
    server?.kill('SIGKILL');
  });

  it.runIf(backend === 'postgres')('serves one scrape from the supervisor, summed over the workers; both log the same line shape', async () => {
    const scratch = await createScratchDatabase({ migrated: true });
    const metricsPort = await freePort();
    try {
      server = spawn(process.execPath, pontCommand('serve', '--workers', '2'), {
        cwd: fileURLToPath(new URL('..', import.meta.url)),
        env: { ...process.env, DATABASE_URL: scratch.url, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', METRICS_PORT: String(metricsPort), METRICS_TOKEN: TOKEN },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      server.stdout!.on('data', (c) => (out += c));
      server.stderr!.on('data', (c) => (out += c));
      const url = await vi.waitFor(
        () => {
          if (server!.exitCode !== null) throw new Error(`exited: ${out}`);
          const m = /listening on (http:\/\/\S+).*2 worker processes/.exec(out);
          if (!m) throw new Error('not yet');
          return m[1]!;
        },
        { timeout: 90_000, interval: 100 },
      );
      // The start-up record (it may reach the pipe after the banner) names where the metrics are.
      const started = await vi.waitFor(
        () => {
          const line = out.split('\n').find((l) => l.includes('"msg":"pont started"'));
          if (!line) throw new Error('no start-up record yet');
          return line;
        },
        { timeout: 30_000, interval: 100 },
      );
      expect(started).toContain(`"metrics":"http://127.0.0.1:${metricsPort}/metrics"`);
      for (let i = 0; i < 10; i++) expect(await getOnce(`${url}/healthz`)).toBe(200);
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
      expect(sample(text, 'pont_http_request_duration_seconds_count', { route: '/healthz', status: '200' })).toBe(10);
      // Both workers' pools, summed; the database's gauges once (max), not twice.
      expect(sample(text, 'pont_db_connections', { state: 'total' })).toBeGreaterThanOrEqual(2);
      expect(text).toContain('\npont_webhook_outbox_pending 0');
      expect((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status).toBe(401);

      const lines = out
        .split('\n')
        .filter((l) => l.includes('"msg":"request"'))
        .map((l) => JSON.parse(l));
      expect(lines).toHaveLength(10);
      expect(new Set(lines.map((l) => l.pid)).size).toBe(2);
      expect(new Set(lines.map((l) => Object.keys(l).join(','))).size).toBe(1);
    } finally {
      if (server?.exitCode === null) {
        const exited = new Promise((resolve) => server!.once('exit', resolve));
        server.kill('SIGTERM');
        await exited;
      }
      await scratch.drop();
    }
  }, 120_000);
});
