import type { Bundle, BundleEntry, BundleLink, Resource } from '@medplum/fhirtypes';
import type { Queryable } from '../../db/database';
import { ApiError, ErrorCode, badRequest } from '../../core/errors';
import { present } from '../present';
import { END_RID, encodeCursor, namesPatient, type Cursor, type Filter, type IncludeRule, type ParsedSearch, type QueryParams, type ReferenceValue } from '../search/parse';
import { alias, and, ident, join, or, sql, type Identifier, type Sql } from '../../db/sql';
import { filterSql, indexProbeOf, indexProbesSql, notFilterSql, ridCondition, rowTestSql, sortSql, WALK_TOKENS, walkedRow } from '../search/sql';
import { checkTerminologyLoaded, checkTerminologyScope } from '../search/terminology';
import type { RowFilter } from './types';
import { filedPatients, withFiledPatients } from './filed';
import { storedJson } from './stored-json';

/** The largest number of resources `_include` / `_revinclude` add to one page. */
export const MAX_INCLUDED = 1000;

/** What the caller may see: the repository's access policy, as the store applies it. */
export interface SearchAccess {
  /** Resource types the caller may read at all (scopes): includes, chains and `_has` never reach past it. */
  canRead(resourceType: string): boolean;
  /** May the caller search through the loaded terminology (:below, :above, :in, :not-in)? */
  readsTerminology: boolean;
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
  /**
   * The matches as their stored JSON (storedJson), for a caller that only writes the Bundle out (bundleJson): when
   * the search shows them whole and includes nothing (no `_elements`, `_summary`, `_include`, `_revinclude`).
   */
  asStored?: boolean;
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

/**
 * Refuses (403) a search whose includes, chains or `_has` reach a type the caller may not read, or that searches the
 * loaded terminology without the scope to read it.
 */
export function checkSearchReach(search: ParsedSearch, access: SearchAccess): void {
  checkTerminologyScope(search, access.readsTerminology);
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
  await checkTerminologyLoaded(db, search);
  const resourceType = search.resourceType;
  const where = searchWhere(search, access, options.compartmentPatient);
  const countOnly = search.summary === 'count' || search.count === 0;

  const linkBase = options.linkBase ?? `${base}/${resourceType}`;
  const selfQuery = options.selfQuery ?? new URLSearchParams(flatten(query)).toString();
  const cursor = search.cursor;
  if (cursor && (search.sort.length ? (cursor.afterRid ?? cursor.beforeRid) : cursor.offset) !== undefined)
    throw badRequest('_cursor is not a cursor issued by this server for this search');
  const searchset = (total: number | undefined): Bundle<T> => ({
    resourceType: 'Bundle',
    type: 'searchset',
    ...(total !== undefined ? { total } : {}),
    link: [{ relation: 'self', url: `${linkBase}${selfQuery ? `?${selfQuery}` : ''}` }],
  });
  const counted = async (): Promise<number> => {
    const { text, values } = sql`SELECT count(*)::int AS n FROM fhir_resources r WHERE ${where}`.render();
    return (await db.query<{ n: number }>(text, values)).rows[0]!.n;
  };
  // The total: a later page's cursor carries the first page's.
  let total = cursor?.total;
  if (countOnly) {
    if (search.total === 'accurate' && total === undefined) total = await counted();
    const bundle = searchset(total);
    if (total === 0 && !cursor && access.rowFilter) bundle.entry = [narrowedSearchNote<T>()];
    return bundle;
  }

  const link = (relation: string, to?: Cursor): BundleLink => {
    const params = new URLSearchParams(flatten(query));
    if (to) params.set('_cursor', encodeCursor(to));
    return { relation, url: `${linkBase}${params.size ? `?${params.toString()}` : ''}` };
  };
  const asStored = options.asStored === true && !search.elements?.length && !search.summary && !search.include.length && !search.revinclude.length;
  // As stored: the content as text, the id beside it.
  const columns = asStored ? STORED_COLUMNS : PARSED_COLUMNS;
  const offset = cursor?.offset ?? 0;
  let rows: MatchRow<T>[];
  let more: boolean;
  if (search.sort.length) {
    const { text, values } = sortedPageSql(search, where, offset, columns).render();
    const page = (await db.query<MatchRow<T>>(text, values)).rows;
    rows = page.slice(0, search.count);
    more = page.length > search.count;
  } else {
    ({ rows, more } = await keysetPage<MatchRow<T>>(db, columns, where, search.count, cursor));
  }
  // A first page with nothing after it holds every match: its length is the total, without counting them again.
  if (search.total === 'accurate' && total === undefined) total = !cursor && !more ? rows.length : await counted();
  const bundle = searchset(total);
  bundle.link!.push(...(search.sort.length ? offsetLinks(offset, search.count, more, total, link) : keysetLinks(cursor, rows, more, total, link)));
  // A row not yet filed under its patients is parsed, so that the audit trail finds them in it.
  const matches = rows.map((row) => withFiledPatients((row.content ?? (row.patients ? storedJson(resourceType, row.id!, row.text!) : JSON.parse(row.text!))) as T, row.patients));
  const entries: BundleEntry<T>[] = matches.map((resource) => ({
    fullUrl: `${base}/${resourceType}/${resource.id}`,
    resource: withFiledPatients(present(resource, search) as T, filedPatients(resource) ?? null),
    search: { mode: 'match' },
  }));
  const included = await includedResources(db, matches, search.include, search.revinclude, access);
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
  if (!matches.length && !cursor && access.rowFilter) entries.push(narrowedSearchNote<T>());
  bundle.entry = entries;
  return bundle;
}

/** The rows a search selects on `fhir_resources r`: its filters, the compartment, and what the caller may see. */
function searchWhere(search: ParsedSearch, access: SearchAccess, compartmentPatient?: string): Sql {
  // Filters an index table answers alone, when there are two, or one and tests of the rows' own index entries
  // (:missing, :not), meet in one subquery, before any resource row is read.
  const probes = search.filters.map(indexProbeOf);
  const joined = probes.filter((p) => p !== undefined);
  const ridTests = search.filters.map((f, i) => (probes[i] ? undefined : ridCondition(f)));
  const tested = ridTests.filter((t) => t !== undefined);
  const together = joined.length > 1 || (joined.length === 1 && tested.length > 0);
  return and(
    sql`r.resource_type = ${search.resourceType}`,
    sql`NOT r.deleted`,
    together && indexProbesSql(R, joined, tested),
    ...search.filters.filter((_, i) => !together || !(probes[i] || ridTests[i])).map((f) => filterSql(f, R, access.rowFilter)),
    compartmentPatient !== undefined && sql`r.patients @> ARRAY[${compartmentPatient}]::text[]`,
    access.rowFilter?.(R, search.resourceType, compartmentPatient ?? patientSearched(search.filters)),
  );
}

/** The Patient a search names as the one its matches refer to (`patient=Patient/x`, `subject=Patient/x`), if one. */
function patientSearched(filters: Filter[]): string | undefined {
  const f = filters[patientFilterAt(filters)];
  return f?.kind === 'reference' ? (f.values[0] as ReferenceValue).id : undefined;
}

/** Where in `filters` is the one that names the Patient the matches refer to (patientSearched); -1 if none. */
function patientFilterAt(filters: Filter[]): number {
  return filters.findIndex((f) => f.kind === 'reference' && f.values.length === 1 && namesPatient(f.param, f.values[0] as ReferenceValue));
}

/** A filter as text, its parameter by its identity: two filters of the same text select the same rows. */
const filterKey = (f: Filter) => JSON.stringify(f, (k, v) => (k === 'param' ? v.hashIdentity : v));

/**
 * The rows of `fhir_resources r` that none of the excepted searches select, as the caller would search them: what a
 * filter reaches is seen through the caller's rule, and a search that reaches a type the caller may not read selects
 * nothing for them, so it leaves nothing out. Each row is probed as few times as the searches allow: searches of one
 * token filter on the same parameter are one probe (the lab results' and the vital signs' categories), and searches
 * that start with the same filter test it once (NOT (a AND b) AND NOT (a AND c) is NOT a OR (NOT b AND NOT c): whether
 * the row has a category of HL7's, asked once for the three searches of what has none).
 */
function noneOf(excepts: ParsedSearch[], access: SearchAccess, row: Identifier = R): Sql | undefined {
  const visible = excepts.map((e) => e.filters).filter((filters) => [...typesReached(filters)].every((type) => access.canRead(type)));
  if (!visible.length) return undefined;
  const searches: Filter[][] = [];
  const tokens = new Map<string, Filter & { kind: 'token' }>();
  for (const filters of visible) {
    const [only] = filters;
    if (filters.length !== 1 || only?.kind !== 'token' || only.modifier) {
      searches.push(filters);
      continue;
    }
    const merged = tokens.get(only.param.hashIdentity);
    if (merged) merged.values = [...merged.values, ...only.values];
    else {
      const copy = { ...only, values: [...only.values] };
      tokens.set(only.param.hashIdentity, copy);
      searches.push([copy]);
    }
  }
  const byFirst = new Map<string, Filter[][]>();
  searches.forEach((filters, i) => {
    const key = filters.length > 1 ? filterKey(filters[0]!) : `alone ${i}`;
    byFirst.set(key, [...(byFirst.get(key) ?? []), filters]);
  });
  // NOT (a AND b) as (NOT a) OR (NOT b): each a probe of the row (notFilterSql).
  const notAll = (filters: Filter[]) => or(...filters.map((f) => notFilterSql(f, row, access.rowFilter)));
  return and(
    ...[...byFirst.values()].map((group) =>
      group.length === 1 ? notAll(group[0]!) : or(notFilterSql(group[0]![0]!, row, access.rowFilter), and(...group.map((filters) => notAll(filters.slice(1))))),
    ),
  );
}

/** A match as read: its content parsed, or (as stored) its id and its content's text. */
interface MatchRow<T> {
  rid: string;
  content?: T;
  id?: string;
  text?: string;
  patients: string[] | null;
}
const PARSED_COLUMNS = sql`r.rid, r.content, r.patients`;
const STORED_COLUMNS = sql`r.rid, r.id, r.content::text AS text, r.patients`;

/**
 * One page (and one row more, to tell whether another follows) of a sorted search: `columns` of `fhir_resources r`,
 * or of `walk`, a walk of them (pagesStatement), as `row`.
 */
function sortedPageSql(search: ParsedSearch, where: Sql, offset: number, columns = PARSED_COLUMNS, walk?: { name: Identifier; row: Identifier }): Sql {
  const row = walk?.row ?? R;
  const order = join([...search.sort.map((s) => sortSql(s, row)), row.col('rid')], ', ');
  const from = walk ? sql`${walk.name} ${row}` : sql`fhir_resources r`;
  return sql`SELECT ${columns} FROM ${from} WHERE ${where} ORDER BY ${order} LIMIT ${search.count + 1} OFFSET ${offset}`;
}

/** The one statement of several sorted searches' pages (pagesStatement): its text, its values, each page's size. */
export interface PagesStatement {
  text: string;
  values: unknown[];
  /** The size of each page: a row beyond it says that more follow. */
  counts: number[];
}

/**
 * Pages of several sorted searches read in one statement, each exactly as searchResources finds it (its filters,
 * the caller's access, its order, `offset` rows on): for a translation that needs many small pages at once (a
 * patient's records of every type). Matches only: no includes, totals or links. Run by readPages.
 */
export function pagesStatement(pages: Array<{ search: ParsedSearch; offset: number; except?: ParsedSearch[] }>, access: SearchAccess): PagesStatement {
  for (const { search } of pages) {
    checkSearchReach(search, access);
    if (!search.sort.length || search.include.length || search.revinclude.length || search.total !== 'none' || search.elements || search.summary)
      throw new Error(`searchPages reads sorted pages of matches only (${search.resourceType})`);
  }
  // The pages of one resource type of one patient (a records page's six sources of Observations) read the patient's
  // resources of that type once, under the caller's rule, with their token entries (walkedRow): each page tests the
  // rows of that walk, where each walked them itself and probed the index again for its category or code.
  const patientAt = pages.map(({ search }) => patientFilterAt(search.filters));
  const walkKeys = pages.map(({ search }, i) => (patientAt[i]! < 0 ? undefined : `${search.resourceType} ${filterKey(search.filters[patientAt[i]!]!)}`));
  const shared = new Set(walkKeys.filter((key, i) => key !== undefined && walkKeys.indexOf(key) !== i));
  const walks = new Map<string, { name: Identifier; sql: Sql }>();
  pages.forEach(({ search }, i) => {
    const key = walkKeys[i];
    if (key === undefined || !shared.has(key) || walks.has(key)) return;
    const name = alias('walk');
    // What the search of the patient alone selects; the columns a row test or an order reads (filterSql, sortSql),
    // and the content only of the rows a page keeps.
    const where = searchWhere({ ...search, filters: [search.filters[patientAt[i]!]!] }, access);
    walks.set(key, { name, sql: sql`${name} AS MATERIALIZED (SELECT r.rid, r.id, r.last_updated, ${WALK_TOKENS} FROM fhir_resources r WHERE ${where})` });
  });
  // Each branch numbers its rows in its own order; the outer ORDER BY keeps them so (UNION ALL alone promises no order).
  const branches = pages.map(({ search, offset, except = [] }, i) => {
    const key = walkKeys[i];
    const walk = key === undefined ? undefined : walks.get(key);
    if (!walk) return sql`SELECT ${i}::int AS q, row_number() OVER () AS n, p.content FROM (${sortedPageSql(search, and(searchWhere(search, access), noneOf(except, access)), offset)}) p`;
    const row = walkedRow('w');
    const where = and(...search.filters.filter((_, k) => k !== patientAt[i]).map((f) => rowTestSql(f, row, access.rowFilter)), noneOf(except, access, row));
    const page = sortedPageSql(search, where, offset, row.col('rid'), { name: walk.name, row });
    return sql`SELECT ${i}::int AS q, row_number() OVER () AS n, (SELECT c.content FROM fhir_resources c WHERE c.rid = p.rid) AS content FROM (${page}) p`;
  });
  const withs = walks.size ? sql`WITH ${join([...walks.values()].map((w) => w.sql), ', ')} ` : sql``;
  const { text, values } = pages.length ? sql`${withs}${join(branches, ' UNION ALL ')} ORDER BY q, n`.render() : { text: '', values: [] };
  return { text, values, counts: pages.map(({ search }) => search.count) };
}

/** The pages of pagesStatement's statement. `more`: rows follow the page. */
export async function readPages(db: Queryable, statement: PagesStatement): Promise<Array<{ resources: Resource[]; more: boolean }>> {
  if (!statement.counts.length) return [];
  const { rows } = await db.query<{ q: number; content: Resource }>(statement.text, statement.values);
  const out = statement.counts.map(() => ({ resources: [] as Resource[], more: false }));
  for (const row of rows) {
    const page = out[row.q]!;
    if (page.resources.length < statement.counts[row.q]!) page.resources.push(row.content);
    else page.more = true;
  }
  return out;
}

/**
 * The note in an empty searchset of a caller whose view the access policy narrows: on every such answer,
 * whether or not anything was hidden, so it tells nothing about data the caller may not see.
 */
export const NARROWED_SEARCH_NOTE =
  "Results are limited to data your organisation may see: patients' consent (docs/integrators.md 'Consent'). An operator client (--all-patients) or a consent grant shows more.";

function narrowedSearchNote<T extends Resource>(): BundleEntry<T> {
  return {
    resource: { resourceType: 'OperationOutcome', issue: [{ severity: 'information', code: 'informational', diagnostics: NARROWED_SEARCH_NOTE }] } as unknown as T,
    search: { mode: 'outcome' },
  };
}

/** The resource row of a search, history or export statement: `fhir_resources r`. */
export const R = ident('r');

/**
 * One page in rid order of the rows `where` selects (on `fhir_resources r`): the page after `afterRid`, or
 * (backwards) the page that ends just before `beforeRid`. `more`: rows remain beyond it in the direction read.
 */
export async function keysetPage<Row extends { rid: string }>(
  db: Queryable,
  select: Sql,
  where: Sql,
  count: number,
  cursor: Cursor | undefined,
): Promise<{ rows: Row[]; more: boolean }> {
  const backward = cursor?.beforeRid !== undefined;
  const bound =
    cursor?.beforeRid !== undefined ? sql`r.rid < ${cursor.beforeRid}::bigint` : cursor?.afterRid !== undefined ? sql`r.rid > ${cursor.afterRid}::bigint` : undefined;
  const { text, values } = sql`SELECT ${select} FROM fhir_resources r WHERE ${and(where, bound)} ORDER BY r.rid${backward ? sql` DESC` : sql``} LIMIT ${count + 1}`.render();
  const { rows } = await db.query<Row>(text, values);
  const page = rows.slice(0, count);
  return { rows: backward ? page.reverse() : page, more: rows.length > count };
}

/**
 * Links around a keyset page (`rows` in rid order): `next` and `previous`, and when there are several pages,
 * `first` (no cursor) and `last` (the page before END_RID: it ends with the last row, so it need not align with
 * the pages read forwards). `link` builds a link to a cursor (none: the first page).
 */
export function keysetLinks(
  cursor: Cursor | undefined,
  rows: Array<{ rid: string }>,
  more: boolean,
  total: number | undefined,
  link: (relation: string, to?: Cursor) => BundleLink,
): BundleLink[] {
  const backward = cursor?.beforeRid !== undefined;
  const firstRid = rows[0]?.rid;
  const lastRid = rows[rows.length - 1]?.rid;
  const out: BundleLink[] = [];
  // Backwards, the page was reached from a later one; forwards, from an earlier one when a cursor was given.
  // An empty page points at everything before it (the last page) or after it (the first page).
  if (backward ? more : cursor?.afterRid !== undefined) out.push(link('previous', { beforeRid: firstRid ?? END_RID, total }));
  if (backward || more) out.push(link('next', lastRid !== undefined ? { afterRid: lastRid, total } : undefined));
  if (out.length) out.unshift(link('first')), out.push(link('last', { beforeRid: END_RID, total }));
  return out;
}

/** Links around an offset page (explicit `_sort`); `last` only when the total is known. */
function offsetLinks(offset: number, count: number, more: boolean, total: number | undefined, link: (relation: string, to?: Cursor) => BundleLink): BundleLink[] {
  const out: BundleLink[] = [];
  if (offset > 0) out.push(link('previous', { offset: Math.max(0, offset - count), total }));
  if (more) out.push(link('next', { offset: offset + count, total }));
  if (out.length) {
    out.unshift(link('first'));
    if (total !== undefined) out.push(link('last', { offset: Math.max(0, Math.floor((total - 1) / count) * count), total }));
  }
  return out;
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
  const t = ident('t');
  const { text, values } = sql`SELECT DISTINCT t.rid, t.content, t.patients FROM fhir_resources s
     JOIN fhir_idx_reference ref ON ref.rid = s.rid AND ref.hash_identity = ${rule.param.hashIdentity}
     JOIN fhir_resources t ON t.resource_type = ref.target_type AND t.id = ref.target_id AND NOT t.deleted
     WHERE ${and(sql`s.resource_type = ${rule.sourceType} AND s.id = ANY(${ids}::text[]) AND ref.target_type = ANY(${readable}::text[])`, access.rowFilter?.(t))}
     ORDER BY t.rid LIMIT ${MAX_INCLUDED + 1}`.render();
  const { rows } = await db.query<{ content: Resource; patients: string[] | null }>(text, values);
  return rows.map((r) => withFiledPatients(r.content, r.patients));
}

async function reverseIncludes(db: Queryable, to: Resource[], rule: IncludeRule, access: SearchAccess): Promise<Resource[]> {
  if (!access.canRead(rule.sourceType)) return [];
  const byType = new Map<string, string[]>();
  for (const r of to) if (!rule.targetType || r.resourceType === rule.targetType) byType.set(r.resourceType, [...(byType.get(r.resourceType) ?? []), r.id!]);
  const out: Resource[] = [];
  for (const [type, ids] of byType) {
    if (!rule.param.targets.includes(type)) continue;
    const s = ident('s');
    const { text, values } = sql`SELECT DISTINCT s.rid, s.content, s.patients FROM fhir_idx_reference ref JOIN fhir_resources s ON s.rid = ref.rid AND NOT s.deleted
       WHERE ${and(sql`ref.hash_identity = ${rule.param.hashIdentity} AND ref.target_type = ${type} AND ref.target_id = ANY(${ids}::text[])`, access.rowFilter?.(s, rule.sourceType))}
       ORDER BY s.rid LIMIT ${MAX_INCLUDED + 1}`.render();
    const { rows } = await db.query<{ content: Resource; patients: string[] | null }>(text, values);
    out.push(...rows.map((r) => withFiledPatients(r.content, r.patients)));
  }
  return out;
}
