/**
 * Read replicas (issue 28, item 4; docs/operators.md "Read replicas"). DATABASE_READ_URL is refused on the embedded database.
 * On PostgreSQL, two set-ups:
 * - a second database on the test server standing in for a replica that lags (a copy taken earlier: rows missing).
 *   Not in recovery, it is read as it is: the lag-tolerant routes show that they read it, and a revocation made
 *   since is honoured although the copy still holds the client;
 * - a real streaming replica (pg_createcluster + pg_basebackup -R, as root), whose replay is paused: the reads that
 *   must answer as the primary does now fall back to the primary, the payment report reads the lagging replica,
 *   and a revoked client is refused at once. Skipped, saying so, when not root or the tools are absent.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AuditEvent, Bundle, Patient, Resource } from '@medplum/fhirtypes';
import { createClient, revokeClient, type ClientRecord } from '../src/auth/clients';
import type { BulkExportWorker } from '../src/bulk/worker';
import { ConfigError, describeDatabase, loadConfig } from '../src/config';
import { replicaFallbacks } from '../src/metrics';
import { databaseMetrics } from '../src/db/metrics';
import { openDatabase } from '../src/db/open';
import { startPont, type RunningPont } from '../src/server';
import { backend, createScratchDatabase, freePort, postgresAdminUrl } from './harness';
import { withClient } from './postgres-admin';

const FHIR = '/api/fhir/R4';
// The servers' bulk export files: this file's own, removed after it.
const exportDir = mkdtempSync(join(tmpdir(), 'pont-exports-'));
afterAll(() => rmSync(exportDir, { recursive: true, force: true }));
const BASE = { PORT: '0', LOG_LEVEL: 'error', PONT_RATE_LIMITS: 'default=100000/60', PONT_BULK_EXPORT_DIR: exportDir };

describe('DATABASE_READ_URL configuration', () => {
  it('is refused on the embedded database, saying how to fix it', async () => {
    expect(() => loadConfig({ DATABASE_READ_URL: 'postgres://pont@replica:5432/pont' })).toThrow(ConfigError);
    expect(() => loadConfig({ DATABASE_READ_URL: 'postgres://pont@replica:5432/pont' })).toThrow(/DATABASE_READ_URL: a read replica needs PostgreSQL.*fix: set DATABASE_URL/);
    // A caller building its own configuration gets the same answer from openDatabase.
    await expect(openDatabase({ databaseReadUrl: 'postgres://pont@replica:5432/pont' })).rejects.toThrow(/DATABASE_READ_URL needs PostgreSQL/);
  });

  it('must be a postgres:// URL', () => {
    expect(() => loadConfig({ DATABASE_URL: 'postgres://pont@db/pont', DATABASE_READ_URL: 'mysql://replica/pont' })).toThrow(/DATABASE_READ_URL: must be a postgres:\/\/ URL/);
    expect(loadConfig({ DATABASE_URL: 'postgres://pont@db/pont', DATABASE_READ_URL: 'postgres://pont@replica/pont' }).databaseReadUrl).toBe('postgres://pont@replica/pont');
  });

  it('the start-up record names the replica, never its password', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://pont:s3cret@db.internal/pont', DATABASE_READ_URL: 'postgres://pont:s3cret@replica.internal:5433/pont' });
    expect(describeDatabase(config)).toBe('PostgreSQL at db.internal:5432/pont, read replica at replica.internal:5433/pont');
  });
});

// ------------------------------------------------------------------ helpers over a running Pont

type Headers = Record<string, string>;

async function bearer(pont: RunningPont, client: { client_id: string; client_secret: string }): Promise<Headers> {
  const res = await fetch(`${pont.url}/api/v1/connect/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
  });
  expect(res.status).toBe(200);
  return { authorization: `Bearer ${((await res.json()) as { access_token: string }).access_token}` };
}

const fhir = (pont: RunningPont, headers: Headers, path: string, init: RequestInit = {}) =>
  fetch(`${pont.url}${FHIR}${path}`, { ...init, headers: { ...headers, 'content-type': 'application/fhir+json', ...(init.headers as Headers) } });

async function createPatient(pont: RunningPont, headers: Headers, family: string): Promise<string> {
  const res = await fhir(pont, headers, '/Patient', { method: 'POST', body: JSON.stringify({ resourceType: 'Patient', name: [{ family, given: ['Ada'] }], birthDate: '1980-01-01', gender: 'female' }) });
  expect(res.status, await res.clone().text()).toBe(201);
  return ((await res.json()) as Patient).id!;
}

const PAYMENT_DAY = '2026-11-21';
async function recordPayment(pont: RunningPont, headers: Headers, reference: string): Promise<void> {
  const res = await fhir(pont, headers, '/PaymentReconciliation', {
    method: 'POST',
    body: JSON.stringify({
      resourceType: 'PaymentReconciliation',
      meta: { tag: [{ system: 'https://pont.health/fhir/CodeSystem/facility', code: 'fac-0' }] },
      status: 'active',
      created: `${PAYMENT_DAY}T09:00:00Z`,
      paymentDate: PAYMENT_DAY,
      paymentAmount: { value: 1000, currency: 'XAF' },
      paymentIdentifier: { value: reference },
      detail: [{ type: { coding: [{ system: 'https://pont.health/fhir/CodeSystem/payment-method', code: 'mobile_money' }] }, amount: { value: 1000, currency: 'XAF' } }],
    }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

/** The payment references of the day's report (Connect payment reconciliation: a report, read from the replica). */
async function reportedPayments(pont: RunningPont, headers: Headers): Promise<string[]> {
  const res = await fetch(`${pont.url}/api/v1/connect/payments/reconciliation?date=${PAYMENT_DAY}&time_zone=UTC`, { headers });
  expect(res.status).toBe(200);
  return ((await res.json()) as { payments: Array<{ reference: string | null }> }).payments.map((p) => p.reference ?? '').sort();
}

