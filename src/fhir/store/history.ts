import type { Bundle, BundleLink, Resource } from '@medplum/fhirtypes';
import type { Queryable } from '../../db/database';
import { ApiError, ErrorCode, badRequest } from '../../core/errors';
import { patientCompartmentParams } from '../../core/fhir-definitions';
import { hashKey } from '../../core/hash';
import { indexedParams } from '../indexer';
import { decodeCursor, encodeCursor, type Cursor } from '../search/parse';
import { and, ident, paddedRows, rowsOf, sql, type Sql } from '../../db/sql';
import { MAX_INCLUDED, R, keysetLinks, keysetPage, type SearchAccess } from './search';
import type { RowFilter } from './types';
import { withFiledPatients } from './filed';

/** One stored version as a point read finds it, and whether the caller may see it. */
export interface StoredVersion<T extends Resource = Resource> {
  deleted: boolean;
  content: T | null;
  versionId: string;
  lastUpdated: Date;
  /** The access rule's verdict on this resource (true when the caller may see every row). */
  allowed: boolean;
}

interface VersionRow {
  id: string;
  version_id: string;
  last_updated: Date | string;
  method: 'POST' | 'PUT' | 'DELETE';
  deleted: boolean;
  content: Resource | null;
  allowed: boolean;
  /** The row's patients, where the statement reads them. */
  patients?: string[] | null;
}

/** The access rule's verdict on the row of `alias` as a column (true when the caller may see every row). */
const allowedColumn = (rowFilter: RowFilter | undefined, alias: string, type: string | undefined) => sql`(${rowFilter?.(ident(alias), type) ?? sql`true`}) AS allowed`;

const toStored = <T extends Resource>(row: VersionRow | undefined): StoredVersion<T> | undefined =>
  row && { deleted: row.deleted, content: withFiledPatients(row.content as T | null, row.patients), versionId: String(row.version_id), lastUpdated: new Date(row.last_updated), allowed: row.allowed };

/**
 * The current, live resources of `refs` (`Type/id`) that `visible` (a condition on the row `r`) lets through, in one
 * query, keyed by reference: what a page of records refers to (src/records).
 */
export async function readReferenced(db: Queryable, refs: string[], visible: (r: ReturnType<typeof ident>) => Sql): Promise<Map<string, Resource>> {
  const found = new Map<string, Resource>();
  if (!refs.length) return found;
  // Padded (a reference found twice is kept once): a records page's references were a statement text per count,
  // planned custom with the access rule (~2 ms) where its generic plan takes ~0.2 ms.
  const wanted = paddedRows(refs.map((ref) => [ref.slice(0, ref.indexOf('/')), ref.slice(ref.indexOf('/') + 1)]));
  const r = ident('r');
  const { text, values } = sql`SELECT r.resource_type, r.id, r.content FROM fhir_resources r
     JOIN ${rowsOf('wanted', [['resource_type', 'text'], ['id', 'text']], wanted)} ON r.resource_type = wanted.resource_type AND r.id = wanted.id
     WHERE ${and(sql`NOT r.deleted`, visible(r))}`.render();
  const { rows } = await db.query<{ resource_type: string; id: string; content: Resource }>(text, values);
  for (const row of rows) found.set(`${row.resource_type}/${row.id}`, row.content);
  return found;
}

/** The current version of a resource, or undefined when it never existed. */
export async function readVersion<T extends Resource>(db: Queryable, type: string, id: string, rowFilter?: RowFilter): Promise<StoredVersion<T> | undefined> {
  const { text, values } = sql`SELECT r.id, r.version_id, r.last_updated, r.deleted, r.content, r.patients, ${allowedColumn(rowFilter, 'r', type)} FROM fhir_resources r
     WHERE r.resource_type = ${type} AND r.id = ${id}`.render();
  const { rows } = await db.query<VersionRow>(text, values);
  return toStored<T>(rows[0]);
}

/**
 * Which of these resources of one type (current versions, ids) the access rule lets through, in one statement: what
 * readVersion's `allowed` says of each, for many (the FHIR Subscriptions fan-out asks it once per subscriber and type).
 */
export async function allowedIds(db: Queryable, type: string, ids: string[], rowFilter?: RowFilter): Promise<Set<string>> {
  if (!ids.length) return new Set();
  const { text, values } = sql`SELECT r.id, ${allowedColumn(rowFilter, 'r', type)} FROM fhir_resources r
     WHERE r.resource_type = ${type} AND r.id = ANY(${ids}::text[])`.render();
  const { rows } = await db.query<{ id: string; allowed: boolean }>(text, values);
  return new Set(rows.filter((r) => r.allowed).map((r) => r.id));
}

/**
 * Every version of the resources that `where` (conditions on the current row `r`) selects, as rows with the
 * columns the access rule reads: each version carries its own patients (versions archived before migration
 * 018 have none of their own and are judged by their resource's).
 */
