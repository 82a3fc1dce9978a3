import type { Resource } from '@medplum/fhirtypes';
import { countryCodeOf } from '../core/countries';
import { isFhirDate, isFhirDateTime, isFhirInstant } from '../core/fhir-dates';
import { isJsonObject } from '../core/json';
import { referenceFormProblem } from '../core/reference-form';
import { MappingValueError } from './errors';
import { inFhirOrder } from './fhir-types';
import type { Comparison, Literal, Outside } from './path';
import type { RecordDeclaration } from './record-declaration';
import type { V2Expression, V2Objects } from './v2-path';
import { codeDisplay } from './terminology';

/** A path checked against the FHIR definitions: JSON property names, ready to read and write. */
export interface CompiledStep {
  json: string;
  isArray: boolean;
  index?: number;
  where: CompiledCondition[];
  /** `.first()`: only the first element left after `where`. */
  first?: boolean;
  /**
   * `.resolve()`: the resource each Reference points to, read only: a contained one (`#id`), else one the reader
   * resolved (Scope.resolved: the records layer reads them under the caller's policy).
   */
  resolve?: boolean;
  /**
   * The `display` of a Coding: one without a display reads, for a reader that knows the loaded terminology (the
   * records route), as the display the loaded code system gives the code.
   */
  codingDisplay?: boolean;
}
export interface CompiledCondition {
  steps: Array<{ json: string; isArray: boolean }>;
  /** The left side is an element of the resource being read or of its patient, not of the filtered item. */
  of?: Outside;
  value: Literal;
  /** `%resource.…`, `%patient.…`: compare with that element (then `value` is unused); `valueIn` says whose. */
  valueFrom?: CompiledPath;
  valueIn?: Outside;
  /** `element.empty()`: met when the element has no value (never written). */
  empty?: boolean;
  /** `element.exists()`: met when the element has a value (never written). */
  exists?: boolean;
  /**
   * `<`, `<=`, `>`, `>=`: compares numbers (never written). An element without a value is an open limit: met,
   * whatever it is compared with; one with a value is not met without the value to compare with (no %resource
   * element, no %age_years).
   */
  op?: Comparison;
  /**
   * `%age_years` on the right: the patient's age at the resource's date, in years. The left side is the value of a
   * quantity (an age, e.g. `age.low.value`), compared as the years it is in its unit of time (6 mo: 0.5).
   */
  age?: boolean;
}
export type CompiledPath = CompiledStep[];

/** One alternative of an expression: a path, from the resource or from a `let`, and what `join()`/`toDate()` do at its end. */
export interface CompiledAlternative {
  from?: CompiledExpression;
  steps: CompiledPath;
  finish?: { kind: 'join'; separator: string } | { kind: 'toDate' | 'toText' | 'exists' | 'firstWord' | 'lastWord' | 'countryCode' } | { kind: 'memberOf'; valueSet: string };
}
/** `a | b | …`: reading takes the first alternative that gives a value; writing follows `write`. */
export interface CompiledExpression {
  alternatives: CompiledAlternative[];
  /** The whole path writing uses (a `let` spelt out); the FHIR type at its end. */
  write: CompiledPath;
  writeType: string;
  /** Whether `write` ends in a Reference's `reference`: what is written there must have a reference's form. */
  writesReference: boolean;
  /**
   * Written one element per item, split at this separator: the texts of a list of concepts read joined
   * (`category.text.join('; ')`), so that two categories written back stay two, the first with the first's code.
   */
  writeEach?: string;
  /**
   * An exists() path written (compile.ts writesExisting): `true` writes the element, its where() met (a `%resource.…`
   * value copied from what is written so far); `false` writes nothing.
   */
  writeExists?: boolean;
}

export type ConnectType = 'string' | 'id' | 'date' | 'date-time' | 'boolean' | 'integer' | 'number' | 'object';

export interface ConnectField {
  name: string;
  type: ConnectType;
  /** Allowed values (codes); undefined when free. */
  values?: Literal[];
  required: boolean;
  nullable: boolean;
  /** A list of values: each becomes one element of the path's last repeating element. */
  list: boolean;
  /** What reading FHIR gives when FHIR has nothing (e.g. `is_primary: false`); writing ignores it. */
  default?: Literal;
  /** `type: object`: the object's own fields (each object one FHIR element, e.g. a Coding). */
  fields?: ConnectField[];
}

/** How one Connect value becomes the FHIR value at the path's end, and back. */
export type Conversion = { kind: 'copy' } | { kind: 'reference'; resourceType: string } | { kind: 'narrative' };

export interface ValueTable {
  /** Connect value -> one FHIR value per target (null: that target stays empty). */
  toFhir: Map<Literal, Array<Literal | null>>;
  /** JSON of the FHIR values (one per target) -> Connect value. */
  fromFhir: Map<string, Literal>;
  /** Read only, tried in order when no row matches exactly: FHIR values (`*`: anything) -> Connect value. */
  readRows: Array<{ cells: Array<Literal | null>; value: Literal }>;
  /** Connect value for FHIR values the table does not list; absent: such values are an error. */
  otherwise?: { value: Literal | null };
}

/** The cell of a `read` row that matches any FHIR value, or none. */
export const ANY = '*';

export interface FieldRule {
  field: ConnectField;
  targets: CompiledExpression[];
  conversion: Conversion;
  table?: ValueTable;
  /** Constant values written with the field when it has one (e.g. the unit of a blood-pressure component). */
  also: FixedRule[];
  /** `write: false`: read from FHIR, never written (a value given for it is ignored). */
  readOnly?: boolean;
  /**
   * `type: object`: the rules of the object's fields, relative to the element its path reaches (one object per
   * element for a list); `resourceType` is that element's FHIR type (`Coding`, `ObservationComponent`).
   */
  object?: MapProgram;
}

export interface FixedRule {
  target: CompiledPath;
  value: Literal;
}

export interface MapProgram {
  name: string;
  resourceType: string;
  fields: FieldRule[];
  fixed: FixedRule[];
  /** Written where the fields wrote nothing at their path (the `defaults` section): a report's LAB section, unless it gives its own. */
  defaults?: FixedRule[];
  /** The Connect record type this map reads (its `record:` section), if any. */
  record?: RecordDeclaration;
  /** Its `v2:` section: the Connect fields read from an HL7 v2 message, and where (src/mapping/v2-path.ts). */
  v2?: ReadonlyMap<string, V2Expression | V2Objects>;
}

/**
 * The part of a Connect field's value that writing puts into FHIR: an object's (or a list of objects') read-only
 * fields left out (a note's author named through its reference: written as the reference, never as the name).
 * Undefined for a field the map does not write at all.
 */
export function writtenPart(program: MapProgram, name: string, value: unknown): unknown {
  const rule = program.fields.find((r) => r.field.name === name);
  if (!rule || rule.readOnly) return undefined;
  const object = rule.object;
  if (!object) return value;
  const part = (item: unknown) => {
    if (!item || typeof item !== 'object' || Array.isArray(item)) return item;
    return Object.fromEntries(Object.entries(item).flatMap(([k, v]) => {
      const written = writtenPart(object, k, v);
      return written === undefined ? [] : [[k, written]];
    }));
  };
  return Array.isArray(value) ? value.map(part) : part(value);
}

// ---- reading and writing one path -------------------------------------------------------------------------

type Obj = Record<string, unknown>;

/** Every value reached by following simple steps (arrays flattened), as FHIRPath does. */
function collect(items: unknown[], json: string): unknown[] {
  // Loops rather than spread and filter: reading is a hot path (every field of every record), and this is its step.
  const out: unknown[] = [];
  for (const item of items) {
    if (!isJsonObject(item)) continue;
    const v = item[json];
    if (v === undefined || v === null) continue;
    if (!Array.isArray(v)) out.push(v);
    else for (const x of v) if (x !== undefined && x !== null) out.push(x);
  }
  return out;
}

/** The values the simple steps of a condition reach from `start`. */
function valuesOf(start: unknown, steps: CompiledCondition['steps']): unknown[] {
  let values = [start];
  for (const step of steps) values = collect(values, step.json);
  return values;
}

/**
 * What a path is read in: the resource, and the patient it is about when the reader knows it (the records route
 * does), for conditions on `%resource.…` and `%patient.…`. Writing knows neither.
 */
export interface Scope {
  resource: unknown;
  patient?: unknown;
  /** The values of each `let` read so far: a let (the applicable range) is chosen once per resource, not per field. */
  lets?: Map<CompiledExpression, unknown[]>;
  /** Resources the reader resolved for `resolve()`, by reference (`Practitioner/12`); what it may not read is absent. */
  resolved?: ReadonlyMap<string, unknown>;
  /** Where paths start when not the resource: the element an object field's rules read (a component, a coding). */
  focus?: unknown;
  /** What is computed once per resource (shared by the scopes of its object fields): the patient's age (%age_years). */
  memo?: { age?: number };
  /** The loaded terminology, as far as the reader looked it up for what it reads (displays, memberOf()). */
  terminology?: ReadTerminology;
  /** This server's FHIR base (`https://…/api/fhir/R4`): an absolute reference under it is one of ours (storedReference). */
  localBase?: string;
}

/**
 * What a reader knows of the terminology loaded into Pont (`pont terminology load`) for the codes of what it reads:
 * the records layer looks up a whole page's codes at once (src/fhir/term/lookup.ts) and hands the answers over.
 */
export interface ReadTerminology {
  /** The display the current version of the loaded code system gives the code; undefined when not loaded or not known. */
  display(system: string, code: string): string | undefined;
  /**
   * Is the code in the current expansion of the loaded value set? `system` undefined: a bare code (a `code`
   * element), in it from any of its systems. Undefined when the value set is not loaded (or cannot be expanded).
   */
  memberOf(valueSet: string, system: string | undefined, code: string): boolean | undefined;
}

