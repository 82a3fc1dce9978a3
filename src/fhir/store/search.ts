import type { Bundle, BundleEntry, Resource } from '@medplum/fhirtypes';
import type { Queryable } from '../../db/database';
import { ApiError, ErrorCode } from '../../http/errors';
import { present } from '../present';
import { encodeCursor, type Filter, type IncludeRule, type ParsedSearch, type QueryParams } from '../search/parse';
import { SqlParams, accessSql, filterSql, sortSql } from '../search/sql';
import type { RowFilter } from './types';

/** The largest number of resources `_include` / `_revinclude` add to one page. */
export const MAX_INCLUDED = 1000;

/** What the caller may see: the repository's access policy, as the store applies it. */
export interface SearchAccess {
  /** Resource types the caller may read at all (scopes): includes, chains and `_has` never reach past it. */
  canRead(resourceType: string): boolean;
  /** Rows of patient data the caller may see (SQL); undefined: all. */
  rowFilter?: RowFilter;
}

export interface SearchOptions {
  /** The query string the caller sent (for the self and next links). */
  selfQuery?: string;
  /** Base of the self and next links when it is not `<FHIR base>/<type>` (e.g. the SDK's per-patient routes). */
  linkBase?: string;
  /** Compartment search (`Patient/{id}/{type}`): only resources in this patient's compartment. */
  compartmentPatient?: string;
}

/** Types a filter looks through (chains and `_has`), for the scope check. */
function typesReached(filters: Filter[], out = new Set<string>()): Set<string> {
  for (const f of filters) {
    if (f.kind === 'chain') {
      f.targetTypes.forEach((t) => out.add(t));
      typesReached(f.inner, out);
    } else if (f.kind === 'has') {
      out.add(f.param.resourceType);
      typesReached([f.inner], out);
    }
  }
  return out;
}

/** Refuses (403) a search whose includes, chains or `_has` reach a type the caller may not read. */
export function checkSearchReach(search: ParsedSearch, access: SearchAccess): void {
  for (const rule of search.revinclude)
    if (!access.canRead(rule.sourceType)) throw new ApiError(403, ErrorCode.forbidden, `_revinclude: no read access to ${rule.sourceType}`);
  for (const rule of search.include)
    if (rule.targetType && !access.canRead(rule.targetType)) throw new ApiError(403, ErrorCode.forbidden, `_include: no read access to ${rule.targetType}`);
  for (const type of typesReached(search.filters))
    if (!access.canRead(type)) throw new ApiError(403, ErrorCode.forbidden, `The search looks through ${type}, which the caller may not read`);
}

function flatten(query: QueryParams): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || k === '_cursor') continue;
    for (const one of Array.isArray(v) ? v : [v]) out.push([k, one]);
  }
  return out;
}

/**
 * FHIR search over one resource type, restricted to what `access` lets the caller see: in SQL, so that
 * paging and totals count only visible rows.
 */