const allVersions = (where: Sql) => sql`
  SELECT r.resource_type, r.id, r.version_id, r.last_updated, r.method, r.deleted, r.content, r.patients, r.author_org FROM fhir_resources r WHERE ${where}
  UNION ALL
  SELECT r.resource_type, r.id, h.version_id, h.last_updated, h.method, h.content IS NULL, h.content, COALESCE(h.patients, r.patients), r.author_org
  FROM fhir_resource_versions h JOIN fhir_resources r ON r.rid = h.rid WHERE ${where}`;

/** One version of a resource (current or earlier), or undefined. Access is judged on that version's patients. */
export async function readOneVersion<T extends Resource>(
  db: Queryable,
  type: string,
  id: string,
  versionId: string,
  rowFilter?: RowFilter,
): Promise<StoredVersion<T> | undefined> {
  if (!/^\d{1,18}$/.test(versionId)) return undefined;
  const { text, values } = sql`SELECT x.id, x.version_id, x.last_updated, x.deleted, x.content, x.patients, ${allowedColumn(rowFilter, 'x', type)}
     FROM (${allVersions(sql`r.resource_type = ${type} AND r.id = ${id}`)}) x WHERE x.version_id = ${versionId}::bigint`.render();
  const { rows } = await db.query<VersionRow>(text, values);
  return toStored<T>(rows[0]);
}

/** One version of many resources, as readOneVersion finds each (its `allowed` judged on that version's patients), and the version's patients. */
export interface FoundVersion extends StoredVersion {
  type: string;
  id: string;
  patients: string[];
}

/**
 * Versions of many resources (`refs`: type, id, versionId) in one statement, each as readOneVersion finds it, with the
 * access rule's verdict on it (`rowFilter`, given the type when every ref is of one) and the version's patients: the
 * FHIR Subscriptions' notifications read a batch of events' focus resources so. Absent from the answer: never existed.
 */
export async function readVersions(db: Queryable, refs: Array<{ type: string; id: string; versionId: string }>, rowFilter?: RowFilter): Promise<FoundVersion[]> {
  const wanted = refs.filter((r) => /^\d{1,18}$/.test(r.versionId));
  if (!wanted.length) return [];
  const types = [...new Set(wanted.map((r) => r.type))];
  const where = sql`(r.resource_type, r.id) IN (SELECT w.type, w.id FROM unnest(${wanted.map((r) => r.type)}::text[], ${wanted.map((r) => r.id)}::text[]) AS w(type, id))`;
  const { text, values } = sql`SELECT x.resource_type, x.id, x.version_id, x.last_updated, x.deleted, x.content, x.patients,
       ${allowedColumn(rowFilter, 'x', types.length === 1 ? types[0]! : undefined)}
     FROM (${allVersions(where)}) x
     JOIN unnest(${wanted.map((r) => r.type)}::text[], ${wanted.map((r) => r.id)}::text[], ${wanted.map((r) => r.versionId)}::bigint[]) AS w(type, id, version_id)
       ON x.resource_type = w.type AND x.id = w.id AND x.version_id = w.version_id`.render();
  const { rows } = await db.query<VersionRow & { resource_type: string; patients: string[] | null }>(text, values);
  return rows.map((row) => ({ ...toStored(row)!, type: row.resource_type, id: row.id, patients: row.patients ?? [] }));
}

/**
 * Instance history (`id` given) or type history, newest first; versions the caller may not see are left out
 * (the rule is judged on each version's own patients: a deleted resource's history stays its patients').
 */
export async function historyBundle(
  db: Queryable,
  base: string,
  type: string,
  id: string | undefined,
  params: { count?: number; since?: string; before?: string },
  rowFilter?: RowFilter,
): Promise<Bundle> {
  const count = Math.min(params.count ?? 50, 1000);
  const where = and(sql`r.resource_type = ${type}`, id !== undefined && sql`r.id = ${id}`);
  const outer = and(
    rowFilter?.(ident('h'), type),
    !!params.since && sql`h.last_updated >= ${params.since}::timestamptz`,
    !!params.before && sql`h.last_updated < ${params.before}::timestamptz`,
  );
  const { text, values } = sql`SELECT h.id, h.version_id, h.last_updated, h.method, h.content, h.patients FROM (${allVersions(where)}) h
     WHERE ${outer} ORDER BY h.last_updated DESC, h.version_id DESC LIMIT ${count}`.render();
  const { rows } = await db.query<VersionRow>(text, values);
  return {
    resourceType: 'Bundle',
    type: 'history',
    entry: rows.map((row) => ({
      fullUrl: `${base}/${type}/${row.id}`,
      ...(row.content ? { resource: withFiledPatients(row.content, row.patients) } : {}),
      request: { method: row.method, url: row.method === 'POST' ? type : `${type}/${row.id}` },
      response: {
        status: row.method === 'POST' ? '201 Created' : row.method === 'DELETE' ? '204 No Content' : '200 OK',
        etag: `W/"${row.version_id}"`,
        lastModified: new Date(row.last_updated).toISOString(),
      },
    })),
  };
}

export interface EverythingParams {
  count?: number;
  cursor?: string;
  since?: string;
  /** Where the self and next links point (default: this server's `Patient/{id}/$everything`). */
  linkBase?: string;
}