/**
 * The display of a coding without one: the loaded code system's (its current version), else the one the FHIR and
 * HL7 code systems Pont ships give (a category HM reads Hematology), else none.
 */
export function codingDisplay(terminology: ReadTerminology | undefined, system: string, code: string): string | undefined {
  return terminology?.display(system, code) ?? codeDisplay(system, code);
}

/** The codes of a value (a `code`, a Coding, or a CodeableConcept's codings): what memberOf() asks about. */
export function codesOf(value: unknown): Array<{ system?: string; code: string }> {
  if (typeof value === 'string') return [{ code: value }];
  if (!isJsonObject(value)) return [];
  if (Array.isArray(value.coding)) return value.coding.flatMap((c) => (isJsonObject(c) && !Array.isArray(c.coding) ? codesOf(c) : []));
  if (typeof value.code !== 'string') return [];
  return [{ ...(typeof value.system === 'string' ? { system: value.system } : {}), code: value.code }];
}

/**
 * `memberOf(vs)` of the values a path reached: true when one of their codes is in the value set, false when none
 * is; undefined (the field reads null) when they have no code, the value set is not loaded, or the reader does not
 * know the terminology (writing, \`pont mappings check\` without an example's \`value_sets\`).
 */
export function membership(terminology: ReadTerminology | undefined, valueSet: string, values: unknown[]): boolean | undefined {
  if (!terminology) return undefined;
  let answer: boolean | undefined;
  for (const value of values)
    for (const { system, code } of codesOf(value)) {
      const member = terminology.memberOf(valueSet, system, code);
      if (member === undefined) return undefined;
      if (member) return true;
      answer = false;
    }
  return answer;
}

/**
 * `%age_years`: the patient's age in years at the resource's date (its effectiveDateTime, effectivePeriod.start or
 * effectiveInstant, else issued), computed once per resource; undefined without the patient, their birthDate or a date.
 */
function patientAge(scope: Scope): number | undefined {
  if (scope.memo && 'age' in scope.memo) return scope.memo.age;
  const r = isJsonObject(scope.resource) ? scope.resource : {};
  const at = r.effectiveDateTime ?? (isJsonObject(r.effectivePeriod) ? r.effectivePeriod.start : undefined) ?? r.effectiveInstant ?? r.issued;
  const birthDate = isJsonObject(scope.patient) ? scope.patient.birthDate : undefined;
  const age = typeof birthDate === 'string' && typeof at === 'string' ? ageInYears(birthDate, at) : undefined;
  if (scope.memo) scope.memo.age = age;
  return age;
}

/** The year, month and day of a FHIR date or dateTime (its date: the time and zone aside), a partial one from its first day. */
function dayOf(text: string): number | undefined {
  const m = /^(\d{4})(?:-(0[1-9]|1[0-2])(?:-(0[1-9]|[12]\d|3[01]))?)?(?:T|$)/.exec(text);
  return m ? Date.UTC(Number(m[1]), Number(m[2] ?? 1) - 1, Number(m[3] ?? 1)) : undefined;
}

/**
 * The age in years on `at` of someone born on `birthDate`: the years completed, and the part of the year since the
 * last birthday (whole on the birthday; one born on 29 February has it on 1 March in other years). Dates by their
 * date alone; a partial date (`1990`, `1990-05`) from its first day. Undefined for what is not a date, or before birth.
 */
export function ageInYears(birthDate: string | undefined, at: string | undefined): number | undefined {
  const [born, day] = [birthDate && dayOf(birthDate), at && dayOf(at)];
  if (typeof born !== 'number' || typeof day !== 'number' || day < born) return undefined;
  const b = new Date(born);
  let years = new Date(day).getUTCFullYear() - b.getUTCFullYear();
  if (birthday(b, years) > day) years--;
  return years + (day - birthday(b, years)) / (birthday(b, years + 1) - birthday(b, years));
}

/** The instant of the birthday `years` after the birth `b`. */
function birthday(b: Date, years: number): number {
  return Date.UTC(b.getUTCFullYear() + years, b.getUTCMonth(), b.getUTCDate());
}

/** Per year, in each unit of time an age is given in (UCUM codes, and the words some systems write as its unit). */
const PER_YEAR: Record<string, number> = {
  a: 1, 'a_j': 1, yr: 1, y: 1, year: 1, years: 1,
  mo: 12, 'mo_j': 12, month: 12, months: 12,
  wk: 365.25 / 7, week: 365.25 / 7, weeks: 365.25 / 7,
  d: 365.25, day: 365.25, days: 365.25,
  h: 365.25 * 24, hour: 365.25 * 24, hours: 365.25 * 24,
  min: 365.25 * 24 * 60,
};

/** A quantity of time (an age) in years: by its UCUM code, else its unit; without either, years. Undefined for another unit. */
export function yearsOf(quantity: unknown): number | undefined {
  if (!isJsonObject(quantity) || typeof quantity.value !== 'number') return undefined;
  const unit = quantity.code ?? quantity.unit;
  if (unit === undefined) return quantity.value;
  const perYear = typeof unit === 'string' ? PER_YEAR[unit] : undefined;
  return perYear === undefined ? undefined : quantity.value / perYear;
}

const COMPARE: Record<Comparison, (a: number, b: number) => boolean> = {
  '<': (a, b) => a < b,
  '<=': (a, b) => a <= b,
  '>': (a, b) => a > b,
  '>=': (a, b) => a >= b,
};

/** The values a `let` gives in this scope, chosen once. */
function letValues(scope: Scope, expression: CompiledExpression): unknown[] {
  if (!scope.lets) return readAll(scope, expression);
  let values = scope.lets.get(expression);
  if (!values) scope.lets.set(expression, (values = readAll(scope, expression)));
  return values;
}

/** Does `item` meet every condition? */
function satisfies(item: unknown, conditions: CompiledCondition[], scope: Scope): boolean {
  for (const c of conditions) if (!meets(item, c, scope)) return false;
  return true;
}

function meets(item: unknown, c: CompiledCondition, scope: Scope): boolean {
  const start = c.of ? scope[c.of] : item;
  if (c.empty) return valuesOf(start, c.steps).length === 0;
  if (c.exists) return valuesOf(start, c.steps).length > 0;
  const wanted = c.age ? patientAge(scope) : c.valueFrom ? valuesOf(scope[c.valueIn!], c.valueFrom)[0] : c.value;
  if (c.op) {
    // An age: the quantities whose values are compared, in years. A limit without a value is open: met, whatever
    // it is compared with; one with a value needs the value it is compared with.
    const have = c.age ? valuesOf(start, c.steps.slice(0, -1)).filter((q) => isJsonObject(q) && q.value !== undefined).map(yearsOf) : valuesOf(start, c.steps);
    if (!have.length) return true;
    return typeof wanted === 'number' && have.some((v) => typeof v === 'number' && COMPARE[c.op!](v, wanted));
  }
  return wanted !== undefined && valuesOf(start, c.steps).includes(wanted as Literal);
}

/** Follows the steps from `items` (FHIRPath semantics: `[n]` indexes the collection, `where` filters it). */
function walk(scope: Scope, items: unknown[], path: CompiledPath): unknown[] {
  let current = items;
  for (const step of path) {
    // Most alternatives of a field find nothing at their first step (valueRange of a quantity's Observation).
    if (!current.length) return current;
    current = step.codingDisplay && scope.terminology ? displays(current, scope.terminology) : collect(current, step.json);
    if (step.index !== undefined) current = current.length > step.index ? [current[step.index]] : [];
    if (step.where.length) {
      const kept: unknown[] = [];
      for (const item of current) if (satisfies(item, step.where, scope)) kept.push(item);
      current = kept;
    }
    if (step.first) current = current.slice(0, 1);
    if (step.resolve) current = current.flatMap((ref) => resolveReference(scope, ref));
  }
  return current;
}

/**
 * The `display` of each Coding, or, when it has none, the one the loaded code system gives its code (the FHIR and HL7
 * code systems Pont ships name codes in toText() only: a Coding's display reads as before unless they are loaded).
 */
function displays(codings: unknown[], terminology: ReadTerminology): unknown[] {
  const out: unknown[] = [];
  for (const c of codings) {
    if (!isJsonObject(c)) continue;
    const display = c.display ?? (typeof c.system === 'string' && typeof c.code === 'string' ? terminology.display(c.system, c.code) : undefined);
    if (display !== undefined && display !== null) out.push(display);
  }
  return out;
}

/** Each path ending in `resolve()` as it reaches the References themselves (namedReferences). */
const UNRESOLVED = new WeakMap<CompiledPath, CompiledPath>();

/**
 * `X.resolve().join(sep)`: each Reference named on its own, by its display, else by what it resolves to (a
 * reference named by neither is left out). Resolving the list as a whole would name some and drop the others while
 * a display-first alternative (`X.display.join(sep) | …`) would name only those with a display: a performer given by
 * display beside one given by reference alone read as the first only.
 */
function namedReferences(scope: Scope, from: unknown[], path: CompiledPath): unknown[] {
  let steps = UNRESOLVED.get(path);
  if (!steps) UNRESOLVED.set(path, (steps = [...path.slice(0, -1), { ...path.at(-1)!, resolve: false }]));
  const named: unknown[] = [];
  for (const ref of walk(scope, from, steps)) {
    const display = isJsonObject(ref) ? ref.display : undefined;
    const name = typeof display === 'string' && display !== '' ? display : (textOf(resolveReference(scope, ref)[0], scope.terminology) ?? identifierName(isJsonObject(ref) ? ref.identifier : undefined, scope.terminology));
    if (name !== undefined) named.push(name);
  }
  return named;
}

/** Names in use first: an official or usual one, then any other but an old one or one with an end date, then those. */
function namesInUseFirst(names: unknown[]): unknown[] {
  const ended = (n: unknown) => isJsonObject(n) && (n.use === 'old' || (isJsonObject(n.period) && typeof n.period.end === 'string'));
  const rank = (n: unknown) => (ended(n) ? 2 : isJsonObject(n) && (n.use === 'official' || n.use === 'usual') ? 0 : 1);
  return [...names].sort((a, b) => rank(a) - rank(b));
}

