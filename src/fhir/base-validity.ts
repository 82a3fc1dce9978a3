import { evalFhirPathTyped, parseFhirPath, toTypedValue, tryGetDataType, type FhirPathAtom, type InternalSchemaElement, type TypedValue } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { isResourceType } from '../core/fhir-definitions';
import { MAX_RESOURCE_STRING } from '../core/limits';

/**
 * A fast answer to "would @medplum/core's validateResource find no error in this resource?", for the common case.
 *
 * Its validator walks every element of every type's definition for each object (Observation's 32, a Coding's 6, …),
 * present or not, building a typed value with its path for each: ~300 µs a resource, the largest cost of a write
 * (docs/benchmarks.md). This walks only the keys present, with each type's definition compiled once, and makes the same
 * checks: known properties and choice types, single values and arrays, cardinality, required elements, primitive JSON
 * types, formats and sizes, and the same FHIRPath invariants (its own evaluator, parsed once, with the same variables).
 *
 * It answers `true` only when it is sure; anything it does not take — an empty value, a null, a `_primitive`
 * extension, two choices of one element, a profile's slices or fixed values, an unknown key, a failed check — is
 * `false`: "ask the validator", which then finds the issues (or, where it is lenient, none). So it never accepts what
 * the validator refuses; test/base-validity.unit.test.ts holds it to that on the sample corpora and mutations of them.
 * Tied to @medplum/core 4.5.2's validator (its regexes and skipped invariants are copied below).
 */
export function passesBaseDefinitions(resource: unknown): boolean {
  if (!isPlainObject(resource)) return false;
  const type = resource.resourceType;
  if (typeof type !== 'string' || !isResourceType(type)) return false;
  const schema = compiled(type);
  if (!schema) return false;
  const root: TypedValue = { type, value: resource };
  const walk: Walk = { root, resources: [resource as unknown as Resource] };
  try {
    return invariantsHold(schema.constraints, root, walk) && objectPasses(resource, schema, walk, true);
  } catch {
    return false; // a definition or an invariant it could not evaluate: the validator says what
  }
}

interface Walk {
  root: TypedValue;
  /** The resources entered (root, contained, a Bundle's entries): `%resource` of an invariant is the innermost. */
  resources: Resource[];
}

interface Field {
  element: InternalSchemaElement;
  /** The type of this key's value (for a choice, the one its name says). */
  type: string;
  /** The choice element (`value[x]`) the key is one type of. */
  choice?: string;
  constraints: Invariant[];
}

interface Invariant {
  key: string;
  expression: FhirPathAtom;
  /** An element whose absence makes the invariant true (TRUE_WITHOUT), when it has one: no FHIRPath evaluated then. */
  trueWithout?: string;
}

interface CompiledType {
  fields: Map<string, Field>;
  /** The keys that satisfy each required element (several for a required choice). */
  required: string[][];
  constraints: Invariant[];
}

/**
 * Invariants that hold whenever one element is absent, by their text: `X.….empty()` is true when X is absent, and so is
 * an `or` whose first term is. Most resources meet the first four on every write (dom-2, dom-4, dom-5 of every resource
 * without contained ones; obs-6 and obs-7 of every Observation): their evaluation was half of this check's time.
 */
const TRUE_WITHOUT: Record<string, string> = {
  'contained.contained.empty()': 'contained',
  'contained.meta.versionId.empty() and contained.meta.lastUpdated.empty()': 'contained',
  'contained.meta.security.empty()': 'contained',
  'dataAbsentReason.empty() or value.empty()': 'dataAbsentReason',
  'value.empty() or component.code.where(coding.intersect(%resource.code.coding).exists()).empty()': 'component',
  'detail.empty() or reference.empty()': 'detail',
};

/** The invariants the validator does not evaluate (its skip list). */
const SKIPPED = new Set(['ele-1', 'dom-3', 'org-1', 'sdf-19']);

