import { OperationOutcomeError, tryGetDataType, validateResource } from '@medplum/core';
import type { OperationOutcomeIssue, Resource } from '@medplum/fhirtypes';
import { ApiError, ErrorCode, badRequest, clipped, issuesText } from '../core/errors';
import { fhirDateProblem, isFhirDateValue, type FhirDateType } from '../core/fhir-dates';
import { isResourceType } from '../core/fhir-definitions';
import { isJsonObject } from '../core/json';
import { MAX_RESOURCE_ARRAY, MAX_RESOURCE_STRING } from '../core/limits';
import { referencedType, referenceFormProblem } from '../core/reference-form';
import { vacuousInvariant } from '../core/vacuous-invariant';
import { passesBaseDefinitions } from './base-validity';
import { narrativeProblem } from './narrative';
import { checkRequiredBindings } from './terminology';

/** Validates against the R4 base definitions; an invalid resource is a 400 with every issue found. */
export function validateFhirResource(resource: Resource): void {
  if (!resource || typeof resource !== 'object' || Array.isArray(resource)) throw badRequest('Body must be a FHIR resource (a JSON object)');
  if (typeof resource.resourceType !== 'string' || !isResourceType(resource.resourceType))
    throw badRequest(`Unknown resourceType "${String(resource.resourceType)}"`);
  let large = false;
  let issues: OperationOutcomeIssue[] = jsonShapeIssues(resource, () => (large = true));
  if (!issues.length) issues = arrayShapeIssues(resource);
  if (!issues.length) issues = invariantIssues(resource);
  const checked = large && !issues.length ? withLargeDataChecked(resource, issues) : resource;
  try {
    // The validator only where the fast check is not sure (src/fhir/base-validity.ts): the same verdict, ~10× cheaper.
    if (!issues.length && !passesBaseDefinitions(checked)) issues = validateResource(checked);
  } catch (err) {
    if (err instanceof OperationOutcomeError) issues = err.outcome.issue ?? [];
    else throw badRequest(`Invalid resource: ${(err as Error).message}`);
  }
  const errors = issues.filter((i) => (i.severity === 'error' || i.severity === 'fatal') && !vacuousInvariant(i, resource));
  if (!errors.length) errors.push(...checkRequiredBindings(resource));
  if (errors.length) {
    const first = errors[0];
    const where = first.expression?.[0] ? ` at ${first.expression[0]}` : '';
    // A bounded answer whatever the input: the first issues, each cut short, and how many more there were.
    const shown: OperationOutcomeIssue[] = errors.slice(0, MAX_ISSUES).map((i) => ({ ...i, details: i.details?.text ? { text: i.details.text.slice(0, 500) } : i.details, diagnostics: i.diagnostics?.slice(0, 500) }));
    if (errors.length > MAX_ISSUES) shown.push({ severity: 'error', code: 'too-costly', details: { text: `${errors.length - MAX_ISSUES} more issues not shown` } });
    throw new ApiError(400, ErrorCode.validationFailed, `Invalid ${resource.resourceType}: ${(first.details?.text ?? first.diagnostics ?? '').slice(0, 500)}${where.slice(0, 300)}`, {
      issues: shown,
    });
  }
}

/** Why the store would refuse `resource` (validateFhirResource), its issues as one text; undefined when it would not. */
export function fhirResourceProblem(resource: Resource): string | undefined {
  try {
    validateFhirResource(resource);
    return undefined;
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    const issues = err.options.issues ?? [];
    return issues.length ? issuesText(issues) : err.message;
  }
}

/**
 * R4 invariants the structural validator leaves out: narratives are safe XHTML with content (txt-1, txt-2), every
 * `#id` reference names a contained resource (ref-1), a Period does not end before it starts (per-1) and a Range's low
 * is not above its high (rng-2); and no
 * modifier extension Pont does not understand (UNDERSTOOD_MODIFIERS).
 */
function invariantIssues(resource: Resource): OperationOutcomeIssue[] {
  const walk: InvariantWalk = { resourceType: resource.resourceType, issues: [], at: [], contained: containedIds(resource) };
  walkInvariants(walk, resource);
  return walk.issues;
}

interface InvariantWalk extends ShapeWalk {
  /** The ids of the contained resources of the resource being walked, which its `#id` references name. */
  contained: Set<string | undefined>;
}

