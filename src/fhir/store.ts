import { randomUUID } from 'node:crypto';
import type { Bundle, BundleEntry, Resource } from '@medplum/fhirtypes';
import type { Database, Queryable } from '../db/database';
import { ApiError, ErrorCode, badRequest } from '../http/errors';
import { isResourceType, patientCompartmentParams } from './definitions';
import { hashKey } from './hash';
import { INDEX_TABLES, indexedParams, indexResource, type IndexRows } from './indexer';
import { present } from './present';
import { validateFhirResource } from './validate';
import { decodeCursor, encodeCursor, parseSearch, type IncludeRule, type ParsedSearch, type QueryParams } from './search/parse';
import { SqlParams, filterSql, sortSql } from './search/sql';

export const ID_PATTERN = /^[A-Za-z0-9\-.]{1,64}$/;

export interface WriteOptions {
  /** Join the caller's transaction (e.g. a patient, its events and its AuditEvent commit together). */
  tx?: Queryable;
  /** `W/"3"` or `3`: the write happens only if the current version is this one (else 412). */
  ifMatch?: string;
}

export type WriteMethod = 'POST' | 'PUT' | 'DELETE';

export interface WriteItem {
  resource: Resource;
  method: WriteMethod;
  ifMatch?: string;
  /** Prefixed to error messages about this item (e.g. `entry[3]`). */
  label?: string;
}

export interface VersionWriteOptions {
  ifMatch?: string;
  /** Collect index rows here instead of inserting them now (bundles insert them in one go). */
  pendingIndex?: Array<[string, IndexRows]>;
}

export interface ReadOptions {
  tx?: Queryable;
}

export interface SearchOptions extends ReadOptions {
  /** The query string the caller sent (for the self and next links). */
  selfQuery?: string;
  /** Which resource types the caller may read: _include/_revinclude never reach past it. */
  canRead?: (resourceType: string) => boolean;
}

interface StoredRow {
  rid: string;
  resource_type: string;
  id: string;
  version_id: string;
  last_updated: Date;
  method: 'POST' | 'PUT' | 'DELETE';
  deleted: boolean;
  content: Resource | null;
}

