import type { ValueSet, ValueSetComposeInclude, ValueSetComposeIncludeFilter, ValueSetExpansionContains } from '@medplum/fhirtypes';
import { badRequest, validationFailed } from '../../core/errors';
import { sqlState, type Queryable } from '../../db/database';
import { and, join, sql, type Sql } from '../../db/sql';
import { normalizeString } from '../normalize';
import { currentFirst } from './current';

/** The R4 filter operators an expansion understands (FilterOperator). */
export const FILTER_OPS = ['=', 'is-a', 'descendent-of', 'is-not-a', 'regex', 'in', 'not-in', 'generalizes', 'exists'] as const;
/** Longest filter value (a regex, a list for `in`). */
const MAX_FILTER_VALUE = 4096;
/** Properties that name the concept itself in a hierarchy filter. */
const CONCEPT_PROPERTIES = new Set(['concept', 'code', 'parent', 'child']);

/** The code system and value set urls a value set's compose draws on: a load of any of them expands it again. */
export function dependenciesOf(vs: ValueSet): string[] {
  const urls = new Set<string>();
  for (const inc of [...(vs.compose?.include ?? []), ...(vs.compose?.exclude ?? [])]) {
    if (typeof inc?.system === 'string') urls.add(inc.system);
    for (const v of Array.isArray(inc?.valueSet) ? inc.valueSet : []) if (typeof v === 'string') urls.add(v.split('|')[0]!);
  }
  return [...urls];
}

/** Not expandable (yet), and why: the value set stays loaded and answers with this reason. */
class Unexpandable extends Error {}

interface Resolved {
  id: string;
  version: string;
}

async function codeSystemOf(tx: Queryable, url: string, version: string | undefined): Promise<Resolved | undefined> {
  const r = await tx.query<Resolved>(
    `SELECT id::text, version FROM term_code_systems WHERE url = $1 AND state = 'active' AND ($2::text IS NULL OR version = $2) ORDER BY ${currentFirst('term_code_systems')} LIMIT 1`,
    [url, version ?? null],
  );
  return r.rows[0];
}

async function valueSetOf(tx: Queryable, ref: string): Promise<string> {
  const [url, version] = ref.split('|');
  const r = await tx.query<{ id: string; unexpandable: string | null }>(
    `SELECT id::text, unexpandable FROM term_value_sets WHERE url = $1 AND state = 'active' AND ($2::text IS NULL OR version = $2) ORDER BY ${currentFirst('term_value_sets')} LIMIT 1`,
    [url, version ?? null],
  );
  const vs = r.rows[0];
  if (!vs) throw new Unexpandable(`it includes value set ${ref}, which is not loaded`);
  if (vs.unexpandable) throw new Unexpandable(`it includes value set ${ref}, which cannot be expanded: ${vs.unexpandable}`);
  return vs.id;
}

async function conceptId(tx: Queryable, cs: Resolved, system: string, code: string): Promise<string> {
  const r = await tx.query<{ cid: string }>('SELECT cid::text FROM term_concepts WHERE cs = $1 AND code = $2', [cs.id, code]);
  if (!r.rows[0]) throw new Unexpandable(`its filter names ${code}, which is not a code of ${system}`);
  return r.rows[0].cid;
}

/** A property's value as text, whatever its type (valueCode, valueString, valueCoding.code, …). */
const propertyValue = sql`coalesce(p->>'valueCode', p->>'valueString', p->'valueCoding'->>'code', p->>'valueBoolean', p->>'valueInteger', p->>'valueDecimal', p->>'valueDateTime')`;

