import { alias, and, ident, or, sql, type Identifier, type Sql } from '../../db/sql';
import { isoInstant } from '../dates';
import { hashKey } from '../../core/hash';
import { indexedPrefix, STRING_INDEX_CHARS, URI_INDEX_CHARS } from '../indexer';
import { escapeLike, normalizeString } from '../normalize';
import type { RowFilter } from '../store/types';
import type { DateValue, Filter, NumberValue, Prefix, QuantityValue, SortRule } from './parse';
import { hierarchyCondition, valueSetCondition } from './terminology';

/** The index table of each search parameter type. */
const TABLE = {
  token: ident('fhir_idx_token'),
  string: ident('fhir_idx_string'),
  date: ident('fhir_idx_date'),
  number: ident('fhir_idx_number'),
  quantity: ident('fhir_idx_quantity'),
  reference: ident('fhir_idx_reference'),
  uri: ident('fhir_idx_uri'),
} as const;

/**
 * `row.rid IN (rows of `table` matching any of `conditions`)`, or (`negate`) none of its rows matches. The negation
 * is NOT EXISTS, probed per row through the table's (rid, …) index: `NOT IN (subquery)` cannot become an anti-join
 * and hashes every matching row of the whole table (`category:not=laboratory` hashed every lab result of every
 * patient to read one patient's observations).
 */
function inIndex(row: Identifier, table: Identifier, conditions: Sql[], negate = false): Sql {
  if (negate) return sql`NOT ${hasEntry(row, table, conditions)}`;
  return sql`${row.col('rid')} IN (SELECT rid FROM ${table} WHERE ${or(...conditions)})`;
}

type Bound = () => Sql;

/**
 * Range comparison of a resource range [low, high] against a search value, per R4 prefix rules:
 * eq: contained in the search range; gt/ge/lt/le/sa/eb: compared with its bounds; ap: overlap
 * with the widened range. Bounds are bound lazily: only the parameters a prefix uses are added.
 */
function rangeCondition(prefix: Prefix, low: Sql, high: Sql, sLow: Bound, sHigh: Bound, apLow: Bound, apHigh: Bound): Sql {
  switch (prefix) {
    case 'eq':
      return sql`${low} >= ${sLow()} AND ${high} <= ${sHigh()}`;
    case 'ne':
      return sql`NOT (${low} >= ${sLow()} AND ${high} <= ${sHigh()})`;
    case 'gt':
      return sql`${high} > ${sHigh()}`;
    case 'ge':
      return sql`${high} >= ${sLow()}`;
    case 'lt':
      return sql`${low} < ${sLow()}`;
    case 'le':
      return sql`${low} <= ${sHigh()}`;
    case 'sa':
      return sql`${low} > ${sHigh()}`;
    case 'eb':
      return sql`${high} < ${sLow()}`;
    case 'ap':
      return sql`${low} <= ${apHigh()} AND ${high} >= ${apLow()}`;
  }
}

/** Dates: `ap` widens the range by 10% of its distance from now (at least a day). */
function dateCondition(v: DateValue, low: Sql, high: Sql): Sql {
  const from = Date.parse(v.low);
  const to = Date.parse(v.high);
  const margin = Math.max(0.1 * Math.abs(Date.now() - from), 86_400_000);
  const at = (iso: string): Bound => () => sql`${iso}::timestamptz`;
  return rangeCondition(v.prefix, low, high, at(v.low), at(v.high), at(isoInstant(from - margin)), at(isoInstant(to + margin)));
}

/** Numbers: eq/ne use the precision range of the searched value; ap ±10%; the others its exact value. */
function numberCondition(v: NumberValue, low: Sql, high: Sql): Sql {
  const at = (n: number): Bound => () => sql`${String(n)}::numeric`;
  const margin = Math.abs(v.value) * 0.1;
  switch (v.prefix) {
    case 'eq':
      return sql`${low} >= ${at(v.low)()} AND ${high} < ${at(v.high)()}`;
    case 'ne':
      return sql`NOT (${low} >= ${at(v.low)()} AND ${high} < ${at(v.high)()})`;
    default:
      return rangeCondition(v.prefix, low, high, at(v.value), at(v.value), at(v.value - margin), at(v.value + margin));
  }
}

function quantityCondition(v: QuantityValue): Sql {
  const value = sql`value`;
  return sql`${numberCondition(v, value, value)}${v.system ? sql` AND system = ${v.system}` : sql``}${
    v.code ? (v.system ? sql` AND code = ${v.code}` : sql` AND (code = ${v.code} OR unit = ${v.code})`) : sql``
  }`;
}

/**
 * SQL condition on resource alias `alias` for one filter. `access` restricts the resources a chain or
 * `_has` looks through, so a search cannot reveal anything about resources the caller may not see.
 */