/**
 * What names a thing known by its identifier (a reference's: an NPI, a device's UDI, a product's lot, a logical
 * reference or one whose resource the reader cannot read; a resource's own): its type in words, its value, its
 * system ("NPI 9876543213", "1234567893 (http://hl7.org/fhir/sid/us-npi)"). Undefined without a value.
 */
function identifierName(identifier: unknown, terminology?: ReadTerminology): string | undefined {
  if (!isJsonObject(identifier) || typeof identifier.value !== 'string' || identifier.value === '') return undefined;
  const type = textOf(identifier.type, terminology);
  if (type !== undefined) return `${type} ${identifier.value}`;
  return typeof identifier.system === 'string' ? `${identifier.value} (${identifier.system})` : identifier.value;
}

/** The resource a Reference points to: in the resource's `contained` (`#id`), else among those the reader resolved. */
function resolveReference(scope: Scope, ref: unknown): unknown[] {
  const reference = isJsonObject(ref) && typeof ref.reference === 'string' ? ref.reference : undefined;
  if (reference === undefined) return [];
  if (reference.startsWith('#')) {
    const contained = isJsonObject(scope.resource) && Array.isArray(scope.resource.contained) ? scope.resource.contained : [];
    const found = contained.find((c) => isJsonObject(c) && c.id === reference.slice(1));
    return found ? [found] : [];
  }
  const key = storedReference(reference, scope.localBase);
  const found = key === undefined ? undefined : scope.resolved?.get(key);
  return found === undefined ? [] : [found];
}

/**
 * `Type/id` of a reference to a stored resource: relative (`Practitioner/12`, also versioned `…/_history/2`), as
 * references within one server are written, or absolute under `localBase`, this server's own (as the store takes
 * them, docs/fhir.md); undefined for contained, `urn:` and other servers' references: another server's
 * `https://ehr.example/fhir/Practitioner/12` is not our Practitioner/12.
 */
export function storedReference(reference: string, localBase?: string): string | undefined {
  const local = localBase && reference.startsWith(`${localBase}/`) ? reference.slice(localBase.length + 1) : reference;
  const m = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[^/]+)?$/.exec(local);
  return m ? `${m[1]}/${m[2]}` : undefined;
}

/**
 * The stored resources a map's `resolve()` steps would follow in this resource (`Type/id`, without duplicates):
 * the records layer reads them, under the caller's policy, for a whole page at once.
 */
export function referencesToResolve(program: MapProgram, resource: Resource, { patient, localBase }: Pick<ReadContext, 'patient' | 'localBase'> = {}): string[] {
  const scope: Scope = { resource, patient, localBase, lets: new Map(), memo: {} };
  const out = new Set<string>();
  for (const path of resolvedPaths(program)) {
    for (const ref of walk(scope, path.from ? letValues(scope, path.from) : [resource], path.steps)) {
      const reference = isJsonObject(ref) && typeof ref.reference === 'string' ? storedReference(ref.reference, localBase) : undefined;
      if (reference) out.add(reference);
    }
  }
  return [...out];
}

/** What reading a resource asks of the loaded terminology: the displays of its codings and the memberOf() of its codes. */
export interface TerminologyQuestions {
  /** Codings without a display (`system|code` keys are the caller's to make): their code systems' displays. */
  codings: Array<{ system: string; code: string }>;
  /** The codes each memberOf() reaches, with its value set. */
  members: Array<{ valueSet: string; system?: string; code: string }>;
}

/**
 * What the map would ask of the loaded terminology reading this resource (and the resources its references resolved
 * to): every coding without a display, anywhere in them (toText(), join() and a Coding's display read them), and the
 * codes its memberOf() paths reach. The records layer answers a whole page's in one statement (src/fhir/term/lookup.ts).
 */
export function terminologyAsked(program: MapProgram, resource: Resource, context: ReadContext = {}, out: TerminologyQuestions = { codings: [], members: [] }): TerminologyQuestions {
  codingsWithoutDisplay(resource, out.codings);
  if (hasMemberOf(program)) {
    const scope: Scope = { resource, patient: context.patient, resolved: context.resolved, lets: new Map(), memo: {} };
    askMembers(program, scope, out.members);
  }
  return out;
}

/** Every Coding (an object with a system and a code, not a Quantity's) without a display in `value` (its `meta` aside), into `out`. */
export function codingsWithoutDisplay(value: unknown, out: Array<{ system: string; code: string }>, depth = 0): void {
  if (depth > 32) return;
  if (Array.isArray(value)) {
    for (const item of value) codingsWithoutDisplay(item, out, depth + 1);
    return;
  }
  if (!isJsonObject(value)) return;
  if (typeof value.system === 'string' && typeof value.code === 'string' && (value.display === undefined || value.display === null) && !('value' in value)) {
    out.push({ system: value.system, code: value.code });
    return;
  }
  for (const key in value) {
    const v = value[key];
    // Not a narrative, nor `meta` (tags and security labels: no map reads them as text).
    if (typeof v === 'object' && v !== null && key !== 'text' && key !== 'meta') codingsWithoutDisplay(v, out, depth + 1);
  }
}

const MEMBER_OF = new WeakMap<MapProgram, boolean>();
/** Does the map (or one of its objects) read a memberOf()? Found once per map. */
function hasMemberOf(program: MapProgram): boolean {
  let has = MEMBER_OF.get(program);
  if (has === undefined) {
    const inExpression = (e: CompiledExpression): boolean => e.alternatives.some((a) => a.finish?.kind === 'memberOf' || (!!a.from && inExpression(a.from)));
    has = program.fields.some((rule) => rule.targets.some(inExpression) || (!!rule.object && hasMemberOf(rule.object)));
    MEMBER_OF.set(program, has);
  }
  return has;
}

/** The codes the memberOf() paths of `program` reach in `scope` (an object's rules from each of its elements). */
function askMembers(program: MapProgram, scope: Scope, out: TerminologyQuestions['members']): void {
  for (const rule of program.fields) {
    if (rule.object) {
      if (hasMemberOf(rule.object)) for (const element of readAll(scope, rule.targets[0]!)) if (isJsonObject(element)) askMembers(rule.object, { ...scope, focus: element }, out);
      continue;
    }
    for (const target of rule.targets)
      for (const alternative of target.alternatives) {
        if (alternative.finish?.kind !== 'memberOf') continue;
        const { valueSet } = alternative.finish;
        for (const value of walk(scope, alternative.from ? letValues(scope, alternative.from) : [scope.focus ?? scope.resource], alternative.steps))
          for (const c of codesOf(value)) out.push({ valueSet, ...c });
      }
  }
}

/** Each path up to a `resolve()` step (that step reaching the References themselves): found once per map. */
const RESOLVED_PATHS = new WeakMap<MapProgram, Array<{ from?: CompiledExpression; steps: CompiledPath }>>();
function resolvedPaths(program: MapProgram): Array<{ from?: CompiledExpression; steps: CompiledPath }> {
  let paths = RESOLVED_PATHS.get(program);
  if (!paths) {
    paths = [];
    const seen = new Set<string>();
    type Rooted = { from?: CompiledExpression; steps: CompiledPath };
    // An alternative's whole path: from its let, else on from `under` (the element an object field's rules read
    // from), else from the resource.
    const rooted = (alternative: CompiledAlternative, under?: Rooted): Rooted =>
      alternative.from || !under ? { from: alternative.from, steps: alternative.steps } : { from: under.from, steps: [...under.steps, ...alternative.steps] };
    const visit = (expression: CompiledExpression, under?: Rooted) => {
      for (const alternative of expression.alternatives) {
        if (alternative.from) visit(alternative.from);
        const { from, steps: all } = rooted(alternative, under);
        const start = all.length - alternative.steps.length;
        all.forEach((step, i) => {
          if (i < start || !step.resolve) return;
          const steps = [...all.slice(0, i), { ...step, resolve: false }];
          // The same path in several fields is read once (a path from a let is the let's own, so kept apart).
          const key = from ? undefined : JSON.stringify(steps);
          if (key !== undefined && seen.has(key)) return;
          if (key !== undefined) seen.add(key);
          paths!.push({ from, steps });
        });
      }
    };
    // An object field's rules too (an appointment participant's name: `actor.resolve()` under `participant`).
    const rules = (fields: FieldRule[], under?: Rooted) => {
      for (const rule of fields) {
        rule.targets.forEach((target) => visit(target, under));
        if (rule.object) for (const alternative of rule.targets[0]!.alternatives) rules(rule.object.fields, rooted(alternative, under));
      }
    };
    rules(program.fields);
    RESOLVED_PATHS.set(program, paths);
  }
  return paths;
}

/** Does reading the map need the patient (a condition on `%patient.…` or `%age_years`)? Readers without it skip fetching the Patient. */
export function readsPatient(program: MapProgram): boolean {
  const inPath = (path: CompiledPath): boolean => path.some((step) => step.where.some((c) => c.of === 'patient' || c.valueIn === 'patient' || !!c.age));
  const inExpression = (e: CompiledExpression): boolean => e.alternatives.some((a) => inPath(a.steps) || (!!a.from && inExpression(a.from)));
  return program.fields.some((rule) => rule.targets.some(inExpression) || (!!rule.object && readsPatient(rule.object)));
}

/** firstWord(), lastWord(): a text's first word, or its last of two or more (nothing of one word: no surname in "Madonna"). */
function wordOf(value: unknown, last: boolean): string[] {
  const words = typeof value === 'string' ? value.trim().split(/\s+/).filter(Boolean) : [];
  if (last) return words.length > 1 ? [words.at(-1)!] : [];
  return words.length ? [words[0]!] : [];
}

