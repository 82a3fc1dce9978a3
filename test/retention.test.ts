/**
 * Retention (issue 28): a year of synthetic months run through the retention job with a clock the test moves.
 * Audit rows go in through the audit trail's own insert (with past `recorded` times), events, deliveries and
 * attempts by SQL (their writers stamp the real time); AuditEvents are searched through the FHIR API. The audit
 * trail, events and attempts are partitioned by month and leave a month at a time; deliveries row by row.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { AuditEvent } from '@medplum/fhirtypes';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertAuditRows, type AuditRecord } from '../src/audit/audit';
import { ConfigError, loadConfig } from '../src/config';
import type { Database } from '../src/db/database';
import { listMigrations, migrate } from '../src/db/migrate';
import { openDatabase } from '../src/db/open';
import { validateFhirResource } from '../src/fhir/validate';
import { archiveMonth, ArchiveError, monthDirectory, restoreMonth, verifyArchive, type Manifest } from '../src/retention/audit-archive';
import { claimJob, releaseJob, runRetention, type PurgeById, type RetentionConfig } from '../src/retention/job';
import { ensurePartitions, monthPartitions, partitionName, PARTITIONED, type PartitionedTable } from '../src/retention/partitions';
import { monthOf, monthStart, parseRetention, type Month } from '../src/core/period';
import { startPont, type RunningPont } from '../src/server';
import { eventually } from './eventually';
import { createClient } from '../src/auth/clients';
import { backend, commandDatabase, createScratchDatabase, createTestClient, runPont, startTestServer, type TestClient, type TestServer } from './harness';

let pont: TestServer;
/** How retention purges AuditEvents in service: through the FHIR service, with its derived tables (any database: it runs on the one it is handed). */
const purge: PurgeById = (sql, type, ids) => pont.services.fhir.purgeById(sql, type, ids);
let db: Database;
let dir: string;
let auditor: TestClient;
let orgA: TestClient;

const YEAR: Month[] = Array.from({ length: 12 }, (_, i) => `2025-${String(i + 1).padStart(2, '0')}`);
const ROWS_PER_MONTH = 3;
/** The 15th of the month, noon UTC: when that month's synthetic activity happens. */
const midMonth = (month: Month) => new Date(monthStart(month).getTime() + 14 * 86_400_000 + 12 * 3_600_000);
const day = (at: Date, days: number) => new Date(at.getTime() + days * 86_400_000);

const config = (): RetentionConfig => ({
  audit: { amount: 6, unit: 'mo' },
  events: { amount: 3, unit: 'mo' },
  webhookDeliveries: { amount: 8, unit: 'w' },
  resourceVersions: undefined,
  auditRestoreHold: { amount: 30, unit: 'd' },
  auditArchiveDir: dir,
});
const NEVER: RetentionConfig = { audit: undefined, events: undefined, webhookDeliveries: undefined, resourceVersions: undefined, auditRestoreHold: undefined };

const principalA = { kind: 'client' as const, clientId: 'cli_retention_a', organizationId: 'org-a', scopes: [] };
const auditRecord = (n: number, month: Month): AuditRecord => ({
  caller: n === 0 ? { requestId: `req-${month}-anonymous` } : { principal: principalA, requestId: `req-${month}-${n}`, address: '127.0.0.1' },
  operation: 'retentionTest',
  action: 'R',
  outcome: 'success',
  patient: { id: `pat-${month}` },
});

/** One month of activity at its 15th: audit rows, an event with a delivered delivery and its attempt. */
async function seedMonth(month: Month): Promise<void> {
  const at = midMonth(month);
  await insertAuditRows(
    db,
    Array.from({ length: ROWS_PER_MONTH }, (_, n) => ({ id: randomUUID(), recorded: new Date(at.getTime() + n * 1000), record: auditRecord(n, month) })),
  );
  const event = `evt_retention_${month.replace('-', '')}`;
  await db.query(
    `INSERT INTO events (id, type, version, created_at, data, meta, organization_id) VALUES ($1, 'patient.updated', '1.0', $2, '{}', '{}', 'org-a')`,
    [event, at.toISOString()],
  );
  await db.query(
    `INSERT INTO webhook_deliveries (id, event_id, event_created_at, subscription_id, status, attempts, created_at, updated_at) VALUES ($1, $2, $3, 'whsub_retention', 'delivered', 1, $3, $3)`,
    [`whdlv_${event}`, event, at.toISOString()],
  );
  await db.query(
    `INSERT INTO webhook_delivery_attempts (delivery_id, round, attempt, started_at, duration_ms, status_code, succeeded) VALUES ($1, 1, 1, $2, 12, 200, true)`,
    [`whdlv_${event}`, at.toISOString()],
  );
}

const count = async (sql: string, params: unknown[] = []) => Number((await db.query<{ n: string }>(sql, params)).rows[0]!.n);
const auditRowsOf = (month: Month) =>
  count(`SELECT count(*) AS n FROM audit_log WHERE to_char(recorded AT TIME ZONE 'UTC', 'YYYY-MM') = $1`, [month]);

async function searchAudit(client: TestClient, month: Month): Promise<AuditEvent[]> {
  const next = monthOf(monthStart(month), 1);
  const { status, body } = await pont.json(`/api/fhir/R4/AuditEvent?subtype=retentionTest&date=ge${month}-01&date=lt${next}-01&_count=1000`, {
    headers: client.headers,
  });
  expect(status).toBe(200);
  return (body.entry ?? []).map((e: { resource: AuditEvent }) => e.resource);
}