/** The JSON type of each FHIR primitive (the validator's table). */
const JSON_TYPE: Record<string, 'string' | 'number' | 'boolean'> = {
  base64Binary: 'string',
  boolean: 'boolean',
  canonical: 'string',
  code: 'string',
  date: 'string',
  dateTime: 'string',
  decimal: 'number',
  id: 'string',
  instant: 'string',
  integer: 'number',
  integer64: 'string',
  markdown: 'string',
  oid: 'string',
  positiveInt: 'number',
  string: 'string',
  time: 'string',
  unsignedInt: 'number',
  uri: 'string',
  url: 'string',
  uuid: 'string',
  xhtml: 'string',
  'http://hl7.org/fhirpath/System.String': 'string',
};

/** The formats the validator checks (@medplum/core 4.5.2, src/typeschema/validation.ts). */
const FORMAT: Record<string, RegExp> = {
  base64Binary: /^([A-Za-z\d+/]{4})*([A-Za-z\d+/]{2}==|[A-Za-z\d+/]{3}=)?$/,
  canonical: /^\S*$/,
  code: /^[^\s]+( [^\s]+)*$/,
  date: /^(\d(\d(\d[1-9]|[1-9]0)|[1-9]00)|[1-9]000)(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2]\d|3[0-1]))?)?$/,
  dateTime:
    /^(\d(\d(\d[1-9]|[1-9]0)|[1-9]00)|[1-9]000)(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2]\d|3[0-1])(T([01]\d|2[0-3])(:[0-5]\d:([0-5]\d|60)(\.\d{1,9})?)?)?)?(Z|[+-]((0\d|1[0-3]):[0-5]\d|14:00)?)?)?$/,
  id: /^[A-Za-z0-9\-.]{1,64}$/,
  instant: /^(\d(\d(\d[1-9]|[1-9]0)|[1-9]00)|[1-9]000)-(0[1-9]|1[0-2])-(0[1-9]|[1-2]\d|3[0-1])T([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d{1,9})?(Z|[+-]((0\d|1[0-3]):[0-5]\d|14:00))$/,
  markdown: /^[\r\n\t\u0020-\uFFFF]+$/,
  oid: /^urn:oid:[0-2](\.(0|[1-9]\d*))+$/,
  string: /^[\r\n\t\u0020-\uFFFF]+$/,
  time: /^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d{1,9})?$/,
  uri: /^\S*$/,
  url: /^\S*$/,
  uuid: /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
};
const UCUM = toTypedValue('http://unitsofmeasure.org');

/** Each type's definition compiled once; null: one this check does not take (slices, fixed or pattern values). */
const types = new Map<string, CompiledType | null>();

function compiled(type: string): CompiledType | null {
  let c = types.get(type);
  if (c === undefined) types.set(type, (c = compile(type)));
  return c;
}

const invariants = (list: Array<{ key: string; severity: string; expression: string }> | undefined): Invariant[] =>
  (list ?? []).filter((c) => c.severity === 'error' && !SKIPPED.has(c.key)).map((c) => ({ key: c.key, expression: parseFhirPath(c.expression), trueWithout: TRUE_WITHOUT[c.expression] }));