/** The AuditEvents recorded about a patient (the audit trail: read from the replica once it has replayed it). */
async function auditedAbout(pont: RunningPont, headers: Headers, patientId: string): Promise<number> {
  const res = await fhir(pont, headers, `/AuditEvent?entity=Patient/${patientId}&_summary=count`);
  expect(res.status, await res.clone().text()).toBe(200);
  return ((await res.json()) as Bundle).total!;
}

/** A system-level export of one type (bulk export: pages read from the replica), run to the end: what it exported. */
async function exported(pont: RunningPont, headers: Headers, type: string): Promise<Resource[]> {
  const kick = await fhir(pont, headers, `/$export?_type=${type}`, { headers: { prefer: 'respond-async' } });
  expect(kick.status, await kick.clone().text()).toBe(202);
  const status = kick.headers.get('content-location')!;
  await (pont.services.workers.find((w) => w.name === 'bulk-export') as BulkExportWorker).drain();
  const manifest = (await (await fetch(status, { headers })).json()) as { output: Array<{ url: string }> };
  const resources: Resource[] = [];
  for (const file of manifest.output) {
    const text = await (await fetch(file.url, { headers })).text();
    resources.push(...text.trim().split('\n').map((line) => JSON.parse(line) as Resource));
  }
  return resources;
}

const exportedPatients = async (pont: RunningPont, headers: Headers) => (await exported(pont, headers, 'Patient')).map((r) => r.id!).sort();

const revokedOn = (url: string, clientId: string) =>
  withClient(url, async (c) => (await c.query<{ revoked: boolean }>('SELECT revoked_at IS NOT NULL AS revoked FROM oauth_clients WHERE client_id = $1', [clientId])).rows[0]!.revoked);

interface Clients {
  writer: ClientRecord & { client_secret: string };
  operator: ClientRecord & { client_secret: string };
  accountant: ClientRecord & { client_secret: string };
}

async function makeClients(pont: RunningPont): Promise<Clients> {
  const db = pont.services.db;
  return {
    writer: await createClient(db, { name: 'writer', organizationId: 'org-w', facilityId: 'fac-0', scopes: ['fhir:read', 'fhir:write'] }),
    operator: await createClient(db, { name: 'operator', organizationId: 'org-op', scopes: ['fhir:read', 'audit:read'], allPatients: true }),
    accountant: await createClient(db, { name: 'accountant', organizationId: 'org-w', scopes: ['payments:read'] }),
  };
}

