import type { Resource } from '@medplum/fhirtypes';
import type { Queryable } from '../../db/database';
import { arrayLiteral } from '../../db/sql';
import { ApiError, ErrorCode, badRequest } from '../../core/errors';
import { checkResources, type Checked } from '../check';
import type { Link } from '../compartment';
import { INDEX_TABLES, type IndexRows } from '../indexer';
import { checkType, ID_PATTERN, versionTag } from './types';

export type WriteMethod = 'POST' | 'PUT' | 'DELETE';

export interface WriteItem {
  resource: Resource;
  method: WriteMethod;
  /** `W/"3"` or `3`: the write happens only if the current version is this one (else 412). */
  ifMatch?: string;
  /** Prefixed to error messages about this item (e.g. `entry[3]`). */
  label?: string;
}

export interface WriteResult<T extends Resource = Resource> {
  /** What was stored (for a delete: the type and id). */
  resource: T;
  /** True when the write created the resource (201), false when it updated or deleted it. */
  created: boolean;
  /** The version this write replaced (undefined for a create, or a delete of something absent). */
  previous?: Resource;
  /** False for a delete of something already absent: nothing changed. */
  changed: boolean;
  method: WriteMethod;
  /** The patients the stored version is filed under (src/fhir/compartment.ts accessPatients); for a delete, the last version's. */
  patients: string[];
  /** The patients the replaced version was filed under (none for a create). */
  previousPatients: string[];
  /** The local references of the stored version (none for a delete), as its checks found them. */
  links: Link[];
}

/** What the repository decides for each write, called once the current version is locked. */
export interface WriteHooks {
  /** Returns the resource to store (e.g. with the Health ID a Patient must keep); may throw ApiError. */
  prepare?(resource: Resource, previous: Resource | undefined): Promise<Resource> | Resource;
  /** Organisation recorded as author of a resource this write creates (updates keep the first author). */
  authorOf?(resource: Resource): string | null;
  /** Resources Pont builds itself with code whose output a test validates (the audit trail's AuditEvents): not validated again. */
  trusted?: boolean;
  /**
   * The check of bindings to the value sets loaded into Pont (src/fhir/term/lookup.ts), after the resources' own
   * validation: a refusal for each resource, or undefined.
   */
  checkBindings?(resources: Resource[]): Promise<Array<ApiError | undefined>>;
}

interface LockedRow {
  rid: string;
  resource_type: string;
  id: string;
  version_id: string;
  deleted: boolean;
  content: Resource | null;
  patients: string[] | null;
}

/** Index rows and links of one stored version, inserted together (one statement for a whole write). */
export interface PendingIndex {
  rid: string;
  rows: IndexRows;
  links: Link[];
}

const INDEX_COLUMNS: Record<(typeof INDEX_TABLES)[number], { columns: string[]; types: string[] }> = {
  token: { columns: ['hash_identity', 'hash_value', 'hash_sys_value', 'system', 'value', 'display'], types: ['bigint', 'bigint', 'bigint', 'text', 'text', 'text'] },
  string: { columns: ['hash_identity', 'hash_exact', 'value_norm'], types: ['bigint', 'bigint', 'text'] },
  date: { columns: ['hash_identity', 'low', 'high'], types: ['bigint', 'timestamptz', 'timestamptz'] },
  number: { columns: ['hash_identity', 'low', 'high'], types: ['bigint', 'numeric', 'numeric'] },
  quantity: { columns: ['hash_identity', 'value', 'system', 'code', 'unit'], types: ['bigint', 'numeric', 'text', 'text', 'text'] },
  reference: { columns: ['hash_identity', 'target_type', 'target_id'], types: ['bigint', 'text', 'text'] },
  uri: { columns: ['hash_identity', 'value'], types: ['bigint', 'text'] },
};

const key = (type: string, id: string) => `${type}/${id}`;

