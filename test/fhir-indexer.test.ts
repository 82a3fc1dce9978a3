import { evalFhirPathTyped, getSearchParameterDetails, toTypedValue } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { allResourceTypes, loadFhirDefinitions } from '../src/core/fhir-definitions';
import { indexedParams } from '../src/fhir/indexer';

/**
 * The indexer skips a search parameter whose expression starts from top-level elements a resource does not
 * have (most of a type's parameters, for most resources). That is right only if such an expression can find
 * nothing without them: checked here for every indexed parameter of every R4 resource type, by evaluating it in
 * full on a resource that has none of its elements.
 */
describe('search index shortcut', () => {
  it('a parameter skipped for lack of its root elements finds nothing when evaluated in full', () => {
    loadFhirDefinitions();
    let skippable = 0;
    const wrong: string[] = [];
    for (const type of allResourceTypes()) {
      const bare = toTypedValue({ resourceType: type, id: 'x' } as Resource);
      for (const param of indexedParams(type).values()) {
        if (!param.roots) continue;
        skippable++;
        const full = evalFhirPathTyped(getSearchParameterDetails(type, param.definition).parsedExpression, [bare], { '%resource': bare });
        if (full.length) wrong.push(`${type}.${param.code}: ${param.definition.expression}`);
        expect(param.evaluate(bare)).toEqual([]);
      }
    }
    expect(wrong).toEqual([]);
    // Most parameters are plain paths; the rest are always evaluated.
    expect(skippable).toBeGreaterThan(1000);
  }, 60_000); // every search parameter of every type evaluated in full: seconds of CPU, more on a loaded machine
});

/** Every resource of the test corpora (other writers' FHIR, test/corpus and other-writers-clinical.json), and a few shapes they do not have. */
function corpus(): Resource[] {
  const dir = new URL('./corpus/', import.meta.url);
  const out: Resource[] = [];
  const visit = (url: URL) => {
    for (const entry of readdirSync(url, { withFileTypes: true })) {
      const file = new URL(entry.name + (entry.isDirectory() ? '/' : ''), url);
      if (entry.isDirectory()) visit(file);
      else if (entry.name.endsWith('.ndjson')) out.push(...readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as Resource));
      else if (entry.name.endsWith('.json')) {
        const json = JSON.parse(readFileSync(file, 'utf8'));
        out.push(...(json.resourceType === 'Bundle' ? (json.entry ?? []).map((e: { resource: Resource }) => e.resource) : [json]));
      }
    }
  };
  visit(dir);
  const clinical = JSON.parse(readFileSync(new URL('./other-writers-clinical.json', import.meta.url), 'utf8'));
  out.push(...(clinical.resourceType === 'Bundle' ? clinical.entry.map((e: { resource: Resource }) => e.resource) : clinical));
  return [
    ...out,
    // Empty values, which FHIRPath reads as nothing: an empty string, array and object.
    { resourceType: 'Patient', id: 'empty', gender: '', birthDate: '', name: [{ family: '', given: [] }], address: [{}], telecom: [] } as unknown as Resource,
    { resourceType: 'Observation', id: 'empty', status: 'final', code: {}, subject: {}, category: [] } as unknown as Resource,
    // A primitive known by its extension alone, repeated primitives with gaps, a choice element, a contained resource.
    { resourceType: 'Patient', id: 'p', _birthDate: { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: 'unknown' }] }, name: [{ given: ['Ann', null], _given: [null, { extension: [{ url: 'x', valueString: 'y' }] }], family: 'Lee' }] } as unknown as Resource,
    { resourceType: 'Observation', id: 'o', status: 'final', code: { text: 'x' }, effectivePeriod: { start: '2024-01-01' }, valueQuantity: { value: 1, unit: 'mg' }, subject: { reference: '#p' }, contained: [{ resourceType: 'Patient', id: 'p' }] } as unknown as Resource,
    // References in every form `where(resolve() is Patient)` meets: absolute, versioned, conditional, logical, urn:uuid, not a Patient.
    ...[
      { reference: 'http://elsewhere.example/fhir/Patient/9' },
      { reference: 'Patient/9/_history/2' },
      { reference: 'Patient?identifier=urn:x|1' },
      { reference: 'Group?identifier=urn:x|2' },
      { type: 'Group', identifier: { system: 'urn:x', value: '2' } },
      { type: 'Patient?x', identifier: { system: 'urn:x', value: '3' } },
      { type: 'Patient', identifier: { system: 'urn:x', value: '1' } },
      { identifier: { system: 'urn:x', value: '1' } },
      { reference: 'urn:uuid:0d2c1c55-6f2b-4c36-9d7a-2f6b0c7f9e11' },
      { reference: 'Group/7' },
      { display: 'no reference at all' },
    ].map((subject, i) => ({ resourceType: 'Observation', id: `ref-${i}`, status: 'final', code: { text: 'x' }, subject }) as unknown as Resource),
    // A Person's parameters are unions with RelatedPerson's (@medplum/core keeps every part naming `Person.`), which
    // remove duplicates: the same address twice, the same telecom twice.
    { resourceType: 'Person', id: 'person', gender: 'female', birthDate: '1970', address: [{ city: 'Oslo', use: 'home' }, { city: 'Oslo', use: 'home' }], telecom: [{ system: 'phone', value: '1' }, { system: 'phone', value: '1' }], name: [{ family: 'Lee' }, { family: 'Lee' }] } as unknown as Resource,
    // Choice values `as` each type, and components equal to each other and to the value (a union keeps one of each).
    ...[{ valueQuantity: { value: 5, unit: 'mg', system: 'http://unitsofmeasure.org', code: 'mg' } }, { valueCodeableConcept: { coding: [{ system: 'urn:c', code: 'a' }], text: 'A' } }, { valueString: 's' }, { valueDateTime: '2024-02-03' }, { valuePeriod: { start: '2024-01-01' } }, { valueBoolean: true }].map(
      (value, i) =>
        ({
          resourceType: 'Observation',
          id: `value-${i}`,
          status: 'final',
          code: { text: 'x' },
          ...value,
          component: [{ code: { text: 'c' }, ...value }, { code: { text: 'c' }, ...value }, { code: { text: 'd' }, valueQuantity: { value: 6, unit: 'mg' } }],
        }) as unknown as Resource,
    ),
    { resourceType: 'Encounter', id: 'e', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/1' }, participant: [{ individual: { reference: 'Practitioner/2' } }, { individual: { reference: 'RelatedPerson/3' } }] } as unknown as Resource,
  ];
}

