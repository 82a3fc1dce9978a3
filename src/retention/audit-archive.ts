import { createHash, randomBytes } from 'node:crypto';
import { open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import type { AuditEvent } from '@medplum/fhirtypes';
import type { Database, Queryable } from '../db/database';
import { auditEventOf, organizationOf } from '../fhir/audit-trail';
import type { AuditRecord } from '../audit/audit';
import { writeMany } from '../fhir/store/writes';
import { storedIds } from '../fhir/store/purge';
import { monthRange, type Month } from '../core/period';
import { makeDirectory } from '../core/directories';
import { monthPartitions, PARTITIONED } from './partitions';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** AuditEvents per archive file (about 30 MB of JSON before compression). */
const ROWS_PER_FILE = 20_000;
/** Rows read from the database per query, and AuditEvents written back per transaction on restore. */
const BATCH = 500;
/** The archived AuditEvent's meta.tag naming the organisation that reads it (its author in the store; none: operators only). */
export const OWNER_TAG_SYSTEM = 'https://pont.health/fhir/CodeSystem/audit-owner-organization';
const MANIFEST = 'manifest.json';
const FORMAT = 'pont-audit-archive/1';

export interface ArchiveFile {
  name: string;
  rows: number;
  bytes: number;
  sha256: string;
}

/** What an archived month holds; written last, once every file is on disk and verified. */
export interface Manifest {
  format: typeof FORMAT;
  /** The month (UTC) and the instants it covers, [from, to). */
  period: Month;
  from: string;
  to: string;
  rows: number;
  /** gzip-compressed NDJSON, one R4 AuditEvent a line (application/fhir+ndjson). */
  files: ArchiveFile[];
  created: string;
}

/** An archive that is missing, incomplete or does not match its manifest: nothing is dropped or restored from it. */
export class ArchiveError extends Error {}

export const monthDirectory = (dir: string, month: Month) => join(dir, `audit-${month}`);
const fileName = (n: number) => `auditevents-${String(n).padStart(4, '0')}.ndjson.gz`;
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** A row as archived: the AuditEvent the materialiser makes of it, tagged with the organisation that may read it. */
function archivedEvent(row: { id: string; recorded: Date | string; record: AuditRecord }): AuditEvent {
  const event = auditEventOf(row);
  const owner = organizationOf(row.record);
  return owner ? { ...event, meta: { tag: [{ system: OWNER_TAG_SYSTEM, code: owner }] } } : event;
}

/** Writes `bytes` to `path` durably: a file of its own name, fsynced, renamed into place, and the directory fsynced. */
async function writeDurably(dir: string, name: string, bytes: Buffer | string): Promise<void> {
  const temporary = join(dir, `.${name}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const file = await open(temporary, 'wx', 0o600);
  try {
    await file.writeFile(bytes);
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(temporary, join(dir, name));
  await syncDirectory(dir);
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The AuditEvents of one file, after checking its bytes against the manifest. */
async function readArchiveFile(directory: string, file: ArchiveFile, month: Month): Promise<AuditEvent[]> {
  let bytes: Buffer;
  try {
    bytes = await readFile(join(directory, file.name));
  } catch {
    throw new ArchiveError(`${file.name} is missing`);
  }
  if (bytes.length !== file.bytes || sha256(bytes) !== file.sha256) throw new ArchiveError(`${file.name} does not match its sha256 in the manifest`);
  let lines: string[];
  try {
    lines = (await gunzipAsync(bytes)).toString('utf8').split('\n').filter(Boolean);
  } catch {
    throw new ArchiveError(`${file.name} is not gzip`);
  }
  if (lines.length !== file.rows) throw new ArchiveError(`${file.name} holds ${lines.length} AuditEvents, the manifest says ${file.rows}`);
  const { from, to } = monthRange(month);
  return lines.map((line, i) => {
    let event: AuditEvent;
    try {
      event = JSON.parse(line) as AuditEvent;
    } catch {
      throw new ArchiveError(`${file.name} line ${i + 1} is not JSON`);
    }
    const recorded = Date.parse(String(event?.recorded));
    if (event?.resourceType !== 'AuditEvent' || typeof event.id !== 'string' || !(recorded >= from.getTime() && recorded < to.getTime()))
      throw new ArchiveError(`${file.name} line ${i + 1} is not an AuditEvent of ${month}`);
    return event;
  });
}

async function readManifest(directory: string, month: Month): Promise<Manifest | undefined> {
  let text: string;
  try {
    text = await readFile(join(directory, MANIFEST), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  let manifest: Manifest;
  try {
    manifest = JSON.parse(text) as Manifest;
  } catch {
    throw new ArchiveError(`${MANIFEST} of ${month} is not JSON`);
  }
  const filesOk = Array.isArray(manifest.files) && manifest.files.every((f) => typeof f?.name === 'string' && /^auditevents-\d{4}\.ndjson\.gz$/.test(f.name));
  if (manifest.format !== FORMAT || manifest.period !== month || !filesOk || manifest.rows !== manifest.files.reduce((n, f) => n + f.rows, 0))
    throw new ArchiveError(`${MANIFEST} of ${month} is not a manifest of that month`);
  return manifest;
}

/**
 * The AuditEvents of an archived month, a file at a time (a month may be larger than memory), each file checked as it
 * is read: its size and sha256 against the manifest, each line an AuditEvent of the month, the counts. Throws
 * ArchiveError at the first problem; with `required`, also when the month has no archive (else it yields nothing).
 */
export async function* archivedFiles(dir: string, month: Month, required = true): AsyncGenerator<AuditEvent[]> {
  const directory = monthDirectory(dir, month);
  const manifest = await readManifest(directory, month);
  if (!manifest && required) throw new ArchiveError(`no archive of ${month} in ${directory} (no ${MANIFEST})`);
  for (const file of manifest?.files ?? []) yield await readArchiveFile(directory, file, month);
}

/** Reads an archived month whole and checks it (archivedFiles). Returns the manifest; undefined: no archive of the month. */
export async function verifyArchive(dir: string, month: Month): Promise<Manifest | undefined> {
  for await (const _file of archivedFiles(dir, month, false));
  return readManifest(monthDirectory(dir, month), month);
}

/**
 * Archives the audit rows of `month` held in `partition` (the month's partition of audit_log, attached or detached)
 * to `dir`/audit-YYYY-MM/: gzip NDJSON files of R4 AuditEvents, each written, fsynced and read back, then the manifest,
 * last. A verified archive of the same rows is kept as it is, one of other rows refused; an interrupted run's files,
 * or a damaged archive, are replaced. Returns the verified manifest: only then may the month be dropped.
 */
export async function archiveMonth(db: Queryable, dir: string, month: Month, partition: string, now: Date, rowsPerFile = ROWS_PER_FILE): Promise<Manifest> {
  const directory = monthDirectory(dir, month);
  const { rows: counted } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${partition}`);
  const rows = Number(counted[0]!.n);
  const existing = await verifyArchive(dir, month).catch((err) => {
    if (err instanceof ArchiveError) return undefined; // a broken archive is made again from the rows
    throw err;
  });
  if (existing?.rows === rows) return existing;
  // A month's rows do not change once it has ended: a sound archive that differs is not overwritten (nor dropped).
  if (existing) throw new ArchiveError(`the archive of ${month} in ${directory} holds ${existing.rows} rows, the database ${rows}: move it away to archive the month again`);

  await makeDirectory(directory, 0o700);
  await rm(join(directory, MANIFEST), { force: true }); // from here until the new manifest, the month is not archived
  for (const name of await readdir(directory)) await rm(join(directory, name), { force: true });
  const files: ArchiveFile[] = [];
  let lines: string[] = [];
  const flush = async () => {
    const name = fileName(files.length + 1);
    const bytes = await gzipAsync(Buffer.from(lines.map((l) => `${l}\n`).join(''), 'utf8'));
    await writeDurably(directory, name, bytes);
    files.push({ name, rows: lines.length, bytes: bytes.length, sha256: sha256(bytes) });
    lines = [];
  };
  // Keyset over the primary key (id, recorded): each batch an index range, whatever the month's size.
  let after: { id: string; recorded: string } | undefined;
  for (;;) {
    const { rows: batch } = await db.query<{ id: string; recorded: Date | string; record: AuditRecord }>(
      `SELECT id, recorded, record FROM ${partition} ${after ? 'WHERE (id, recorded) > ($2::uuid, $3::timestamptz)' : ''} ORDER BY id, recorded LIMIT $1`,
      after ? [BATCH, after.id, after.recorded] : [BATCH],
    );
    for (const row of batch) {
      lines.push(JSON.stringify(archivedEvent(row)));
      if (lines.length === rowsPerFile) await flush();
    }
    if (batch.length < BATCH) break;
    const last = batch[batch.length - 1]!;
    after = { id: last.id, recorded: new Date(last.recorded).toISOString() };
  }
  if (lines.length || !files.length) await flush();
  const written = files.reduce((n, f) => n + f.rows, 0);
  if (written !== rows) throw new ArchiveError(`archived ${written} rows of ${month}, the database holds ${rows}`);
  const { from, to } = monthRange(month);
  const manifest: Manifest = { format: FORMAT, period: month, from: from.toISOString(), to: to.toISOString(), rows, files, created: now.toISOString() };
  for (const file of files) await readArchiveFile(directory, file, month); // read back from disk before it counts
  await writeDurably(directory, MANIFEST, `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

/**
 * Brings an archived month back into the FHIR store as AuditEvents (same ids, same reading organisation), searchable
 * again. The whole archive is verified first: a missing or altered file, or a line that is not an AuditEvent of the
 * month, refuses the restore before anything is written. AuditEvents the store already holds are left as they are, so
 * a restore that stopped half-way is finished by running it again. Each AuditEvent is validated against R4 as it is
 * written. Returns how many it wrote.
 */
export async function restoreMonth(db: Database, baseUrl: string, dir: string, month: Month, now: Date): Promise<{ manifest: Manifest; restored: number }> {
  const manifest = await verifyArchive(dir, month); // all of it, before anything is written
  if (!manifest) throw new ArchiveError(`no archive of ${month} in ${monthDirectory(dir, month)} (no ${MANIFEST})`);
  // While the month's rows are in audit_log, its AuditEvents are the materialiser's to make (same ids).
  const { from, to } = monthRange(month);
  const { rowCount } = await db.query('SELECT 1 FROM audit_log WHERE recorded >= $1 AND recorded < $2 LIMIT 1', [from.toISOString(), to.toISOString()]);
  if (rowCount || (await monthPartitions(db, PARTITIONED.audit)).some((p) => p.month === month))
    throw new ArchiveError(`${month} is still in the database (not yet dropped): its AuditEvents are searchable as they are`);
  let restored = 0;
  for await (const events of archivedFiles(dir, month)) {
    for (let i = 0; i < events.length; i += BATCH) {
      const batch = events.slice(i, i + BATCH);
      restored += await db.transaction(async (tx) => {
        const present = await storedIds(
          tx,
          'AuditEvent',
          batch.map((e) => e.id!),
        );
        const owners = new Map<string, string | null>();
        const items = batch
          .filter((e) => !present.has(e.id!))
          .map(({ meta, ...event }) => {
            owners.set(event.id!, meta?.tag?.find((t) => t.system === OWNER_TAG_SYSTEM)?.code ?? null);
            return { resource: event as AuditEvent, method: 'POST' as const };
          });
        if (items.length) await writeMany(tx, baseUrl, items, { authorOf: (resource) => owners.get(resource.id!) ?? null });
        return items.length;
      });
    }
  }
  await db.query(
    `INSERT INTO audit_archives (month, rows, restored_at) VALUES ($1, $2, $3) ON CONFLICT (month) DO UPDATE SET restored_at = EXCLUDED.restored_at`,
    [month, manifest.rows, now.toISOString()],
  );
  return { manifest, restored };
}
