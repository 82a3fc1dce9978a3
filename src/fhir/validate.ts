import { OperationOutcomeError, tryGetDataType, validateResource } from '@medplum/core';
import type { OperationOutcomeIssue, Resource } from '@medplum/fhirtypes';
import { ApiError, ErrorCode, badRequest } from '../core/errors';
import { isResourceType } from '../core/fhir-definitions';
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
  const errors = issues.filter((i) => i.severity === 'error' || i.severity === 'fatal');
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

/**
 * R4 invariants the structural validator leaves out: narratives are safe XHTML with content (txt-1, txt-2), and
 * every `#id` reference names a contained resource (ref-1).
 */
function invariantIssues(resource: Resource): OperationOutcomeIssue[] {
  const issues: OperationOutcomeIssue[] = [];
  const issue = (text: string, path: string) => issues.push({ severity: 'error', code: 'invariant', details: { text }, expression: [path] });
  const contained = new Set(((resource as { contained?: Resource[] }).contained ?? []).map((r) => r?.id).filter(Boolean));
  const visit = (value: unknown, path: string) => {
    if (issues.length) return;
    if (Array.isArray(value)) return value.forEach((v, i) => visit(v, `${path}[${i}]`));
    if (!value || typeof value !== 'object') return;
    for (const [k, v] of Object.entries(value)) {
      if (k === 'div' && typeof v === 'string') {
        const problem = narrativeProblem(v);
        if (problem) issue(problem, `${path}.div`);
      } else if (k === 'reference' && typeof v === 'string' && v.startsWith('#') && v !== '#' && !contained.has(v.slice(1))) {
        issue(`${v} names no contained resource (ref-1)`, `${path}.reference`);
      } else visit(v, `${path}.${k}`); // contained resources too: their narratives are shown as well
    }
  };
  visit(resource, resource.resourceType);
  return issues;
}

/** The most issues one answer lists. */
const MAX_ISSUES = 100;

/** Keys that are never FHIR elements and would reach JavaScript's object machinery. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * A single value where FHIR wants an array (or an array where it wants one value), found by walking the
 * type definitions: checked before the full validation, which would report a 1 MB string as a million issues.
 */
function arrayShapeIssues(resource: Resource): OperationOutcomeIssue[] {
  const issues: OperationOutcomeIssue[] = [];
  const walk = (value: Record<string, unknown>, type: string, path: string, depth: number) => {
    const schema = depth < MAX_DEPTH ? tryGetDataType(type) : undefined;
    if (!schema) return;
    const choices = new Set<string>();
    for (const [key, v] of Object.entries(value)) {
      if (issues.length) return;
      const choice = schema.elements[key] ? undefined : choiceElements(schema.elements).find((name) => key.startsWith(name.slice(0, -3)));
      if (choice && choices.has(choice)) return void issues.push({ severity: 'error', code: 'structure', details: { text: `Only one ${choice} may be given` }, expression: [`${path}.${key}`] });
      if (choice) choices.add(choice);
      const element = schema.elements[choice ?? key];
      if (!element || key === 'resourceType') continue;
      if (element.isArray && !Array.isArray(v)) issues.push({ severity: 'error', code: 'structure', details: { text: 'Expected an array of values' }, expression: [`${path}.${key}`] });
      else if (!element.isArray && Array.isArray(v)) issues.push({ severity: 'error', code: 'structure', details: { text: 'Expected a single value, not an array' }, expression: [`${path}.${key}`] });
      const suffix = choice ? key.slice(choice.length - 3) : undefined;
      const type = suffix ? element.type.find((t) => t.code.toLowerCase() === suffix.toLowerCase()) : element.type[0];
      const code = type?.code;
      // A relative reference names a type the element allows (Observation.subject: not an Organization).
      const targets = code === 'Reference' ? (type?.targetProfile ?? []).map((u) => u.split('/').pop()!) : [];
      if (targets.length && !targets.includes('Resource'))
        for (const [i, item] of (Array.isArray(v) ? v : [v]).entries()) {
          const named = typeof (item as { reference?: unknown })?.reference === 'string' ? /^([A-Z][A-Za-z]+)\/[^/]+$/.exec((item as { reference: string }).reference)?.[1] : undefined;
          if (named && !targets.includes(named))
            return void issues.push({ severity: 'error', code: 'structure', details: { text: `${path}.${key} may refer to ${targets.join(', ')}, not ${named}` }, expression: [Array.isArray(v) ? `${path}.${key}[${i}]` : `${path}.${key}`] });
        }
      if (!code || /^[a-z]/.test(code) || code === 'Resource') continue;
      for (const [i, item] of (Array.isArray(v) ? v : [v]).entries())
        if (item && typeof item === 'object' && !Array.isArray(item)) walk(item as Record<string, unknown>, code, Array.isArray(v) ? `${path}.${key}[${i}]` : `${path}.${key}`, depth + 1);
    }
  };
  walk(resource as unknown as Record<string, unknown>, resource.resourceType, resource.resourceType, 0);
  return issues;
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
      if (value.length <= MAX_STRING || !path.endsWith('.data')) return value;
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
const MAX_ARRAY = 10_000;
const MAX_KEYS = 500;
/** FHIR strings SHALL be under 1 MB; a base64Binary attachment (`data`) may be larger (the body limit bounds it). */
const MAX_STRING = 1_048_576;

/**
 * FHIR JSON rules the structural validator of @medplum/core lets through: no empty strings, arrays or
 * objects, no arrays of arrays; and a depth bound, so a hostile body cannot exhaust the stack.
 */
function jsonShapeIssues(resource: Resource, largeData: () => void): OperationOutcomeIssue[] {
  const issues: OperationOutcomeIssue[] = [];
  const issue = (text: string, path: string) => issues.push({ severity: 'error', code: 'structure', details: { text }, expression: [path] });
  const visit = (value: unknown, path: string, depth: number, inArray: boolean): void => {
    if (issues.length) return;
    if (depth > MAX_DEPTH) return void issue(`Nested more than ${MAX_DEPTH} levels deep`, path);
    if (value === '') return void issue('An empty string (leave the element out instead)', path);
    if (typeof value === 'string' && value.length > MAX_STRING) return void (path.endsWith('.data') ? largeData() : issue(`A string longer than ${MAX_STRING} characters`, path));
    if (Array.isArray(value)) {
      if (inArray) return void issue('An array inside an array', path);
      if (value.length === 0) return void issue('An empty array (leave the element out instead)', path);
      if (value.length > MAX_ARRAY) return void issue(`An array of more than ${MAX_ARRAY} items`, path);
      value.forEach((v, i) => visit(v, `${path}[${i}]`, depth + 1, true));
    } else if (value !== null && typeof value === 'object') {
      const entries = Object.entries(value);
      if (entries.length === 0) return void issue('An empty object (leave the element out instead)', path);
      if (entries.length > MAX_KEYS) return void issue(`An object with more than ${MAX_KEYS} elements`, path);
      for (const [k, v] of entries) {
        if (FORBIDDEN_KEYS.has(k)) return void issue(`"${k}" is not a FHIR element`, `${path}.${k}`);
        visit(v, `${path}.${k}`, depth + 1, false);
      }
    }
  };
  visit(resource, resource.resourceType, 0, false);
  return issues;
}