function compile(type: string): CompiledType | null {
  const schema = tryGetDataType(type);
  if (!schema) return null;
  const fields = new Map<string, Field>();
  const required: string[][] = [];
  for (const [name, element] of Object.entries(schema.elements)) {
    if (name.includes('.') || element.slicing?.slices.length || element.fixed || element.pattern || !element.type?.length) return null;
    const constraints = invariants(element.constraints);
    const keys: string[] = [];
    if (name.endsWith('[x]')) {
      const base = name.slice(0, -3);
      for (const t of element.type) {
        const key = base + t.code.charAt(0).toUpperCase() + t.code.slice(1);
        if (fields.has(key)) return null;
        fields.set(key, { element, type: t.code, choice: name, constraints });
        keys.push(key);
      }
    } else {
      fields.set(name, { element, type: element.type[0]!.code, constraints });
      keys.push(name);
    }
    if (element.min > 0) required.push(keys);
  }
  return { fields, required, constraints: invariants(schema.constraints) };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (!value || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function objectPasses(value: Record<string, unknown>, schema: CompiledType, walk: Walk, isResource: boolean): boolean {
  const keys = Object.keys(value);
  if (!keys.length) return false; // an empty object: the validator says what of it
  let choices: string[] | undefined;
  for (const key of keys) {
    if (key === 'resourceType') {
      if (!isResource) return false;
      continue;
    }
    const field = schema.fields.get(key);
    if (!field) return false; // unknown, `_primitive` extension, or a choice type it does not have
    if (field.choice) {
      if (choices?.includes(field.choice)) return false;
      (choices ??= []).push(field.choice);
    }
    const v = value[key];
    const { element } = field;
    if (element.isArray) {
      if (!Array.isArray(v) || v.length === 0 || v.length < element.min || v.length > element.max) return false;
      for (const item of v) if (!valuePasses(item, field, walk)) return false;
    } else {
      if (Array.isArray(v) || element.min > 1 || element.max < 1) return false;
      if (!valuePasses(v, field, walk)) return false;
    }
  }
  for (const keys of schema.required) if (!keys.some((k) => value[k] !== undefined)) return false;
  return true;
}

function valuePasses(v: unknown, field: Field, walk: Walk): boolean {
  let type = field.type;
  const jsonType = JSON_TYPE[type];
  if (jsonType) {
    if (!primitivePasses(v, type, jsonType)) return false;
  } else {
    if (!isPlainObject(v)) return false;
    let isResource = false;
    if (type === 'Resource') {
      const resourceType = v.resourceType;
      if (typeof resourceType !== 'string' || !isResourceType(resourceType)) return false;
      type = resourceType;
      isResource = true;
    }
    const schema = compiled(type);
    if (!schema) return false;
    if (isResource) walk.resources.push(v as unknown as Resource);
    const passes = objectPasses(v, schema, walk, isResource);
    if (isResource) walk.resources.pop();
    if (!passes) return false;
  }
  return invariantsHold(field.constraints, { type, value: v }, walk);
}

function primitivePasses(v: unknown, type: string, jsonType: 'string' | 'number' | 'boolean'): boolean {
  if (typeof v !== jsonType) return false;
  if (jsonType === 'string') {
    const s = v as string;
    if (!s.trim() || s.length > MAX_RESOURCE_STRING) return false;
    const format = FORMAT[type];
    return !format || format.test(s);
  }
  if (jsonType === 'number') {
    const n = v as number;
    if (!Number.isFinite(n)) return false;
    if ((type === 'integer' || type === 'positiveInt' || type === 'unsignedInt') && !Number.isInteger(n)) return false;
    if (type === 'positiveInt' && n <= 0) return false;
    if (type === 'unsignedInt' && n < 0) return false;
  }
  return true;
}

/**
 * The element's invariants on one value, as the validator evaluates them: `%resource` the innermost resource around the
 * element (not the value itself when it is one: the validator checks an element before it enters its value),
 * `%rootResource` the root. Every result must be one `true`.
 */
function invariantsHold(list: Invariant[], value: TypedValue, walk: Walk): boolean {
  const object = value.value && typeof value.value === 'object' ? (value.value as Record<string, unknown>) : undefined;
  let variables: Record<string, TypedValue> | undefined;
  for (const c of list) {
    if (c.trueWithout !== undefined && object && object[c.trueWithout] === undefined) continue;
    variables ??= { '%context': value, '%ucum': UCUM, '%resource': toTypedValue(walk.resources[walk.resources.length - 1]), '%rootResource': walk.root };
    const result = evalFhirPathTyped(c.expression, [value], variables);
    if (result.length !== 1 || result[0]!.value !== true) return false;
  }
  return true;
}