const containedIds = (resource: object) => new Set(((resource as { contained?: Resource[] }).contained ?? []).map((r) => r?.id).filter(Boolean));

function walkInvariants(walk: InvariantWalk, value: unknown): void {
  if (walk.issues.length) return;
  const { at } = walk;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      at.push(i);
      walkInvariants(walk, value[i]);
      at.pop();
    }
    return;
  }
  if (!value || typeof value !== 'object') return;
  if (endsBeforeStart(value as Record<string, unknown>)) return walkIssue(walk, 'the period ends before it starts (per-1)', 'invariant');
  if (lowAboveHigh(value as Record<string, unknown>)) return walkIssue(walk, 'the range\'s low is above its high (rng-2)', 'invariant');
  let unknown: string | undefined;
  for (const k of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[k];
    at.push(k);
    if (k === 'div' && typeof v === 'string') {
      const problem = narrativeProblem(v);
      if (problem) walkIssue(walk, problem, 'invariant');
    } else if (k === 'modifierExtension' && (unknown = unknownModifier(v, walk)) !== undefined) {
      walkIssue(walk, `the modifier extension ${unknown.slice(0, 300)} is not one Pont understands: it may change the meaning of what it is in (a medication "not given"), so Pont does not store it (FHIR R4 Extensibility: data with an unrecognised modifier is not processed). An extension that changes no meaning goes in \`extension\`.`, 'extension');
    } else if (k === 'reference' && typeof v === 'string' && v.startsWith('#') && v !== '#' && !walk.contained.has(v.slice(1))) {
      walkIssue(walk, `${clipped(v)} names no contained resource (ref-1)`, 'invariant');
    } else if ((k === 'resource' || k === 'outcome') && typeof (v as { resourceType?: unknown } | null)?.resourceType === 'string') {
      // A resource inside this one that it does not contain (a Bundle entry's, its response's outcome, a Parameters
      // part's): its `#id` references name its own contained resources (ref-1's %rootResource), not the outer one's.
      const outer = walk.contained;
      walk.contained = containedIds(v as object);
      walkInvariants(walk, v);
      walk.contained = outer;
    } else walkInvariants(walk, v); // contained resources too: their narratives are shown as well
    at.pop();
  }
}

/**
 * The modifier extensions Pont understands, on a Basic only: the R5 SubscriptionTopic's status on the topics it
 * publishes as Basic (src/subscriptions/topics.ts). Any other is refused (invariantIssues): Pont's search, Connect
 * and the summary would read the resource without it, as if it said what it says without its modifier.
 */
const UNDERSTOOD_MODIFIERS = new Set(['http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.status']);

/**
 * The url of the first modifier extension of the list that Pont does not understand where it is, if any: those of
 * UNDERSTOOD_MODIFIERS only on a Basic, at its top level (a topic's status says nothing of a MedicationRequest).
 */
function unknownModifier(list: unknown, walk: InvariantWalk): string | undefined {
  if (!Array.isArray(list)) return undefined;
  const understood = walk.resourceType === 'Basic' && walk.at.length === 1 ? UNDERSTOOD_MODIFIERS : NONE_UNDERSTOOD;
  const unknown = list.find((e) => !understood.has((e as { url?: unknown })?.url as string)) as { url?: unknown } | undefined;
  if (unknown === undefined) return undefined;
  return typeof unknown?.url === 'string' ? unknown.url : `(a url that is no string: ${JSON.stringify(unknown?.url ?? null).slice(0, 100)})`;
}
const NONE_UNDERSTOOD = new Set<string>();

const RANGE_KEYS = new Set(['id', 'extension', 'low', 'high']);

/**
 * A Range (an object of low and high, and only Element's own keys) whose low is above its high, as FHIRPath compares
 * two quantities: only in one unit (the same code, else the same unit, or neither); others cannot be compared and pass.
 */
function lowAboveHigh(value: Record<string, unknown>): boolean {
  const { low, high } = value as { low?: Record<string, unknown>; high?: Record<string, unknown> };
  if (!low || !high || typeof low !== 'object' || typeof high !== 'object' || typeof low.value !== 'number' || typeof high.value !== 'number') return false;
  for (const k in value) if (!RANGE_KEYS.has(k)) return false;
  const sameUnit = low.code !== undefined || high.code !== undefined ? low.code === high.code && low.system === high.system : low.unit === high.unit;
  return sameUnit && low.value > high.value;
}

