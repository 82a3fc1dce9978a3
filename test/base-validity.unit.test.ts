import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OperationOutcomeError, validateResource } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { x as extract } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { passesBaseDefinitions } from '../src/fhir/base-validity';

/**
 * The fast check (src/fhir/base-validity.ts) may only say `true` where @medplum/core's validator finds no error. Held to
 * that on FHIR nobody here wrote (Synthea, the R4 specification's examples, two other writers) and on thousands of
 * mutations of it: wrong JSON types, empty and blank values, nulls, unknown keys, arrays for single values and back,
 * two choices of one element, bad formats, invariants broken. And it must say `true` for most of the valid corpus,
 * or it buys nothing.
 */

const repo = fileURLToPath(new URL('..', import.meta.url));
let dir: string;
const corpus: Resource[] = [];

function medplumErrors(resource: Resource): string[] {
  try {
    return validateResource(resource)
      .filter((i) => i.severity === 'error' || i.severity === 'fatal')
      .map((i) => `${i.expression?.[0]}: ${i.details?.text}`);
  } catch (err) {
    if (err instanceof OperationOutcomeError) return (err.outcome.issue ?? []).filter((i) => i.severity === 'error' || i.severity === 'fatal').map((i) => `${i.expression?.[0]}: ${i.details?.text}`);
    return [`threw: ${(err as Error).message}`];
  }
}

function jsonFiles(root: string): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.(json|ndjson)$/.test(e.name))
    .map((e) => join(e.parentPath, e.name));
}

/** Resources of a file; a transaction is its entries (Bundles of other kinds, from the specification's examples, stay). */
function resourcesOf(value: any, out: Resource[] = []): Resource[] {
  if (!value || typeof value !== 'object') return out;
  if (value.resourceType === 'Bundle' && Array.isArray(value.entry) && (value.type === 'transaction' || value.type === 'batch')) for (const e of value.entry) resourcesOf(e.resource, out);
  else if (typeof value.resourceType === 'string') out.push(value);
  return out;
}

