import { getSearchParameters } from '@medplum/core';
import { dateRange } from '../dates';
import { hashKey } from '../../core/hash';
import { badRequest } from '../../core/errors';
import { isResourceType } from '../../core/fhir-definitions';
import { COLUMN_PARAMS, indexedParams, type IndexedParam } from '../indexer';

/**
 * A FHIR search request parsed and checked against the R4 SearchParameters of its type.
 * Anything the store cannot answer exactly is refused with 400 (strict handling), never ignored.
 */
export interface ParsedSearch {
  resourceType: string;
  /** All must hold (repeated parameters AND); each filter's values OR. */
  filters: Filter[];
  count: number;
  total: 'none' | 'accurate';
  sort: SortRule[];
  include: IncludeRule[];
  revinclude: IncludeRule[];
  elements?: string[];
  summary?: 'true' | 'false' | 'text' | 'data' | 'count';
  cursor?: Cursor;
}

export type Prefix = 'eq' | 'ne' | 'gt' | 'lt' | 'ge' | 'le' | 'sa' | 'eb' | 'ap';
const PREFIXES: readonly Prefix[] = ['eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap'];

export type Filter =
  | { kind: 'id'; values: string[]; not: boolean }
  | { kind: 'lastUpdated'; values: DateValue[] }
  | { kind: 'missing'; param: IndexedParam; missing: boolean }
  /** `:below`/`:above` (the is-a hierarchy) and `:in`/`:not-in` (a value set) read the loaded terminology (src/fhir/term). */
  | { kind: 'token'; param: IndexedParam; modifier?: TokenModifier; values: TokenValue[] }
  | { kind: 'string'; param: IndexedParam; modifier?: 'exact' | 'contains'; values: string[] }
  | { kind: 'date'; param: IndexedParam; values: DateValue[] }
  | { kind: 'number'; param: IndexedParam; values: NumberValue[] }
  | { kind: 'quantity'; param: IndexedParam; values: QuantityValue[] }
  | { kind: 'reference'; param: IndexedParam; values: ReferenceValue[] }
  | { kind: 'uri'; param: IndexedParam; modifier?: 'below' | 'above'; values: string[] }
  | { kind: 'chain'; param: IndexedParam; targetTypes: string[]; inner: Filter[] }
  /** `_has:Type:param:filter`: resources that a `Type` matching `filter` refers to through `param`. */
  | { kind: 'has'; targetType: string; param: IndexedParam; inner: Filter };

export type TokenModifier = 'not' | 'text' | 'below' | 'above' | 'in' | 'not-in';
const TOKEN_MODIFIERS: ReadonlySet<string> = new Set<TokenModifier>(['not', 'text', 'below', 'above', 'in', 'not-in']);

export interface TokenValue {
  system?: string; // undefined: any system; '' : no system (`|code`)
  code?: string; // undefined: any code in system (`system|`)
  text?: string; // for :text
  valueSet?: string; // for :in and :not-in: the value set's url (`url|version` names a version)
}
export interface DateValue {
  prefix: Prefix;
  low: string;
  high: string;
}
export interface NumberValue {
  prefix: Prefix;
  value: number;
  /** Range implied by the precision of the searched value (eq, ne, ap). */
  low: number;
  high: number;
}
export interface QuantityValue extends NumberValue {
  system?: string;
  code?: string;
}
export interface ReferenceValue {
  type?: string;
  id: string;
}

/** Does this value of a reference filter name a Patient: typed so, or untyped of a parameter that targets only Patient? */
export function namesPatient(param: IndexedParam, value: ReferenceValue): boolean {
  return value.type === 'Patient' || (value.type === undefined && param.targets.length === 1 && param.targets[0] === 'Patient');
}
export interface SortRule {
  kind: 'id' | 'lastUpdated' | 'param';
  param?: IndexedParam;
  descending: boolean;
}
export interface IncludeRule {
  sourceType: string;
  param: IndexedParam;
  targetType?: string;
  iterate: boolean;
}
/**
 * Where a page starts. Default order pages by keyset (`afterRid` forwards, `beforeRid` backwards: the page
 * that ends just before that rid); an explicit `_sort` pages by `offset`. At most one of the three.
 */
export interface Cursor {
  /** Keyset position (default order): last rid of the previous page. */
  afterRid?: string;
  /** Keyset position, backwards (default order): first rid of the following page. */
  beforeRid?: string;
  /** Offset (explicit _sort). */
  offset?: number;
  /** Total computed on the first page. */
  total?: number;
}