/**
 * Writes new versions of many resources with a handful of statements: locks the current rows,
 * checks If-Match, lets the caller prepare each resource, validates and indexes them (src/fhir/check.ts),
 * archives the current versions (server-side copy), stores the new ones and replaces their index rows and links.
 * Results are in the order of `items`; of several bad items, the first is reported. With `pending`, index rows are
 * collected there instead of inserted (bundles insert them once for all their writes).
 */
export async function writeMany(
  tx: Queryable,
  base: string,
  items: WriteItem[],
  hooks: WriteHooks = {},
  pending?: PendingIndex[],
  depth = 0,
): Promise<WriteResult[]> {
  for (const { resource } of items) {
    checkType(resource.resourceType);
    if (!resource.id || !ID_PATTERN.test(resource.id)) throw badRequest(`Invalid resource id "${resource.id}"`);
  }
  // Creates carry ids generated for them: only updates and deletes have a current row to lock.
  const known = items.filter((i) => i.method !== 'POST');
  const { rows: existing } = known.length
    ? await tx.query<LockedRow>(
        `SELECT r.rid, r.resource_type, r.id, r.version_id, r.deleted, r.content, r.patients FROM fhir_resources r
         JOIN unnest($1::text[], $2::text[]) AS k(t, i) ON r.resource_type = k.t AND r.id = k.i
         ORDER BY r.rid FOR UPDATE OF r`,
        [known.map((i) => i.resource.resourceType), known.map((i) => i.resource.id)],
      )
    : { rows: [] as LockedRow[] };
  const current = new Map(existing.map((row) => [key(row.resource_type, row.id), row]));
  // meta.lastUpdated on the database's clock, read once this transaction has its id: a bulk export's transactionTime
  // is taken on the same clock, and the export waits for every transaction that had an id before it (migration 028),
  // so no write dated before transactionTime commits after the export has read past it.
  const { rows: clock } = await tx.query<{ now: string }>(
    `WITH id AS MATERIALIZED (SELECT pg_current_xact_id()) SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS now FROM id`,
  );
  const now = clock[0]!.now;
  const results: WriteResult[] = new Array(items.length);
  const updates: Array<{ index: number; rid: string; versionId: string; method: WriteMethod; content: Resource | null }> = [];
  const inserts: Array<{ index: number; versionId: string; method: WriteMethod; content: Resource }> = [];

  const plan = async ({ resource: input, method, ifMatch }: WriteItem, index: number) => {
    const { resourceType, id } = input;
    const cur = current.get(key(resourceType, id!));
    const previous = cur && !cur.deleted ? (cur.content ?? undefined) : undefined;
    if (ifMatch !== undefined) {
      const expected = versionTag(ifMatch);
      if (!cur || cur.deleted || cur.version_id !== expected)
        throw new ApiError(412, ErrorCode.preconditionFailed, `Version conflict: ${resourceType}/${id} is not at version ${expected}`);
    }
    if (method === 'DELETE' && !previous) {
      // Deleting what is already deleted succeeds (idempotent); the repository answers 404 for what never was.
      results[index] = { resource: input, created: false, changed: false, method, patients: cur?.patients ?? [], previousPatients: cur?.patients ?? [], links: [] };
      return;
    }
    const versionId = cur ? String(Number(cur.version_id) + 1) : '1';
    let content: Resource | null = null;
    if (method !== 'DELETE') {
      const prepared = hooks.prepare ? await hooks.prepare(input, previous) : input;
      content = { ...prepared, meta: { ...prepared.meta, versionId, lastUpdated: now } } as Resource;
    }
    const previousPatients = (previous && cur?.patients) || [];
    results[index] = { resource: content ?? input, created: !previous && method !== 'DELETE', previous, changed: true, method, patients: previousPatients, previousPatients, links: [] };
    if (cur) updates.push({ index, rid: cur.rid, versionId, method, content });
    else inserts.push({ index, versionId, method, content: content! });
  };
  const labelled = (err: unknown, index: number) => {
    const label = items[index]?.label;
    return label && err instanceof ApiError ? new ApiError(err.status, err.code, `${label}: ${err.message}`, err.options) : err;
  };
  // Plan in order up to the first item that cannot be written; the items before it are validated too, so
  // that the first bad item is the one reported, whatever is wrong with it.
  let refused: { index: number; err: unknown } | undefined;
  for (let index = 0; index < items.length && !refused; index++) {
    try {
      await plan(items[index], index);
    } catch (err) {
      // A refusal of the item goes on to the checks below; anything else (the database's: a lost race, a deadlock) has
      // aborted the transaction, where no check can run (25P02 would hide it, and a lost race would not be retried).
      if (!(err instanceof ApiError)) throw err;
      refused = { index, err };
    }
  }
  const stored = [...updates, ...inserts].filter((w) => w.content).sort((a, b) => a.index - b.index);
  const checks = await checkResources(stored.map((w) => w.content!), base, !hooks.trusted);
  const checked = new Map<number, Checked>();
  stored.forEach((w, k) => {
    const outcome = checks[k]!;
    if (outcome instanceof ApiError) {
      if (!refused || w.index < refused.index) refused = { index: w.index, err: outcome };
    } else checked.set(w.index, outcome);
  });
  // Bindings to loaded value sets, of the resources valid so far (a statement only when a value set is loaded).
  const valid = stored.filter((w) => checked.has(w.index));
  if (hooks.checkBindings && valid.length && !hooks.trusted) {
    const refusals = await hooks.checkBindings(valid.map((w) => w.content!));
    valid.forEach((w, k) => {
      const err = refusals[k];
      if (err && (!refused || w.index < refused.index)) refused = { index: w.index, err };
    });
  }
  if (refused) throw labelled(refused.err, refused.index);
  for (const [index, c] of checked) Object.assign(results[index]!, { patients: c.patients, links: c.links });

  const indexed: PendingIndex[] = [];
  const toIndex = (rid: string, index: number) => indexed.push({ rid, rows: checked.get(index)!.rows, links: checked.get(index)!.links });
  // A delete keeps the patients of the version it ends: every version stays governed by its own patients.
  const patientsOf = (index: number) => results[index]!.patients;
  if (updates.length) {
    const rids = updates.map((u) => u.rid);
    await tx.query(
      `INSERT INTO fhir_resource_versions (rid, version_id, last_updated, method, content, patients)
       SELECT rid, version_id, last_updated, method, content, patients FROM fhir_resources WHERE rid = ANY($1::bigint[])`,
      [rids],
    );
    await tx.query(
      `UPDATE fhir_resources r SET version_id = u.v, last_updated = $1, method = u.m, deleted = c.value = 'null'::jsonb,
         content = CASE WHEN c.value = 'null'::jsonb THEN NULL ELSE c.value END, patients = ARRAY(SELECT jsonb_array_elements_text(p.value))
       FROM unnest($2::bigint[], $3::bigint[], $4::text[]) WITH ORDINALITY AS u(rid, v, m, k)
       JOIN jsonb_array_elements($5::jsonb) WITH ORDINALITY AS c(value, k) ON c.k = u.k
       JOIN jsonb_array_elements($6::jsonb) WITH ORDINALITY AS p(value, k) ON p.k = u.k
       WHERE r.rid = u.rid`,
      [
        now,
        rids,
        updates.map((u) => u.versionId),
        updates.map((u) => u.method),
        // Contents and patients as one JSON array each: cheaper on both sides than an array literal of JSON texts.
        JSON.stringify(updates.map((u) => u.content)),
        JSON.stringify(updates.map((u) => patientsOf(u.index))),
      ],
    );
    await tx.query(
      `WITH ${[...INDEX_TABLES.map((t) => `fhir_idx_${t}`), 'fhir_links'].map((t) => `d_${t} AS (DELETE FROM ${t} WHERE rid = ANY($1::bigint[]))`).join(', ')} SELECT 1`,
      [rids],
    );
    for (const u of updates) if (u.content) toIndex(u.rid, u.index);
  }
  if (inserts.length) {
    const { rows: created } = await tx.query<{ rid: string; resource_type: string; id: string }>(
      `INSERT INTO fhir_resources (resource_type, id, version_id, last_updated, method, deleted, content, patients, author_org)
       SELECT n.t, n.i, n.v, $1, n.m, false, c.value, ARRAY(SELECT jsonb_array_elements_text(p.value)), n.a
       FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[]) WITH ORDINALITY AS n(t, i, v, m, a, k)
       JOIN jsonb_array_elements($7::jsonb) WITH ORDINALITY AS c(value, k) ON c.k = n.k
       JOIN jsonb_array_elements($8::jsonb) WITH ORDINALITY AS p(value, k) ON p.k = n.k
       ON CONFLICT (resource_type, id) DO NOTHING RETURNING rid, resource_type, id`,
      [
        now,
        inserts.map((n) => n.content.resourceType),
        inserts.map((n) => n.content.id),
        inserts.map((n) => n.versionId),
        inserts.map((n) => n.method),
        inserts.map((n) => hooks.authorOf?.(n.content) ?? null),
        JSON.stringify(inserts.map((n) => n.content)),
        JSON.stringify(inserts.map((n) => patientsOf(n.index))),
      ],
    );
    const rids = new Map(created.map((row) => [key(row.resource_type, row.id), row.rid]));
    const raced: number[] = [];
    for (const n of inserts) {
      const rid = rids.get(key(n.content.resourceType, n.content.id!));
      if (rid) toIndex(rid, n.index);
      else raced.push(n.index);
    }
    if (raced.length) {
      // Another transaction created these ids first: write again, now as updates of its rows.
      if (depth >= 2) throw new ApiError(409, ErrorCode.conflict, 'Concurrent writes to the same resources');
      const again = await writeMany(tx, base, raced.map((i) => items[i]), hooks, pending, depth + 1);
      raced.forEach((i, k) => (results[i] = again[k]));
    }
  }
  if (pending) pending.push(...indexed);
  else await insertIndexRows(tx, indexed);
  return results;
}