describe('search index: member paths read without the FHIRPath evaluator', () => {
  it('find exactly what the evaluator finds, for every parameter of every corpus resource', () => {
    loadFhirDefinitions();
    const resources = corpus();
    expect(resources.length).toBeGreaterThan(150);
    const wrong: string[] = [];
    let evaluated = 0;
    for (const resource of resources) {
      const typed = toTypedValue(resource);
      for (const param of indexedParams(resource.resourceType).values()) {
        let want = evalFhirPathTyped(getSearchParameterDetails(resource.resourceType, param.definition).parsedExpression, [typed], { '%resource': typed });
        // Where the evaluator types an absolute URL by its scheme, the index reads it as FHIR does (below).
        if (resource.id === 'ref-0' && param.definition.expression?.includes('resolve() is Patient')) want = [{ type: 'Reference', value: (resource as any).subject }];
        // So for another writer's reference to another server (`https://other.example/fhir/Practitioner/9` among an
        // Encounter's participants): a Practitioner for FHIR, which the evaluator leaves out. Every reference the path
        // reaches, in order, that the evaluator keeps or that is such an absolute URL of the type asked for.
        const is = param.definition.expression?.match(/^([\w.]+)\.where\(resolve\(\) is (\w+)\)$/);
        if (is && resource.id !== 'ref-0') {
          const kept = new Set(want.map((v) => JSON.stringify(v)));
          const absolute = new RegExp(`^https?://[^?#]+/${is[2]}/[A-Za-z0-9\\-.]{1,64}$`);
          want = evalFhirPathTyped(is[1]!, [typed], { '%resource': typed }).filter((v) => kept.has(JSON.stringify(v)) || absolute.test((v.value as { reference?: string })?.reference ?? ''));
        }
        evaluated++;
        if (JSON.stringify(param.evaluate(typed)) !== JSON.stringify(want)) wrong.push(`${resource.resourceType}/${resource.id} ${param.code}: ${param.definition.expression}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(evaluated).toBeGreaterThan(4000);
  }, 60_000);

  it('type an absolute reference by the segment before its id, as FHIR does: another server’s and our own full URL are a Patient', () => {
    loadFhirDefinitions();
    const patient = indexedParams('Observation').get('patient')!;
    const of = (reference: string) => patient.evaluate(toTypedValue({ resourceType: 'Observation', status: 'final', code: {}, subject: { reference } } as Resource)).length;
    expect(of('http://elsewhere.example/fhir/Patient/9')).toBe(1);
    expect(of('https://pont.example/api/fhir/R4/Patient/123/_history/2')).toBe(1);
    expect(of('https://pont.example/api/fhir/R4/Group/7')).toBe(0);
    expect(of('https://pont.example/Patient')).toBe(0);
  });
});
