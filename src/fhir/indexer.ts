import {
  capitalize,
  convertToSearchableDates,
  convertToSearchableNumbers,
  convertToSearchableQuantities,
  evalFhirPathTyped,
  fhirPathEquals,
  getElementDefinition,
  getExpressionsForResourceType,
  getSearchParameterDetails,
  getSearchParameters,
  getTypedPropertyValue,
  getTypedPropertyValueWithoutSchema,
  toTypedValue,
  type TypedValue,
} from '@medplum/core';
import type { Resource, SearchParameter } from '@medplum/fhirtypes';
import { dateRange, type InstantRange } from './dates';
import { impliedCodeSystem } from './terminology';
import { hashKey } from '../core/hash';
import { normalizeString } from './normalize';

export type IndexedParamType = 'token' | 'string' | 'date' | 'number' | 'quantity' | 'reference' | 'uri';

export interface IndexedParam {
  resourceType: string;
  code: string;
  type: IndexedParamType;
  hashIdentity: string;
  definition: SearchParameter;
  /** Resource types a reference parameter may point at. */
  targets: string[];
  /** For token parameters over `code` elements: the code system their required value set implies. */
  codeSystem?: string;
  /** The top-level elements its expression starts from, when it can find nothing without them (rootElements). */
  roots?: string[];
  evaluate(resource: TypedValue): TypedValue[];
}

/** Parameters answered from resource columns rather than index tables. */
export const COLUMN_PARAMS = new Set(['_id', '_lastUpdated']);
const INDEXED_TYPES = new Set<string>(['token', 'string', 'date', 'number', 'quantity', 'reference', 'uri']);

const paramCache = new Map<string, Map<string, IndexedParam>>();

/** The SearchParameters of a resource type that the store indexes, by code (composite and special ones are not). */
export function indexedParams(resourceType: string): Map<string, IndexedParam> {
  let params = paramCache.get(resourceType);
  if (params) return params;
  params = new Map();
  for (const [code, sp] of Object.entries(getSearchParameters(resourceType) ?? {})) {
    if (COLUMN_PARAMS.has(code) || !sp.type || !INDEXED_TYPES.has(sp.type) || !sp.expression) continue;
    const details = getSearchParameterDetails(resourceType, sp);
    const codeSystems = new Set(
      (details.elementDefinitions ?? [])
        .filter((e) => e.type?.some((t) => t.code === 'code') && e.binding?.strength === 'required' && e.binding.valueSet)
        .map((e) => impliedCodeSystem(e.binding!.valueSet!)),
    );
    const roots = rootElements(resourceType, sp.expression);
    params.set(code, {
      resourceType,
      roots,
      code,
      type: sp.type as IndexedParamType,
      hashIdentity: hashKey(resourceType, code),
      definition: sp,
      targets: (sp.target ?? []) as string[],
      codeSystem: codeSystems.size === 1 ? [...codeSystems][0] : undefined,
      evaluate:
        memberPath(resourceType, sp.expression, getExpressionsForResourceType(resourceType, sp.expression).length > 1) ??
        skipWhenAbsent(roots, (resource) => evalFhirPathTyped(details.parsedExpression, [resource], { '%resource': resource })),
    });
  }
  paramCache.set(resourceType, params);
  return params;
}

/**
 * The top-level elements a search parameter's expression starts from, when every `|`-separated part of it is a
 * path from the resource (`Observation.code`, `(Observation.value as Quantity)`, `Resource.meta.tag`,
 * `Observation.subject.where(resolve() is Patient)`): such a part finds nothing on a resource without its root.
 * Undefined (always evaluated) when any part may answer something of nothing: `exists()`, `empty()`, a boolean
 * operator, any function but those that filter or cast.
 */
