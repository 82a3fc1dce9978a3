import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { revokeClient } from '../src/auth/clients';
import { loadConfig } from '../src/config';
import { LISTENER_APPLICATION_NAME } from '../src/db/pg-listener';
import { startPont, type RunningPont } from '../src/server';
import { backend, createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * Authentication without round trips (clients, tokens and secrets cached in each process) must not weaken
 * revocation: the next request of a revoked client is refused in every process, by token and by header pair.
 */
/** Any authenticated route will do: a FHIR search that finds nothing. */
const ROUTE = '/api/fhir/R4/Patient?_count=1';

let pont: TestServer;
/** A second Pont process on the same PostgreSQL database (PGlite is one process's database). */
let second: RunningPont | undefined;

beforeAll(async () => {
  pont = await startTestServer({ PONT_RATE_LIMITS: 'FHIR=400/60' });
  if (backend === 'postgres')
    second = await startPont(loadConfig({ PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: pont.config.databaseUrl, PONT_PUBLIC_URL: pont.config.publicUrl, PONT_RATE_LIMITS: 'FHIR=400/60' }));
});
afterAll(async () => {
  await second?.close();
  await pont?.close();
});

const servers = () => [pont.url, ...(second ? [second.url] : [])];
const pairHeaders = (c: TestClient) => ({ 'x-client-id': c.client_id, 'x-client-secret': c.client_secret });
const statusOf = async (url: string, headers: Record<string, string>) => (await fetch(url + ROUTE, { headers })).status;

/** Every process has heard the changes committed so far (or knows its listening connection is down). */
const everyProcessHeard = () => Promise.all([pont, ...(second ? [second] : [])].map((p) => p.services.db.listenersCaughtUp()));

describe('authentication caches', () => {
  it('a revoked client is refused on its next request, by token and by header pair, in every process', async () => {
    const client = await createTestClient(pont, ['fhir:read']);
    // Twice each, so that the client, the token and the secret are all cached everywhere.
    for (const url of servers())
      for (let i = 0; i < 2; i++) {
        expect(await statusOf(url, client.headers)).toBe(200);
        expect(await statusOf(url, pairHeaders(client))).toBe(200);
      }
    await revokeClient(pont.services.db, client.client_id);
    // The process that revoked refuses at once (revokeClient returns once its own caches heard the change).
    expect(await statusOf(pont.url, client.headers)).toBe(401);
    expect(await statusOf(pont.url, pairHeaders(client))).toBe(401);
    await everyProcessHeard();
    for (const url of servers()) {
      expect(await statusOf(url, client.headers)).toBe(401);
      expect(await statusOf(url, pairHeaders(client))).toBe(401);
    }
  });

  it('the process that revokes a client refuses its very next request, every time', async () => {
    // Each round races the revocation's notification against the next request in the same process.
    for (let round = 0; round < 40; round++) {
      const client = await createTestClient(pont, ['fhir:read']);
      expect(await statusOf(pont.url, client.headers)).toBe(200);
      await revokeClient(pont.services.db, client.client_id);
      expect(await statusOf(pont.url, client.headers)).toBe(401);
    }
  });

  it('a wrong secret is refused even once the right one is cached', async () => {
    const client = await createTestClient(pont, ['fhir:read']);
    expect(await statusOf(pont.url, pairHeaders(client))).toBe(200);
    expect(await statusOf(pont.url, { ...pairHeaders(client), 'x-client-secret': `${client.client_secret}x` })).toBe(401);
    expect(await statusOf(pont.url, { ...pairHeaders(client), 'x-client-secret': client.client_secret.slice(0, -1) })).toBe(401);
    expect(await statusOf(pont.url, pairHeaders(client))).toBe(200);
  });

  it.runIf(backend === 'postgres')('trusts no cache while its listening connection is down: a revocation made then still holds', async () => {
    const client = await createTestClient(pont, ['fhir:read']);
    for (const url of servers()) expect(await statusOf(url, client.headers)).toBe(200);
    const admin = new pg.Client({ connectionString: pont.config.databaseUrl });
    await admin.connect();
    try {
      // Cut every process's listening connection, and revoke while nobody listens: the NOTIFY is lost.
      const cut = await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
        [LISTENER_APPLICATION_NAME],
      );
      expect(cut.rowCount).toBe(servers().length);
      await admin.query('UPDATE oauth_clients SET revoked_at = now() WHERE client_id = $1', [client.client_id]);
    } finally {
      await admin.end();
    }
    await everyProcessHeard();
    for (const url of servers()) expect(await statusOf(url, client.headers)).toBe(401);
  });

  it.runIf(backend === 'postgres')('two processes together never admit more than the limit, and refuse at most (N - 1) x batch early', async () => {
    const client = await createTestClient(pont, ['fhir:read']);
    const statuses: number[] = [];
    // Windows are fixed minutes (aligned on the epoch): the run must not straddle two, so both processes' clocks
    // stand still in the middle of a minute no request has used yet.
    const midWindow = (Math.floor(Date.now() / 60_000) + 2) * 60_000 + 30_000;
    const processes = [pont, second!];
    for (const p of processes) p.services.access.limits.now = () => midWindow;
    onTestFinished(() => {
      for (const p of processes) p.services.access.limits.now = Date.now;
    });
    // 600 requests against a limit of 400 (batches of 4), 8 at a time, alternating between the processes.
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < 600) {
          const url = servers()[next++ % 2]!;
          statuses.push(await statusOf(url, client.headers));
        }
      }),
    );
    const admitted = statuses.filter((s) => s === 200).length;
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(admitted).toBeLessThanOrEqual(400);
    expect(admitted).toBeGreaterThanOrEqual(400 - 4);
  });
});