/** A filter's shape, whatever is loaded: strings, a known op, a value it can take. */
function checkFilter(f: ValueSetComposeIncludeFilter): { property: string; op: string; value: string } {
  const { property, op, value } = f ?? ({} as ValueSetComposeIncludeFilter);
  if (typeof property !== 'string' || typeof op !== 'string' || typeof value !== 'string') throw badRequest('A filter has a property, an op and a value (strings)');
  if (value.length > MAX_FILTER_VALUE) throw badRequest(`A filter value is at most ${MAX_FILTER_VALUE} characters`);
  if (!(FILTER_OPS as readonly string[]).includes(op)) throw badRequest(`filter op "${op.slice(0, 40)}" is not one of ${FILTER_OPS.join(', ')}`);
  if (op === 'exists' && value !== 'true' && value !== 'false') throw badRequest('filter exists: the value is true or false');
  if (op === 'regex')
    try {
      new RegExp(value);
    } catch {
      throw badRequest(`filter ${property} regex: "${value.slice(0, 80)}" is not a regular expression`);
    }
  return { property, op, value };
}

/** The pattern a regex filter matches with (PostgreSQL's `~`, the whole value). */
const regexPattern = (value: string) => `^(?:${value})$`;

/**
 * The filters of a value set's compose, checked as it is loaded (before, and whether or not, its code systems are):
 * a filter that could never be expanded is refused then, not found at each later load of a code system. A regex
 * must compile in JavaScript and in PostgreSQL (which lacks some of JavaScript's constructs: `\p{…}`, named groups).
 */
export async function checkCompose(tx: Queryable, vs: ValueSet): Promise<void> {
  const parts = [...(Array.isArray(vs.compose?.include) ? vs.compose.include : []), ...(Array.isArray(vs.compose?.exclude) ? vs.compose.exclude : [])];
  for (const inc of parts) {
    for (const f of Array.isArray(inc?.filter) ? inc.filter : []) {
      const { property, op, value } = checkFilter(f);
      if (op !== 'regex') continue;
      try {
        await tx.query(`SELECT '' ~ $1 AS m`, [regexPattern(value)]);
      } catch (err) {
        if (sqlState(err) !== INVALID_REGEX) throw err;
        throw badRequest(`filter ${property} regex: "${value.slice(0, 80)}" is not a regular expression PostgreSQL reads (${err instanceof Error ? err.message : String(err)})`);
      }
    }
  }
}

/** SQLSTATE of a regular expression PostgreSQL cannot compile. */
const INVALID_REGEX = '2201B';

/** The condition of one filter on concepts `c` of code system `cs`. */
async function filterSql(tx: Queryable, cs: Resolved, system: string, f: ValueSetComposeIncludeFilter): Promise<Sql> {
  const { property, op, value } = checkFilter(f);
  const values = op === 'in' || op === 'not-in' ? value.split(',').map((v) => v.trim()) : [value];
  const concept = CONCEPT_PROPERTIES.has(property);
  switch (op) {
    case 'is-a':
    case 'descendent-of':
    case 'is-not-a':
    case 'generalizes': {
      if (!concept) throw new Unexpandable(`filter ${property} ${op}: hierarchy filters apply to the property "concept"`);
      const x = await conceptId(tx, cs, system, value);
      if (op === 'generalizes') return sql`c.cid IN (SELECT ancestor FROM term_closure WHERE descendant = ${x})`;
      const below = sql`c.cid IN (SELECT descendant FROM term_closure WHERE ancestor = ${x})`;
      if (op === 'is-not-a') return sql`NOT ${below}`;
      return op === 'descendent-of' ? sql`${below} AND c.cid <> ${x}` : below;
    }
    case 'regex': {
      const pattern = regexPattern(value);
      if (concept) return sql`c.code ~ ${pattern}`;
      if (property === 'display') return sql`c.display ~ ${pattern}`;
      return sql`EXISTS (SELECT 1 FROM jsonb_array_elements(c.properties) p WHERE p->>'code' = ${property} AND ${propertyValue} ~ ${pattern})`;
    }
    case '=':
    case 'in':
    case 'not-in': {
      let cond: Sql;
      if (property === 'parent' || property === 'child') {
        // The concepts whose parent (child) is one of the values: the hierarchy's direct edges.
        const ids = [];
        for (const v of values) ids.push(await conceptId(tx, cs, system, v));
        cond = property === 'parent'
          ? sql`c.cid IN (SELECT child FROM term_edges WHERE parent = ANY(${ids}::bigint[]))`
          : sql`c.cid IN (SELECT parent FROM term_edges WHERE child = ANY(${ids}::bigint[]))`;
      } else if (concept) cond = sql`c.code = ANY(${values}::text[])`;
      else if (property === 'display') cond = sql`c.display = ANY(${values}::text[])`;
      else if (property === 'inactive') cond = sql`(NOT c.active)::text = ANY(${values}::text[])`;
      else cond = sql`EXISTS (SELECT 1 FROM jsonb_array_elements(c.properties) p WHERE p->>'code' = ${property} AND ${propertyValue} = ANY(${values}::text[]))`;
      return op === 'not-in' ? sql`NOT (${cond})` : cond;
    }
    case 'exists': {
      const has = sql`EXISTS (SELECT 1 FROM jsonb_array_elements(c.properties) p WHERE p->>'code' = ${property})`;
      return value === 'true' ? has : sql`NOT ${has}`;
    }
    default:
      throw badRequest(`filter op "${String(op).slice(0, 40)}" is not one of ${FILTER_OPS.join(', ')}`);
  }
}