export const DEFAULT_COUNT = 20;
export const MAX_COUNT = 1000;

/** Result and control parameters; everything else must be a SearchParameter of the type. */
const RESULT_PARAMS = new Set(['_count', '_sort', '_include', '_revinclude', '_total', '_summary', '_elements', '_format', '_pretty', '_cursor']);
/** A parameter that shapes a search's answer (its size, order, page, form, what is added), not which resources match. */
export const isResultParameter = (key: string) => RESULT_PARAMS.has(key) || key.startsWith('_include') || key.startsWith('_revinclude');
const UNSUPPORTED = new Set(['_text', '_content', '_list', '_filter', '_query', '_type', '_contained', '_containedType', '_offset']);

/** Splits on commas not escaped with a backslash, then unescapes `\,` `\|` `\$` `\\`. */
export function splitOr(value: string): string[] {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (c === '\\' && i + 1 < value.length) {
      current += c + value[++i];
    } else if (c === ',') {
      parts.push(current);
      current = '';
    } else current += c;
  }
  parts.push(current);
  return parts;
}

function unescape(value: string): string {
  return value.replace(/\\([,|$\\])/g, '$1');
}

/** Splits on the first unescaped `|`. */
function splitPipe(value: string): string[] {
  const out: string[] = [];
  let current = '';
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (c === '\\' && i + 1 < value.length) current += c + value[++i];
    else if (c === '|') {
      out.push(current);
      current = '';
    } else current += c;
  }
  out.push(current);
  return out.map(unescape);
}

export type QueryParams = Record<string, string | string[] | undefined>;

function entries(query: QueryParams): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) out.push([k, one]);
  }
  return out;
}

/**
 * Why the store would refuse these search parameters of `resourceType` (a modifier the parameter does not take, a
 * value it cannot parse), or undefined: a map's record type `search` is checked with it (src/mapping ServiceChecks).
 */