beforeAll(() => {
  loadFhirDefinitions();
  dir = mkdtempSync(join(tmpdir(), 'pont-base-validity-'));
  for (const archive of ['synthea-r4-50-patients.tar.gz', 'synthea-bulk-10-patients-ndjson.tar.gz', 'r4-spec-examples.tar.gz', 'r4-spec-examples-clinical.tar.gz']) {
    mkdirSync(join(dir, archive));
    extract({ file: join(repo, 'samples', archive), cwd: join(dir, archive), sync: true });
  }
  for (const file of [...jsonFiles(dir), ...jsonFiles(join(repo, 'test/corpus'))]) {
    const text = readFileSync(file, 'utf8');
    const found = file.endsWith('.ndjson') ? text.split('\n').filter((l) => l.trim()).flatMap((l) => resourcesOf(JSON.parse(l))) : resourcesOf(JSON.parse(text));
    // Synthea's patients repeat themselves: one resource in six of the 50 patients (15,000), one in two of the 10.
    const every = file.includes('synthea-r4-50-patients') ? 6 : file.includes('synthea-bulk') ? 2 : 1;
    corpus.push(...found.filter((_, i) => i % every === 0));
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A small deterministic generator: the same mutations every run. */
function random(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Every (object, key) of the tree, the resource's own keys included. */
function slots(value: any, out: Array<{ parent: any; key: string | number }> = []) {
  if (Array.isArray(value)) value.forEach((v, i) => (out.push({ parent: value, key: i }), slots(v, out)));
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) out.push({ parent: value, key: k }), slots(v, out);
  return out;
}

const REPLACEMENTS: unknown[] = ['', ' ', '  x', 'x', 'x y', 'urn:oid:1.2', '2020-13-01', '2020-02-30T25:00:00Z', '\u0001', 0, -1, 1.5, 1e400 === Infinity ? 1e308 : 0, true, false, null, {}, [], [''], [{}], ['x'], [1], { x: 1 }, { id: 'x' }, { extension: [] }, { resourceType: 'Patient' }];

function mutate(resource: Resource, next: () => number): Resource {
  const copy = JSON.parse(JSON.stringify(resource));
  const count = 1 + Math.floor(next() * 3);
  for (let m = 0; m < count; m++) {
    const all = slots(copy).filter((s) => !(s.parent === copy && s.key === 'resourceType'));
    if (!all.length) break;
    const { parent, key } = all[Math.floor(next() * all.length)]!;
    const choice = Math.floor(next() * 10);
    const pick = <T,>(list: T[]) => list[Math.floor(next() * list.length)]!;
    if (choice === 0 && !Array.isArray(parent)) delete parent[key];
    else if (choice <= 3) parent[key] = structuredClone(pick(REPLACEMENTS));
    else if (choice === 4) parent[key] = Array.isArray(parent[key]) ? parent[key][0] : [parent[key]];
    else if (choice === 5 && !Array.isArray(parent)) {
      // a sibling: unknown, a `_primitive` extension, another choice of a choice element, a nested resourceType
      const name = pick([`${key}X`, `_${key}`, `${String(key).replace(/[A-Z].*$/, '')}String`, `${String(key).replace(/[A-Z].*$/, '')}Quantity`, 'resourceType', 'constructor', 'toString']);
      parent[name] = structuredClone(pick([...REPLACEMENTS.filter((r) => r !== null), 'x', { value: 1 }]));
    } else if (choice === 6 && typeof parent[key] === 'string') parent[key] = `${parent[key]} `;
    else if (choice === 7 && typeof parent[key] === 'string') parent[key] = parent[key].slice(0, Math.max(1, Math.floor(parent[key].length / 2)));
    else if (choice === 8 && typeof parent[key] === 'number') parent[key] = pick([-parent[key], parent[key] + 0.5, 0, String(parent[key])]);
    else if (choice === 9 && parent[key] && typeof parent[key] === 'object' && !Array.isArray(parent[key])) {
      const keys = Object.keys(parent[key]);
      if (keys.length) delete parent[key][pick(keys)];
    }
  }
  return copy;
}

describe('the fast check of the R4 base definitions', () => {
  it('says true for most of the valid corpus, and never for what the validator refuses', () => {
    expect(corpus.length).toBeGreaterThan(5_000);
    const wrong: string[] = [];
    let valid = 0;
    let fast = 0;
    const missed = new Map<string, number>();
    for (const resource of corpus) {
      const passes = passesBaseDefinitions(resource);
      const errors = medplumErrors(resource);
      if (!errors.length) {
        valid++;
        if (passes) fast++;
        else missed.set(resource.resourceType, (missed.get(resource.resourceType) ?? 0) + 1);
      } else if (passes) wrong.push(`${resource.resourceType}/${resource.id}: ${errors[0]}`);
    }
    expect(wrong).toEqual([]);
    // It buys something only where it says true: nearly all of real data.
    expect(fast / valid, JSON.stringify([...missed].sort((a, b) => b[1] - a[1]).slice(0, 10))).toBeGreaterThan(0.9);
  });

  it('never says true for a mutation the validator refuses (mutations of every type in the corpus)', () => {
    const next = random(20261126);
    const byType = new Map<string, Resource[]>();
    for (const r of corpus) {
      const list = byType.get(r.resourceType);
      if (list) list.push(r);
      else byType.set(r.resourceType, [r]);
    }
    // Up to 40 resources of each type, 8 mutants each.
    const sample = [...byType.values()].flatMap((list) => list.filter((_, i) => i % Math.max(1, Math.floor(list.length / 40)) === 0).slice(0, 40));
    const wrong: string[] = [];
    let refused = 0;
    let acceptedByBoth = 0;
    for (const resource of sample) {
      for (let i = 0; i < 8; i++) {
        const mutant = mutate(resource, next);
        const passes = passesBaseDefinitions(mutant);
        const errors = medplumErrors(mutant);
        if (errors.length) {
          refused++;
          if (passes) wrong.push(`${resource.resourceType}/${resource.id}: ${errors[0]} ${JSON.stringify(mutant).slice(0, 300)}`);
        } else if (passes) acceptedByBoth++;
      }
    }
    expect(wrong.slice(0, 5)).toEqual([]);
    // The mutations did reach the validator's refusals, and some harmless ones (an optional key removed) pass both.
    expect(refused).toBeGreaterThan(sample.length * 3);
    expect(acceptedByBoth).toBeGreaterThan(sample.length / 4);
  });

  it('says false, not true, for what it does not take: a primitive extension, two choices, an empty value, a null', () => {
    const observation = {
      resourceType: 'Observation',
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '718-7' }] },
      valueQuantity: { value: 13.2, unit: 'g/dL', system: 'http://unitsofmeasure.org', code: 'g/dL' },
    } as Resource;
    expect(passesBaseDefinitions(observation)).toBe(true);
    for (const notOne of [null, undefined, 1, 'Patient', [], {}, { resourceType: null }, { resourceType: 'Quantity', value: 1 }]) expect(passesBaseDefinitions(notOne)).toBe(false);
    expect(passesBaseDefinitions({ ...observation, contained: [{ resourceType: 'Patient', id: 'p' }], subject: { reference: '#p' } } as Resource)).toBe(true);
    for (const changed of [
      { ...observation, _status: { extension: [{ url: 'http://x', valueString: 'y' }] } },
      { ...observation, valueString: 'x' },
      { ...observation, category: [] },
      { ...observation, note: [{ text: '' }] },
      { ...observation, subject: null },
      { ...observation, status: 'final ' },
      { ...observation, code: { coding: [{ system: 'http://loinc.org', code: '718-7', resourceType: 'Patient' }] } },
      JSON.parse(JSON.stringify(observation).replace('{', '{"__proto__":{"x":1},')),
    ])
      expect(passesBaseDefinitions(changed as Resource), JSON.stringify(changed).slice(0, 200)).toBe(false);
    // The invariants it skips evaluating when an element is absent (TRUE_WITHOUT) are evaluated when it is present.
    const { valueQuantity: _value, ...noValue } = observation as Resource & { valueQuantity: unknown };
    for (const [invariant, broken] of [
      ['obs-6', { ...observation, dataAbsentReason: { text: 'x' } }],
      ['obs-7', { ...noValue, valueString: 'y', component: [{ code: (observation as any).code, valueString: 'x' }] }],
      ['dom-2', { ...observation, contained: [{ resourceType: 'Patient', id: 'p', contained: [{ resourceType: 'Patient', id: 'q' }] }] }],
      ['dom-4', { ...observation, contained: [{ resourceType: 'Patient', id: 'p', meta: { versionId: '2' } }] }],
      ['dom-5', { ...observation, contained: [{ resourceType: 'Patient', id: 'p', meta: { security: [{ code: 'R' }] } }] }],
      ['ext-1', { ...observation, extension: [{ url: 'http://x', valueString: 'y', extension: [{ url: 'http://z', valueString: 'w' }] }] }],
    ] as const) {
      expect(medplumErrors(broken as Resource).join(), invariant).toContain(invariant);
      expect(passesBaseDefinitions(broken as Resource), invariant).toBe(false);
    }
  });
});