/** One include (or exclude) as rows (i, n, system, version, code, display, display_norm, inactive). */
async function includeSql(tx: Queryable, inc: ValueSetComposeInclude, i: number): Promise<Sql> {
  if (!inc || typeof inc !== 'object') throw badRequest('compose.include holds objects');
  const refs = Array.isArray(inc.valueSet) ? inc.valueSet : [];
  for (const ref of refs) if (typeof ref !== 'string') throw badRequest('compose.include.valueSet holds canonical urls');
  const setIds: string[] = [];
  for (const ref of refs) setIds.push(await valueSetOf(tx, ref));
  /** The (system, code) also in every value set the include names. */
  const inSets = (system: Sql, code: Sql) => setIds.map((id) => sql`(${system}, ${code}) IN (SELECT system, code FROM term_value_set_codes WHERE vs = ${id})`);
  if (typeof inc.system !== 'string') {
    if (!setIds.length) throw badRequest('A compose include names a system or value sets');
    const [first, ...rest] = setIds;
    const others = rest.map((o) => sql`(v.system, v.code) IN (SELECT system, code FROM term_value_set_codes WHERE vs = ${o})`);
    return sql`SELECT ${i}::int AS i, v.ord::bigint AS n, v.system, v.version, v.code, v.display, v.display_norm, v.inactive
      FROM term_value_set_codes v WHERE ${and(sql`v.vs = ${first}`, ...others)}`;
  }
  const system = inc.system;
  const cs = await codeSystemOf(tx, system, typeof inc.version === 'string' ? inc.version : undefined);
  const concepts = Array.isArray(inc.concept) ? inc.concept : undefined;
  if (concepts) {
    const codes = concepts.map((c) => c?.code);
    if (codes.some((c) => typeof c !== 'string')) throw badRequest(`compose.include.concept of ${system}: each has a code`);
    const displays = concepts.map((c) => (typeof c.display === 'string' ? c.display : null));
    if (cs) {
      const missing = await tx.query<{ code: string }>(
        'SELECT l.code FROM unnest($1::text[]) AS l(code) WHERE NOT EXISTS (SELECT 1 FROM term_concepts t WHERE t.cs = $2 AND t.code = l.code) LIMIT 3',
        [codes, cs.id],
      );
      if (missing.rows.length) throw new Unexpandable(`it includes ${missing.rows.map((r) => r.code).join(', ')}, not codes of ${system}`);
    }
    const displayNorms = displays.map((d) => (d === null ? null : normalizeString(d)));
    return sql`SELECT ${i}::int AS i, l.n AS n, ${system}::text AS system, ${cs?.version || null}::text AS version, l.code, coalesce(l.display, c.display) AS display,
        coalesce(l.display_norm, c.display_norm) AS display_norm, coalesce(NOT c.active, false) AS inactive
      FROM unnest(${codes}::text[], ${displays}::text[], ${displayNorms}::text[]) WITH ORDINALITY AS l(code, display, display_norm, n)
      LEFT JOIN term_concepts c ON c.cs = ${cs?.id ?? null}::bigint AND c.code = l.code
      WHERE ${and(...inSets(sql`${system}::text`, sql`l.code`))}`;
  }
  if (!cs) throw new Unexpandable(`it draws on code system ${system}${inc.version ? `|${inc.version}` : ''}, which is not loaded`);
  const filters = Array.isArray(inc.filter) ? inc.filter : [];
  const conds: Sql[] = [];
  for (const f of filters) conds.push(await filterSql(tx, cs, system, f));
  return sql`SELECT ${i}::int AS i, c.cid AS n, ${system}::text AS system, ${cs.version || null}::text AS version, c.code, c.display, c.display_norm, NOT c.active AS inactive
    FROM term_concepts c WHERE ${and(sql`c.cs = ${cs.id}`, ...conds, ...inSets(sql`${system}::text`, sql`c.code`))}`;
}