export async function searchResources<T extends Resource>(
  db: Queryable,
  base: string,
  search: ParsedSearch,
  query: QueryParams,
  access: SearchAccess,
  options: SearchOptions = {},
): Promise<Bundle<T>> {
  checkSearchReach(search, access);
  const resourceType = search.resourceType;
  const q = new SqlParams();
  const where = [`r.resource_type = ${q.add(resourceType)}`, 'NOT r.deleted', ...search.filters.map((f) => filterSql(f, 'r', q, access.rowFilter))];
  if (options.compartmentPatient !== undefined) where.push(`r.patients @> ARRAY[${q.add(options.compartmentPatient)}]::text[]`);
  const visible = access.rowFilter?.('r', q, resourceType);
  if (visible) where.push(`(${visible})`);
  const countOnly = search.summary === 'count' || search.count === 0;

  let total = search.cursor?.total;
  if (search.total === 'accurate' && total === undefined) {
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM fhir_resources r WHERE ${where.join(' AND ')}`, q.values);
    total = rows[0].n;
  }
  const bundle: Bundle<T> = { resourceType: 'Bundle', type: 'searchset', ...(total !== undefined ? { total } : {}) };
  const linkBase = options.linkBase ?? `${base}/${resourceType}`;
  const selfQuery = options.selfQuery ?? new URLSearchParams(flatten(query)).toString();
  bundle.link = [{ relation: 'self', url: `${linkBase}${selfQuery ? `?${selfQuery}` : ''}` }];
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
    const next = search.sort.length ? { offset: offset + search.count, total } : { afterRid: matches[matches.length - 1].rid, total };
    const params = new URLSearchParams(flatten(query));
    params.set('_cursor', encodeCursor(next));
    bundle.link.push({ relation: 'next', url: `${linkBase}?${params.toString()}` });
  }
  const entries: BundleEntry<T>[] = matches.map((row) => ({
    fullUrl: `${base}/${resourceType}/${row.content.id}`,
    resource: present(row.content, search) as T,
    search: { mode: 'match' },
  }));
  const included = await includedResources(db, matches.map((m) => m.content), search.include, search.revinclude, access);
  for (const r of included.resources) entries.push({ fullUrl: `${base}/${r.resourceType}/${r.id}`, resource: r as T, search: { mode: 'include' } });
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
async function includedResources(db: Queryable, matches: Resource[], include: IncludeRule[], revinclude: IncludeRule[], access: SearchAccess) {
  const seen = new Set(matches.map((r) => `${r.resourceType}/${r.id}`));
  const out: Resource[] = [];
  let truncated = false;
  let frontier = matches;
  for (let round = 0; round < 4 && frontier.length && (include.length || revinclude.length); round++) {
    const found: Resource[] = [];
    const rules = [...include.map((r) => ['include', r] as const), ...revinclude.map((r) => ['revinclude', r] as const)];
    for (const [kind, rule] of rules) {
      if (round > 0 && !rule.iterate) continue;
      const rows = kind === 'include' ? await forwardIncludes(db, frontier, rule, access) : await reverseIncludes(db, frontier, rule, access);
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

async function forwardIncludes(db: Queryable, from: Resource[], rule: IncludeRule, access: SearchAccess): Promise<Resource[]> {
  const ids = from.filter((r) => r.resourceType === rule.sourceType).map((r) => r.id!);
  const readable = rule.param.targets.filter((t) => access.canRead(t) && (!rule.targetType || t === rule.targetType));
  if (!ids.length || !readable.length) return [];
  const q = new SqlParams();
  const { rows } = await db.query<{ content: Resource }>(
    `SELECT DISTINCT t.rid, t.content FROM fhir_resources s
     JOIN fhir_idx_reference ref ON ref.rid = s.rid AND ref.hash_identity = ${q.add(rule.param.hashIdentity)}
     JOIN fhir_resources t ON t.resource_type = ref.target_type AND t.id = ref.target_id AND NOT t.deleted
     WHERE s.resource_type = ${q.add(rule.sourceType)} AND s.id = ANY(${q.add(ids)}::text[])
       AND ref.target_type = ANY(${q.add(readable)}::text[])${accessSql(access.rowFilter, 't', q)}
     ORDER BY t.rid LIMIT ${q.add(MAX_INCLUDED + 1)}`,
    q.values,
  );
  return rows.map((r) => r.content);
}

async function reverseIncludes(db: Queryable, to: Resource[], rule: IncludeRule, access: SearchAccess): Promise<Resource[]> {
  if (!access.canRead(rule.sourceType)) return [];
  const byType = new Map<string, string[]>();
  for (const r of to) if (!rule.targetType || r.resourceType === rule.targetType) byType.set(r.resourceType, [...(byType.get(r.resourceType) ?? []), r.id!]);
  const out: Resource[] = [];
  for (const [type, ids] of byType) {
    if (!rule.param.targets.includes(type)) continue;
    const q = new SqlParams();
    const { rows } = await db.query<{ content: Resource }>(
      `SELECT DISTINCT s.rid, s.content FROM fhir_idx_reference ref JOIN fhir_resources s ON s.rid = ref.rid AND NOT s.deleted
       WHERE ref.hash_identity = ${q.add(rule.param.hashIdentity)} AND ref.target_type = ${q.add(type)} AND ref.target_id = ANY(${q.add(ids)}::text[])
         ${accessSql(access.rowFilter, 's', q, rule.sourceType)}
       ORDER BY s.rid LIMIT ${q.add(MAX_INCLUDED + 1)}`,
      q.values,
    );
    out.push(...rows.map((r) => r.content));
  }
  return out;
}