const PERIOD_KEYS = new Set(['id', 'extension', 'start', 'end']);
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * A Period (an object of start and end, and only Element's own keys) whose end is before its start, compared as
 * FHIRPath does: two moments with their zones in time; two dates of one precision as written; anything else (2026-02
 * and 2026-01-31) cannot be compared and passes.
 */
function endsBeforeStart(value: Record<string, unknown>): boolean {
  const { start, end } = value;
  if (typeof start !== 'string' || typeof end !== 'string') return false;
  for (const k in value) if (!PERIOD_KEYS.has(k)) return false;
  if (INSTANT.test(start) && INSTANT.test(end)) return Date.parse(end) < Date.parse(start);
  return start.length === end.length && !start.includes('T') && end < start;
}

/** The most issues one answer lists. */
const MAX_ISSUES = 100;

/** Keys that are never FHIR elements and would reach JavaScript's object machinery. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * A single value where FHIR wants an array (or an array where it wants one value), found by walking the
 * type definitions: checked before the full validation, which would report a 1 MB string as a million issues.
 * What it needs of each element's type is worked out once (typeFacts), and a path is written only for an issue.
 */
function arrayShapeIssues(resource: Resource): OperationOutcomeIssue[] {
  const walk: ShapeWalk = { resourceType: resource.resourceType, issues: [], at: [] };
  walkShape(walk, resource as unknown as Record<string, unknown>, resource.resourceType, 0);
  return walk.issues;
}

/**
 * A walk of the validator's own checks: where it is (`at`, the keys and indexes below the resource, made into a path
 * only for an issue) and what it found. The walks are module functions, not closures made again for each resource.
 */
interface ShapeWalk {
  resourceType: string;
  issues: OperationOutcomeIssue[];
  at: Array<string | number>;
}

/** An issue where the walk is: `structure` (the JSON or array shape), `invariant`, `extension` (a modifier not understood) or `value` (a text of no form its element has). */
function walkIssue(walk: ShapeWalk, text: string, code: 'structure' | 'invariant' | 'extension' | 'value' = 'structure'): void {
  walk.issues.push({ severity: 'error', code, details: { text }, expression: [pathOf(walk.resourceType, walk.at)] });
}

function walkShape(walk: ShapeWalk, value: Record<string, unknown>, type: string, depth: number): void {
  const schema = depth < MAX_DEPTH ? tryGetDataType(type) : undefined;
  if (!schema) return;
  const { issues, at } = walk;
  let choices: Set<string> | undefined;
  for (const key of Object.keys(value)) {
    if (issues.length) return;
    const v = value[key];
    at.push(key);
    const choice = schema.elements[key] ? undefined : choiceElements(schema.elements).find((name) => key.startsWith(name.slice(0, -3)));
    if (choice) {
      if (choices?.has(choice)) return walkIssue(walk, `Only one ${choice} may be given`);
      (choices ??= new Set()).add(choice);
    }
    const element = schema.elements[choice ?? key];
    if (element && key !== 'resourceType') {
      if (element.isArray && !Array.isArray(v)) walkIssue(walk, 'Expected an array of values');
      else if (!element.isArray && Array.isArray(v)) walkIssue(walk, 'Expected a single value, not an array');
      const facts = typeFacts(choice ? typesOf(element).get(key.slice(choice.length - 3).toLowerCase()) : element.type[0]);
      const items: unknown[] = Array.isArray(v) ? v : [v];
      // A Reference's `reference` has one of R4's forms, and names a type the element allows (Observation.subject: not
      // an Organization), relative or by a RESTful URL. Other elements named `reference` are uris (DetectedIssue's).
      if (facts.reference)
        for (let i = 0; i < items.length; i++) {
          const item = items[i];
          const reference = isJsonObject(item) && typeof item.reference === 'string' ? item.reference : undefined;
          if (reference === undefined) continue;
          const problem = referenceFormProblem(reference);
          const named = problem ? undefined : referencedType(reference);
          if (problem || (named && facts.targets && !facts.targets.includes(named))) {
            const element = pathOf(walk.resourceType, at);
            if (Array.isArray(v)) at.push(i);
            if (!problem) return walkIssue(walk, `${element} may refer to ${facts.targets!.join(', ')}, not ${named}`);
            at.push('reference');
            return walkIssue(walk, `${pathOf(walk.resourceType, at)}: ${problem}`, 'value');
          }
        }
      // A date, dateTime or instant is a day of the calendar (src/core/fhir-dates.ts): the validator's regex, as
      // R4's, takes 2023-02-30, which every search and Connect read would then roll over or leave out.
      if (facts.date)
        for (let i = 0; i < items.length; i++) {
          const item = items[i];
          if (typeof item !== 'string' || isFhirDateValue(item, facts.date)) continue;
          if (Array.isArray(v)) at.push(i);
          return walkIssue(walk, `"${clipped(item)}" ${fhirDateProblem(item, facts.date)}`, 'value');
        }
      if (facts.walkInto || facts.anyResource)
        for (let i = 0; i < items.length; i++) {
          const item = items[i];
          if (!isJsonObject(item)) continue;
          // A resource inside this one (contained, a Bundle's entry, a Parameters part's) is walked as its own type.
          const into = facts.walkInto ?? (typeof item.resourceType === 'string' && isResourceType(item.resourceType) ? item.resourceType : undefined);
          if (into === undefined) continue;
          if (Array.isArray(v)) at.push(i);
          walkShape(walk, item, into, depth + 1);
          if (Array.isArray(v)) at.pop();
        }
    }
    at.pop();
  }
}

/** `Resource.a[2].b` from a resource type and the keys and indexes below it. */
function pathOf(resourceType: string, at: ReadonlyArray<string | number>): string {
  let path = resourceType;
  for (const step of at) path += typeof step === 'number' ? `[${step}]` : `.${step}`;
  return path;
}

type ElementTypes = ReturnType<typeof tryGetDataType> extends infer S ? (S extends { elements: Record<string, infer E> } ? E : never) : never;
type ElementType = ElementTypes extends { type: Array<infer T> } ? T : never;

/** A choice element's types by their code in lower case (`valueQuantity` → `quantity`), found once per element. */
const typesOfElement = new WeakMap<object, Map<string, ElementType>>();
function typesOf(element: ElementTypes): Map<string, ElementType> {
  let types = typesOfElement.get(element);
  if (!types) typesOfElement.set(element, (types = new Map(element.type.map((t) => [t.code.toLowerCase(), t]))));
  return types;
}

/**
 * What arrayShapeIssues needs of an element's type, worked out once per type: whether it is a Reference, the types it
 * may name (none when it may name any), and the complex type to walk into (none for primitives), or whether it holds
 * a resource of any type (contained, a Bundle entry's), walked as the type it says it is.
 */
interface TypeFacts {
  reference?: true;
  /** A date, dateTime or instant: checked to be a day of the calendar. */
  date?: FhirDateType;
  targets?: string[];
  walkInto?: string;
  anyResource?: true;
}
const factsOfType = new WeakMap<object, TypeFacts>();
const NO_FACTS: TypeFacts = {};
function typeFacts(type: ElementType | undefined): TypeFacts {
  if (!type) return NO_FACTS;
  let facts = factsOfType.get(type);
  if (!facts) {
    const code = type.code;
    const targets = code === 'Reference' ? (type.targetProfile ?? []).map((u) => u.split('/').pop()!) : [];
    facts = {
      ...(code === 'Reference' ? { reference: true as const } : {}),
      ...(code === 'date' || code === 'dateTime' || code === 'instant' ? { date: code } : {}),
      ...(targets.length && !targets.includes('Resource') ? { targets } : {}),
      ...(code && !/^[a-z]/.test(code) && code !== 'Resource' ? { walkInto: code } : {}),
      ...(code === 'Resource' ? { anyResource: true as const } : {}),
    };
    factsOfType.set(type, facts);
  }
  return facts;
}

/** The choice elements (`value[x]`) of each type, found once. */
const choicesOfType = new WeakMap<object, string[]>();
function choiceElements(elements: Record<string, unknown>): string[] {
  let names = choicesOfType.get(elements);
  if (!names) choicesOfType.set(elements, (names = Object.keys(elements).filter((name) => name.endsWith('[x]'))));
  return names;
}

/** base64Binary as FHIR allows it (RFC 4648, whitespace between lines tolerated). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4}|\s)*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?\s*$/;

/**
 * The resource as @medplum/core's validator can take it: that validator refuses any string over 1 MB, but R4's 1 MB
 * bound is for `string`, not `base64Binary` (a scanned document's `data`). An attachment's data over 1 MB is
 * checked here (base64, else an issue) and stands in for itself as a short value there; the original is stored.
 */
function withLargeDataChecked(resource: Resource, issues: OperationOutcomeIssue[]): Resource {
  const swap = (value: unknown, path: string): unknown => {
    if (typeof value === 'string') {
      if (value.length <= MAX_RESOURCE_STRING || !path.endsWith('.data')) return value;
      if (!BASE64.test(value)) issues.push({ severity: 'error', code: 'structure', details: { text: 'Invalid base64Binary format' }, expression: [path] });
      return 'AA==';
    }
    if (Array.isArray(value)) {
      const items = value.map((v, i) => swap(v, `${path}[${i}]`));
      return items.some((v, i) => v !== value[i]) ? items : value;
    }
    if (!value || typeof value !== 'object') return value;
    let copy: Record<string, unknown> | undefined;
    for (const [k, v] of Object.entries(value)) {
      const swapped = swap(v, `${path}.${k}`);
      if (swapped !== v) (copy ??= { ...(value as Record<string, unknown>) })[k] = swapped;
    }
    return copy ?? value;
  };
  return swap(resource, resource.resourceType) as Resource;
}

/** Deeper than any real resource (contained resources and extensions included). */
const MAX_DEPTH = 64;
/** Bounds of one resource's JSON, far above real resources, so that no input dimension is unbounded. */
const MAX_KEYS = 500;

/**
 * FHIR JSON rules the structural validator of @medplum/core lets through: no empty strings, arrays or
 * objects, no arrays of arrays; and a depth bound, so a hostile body cannot exhaust the stack.
 */
function jsonShapeIssues(resource: Resource, largeData: () => void): OperationOutcomeIssue[] {
  const walk: JsonWalk = { resourceType: resource.resourceType, issues: [], at: [], largeData };
  walkJson(walk, resource, 0, false);
  return walk.issues;
}

interface JsonWalk extends ShapeWalk {
  /** Called for a string over MAX_RESOURCE_STRING at an element named `data` (an attachment's, checked apart). */
  largeData: () => void;
}

function walkJson(walk: JsonWalk, value: unknown, depth: number, inArray: boolean): void {
  const { issues, at } = walk;
  if (issues.length) return;
  if (depth > MAX_DEPTH) return walkIssue(walk, `Nested more than ${MAX_DEPTH} levels deep`);
  if (value === '') return walkIssue(walk, 'An empty string (leave the element out instead)');
  if (typeof value === 'string' && value.length > MAX_RESOURCE_STRING) {
    return at[at.length - 1] === 'data' ? walk.largeData() : walkIssue(walk, `A string longer than ${MAX_RESOURCE_STRING} characters`);
  }
  if (Array.isArray(value)) {
    if (inArray) return walkIssue(walk, 'An array inside an array');
    if (value.length === 0) return walkIssue(walk, 'An empty array (leave the element out instead)');
    if (value.length > MAX_RESOURCE_ARRAY) return walkIssue(walk, `An array of more than ${MAX_RESOURCE_ARRAY} items`);
    for (let i = 0; i < value.length; i++) {
      at.push(i);
      walkJson(walk, value[i], depth + 1, true);
      at.pop();
    }
  } else if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    if (keys.length === 0) return walkIssue(walk, 'An empty object (leave the element out instead)');
    if (keys.length > MAX_KEYS) return walkIssue(walk, `An object with more than ${MAX_KEYS} elements`);
    for (const k of keys) {
      at.push(k);
      if (FORBIDDEN_KEYS.has(k)) return walkIssue(walk, `"${k}" is not a FHIR element`);
      walkJson(walk, (value as Record<string, unknown>)[k], depth + 1, false);
      at.pop();
    }
  }
}