export function filterSql(f: Filter, r: Identifier, access?: RowFilter): Sql {
  switch (f.kind) {
    case 'id': {
      const cond = sql`${r.col('id')} = ANY(${f.values}::text[])`;
      return f.not ? sql`NOT (${cond})` : cond;
    }
    case 'lastUpdated':
      return or(...f.values.map((v) => dateCondition(v, r.col('last_updated'), r.col('last_updated'))));
    case 'missing':
      return ridCondition(f)!(r);
    case 'token':
    case 'string':
    case 'date':
    case 'number':
    case 'quantity':
    case 'uri':
    case 'reference': {
      const [table, conditions] = indexConditionsOf(f)!;
      // :not and :not-in: rows with no index entry that matches.
      return inIndex(r, table, conditions, negated(f));
    }
    case 'chain': {
      // The resources referred to, of any target type, that match the inner filter and that the caller may see.
      const ref = alias('ref');
      const t = alias('c');
      // Each target type's own access rule (its class a constant): the rule of any type is far costlier to plan.
      const perType = f.targetTypes.map((type, i) => and(sql`${t.col('resource_type')} = ${type}`, filterSql(f.inner[i]!, t, access), access?.(t, type)));
      return sql`${r.col('rid')} IN (SELECT ${ref.col('rid')} FROM fhir_idx_reference ${ref}
        JOIN fhir_resources ${t} ON ${t.col('resource_type')} = ${ref.col('target_type')} AND ${t.col('id')} = ${ref.col('target_id')} AND NOT ${t.col('deleted')}
        WHERE ${ref.col('hash_identity')} = ${f.param.hashIdentity} AND ${or(...perType)})`;
    }
    case 'has': {
      const { ref, rows } = referringRows(f, access, (h) => filterSql(f.inner, h, access));
      return sql`${r.col('id')} IN (SELECT ${ref.col('target_id')} FROM ${rows})`;
    }
  }
}

/**
 * The negation of filterSql(f) on `r`, as tests of the row itself: its index entries probed by its rid (EXISTS, NOT
 * EXISTS), and for `_has` the references to it probed by its id. `NOT (r.rid IN (subquery))` would hash every match
 * of the whole table (inIndex): a records page's observations, which leave out what lab results select, hashed every
 * lab result of every patient (14,000 rows, 18 ms) to read one patient's.
 */
export function notFilterSql(f: Filter, r: Identifier, access?: RowFilter): Sql {
  if (f.kind === 'missing') return ridCondition({ ...f, missing: !f.missing })!(r);
  if (f.kind === 'has') return sql`NOT ${referredByProbe(f, r, access)}`;
  const index = indexConditionsOf(f);
  if (!index) return sql`NOT (${filterSql(f, r, access)})`;
  // The row has an entry that matches (the negation of :not), or has none.
  return negated(f) ? hasEntry(r, index[0], index[1]) : inIndex(r, index[0], index[1], true);
}

/**
 * `_has`: the FROM and WHERE of the resources of another type that refer to a resource of the target type through the
 * parameter (`ref`: their reference rows), each as the caller may see it and meeting `inner`, the inner filter.
 */
function referringRows(f: Filter & { kind: 'has' }, access: RowFilter | undefined, inner: (h: Identifier) => Sql): { ref: Identifier; rows: Sql } {
  const ref = alias('ref');
  const h = alias('h');
  return {
    ref,
    rows: sql`fhir_idx_reference ${ref}
      JOIN fhir_resources ${h} ON ${and(sql`${h.col('rid')} = ${ref.col('rid')} AND NOT ${h.col('deleted')}`, access?.(h, f.param.resourceType))}
      WHERE ${ref.col('hash_identity')} = ${f.param.hashIdentity} AND ${ref.col('target_type')} = ${f.targetType} AND ${inner(h)}`,
  };
}

/** `_has` as a probe of the row: a resource that refers to it by its id, meeting the inner filter. */
function referredByProbe(f: Filter & { kind: 'has' }, r: Identifier, access?: RowFilter): Sql {
  const { ref, rows } = referringRows(f, access, (h) => rowTestSql(f.inner, h, access));
  return sql`EXISTS (SELECT 1 FROM ${rows} AND ${ref.col('target_id')} = ${r.col('id')})`;
}

/**
 * filterSql(f) as a test of the row itself: an index filter probed by the row's rid (EXISTS), `_has` by the
 * references to its id, not a set of rids or ids that the planner may build whole for every patient.
 */
export function rowTestSql(f: Filter, r: Identifier, access?: RowFilter): Sql {
  if (f.kind === 'has') return referredByProbe(f, r, access);
  const index = indexProbeOf(f);
  return index ? hasEntry(r, index[0], index[1]) : filterSql(f, r, access);
}