/** The first of a list, or the value itself when it is none. */
function first(value: unknown): unknown {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * A FHIR value as a reader would write it (toText()): a Quantity `<5 mg/L`, a Range `1–3 mg/L` (`>=1 mg/L` with a
 * low limit only), a Ratio `1:128` (`5 mg / 1 mL` with units), a Period `2024-01-01 – 2024-01-05`, a concept its
 * text or display or code, a component `name: value`, a narrative its text, a section `Title: text`, a boolean
 * `true`, an attachment of plain text its text; undefined for what has no text (sampled data's numbers, a PDF).
 */
export function textOf(value: unknown, terminology?: ReadTerminology): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (!isJsonObject(value)) return undefined;
  if ('value' in value) return quantityText(value);
  // An attachment held inline as plain text (a report sent as its form): the text; any other attachment has none here.
  if (typeof value.contentType === 'string' && ('data' in value || 'url' in value)) return attachmentText(value);
  // A resource a reference led to (resolve()): what names it, a person's name, else its code or type. A
  // PractitionerRole (US Core's requester and performer) is the person in the role: its practitioner's name, as the
  // reference gives it (the records layer gives it the name of the Practitioner it names when it gives none).
  if (typeof value.resourceType === 'string') {
    const name = Array.isArray(value.name) ? namesInUseFirst(value.name).map((v) => textOf(v, terminology)).find((t) => t !== undefined) : textOf(value.name, terminology);
    const person = value.resourceType === 'PractitionerRole' && isJsonObject(value.practitioner) ? textOf(value.practitioner.display, terminology) : undefined;
    // Else a device's name, an organisation's or location's alias, its kind (a role's code, a relative's
    // relationship), else its identifier: a resource that exists is not named as nothing.
    return (
      name ??
      person ??
      textOf((first(value.deviceName) as Obj | undefined)?.name, terminology) ??
      textOf(first(value.alias), terminology) ??
      textOf(first(value.code ?? value.type), terminology) ??
      textOf(first(value.relationship), terminology) ??
      identifierName(first(value.identifier), terminology)
    );
  }
  // A HumanName without text: prefix, given names, family, suffix.
  if (('family' in value || 'given' in value) && typeof value.text !== 'string') {
    const parts = [value.prefix, value.given, value.family, value.suffix].flatMap((p) => (Array.isArray(p) ? p : [p])).filter((p) => typeof p === 'string');
    return parts.length ? parts.join(' ') : undefined;
  }
  // A component (a code and its value[x]): "Systolic blood pressure: 120 mm[Hg]".
  const valueKey = 'code' in value ? Object.keys(value).find((k) => /^value[A-Z]/.test(k) || k === 'dataAbsentReason') : undefined;
  if (valueKey) return `${textOf(value.code, terminology) ?? '?'}: ${textOf(value[valueKey], terminology) ?? ''}`;
  if ('low' in value || 'high' in value) {
    const { low, high } = value as { low?: Obj; high?: Obj };
    const [lo, hi] = [quantityText(low), quantityText(high)];
    if (lo === undefined) return hi === undefined ? undefined : `<=${hi}`;
    if (hi === undefined) return `>=${lo}`;
    // One unit for both when they share it: 1–3 mg/L.
    return `${(low!.unit ?? low!.code) === (high!.unit ?? high!.code) ? quantityText(low, false) : lo}–${hi}`;
  }
  if ('numerator' in value || 'denominator' in value) {
    const { numerator: n, denominator: d } = value as { numerator?: Obj; denominator?: Obj };
    const units = [n, d].some((q) => isJsonObject(q) && (q.unit ?? q.code) !== undefined);
    const [a, b] = [quantityText(n), quantityText(d)];
    return a === undefined ? undefined : b === undefined ? a : units ? `${a} / ${b}` : `${a}:${b}`;
  }
  if ('start' in value || 'end' in value) return `${value.start ?? '…'} – ${value.end ?? '…'}`;
  // Samples (SampledData): the data as written, and how to read them: "5.1 6.2 11.8 (origin 0 mmol/L, every 300000 ms)";
  // the limits of detection too (a CGM's 40 is "40 or less": "lower limit 40, upper limit 400").
  if (typeof value.data === 'string' && isJsonObject(value.origin) && typeof value.period === 'number') {
    const how = [
      `origin ${quantityText(value.origin) ?? '?'}`,
      typeof value.factor === 'number' && value.factor !== 1 ? `factor ${value.factor}` : undefined,
      `every ${value.period} ms`,
      typeof value.dimensions === 'number' && value.dimensions > 1 ? `${value.dimensions} dimensions` : undefined,
      typeof value.lowerLimit === 'number' ? `lower limit ${value.lowerLimit}` : undefined,
      typeof value.upperLimit === 'number' ? `upper limit ${value.upperLimit}` : undefined,
    ];
    return `${value.data} (${how.filter((h) => h !== undefined).join(', ')})`;
  }
  if (typeof value.div === 'string') return narrativeToText(value);
  // A document's section: "Title: its narrative", then what it lists (the entries' names, else their references) and
  // its own sections, a line each: a section may hold only sub-sections or only entries.
  if (('title' in value || 'code' in value) && (isJsonObject(value.text) || Array.isArray(value.section) || Array.isArray(value.entry)) && !('resourceType' in value)) {
    const entries = (Array.isArray(value.entry) ? value.entry : []).map((e) => (isJsonObject(e) ? (textOf(e.display, terminology) ?? (typeof e.reference === 'string' ? e.reference : undefined)) : undefined)).filter((t) => t !== undefined);
    const lines = [
      isJsonObject(value.text) ? narrativeToText(value.text) : undefined,
      entries.length ? entries.join('; ') : undefined,
      ...(Array.isArray(value.section) ? value.section : []).map((s) => textOf(s, terminology)),
    ].filter((t) => t !== undefined && t !== '');
    return `${textOf(value.title ?? value.code, terminology) ?? '?'}: ${lines.join('\n')}`;
  }
  // A questionnaire's answered item: "question [linkId]: answer, answer"; a group, its items joined with "; ".
  if (typeof value.linkId === 'string') return answeredItemText(value, terminology);
  // A planned activity or a request (CarePlan.activity.detail): what (its code, its description beside it, else the
  // product, else its kind), when, how much and where, and its status: "Stretching exercises: 30 min brisk walk, 3 per 1 wk
  // (in-progress)"; one not to be done says so: "Do not: Anticoagulation (scheduled)".
  const product = typeof value.status === 'string' ? (value.productCodeableConcept ?? (isJsonObject(value.productReference) ? value.productReference.display : undefined)) : undefined;
  if (typeof value.status === 'string' && (isJsonObject(value.code) || typeof value.description === 'string' || product !== undefined || typeof value.kind === 'string') && !('system' in value) && !('value' in value)) {
    const description = typeof value.description === 'string' ? value.description : undefined;
    const named = textOf(value.code, terminology) ?? textOf(product, terminology);
    const what = named !== undefined && description !== undefined ? `${named}: ${description}` : (named ?? description ?? (value.kind as string));
    const when = textOf(value.scheduledString ?? value.scheduledPeriod, terminology) ?? timingText(value.scheduledTiming, terminology);
    const where = isJsonObject(value.location) ? textOf(value.location.display, terminology) : undefined;
    // How much: a day's amount (2 tablets a day) and the whole of it (30 tablets in all).
    const daily = quantityText(value.dailyAmount);
    const whole = quantityText(value.quantity);
    const details = [when, daily && `${daily} a day`, whole && `${whole} in all`, where && `at ${where}`].filter((d) => d !== undefined);
    return `${value.doNotPerform === true ? 'Do not: ' : ''}${what}${details.length ? `, ${details.join(', ')}` : ''} (${value.status})`;
  }
  // A relative's condition (FamilyMemberHistory.condition): what, its onset and outcome: "Heart attack (onset 74 a; Death)".
  if (isJsonObject(value.code) && Object.keys(value).some((k) => /^onset[A-Z]/.test(k) || k === 'outcome' || k === 'contributedToDeath')) {
    const onsetKey = Object.keys(value).find((k) => /^onset[A-Z]/.test(k));
    const parts = [
      onsetKey ? `onset ${textOf(value[onsetKey], terminology) ?? ''}` : undefined,
      textOf(value.outcome, terminology),
      value.contributedToDeath === true ? 'contributed to death' : undefined,
    ].filter((p) => p !== undefined);
    const what = textOf(value.code, terminology) ?? '?';
    return parts.length ? `${what} (${parts.join('; ')})` : what;
  }
  // A Timing (a schedule: a code, how often, when in the day).
  if (isJsonObject(value.repeat) || (Array.isArray(value.event) && !('resourceType' in value))) return timingText(value, terminology);
  if ('text' in value && typeof value.text === 'string') return value.text;
  // A concept without text: the first coding with words (its display, or the loaded code system's), else the first code:
  // a local code given bare before the SNOMED CT coding that names it reads as that name.
  if (Array.isArray(value.coding)) {
    const codings = value.coding.filter(isJsonObject);
    return codings.map((c) => codingWords(c, terminology)).find((t) => t !== undefined) ?? codings.map((c) => textOf(c.code, terminology)).find((t) => t !== undefined);
  }
  // A coding: its display, else the one its code system gives the code (codingDisplay: a category HM reads Hematology), else its code.
  if ('display' in value || 'code' in value) return codingWords(value, terminology) ?? textOf(value.code, terminology);
  return undefined;
}

/** A coding's words: its display, else the one the loaded code system gives its code. */
function codingWords(coding: Obj, terminology?: ReadTerminology): string | undefined {
  if (coding.display !== undefined && coding.display !== null) return textOf(coding.display, terminology);
  return typeof coding.system === 'string' && typeof coding.code === 'string' ? codingDisplay(terminology, coding.system, coding.code) : undefined;
}

/**
 * A Timing in words, as a reader would write it, with every part it gives: how often ("1-2 per 4-6 h"), on which days
 * ("on mon, wed, fri"), when in the day ("30 min AC", "at 08:00"), for how long each time ("30 min each"), how many
 * times, and within what bounds ("for 6 wk", "2024-01-01 – 2024-02-11"). Its code alone when it has one (BID is the
 * whole of it). A schedule read without its days would say daily for three days a week.
 */
function timingText(timing: unknown, terminology: ReadTerminology | undefined): string | undefined {
  if (!isJsonObject(timing)) return undefined;
  const code = textOf(timing.code, terminology);
  if (code !== undefined) return code;
  const repeat = isJsonObject(timing.repeat) ? timing.repeat : {};
  const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const upTo = (low: unknown, high: unknown) => (num(low) === undefined ? undefined : num(high) !== undefined && num(high) !== num(low) ? `${num(low)}-${num(high)}` : `${num(low)}`);
  const unit = (v: unknown) => (typeof v === 'string' ? ` ${v}` : '');
  const strings = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
  const frequency = upTo(repeat.frequency, repeat.frequencyMax);
  const period = upTo(repeat.period, repeat.periodMax);
  const often = frequency !== undefined && period !== undefined ? `${frequency} per ${period}${unit(repeat.periodUnit)}` : undefined;
  const days = strings(repeat.dayOfWeek);
  const offset = num(repeat.offset);
  const at = [...strings(repeat.when).map((w) => (offset ? `${offset} min ${w}` : w)), ...strings(repeat.timeOfDay).map((t) => `at ${t}`)];
  const duration = upTo(repeat.duration, repeat.durationMax);
  const count = upTo(repeat.count, repeat.countMax);
  const bounds = isJsonObject(repeat.boundsDuration) ? `for ${quantityText(repeat.boundsDuration)}` : textOf(repeat.boundsRange ?? repeat.boundsPeriod, terminology);
  const events = strings(timing.event);
  // How often, on which days and when in the day read as one phrase ("1 per 1 d on mon, wed, fri at 08:00"); the
  // rest after it ("30 min each, for 6 wk"). Its events (dates) when it says neither how often nor when.
  const phrase = [often, days.length ? `on ${days.join(', ')}` : undefined, ...at, ...(often || at.length ? [] : events)].filter((p) => p !== undefined).join(' ');
  const rest = [duration !== undefined ? `${duration}${unit(repeat.durationUnit)} each` : undefined, count !== undefined ? `${count} ${count === '1' ? 'time' : 'times'}` : undefined, bounds].filter((p) => p !== undefined);
  const parts = phrase ? [phrase, ...rest] : rest;
  return parts.length ? parts.join(', ') : undefined;
}

/** An Attachment's inline content when it is plain text (`text/plain`, UTF-8 or ASCII): undefined for anything else. */
function attachmentText(attachment: Obj): string | undefined {
  const type = /^text\/plain\s*(;\s*charset\s*=\s*"?(utf-8|us-ascii)"?\s*)?$/i;
  if (typeof attachment.data !== 'string' || !type.test(attachment.contentType as string)) return undefined;
  const text = Buffer.from(attachment.data, 'base64').toString('utf8').trim();
  return text || undefined;
}

/** A Quantity as text: `<5 mg/L` (its unit when `withUnit`); undefined for anything without a number. */
function quantityText(q: unknown, withUnit = true): string | undefined {
  if (!isJsonObject(q) || typeof q.value !== 'number') return undefined;
  const unit = withUnit ? (q.unit ?? q.code) : undefined;
  // A time given by its UCUM code alone (an age's `a`, as many writers put it in the unit too) reads in words.
  const words = typeof unit === 'string' && (q.system === undefined || q.system === UCUM) && (q.code === undefined || q.code === unit) ? TIME_WORDS.get(unit) : undefined;
  const shown = words ? (q.value === 1 ? words[0] : words[1]) : unit;
  return `${typeof q.comparator === 'string' ? q.comparator : ''}${q.value}${typeof shown === 'string' ? ` ${shown}` : ''}`;
}

const UCUM = 'http://unitsofmeasure.org';
/** The UCUM codes of time an age or a duration is written in, as words (one, several). */
const TIME_WORDS = new Map<string, [string, string]>([
  ['a', ['year', 'years']], ['mo', ['month', 'months']], ['wk', ['week', 'weeks']], ['d', ['day', 'days']], ['h', ['hour', 'hours']], ['min', ['minute', 'minutes']],
]);

/**
 * The UCUM code of a unit of time as an age's unit is written: the code itself (`a`, `mo`, `wk`, `d`, `h`, `min`), or
 * its words in this table (`years`, `Month`); undefined for anything else (`yrs`, `y`), which stays words.
 */
export function ucumTimeCode(unit: string): string | undefined {
  if (TIME_WORDS.has(unit)) return unit;
  const words = unit.toLowerCase();
  for (const [code, [one, several]] of TIME_WORDS) if (words === one || words === several) return code;
  return undefined;
}

/**
 * A QuestionnaireResponse item as text: `Little interest or pleasure in doing things [44250-9]: Several days`, its
 * answers (each value[x] as text: a coding's display, else its code; a number as written) joined with ", ", and the
 * items nested under an answer or a group after it, "; "-joined. undefined for an item with nothing answered.
 */
function answeredItemText(item: Obj, terminology: ReadTerminology | undefined): string | undefined {
  const answers = Array.isArray(item.answer) ? item.answer.filter(isJsonObject) : [];
  const said = answers.map((answer) => answerText(answer, terminology)).filter((t) => t !== undefined);
  const nested = [...(Array.isArray(item.item) ? item.item : []), ...answers.flatMap((a) => (Array.isArray(a.item) ? a.item : []))]
    .map((child) => (isJsonObject(child) ? answeredItemText(child, terminology) : undefined))
    .filter((t) => t !== undefined);
  const question = `${typeof item.text === 'string' ? `${item.text} ` : ''}[${item.linkId}]`;
  const own = said.length ? `${question}: ${said.join(', ')}` : undefined;
  const all = [own, ...nested].filter((t) => t !== undefined);
  return all.length ? all.join('; ') : undefined;
}

/** An answer's value[x] as text. */
function answerText(answer: Obj, terminology: ReadTerminology | undefined): string | undefined {
  const key = Object.keys(answer).find((k) => /^value[A-Z]/.test(k));
  return key ? textOf(answer[key], terminology) : undefined;
}

/** Every value of the expression: those of its first alternative that gives any. */
export function readAll(scope: Scope, expression: CompiledExpression): unknown[] {
  let start: unknown[] | undefined; // walk reads its items, never changes them: one array for the alternatives
  const root = scope.focus ?? scope.resource;
  for (const alternative of expression.alternatives) {
    // Most alternatives find nothing at their first step (a Quantity's Observation has no valueCodeableConcept): an
    // element the root lacks gives nothing, whatever follows and however it finishes, so it is passed over unwalked.
    const first = alternative.steps[0];
    if (!alternative.from && first && !first.codingDisplay && isJsonObject(root) && (root[first.json] === undefined || root[first.json] === null)) continue;
    const from = alternative.from ? letValues(scope, alternative.from) : (start ??= [root]);
    let values = alternative.finish?.kind === 'join' && alternative.steps.at(-1)?.resolve ? namedReferences(scope, from, alternative.steps) : walk(scope, from, alternative.steps);
    if (alternative.finish?.kind === 'join') {
      const texts = values.map((v) => textOf(v, scope.terminology)).filter((v) => v !== undefined);
      values = texts.length ? [texts.join(alternative.finish.separator)] : [];
    }
    else if (alternative.finish?.kind === 'toDate') values = values.map((v) => (typeof v === 'string' ? v.slice(0, 10) : v));
    else if (alternative.finish?.kind === 'toText') values = values.map((v) => textOf(v, scope.terminology)).filter((v) => v !== undefined);
    // A name written only as text ("Sunita Sharma"): its first word, and its last when it has more than one.
    else if (alternative.finish?.kind === 'firstWord' || alternative.finish?.kind === 'lastWord') values = values.flatMap((v) => wordOf(v, alternative.finish!.kind === 'lastWord'));
    // A country as a record writes it ("Kenya", "Cameroun", "ke"): its ISO 3166 code, else nothing (the next alternative).
    else if (alternative.finish?.kind === 'countryCode') values = values.flatMap((v) => (typeof v === 'string' ? (countryCodeOf(v) ?? []) : []));
    // exists(): true when there is a value, else nothing (the next alternative, or null: not false).
    else if (alternative.finish?.kind === 'exists') values = values.length ? [true] : [];
    // memberOf(): true or false when the value set is loaded and the values have codes, else nothing (null).
    else if (alternative.finish?.kind === 'memberOf') {
      const member = membership(scope.terminology, alternative.finish.valueSet, values);
      values = member === undefined ? [] : [member];
    }
    if (values.length) return values;
  }
  return [];
}

/** The first value of the expression. */
export function readPath(scope: Scope, expression: CompiledExpression): unknown {
  return readAll(scope, expression)[0];
}

function writeConditions(target: Obj, conditions: CompiledCondition[], resource?: Obj): void {
  for (const condition of conditions) {
    if (condition.empty || condition.exists || condition.op) continue;
    // `%resource.…` (an exists() path's): the value the resource holds there as written so far; none, nothing.
    const value = condition.valueFrom ? (resource ? valuesOf(resource, condition.valueFrom)[0] : undefined) : condition.value;
    if (value !== undefined) writePath(target, condition.steps.map((s) => ({ ...s, where: [] })), value);
  }
}

/**
 * Writes each value into a new element of the path's last repeating element (a list field): `scopes` ->
 * one `provision.class` Coding per scope, each satisfying the step's `where`.
 */
export function writeList(root: Obj, path: CompiledPath, values: unknown[]): void {
  let k = path.length - 1;
  while (!(path[k]!.isArray && path[k]!.index === undefined)) k--;
  const step = path[k]!;
  const rest = path.slice(k + 1);
  const holder = reach(root, path.slice(0, k));
  const list = (holder[step.json] = Array.isArray(holder[step.json]) ? holder[step.json] : []) as unknown[];
  for (const value of values) {
    if (!rest.length) {
      list.push(value);
      continue;
    }
    const child: Obj = {};
    writeConditions(child, step.where);
    writePath(child, rest, value);
    list.push(child);
  }
}

/** Each value at the path with its repeating element (the one before the last step) at position 0, 1, …. */
function writeEach(root: Obj, path: CompiledPath, values: string[]): void {
  values.filter((value) => value !== '').forEach((value, index) => writePath(root, [...path.slice(0, -2), { ...path.at(-2)!, index }, path.at(-1)!], value));
}

/**
 * Sets the value at the path, creating what is missing: `where(...)` finds the matching element or adds one
 * that satisfies it, `[n]` addresses position n, a list without either means its first element.
 */
export function writePath(root: Obj, path: CompiledPath, value: unknown): void {
  const parent = reach(root, path.slice(0, -1));
  const step = path[path.length - 1]!;
  if (!step.isArray) {
    parent[step.json] = value;
    return;
  }
  const list = Array.isArray(parent[step.json]) ? (parent[step.json] as unknown[]) : [];
  parent[step.json] = list;
  list[positionIn(list, step)] = value;
}

/**
 * Where in `list` a step goes: its `[n]`, the element matching its `where` (or a new one), else the first. Written
 * paths have literal conditions only (the compiler sees to it), but for an exists() path's `%resource.…` values, read
 * from `resource` (the resource as written so far).
 */
function positionIn(list: unknown[], step: CompiledStep, resource?: Obj): number {
  const at = step.index ?? (step.where.length ? list.findIndex((item) => satisfies(item, step.where, { resource })) : 0);
  return at < 0 ? list.length : at;
}

/** The element the steps lead to, creating what is missing (each step's `where` satisfied; `resource`: see positionIn). */
function reach(root: Obj, steps: CompiledPath, resource?: Obj): Obj {
  let parent = root;
  for (const step of steps) {
    let child: Obj;
    if (!step.isArray) {
      child = isJsonObject(parent[step.json]) ? (parent[step.json] as Obj) : {};
      parent[step.json] = child;
    } else {
      const list = Array.isArray(parent[step.json]) ? (parent[step.json] as unknown[]) : [];
      parent[step.json] = list;
      const at = positionIn(list, step, resource);
      while (list.length <= at) list.push({});
      child = isJsonObject(list[at]) ? (list[at] as Obj) : {};
      list[at] = child;
    }
    writeConditions(child, step.where, resource);
    parent = child;
  }
  return parent;
}

/** What a quantity holds besides its value: a limit with these alone limits nothing. */
const UNIT_PARTS = new Set(['unit', 'system', 'code', 'comparator']);

/**
 * Drops empty objects, empty lists and list holes, so a partly filled map still gives valid FHIR JSON; and a
 * range's limit (`low`, `high`) with a unit but no value: a unit written to both limits of a range open above
 * (an age range `18 a` and over) leaves the open one out.
 */
export function prune(value: unknown): unknown {
  if (Array.isArray(value)) {
    const items = value.map(prune).filter((v) => v !== undefined);
    return items.length ? items : undefined;
  }
  if (isJsonObject(value)) {
    const out: Obj = {};
    for (const [k, v] of Object.entries(value)) {
      const p = prune(v);
      if (p === undefined) continue;
      if ((k === 'low' || k === 'high') && isJsonObject(p) && p.value === undefined && Object.keys(p).every((key) => UNIT_PARTS.has(key))) continue;
      out[k] = p;
    }
    return Object.keys(out).length ? out : undefined;
  }
  return value === null ? undefined : value;
}

// ---- conversions ---------------------------------------------------------------------------------------

const XHTML_OPEN = '<div xmlns="http://www.w3.org/1999/xhtml">';
const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };

function textToNarrative(text: string): { status: string; div: string } {
  const escaped = text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  // `additional`: the narrative is what a clinician wrote, not generated from structured data.
  return { status: 'additional', div: `${XHTML_OPEN}${escaped}</div>` };
}

/** Plain text of a narrative: ours comes back exactly; others' XHTML loses its markup but keeps its line breaks. */
function narrativeToText(narrative: unknown): string | undefined {
  const div = isJsonObject(narrative) ? narrative.div : undefined;
  if (typeof div !== 'string') return undefined;
  let inner = div.replace(/^\s*<div[^>]*>/, '').replace(/<\/div>\s*$/, '');
  // Markup (ours is escaped text: no tags): its whitespace means nothing, its blocks are lines, its cells are apart.
  const markup = /<[A-Za-z/]/.test(inner);
  if (markup) {
    inner = inner
      .replace(/\s+/g, ' ')
      .replace(/<\/t[dh]\s*>|<t[dh]\b[^>]*\/>/gi, ' | ') // an empty cell (<td/>) keeps its column
      .replace(/<br\s*\/?>|<\/(p|div|li|tr|h[1-6]|table|thead|tbody|ul|ol|pre|blockquote)\s*>/gi, '\n');
  }
  const text = inner
    .replace(/<[^>]*>/g, '')
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (entity, name: string) => {
      if (name[0] === '#') return String.fromCodePoint(name[1] === 'x' || name[1] === 'X' ? parseInt(name.slice(2), 16) : Number(name.slice(1)));
      return ENTITIES[name.toLowerCase()] ?? entity;
    });
  if (!markup) return text;
  return text
    .split('\n')
    .map((line) => line.replace(/(\s*\|)+\s*$/, '').trim())
    .filter(Boolean)
    .join('\n');
}