// ------------------------------------------------------------------ a database standing in for a lagging replica

describe.runIf(backend === 'postgres')('with a database standing in for a lagging replica', () => {
  let primary: Awaited<ReturnType<typeof createScratchDatabase>>;
  let standInUrl: string;
  let standInName: string;
  let copiedAt: Date;
  let pont: RunningPont;
  let clients: Clients;
  let early: string;
  let late: string;
  let h: { writer: Headers; operator: Headers; accountant: Headers };

  beforeAll(async () => {
    primary = await createScratchDatabase();
    // What the replica had replayed: the primary after its first patient and payment, copied while nobody is connected.
    const first = await startPont(loadConfig({ ...BASE, DATABASE_URL: primary.url }));
    clients = await makeClients(first);
    const writer = await bearer(first, clients.writer);
    early = await createPatient(first, writer, 'Early');
    await recordPayment(first, writer, 'PAY-EARLY');
    await first.services.fhir.auditTrail.catchUp(); // the early accesses are AuditEvents in the copy
    await first.close();
    copiedAt = new Date();
    standInName = `${new URL(primary.url).pathname.slice(1)}_replica`;
    await withClient(postgresAdminUrl, (c) => c.query(`CREATE DATABASE ${standInName} TEMPLATE ${new URL(primary.url).pathname.slice(1)}`));
    standInUrl = Object.assign(new URL(primary.url), { pathname: `/${standInName}` }).toString();

    pont = await startPont(loadConfig({ ...BASE, DATABASE_URL: primary.url, DATABASE_READ_URL: standInUrl }));
    h = { writer: await bearer(pont, clients.writer), operator: await bearer(pont, clients.operator), accountant: await bearer(pont, clients.accountant) };
    // Since the copy: a patient and a payment, on the primary only.
    late = await createPatient(pont, h.writer, 'Late');
    await recordPayment(pont, h.writer, 'PAY-LATE');
  }, 120_000);

  afterAll(async () => {
    await pont?.close();
    if (standInName) await withClient(postgresAdminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${standInName} WITH (FORCE)`));
    await primary?.drop();
  });

  it('the lag-tolerant routes read the replica: bulk export pages, AuditEvent searches, the payment report', async () => {
    expect(await exportedPatients(pont, h.operator)).toEqual([early]);
    expect(await auditedAbout(pont, h.operator, early)).toBeGreaterThan(0);
    expect(await auditedAbout(pont, h.operator, late)).toBe(0);
    // Another organisation, a client newer than the replica (its token is checked on the primary): the policy holds
    // on the replica too, it sees none of org-w's trail.
    const outsider = await createClient(pont.services.db, { name: 'outsider', organizationId: 'org-x', scopes: ['audit:read', 'fhir:read'] });
    const outsiderHeaders = await bearer(pont, outsider);
    expect(await auditedAbout(pont, outsiderHeaders, early)).toBe(0);
    expect(await exportedPatients(pont, outsiderHeaders)).toEqual([]);
    expect(await reportedPayments(pont, h.accountant)).toEqual(['PAY-EARLY']);
    // An export of the audit trail reads the primary: the trail is materialised in the export's own transaction.
    const trail = (await exported(pont, h.operator, 'AuditEvent')) as AuditEvent[];
    expect(trail.some((e) => e.entity?.some((x) => x.what?.reference === `Patient/${late}`))).toBe(true);
    // The primary has both: a FHIR search (primary) finds the late patient.
    const found = await fhir(pont, h.operator, `/Patient?_id=${late}`);
    expect(((await found.json()) as Bundle).total).toBe(1);
  });

  it("the portal's Activity list reads the replica: none of the organisation's accesses since the copy", async () => {
    const created = await pont.services.access.portal.create({ organizationId: 'org-w', email: 'viewer@w.example', role: 'viewer' });
    if (created === 'exists') throw new Error('exists');
    const password = 'correct horse battery staple';
    const set = await fetch(`${pont.url}/portal/set-password`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: created.setPasswordToken, password, confirm: password }),
    });
    expect(set.status).toBe(302);
    const signIn = await fetch(`${pont.url}/api/v1/portal/sign-in`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'viewer@w.example', password }) });
    expect(signIn.status).toBe(200);
    const cookie = /service_session=[^;]*/.exec(signIn.headers.get('set-cookie') ?? '')![0];
    const res = await fetch(`${pont.url}/api/v1/portal/activity`, { headers: { cookie } });
    expect(res.status).toBe(200);
    const { activity } = (await res.json()) as { activity: Array<{ at: string }> };
    // The early patient's creation is there; the late one's (on the primary, by the same organisation) is not.
    expect(activity.length).toBeGreaterThan(0);
    for (const row of activity) expect(new Date(row.at).getTime()).toBeLessThan(copiedAt.getTime());
    const lateAccesses = await withClient(primary.url, async (c) => (await c.query<{ n: number }>("SELECT count(*)::int AS n FROM audit_log WHERE organization_id = 'org-w' AND recorded > $1", [copiedAt])).rows[0]!.n);
    expect(lateAccesses).toBeGreaterThan(0);
  });

  it('a revocation is honoured at once although the replica still has the client', async () => {
    await revokeClient(pont.services.db, clients.writer.client_id);
    expect(await revokedOn(primary.url, clients.writer.client_id)).toBe(true);
    expect(await revokedOn(standInUrl, clients.writer.client_id)).toBe(false);
    expect((await fhir(pont, h.writer, '/Patient?_count=1')).status).toBe(401);
    expect((await fhir(pont, h.writer, '/$export?_type=Patient', { headers: { prefer: 'respond-async' } })).status).toBe(401);
    expect((await fetch(`${pont.url}/api/v1/connect/auth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant_type: 'client_credentials', client_id: clients.writer.client_id, client_secret: clients.writer.client_secret }) })).status).toBe(401);
  });

  it('the replica pool is read-only and shows in the connection gauges as pool="replica"', async () => {
    await expect(pont.services.db.reader!.query('CREATE TABLE written_on_the_replica (x int)')).rejects.toThrow(/read-only transaction/);
    const text = await databaseMetrics(pont.services.db).metrics();
    // Labelled apart (the count itself may be 0: idle connections close after 10 s).
    expect(text).toMatch(/^pont_db_connections\{pool="replica",state="total"\} \d+$/m);
    expect(text).toMatch(/^pont_db_connections\{pool="primary",state="total"\} [1-9]/m);
  });
});