/** Includes and excludes, filters of one, value sets one names: the most a value set given in a request may have. */
const MAX_GIVEN_PARTS = 50;
const MAX_GIVEN_FILTERS = 20;

/**
 * The expansion of `vs` as rows (ord, system, version, code, display, display_norm, inactive), ord from 1: its compose
 * against the active code systems, or its given expansion when it has no compose. Throws Unexpandable when it draws
 * on what is not loaded.
 */
async function expansionSql(tx: Queryable, vs: ValueSet): Promise<Sql> {
  if (vs.compose) {
    const includes = Array.isArray(vs.compose.include) ? vs.compose.include : [];
    if (!includes.length) throw badRequest(`ValueSet ${vs.url ?? ''}: compose.include is empty`);
    const inc = await Promise.all(includes.map((x, i) => includeSql(tx, x, i)));
    const excludes = Array.isArray(vs.compose.exclude) ? vs.compose.exclude : [];
    const exc = await Promise.all(excludes.map((x, i) => includeSql(tx, x, i)));
    const inactive = vs.compose.inactive === false ? sql` AND NOT d.inactive` : sql``;
    return sql`SELECT row_number() OVER (ORDER BY d.i, d.n) AS ord, d.system, d.version, d.code, d.display, d.display_norm, d.inactive
        FROM (SELECT DISTINCT ON (u.system, u.code) u.* FROM (${join(inc.map((s) => sql`(${s})`), ' UNION ALL ')}) u ORDER BY u.system, u.code, u.i, u.n) d
        WHERE true${exc.length ? sql` AND (d.system, d.code) NOT IN (SELECT e.system, e.code FROM (${join(exc.map((s) => sql`(${s})`), ' UNION ALL ')}) e)` : sql``}${inactive}`;
  }
  if (!vs.expansion) throw new Unexpandable('it has neither a compose nor an expansion');
  const rows: Array<[string, string | null, string, string | null, boolean]> = [];
  // Depth first, in order, without recursion (a given expansion may nest deeply).
  const stack: unknown[] = [...(Array.isArray(vs.expansion.contains) ? vs.expansion.contains : [])].reverse();
  while (stack.length) {
    const c = stack.pop() as ValueSetExpansionContains | null;
    if (!c || typeof c !== 'object') continue;
    if (typeof c.system === 'string' && typeof c.code === 'string')
      rows.push([c.system, typeof c.version === 'string' ? c.version : null, c.code, typeof c.display === 'string' ? c.display : null, c.inactive === true]);
    if (Array.isArray(c.contains)) for (let k = c.contains.length - 1; k >= 0; k--) stack.push(c.contains[k]);
  }
  const seen = new Set<string>();
  const unique = rows.filter((r) => !seen.has(`${r[0]}|${r[2]}`) && seen.add(`${r[0]}|${r[2]}`));
  const col = (k: number) => unique.map((r) => r[k]);
  return sql`SELECT n AS ord, s AS system, v AS version, c AS code, d AS display, lower(d) AS display_norm, x AS inactive
    FROM unnest(${col(0)}::text[], ${col(1)}::text[], ${col(2)}::text[], ${col(3)}::text[], ${col(4)}::boolean[]) WITH ORDINALITY AS t(s, v, c, d, x, n)`;
}

