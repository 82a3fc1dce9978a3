import { isoInstant } from '../dates';
import { hashKey } from '../hash';
import { indexedPrefix, STRING_INDEX_CHARS, URI_INDEX_CHARS } from '../indexer';
import { escapeLike, normalizeString } from '../normalize';
import type { RowFilter } from '../store/types';
import type { DateValue, Filter, NumberValue, Prefix, QuantityValue, SortRule } from './parse';

/** Collects bind parameters: values never enter SQL text. */
export class SqlParams {
  readonly values: unknown[] = [];
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

const TABLE = {
  token: 'fhir_idx_token',
  string: 'fhir_idx_string',
  date: 'fhir_idx_date',
  number: 'fhir_idx_number',
  quantity: 'fhir_idx_quantity',
  reference: 'fhir_idx_reference',
  uri: 'fhir_idx_uri',
} as const;

const or = (parts: string[]) => (parts.length === 1 ? parts[0] : `(${parts.map((p) => `(${p})`).join(' OR ')})`);

/** `alias.rid IN (rows of `table` matching any of `conditions`)`. */
function inIndex(alias: string, table: string, conditions: string[], negate = false): string {
  return `${alias}.rid ${negate ? 'NOT ' : ''}IN (SELECT rid FROM ${table} WHERE ${or(conditions)})`;
}

type Bound = () => string;

/**
 * Range comparison of a resource range [low, high] against a search value, per R4 prefix rules:
 * eq: contained in the search range; gt/ge/lt/le/sa/eb: compared with its bounds; ap: overlap
 * with the widened range. Bounds are bound lazily: only the parameters a prefix uses are added.
 */
function rangeCondition(prefix: Prefix, low: string, high: string, sLow: Bound, sHigh: Bound, apLow: Bound, apHigh: Bound): string {
  switch (prefix) {
    case 'eq':
      return `${low} >= ${sLow()} AND ${high} <= ${sHigh()}`;
    case 'ne':
      return `NOT (${low} >= ${sLow()} AND ${high} <= ${sHigh()})`;
    case 'gt':
      return `${high} > ${sHigh()}`;
    case 'ge':
      return `${high} >= ${sLow()}`;
    case 'lt':
      return `${low} < ${sLow()}`;
    case 'le':
      return `${low} <= ${sHigh()}`;
    case 'sa':
      return `${low} > ${sHigh()}`;
    case 'eb':
      return `${high} < ${sLow()}`;
    case 'ap':
      return `${low} <= ${apHigh()} AND ${high} >= ${apLow()}`;
  }
}

/** Dates: `ap` widens the range by 10% of its distance from now (at least a day). */
function dateCondition(v: DateValue, low: string, high: string, q: SqlParams): string {
  const from = Date.parse(v.low);
  const to = Date.parse(v.high);
  const margin = Math.max(0.1 * Math.abs(Date.now() - from), 86_400_000);
  const at = (iso: string): Bound => () => `${q.add(iso)}::timestamptz`;
  return rangeCondition(v.prefix, low, high, at(v.low), at(v.high), at(isoInstant(from - margin)), at(isoInstant(to + margin)));
}

/** Numbers: eq/ne use the precision range of the searched value; ap ±10%; the others its exact value. */
function numberCondition(v: NumberValue, low: string, high: string, q: SqlParams): string {
  const at = (n: number): Bound => () => `${q.add(String(n))}::numeric`;
  const margin = Math.abs(v.value) * 0.1;
  switch (v.prefix) {
    case 'eq':
      return `${low} >= ${at(v.low)()} AND ${high} < ${at(v.high)()}`;
    case 'ne':
      return `NOT (${low} >= ${at(v.low)()} AND ${high} < ${at(v.high)()})`;
    default:
      return rangeCondition(v.prefix, low, high, at(v.value), at(v.value), at(v.value - margin), at(v.value + margin));
  }
}

function quantityCondition(v: QuantityValue, q: SqlParams): string {
  const parts = [numberCondition(v, 'value', 'value', q)];
  if (v.system) parts.push(`system = ${q.add(v.system)}`);
  if (v.code) parts.push(v.system ? `code = ${q.add(v.code)}` : `(code = ${q.add(v.code)} OR unit = ${q.add(v.code)})`);
  return parts.join(' AND ');
}

/** `AND <access condition on alias>` when the caller may not see every row, else nothing. */
export function accessSql(access: RowFilter | undefined, alias: string, q: SqlParams, resourceType?: string): string {
  const condition = access?.(alias, q, resourceType);
  return condition ? ` AND (${condition})` : '';
}

/**
 * SQL condition on resource alias `alias` for one filter. `access` restricts the resources a chain or
 * `_has` looks through, so a search cannot reveal anything about resources the caller may not see.
 */
export function filterSql(f: Filter, alias: string, q: SqlParams, access?: RowFilter): string {
  switch (f.kind) {
    case 'id': {
      const cond = `${alias}.id = ANY(${q.add(f.values)}::text[])`;
      return f.not ? `NOT (${cond})` : cond;
    }
    case 'lastUpdated':
      return or(f.values.map((v) => dateCondition(v, `${alias}.last_updated`, `${alias}.last_updated`, q)));
    case 'missing': {
      const exists = `EXISTS (SELECT 1 FROM ${TABLE[f.param.type]} m WHERE m.rid = ${alias}.rid AND m.hash_identity = ${q.add(f.param.hashIdentity)})`;
      return f.missing ? `NOT ${exists}` : exists;
    }
    case 'token': {
      const { resourceType: t, code, hashIdentity } = f.param;
      if (f.modifier === 'text') {
        const conds = f.values.map((v) => {
          const text = escapeLike(normalizeString(v.text ?? ''));
          return `hash_identity = ${q.add(hashIdentity)} AND (display LIKE ${q.add(text + '%')} OR display LIKE ${q.add('% ' + text + '%')})`;
        });
        return inIndex(alias, TABLE.token, conds);
      }
      const conds = f.values.map((v) => {
        if (v.system === undefined) return `hash_value = ${q.add(hashKey(t, code, v.code ?? ''))}`;
        if (v.system === '') return `hash_value = ${q.add(hashKey(t, code, v.code ?? ''))} AND system IS NULL`;
        if (v.code === undefined) return `hash_identity = ${q.add(hashIdentity)} AND system = ${q.add(v.system)}`;
        return `hash_sys_value = ${q.add(hashKey(t, code, v.system, v.code))}`;
      });
      return inIndex(alias, TABLE.token, conds, f.modifier === 'not');
    }
    case 'string': {
      const { resourceType: t, code, hashIdentity } = f.param;
      const conds = f.values.map((v) => {
        if (f.modifier === 'exact') return `hash_exact = ${q.add(hashKey(t, code, v))}`;
        const norm = normalizeString(v);
        // A prefix as long as the index keeps can only match a value cut to it.
        if (f.modifier !== 'contains' && norm.length >= STRING_INDEX_CHARS) return `hash_identity = ${q.add(hashIdentity)} AND value_norm = ${q.add(indexedPrefix(norm, STRING_INDEX_CHARS))}`;
        const text = escapeLike(norm);
        return `hash_identity = ${q.add(hashIdentity)} AND value_norm LIKE ${q.add(f.modifier === 'contains' ? `%${text}%` : `${text}%`)}`;
      });
      return inIndex(alias, TABLE.string, conds);
    }
    case 'date':
      return inIndex(alias, TABLE.date, f.values.map((v) => `hash_identity = ${q.add(f.param.hashIdentity)} AND ${dateCondition(v, 'low', 'high', q)}`));
    case 'number':
      return inIndex(alias, TABLE.number, f.values.map((v) => `hash_identity = ${q.add(f.param.hashIdentity)} AND ${numberCondition(v, 'low', 'high', q)}`));
    case 'quantity':
      return inIndex(alias, TABLE.quantity, f.values.map((v) => `hash_identity = ${q.add(f.param.hashIdentity)} AND ${quantityCondition(v, q)}`));
    case 'uri':
      return inIndex(
        alias,
        TABLE.uri,
        f.values.map((v) => {
          const h = `hash_identity = ${q.add(f.param.hashIdentity)}`;
          const cut = indexedPrefix(v, URI_INDEX_CHARS);
          if (f.modifier === 'below') return `${h} AND value LIKE ${q.add(escapeLike(cut) + '%')}`;
          if (f.modifier === 'above') return `${h} AND starts_with(${q.add(v)}, value)`;
          return `${h} AND value = ${q.add(cut)}`;
        }),
      );
    case 'reference':
      return inIndex(
        alias,
        TABLE.reference,
        f.values.map((v) => {
          const base = `hash_identity = ${q.add(f.param.hashIdentity)} AND target_id = ${q.add(indexedPrefix(v.id, URI_INDEX_CHARS))}`;
          return v.type === undefined ? base : `${base} AND target_type = ${q.add(v.type)}`;
        }),
      );
    case 'chain': {
      const t = `c${q.values.length}`; // unique within the statement: the parameter count only grows
      const perType = f.targetTypes.map((type, i) => `${t}.resource_type = ${q.add(type)} AND ${filterSql(f.inner[i], t, q, access)}`);
      return `${alias}.rid IN (SELECT ref.rid FROM fhir_idx_reference ref
        JOIN fhir_resources ${t} ON ${t}.resource_type = ref.target_type AND ${t}.id = ref.target_id AND NOT ${t}.deleted${accessSql(access, t, q)}
        WHERE ref.hash_identity = ${q.add(f.param.hashIdentity)} AND ${or(perType)})`;
    }
    case 'has': {
      const h = `h${q.values.length}`;
      return `${alias}.id IN (SELECT ref.target_id FROM fhir_idx_reference ref
        JOIN fhir_resources ${h} ON ${h}.rid = ref.rid AND NOT ${h}.deleted${accessSql(access, h, q)}
        WHERE ref.hash_identity = ${q.add(f.param.hashIdentity)} AND ref.target_type = ${q.add(f.targetType)} AND ${filterSql(f.inner, h, q, access)})`;
    }
  }
}

/** ORDER BY expression for a sort rule: the smallest value ascending, the largest descending; missing last. */
export function sortSql(rule: SortRule, alias: string, q: SqlParams): string {
  const dir = rule.descending ? 'DESC' : 'ASC';
  if (rule.kind === 'id') return `${alias}.id ${dir}`;
  if (rule.kind === 'lastUpdated') return `${alias}.last_updated ${dir}`;
  const param = rule.param!;
  const agg = rule.descending ? 'max' : 'min';
  const column = { token: 'value', string: 'value_norm', date: rule.descending ? 'high' : 'low', number: rule.descending ? 'high' : 'low', quantity: 'value', uri: 'value', reference: 'target_id' }[param.type];
  return `(SELECT ${agg}(${column}) FROM ${TABLE[param.type]} s WHERE s.rid = ${alias}.rid AND s.hash_identity = ${q.add(param.hashIdentity)}) ${dir} NULLS LAST`;
}