// ------------------------------------------------------------------ a real streaming replica, its replay paused

const CLUSTERS = '/usr/bin/pg_createcluster';
const realReplica = backend === 'postgres' && process.getuid?.() === 0 && existsSync(CLUSTERS) && existsSync('/usr/bin/pg_basebackup');
if (backend === 'postgres' && !realReplica)
  console.warn('test/read-replica.test.ts: the streaming-replica tests skipped: they need root and PostgreSQL 15 with pg_createcluster and pg_basebackup (postgresql-common)');

describe.runIf(realReplica)('with a streaming replica whose replay is paused', () => {
  const name = `pont_${randomBytes(4).toString('hex')}`;
  const run = (file: string, ...args: string[]) => execFileSync(file, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let primaryUrl: string;
  let replicaUrl: string;
  let pont: RunningPont;
  let clients: Clients;
  let h: { writer: Headers; operator: Headers; accountant: Headers };

  /** Waits (polling, no fixed sleep) until the replica has replayed everything the primary has written. */
  const caughtUp = async () => {
    const target = await withClient(primaryUrl, async (c) => (await c.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!.lsn);
    await vi.waitFor(
      async () => expect(await withClient(replicaUrl, async (c) => (await c.query<{ ok: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [target])).rows[0]!.ok)).toBe(true),
      { timeout: 20_000, interval: 50 },
    );
  };

  beforeAll(async () => {
    const [primaryPort, replicaPort] = [await freePort(), await freePort()];
    run(CLUSTERS, '15', `${name}_p`, '--port', String(primaryPort), '--start', '--', '--auth=trust');
    run(CLUSTERS, '15', `${name}_r`, '--port', String(replicaPort), '--', '--auth=trust');
    const dataDir = `/var/lib/postgresql/15/${name}_r`;
    run('rm', '-rf', dataDir);
    run('install', '-d', '-o', 'postgres', '-g', 'postgres', '-m', '700', dataDir);
    run('su', 'postgres', '-c', `pg_basebackup -h 127.0.0.1 -p ${primaryPort} -U postgres -D ${dataDir} -R -X stream`);
    run('pg_ctlcluster', '15', `${name}_r`, 'start');
    primaryUrl = `postgres://postgres@127.0.0.1:${primaryPort}/pont`;
    replicaUrl = `postgres://postgres@127.0.0.1:${replicaPort}/pont`;
    await withClient(`postgres://postgres@127.0.0.1:${primaryPort}/postgres`, (c) => c.query('CREATE DATABASE pont'));
    await vi.waitFor(() => withClient(replicaUrl, (c) => c.query('SELECT 1')), { timeout: 20_000, interval: 50 });

    pont = await startPont(loadConfig({ ...BASE, DATABASE_URL: primaryUrl, DATABASE_READ_URL: replicaUrl }));
    clients = await makeClients(pont);
    h = { writer: await bearer(pont, clients.writer), operator: await bearer(pont, clients.operator), accountant: await bearer(pont, clients.accountant) };
    await createPatient(pont, h.writer, 'Early');
    await recordPayment(pont, h.writer, 'PAY-EARLY');
    await caughtUp();
    await withClient(replicaUrl, (c) => c.query('SELECT pg_wal_replay_pause()'));
  }, 180_000);

  afterAll(async () => {
    await pont?.close();
    for (const cluster of [`${name}_r`, `${name}_p`]) {
      try {
        run('pg_dropcluster', '--stop', '15', cluster);
      } catch {
        /* not made */
      }
    }
  });

  let late: string;

  it('a revoked client is refused at once; what must be current falls back to the primary; the report reads the lagging replica', async () => {
    late = await createPatient(pont, h.writer, 'Late');
    await recordPayment(pont, h.writer, 'PAY-LATE');
    await revokeClient(pont.services.db, clients.writer.client_id);
    // The replica lags: it still has the client, and not the late patient.
    expect(await revokedOn(replicaUrl, clients.writer.client_id)).toBe(false);
    expect(await revokedOn(primaryUrl, clients.writer.client_id)).toBe(true);
    expect(await withClient(replicaUrl, async (c) => (await c.query('SELECT 1 FROM fhir_resources WHERE id = $1', [late])).rowCount)).toBe(0);

    expect((await fhir(pont, h.writer, '/Patient?_count=1')).status).toBe(401);
    // The audit trail and the export must answer as the primary does: the replica has not replayed that far.
    expect(await auditedAbout(pont, h.operator, late)).toBeGreaterThan(0);
    expect(await exportedPatients(pont, h.operator)).toContain(late);
    // The day's report tolerates the lag: it reads the replica as it is...
    expect(await reportedPayments(pont, h.accountant)).toEqual(['PAY-EARLY']);
    // ...and shows the payment once the replica has replayed it.
    await withClient(replicaUrl, (c) => c.query('SELECT pg_wal_replay_resume()'));
    await caughtUp();
    expect(await reportedPayments(pont, h.accountant)).toEqual(['PAY-EARLY', 'PAY-LATE']);
  }, 60_000);

  it('with the replica down, the primary answers the lag-tolerant routes (counted), and nothing fails', async () => {
    run('pg_ctlcluster', '15', `${name}_r`, 'stop', '-m', 'fast');
    const fallbacks = async () => (await replicaFallbacks.get()).values[0]?.value ?? 0;
    const before = await fallbacks();
    expect(await reportedPayments(pont, h.accountant)).toEqual(['PAY-EARLY', 'PAY-LATE']);
    expect(await auditedAbout(pont, h.operator, late)).toBeGreaterThan(0);
    expect(await exportedPatients(pont, h.operator)).toContain(late);
    expect(await fallbacks()).toBeGreaterThanOrEqual(before + 3);
  }, 60_000);
});