/** Inserts the index rows and links of many resources with one statement (unnest of column arrays per table). */
export async function insertIndexRows(tx: Queryable, batch: PendingIndex[]): Promise<void> {
  // Each table's rows go as one typed array per column: PostgreSQL reads them at two thirds of the cost of a JSON
  // array of rows, whose every value it extracted (->>) and cast one by one: most of an import's database time.
  const params: unknown[] = [];
  const inserts: string[] = [];
  const add = (table: string, columns: string[], types: string[], rows: unknown[][]) => {
    if (!rows.length) return;
    const arrays = types.map((t, i) => `$${params.push(arrayLiteral(rows.map((row) => row[i])))}::${t}[]`).join(', ');
    inserts.push(`i_${table} AS (INSERT INTO ${table} (${columns.join(', ')}) SELECT * FROM unnest(${arrays}))`);
  };
  for (const table of INDEX_TABLES) {
    const { columns, types } = INDEX_COLUMNS[table];
    const rows: unknown[][] = [];
    for (const { rid, rows: indexRows } of batch) for (const row of indexRows[table] as unknown[][]) rows.push([rid, ...row]);
    add(`fhir_idx_${table}`, ['rid', ...columns], ['bigint', ...types], rows);
  }
  const links: unknown[][] = [];
  for (const { rid, links: ls } of batch) for (const l of ls) links.push([rid, l.targetType, l.targetId, l.path]);
  add('fhir_links', ['rid', 'target_type', 'target_id', 'path'], ['bigint', 'text', 'text', 'text'], links);
  if (inserts.length) await tx.query(`WITH ${inserts.join(', ')} SELECT 1`, params);
}