/**
 * Patient/$everything: the patient, every resource of the patient's compartment (R4
 * CompartmentDefinition) the caller may see, and the resources those refer to, paged by `_count`.
 * The caller has already been allowed to see `patient`.
 */
export async function everythingBundle(db: Queryable, base: string, patient: Resource, params: EverythingParams, access: SearchAccess): Promise<Bundle> {
  const patientId = patient.id!;
  const count = Math.min(params.count ?? 100, MAX_INCLUDED);
  const identities: string[] = [];
  const types: string[] = [];
  // The audit trail is in the patient compartment, but it is for operators (audit:read), not for $everything.
  for (const [type, codes] of patientCompartmentParams()) {
    if (type === 'AuditEvent' || !access.canRead(type)) continue;
    types.push(type);
    for (const code of codes) if (indexedParams(type).has(code)) identities.push(hashKey(type, code));
  }
  const where = and(
    sql`r.rid IN (SELECT rid FROM fhir_idx_reference WHERE target_id = ${patientId} AND target_type = 'Patient' AND hash_identity = ANY(${identities}::bigint[]))`,
    sql`r.resource_type = ANY(${types}::text[])`,
    sql`NOT r.deleted`,
    access.rowFilter?.(R),
    !!params.since && sql`r.last_updated >= ${params.since}::timestamptz`,
  );
  const cursor = params.cursor === undefined ? undefined : decodeCursor(params.cursor);
  if (cursor && cursor.afterRid === undefined && cursor.beforeRid === undefined) throw badRequest('_cursor is not a cursor issued by this server');
  const counted = sql`SELECT count(*)::int AS n FROM fhir_resources r WHERE ${where}`.render();
  const { rows: totalRows } = await db.query<{ n: number }>(counted.text, counted.values);
  const page = await keysetPage<{ rid: string; content: Resource }>(db, sql`r.rid, r.content`, where, count, cursor);
  const linkBase = params.linkBase ?? `${base}/Patient/${patientId}/$everything`;
  const link = (relation: string, to?: Cursor): BundleLink => {
    const query = new URLSearchParams({ _count: String(count), ...(params.since ? { _since: params.since } : {}) });
    if (to) query.set('_cursor', encodeCursor(to));
    return { relation, url: `${linkBase}?${query.toString()}` };
  };
  const members = page.rows.map((r) => r.content);
  // The patient leads the first page, however it is reached: without a cursor, or backwards with nothing before.
  const isFirst = cursor === undefined || (cursor.beforeRid !== undefined && !page.more);
  const first = isFirst ? [patient] : [];
  const seen = new Set([...first, ...members].map((r) => `${r.resourceType}/${r.id}`));
  const referenced = (await referencedBy(db, [...first, ...members], access)).filter((r) => !seen.has(`${r.resourceType}/${r.id}`));
  return {
    resourceType: 'Bundle',
    type: 'searchset',
    total: totalRows[0].n + 1,
    link: [{ relation: 'self', url: linkBase }, ...keysetLinks(cursor, page.rows, page.more, undefined, link)],
    entry: [
      ...[...first, ...members].map((r) => ({ fullUrl: `${base}/${r.resourceType}/${r.id}`, resource: r, search: { mode: 'match' as const } })),
      ...referenced.map((r) => ({ fullUrl: `${base}/${r.resourceType}/${r.id}`, resource: r, search: { mode: 'include' as const } })),
    ],
  };
}

/** Resources that `from` refer to (any reference parameter), outside the patient compartment types. */
async function referencedBy(db: Queryable, from: Resource[], access: SearchAccess): Promise<Resource[]> {
  if (!from.length) return [];
  const compartment = [...patientCompartmentParams().keys(), 'Patient'];
  // (type, id) pairs joined on the unique key, so the lookup uses its index.
  const { text, values } = sql`SELECT DISTINCT t.rid, t.resource_type, t.content FROM unnest(${from.map((r) => r.resourceType)}::text[], ${from.map((r) => r.id)}::text[]) AS k(type, id)
     JOIN fhir_resources s ON s.resource_type = k.type AND s.id = k.id
     JOIN fhir_idx_reference ref ON ref.rid = s.rid
     JOIN fhir_resources t ON t.resource_type = ref.target_type AND t.id = ref.target_id AND NOT t.deleted
     WHERE ${and(sql`NOT (t.resource_type = ANY(${compartment}::text[]))`, access.rowFilter?.(ident('t')))}
     ORDER BY t.rid LIMIT ${MAX_INCLUDED}`.render();
  const { rows } = await db.query<{ content: Resource; resource_type: string }>(text, values);
  return rows.filter((r) => access.canRead(r.resource_type)).map((r) => r.content);
}

/** 404 / 410 for a version that is absent or a deletion. */
export function missing(type: string, id: string, found: StoredVersion | undefined, versionId?: string): ApiError | undefined {
  const what = versionId ? `Version ${versionId} of ${type}/${id}` : `${type}/${id}`;
  if (!found) return new ApiError(404, ErrorCode.notFound, `${what} not found`);
  if (found.deleted) return new ApiError(410, ErrorCode.gone, versionId ? `${what} is a deletion` : `${what} was deleted`);
  return undefined;
}