/**
 * A value set given in a request (`$expand` or `$validate-code` with `valueSet`), evaluated as a loaded one is
 * (expansionSql) against what is loaded, and kept nowhere: its rows as SQL. Its filters are checked as a load checks
 * them (400); one that draws on a code system or value set not loaded is a 422 naming it.
 */
export async function givenExpansion(tx: Queryable, vs: unknown): Promise<Sql> {
  if (!vs || typeof vs !== 'object' || Array.isArray(vs) || (vs as ValueSet).resourceType !== 'ValueSet') throw badRequest('Parameter valueSet is a ValueSet resource');
  const v = vs as ValueSet;
  if (v.compose !== undefined && (!v.compose || typeof v.compose !== 'object')) throw badRequest('ValueSet.compose is an object');
  if (!v.compose && (!v.expansion || typeof v.expansion !== 'object')) throw badRequest('The ValueSet given has neither a compose nor an expansion');
  // A part of the wrong shape is refused, not left out: an ignored filter, concept list, value set or exclude would
  // widen the value set (to the whole code system), and $validate-code would call valid what it excludes.
  for (const key of ['include', 'exclude'] as const)
    if (v.compose?.[key] !== undefined && (!Array.isArray(v.compose[key]) || v.compose[key]!.some((p) => !p || typeof p !== 'object' || Array.isArray(p))))
      throw badRequest(`ValueSet.compose.${key} is an array of objects`);
  const parts = [...(Array.isArray(v.compose?.include) ? v.compose.include : []), ...(Array.isArray(v.compose?.exclude) ? v.compose.exclude : [])];
  for (const p of parts)
    for (const key of ['filter', 'concept', 'valueSet'] as const)
      if (p[key] !== undefined && !Array.isArray(p[key])) throw badRequest(`ValueSet.compose.include.${key} (and exclude's) is an array`);
  if (parts.length > MAX_GIVEN_PARTS) throw badRequest(`The ValueSet given has at most ${MAX_GIVEN_PARTS} includes and excludes`);
  for (const p of parts)
    if ((Array.isArray(p?.filter) && p.filter.length > MAX_GIVEN_FILTERS) || (Array.isArray(p?.valueSet) && p.valueSet.length > MAX_GIVEN_FILTERS))
      throw badRequest(`An include of the ValueSet given has at most ${MAX_GIVEN_FILTERS} filters and ${MAX_GIVEN_FILTERS} value sets`);
  await checkCompose(tx, v);
  try {
    return await expansionSql(tx, v);
  } catch (err) {
    if (err instanceof Unexpandable) throw validationFailed(`The ValueSet given cannot be expanded: ${err.message}`);
    throw err;
  }
}

/**
 * Writes the expansion of `vs` (row `id` of term_value_sets): its compose against the active code systems, or its
 * given expansion when it has no compose. A compose that draws on what is not loaded marks it unexpandable.
 */
export async function expandInto(tx: Queryable, id: string, vs: ValueSet): Promise<{ count: number; unexpandable?: string }> {
  await tx.query('DELETE FROM term_value_set_codes WHERE vs = $1', [id]);
  let unexpandable: string | undefined;
  let count = 0;
  try {
    const { text, values } = sql`INSERT INTO term_value_set_codes (vs, ord, system, version, code, display, display_norm, inactive)
      SELECT ${id}, e.* FROM (${await expansionSql(tx, vs)}) e`.render();
    count = (await tx.query(text, values)).rowCount;
  } catch (err) {
    if (!(err instanceof Unexpandable)) throw err;
    unexpandable = err.message;
    count = 0;
  }
  await tx.query('UPDATE term_value_sets SET unexpandable = $2, code_count = $3 WHERE id = $1', [id, unexpandable ?? null, count]);
  return { count, unexpandable };
}