/** The id of a reference to one of our resources of this type (storedReference: `Patient/123`, versioned, or absolute under our base). */
function referenceId(reference: unknown, resourceType: string, localBase: string | undefined): string | undefined {
  const ref = isJsonObject(reference) ? reference.reference : undefined;
  const key = typeof ref === 'string' ? storedReference(ref, localBase) : undefined;
  return key?.startsWith(`${resourceType}/`) ? key.slice(resourceType.length + 1) : undefined;
}

function toFhirValue(conversion: Conversion, value: Literal): unknown {
  switch (conversion.kind) {
    case 'copy':
      return value;
    case 'reference':
      return { reference: `${conversion.resourceType}/${value}` };
    case 'narrative':
      return textToNarrative(String(value));
  }
}

function fromFhirValue(conversion: Conversion, value: unknown, scope: Scope): unknown {
  switch (conversion.kind) {
    case 'copy':
      return value;
    case 'reference':
      return referenceId(value, conversion.resourceType, scope.localBase);
    case 'narrative':
      return narrativeToText(value);
  }
}

// ---- Connect values ----------------------------------------------------------------------------------------

/** A FHIR resource id (R4 `id`): 1-64 of A-Z a-z 0-9 - and . */
export const FHIR_ID = /^[A-Za-z0-9\-.]{1,64}$/;


const CONNECT_FORMATS: Record<ConnectType, (v: unknown) => boolean> = {
  string: (v) => typeof v === 'string',
  // A FHIR id: ids Pont generates are UUIDs, another system's stay as it wrote them (`123`, `obs-1.a`).
  id: (v) => typeof v === 'string' && FHIR_ID.test(v),
  // A FHIR date: the day, or the month or year alone when that is all the source recorded (born in 1987).
  // (A day of the calendar: Date.parse takes 2023-02-30 and rolls it over to 2 March.)
  date: isFhirDate,
  // A FHIR dateTime: seconds and a zone once a time is given, or a date, month or year alone (its precision).
  'date-time': isFhirDateTime,
  boolean: (v) => typeof v === 'boolean',
  integer: (v) => Number.isInteger(v),
  number: (v) => typeof v === 'number' && Number.isFinite(v),
  object: isJsonObject,
};

export const CONNECT_TYPES = Object.keys(CONNECT_FORMATS) as ConnectType[];

const show = (v: unknown) => JSON.stringify(v);

function checkConnectValue(map: string, field: ConnectField, value: unknown): void {
  if (field.list) {
    if (!Array.isArray(value)) throw new MappingValueError(map, field.name, `${show(value)} is not a list`);
    for (const item of value) checkConnectValue(map, { ...field, list: false }, item);
    return;
  }
  if (field.fields) {
    // An object: its fields are checked as it is written (writeFields), each named `object.field`.
    if (!isJsonObject(value)) throw new MappingValueError(map, field.name, `${show(value)} is not an object`);
    return;
  }
  if (!CONNECT_FORMATS[field.type](value)) throw new MappingValueError(map, field.name, `${show(value)} is not a valid ${field.type}`);
  if (field.values && !field.values.includes(value as Literal)) {
    throw new MappingValueError(map, field.name, `${show(value)} is not one of ${field.values.map(show).join(', ')}`);
  }
}

// ---- the two directions --------------------------------------------------------------------------------------

/**
 * What a writer may know besides the record: the stored resources its references point to (`Type/id`, as a reader's
 * `resolved`), so that a field whose value a fallback reads through `resolve()` of what is written (a visit's
 * reason, the name of the Condition its reason_references name) is not written again beside it.
 */
export interface WriteContext {
  resolved?: ReadonlyMap<string, unknown>;
  localBase?: string;
}

export function runToFhir(program: MapProgram, connect: Record<string, unknown>, context: WriteContext = {}): Resource {
  const root: Obj = { resourceType: program.resourceType };
  writeFields(program, root, connect, '', context);
  for (const given of program.defaults ?? []) {
    if (!walk({ resource: root }, [root], given.target).length) writePath(root, given.target, given.value);
  }
  for (const fixed of program.fixed) writePath(root, fixed.target, fixed.value);
  periodsWhole(root);
  return inFhirOrder(prune(root), program.resourceType) as Resource;
}

/**
 * A choice element holds one value: a start written as its dateTime beside an end written into its Period (a lab
 * result's effective_at and effective_end, read from an effectivePeriod) is that Period, started.
 */
