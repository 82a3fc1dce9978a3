import type { CodeableConcept, Coding, Parameters, ParametersParameter } from '@medplum/fhirtypes';
import { badRequest } from '../../core/errors';

/** What a terminology operation was given: each parameter's values, from the query (GET) or a Parameters body (POST). */
export type OpValue = string | number | boolean | Coding | CodeableConcept | GivenResource;

/** A resource given as a parameter (`valueSet` of ValueSet/$expand and $validate-code, in a Parameters body). */
export class GivenResource {
  constructor(readonly resource: unknown) {}
}
/** The parameters that take a resource (R4: `valueSet`). */
const RESOURCE_PARAMS = new Set(['valueSet']);
export type OpInput = Map<string, OpValue[]>;

/** Longest string a parameter may carry (a 1 MB `filter` is refused, not searched). */
export const MAX_PARAM_CHARS = 4096;
const MAX_PARAMS = 100;
/** Query parameters every FHIR interaction takes, not the operation's. */
const GENERAL = new Set(['_format', '_pretty']);

function checkString(name: string, v: unknown): string {
  if (typeof v !== 'string') throw badRequest(`Parameter ${name} must be a string`);
  if (v.length > MAX_PARAM_CHARS) throw badRequest(`Parameter ${name} is at most ${MAX_PARAM_CHARS} characters`);
  return v;
}

function checkCoding(name: string, v: unknown): Coding {
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw badRequest(`Parameter ${name} must be a Coding`);
  const c = v as Record<string, unknown>;
  for (const k of ['system', 'code', 'version', 'display']) if (c[k] !== undefined) checkString(`${name}.${k}`, c[k]);
  return c as Coding;
}

function checkConcept(name: string, v: unknown): CodeableConcept {
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw badRequest(`Parameter ${name} must be a CodeableConcept`);
  const cc = v as CodeableConcept;
  if (cc.coding !== undefined && (!Array.isArray(cc.coding) || cc.coding.length > MAX_PARAMS)) throw badRequest(`Parameter ${name}.coding must be an array (at most ${MAX_PARAMS})`);
  (cc.coding ?? []).forEach((c, i) => checkCoding(`${name}.coding[${i}]`, c));
  return cc;
}

/** The values the query gives: strings (a repeated name gives several). */
export function fromQuery(query: Record<string, string | string[] | undefined>, known: ReadonlySet<string>): OpInput {
  const input: OpInput = new Map();
  for (const [name, raw] of Object.entries(query)) {
    if (GENERAL.has(name) || raw === undefined) continue;
    if (!known.has(name)) throw badRequest(`Unknown parameter "${name.slice(0, 60)}" (this operation takes ${[...known].join(', ')})`);
    const values = Array.isArray(raw) ? raw : [raw];
    if (values.length > MAX_PARAMS) throw badRequest(`Parameter ${name} is given too many times`);
    input.set(name, values.map((v) => checkString(name, v)));
  }
  return input;
}