export function searchProblem(resourceType: string, query: QueryParams): string | undefined {
  try {
    parseSearch(resourceType, query, 'http://localhost/fhir');
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** `localBase`: this server's FHIR base URL, so absolute references to our own resources count as local. */
export function parseSearch(resourceType: string, query: QueryParams, localBase: string): ParsedSearch {
  const search: ParsedSearch = { resourceType, filters: [], count: DEFAULT_COUNT, total: 'accurate', sort: [], include: [], revinclude: [] };
  for (const [key, raw] of entries(query)) {
    // PostgreSQL stores no NUL, and no name or value holds one: criteria decoded from a conditional reference or an
    // ifNoneExist come here without the URL's check (src/app.ts).
    if (key.includes('\u0000') || raw.includes('\u0000')) throw badRequest('NUL characters are not allowed in search parameters');
    if (isResultParameter(key)) {
      parseResultParam(search, key, raw);
      continue;
    }
    if (raw === '') continue; // an empty value constrains nothing (FHIR: ignore)
    search.filters.push(parseFilter(resourceType, key, raw, 0, localBase));
  }
  return search;
}

function parseResultParam(search: ParsedSearch, key: string, raw: string): void {
  const [base, modifier] = key.split(':');
  switch (base) {
    case '_count': {
      if (!/^\d+$/.test(raw)) throw badRequest(`_count must be a non-negative integer, got "${raw}"`);
      search.count = Math.min(Number(raw), MAX_COUNT);
      return;
    }
    case '_total':
      if (!['none', 'estimate', 'accurate'].includes(raw)) throw badRequest('_total must be none, estimate or accurate');
      search.total = raw === 'none' ? 'none' : 'accurate';
      return;
    case '_pretty':
      if (raw !== 'true' && raw !== 'false') throw badRequest('_pretty must be true or false');
      return;
    case '_summary':
      if (!['true', 'false', 'text', 'data', 'count'].includes(raw)) throw badRequest('_summary must be true, false, text, data or count');
      search.summary = raw as ParsedSearch['summary'];
      return;
    case '_elements':
      search.elements = raw.split(',').map((e) => e.trim()).filter(Boolean);
      for (const e of search.elements) if (!/^[a-zA-Z][A-Za-z0-9]*$/.test(e)) throw badRequest(`_elements: "${e}" is not an element name`);
      return;
    case '_format':
      if (!/json/i.test(raw)) throw badRequest('Only JSON is supported (_format=json)');
      return;
    case '_pretty':
      return;
    case '_cursor':
      search.cursor = decodeCursor(raw);
      return;
    case '_sort':
      for (const part of raw.split(',')) search.sort.push(parseSort(search.resourceType, part.trim()));
      return;
    case '_include':
    case '_revinclude': {
      if (modifier !== undefined && modifier !== 'iterate' && modifier !== 'recurse')
        throw badRequest(`${base}: unknown modifier :${modifier}`);
      const rule = parseInclude(raw, modifier !== undefined, base);
      if (base === '_include' && !rule.iterate && rule.sourceType !== search.resourceType)
        throw badRequest(`_include=${raw}: source type must be ${search.resourceType} (or use :iterate)`);
      (base === '_include' ? search.include : search.revinclude).push(rule);
      return;
    }
  }
}

function parseSort(resourceType: string, part: string): SortRule {
  const descending = part.startsWith('-');
  const code = descending ? part.slice(1) : part;
  if (code === '_id') return { kind: 'id', descending };
  if (code === '_lastUpdated') return { kind: 'lastUpdated', descending };
  const param = indexedParams(resourceType).get(code);
  if (!param || param.type === 'reference') throw badRequest(`_sort: ${resourceType} cannot be sorted by "${code}"`);
  return { kind: 'param', param, descending };
}

function parseInclude(raw: string, iterate: boolean, what: string): IncludeRule {
  const [sourceType, code, targetType, extra] = raw.split(':');
  if (!sourceType || !code || extra !== undefined || !isResourceType(sourceType))
    throw badRequest(`${what}=${raw}: expected ResourceType:searchParameter[:TargetType]`);
  const param = indexedParams(sourceType).get(code);
  if (!param || param.type !== 'reference') throw badRequest(`${what}=${raw}: ${sourceType} has no reference parameter "${code}"`);
  if (targetType !== undefined && !param.targets.includes(targetType))
    throw badRequest(`${what}=${raw}: ${sourceType}.${code} cannot point at ${targetType}`);
  return { sourceType, param, targetType, iterate };
}

function parseFilter(resourceType: string, key: string, raw: string, depth: number, localBase: string): Filter {
  if (key.startsWith('_has:')) return parseHas(resourceType, key, raw, depth, localBase);
  // Chained: `subject:Patient.name` or `subject.name`.
  const dot = key.indexOf('.');
  if (dot > 0) return parseChain(resourceType, key.slice(0, dot), key.slice(dot + 1), raw, depth, localBase);

  const [code, modifier, ...rest] = key.split(':');
  if (rest.length) throw badRequest(`Invalid search parameter "${key}"`);
  if (UNSUPPORTED.has(code)) throw badRequest(`Search parameter ${code} is not supported by this server`);
  if (code === '_id') {
    if (modifier && modifier !== 'not') throw badRequest(`_id does not support :${modifier}`);
    return { kind: 'id', values: splitOr(raw).map(unescape), not: modifier === 'not' };
  }
  if (code === '_lastUpdated') {
    if (modifier) throw badRequest(`_lastUpdated does not support :${modifier}`);
    return { kind: 'lastUpdated', values: splitOr(raw).map((v) => parseDate(code, v)) };
  }
  const param = indexedParams(resourceType).get(code);
  if (!param) {
    const known = getKnownCode(resourceType, code);
    throw badRequest(
      known
        ? `Search parameter ${code} of ${resourceType} (type ${known}) is not supported by this server`
        : `Unknown search parameter "${code}" for ${resourceType}`,
    );
  }
  if (modifier === 'missing') {
    if (raw !== 'true' && raw !== 'false') throw badRequest(`${key} must be true or false`);
    return { kind: 'missing', param, missing: raw === 'true' };
  }
  const values = splitOr(raw);
  const refuse = () => badRequest(`Modifier :${modifier} is not supported for ${param.type} parameter ${code}`);
  switch (param.type) {
    case 'token':
      if (modifier !== undefined && !TOKEN_MODIFIERS.has(modifier)) throw refuse();
      return {
        kind: 'token',
        param,
        modifier: modifier as TokenModifier | undefined,
        values: values.map((v) => {
          if (modifier === 'text') return { text: unescape(v) };
          if (modifier === 'in' || modifier === 'not-in') return parseValueSet(key, unescape(v));
          const token = parseToken(code, v);
          if ((modifier === 'below' || modifier === 'above') && (token.code === undefined || token.system === ''))
            throw badRequest(`${key}: "${v}" is [system|]code, a code of a loaded code system`);
          return token;
        }),
      };
    case 'string':
      if (modifier !== undefined && modifier !== 'exact' && modifier !== 'contains') throw refuse();
      return { kind: 'string', param, modifier: modifier as 'exact' | 'contains' | undefined, values: values.map(unescape) };
    case 'date':
      if (modifier !== undefined) throw refuse();
      return { kind: 'date', param, values: values.map((v) => parseDate(code, v)) };
    case 'number':
      if (modifier !== undefined) throw refuse();
      return { kind: 'number', param, values: values.map((v) => parseNumber(code, v)) };
    case 'quantity':
      if (modifier !== undefined) throw refuse();
      return { kind: 'quantity', param, values: values.map((v) => parseQuantity(code, v)) };
    case 'uri':
      if (modifier !== undefined && modifier !== 'below' && modifier !== 'above') throw refuse();
      return { kind: 'uri', param, modifier: modifier as 'below' | 'above' | undefined, values: values.map(unescape) };
    case 'reference': {
      if (modifier === 'identifier') {
        const idParam: IndexedParam = { ...param, code: `${code}:identifier`, hashIdentity: '', type: 'token' };
        return { kind: 'token', param: withIdentity(resourceType, idParam), values: values.map((v) => parseToken(code, v)) };
      }
      if (modifier !== undefined && !param.targets.includes(modifier)) throw refuse();
      return { kind: 'reference', param, values: values.map((v) => parseReference(code, unescape(v), modifier, localBase)) };
    }
  }
}

function getKnownCode(resourceType: string, code: string): string | undefined {
  return getSearchParameters(resourceType)?.[code]?.type;
}

function withIdentity(resourceType: string, param: IndexedParam): IndexedParam {
  return { ...param, hashIdentity: hashKey(resourceType, param.code) };
}

function parseChain(resourceType: string, head: string, tail: string, raw: string, depth: number, localBase: string): Filter {
  if (depth >= 3) throw badRequest('Chained searches are limited to 3 levels');
  const [code, typeModifier] = head.split(':');
  const param = indexedParams(resourceType).get(code);
  if (!param || param.type !== 'reference') throw badRequest(`Cannot chain through "${code}": not a reference parameter of ${resourceType}`);
  let targetTypes = typeModifier ? [typeModifier] : param.targets;
  if (typeModifier && !param.targets.includes(typeModifier)) throw badRequest(`${resourceType}.${code} cannot point at ${typeModifier}`);
  const innerCode = tail.split(/[.:]/)[0];
  if (!typeModifier) {
    targetTypes = targetTypes.filter((t) => COLUMN_PARAMS.has(innerCode) || indexedParams(t).has(innerCode));
    if (targetTypes.length === 0) throw badRequest(`No target of ${resourceType}.${code} has a search parameter "${innerCode}"`);
  }
  const inner = targetTypes.map((t) => parseFilter(t, tail, raw, depth + 1, localBase));
  return { kind: 'chain', param, targetTypes, inner };
}

function parseHas(resourceType: string, key: string, raw: string, depth: number, localBase: string): Filter {
  if (depth >= 3) throw badRequest('_has is limited to 3 levels');
  const [, sourceType, code, ...rest] = key.split(':');
  if (!sourceType || !code || !rest.length || !isResourceType(sourceType))
    throw badRequest(`${key}: expected _has:ResourceType:referenceParameter:searchParameter`);
  const param = indexedParams(sourceType).get(code);
  if (!param || param.type !== 'reference' || !param.targets.includes(resourceType))
    throw badRequest(`${key}: ${sourceType} has no reference parameter "${code}" that points at ${resourceType}`);
  return { kind: 'has', targetType: resourceType, param, inner: parseFilter(sourceType, rest.join(':'), raw, depth + 1, localBase) };
}

function parseToken(code: string, raw: string): TokenValue {
  const parts = splitPipe(raw);
  if (parts.length > 2) throw badRequest(`${code}: a token is [system|]code, got "${raw}"`);
  if (parts.length === 1) return { code: parts[0] };
  const [system, value] = parts;
  if (system === '' && value === '') throw badRequest(`${code}: empty token "|"`);
  return { system, code: value === '' ? undefined : value };
}

/** A value set named by `:in`/`:not-in`: an absolute url, `|version` allowed. */
function parseValueSet(key: string, raw: string): TokenValue {
  if (!/^[a-z][a-z0-9+.-]*:\S+$/i.test(raw) || raw.length > 1024) throw badRequest(`${key}: "${raw.slice(0, 80)}" is not the url of a value set`);
  return { valueSet: raw };
}

function splitPrefix(raw: string): [Prefix, string] {
  const p = raw.slice(0, 2) as Prefix;
  return PREFIXES.includes(p) && /^[a-z]{2}[-+0-9.]/.test(raw) ? [p, raw.slice(2)] : ['eq', raw];
}

function parseDate(code: string, raw: string): DateValue {
  const [prefix, value] = splitPrefix(raw);
  const range = dateRange(value);
  if (!range) throw badRequest(`${code}: "${raw}" is not a valid date (YYYY, YYYY-MM, YYYY-MM-DD or a dateTime)`);
  return { prefix, ...range };
}

function parseNumberText(code: string, text: string): { value: number; low: number; high: number } {
  if (!/^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw badRequest(`${code}: "${text}" is not a number`);
  const value = Number(text);
  // Implicit precision: 100 means [99.5, 100.5); 1.50 means [1.495, 1.505); 1e2 means [50, 150).
  const [mantissa, exp] = text.toLowerCase().split('e');
  const decimals = mantissa.includes('.') ? mantissa.split('.')[1].length : 0;
  const half = 0.5 * 10 ** (-decimals + (exp ? Number(exp) : 0));
  return { value, low: value - half, high: value + half };
}

function parseNumber(code: string, raw: string): NumberValue {
  const [prefix, text] = splitPrefix(raw);
  return { prefix, ...parseNumberText(code, text) };
}

function parseQuantity(code: string, raw: string): QuantityValue {
  const [prefix, rest] = splitPrefix(raw);
  const parts = splitPipe(rest);
  if (parts.length !== 1 && parts.length !== 3) throw badRequest(`${code}: a quantity is [prefix]number[|system|code], got "${raw}"`);
  const n = parseNumberText(code, parts[0]);
  return { prefix, ...n, system: parts[1] || undefined, code: parts[2] || undefined };
}

function parseReference(code: string, raw: string, typeModifier: string | undefined, localBase: string): ReferenceValue {
  let ref = raw.replace(/\/_history\/[^/]+$/, '');
  if (ref.startsWith(localBase + '/')) ref = ref.slice(localBase.length + 1);
  else if (/^https?:\/\//.test(ref)) return { type: '', id: ref }; // another server's resource: matched whole
  const local = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})$/.exec(ref);
  if (local) {
    if (!isResourceType(local[1])) throw badRequest(`${code}: unknown resource type in "${raw}"`);
    if (typeModifier && typeModifier !== local[1]) throw badRequest(`${code}:${typeModifier}: "${raw}" names another type`);
    return { type: local[1], id: local[2] };
  }
  if (!/^[A-Za-z0-9\-.]{1,64}$/.test(ref)) throw badRequest(`${code}: "${raw}" is not a reference (Type/id or id)`);
  return { type: typeModifier, id: ref };
}

export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

const MAX_BIGINT = 2n ** 63n - 1n;
/** The largest rid: `beforeRid` at it is the last page. */
export const END_RID = String(MAX_BIGINT);

const isRid = (v: unknown) => v === undefined || (typeof v === 'string' && /^\d{1,19}$/.test(v) && BigInt(v) <= MAX_BIGINT);

export function decodeCursor(raw: string): Cursor {
  try {
    const c = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Cursor;
    const ok =
      typeof c === 'object' && c !== null &&
      // Rids are bigints (at most 2^63 - 1); offset and total are exact JavaScript integers.
      isRid(c.afterRid) && isRid(c.beforeRid) &&
      (c.offset === undefined || (Number.isSafeInteger(c.offset) && c.offset >= 0)) &&
      (c.total === undefined || (Number.isSafeInteger(c.total) && c.total >= 0)) &&
      [c.afterRid, c.beforeRid, c.offset].filter((v) => v !== undefined).length <= 1;
    if (!ok) throw new Error('bad');
    return { afterRid: c.afterRid, beforeRid: c.beforeRid, offset: c.offset, total: c.total };
  } catch {
    throw badRequest('_cursor is not a cursor issued by this server');
  }
}