export interface WriteResult<T extends Resource = Resource> {
  resource: T;
  /** True when the write created the resource (201), false when it updated it (200). */
  created: boolean;
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

/** The largest number of resources `_include` / `_revinclude` add to one page. */
export const MAX_INCLUDED = 1000;

export function versionTag(ifMatch: string): string {
  return ifMatch.replace(/^W\//, '').replace(/"/g, '').trim();
}

/**
 * The FHIR R4 store: every clinical fact of Pont. Writes validate against the R4 base definitions,
 * keep every version, and fill the search index in the same transaction.
 */
export class FhirStore {
  constructor(
    readonly db: Database,
    /** This server's FHIR base URL (references to it count as local; fullUrls start with it). */
    readonly baseUrl: () => string,
  ) {}

  private run<T>(tx: Queryable | undefined, fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return tx ? fn(tx) : this.db.transaction(fn);
  }

  // ---------------------------------------------------------------- writes

  async create<T extends Resource>(resource: T, options: WriteOptions = {}): Promise<T> {
    const id = randomUUID();
    return (await this.run(options.tx, (tx) => this.writeVersion(tx, { ...resource, id }, 'POST', {}))).resource as T;
  }

  /** Update, or create with the given id when it does not exist yet (update-as-create). */
  async update<T extends Resource>(resource: T, options: WriteOptions = {}): Promise<T> {
    return (await this.updateWithOutcome(resource, options)).resource;
  }

  async updateWithOutcome<T extends Resource>(resource: T, options: WriteOptions = {}): Promise<WriteResult<T>> {
    if (!resource.id) throw badRequest('Resource id is required for an update');
    return (await this.run(options.tx, (tx) => this.writeVersion(tx, resource, 'PUT', options))) as WriteResult<T>;
  }

  async delete(resourceType: string, id: string, options: WriteOptions = {}): Promise<void> {
    checkType(resourceType);
    await this.run(options.tx, (tx) => this.writeVersion(tx, { resourceType, id } as Resource, 'DELETE', options));
  }

  async writeVersion(tx: Queryable, input: Resource, method: WriteMethod, options: VersionWriteOptions): Promise<WriteResult> {
    const [result] = await this.writeMany(tx, [{ resource: input, method, ifMatch: options.ifMatch }], options.pendingIndex);
    return result;
  }

  /**
   * Writes new versions of many resources with a handful of statements: locks the current rows,
   * checks If-Match, archives the current versions (server-side copy), stores the new ones and
   * replaces their index rows. Results are in the order of `items`.
   */
  async writeMany(tx: Queryable, items: WriteItem[], pendingIndex?: Array<[string, IndexRows]>, depth = 0): Promise<WriteResult[]> {
    for (const { resource } of items) {
      checkType(resource.resourceType);
      if (!resource.id || !ID_PATTERN.test(resource.id)) throw badRequest(`Invalid resource id "${resource.id}"`);
    }
    const key = (type: string, id: string) => `${type}/${id}`;
    // Creates carry ids generated for them: only updates and deletes have a current row to lock.
    const known = items.filter((i) => i.method !== 'POST');
    const { rows: existing } = known.length
      ? await tx.query<StoredRow>(
          `SELECT r.rid, r.resource_type, r.id, r.version_id, r.deleted FROM fhir_resources r
           JOIN unnest($1::text[], $2::text[]) AS k(t, i) ON r.resource_type = k.t AND r.id = k.i
           ORDER BY r.rid FOR UPDATE OF r`,
          [known.map((i) => i.resource.resourceType), known.map((i) => i.resource.id)],
        )
      : { rows: [] as StoredRow[] };
    const current = new Map(existing.map((row) => [key(row.resource_type, row.id), row]));
    const now = new Date().toISOString();
    const results: WriteResult[] = new Array(items.length);
    const updates: Array<{ index: number; rid: string; versionId: string; method: WriteMethod; content: Resource | null }> = [];
    const inserts: Array<{ index: number; versionId: string; method: WriteMethod; content: Resource }> = [];

    const plan = ({ resource: input, method, ifMatch }: WriteItem, index: number) => {
      const { resourceType, id } = input;
      const cur = current.get(key(resourceType, id!));
      if (ifMatch !== undefined) {
        const expected = versionTag(ifMatch);
        if (!cur || cur.deleted || cur.version_id !== expected)
          throw new ApiError(412, ErrorCode.preconditionFailed, `Version conflict: ${resourceType}/${id} is not at version ${expected}`);
      }
      if (method === 'DELETE' && (!cur || cur.deleted)) {
        results[index] = { resource: input, created: false }; // deleting what is absent succeeds (idempotent)
        return;
      }
      const versionId = cur ? String(Number(cur.version_id) + 1) : '1';
      const content = method === 'DELETE' ? null : ({ ...input, meta: { ...input.meta, versionId, lastUpdated: now } } as Resource);
      if (content) validateFhirResource(content);
      results[index] = { resource: content ?? input, created: !cur || cur.deleted };
      if (cur) updates.push({ index, rid: cur.rid, versionId, method, content });
      else inserts.push({ index, versionId, method, content: content! });
    };
    items.forEach((item, index) => {
      try {
        plan(item, index);
      } catch (err) {
        if (item.label && err instanceof ApiError) throw new ApiError(err.status, err.code, `${item.label}: ${err.message}`, err.options);
        throw err;
      }
    });

    const indexRows: Array<[string, IndexRows]> = [];
    if (updates.length) {
      const rids = updates.map((u) => u.rid);
      await tx.query(
        `INSERT INTO fhir_resource_versions (rid, version_id, last_updated, method, content)
         SELECT rid, version_id, last_updated, method, content FROM fhir_resources WHERE rid = ANY($1::bigint[])`,
        [rids],
      );
      await tx.query(
        `UPDATE fhir_resources r SET version_id = u.v, last_updated = $1, method = u.m, deleted = u.c IS NULL, content = u.c::jsonb
         FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[]) AS u(rid, v, m, c) WHERE r.rid = u.rid`,
        [now, rids, updates.map((u) => u.versionId), updates.map((u) => u.method), updates.map((u) => (u.content ? JSON.stringify(u.content) : null))],
      );
      await tx.query(
        `WITH ${INDEX_TABLES.map((t) => `d_${t} AS (DELETE FROM fhir_idx_${t} WHERE rid = ANY($1::bigint[]))`).join(', ')} SELECT 1`,
        [rids],
      );
      for (const u of updates) if (u.content) indexRows.push([u.rid, indexResource(u.content, this.baseUrl())]);
    }
    if (inserts.length) {
      const { rows: created } = await tx.query<{ rid: string; resource_type: string; id: string }>(
        `INSERT INTO fhir_resources (resource_type, id, version_id, last_updated, method, deleted, content)
         SELECT n.t, n.i, n.v, $1, n.m, false, n.c::jsonb FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[]) AS n(t, i, v, m, c)
         ON CONFLICT (resource_type, id) DO NOTHING RETURNING rid, resource_type, id`,
        [
          now,
          inserts.map((n) => n.content.resourceType),
          inserts.map((n) => n.content.id),
          inserts.map((n) => n.versionId),
          inserts.map((n) => n.method),
          inserts.map((n) => JSON.stringify(n.content)),
        ],
      );
      const rids = new Map(created.map((row) => [key(row.resource_type, row.id), row.rid]));
      const raced: number[] = [];
      for (const n of inserts) {
        const rid = rids.get(key(n.content.resourceType, n.content.id!));
        if (rid) indexRows.push([rid, indexResource(n.content, this.baseUrl())]);
        else raced.push(n.index);
      }
      if (raced.length) {
        // Another transaction created these ids first: write again, now as updates of its rows.
        if (depth >= 2) throw new ApiError(409, ErrorCode.conflict, 'Concurrent writes to the same resources');
        const again = await this.writeMany(tx, raced.map((i) => items[i]), pendingIndex, depth + 1);
        raced.forEach((i, k) => (results[i] = again[k]));
      }
    }
    if (pendingIndex) pendingIndex.push(...indexRows);
    else if (indexRows.length) await this.insertIndexRows(tx, indexRows);
    return results;
  }

  /** Inserts index rows of many resources with one statement per table (unnest of column arrays). */
  async insertIndexRows(tx: Queryable, batch: Array<[string, IndexRows]>): Promise<void> {
    // One statement for every table (one round trip): a CTE per table that has rows.
    const params: unknown[] = [];
    const inserts: string[] = [];
    for (const table of INDEX_TABLES) {
      const { columns, types } = INDEX_COLUMNS[table];
      const arrays: unknown[][] = [[], ...columns.map(() => [])];
      for (const [rid, rows] of batch)
        for (const row of rows[table] as unknown[][]) {
          arrays[0].push(rid);
          row.forEach((v, i) => arrays[i + 1].push(v));
        }
      if (arrays[0].length === 0) continue;
      const casts = ['bigint', ...types].map((t, i) => `$${params.length + i + 1}::${t}[]`).join(', ');
      params.push(...arrays);
      inserts.push(`i_${table} AS (INSERT INTO fhir_idx_${table} (rid, ${columns.join(', ')}) SELECT * FROM unnest(${casts}))`);
    }
    if (inserts.length) await tx.query(`WITH ${inserts.join(', ')} SELECT 1`, params);
  }

  // ---------------------------------------------------------------- reads

  async read<T extends Resource>(resourceType: string, id: string, options: ReadOptions = {}): Promise<T> {
    checkType(resourceType);
    const q = options.tx ?? this.db;
    const { rows } = await q.query<StoredRow>('SELECT deleted, content FROM fhir_resources WHERE resource_type = $1 AND id = $2', [resourceType, id]);
    if (!rows[0]) throw new ApiError(404, ErrorCode.notFound, `${resourceType}/${id} not found`);
    if (rows[0].deleted) throw new ApiError(410, ErrorCode.gone, `${resourceType}/${id} was deleted`);
    return rows[0].content as T;
  }

  async vread<T extends Resource>(resourceType: string, id: string, versionId: string, options: ReadOptions = {}): Promise<T> {
    checkType(resourceType);
    if (!/^\d{1,18}$/.test(versionId)) throw new ApiError(404, ErrorCode.notFound, `Version ${versionId} of ${resourceType}/${id} not found`);
    const { rows } = await (options.tx ?? this.db).query<StoredRow>(
      `SELECT r.version_id, r.deleted, r.content FROM fhir_resources r WHERE r.resource_type = $1 AND r.id = $2 AND r.version_id = $3
       UNION ALL
       SELECT v.version_id, v.content IS NULL, v.content FROM fhir_resource_versions v JOIN fhir_resources r ON r.rid = v.rid
       WHERE r.resource_type = $1 AND r.id = $2 AND v.version_id = $3`,
      [resourceType, id, versionId],
    );
    if (!rows[0]) throw new ApiError(404, ErrorCode.notFound, `Version ${versionId} of ${resourceType}/${id} not found`);
    if (rows[0].deleted) throw new ApiError(410, ErrorCode.gone, `Version ${versionId} of ${resourceType}/${id} is a deletion`);
    return rows[0].content as T;
  }

  /** Instance history (`id` given) or type history, newest first. */
  async history(resourceType: string, id: string | undefined, params: { count?: number; since?: string; before?: string }): Promise<Bundle> {
    checkType(resourceType);
    const count = Math.min(params.count ?? 50, 1000);
    const q = new SqlParams();
    const where = [`r.resource_type = ${q.add(resourceType)}`];
    if (id !== undefined) where.push(`r.id = ${q.add(id)}`);
    const time: string[] = [];
    if (params.since) time.push(`last_updated >= ${q.add(params.since)}::timestamptz`);
    if (params.before) time.push(`last_updated < ${q.add(params.before)}::timestamptz`);
    const timeSql = time.length ? ` AND ${time.join(' AND ')}` : '';
    const sql = `SELECT * FROM (
        SELECT r.id, r.version_id, r.last_updated, r.method, r.content FROM fhir_resources r WHERE ${where.join(' AND ')}
        UNION ALL
        SELECT r.id, v.version_id, v.last_updated, v.method, v.content FROM fhir_resource_versions v JOIN fhir_resources r ON r.rid = v.rid
        WHERE ${where.join(' AND ')}
      ) h WHERE true${timeSql} ORDER BY last_updated DESC, version_id DESC LIMIT ${q.add(count)}`;
    const { rows } = await this.db.query<StoredRow>(sql, q.values);
    // An unknown id has no history: 404, as a read would say.
    if (id !== undefined && rows.length === 0 && !time.length) await this.read(resourceType, id).catch((e: ApiError) => { if (e.status === 404) throw e; });
    const base = this.baseUrl();
    return {
      resourceType: 'Bundle',
      type: 'history',
      entry: rows.map((row) => ({
        fullUrl: `${base}/${resourceType}/${row.id}`,
        ...(row.content ? { resource: row.content } : {}),
        request: { method: row.method, url: row.method === 'POST' ? resourceType : `${resourceType}/${row.id}` },
        response: {
          status: row.method === 'POST' ? '201 Created' : row.method === 'DELETE' ? '204 No Content' : '200 OK',
          etag: `W/"${row.version_id}"`,
          lastModified: new Date(row.last_updated).toISOString(),
        },
      })),
    };
  }

  // ---------------------------------------------------------------- search

  parse(resourceType: string, query: QueryParams): ParsedSearch {
    checkType(resourceType);
    return parseSearch(resourceType, query, this.baseUrl());
  }

  async searchResources<T extends Resource>(resourceType: string, query: QueryParams, options: ReadOptions = {}): Promise<T[]> {
    const bundle = await this.search<T>(resourceType, query, options);
    return (bundle.entry ?? []).filter((e) => e.search?.mode === 'match').map((e) => e.resource as T);
  }

  /** FHIR search. */
  async search<T extends Resource>(resourceType: string, query: QueryParams, options: SearchOptions = {}): Promise<Bundle<T>> {
    const search = this.parse(resourceType, query);
    if (options.canRead) {
      for (const rule of search.revinclude)
        if (!options.canRead(rule.sourceType)) throw new ApiError(403, ErrorCode.forbidden, `_revinclude: no read access to ${rule.sourceType}`);
      for (const rule of search.include)
        if (rule.targetType && !options.canRead(rule.targetType)) throw new ApiError(403, ErrorCode.forbidden, `_include: no read access to ${rule.targetType}`);
    }
    const db = options.tx ?? this.db;
    const q = new SqlParams();
    const where = [`r.resource_type = ${q.add(resourceType)}`, 'NOT r.deleted', ...search.filters.map((f) => filterSql(f, 'r', q))];
    const countOnly = search.summary === 'count' || search.count === 0;

    let total = search.cursor?.total;
    if (search.total === 'accurate' && total === undefined) {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM fhir_resources r WHERE ${where.join(' AND ')}`, q.values);
      total = rows[0].n;
    }
    const bundle: Bundle<T> = { resourceType: 'Bundle', type: 'searchset', ...(total !== undefined ? { total } : {}) };
    const base = this.baseUrl();
    const selfQuery = options.selfQuery ?? new URLSearchParams(flatten(query)).toString();
    bundle.link = [{ relation: 'self', url: `${base}/${resourceType}${selfQuery ? `?${selfQuery}` : ''}` }];
    if (countOnly) return bundle;

    const page = new SqlParams();
    page.values.push(...q.values);
    const pageWhere = [...where];
    let order = 'r.rid';
    let offset = 0;
    if (search.sort.length) {
      order = [...search.sort.map((s) => sortSql(s, 'r', page)), 'r.rid'].join(', ');
      offset = search.cursor?.offset ?? 0;
    } else if (search.cursor?.afterRid) {
      pageWhere.push(`r.rid > ${page.add(search.cursor.afterRid)}::bigint`);
    }
    const { rows } = await db.query<{ rid: string; content: T }>(
      `SELECT r.rid, r.content FROM fhir_resources r WHERE ${pageWhere.join(' AND ')}
       ORDER BY ${order} LIMIT ${page.add(search.count + 1)} OFFSET ${page.add(offset)}`,
      page.values,
    );
    const hasMore = rows.length > search.count;
    const matches = rows.slice(0, search.count);
    if (hasMore) {
      const next = search.sort.length
        ? { offset: offset + search.count, total }
        : { afterRid: matches[matches.length - 1].rid, total };
      const params = new URLSearchParams(flatten(query));
      params.set('_cursor', encodeCursor(next));
      bundle.link.push({ relation: 'next', url: `${base}/${resourceType}?${params.toString()}` });
    }
    const entries: BundleEntry<T>[] = matches.map((row) => ({
      fullUrl: `${base}/${resourceType}/${row.content.id}`,
      resource: present(row.content, search) as T,
      search: { mode: 'match' },
    }));
    const included = await this.included(db, matches.map((m) => m.content), search.include, search.revinclude);
    // Included resources the caller may not read are left out, as if absent.
    for (const r of included.resources.filter((r) => options.canRead?.(r.resourceType) ?? true)) entries.push({ fullUrl: `${base}/${r.resourceType}/${r.id}`, resource: r as T, search: { mode: 'include' } });
    if (included.truncated) {
      entries.push({
        resource: {
          resourceType: 'OperationOutcome',
          issue: [{ severity: 'warning', code: 'too-costly', diagnostics: `Included resources were limited to ${MAX_INCLUDED}` }],
        } as unknown as T,
        search: { mode: 'outcome' },
      });
    }
    bundle.entry = entries;
    return bundle;
  }

  /** `_include` / `_revinclude` (with :iterate, up to 4 rounds), without duplicates of the matches. */
  private async included(db: Queryable, matches: Resource[], include: IncludeRule[], revinclude: IncludeRule[]) {
    const seen = new Set(matches.map((r) => `${r.resourceType}/${r.id}`));
    const out: Resource[] = [];
    let truncated = false;
    let frontier = matches;
    for (let round = 0; round < 4 && frontier.length && (include.length || revinclude.length); round++) {
      const found: Resource[] = [];
      const rules = [...include.map((r) => ['include', r] as const), ...revinclude.map((r) => ['revinclude', r] as const)];
      for (const [kind, rule] of rules) {
        if (round > 0 && !rule.iterate) continue;
        const rows = kind === 'include' ? await this.forwardIncludes(db, frontier, rule) : await this.reverseIncludes(db, frontier, rule);
        for (const r of rows) {
          const key = `${r.resourceType}/${r.id}`;
          if (seen.has(key)) continue;
          if (out.length + found.length >= MAX_INCLUDED) {
            truncated = true;
            break;
          }
          seen.add(key);
          found.push(r);
        }
      }
      out.push(...found);
      frontier = found;
    }
    return { resources: out, truncated };
  }

  private async forwardIncludes(db: Queryable, from: Resource[], rule: IncludeRule): Promise<Resource[]> {
    const ids = from.filter((r) => r.resourceType === rule.sourceType).map((r) => r.id!);
    if (!ids.length) return [];
    const q = new SqlParams();
    const { rows } = await db.query<{ content: Resource }>(
      `SELECT DISTINCT t.rid, t.content FROM fhir_resources s
       JOIN fhir_idx_reference ref ON ref.rid = s.rid AND ref.hash_identity = ${q.add(rule.param.hashIdentity)}
       JOIN fhir_resources t ON t.resource_type = ref.target_type AND t.id = ref.target_id AND NOT t.deleted
       WHERE s.resource_type = ${q.add(rule.sourceType)} AND s.id = ANY(${q.add(ids)}::text[])
       ${rule.targetType ? `AND ref.target_type = ${q.add(rule.targetType)}` : ''}
       ORDER BY t.rid LIMIT ${q.add(MAX_INCLUDED + 1)}`,
      q.values,
    );
    return rows.map((r) => r.content);
  }

  private async reverseIncludes(db: Queryable, to: Resource[], rule: IncludeRule): Promise<Resource[]> {
    const byType = new Map<string, string[]>();
    for (const r of to) if (!rule.targetType || r.resourceType === rule.targetType) byType.set(r.resourceType, [...(byType.get(r.resourceType) ?? []), r.id!]);
    const out: Resource[] = [];
    for (const [type, ids] of byType) {
      if (!rule.param.targets.includes(type)) continue;
      const q = new SqlParams();
      const { rows } = await db.query<{ content: Resource }>(
        `SELECT DISTINCT s.rid, s.content FROM fhir_idx_reference ref JOIN fhir_resources s ON s.rid = ref.rid AND NOT s.deleted
         WHERE ref.hash_identity = ${q.add(rule.param.hashIdentity)} AND ref.target_type = ${q.add(type)} AND ref.target_id = ANY(${q.add(ids)}::text[])
         ORDER BY s.rid LIMIT ${q.add(MAX_INCLUDED + 1)}`,
        q.values,
      );
      out.push(...rows.map((r) => r.content));
    }
    return out;
  }

  // ---------------------------------------------------------------- Patient/$everything

  /**
   * The patient, every resource in the patient's compartment (R4 CompartmentDefinition), and the
   * resources those refer to (practitioners, organisations, medications...), paged by `_count`.
   */
  async everything(patientId: string, params: { count?: number; cursor?: string; since?: string }): Promise<Bundle> {
    const patient = await this.read('Patient', patientId);
    const count = Math.min(params.count ?? 100, MAX_INCLUDED);
    const identities: string[] = [];
    // The audit trail is in the patient compartment, but it is for operators (audit:read), not for $everything.
    for (const [type, codes] of patientCompartmentParams())
      if (type !== 'AuditEvent') for (const code of codes) if (indexedParams(type).has(code)) identities.push(hashKey(type, code));
    const conditions = (q: SqlParams) => {
      const where = [
        `r.rid IN (SELECT rid FROM fhir_idx_reference WHERE target_id = ${q.add(patientId)} AND target_type = 'Patient' AND hash_identity = ANY(${q.add(identities)}::bigint[]))`,
        'NOT r.deleted',
      ];
      if (params.since) where.push(`r.last_updated >= ${q.add(params.since)}::timestamptz`);
      return where;
    };
    const countParams = new SqlParams();
    const countWhere = conditions(countParams);
    const pageParams = new SqlParams();
    const pageWhere = conditions(pageParams);
    const after = params.cursor === undefined ? undefined : decodeCursor(params.cursor).afterRid;
    if (params.cursor !== undefined && !after) throw badRequest('_cursor is not a cursor issued by this server');
    if (after) pageWhere.push(`r.rid > ${pageParams.add(after)}::bigint`);
    const { rows: totalRows } = await this.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM fhir_resources r WHERE ${countWhere.join(' AND ')}`,
      countParams.values,
    );
    const { rows } = await this.db.query<{ rid: string; content: Resource }>(
      `SELECT r.rid, r.content FROM fhir_resources r WHERE ${pageWhere.join(' AND ')} ORDER BY r.rid LIMIT ${pageParams.add(count + 1)}`,
      pageParams.values,
    );
    const base = this.baseUrl();
    const members = rows.slice(0, count).map((r) => r.content);
    const first = after ? [] : [patient];
    const seen = new Set([...first, ...members].map((r) => `${r.resourceType}/${r.id}`));
    const referenced = (await this.referencedBy([...first, ...members])).filter((r) => !seen.has(`${r.resourceType}/${r.id}`));
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'searchset',
      total: totalRows[0].n + 1,
      link: [{ relation: 'self', url: `${base}/Patient/${patientId}/$everything` }],
      entry: [
        ...[...first, ...members].map((r) => ({ fullUrl: `${base}/${r.resourceType}/${r.id}`, resource: r, search: { mode: 'match' as const } })),
        ...referenced.map((r) => ({ fullUrl: `${base}/${r.resourceType}/${r.id}`, resource: r, search: { mode: 'include' as const } })),
      ],
    };
    if (rows.length > count) {
      const last = rows[count - 1].rid;
      bundle.link!.push({ relation: 'next', url: `${base}/Patient/${patientId}/$everything?_count=${count}&_cursor=${encodeCursor({ afterRid: last })}` });
    }
    return bundle;
  }

  /** Resources that `from` refer to (any reference parameter), outside the patient compartment types. */
  private async referencedBy(from: Resource[]): Promise<Resource[]> {
    if (!from.length) return [];
    const compartment = patientCompartmentParams();
    // (type, id) pairs joined on the unique key, so the lookup uses its index.
    const { rows } = await this.db.query<{ content: Resource }>(
      `SELECT DISTINCT t.rid, t.content FROM unnest($1::text[], $2::text[]) AS k(type, id)
       JOIN fhir_resources s ON s.resource_type = k.type AND s.id = k.id
       JOIN fhir_idx_reference ref ON ref.rid = s.rid
       JOIN fhir_resources t ON t.resource_type = ref.target_type AND t.id = ref.target_id AND NOT t.deleted
       WHERE NOT (t.resource_type = ANY($3::text[]))
       ORDER BY t.rid LIMIT ${MAX_INCLUDED}`,
      [from.map((r) => r.resourceType), from.map((r) => r.id), [...compartment.keys(), 'Patient']],
    );
    return rows.map((r) => r.content);
  }
}

function flatten(query: QueryParams): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || k === '_cursor') continue;
    for (const one of Array.isArray(v) ? v : [v]) out.push([k, one]);
  }
  return out;
}

export function checkType(resourceType: string): void {
  if (typeof resourceType !== 'string' || !isResourceType(resourceType))
    throw new ApiError(404, ErrorCode.notFound, `Unknown resource type "${resourceType}"`);
}