/**
 * Rows read with their token entries beside them, as an array of fhir_idx_token rows in a `token_entries` column
 * (WALK_TOKENS): pagesStatement reads a patient's resources of one type once for all the pages that search them, and
 * each page's tests of their tokens (a category, a code, a category of no system of HL7's) read that array instead of
 * probing the index again for every page.
 */
const WALKED = new WeakSet<Identifier>();

/** A new alias of a row read with its token entries (WALK_TOKENS). */
export function walkedRow(prefix: string): Identifier {
  const row = alias(prefix);
  WALKED.add(row);
  return row;
}

/** The column of a walk of `fhir_resources r` that holds each row's token entries (walkedRow). */
export const WALK_TOKENS = sql`ARRAY(SELECT t FROM fhir_idx_token t WHERE t.rid = r.rid) AS token_entries`;

/**
 * The row has an entry of `table` meeting any of `conditions`, probed through the table's (rid, …) index, or read
 * from the entries read with the row (walkedRow). `fence`: kept a filter on the rows (OFFSET 0, ridCondition).
 */
function hasEntry(row: Identifier, table: Identifier, conditions: Sql[], fence = false): Sql {
  const x = alias('x');
  if (table === TABLE.token && WALKED.has(row)) return sql`EXISTS (SELECT 1 FROM unnest(${row.col('token_entries')}) ${x} WHERE ${or(...conditions)})`;
  return sql`EXISTS (SELECT 1 FROM ${table} ${x} WHERE ${x.col('rid')} = ${row.col('rid')} AND (${or(...conditions)})${fence ? sql` OFFSET 0` : sql``})`;
}

/** A token filter that selects the rows with no matching index entry (:not, :not-in). */
const negated = (f: Filter) => f.kind === 'token' && (f.modifier === 'not' || f.modifier === 'not-in');

/**
 * A filter that is a test of the row's own index entries, probed by its rid (:missing, :not, :not-in), as a condition
 * on any alias with a `rid` column: on the resource row, or on the index rows another filter selects (indexProbesSql).
 * Undefined for every other filter.
 */
export function ridCondition(f: Filter): ((row: Identifier) => Sql) | undefined {
  if (f.kind === 'missing') {
    // Kept a filter on the rows the other conditions select (OFFSET 0: not turned into a join the planner may put
    // after costlier ones; a records page's branch for results written without a category probed every
    // observation's reports before finding that each had a category).
    return (row) => {
      const exists = hasEntry(row, TABLE[f.param.type], [sql`hash_identity = ${f.param.hashIdentity}`], true);
      return f.missing ? sql`NOT ${exists}` : exists;
    };
  }
  if (!negated(f)) return undefined;
  const [table, conditions] = indexConditionsOf(f)!;
  return (row) => inIndex(row, table, conditions, true);
}

/**
 * A filter that one index table answers alone (the rids of its rows that meet the conditions): the table and the
 * conditions, any one of which a row meets. Undefined for every other filter (negations, :missing, chains, _has, ids).
 */
export function indexProbeOf(f: Filter): [Identifier, Sql[]] | undefined {
  return negated(f) ? undefined : indexConditionsOf(f);
}