function rootElements(resourceType: string, expression: string): string[] | undefined {
  const roots: string[] = [];
  for (const part of expression.split('|')) {
    const m = /^\s*\(?\s*(\w+)\.(\w+)/.exec(part);
    if (!m || (m[1] !== resourceType && m[1] !== 'Resource' && m[1] !== 'DomainResource')) return undefined;
    const functions = [...part.matchAll(/(\w+)\s*\(/g)].map((f) => f[1]!);
    if (functions.some((f) => !PATH_FUNCTIONS.has(f)) || /\s(and|or|xor|implies)\s/.test(part)) return undefined;
    roots.push(m[2]!);
  }
  return roots;
}
const PATH_FUNCTIONS = new Set(['where', 'as', 'ofType', 'resolve', 'extension', 'is']);

/**
 * The evaluation of an expression whose parts, on a resource of `resourceType`, are paths of member names
 * (`AuditEvent.agent.who`, `Observation.code`), each optionally ending in `.where(resolve() is Patient)` or in
 * parentheses with `as Quantity`: each step as
 * FHIRPath's member access takes it (getTypedPropertyValue: choice types, primitives' extensions), without the
 * FHIRPath evaluator around it (CPU per resource: an AuditEvent 0.128 → 0.068 ms, the Synthea sample's resources
 * 0.126 → 0.116 ms; test/fhir-indexer.test.ts checks it finds what the evaluator finds). The parts of a `|` union
 * that start with another type find nothing on it, whatever they say: the shared parameters (`code`, `date`,
 * `patient` of ~30 types) are one path on each. Whether duplicates are removed is the evaluator's expression's
 * to say: @medplum/core keeps the parts whose text names `<type>.` (for Person, RelatedPerson's too), and two of them
 * are a union. Undefined for anything else (other functions, `Resource.…`, a member of an `as`), which the
 * evaluator answers.
 */
function memberPath(resourceType: string, expression: string, union: boolean): ((resource: TypedValue) => TypedValue[]) | undefined {
  const own: OwnPart[] = [];
  for (const part of expression.split('|')) {
    // A `|` inside a part's parentheses splits it into pieces that start with no type: the evaluator's.
    const type = /^\s*\(?\s*([A-Z][A-Za-z]+)\./.exec(part)?.[1];
    if (!type || type === 'Resource' || type === 'DomainResource') return undefined;
    if (type !== resourceType) continue;
    const path =
      /^\s*[A-Z][A-Za-z]+((?:\.[a-z][A-Za-z0-9]*)+)(?:\.where\(resolve\(\) is ([A-Z][A-Za-z]+)\))?\s*$/.exec(part) ??
      /^\s*\(\s*[A-Z][A-Za-z]+((?:\.[a-z][A-Za-z0-9]*)+)\s+as\s+([A-Za-z]+)\s*\)\s*$/.exec(part);
    if (!path) return undefined;
    const steps = path[1]!.slice(1).split('.');
    own.push(path[0]!.includes(' as ') ? { steps, as: path[2] } : { steps, resolvesTo: path[2] });
  }
  if (!own.length) return undefined;
  // A union removes duplicates (FHIRPath equality).
  return own.length === 1 && !union ? (resource) => ownValues(resource, own[0]!) : (resource) => withoutDuplicates(own.flatMap((part) => ownValues(resource, part)));
}

/** A part of a search parameter's expression read as member access: its steps, then `as` a type or `where(resolve() is` one`)`. */
interface OwnPart {
  steps: string[];
  as?: string;
  resolvesTo?: string;
}

function ownValues(resource: TypedValue, { steps, as, resolvesTo }: OwnPart): TypedValue[] {
  let values = [resource];
  for (const step of steps) {
    const next: TypedValue[] = [];
    for (const value of values) {
      if (!value.value || typeof value.value !== 'object') continue; // a primitive has no members (as in FHIRPath)
      const found = memberOf(value, step);
      if (Array.isArray(found)) {
        for (const f of found) if (f?.value !== undefined) next.push(f);
      } else if (found?.value !== undefined) next.push(found);
    }
    if (!next.length) return next;
    values = next;
  }
  if (as !== undefined) return values.filter((v) => v.type === as);
  if (resolvesTo !== undefined) return values.filter((v) => resolvedType(v.value) === resolvesTo);
  return values;
}

/**
 * The JSON keys member `name` of a `type` value may be under, as getTypedPropertyValue finds them in the type's
 * schema (a choice type's `valueQuantity`, `valueString`, …, in its order), each with the type it gives and the key of
 * its primitive's extension: found once per type and member, where getTypedPropertyValue builds the names at every
 * read. `[]`: an element without types (nothing); null: no such element (read without the schema).
 */
type MemberKeys = Array<{ key: string; extension: string; type: string }>;
const memberKeys = new Map<string, MemberKeys | null>();

function keysOf(type: string, name: string): MemberKeys | null {
  const id = `${type} ${name}`;
  let keys = memberKeys.get(id);
  if (keys === undefined) {
    const element = getElementDefinition(type, name);
    const last = element?.path.slice(element.path.lastIndexOf('.') + 1) ?? '';
    const types = element?.type ?? [];
    keys = !element
      ? null
      : types.map((t) => {
          const key = last.replace('[x]', capitalize(t.code));
          return { key, extension: `_${key}`, type: t.code === 'Element' || t.code === 'BackboneElement' ? types[0]!.code : t.code };
        });
    memberKeys.set(id, keys);
  }
  return keys;
}

/**
 * getTypedPropertyValue of an object value (FHIRPath's member access), with its keys found once (keysOf). A primitive
 * with an extension (`_birthDate`) and a contained resource (its type is the resource's) are left to it.
 */
function memberOf(input: TypedValue, name: string): TypedValue[] | TypedValue | undefined {
  const keys = keysOf(input.type, name);
  if (!keys) return getTypedPropertyValueWithoutSchema(input, name);
  const value = input.value as Record<string, unknown>;
  for (const { key, extension, type } of keys) {
    if (value[extension] !== undefined || type === 'Resource') return getTypedPropertyValue(input, name);
    const found = value[key];
    if (found === undefined) continue;
    if (!populated(found)) return undefined;
    return Array.isArray(found) ? found.map((v) => ({ type, value: v })) : { type, value: found };
  }
  return undefined;
}

/** Not empty as @medplum/core's isEmpty says (null, '', [], {}), without listing an object's keys. */
function populated(v: unknown): boolean {
  if (v === null) return false;
  if (typeof v === 'string') return v !== '';
  if (typeof v !== 'object') return true;
  if (Array.isArray(v)) return v.length > 0;
  for (const k in v) if (Object.hasOwn(v, k)) return true;
  return false;
}

/** `values` without those FHIRPath finds equal to an earlier one, as its union keeps them. */
function withoutDuplicates(values: TypedValue[]): TypedValue[] {
  if (values.length < 2) return values;
  const out: TypedValue[] = [];
  for (const v of values) if (!out.some((o) => fhirPathEquals(v, o)[0]?.value === true)) out.push(v);
  return out;
}

/** FHIR's literal reference as a URL (R4 3.1.3.1), its type captured. */
const ABSOLUTE_REFERENCE = /\/([A-Z][A-Za-z]+)\/[A-Za-z0-9\-.]{1,64}(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;

/**
 * The type FHIRPath's `resolve()` gives a Reference without reading anything (@medplum/core 4.5.2): the part of its
 * `reference` before `?` (a conditional reference) or else before the first `/`; of a logical reference, its
 * `type`; none for anything else (a contained `#id`, a `urn:uuid:`). An absolute URL is typed as FHIR reads it (the
 * segment before its id, `https://ehr.example/fhir/Patient/9` → Patient), where the evaluator answers `https:` and
 * another writer's `subject` written as Pont's own full URL would be in no `patient=` search.
 */
function resolvedType(value: unknown): string | undefined {
  let reference: string | undefined;
  if (typeof value === 'string') reference = value;
  else if (value && typeof value === 'object') {
    const ref = value as { reference?: unknown; type?: unknown; identifier?: unknown; resource?: { resourceType?: string } };
    if (ref.resource) return ref.resource.resourceType; // not R4's, but the evaluator's rule
    if (ref.reference) reference = String(ref.reference);
    else if (ref.type && ref.identifier) return String(ref.type).split('?')[0]; // as the evaluator's `type?identifier=…`
  }
  if (reference === undefined) return undefined;
  if (reference.includes('?')) return reference.split('?')[0];
  if (/^https?:\/\//.test(reference)) return ABSOLUTE_REFERENCE.exec(reference)?.[1];
  if (reference.includes('/')) return reference.split('/')[0];
  return undefined;
}

/**
 * An evaluation that answers nothing, without running the FHIRPath, when the resource has none of `roots`
 * (a choice element `value` is present as `valueQuantity`, `valueString`...): most of a type's parameters
 * look at elements a given resource does not have.
 */
function skipWhenAbsent(roots: string[] | undefined, evaluate: (resource: TypedValue) => TypedValue[]): (resource: TypedValue) => TypedValue[] {
  if (!roots) return evaluate;
  return (resource) => {
    const keys = Object.keys(resource.value as object);
    const present = roots.some((root) => keys.some((k) => k === root || (k.length > root.length && k.startsWith(root) && k[root.length]! >= 'A' && k[root.length]! <= 'Z')));
    return present ? evaluate(resource) : [];
  };
}

export interface IndexRows {
  token: Array<[string, string, string, string | null, string | null, string | null]>; // hash_identity, hash_value, hash_sys_value, system, value, display
  string: Array<[string, string, string]>; // hash_identity, hash_exact, value_norm
  date: Array<[string, string, string]>; // hash_identity, low, high
  number: Array<[string, string, string]>; // hash_identity, low, high
  quantity: Array<[string, string, string | null, string | null, string | null]>; // hash_identity, value, system, code, unit
  reference: Array<[string, string, string]>; // hash_identity, target_type, target_id
  uri: Array<[string, string]>; // hash_identity, value
}

export const INDEX_TABLES = ['token', 'string', 'date', 'number', 'quantity', 'reference', 'uri'] as const;

export function emptyIndexRows(): IndexRows {
  return { token: [], string: [], date: [], number: [], quantity: [], reference: [], uri: [] };
}

const LOW = '-infinity';
const HIGH = 'infinity';

export interface Token {
  system?: string;
  value?: string;
  display?: string;
}

const isText = (x: unknown): x is string => typeof x === 'string' && x !== '';
const list = (x: unknown): unknown[] => (Array.isArray(x) ? x : []);

/** Tokens of one value, following R4 token search rules for each data type. */
export function tokensOf(tv: TypedValue): Token[] {
  const v = tv.value as any;
  if (v === undefined || v === null) return [];
  switch (tv.type) {
    case 'Coding':
      return [{ system: v.system, value: v.code, display: v.display }];
    case 'CodeableConcept': {
      const out: Token[] = list(v.coding).map((c: any) => ({ system: c?.system, value: c?.code, display: c?.display }));
      if (v.text) out.push({ display: v.text });
      return out;
    }
    case 'Identifier':
      return [{ system: v.system, value: v.value, display: v.type?.text }];
    case 'ContactPoint':
      return [{ system: v.system, value: v.value }];
    case 'boolean':
      return [{ value: String(v) }];
    case 'Reference':
      return v.identifier ? [{ system: v.identifier.system, value: v.identifier.value }] : [];
    default:
      return typeof v === 'string' || typeof v === 'number' ? [{ value: String(v) }] : [];
  }
}

function stringsOf(tv: TypedValue): string[] {
  const v = tv.value as any;
  if (v === undefined || v === null) return [];
  switch (tv.type) {
    case 'HumanName':
      return [v.text, v.family, ...list(v.given), ...list(v.prefix), ...list(v.suffix)].filter(isText);
    case 'Address':
      return [v.text, ...list(v.line), v.city, v.district, v.state, v.postalCode, v.country].filter(isText);
    default:
      return isText(v) ? [v] : [];
  }
}

/** Instant ranges of a date-like value; Period ends may be open. Timing and others go through @medplum/core. */
function rangesOf(tv: TypedValue): InstantRange[] {
  const v = tv.value as any;
  if (typeof v === 'string') {
    const r = dateRange(v);
    return r ? [r] : [];
  }
  if (tv.type === 'Period') {
    const low = v.start ? dateRange(v.start)?.low : LOW;
    const high = v.end ? dateRange(v.end)?.high : HIGH;
    return low && high ? [{ low, high }] : [];
  }
  return convertToSearchableDates([tv]).map((p) => ({ low: p.start ?? LOW, high: p.end ?? HIGH }));
}

/** Splits a reference into (type, id); absolute URLs of this server become local, others stay whole. */
/**
 * The most characters of a value an index row keeps (a btree entry must stay under ~2.7 KB, and a character
 * may take 4 bytes). As HAPI does, longer values are stored cut: prefix search still works (a prefix longer
 * than the cap matches on the cut), exact string search goes by hash of the whole value; a uri or an external
 * reference that shares its first URI_INDEX_CHARS characters with another matches it too.
 */
export const STRING_INDEX_CHARS = 200;
export const URI_INDEX_CHARS = 500;
export function indexedPrefix(value: string, max: number): string {
  if (value.length <= max) return value;
  // Never cut a surrogate pair in two (a lone surrogate is not valid text).
  const end = /[\uD800-\uDBFF]/.test(value[max - 1]!) ? max - 1 : max;
  return value.slice(0, end);
}

export function referenceTarget(reference: string, localBase: string): [string, string] | undefined {
  let ref = reference;
  if (ref.startsWith(localBase + '/')) ref = ref.slice(localBase.length + 1);
  if (ref.startsWith('#') || ref.startsWith('urn:')) return undefined;
  const m = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(\/_history\/[^/]+)?$/.exec(ref);
  if (m) return [m[1], m[2]];
  return /^https?:\/\//.test(ref) ? ['', ref] : undefined;
}

/** Every search-index row of a resource, by table. */
export function indexResource(resource: Resource, localBase: string): IndexRows {
  const rows = emptyIndexRows();
  const typed = toTypedValue(resource);
  for (const param of indexedParams(resource.resourceType).values()) {
    let values: TypedValue[];
    try {
      values = param.evaluate(typed);
    } catch {
      continue; // an expression that cannot evaluate on this resource indexes nothing
    }
    if (values.length === 0) continue;
    const h = param.hashIdentity;
    const type = resource.resourceType;
    switch (param.type) {
      case 'token':
        for (const tv of values)
          for (const t of tokensOf(tv)) {
            // Validation has checked the types; anything else is skipped rather than indexed wrongly.
            const system = isText(t.system) ? t.system : tv.type === 'code' ? param.codeSystem : undefined;
            const value = isText(t.value) ? t.value : undefined;
            rows.token.push([
              h,
              hashKey(type, param.code, value ?? ''),
              hashKey(type, param.code, system ?? '', value ?? ''),
              system ?? null,
              value ?? null,
              isText(t.display) ? normalizeString(t.display) : null,
            ]);
          }
        break;
      case 'string':
        for (const tv of values)
          for (const s of stringsOf(tv)) rows.string.push([h, hashKey(type, param.code, s), indexedPrefix(normalizeString(s), STRING_INDEX_CHARS)]);
        break;
      case 'date':
        for (const tv of values) for (const r of rangesOf(tv)) rows.date.push([h, r.low, r.high]);
        break;
      case 'number':
        for (const [low, high] of convertToSearchableNumbers(values))
          if (low !== undefined || high !== undefined) rows.number.push([h, String(low ?? high), String(high ?? low)]);
        break;
      case 'quantity':
        for (const q of convertToSearchableQuantities(values))
          if (typeof q.value === 'number') rows.quantity.push([h, String(q.value), q.system ?? null, q.code ?? null, q.unit ?? null]);
        break;
      case 'reference':
        for (const tv of values) {
          const v = tv.value as any;
          const ref = typeof v === 'string' ? v : v?.reference;
          const target = typeof ref === 'string' ? referenceTarget(ref, localBase) : undefined;
          if (target) rows.reference.push([h, target[0], indexedPrefix(target[1], URI_INDEX_CHARS)]);
          if (v?.identifier?.value) {
            const id = v.identifier;
            const code = `${param.code}:identifier`;
            rows.token.push([hashKey(type, code), hashKey(type, code, id.value), hashKey(type, code, id.system ?? '', id.value), id.system ?? null, id.value, null]);
          }
        }
        break;
      case 'uri':
        for (const tv of values) if (typeof tv.value === 'string') rows.uri.push([h, indexedPrefix(tv.value, URI_INDEX_CHARS)]);
        break;
    }
  }
  return rows;
}