function periodsWhole(root: Obj): void {
  for (const key of Object.keys(root)) {
    if (!key.endsWith('DateTime')) continue;
    const period = root[`${key.slice(0, -'DateTime'.length)}Period`];
    if (isJsonObject(period) && period.start === undefined && period.end !== undefined) {
      period.start = root[key];
      delete root[key];
    }
  }
}

/** A value written into a Reference's `reference` that has no reference's form: the field's fault, named. */
function checkReferenceForm(program: MapProgram, name: string, value: unknown): void {
  const problem = typeof value === 'string' ? referenceFormProblem(value) : undefined;
  if (problem) throw new MappingValueError(program.name, name, problem);
}

/**
 * Writes the Connect fields of `connect` into `root` (the resource, or the element of an object field). Object
 * fields first: the other fields then write into what they wrote, and must agree with it (`loinc_code` and the
 * LOINC coding of `codings`), or add to it (a coding the list lacks). `prefix` names an object's fields in errors.
 */
function writeFields(program: MapProgram, root: Obj, connect: Record<string, unknown>, prefix: string, context: WriteContext = {}, resource: Obj = root): void {
  const rules = [...program.fields.filter((r) => r.object), ...program.fields.filter((r) => !r.object)];
  let objectsWritten = false;
  let settled: Set<FieldRule> | undefined;
  for (const rule of rules) {
    if (rule.readOnly) continue;
    const name = prefix + rule.field.name;
    const value = connect[rule.field.name];
    if (value === undefined || value === null) {
      if (rule.field.required) throw new MappingValueError(program.name, name, 'is required');
      continue;
    }
    checkConnectValue(program.name, { ...rule.field, name }, value);
    if (rule.object) {
      writeObjects(program, rule, root, value, name, context, resource);
      objectsWritten = true;
      continue;
    }
    // A value that reading already gives from what the objects wrote is not written again (code_system `other`
    // read from an ICD-10-CM coding of `codings` does not turn it into Pont's local system); nor are the fields of a
    // let that one of the elements the objects wrote gives (the range that applies, among `reference_ranges`).
    if (objectsWritten && !rule.field.list && mayReadBack(rule, root)) {
      settled ??= settledByLets(program, root, connect);
      if (settled.has(rule) || readsBack(program, rule, root, value)) continue;
    }
    if (rule.field.list) {
      const items = (value as Literal[]).map((item) => toFhirValue(rule.conversion, rule.table ? rule.table.toFhir.get(item)![0]! : item));
      if (rule.field.required && !items.length) throw new MappingValueError(program.name, name, 'is required (at least one value)');
      if (rule.targets[0]!.writesReference) items.forEach((item, i) => checkReferenceForm(program, `${name}[${i}]`, item));
      writeList(root, rule.targets[0]!.write, items);
      continue;
    }
    // Without a value table, each of several paths receives the value (an age's unit, into both its limits).
    const cells = rule.table ? rule.table.toFhir.get(value as Literal)! : rule.targets.map(() => value as Literal);
    rule.targets.forEach((target, i) => {
      if (cells[i] === null) return;
      if (target.writeEach !== undefined && typeof cells[i] === 'string') {
        // Reasons read joined (`reasonCode.join('; ') | reasonReference.resolve().join('; ')`) that are the names of the
        // references written beside them are those reasons, as below.
        if (rule.conversion.kind === 'copy' && namedByOtherReference(root, target, cells[i], context)) return;
        return writeEach(root, target.write, (cells[i] as string).split(target.writeEach));
      }
      if (target.writeExists) {
        // `%resource` is the resource, also within an object field.
        if (cells[i] === true) reach(root, target.write, resource);
        return;
      }
      // An instant (e.g. `issued`) needs the time: a date-time of a lower precision does not fit it.
      if (target.writeType === 'instant' && !isFhirInstant(cells[i])) {
        throw new MappingValueError(program.name, name, `${show(cells[i])} is not a full date-time (with seconds and a zone), as FHIR needs here`);
      }
      // A FHIR date (a birthDate) holds no time: a date-time field written there gives its date, month or year alone.
      if (target.writeType === 'date' && String(cells[i]).includes('T')) {
        throw new MappingValueError(program.name, name, `${show(cells[i])} has a time, which a FHIR date does not hold: give the date, month or year alone`);
      }
      const written = toFhirValue(rule.conversion, cells[i]);
      if (target.writesReference) checkReferenceForm(program, name, written);
      // What a fallback already reads from other fields' elements is not written twice (a blood pressure's unit is its components').
      if (rule.conversion.kind === 'copy' && walk({ resource: root }, [root], target.write)[0] === undefined) {
        if (readPath({ resource: root }, target) === written) return;
        if (namedByOtherReference(root, target, written, context)) return;
      }
      // Two fields may reach one element (SNOMED CT as the main code and as the equivalent): they must agree.
      const already = walk({ resource: root }, [root], target.write)[0];
      if (already !== undefined && !isJsonObject(already) && already !== written) {
        throw new MappingValueError(program.name, name, `${show(cells[i])} contradicts ${show(already)}, written to the same FHIR element by another field`);
      }
      writePath(root, target.write, written);
    });
    for (const also of rule.also) writePath(root, also.target, also.value);
  }
}

/**
 * The fields read through a let (every alternative of every target from it), by let: the single fields of a
 * chosen part (reference_low, reference_high, … of %range). Found once per map.
 */
const LET_FIELDS = new WeakMap<MapProgram, Map<CompiledExpression, FieldRule[]>>();
function letFields(program: MapProgram): Map<CompiledExpression, FieldRule[]> {
  let byLet = LET_FIELDS.get(program);
  if (!byLet) {
    byLet = new Map();
    for (const rule of program.fields) {
      if (rule.object || rule.readOnly || rule.field.list) continue;
      const froms = new Set(rule.targets.flatMap((t) => t.alternatives.map((a) => a.from)));
      const [from] = froms;
      if (froms.size === 1 && from) byLet.set(from, [...(byLet.get(from) ?? []), rule]);
    }
    LET_FIELDS.set(program, byLet);
  }
  return byLet;
}

/**
 * The let fields with a value in `connect` that are already written: one of the elements the let's written path
 * reaches (any of them, not only its first) reads back every one of them. A record read with `reference_ranges`
 * and the range that applies to its patient (the second, by age) written back gives its ranges once, the single
 * fields agreeing with the one they were read from.
 */
function settledByLets(program: MapProgram, root: Obj, connect: Record<string, unknown>): Set<FieldRule> {
  const settled = new Set<FieldRule>();
  for (const [expression, rules] of letFields(program)) {
    const given = rules.filter((rule) => connect[rule.field.name] !== undefined && connect[rule.field.name] !== null);
    if (!given.length) continue;
    const last = expression.write.length - 1;
    const every = expression.write.map((step, i) => (i === last ? { ...step, first: false, index: undefined } : step));
    const candidates = walk({ resource: root }, [root], every);
    if (candidates.some((element) => given.every((rule) => readsBack(program, rule, root, connect[rule.field.name], new Map([[expression, [element]]]))))) {
      for (const rule of given) settled.add(rule);
    }
  }
  return settled;
}

/**
 * The elements of the resource where reading `rule` starts (the first step of each alternative, through its lets),
 * or undefined when one starts elsewhere. Found once per rule.
 */
const READ_ROOTS = new WeakMap<FieldRule, string[] | undefined>();
function readRoots(rule: FieldRule): string[] | undefined {
  if (READ_ROOTS.has(rule)) return READ_ROOTS.get(rule);
  const roots = (expression: CompiledExpression): Array<string | undefined> => expression.alternatives.flatMap((a) => (a.from ? roots(a.from) : [a.steps[0]?.json]));
  const all = rule.targets.flatMap(roots);
  const found = all.every((r) => r !== undefined) ? [...new Set(all as string[])] : undefined;
  READ_ROOTS.set(rule, found);
  return found;
}

/**
 * Can reading `rule` from `root` as written so far give anything (readsBack)? Not when none of the elements where its
 * reading starts is written yet: a v2 result's status or value, beside its performers (an object list), is not read
 * back (~0.3 ms of a message's 2 ms translation, bench:hl7).
 */
function mayReadBack(rule: FieldRule, root: Obj): boolean {
  const roots = readRoots(rule);
  return roots === undefined || roots.some((r) => root[r] !== undefined);
}

/**
 * Does reading `target` through resolve(), of what the writer resolved, of a reference written elsewhere than where
 * `written` would go, give it (nothing written there yet)? A visit's reason that is the name of the Condition its
 * reason_references name is that one reason, not a second in words. A reference's own name (a diagnosis's condition,
 * as its display) is not counted: it is written with it.
 */
function namedByOtherReference(root: Obj, target: CompiledExpression, written: unknown, context: WriteContext): boolean {
  if (!context.resolved || walk({ resource: root }, [root], target.write)[0] !== undefined) return false;
  return readPath({ resource: root, ...context }, { ...target, alternatives: target.alternatives.filter((a) => !resolvesOwnReference(a, target.write)) }) === written;
}

/**
 * Does `alternative` read through resolve() of the very reference `write` writes into (`condition.resolve()…` beside
 * `condition.display`)? Then what it reads is that reference's name, written with it as its display.
 */
function resolvesOwnReference(alternative: CompiledAlternative, write: CompiledPath): boolean {
  return alternative.steps.some((s) => s.resolve) && (!!alternative.from || alternative.steps[0]?.json === write[0]?.json);
}

/** Does reading `rule` from `root` as written so far give `value` (`lets`: a let's part, given)? */
function readsBack(program: MapProgram, rule: FieldRule, root: Obj, value: unknown, lets?: Map<CompiledExpression, unknown[]>): boolean {
  const read: Record<string, unknown> = {};
  try {
    // What FHIR holds, not the default reading gives without it (is_primary false is still written).
    readField(program, { ...rule, field: { ...rule.field, default: undefined } }, { resource: root, ...(lets ? { lets } : {}) }, read);
  } catch (err) {
    if (err instanceof MappingValueError) return false;
    throw err;
  }
  return read[rule.field.name] === value;
}