/** The index table of a filter on index rows and its conditions on them (of the positive form for :not and :not-in). */
function indexConditionsOf(f: Filter): [Identifier, Sql[]] | undefined {
  switch (f.kind) {
    case 'token': {
      const { resourceType: t, code, hashIdentity } = f.param;
      if (f.modifier === 'text') {
        const conds = f.values.map((v) => {
          const text = escapeLike(normalizeString(v.text ?? ''));
          return sql`hash_identity = ${hashIdentity} AND (display LIKE ${text + '%'} OR display LIKE ${'% ' + text + '%'})`;
        });
        return [TABLE.token, conds];
      }
      if (f.modifier === 'below' || f.modifier === 'above') return [TABLE.token, f.values.map((v) => hierarchyCondition(t, code, v, f.modifier as 'below' | 'above'))];
      if (f.modifier === 'in' || f.modifier === 'not-in') return [TABLE.token, f.values.map((v) => valueSetCondition(t, code, v))];
      return [
        TABLE.token,
        f.values.map((v) => {
          if (v.system === undefined) return sql`hash_value = ${hashKey(t, code, v.code ?? '')}`;
          if (v.system === '') return sql`hash_value = ${hashKey(t, code, v.code ?? '')} AND system IS NULL`;
          if (v.code === undefined) return sql`hash_identity = ${hashIdentity} AND system = ${v.system}`;
          return sql`hash_sys_value = ${hashKey(t, code, v.system, v.code)}`;
        }),
      ];
    }
    case 'string': {
      const { resourceType: t, code, hashIdentity } = f.param;
      const conds = f.values.map((v) => {
        if (f.modifier === 'exact') return sql`hash_exact = ${hashKey(t, code, v)}`;
        const norm = normalizeString(v);
        // A prefix as long as the index keeps can only match a value cut to it.
        if (f.modifier !== 'contains' && norm.length >= STRING_INDEX_CHARS) return sql`hash_identity = ${hashIdentity} AND value_norm = ${indexedPrefix(norm, STRING_INDEX_CHARS)}`;
        const text = escapeLike(norm);
        return sql`hash_identity = ${hashIdentity} AND value_norm LIKE ${f.modifier === 'contains' ? `%${text}%` : `${text}%`}`;
      });
      return [TABLE.string, conds];
    }
    case 'date':
      return [TABLE.date, f.values.map((v) => sql`hash_identity = ${f.param.hashIdentity} AND ${dateCondition(v, sql`low`, sql`high`)}`)];
    case 'number':
      return [TABLE.number, f.values.map((v) => sql`hash_identity = ${f.param.hashIdentity} AND ${numberCondition(v, sql`low`, sql`high`)}`)];
    case 'quantity':
      return [TABLE.quantity, f.values.map((v) => sql`hash_identity = ${f.param.hashIdentity} AND ${quantityCondition(v)}`)];
    case 'uri':
      return [
        TABLE.uri,
        f.values.map((v) => {
          const h = sql`hash_identity = ${f.param.hashIdentity}`;
          const cut = indexedPrefix(v, URI_INDEX_CHARS);
          if (f.modifier === 'below') return sql`${h} AND value LIKE ${escapeLike(cut) + '%'}`;
          if (f.modifier === 'above') return sql`${h} AND starts_with(${v}, value)`;
          return sql`${h} AND value = ${cut}`;
        }),
      ];
    case 'reference':
      return [
        TABLE.reference,
        f.values.map((v) => {
          const base = sql`hash_identity = ${f.param.hashIdentity} AND target_id = ${indexedPrefix(v.id, URI_INDEX_CHARS)}`;
          return v.type === undefined ? base : sql`${base} AND target_type = ${v.type}`;
        }),
      ];
    default:
      return undefined;
  }
}

/**
 * Several index filters as one condition on `row`: the rids the first table's rows give, among them those each other
 * table gives too and those that meet `ridConditions` (ridCondition), in one subquery. The index tables meet before a
 * resource row is read: a patient's observations (365 reference rows) are probed for the code first and only the 9
 * that have it are read and judged by the access rule, where separate `rid IN (…)` conditions had every one of the
 * 365 rows read and judged before the code probe; a patient's observations without a category are found among the
 * patient's reference rows, without reading the 185 that have one.
 */
export function indexProbesSql(row: Identifier, probes: Array<[Identifier, Sql[]]>, ridConditions: Array<(row: Identifier) => Sql> = []): Sql {
  const [[first, conditions], ...others] = probes as [[Identifier, Sql[]], ...Array<[Identifier, Sql[]]>];
  const p = alias('p');
  return sql`${row.col('rid')} IN (SELECT ${p.col('rid')} FROM ${first} ${p} WHERE ${and(or(...conditions), ...others.map(([table, conds]) => inIndex(p, table, conds)), ...ridConditions.map((c) => c(p)))})`;
}

/** The column a sort reads in each index table: the smallest value ascending, the largest descending. */
const SORT_COLUMN = {
  token: () => 'value',
  string: () => 'value_norm',
  date: (descending: boolean) => (descending ? 'high' : 'low'),
  number: (descending: boolean) => (descending ? 'high' : 'low'),
  quantity: () => 'value',
  uri: () => 'value',
  reference: () => 'target_id',
} as const;

/** ORDER BY expression for a sort rule: the smallest value ascending, the largest descending; missing last. */
export function sortSql(rule: SortRule, r: Identifier): Sql {
  const dir = rule.descending ? sql`DESC` : sql`ASC`;
  if (rule.kind === 'id') return sql`${r.col('id')} ${dir}`;
  if (rule.kind === 'lastUpdated') return sql`${r.col('last_updated')} ${dir}`;
  const param = rule.param!;
  const s = alias('s');
  const value = s.col(SORT_COLUMN[param.type](rule.descending));
  const agg = rule.descending ? sql`max(${value})` : sql`min(${value})`;
  return sql`(SELECT ${agg} FROM ${TABLE[param.type]} ${s} WHERE ${s.col('rid')} = ${r.col('rid')} AND ${s.col('hash_identity')} = ${param.hashIdentity}) ${dir} NULLS LAST`;
}