const manifestOf = (month: Month): Manifest => JSON.parse(readFileSync(join(monthDirectory(dir, month), 'manifest.json'), 'utf8'));

beforeAll(async () => {
  pont = await startTestServer();
  db = pont.services.db;
  dir = mkdtempSync(join(tmpdir(), 'pont-audit-archive-'));
  auditor = await createTestClient(pont, ['audit:read'], { organizationId: 'org-operator', allPatients: true });
  orgA = await createTestClient(pont, ['audit:read'], { organizationId: 'org-a' });
  await db.query(
    `INSERT INTO webhook_subscriptions (id, organization_id, callback_url, subscribed_events, secret_encrypted) VALUES ('whsub_retention', 'org-a', 'https://example.org/hook', '{patient.updated}', 'x')`,
  );
  // An old event whose delivery is still pending: kept, whatever its age.
  await db.query(`INSERT INTO events (id, type, version, created_at, data, meta) VALUES ('evt_retention_pending', 'patient.updated', '1.0', '2024-06-01T00:00:00Z', '{}', '{}')`);
  await db.query(
    `INSERT INTO webhook_deliveries (id, event_id, event_created_at, subscription_id, status, next_attempt_at, created_at, updated_at) VALUES ('whdlv_pending', 'evt_retention_pending', '2024-06-01T00:00:00Z', 'whsub_retention', 'pending', '2099-01-01T00:00:00Z', '2024-06-01T00:00:00Z', '2024-06-01T00:00:00Z')`,
  );
});
afterAll(async () => {
  await pont?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe(`retention (${backend})`, () => {
  it('runs a year of months: partitions made ahead, the audit trail archived then dropped past 6 months, nothing else dropped', async () => {
    for (const month of YEAR) {
      await seedMonth(month);
      await pont.services.fhir.auditTrail.catchUp(); // the month's AuditEvents exist, as they would in service
      const now = day(midMonth(month), 1);
      const report = await runRetention(db, config(), now, purge);

      // Partitions: this month and the next two, for each partitioned table.
      for (const t of [PARTITIONED.audit, PARTITIONED.events, PARTITIONED.attempts]) {
        const months = (await monthPartitions(db, t)).map((p) => p.month);
        for (const ahead of [0, 1, 2]) expect(months).toContain(monthOf(now, ahead));
      }
      expect(await count('SELECT count(*) AS n FROM audit_log_default')).toBe(0);
      expect(await count('SELECT count(*) AS n FROM events_default')).toBe(0);
      // Audit: exactly the months that ended at least 6 months ago are gone, each archived.
      const sixMonthsAgo = new Date(now);
      sixMonthsAgo.setUTCMonth(sixMonthsAgo.getUTCMonth() - 6);
      for (const m of YEAR.filter((m) => m <= month)) {
        const past = monthStart(monthOf(monthStart(m), 1)) <= sixMonthsAgo;
        expect(await auditRowsOf(m), `${m} at ${now.toISOString()}`).toBe(past ? 0 : ROWS_PER_MONTH);
        if (past) expect(manifestOf(m).rows).toBe(ROWS_PER_MONTH);
      }
      if (month === '2025-08') expect(report.auditMonthsArchived).toEqual(['2025-01']);
      // Events: the month that ended 3 months before goes whole; June 2024 stays while its pending delivery names it.
      if (month === '2025-12') expect(report).toMatchObject({ eventMonthsDropped: ['2025-08'], eventMonthsHeld: ['2024-06'] });
    }
    // At 2025-12-16: January to May archived and dropped, with their AuditEvents; June onwards kept.
    const archived = await db.query<{ month: string; rows: string }>('SELECT month, rows FROM audit_archives ORDER BY month');
    expect(archived.rows.map((r) => [r.month, Number(r.rows)])).toEqual(YEAR.slice(0, 5).map((m) => [m, ROWS_PER_MONTH]));
    expect(await searchAudit(auditor, '2025-01')).toHaveLength(0);
    expect(await searchAudit(auditor, '2025-05')).toHaveLength(0);
    expect(await searchAudit(auditor, '2025-06')).toHaveLength(ROWS_PER_MONTH);
    expect(await count(`SELECT count(*) AS n FROM audit_log`)).toBe(7 * ROWS_PER_MONTH);

    // Attempts: months ended 8 weeks before (by 2025-10-21: January to September) dropped; finished deliveries last
    // touched before then went with their attempts; the old pending delivery stayed.
    expect((await monthPartitions(db, PARTITIONED.attempts)).map((p) => p.month)[0]).toBe('2025-10');
    const deliveries = await db.query<{ id: string }>('SELECT id FROM webhook_deliveries ORDER BY id');
    expect(deliveries.rows.map((r) => r.id)).toEqual(['whdlv_evt_retention_202511', 'whdlv_evt_retention_202512', 'whdlv_pending']);
    expect(await count('SELECT count(*) AS n FROM webhook_delivery_attempts')).toBe(2);
    // Events: the months that ended 3 months before (by 2025-09-16: January to August) dropped as partitions, but
    // June 2024, whose event a pending delivery names.
    expect((await monthPartitions(db, PARTITIONED.events)).map((p) => p.month)).toEqual(['2024-06', '2025-09', '2025-10', '2025-11', '2025-12', '2026-01', '2026-02']);
    const events = await db.query<{ id: string }>(`SELECT id FROM events WHERE id LIKE 'evt_retention_%' ORDER BY id`);
    expect(events.rows.map((r) => r.id)).toEqual(['evt_retention_202509', 'evt_retention_202510', 'evt_retention_202511', 'evt_retention_202512', 'evt_retention_pending']);
    // Read by id alone (the replay route's look-up), and through a delivery (the worker's and the listing's join).
    expect(await count(`SELECT count(*) AS n FROM events WHERE id = 'evt_retention_pending'`)).toBe(1);
    expect(
      await count(`SELECT count(*) AS n FROM webhook_deliveries d JOIN events e ON e.id = d.event_id AND e.created_at = d.event_created_at WHERE d.id = 'whdlv_pending'`),
    ).toBe(1);
  });

  it('archives each month as gzip NDJSON of valid R4 AuditEvents, the same the materialiser made, with a manifest of checksums', async () => {
    const manifest = manifestOf('2025-03');
    expect(manifest).toMatchObject({ period: '2025-03', from: '2025-03-01T00:00:00.000Z', to: '2025-04-01T00:00:00.000Z', rows: ROWS_PER_MONTH });
    const [file] = manifest.files;
    const bytes = readFileSync(join(monthDirectory(dir, '2025-03'), file!.name));
    const { createHash } = await import('node:crypto');
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(file!.sha256);
    const events = gunzipSync(bytes).toString('utf8').trim().split('\n').map((l) => JSON.parse(l) as AuditEvent);
    expect(events).toHaveLength(ROWS_PER_MONTH);
    for (const event of events) {
      expect(() => validateFhirResource(event)).not.toThrow();
      expect(event.subtype?.map((c) => c.code)).toContain('retentionTest');
    }
    // The reading organisation travels with the event: org-a's two, none for the anonymous caller's.
    expect(events.filter((e) => e.meta?.tag?.some((t) => t.code === 'org-a'))).toHaveLength(2);
  });

  it('splits a month into several files, each checked on its own', async () => {
    const other = mkdtempSync(join(tmpdir(), 'pont-audit-archive-files-'));
    try {
      const manifest = await archiveMonth(db, other, '2025-09', partitionName(PARTITIONED.audit, '2025-09'), new Date(), 2);
      expect(manifest.files.map((f) => f.rows)).toEqual([2, 1]);
      expect(await verifyArchive(other, '2025-09')).toEqual(manifest);
      rmSync(join(monthDirectory(other, '2025-09'), manifest.files[1]!.name));
      await expect(verifyArchive(other, '2025-09')).rejects.toThrow(/auditevents-0002.ndjson.gz is missing/);
      // A damaged archive is made again from the rows; a sound one of other rows is never overwritten.
      expect(await archiveMonth(db, other, '2025-09', partitionName(PARTITIONED.audit, '2025-09'), new Date(), 2)).toMatchObject({ rows: ROWS_PER_MONTH });
      const file = join(monthDirectory(other, '2025-09'), 'manifest.json');
      writeFileSync(file, JSON.stringify({ ...manifest, rows: 2, files: manifest.files.slice(0, 1) }));
      await expect(archiveMonth(db, other, '2025-09', partitionName(PARTITIONED.audit, '2025-09'), new Date(), 2)).rejects.toThrow(/holds 2 rows, the database 3/);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('restores an archived month so that an AuditEvent search finds it again, for the owning organisation too; the hold ends it', async () => {
    const baseUrl = `${pont.url}/api/fhir/R4`;
    const now = day(midMonth('2025-12'), 2);
    const first = await restoreMonth(db, baseUrl, dir, '2025-01', now);
    expect(first.restored).toBe(ROWS_PER_MONTH);
    const found = await searchAudit(auditor, '2025-01');
    expect(found).toHaveLength(ROWS_PER_MONTH);
    expect(found.every((e) => !e.meta?.tag?.length)).toBe(true);
    expect(await searchAudit(orgA, '2025-01')).toHaveLength(2);
    // Again: nothing doubled.
    expect((await restoreMonth(db, baseUrl, dir, '2025-01', now)).restored).toBe(0);
    expect(await searchAudit(auditor, '2025-01')).toHaveLength(ROWS_PER_MONTH);

    // Within the 30-day hold a run keeps it; after, the restored AuditEvents go again (the archive stays).
    await runRetention(db, config(), day(now, 29), purge);
    expect(await searchAudit(auditor, '2025-01')).toHaveLength(ROWS_PER_MONTH);
    const later = await runRetention(db, config(), day(now, 31), purge);
    expect(later.restoredMonthsDropped).toEqual(['2025-01']);
    expect(await searchAudit(auditor, '2025-01')).toHaveLength(0);
    expect(manifestOf('2025-01').rows).toBe(ROWS_PER_MONTH);
  });

  it('refuses to restore a corrupted or missing archive, writing nothing; and a month still in the database', async () => {
    const baseUrl = `${pont.url}/api/fhir/R4`;
    const now = day(midMonth('2025-12'), 2);
    const file = join(monthDirectory(dir, '2025-02'), manifestOf('2025-02').files[0]!.name);
    const bytes = readFileSync(file);
    bytes[bytes.length - 5] ^= 0xff;
    writeFileSync(file, bytes);
    await expect(restoreMonth(db, baseUrl, dir, '2025-02', now)).rejects.toThrow(/sha256/);
    expect(await searchAudit(auditor, '2025-02')).toHaveLength(0);

    const manifestFile = join(monthDirectory(dir, '2025-04'), 'manifest.json');
    const manifest = manifestOf('2025-04');
    writeFileSync(manifestFile, JSON.stringify({ ...manifest, rows: manifest.rows + 1, files: [{ ...manifest.files[0]!, rows: manifest.files[0]!.rows + 1 }] }));
    await expect(restoreMonth(db, baseUrl, dir, '2025-04', now)).rejects.toThrow(ArchiveError);
    expect(await searchAudit(auditor, '2025-04')).toHaveLength(0);

    await expect(restoreMonth(db, baseUrl, dir, '2024-01', now)).rejects.toThrow(/no archive/);
    // Archived (as `pont audit archive` does) but not dropped: its AuditEvents are the materialiser's, not a restore's.
    await archiveMonth(db, dir, '2025-08', partitionName(PARTITIONED.audit, '2025-08'), now);
    await expect(restoreMonth(db, baseUrl, dir, '2025-08', now)).rejects.toThrow(/still in the database/);
    expect(await searchAudit(auditor, '2025-08')).toHaveLength(ROWS_PER_MONTH);
  });

  it('drops nothing when every period is never, however far the clock moves', async () => {
    await pont.services.fhir.auditTrail.catchUp(); // no AuditEvent is still to be made while counting
    const tables = ['audit_log', 'events', 'webhook_deliveries', 'webhook_delivery_attempts', 'fhir_resources', 'fhir_resource_versions'];
    const before = await Promise.all(tables.map((t) => count(`SELECT count(*) AS n FROM ${t}`)));
    const report = await runRetention(db, NEVER, new Date('2040-01-01T00:00:00Z'), purge);
    expect(report).toMatchObject({ auditMonthsArchived: [], auditEventsDropped: 0, attemptMonthsDropped: [], deliveriesDeleted: 0, eventMonthsDropped: [], versionsDeleted: 0 });
    expect(await Promise.all(tables.map((t) => count(`SELECT count(*) AS n FROM ${t}`)))).toEqual(before);
  });

  it('finishes a drop interrupted after its partition was detached', async () => {
    const [oldest] = await monthPartitions(db, PARTITIONED.audit);
    const { month } = oldest!;
    expect(await searchAudit(auditor, month)).toHaveLength(ROWS_PER_MONTH);
    await db.query(`ALTER TABLE audit_log DETACH PARTITION ${oldest!.name}`);
    // The first day after the month has been over for 6 months.
    const report = await runRetention(db, config(), day(monthStart(monthOf(monthStart(month), 7)), 1), purge);
    expect(report.auditMonthsArchived).toContain(month);
    expect(manifestOf(month).rows).toBe(ROWS_PER_MONTH);
    expect((await monthPartitions(db, PARTITIONED.audit)).map((p) => p.month)).not.toContain(month);
    expect(await searchAudit(auditor, month)).toHaveLength(0);
  });

  it('goes on with the other tables when the audit archive cannot be written, and drops none of the audit trail', async () => {
    const notADirectory = join(dir, 'a-file');
    writeFileSync(notADirectory, '');
    const rows = await count('SELECT count(*) AS n FROM audit_log');
    expect(await count(`SELECT count(*) AS n FROM events WHERE id = 'evt_retention_202511'`)).toBe(1);
    const failing = { ...NEVER, audit: { amount: 1, unit: 'mo' as const }, auditArchiveDir: notADirectory, events: { amount: 1, unit: 'd' as const } };
    await expect(runRetention(db, failing, new Date('2040-01-01T00:00:00Z'), purge)).rejects.toThrow(/^retention: .*(ENOTDIR|EEXIST)/);
    expect(await count('SELECT count(*) AS n FROM audit_log')).toBe(rows);
    expect((await monthPartitions(db, PARTITIONED.audit)).every((p) => p.attached)).toBe(true);
    expect(await count(`SELECT count(*) AS n FROM events WHERE id = 'evt_retention_202511'`)).toBe(0);
  });

  it('forgets earlier resource versions replaced longer ago than their period, never the current one', async () => {
    const writer = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-a' });
    for (const name of ['First', 'Second', 'Third']) {
      const { status } = await pont.json('/api/fhir/R4/Organization/org-retention', {
        method: 'PUT',
        headers: { ...writer.headers, 'content-type': 'application/fhir+json' },
        json: { resourceType: 'Organization', id: 'org-retention', name },
      });
      expect(status).toBeLessThan(300);
    }
    const history = async () => (await pont.json('/api/fhir/R4/Organization/org-retention/_history', { headers: writer.headers })).body.entry.length;
    expect(await history()).toBe(3);
    const versions = { ...NEVER, resourceVersions: { amount: 1, unit: 'd' as const } };
    // Replaced moments ago: not yet a day.
    expect((await runRetention(db, versions, day(new Date(), 0.5), purge)).versionsDeleted).toBe(0);
    expect(await history()).toBe(3);
    expect((await runRetention(db, versions, day(new Date(), 2), purge)).versionsDeleted).toBeGreaterThanOrEqual(2);
    expect(await history()).toBe(1);
    const current = await pont.json('/api/fhir/R4/Organization/org-retention', { headers: writer.headers });
    expect(current.body.name).toBe('Third');
    expect((await pont.json('/api/fhir/R4/Organization/org-retention/_history/1', { headers: writer.headers })).status).toBe(404);
  });

  // Found by the PHP client's suite in CI: an event replayed at once was then 404 to its deliveries' listing, read
  // while the first retention pass moved the month's rows out of the default partition. A statement planned with the
  // partitions as they were scanned the default partition after the move, and not the new one: the row was in neither.
  // On a table of the test's own, shaped as the partitioned ones are, where PostgreSQL 15 shows it every time.
  it.runIf(backend === 'postgres')('a row moved out of the default partition is read by a query made during the move', async () => {
    const t = { table: 'test_moved', column: 'created_at' } as unknown as PartitionedTable;
    const at = new Date('2031-03-10T12:00:00Z');
    // The move pauses once the partition is attached, until the test lets it go: an event trigger waits on an
    // advisory lock the test holds.
    await db.exec(`CREATE TABLE test_moved (id text, created_at timestamptz NOT NULL, PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at);
      CREATE TABLE test_moved_default PARTITION OF test_moved DEFAULT;
      CREATE FUNCTION test_attach_pause() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_xact_lock_shared(4242); END $$;
      CREATE EVENT TRIGGER test_attach_pause ON ddl_command_end WHEN TAG IN ('ALTER TABLE') EXECUTE FUNCTION test_attach_pause()`);
    await db.query('INSERT INTO test_moved (id, created_at) VALUES ($1, $2)', ['moved', at.toISOString()]);
    const holder = new pg.Client({ connectionString: pont.config.databaseUrl });
    const reader = new pg.Client({ connectionString: pont.config.databaseUrl });
    await Promise.all([holder.connect(), reader.connect()]);
    try {
      const [{ pid }] = (await reader.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
      await holder.query('SELECT pg_advisory_lock(4242)');
      const made = ensurePartitions(db, t, at);
      await eventually(async () => expect((await db.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)).rows).toHaveLength(1));
      let answered = false;
      const read = reader.query('SELECT id FROM test_moved WHERE id = $1', ['moved']).finally(() => (answered = true));
      const waitsOnLock = async () => (await db.query<{ w: string }>('SELECT wait_event_type AS w FROM pg_stat_activity WHERE pid = $1', [pid])).rows[0]?.w === 'Lock';
      await eventually(async () => expect(answered || (await waitsOnLock())).toBe(true));
      await holder.query('SELECT pg_advisory_unlock(4242)');
      expect(await made).toContain('2031-03');
      expect((await read).rows).toEqual([{ id: 'moved' }]);
    } finally {
      await Promise.all([holder.end(), reader.end()]);
      await db.exec('DROP EVENT TRIGGER test_attach_pause; DROP FUNCTION test_attach_pause(); DROP TABLE test_moved');
    }
  });

  it.runIf(backend === 'postgres')('a month made ahead moves nothing and waits for no reader of the table (an outside review: every read of the table queued behind it)', async () => {
    const reader = new pg.Client({ connectionString: pont.config.databaseUrl });
    await reader.connect();
    try {
      // A transaction that has read this month's events (its partition alone) and goes on.
      await ensurePartitions(db, PARTITIONED.events, new Date());
      await reader.query('BEGIN');
      await reader.query('SELECT count(*) FROM events WHERE created_at >= $1 AND created_at < $2', [new Date(Date.now() - 3_600_000).toISOString(), new Date().toISOString()]);
      expect(await ensurePartitions(db, PARTITIONED.events, new Date('2034-06-10T12:00:00Z'))).toEqual(['2034-06', '2034-07', '2034-08']);
    } finally {
      await reader.query('COMMIT');
      await reader.end();
    }
  });

  it('lets one process at a time claim the job', async () => {
    const now = new Date('2030-01-01T00:00:00Z');
    const until = day(now, 1);
    expect(await claimJob(db, 'process-1', now, until)).toBe(true);
    expect(await claimJob(db, 'process-2', now, until)).toBe(false);
    expect(await claimJob(db, 'process-2', day(now, 2), day(now, 3))).toBe(true); // process 1's claim ran out
    await releaseJob(db, 'process-2');
    expect(await claimJob(db, 'process-1', now, until)).toBe(true);
    await releaseJob(db, 'process-1');
  });
});

describe('retention configuration', () => {
  it('parses never and periods, and refuses anything else', () => {
    expect(parseRetention('never')).toBeUndefined();
    expect(parseRetention('10y')).toEqual({ amount: 10, unit: 'y' });
    expect(parseRetention('8w')).toEqual({ amount: 8, unit: 'w' });
    for (const bad of ['', '0d', '7 years', '-1y', '12', '1h', '99999y']) expect(typeof parseRetention(bad)).toBe('string');
  });

  it('defaults to never, and needs AUDIT_ARCHIVE_DIR before any of the audit trail may be dropped', () => {
    const defaults = loadConfig({}).retention;
    expect(defaults).toMatchObject({ audit: undefined, events: undefined, webhookDeliveries: undefined, resourceVersions: undefined });
    expect(() => loadConfig({ PONT_RETENTION_AUDIT: '7y' })).toThrow(/AUDIT_ARCHIVE_DIR: required/);
    expect(() => loadConfig({ PONT_RETENTION_WEBHOOK_DELIVERIES: 'two weeks' })).toThrow(ConfigError);
    expect(loadConfig({ PONT_RETENTION_AUDIT: '7y', AUDIT_ARCHIVE_DIR: '/var/lib/pont/audit' }).retention.audit).toEqual({ amount: 7, unit: 'y' });
  });
});

describe(`pont audit archive|restore (${backend})`, () => {
  let service: RunningPont;
  let env: Record<string, string>;
  let cleanup: () => Promise<void>;
  let archiveDir: string;
  const cli = (...args: string[]) => runPont(env, ...args);

  beforeAll(async () => {
    const work = mkdtempSync(join(tmpdir(), 'pont-audit-cli-'));
    archiveDir = join(work, 'archive');
    // A database initialised and migrated (not a first start: test/embedded-database.test.ts tests that).
    const database = await commandDatabase();
    env = { LOG_LEVEL: 'error', AUDIT_ARCHIVE_DIR: archiveDir, ...database.env };
    cleanup = async () => {
      await database.cleanup();
      rmSync(work, { recursive: true, force: true });
    };
    // The service runs throughout: on PGlite the commands go through it, as they do in a deployment. Its own pass
    // (30 s after start by default) would hold the claim the commands take: not within the tests.
    service = await startPont(loadConfig({ PORT: '0', PONT_RETENTION_START_DELAY: '1h', ...env }));
    const rows = [0, 1].map((n) => ({ id: randomUUID(), recorded: midMonth('2025-03'), record: auditRecord(n + 1, '2025-03') }));
    await insertAuditRows(service.services.db, rows);
  }, 120_000);
  afterAll(async () => {
    await service?.close();
    await cleanup?.();
  });

  // A month written wrong (exit code 2, YYYY-MM named) is asked of runCli in process: test/cli-help.unit.test.ts.
  it('archives a month from the command line, refuses to restore it while it is in the database, restores it once dropped', async () => {
    const archived = await cli('audit', 'archive', '--month', '2025-03');
    expect(archived.code, archived.stderr).toBe(0);
    expect(archived.json).toMatchObject({ period: '2025-03', rows: 2, directory: join(archiveDir, 'audit-2025-03') });

    const early = await cli('audit', 'restore', '--month', '2025-03');
    expect(early.code).toBe(1);
    expect(early.stderr).toMatch(/still in the database/);

    // Retention drops it (the archive already made is verified and kept), then the command brings it back.
    const report = await runRetention(service.services.db, { ...NEVER, audit: { amount: 6, unit: 'mo' }, auditRestoreHold: { amount: 30, unit: 'd' }, auditArchiveDir: archiveDir }, new Date('2025-11-01T00:00:00Z'), purge);
    expect(report.auditMonthsArchived).toEqual(['2025-03']);
    const restored = await cli('audit', 'restore', '--month', '2025-03');
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.json).toEqual({ month: '2025-03', rows: 2, restored: 2, already_present: 0 });
    const ids = await service.services.db.query<{ id: string }>(`SELECT id FROM fhir_resources WHERE resource_type = 'AuditEvent' AND content->>'recorded' LIKE '2025-03%'`);
    expect(ids.rows).toHaveLength(2);
  }, 300_000);
});

describe(`pont retention run (${backend})`, () => {
  let service: RunningPont;
  let env: Record<string, string>;
  let cleanup: () => Promise<void>;
  let archiveDir: string;
  let auditorToken: string;
  const retentionEnv = () => ({ ...env, PONT_RETENTION_AUDIT: '90d', AUDIT_ARCHIVE_DIR: archiveDir });
  const now = new Date();
  /** A year of synthetic months, 14 to 3 months old, and this month. */
  const aged = Array.from({ length: 12 }, (_, i) => monthOf(now, i - 14));
  const months = [...aged, monthOf(now)];
  const ninetyDaysAgo = new Date(now.getTime() - 90 * 86_400_000);
  /** The months wholly older than 90 days: the ones retention archives and drops. */
  const past = aged.filter((m) => monthStart(monthOf(monthStart(m), 1)) <= ninetyDaysAgo);
  const rowsOf = async (month: Month) =>
    Number((await service.services.db.query<{ n: string }>(`SELECT count(*) AS n FROM audit_log WHERE to_char(recorded AT TIME ZONE 'UTC', 'YYYY-MM') = $1`, [month])).rows[0]!.n);
  const seed = async (month: Month) => {
    const at = new Date(Math.min(midMonth(month).getTime(), now.getTime() - 3_600_000));
    await insertAuditRows(
      service.services.db,
      Array.from({ length: ROWS_PER_MONTH }, (_, n) => ({ id: randomUUID(), recorded: new Date(at.getTime() + n * 1000), record: auditRecord(n + 1, month) })),
    );
  };
  const searchMonth = async (month: Month) => {
    const next = monthOf(monthStart(month), 1);
    const res = await fetch(`${service.url}/api/fhir/R4/AuditEvent?subtype=retentionTest&date=ge${month}-01&date=lt${next}-01&_count=100`, { headers: { authorization: `Bearer ${auditorToken}` } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { entry?: unknown[] }).entry?.length ?? 0;
  };

  beforeAll(async () => {
    const work = mkdtempSync(join(tmpdir(), 'pont-retention-run-'));
    archiveDir = join(work, 'archive');
    const database = await commandDatabase();
    env = { LOG_LEVEL: 'error', ...database.env };
    cleanup = async () => {
      await database.cleanup();
      rmSync(work, { recursive: true, force: true });
    };
    // The service keeps everything (PONT_RETENTION_AUDIT unset); the commands run with the retention settings. Its own
    // pass (30 s after start by default, well within this file on a loaded machine) would hold the claim the commands
    // take: "runs one pass at a time" then failed to claim it first.
    service = await startPont(loadConfig({ PORT: '0', PONT_RETENTION_START_DELAY: '1h', ...env }));
    for (const month of months) await seed(month);
    await service.services.fhir.auditTrail.catchUp();
    const client = await createClient(service.services.db, { name: 'auditor', organizationId: 'org-operator', scopes: ['audit:read'], allPatients: true });
    const token = await fetch(`${service.url}/api/v1/connect/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
    });
    auditorToken = ((await token.json()) as { access_token: string }).access_token;
  }, 180_000);
  afterAll(async () => {
    await service?.close();
    await cleanup?.();
  });

  it('a dry run changes nothing; the run archives, verifies and drops the months past 90 days; restore brings one back; nothing newer is lost', async () => {
    expect(past.length).toBeGreaterThanOrEqual(9);
    const dry = await runPont(retentionEnv(), 'retention', 'run', '--dry-run');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.json).toMatchObject({ dry_run: true, auditMonthsArchived: past, auditEventsDropped: past.length * ROWS_PER_MONTH });
    for (const month of months) expect(await rowsOf(month), month).toBe(ROWS_PER_MONTH);
    for (const month of past) expect(await verifyArchive(archiveDir, month)).toBeUndefined();

    const run = await runPont(retentionEnv(), 'retention', 'run');
    expect(run.code, run.stderr).toBe(0);
    expect(run.json).toMatchObject({ dry_run: false, auditMonthsArchived: past, auditEventsDropped: past.length * ROWS_PER_MONTH });
    for (const month of months) {
      const dropped = past.includes(month);
      expect(await rowsOf(month), month).toBe(dropped ? 0 : ROWS_PER_MONTH);
      expect(await searchMonth(month), month).toBe(dropped ? 0 : ROWS_PER_MONTH);
      if (dropped) expect((await verifyArchive(archiveDir, month))?.rows, month).toBe(ROWS_PER_MONTH);
    }
    // A second pass finds nothing more to do.
    const again = await runPont(retentionEnv(), 'retention', 'run');
    expect(again.json).toMatchObject({ auditMonthsArchived: [], auditEventsDropped: 0 });

    const restored = await runPont(retentionEnv(), 'audit', 'restore', '--month', past[0]!);
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.json).toEqual({ month: past[0], rows: ROWS_PER_MONTH, restored: ROWS_PER_MONTH, already_present: 0 });
    expect(await searchMonth(past[0]!)).toBe(ROWS_PER_MONTH);
  }, 300_000);

  it('runs one pass at a time: refused (exit code 1, the holder named) while another process holds the claim', async () => {
    const other = `another-host:4242:${randomUUID().slice(0, 8)}`;
    expect(await claimJob(service.services.db, other, new Date(), new Date(Date.now() + 3_600_000))).toBe(true);
    try {
      const refused = await runPont(retentionEnv(), 'retention', 'run');
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(other);
    } finally {
      await releaseJob(service.services.db, other);
    }
  }, 120_000);

  it('accepts periods as short as 1d, and the service runs a first pass shortly after start (PONT_RETENTION_START_DELAY), not an hour later', async () => {
    expect(loadConfig({ PONT_RETENTION_EVENTS: '1d', PONT_RETENTION_WEBHOOK_DELIVERIES: '1d' }).retention).toMatchObject({ events: { amount: 1, unit: 'd' }, webhookDeliveries: { amount: 1, unit: 'd' } });
    const old = monthOf(now, -24);
    await seed(old);
    // A restart with retention on: the month two years old goes within seconds of the start.
    await service.close();
    service = await startPont(loadConfig({ PORT: '0', ...retentionEnv(), PONT_RETENTION_START_DELAY: '100ms' }));
    await eventually(async () => expect((await verifyArchive(archiveDir, old))?.rows).toBe(ROWS_PER_MONTH), { timeoutMs: 60_000, intervalMs: 200 });
    await eventually(async () => expect(await rowsOf(old)).toBe(0), { timeoutMs: 60_000, intervalMs: 200 });
    for (const month of months.filter((m) => !past.includes(m))) expect(await rowsOf(month), month).toBe(ROWS_PER_MONTH);
  }, 300_000);
});

describe(`migrations 024 and 027 (${backend})`, () => {
  it('moves existing audit rows, events and attempts into the partitioned tables, ids going on; the job then gives each month its partition', async () => {
    const scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
    const old = await openDatabase({ databaseUrl: scratch?.url });
    try {
      // The database as it was before 024, with rows.
      await old.exec('CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
      for (const m of listMigrations().filter((m) => m.version < '024')) {
        await old.exec(m.sql);
        await old.query('INSERT INTO schema_migrations (version) VALUES ($1)', [m.version]);
      }
      const rows = ['2024-11', '2025-01'].map((month, n) => ({ id: randomUUID(), recorded: midMonth(month), record: auditRecord(n, month) }));
      // Written as that schema's service wrote them (today's insertAuditRows reads tables added since, e.g. 033's).
      for (const r of rows)
        await old.query(
          `INSERT INTO audit_log (id, recorded, action, outcome, operation, actor, organization_id, patients, purpose, request_id, record)
           VALUES ($1, $2, $3, $4, $5, NULL, NULL, $6, NULL, NULL, $7)`,
          [r.id, r.recorded.toISOString(), r.record.action, r.record.outcome, r.record.operation, [r.record.patient?.id].filter(Boolean), JSON.stringify(r.record)],
        );
      await old.query(`INSERT INTO events (id, type, version, created_at, data, meta) VALUES ('evt_old', 'patient.updated', '1.0', '2024-12-20T00:00:00Z', '{}', '{}')`);
      await old.query(`INSERT INTO webhook_subscriptions (id, organization_id, callback_url, subscribed_events, secret_encrypted) VALUES ('whsub_old', 'org-a', 'https://example.org/hook', '{patient.updated}', 'x')`);
      await old.query(`INSERT INTO webhook_deliveries (id, event_id, subscription_id, status) VALUES ('whdlv_old', 'evt_old', 'whsub_old', 'delivered')`);
      const attempt = `INSERT INTO webhook_delivery_attempts (delivery_id, round, attempt, started_at, duration_ms, succeeded) VALUES ('whdlv_old', 1, $1, '2024-11-15T00:00:00Z', 5, false) RETURNING id`;
      const before = await old.query<{ id: string }>(attempt, [1]);

      expect(await migrate(old)).toEqual(expect.arrayContaining(['024_retention', '027_events_partitioned']));
      const kept = await old.query<{ id: string; recorded: Date }>('SELECT id, recorded FROM audit_log ORDER BY recorded');
      expect(kept.rows.map((r) => r.id)).toEqual(rows.map((r) => r.id));
      const after = await old.query<{ id: string }>(attempt, [2]);
      expect(BigInt(after.rows[0]!.id)).toBeGreaterThan(BigInt(before.rows[0]!.id));
      // The delivery now carries its event's time (the events' partition key); the events' seq goes on.
      const delivery = await old.query<{ at: Date }>(`SELECT event_created_at AS at FROM webhook_deliveries WHERE id = 'whdlv_old'`);
      expect(new Date(delivery.rows[0]!.at).toISOString()).toBe('2024-12-20T00:00:00.000Z');
      await old.query(`INSERT INTO events (id, type, version, created_at, data, meta) VALUES ('evt_new', 'patient.updated', '1.0', '2025-01-20T00:00:00Z', '{}', '{}')`);
      const seqs = await old.query<{ seq: string }>(`SELECT seq FROM events WHERE id IN ('evt_old', 'evt_new') ORDER BY created_at`);
      expect(BigInt(seqs.rows[1]!.seq)).toBeGreaterThan(BigInt(seqs.rows[0]!.seq));

      await runRetention(old, NEVER, new Date('2025-02-01T00:00:00Z'), purge);
      expect((await monthPartitions(old, PARTITIONED.audit)).map((p) => p.month)).toEqual(['2024-11', '2025-01', '2025-02', '2025-03', '2025-04']);
      expect((await monthPartitions(old, PARTITIONED.attempts)).map((p) => p.month)).toEqual(['2024-11', '2025-02', '2025-03', '2025-04']);
      expect((await monthPartitions(old, PARTITIONED.events)).map((p) => p.month)).toEqual(['2024-12', '2025-01', '2025-02', '2025-03', '2025-04']);
      for (const t of ['audit_log_default', 'events_default'])
        expect(Number((await old.query<{ n: string }>(`SELECT count(*) AS n FROM ${t}`)).rows[0]!.n), t).toBe(0);
      expect(Number((await old.query<{ n: string }>('SELECT count(*) AS n FROM webhook_delivery_attempts')).rows[0]!.n)).toBe(2);

      if (scratch) {
        // A transaction reading the trail holds it: the drop gives up within the lock timeout rather than queue every
        // audit insert behind it, and the next run, free, completes.
        const archive = mkdtempSync(join(tmpdir(), 'pont-audit-archive-lock-'));
        const audit = { ...NEVER, audit: { amount: 1, unit: 'mo' as const }, auditArchiveDir: archive };
        const reader = new pg.Client({ connectionString: scratch.url });
        await reader.connect();
        try {
          await reader.query('BEGIN');
          await reader.query('SELECT count(*) FROM audit_log');
          await expect(runRetention(old, audit, new Date('2025-03-01T00:00:00Z'), purge)).rejects.toThrow(/lock timeout/);
          await reader.query('ROLLBACK');
          expect((await runRetention(old, audit, new Date('2025-03-01T00:00:00Z'), purge)).auditMonthsArchived).toEqual(['2024-11', '2025-01']);
        } finally {
          await reader.end();
          rmSync(archive, { recursive: true, force: true });
        }
      }
    } finally {
      await old.close();
      await scratch?.drop();
    }
  });
});