/** The values a Parameters body gives (value[x] of the types the operations take). */
export function fromParameters(body: unknown, known: ReadonlySet<string>): OpInput {
  if (!body || typeof body !== 'object' || Array.isArray(body) || (body as Parameters).resourceType !== 'Parameters')
    throw badRequest('The body of a terminology operation is a Parameters resource');
  const params = (body as Parameters).parameter ?? [];
  if (!Array.isArray(params) || params.length > MAX_PARAMS) throw badRequest(`Parameters.parameter must be an array of at most ${MAX_PARAMS}`);
  const input: OpInput = new Map();
  for (const p of params as ParametersParameter[]) {
    if (!p || typeof p !== 'object' || typeof p.name !== 'string') throw badRequest('Each parameter has a name');
    if (!known.has(p.name)) throw badRequest(`Unknown parameter "${p.name.slice(0, 60)}" (this operation takes ${[...known].join(', ')})`);
    if ((p as { resource?: unknown }).resource !== undefined) {
      if (!RESOURCE_PARAMS.has(p.name) || Object.keys(p).some((k) => k.startsWith('value') || k === 'part'))
        throw badRequest(`Parameter ${p.name}: a resource is not taken here; load it with pont terminology load and name it by url`);
      input.set(p.name, [...(input.get(p.name) ?? []), new GivenResource(p.resource)]);
      continue;
    }
    const keys = Object.keys(p).filter((k) => k.startsWith('value'));
    if (keys.length !== 1) throw badRequest(`Parameter ${p.name} has one value[x]`);
    const key = keys[0]!;
    const raw = (p as unknown as Record<string, unknown>)[key];
    let value: OpValue;
    if (key === 'valueCoding') value = checkCoding(p.name, raw);
    else if (key === 'valueCodeableConcept') value = checkConcept(p.name, raw);
    else if (key === 'valueBoolean') {
      if (typeof raw !== 'boolean') throw badRequest(`Parameter ${p.name}: valueBoolean is true or false`);
      value = raw;
    } else if (key === 'valueInteger') {
      if (!Number.isSafeInteger(raw)) throw badRequest(`Parameter ${p.name}: valueInteger is an integer`);
      value = raw as number;
    } else if (['valueString', 'valueCode', 'valueUri', 'valueCanonical', 'valueUrl', 'valueDateTime', 'valueDate'].includes(key)) value = checkString(p.name, raw);
    else throw badRequest(`Parameter ${p.name}: ${key} is not a type this operation takes`);
    input.set(p.name, [...(input.get(p.name) ?? []), value]);
  }
  return input;
}

/** The resource a parameter gives (POST only), or undefined. */
export function resource(input: OpInput, name: string): unknown {
  const values = input.get(name);
  if (!values?.length) return undefined;
  if (values.length > 1) throw badRequest(`Parameter ${name} may be given once`);
  const v = values[0];
  if (!(v instanceof GivenResource)) throw badRequest(`Parameter ${name} is a resource: give it in a Parameters body (POST)`);
  return v.resource;
}

/** One string parameter (a code, a uri), or undefined. */
export function one(input: OpInput, name: string): string | undefined {
  const values = input.get(name);
  if (!values?.length) return undefined;
  if (values.length > 1) throw badRequest(`Parameter ${name} may be given once`);
  const v = values[0];
  if (typeof v !== 'string') throw badRequest(`Parameter ${name} must be a string`);
  return v;
}

export function bool(input: OpInput, name: string): boolean | undefined {
  const values = input.get(name);
  if (!values?.length) return undefined;
  if (values.length > 1) throw badRequest(`Parameter ${name} may be given once`);
  const v = values[0];
  if (v === true || v === 'true') return true;
  if (v === false || v === 'false') return false;
  throw badRequest(`Parameter ${name} is true or false`);
}

export function int(input: OpInput, name: string, max: number): number | undefined {
  const values = input.get(name);
  if (!values?.length) return undefined;
  if (values.length > 1) throw badRequest(`Parameter ${name} may be given once`);
  const v = values[0];
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d{1,9}$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < 0) throw badRequest(`Parameter ${name} is a non-negative integer`);
  return Math.min(n, max);
}

export function coding(input: OpInput, name: string): Coding | undefined {
  const values = input.get(name);
  if (!values?.length) return undefined;
  if (values.length > 1) throw badRequest(`Parameter ${name} may be given once`);
  const v = values[0];
  if (typeof v === 'string') {
    // In a query: system|code.
    const bar = v.lastIndexOf('|');
    return bar > 0 ? { system: v.slice(0, bar), code: v.slice(bar + 1) } : { code: v };
  }
  if (typeof v !== 'object' || 'coding' in v || 'text' in v) throw badRequest(`Parameter ${name} must be a Coding`);
  return v as Coding;
}

export function concept(input: OpInput, name: string): CodeableConcept | undefined {
  const values = input.get(name);
  if (!values?.length) return undefined;
  if (values.length > 1) throw badRequest(`Parameter ${name} may be given once`);
  const v = values[0];
  if (!v || typeof v !== 'object') throw badRequest(`Parameter ${name} must be a CodeableConcept (POST it in a Parameters body)`);
  return v as CodeableConcept;
}

/** Parameters of the answer; undefined values are left out. */
export function parameters(parts: Array<ParametersParameter | undefined>): Parameters {
  return { resourceType: 'Parameters', parameter: parts.filter((p): p is ParametersParameter => p !== undefined) };
}