/**
 * An object field: a list appends one element per object to the path's last element (in order, each meeting
 * its `where`, as writeList does); a single object is written into the element the path reaches.
 */
function writeObjects(program: MapProgram, rule: FieldRule, root: Obj, value: unknown, name: string, context: WriteContext, resource: Obj): void {
  const path = rule.targets[0]!.write;
  if (!rule.field.list) {
    writeFields(rule.object!, reach(root, path), value as Record<string, unknown>, `${name}.`, context, resource);
    return;
  }
  const objects = value as unknown[];
  if (rule.field.required && !objects.length) throw new MappingValueError(program.name, name, 'is required (at least one value)');
  const step = path[path.length - 1]!;
  const holder = reach(root, path.slice(0, -1));
  const list = (holder[step.json] = Array.isArray(holder[step.json]) ? holder[step.json] : []) as unknown[];
  objects.forEach((object, i) => {
    const element: Obj = {};
    writeConditions(element, step.where);
    writeFields(rule.object!, element, object as Record<string, unknown>, `${name}[${i}].`, context, resource);
    list.push(element);
  });
}

/** One value of a list field read back through its value table. */
function fromList(program: MapProgram, rule: FieldRule, value: unknown, prefix = ''): unknown {
  if (!rule.table) return value;
  const mapped = rule.table.fromFhir.get(JSON.stringify([value ?? null]));
  if (mapped !== undefined) return mapped;
  if (rule.table.otherwise) return rule.table.otherwise.value;
  throw new MappingValueError(program.name, prefix + rule.field.name, `the map has no value for FHIR ${show(value ?? null)}`);
}

export function runFromFhir(program: MapProgram, resource: Resource, context: ReadContext = {}): Record<string, unknown> {
  return readFields(program, resource, false, context).connect;
}

/**
 * Like runFromFhir, but a field the map has no value for (a FHIR value outside its table) reads as null and
 * is named in `unread` instead of failing the whole resource: data from elsewhere shows what it can.
 */
export function runReadFhir(program: MapProgram, resource: Resource, context: ReadContext = {}, only?: ReadonlySet<string>): { connect: Record<string, unknown>; unread: string[] } {
  return readFields(program, resource, true, context, only && withTheirTables(program, only));
}

/**
 * What a reader may know besides the resource: its patient (`%patient`), the resources its references resolve to,
 * and the loaded terminology's answers for its codes (displays, memberOf(): see terminologyAsked).
 */
export interface ReadContext {
  patient?: Resource;
  resolved?: ReadonlyMap<string, unknown>;
  terminology?: ReadTerminology;
  /** This server's FHIR base: a reference under it is one of ours; without it, only relative references are. */
  localBase?: string;
}

function readFields(program: MapProgram, resource: Resource, lenient: boolean, { patient, resolved, terminology, localBase }: ReadContext = {}, only?: ReadonlySet<string>): { connect: Record<string, unknown>; unread: string[] } {
  if (resource?.resourceType !== program.resourceType) {
    throw new MappingValueError(program.name, 'resourceType', `expected a ${program.resourceType}, got ${show(resource?.resourceType)}`);
  }
  const unread: string[] = [];
  const connect = readRules(program, { resource, patient, resolved, terminology, localBase, lets: new Map(), memo: {} }, lenient, unread, '', only);
  return { connect, unread: unread.length > 1 ? [...new Set(unread)] : unread };
}

/**
 * The fields of `program` read in `scope` (an object's from its element, `scope.focus`); `prefix` names an object's
 * fields. `only`: just these (of the map's top level), for a reader that needs two fields of forty.
 */
function readRules(program: MapProgram, scope: Scope, lenient: boolean, unread: string[], prefix: string, only?: ReadonlySet<string>): Record<string, unknown> {
  const connect: Record<string, unknown> = {};
  for (const rule of program.fields) {
    if (only && !only.has(rule.field.name)) continue;
    try {
      if (rule.object) readObjects(rule, scope, connect, lenient, unread, prefix);
      else readField(program, rule, scope, connect, prefix);
    } catch (err) {
      if (!lenient || !(err instanceof MappingValueError)) throw err;
      connect[rule.field.name] = rule.field.list ? [] : null;
      unread.push(prefix + rule.field.name);
    }
  }
  completeFromTables(program, connect);
  return connect;
}

/** An object field: one object per element the path reaches (a list), or of the first one; each read by the object's rules. */
function readObjects(rule: FieldRule, scope: Scope, connect: Record<string, unknown>, lenient: boolean, unread: string[], prefix: string): void {
  const elements = readAll(scope, rule.targets[0]!).filter(isJsonObject);
  const at = `${prefix}${rule.field.name}.`;
  if (rule.field.list) connect[rule.field.name] = elements.map((element) => readRules(rule.object!, { ...scope, focus: element }, lenient, unread, at));
  else if (elements.length) connect[rule.field.name] = readRules(rule.object!, { ...scope, focus: elements[0]! }, lenient, unread, at);
  else if (rule.field.nullable) connect[rule.field.name] = null;
}

/**
 * A field that copies an element a value table also writes (`loinc_code` beside a local-code table) and finds
 * nothing in FHIR reads what the table writes there for its value: the lab's own code HB, without a LOINC coding,
 * reads as loinc_code 718-7, as writing local_code HB would have written it.
 */
function completeFromTables(program: MapProgram, connect: Record<string, unknown>): void {
  for (const { table, cell, copy } of sharedElements(program)) {
    const value = connect[table.field.name];
    if (value === undefined || value === null || (connect[copy.field.name] ?? null) !== null) continue;
    const written = table.table!.toFhir.get(value as Literal)![cell];
    if (written !== null && written !== undefined) connect[copy.field.name] = written;
  }
}

/** `fields` and the value tables that complete them (completeFromTables): what reading those fields alone reads. */
function withTheirTables(program: MapProgram, fields: ReadonlySet<string>): ReadonlySet<string> {
  const tables = sharedElements(program).filter(({ copy }) => fields.has(copy.field.name));
  return tables.length ? new Set([...fields, ...tables.map(({ table }) => table.field.name)]) : fields;
}

/** Each copy field that writes the element of a value table's cell: found once per map (reading is a hot path). */
const SHARED = new WeakMap<MapProgram, Array<{ table: FieldRule; cell: number; copy: FieldRule }>>();
function sharedElements(program: MapProgram): Array<{ table: FieldRule; cell: number; copy: FieldRule }> {
  let shared = SHARED.get(program);
  if (!shared) {
    const copies = program.fields.filter((f) => !f.table && !f.readOnly && f.conversion.kind === 'copy');
    shared = program.fields
      .filter((rule) => rule.table && !rule.field.list)
      .flatMap((table) =>
        table.targets.flatMap((target, cell) => {
          const key = JSON.stringify(target.write);
          const copy = copies.find((f) => JSON.stringify(f.targets[0]!.write) === key);
          return copy ? [{ table, cell, copy }] : [];
        }),
      );
    SHARED.set(program, shared);
  }
  return shared;
}

/**
 * The value one path of a single field gives: its first value; for a reference, the first that refers to a resource of
 * its type, as a list of references keeps those (an appointment's patient among its participants, whoever comes first).
 */
function readOne(conversion: Conversion, target: CompiledExpression, scope: Scope): unknown {
  if (conversion.kind !== 'reference') return fromFhirValue(conversion, readPath(scope, target), scope);
  for (const value of readAll(scope, target)) {
    const id = fromFhirValue(conversion, value, scope);
    if (id !== undefined) return id;
  }
  return undefined;
}

function readField(program: MapProgram, rule: FieldRule, scope: Scope, connect: Record<string, unknown>, prefix = ''): void {
  if (rule.field.list) {
    // A reference to another type (a visit's diagnosis may be a Procedure) is not one of this list's ids.
    const values = readAll(scope, rule.targets[0]!).map((v) => fromFhirValue(rule.conversion, v, scope)).filter((v) => v !== undefined);
    connect[rule.field.name] = values.map((v) => fromList(program, rule, v, prefix));
    return;
  }
  // One path without a value table (most fields): its value, read alone.
  const found = rule.targets.length === 1 && !rule.table ? undefined : rule.targets.map((target) => readOne(rule.conversion, target, scope));
  // Several paths without a value table (each written the value): the first that has one.
  let value: unknown = !found ? readOne(rule.conversion, rule.targets[0]!, scope) : rule.table ? found[0] : found.find((v) => v !== undefined);
  if (rule.table && found!.some((v) => v !== undefined)) {
    const cells = found!;
    const key = JSON.stringify(cells.map((v) => v ?? null));
    const mapped = rule.table.fromFhir.get(key) ?? rule.table.readRows.find((row) => row.cells.every((cell, i) => cell === ANY || cell === (cells[i] ?? null)))?.value;
    if (mapped !== undefined) value = mapped;
    else if (rule.table.otherwise) value = rule.table.otherwise.value;
    else {
      throw new MappingValueError(program.name, prefix + rule.field.name, `the map has no value for FHIR ${cells.map((v) => show(v ?? null)).join(' + ')}`);
    }
  }
  // A value copied unchanged must still be one the Connect shape declares (a record never breaks its own shape).
  if (!rule.table && rule.field.values && value !== undefined && value !== null && !rule.field.values.includes(value as Literal)) {
    throw new MappingValueError(program.name, prefix + rule.field.name, `FHIR ${show(value)} is not one of the declared values`);
  }
  if (value !== undefined && value !== null) connect[rule.field.name] = value;
  else if (rule.field.default !== undefined) connect[rule.field.name] = rule.field.default;
  else if (rule.field.nullable) connect[rule.field.name] = null;
}
