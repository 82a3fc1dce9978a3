/**
 * Pont behind PgBouncer in transaction mode (issue 28, item 4): Debian's `pgbouncer` started on a free port in front
 * of the test PostgreSQL, with a generated ini; two Pont processes' statements go through it (fewer server
 * connections than Pont's pools hold, so transactions really share them), their LISTEN connections straight to
 * PostgreSQL (DATABASE_LISTEN_URL), statements unnamed (PONT_PREPARED_STATEMENTS=false: the installed PgBouncer is
 * older than 1.21). Runs on the postgres project; skipped, saying so, when pgbouncer is not installed.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createClient, revokeClient } from '../src/auth/clients';
import { loadConfig } from '../src/config';
import { startPont, type RunningPont } from '../src/server';
import { backend, createScratchDatabase } from './harness';
import { PGBOUNCER, startPgBouncer, type PgBouncer } from './pgbouncer';

const installed = existsSync(PGBOUNCER);
if (backend === 'postgres' && !installed) console.warn(`test/pgbouncer.test.ts skipped: no pgbouncer at ${PGBOUNCER} (apt-get install pgbouncer, or set PGBOUNCER)`);

/** Server connections PgBouncer opens: fewer than one Pont's pool (10), so transactions share them. */
const SERVER_CONNECTIONS = 4;

describe.runIf(backend === 'postgres' && installed)('behind PgBouncer in transaction mode', () => {
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
  let dir: string;
  let bouncer: PgBouncer | undefined;
  let bouncedUrl: string;
  const ponts: RunningPont[] = [];

  beforeAll(async () => {
    scratch = await createScratchDatabase();
    dir = mkdtempSync(join(tmpdir(), 'pont-pgbouncer-'));
    bouncer = await startPgBouncer(dir, scratch.url, SERVER_CONNECTIONS);
    bouncedUrl = bouncer.url;
    const env = { PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: bouncedUrl, DATABASE_LISTEN_URL: scratch.url, PONT_PREPARED_STATEMENTS: 'false', PONT_RATE_LIMITS: 'default=100000/60' };
    // One after the other: the migrations run once, through PgBouncer.
    ponts.push(await startPont(loadConfig(env)));
    ponts.push(await startPont(loadConfig(env)));
  }, 120_000);

  afterAll(async () => {
    for (const pont of ponts) await pont.close();
    await bouncer?.stop();
    await scratch?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const token = async (pont: RunningPont, clientId: string, secret: string) => {
    const res = await fetch(`${pont.url}/api/v1/connect/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret }),
    });
    expect(res.status).toBe(200);
    return { authorization: `Bearer ${((await res.json()) as { access_token: string }).access_token}` };
  };

  it('serves concurrent writes and reads from two processes through fewer server connections', async () => {
    const client = await createClient(ponts[0]!.services.db, { name: 'bounced', organizationId: 'org-b', scopes: ['health_id:verify', 'fhir:read'] });
    const headers = await Promise.all(ponts.map((p) => token(p, client.client_id, client.client_secret)));
    // 40 registrations at once, spread over both processes: each a transaction (patient, Health ID, event, audit).
    const made = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        fetch(`${ponts[i % 2]!.url}/api/v1/connect/patients/resolve`, {
          method: 'POST',
          headers: { ...headers[i % 2], 'content-type': 'application/json' },
          body: JSON.stringify({ first_name: `Bounce${i}`, last_name: 'Ngo', date_of_birth: '1985-05-05', sex: 'female' }),
        }).then(async (r) => ({ status: r.status, body: (await r.json()) as { health_id: string } })),
      ),
    );
    expect(made.map((m) => m.status)).toEqual(Array(40).fill(201));
    // Each process reads what the other wrote (the searches repeat the same statements: unnamed every time).
    for (const [i, m] of made.entries()) {
      const res = await fetch(`${ponts[(i + 1) % 2]!.url}/api/fhir/R4/Patient?identifier=${encodeURIComponent(`https://pont.health/fhir/sid/health-id|${m.body.health_id}`)}`, { headers: headers[(i + 1) % 2] });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { total: number }).total).toBe(1);
    }
    // It all went through PgBouncer, on at most SERVER_CONNECTIONS server connections.
    const admin = new pg.Client({ connectionString: Object.assign(new URL(bouncedUrl), { pathname: '/pgbouncer' }).toString() });
    await admin.connect();
    try {
      const stats = (await admin.query('SHOW STATS')).rows.find((r) => r.database === new URL(scratch.url).pathname.slice(1));
      expect(Number(stats.total_xact_count)).toBeGreaterThan(80);
      const pools = (await admin.query('SHOW POOLS')).rows.filter((r) => r.database === new URL(scratch.url).pathname.slice(1));
      const serverConnections = pools.reduce((n, r) => n + Number(r.sv_active) + Number(r.sv_idle) + Number(r.sv_used) + Number(r.sv_tested) + Number(r.sv_login), 0);
      expect(serverConnections).toBeLessThanOrEqual(SERVER_CONNECTIONS);
    } finally {
      await admin.end();
    }
  });

  it('hears NOTIFY on the direct listening connection: a client revoked in one process is refused in the other at once', async () => {
    const client = await createClient(ponts[0]!.services.db, { name: 'revoked', organizationId: 'org-b', scopes: ['fhir:read'] });
    const headers = await Promise.all(ponts.map((p) => token(p, client.client_id, client.client_secret)));
    for (const [i, pont] of ponts.entries()) expect((await fetch(`${pont.url}/api/fhir/R4/Patient?_count=1`, { headers: headers[i] })).status).toBe(200);
    await revokeClient(ponts[0]!.services.db, client.client_id);
    expect((await fetch(`${ponts[0]!.url}/api/fhir/R4/Patient?_count=1`, { headers: headers[0] })).status).toBe(401);
    // The other process hears the revocation's NOTIFY on its own listening connection (not through PgBouncer).
    await vi.waitFor(async () => expect((await fetch(`${ponts[1]!.url}/api/fhir/R4/Patient?_count=1`, { headers: headers[1] })).status).toBe(401), { timeout: 5_000, interval: 20 });
    // Both listening connections are PostgreSQL sessions of their own, beside PgBouncer's.
    const direct = new pg.Client({ connectionString: scratch.url });
    await direct.connect();
    try {
      const { rows } = await direct.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'pont listener' AND datname = current_database()");
      expect(rows[0].n).toBe(2);
    } finally {
      await direct.end();
    }
  });

  // Last: the failed start leaves a LISTEN on one of PgBouncer's server connections.
  it('will not start with its listening connection through PgBouncer (it would hear no revocation)', async () => {
    const env = { PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: bouncedUrl, PONT_PREPARED_STATEMENTS: 'false' };
    await expect(startPont(loadConfig(env))).rejects.toThrow(/heard no NOTIFY .* set DATABASE_LISTEN_URL/);
  }, 30_000);
});
