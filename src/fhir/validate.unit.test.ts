import type { Resource } from '@medplum/fhirtypes';
import { beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../core/errors';
import { loadFhirDefinitions } from '../core/fhir-definitions';
import { validateFhirResource } from './validate';

beforeAll(() => loadFhirDefinitions());

/** The first issue's text and FHIRPath-like location, as the 400 OperationOutcome gives them. */
function firstIssue(resource: unknown): { text?: string; at?: string } {
  try {
    validateFhirResource(resource as Resource);
  } catch (err) {
    const issue = (err as ApiError).options.issues?.[0];
    return { text: issue?.details?.text, at: issue?.expression?.[0] };
  }
  return {};
}

const observation = (extra: Record<string, unknown>) => ({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, ...extra });

describe("an invalid resource's first issue names where it is", () => {
  it.each<[string, unknown, { text: RegExp; at: string }]>([
    ['an empty string in the second item of a list', { resourceType: 'Patient', name: [{ family: 'A' }, { given: ['B', ''] }] }, { text: /empty string/, at: 'Patient.name[1].given[1]' }],
    ['an empty object', observation({ component: [{ code: { text: 'c' }, valueQuantity: {} }] }), { text: /empty object/, at: 'Observation.component[0].valueQuantity' }],
    ['an array in an array', { resourceType: 'Patient', name: [{ given: [['x']] }] }, { text: /array inside an array/, at: 'Patient.name[0].given[0]' }],
    ['a key that is no FHIR element', { resourceType: 'Patient', name: [{ family: 'A' }, JSON.parse('{"constructor":{"x":1}}')] }, { text: /"constructor"/, at: 'Patient.name[1].constructor' }],
    ['a single value where a list goes, deep', observation({ component: [{ code: { text: 'c' } }, { code: { coding: { code: 'x' } } }] }), { text: /Expected an array/, at: 'Observation.component[1].code.coding' }],
    ['a list where one value goes', { resourceType: 'Patient', gender: ['female'] }, { text: /single value/, at: 'Patient.gender' }],
    ['two value[x] in a component', observation({ component: [{ code: { text: 'c' }, valueString: 'a', valueInteger: 1 }] }), { text: /Only one value\[x\]/, at: 'Observation.component[0].valueInteger' }],
    ['a reference to a type the element does not allow, in a list', observation({ basedOn: [{ reference: 'CarePlan/1' }, { reference: 'Patient/2' }] }), { text: /^Observation\.basedOn may refer to .*, not Patient$/, at: 'Observation.basedOn[1]' }],
    ['a reference to a type the element does not allow', observation({ subject: { reference: 'Organization/1' } }), { text: /^Observation\.subject may refer to .*, not Organization$/, at: 'Observation.subject' }],
    ['a #reference that names no contained resource', observation({ performer: [{ reference: 'Practitioner/1' }, { reference: '#nope' }] }), { text: /ref-1/, at: 'Observation.performer[1].reference' }],
    ['a reference that is free text, deep', observation({ component: [{ code: { text: 'c' }, valueString: 'x' }], derivedFrom: [{ reference: 'Observation/1' }, { reference: 'the weight above' }] }), { text: /^Observation\.derivedFrom\[1\]\.reference: "the weight above" is not a reference/, at: 'Observation.derivedFrom[1].reference' }],
    ['a period that ends before it starts (per-1)', { resourceType: 'Encounter', status: 'finished', class: { code: 'AMB' }, period: { start: '2026-02-01T10:00:00Z', end: '2026-02-01T09:00:00+00:00' } }, { text: /per-1/, at: 'Encounter.period' }],
    ['a period of dates that ends before it starts, deep (per-1)', observation({ component: [{ code: { text: 'c' }, valuePeriod: { start: '2026-02-02', end: '2026-02-01' } }] }), { text: /per-1/, at: 'Observation.component[0].valuePeriod' }],
    ['a script in a contained narrative', observation({ contained: [{ resourceType: 'Patient', id: 'p', text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml"><script>x</script></div>' } }] }), { text: /txt-1/, at: 'Observation.contained[0].text.div' }],
  ])('%s', (_name, resource, expected) => {
    const issue = firstIssue(resource);
    expect(issue.text).toMatch(expected.text);
    expect(issue.at).toBe(expected.at);
  });

  it('a period is checked as FHIR compares its ends: instants in time, dates of one precision; others cannot be compared', () => {
    const encounter = (period: Record<string, string>) => ({ resourceType: 'Encounter', status: 'finished', class: { code: 'AMB' }, period });
    expect(firstIssue(encounter({ start: '2026-02-01T10:00:00+02:00', end: '2026-02-01T09:00:00Z' }))).toEqual({});
    expect(firstIssue(encounter({ start: '2026-02-01', end: '2026-02-01' }))).toEqual({});
    expect(firstIssue(encounter({ start: '2026-02', end: '2026-01-31' }))).toEqual({});
    expect(firstIssue(encounter({ start: '2026-02-01T10:00:00Z' }))).toEqual({});
    expect(firstIssue(encounter({ start: '2027', end: '2026' })).text).toMatch(/per-1/);
  });

  it('a range whose low is above its high is refused (rng-2), as FHIR compares quantities: in one unit only', () => {
    const range = (low: Record<string, unknown>, high: Record<string, unknown>) => observation({ valueRange: { low, high } });
    expect(firstIssue(range({ value: 5, unit: 'mg' }, { value: 2, unit: 'mg' }))).toEqual({ text: expect.stringMatching(/rng-2/), at: 'Observation.valueRange' });
    expect(firstIssue(range({ value: 5, system: 'http://unitsofmeasure.org', code: 'mg' }, { value: 2, system: 'http://unitsofmeasure.org', code: 'mg' })).text).toMatch(/rng-2/);
    expect(firstIssue(observation({ component: [{ code: { text: 'c' }, valueRange: { low: { value: 3 }, high: { value: 1 } } }] })).at).toBe('Observation.component[0].valueRange');
    expect(firstIssue(range({ value: 2, unit: 'mg' }, { value: 5, unit: 'mg' }))).toEqual({});
    expect(firstIssue(range({ value: 2, unit: 'mg' }, { value: 2, unit: 'mg' }))).toEqual({});
    // 5 g against 2 mg: another unit, which FHIR's comparison does not convert here; and a reference range is no Range.
    expect(firstIssue(range({ value: 5, unit: 'g' }, { value: 2, unit: 'mg' }))).toEqual({});
    expect(firstIssue(observation({ referenceRange: [{ low: { value: 5 }, high: { value: 2 }, text: 'as written' }] }))).toEqual({});
  });

  it('an invariant on a choice element that is absent holds (ras-2: a prediction without a probability), and still refuses a value that breaks it', () => {
    const risk = (prediction: Record<string, unknown>) => ({ resourceType: 'RiskAssessment', status: 'final', subject: { reference: 'Patient/1' }, prediction: [prediction] });
    // The specification's RiskAssessment/prognosis: a qualitative risk, no probability (was refused: "ras-2 not met").
    expect(firstIssue(risk({ outcome: { text: 'permanent weakness of the left arm' }, qualitativeRisk: { text: 'moderate' } }))).toEqual({});
    expect(firstIssue(risk({ outcome: { text: 'x' }, probabilityDecimal: 0.02 }))).toEqual({});
    expect(firstIssue(risk({ outcome: { text: 'x' }, probabilityDecimal: 150 }))).toEqual({ text: 'Constraint ras-2 not met: Must be <= 100', at: 'RiskAssessment.prediction[0]' });
  });

  it("a Bundle's entry names its own contained resources (ref-1's root is the entry's resource), never another entry's or the Bundle's (found by an outside probe: a collection of another writer's FHIR was refused)", () => {
    const withLocum = observation({ contained: [{ resourceType: 'Practitioner', id: 'locum1' }], performer: [{ reference: '#locum1' }] });
    const bundle = (...entries: Array<Record<string, unknown>>) => ({ resourceType: 'Bundle', type: 'collection', entry: entries.map((resource, i) => ({ fullUrl: `urn:uuid:1b0e8a2c-0000-4a7b-8c9d-0e1f2a3b4c5${i}`, resource })) });
    expect(firstIssue(bundle(withLocum, observation({})))).toEqual({});
    // Another entry's contained Practitioner is not this entry's.
    expect(firstIssue(bundle(withLocum, observation({ performer: [{ reference: '#locum1' }] })))).toEqual({ text: expect.stringMatching(/ref-1/), at: 'Bundle.entry[1].resource.performer[0].reference' });
    // A contained resource's `#id` names a sibling: its root is the resource that contains it.
    expect(firstIssue(observation({ contained: [{ resourceType: 'Practitioner', id: 'p' }, { resourceType: 'PractitionerRole', id: 'r', practitioner: { reference: '#p' } }], performer: [{ reference: '#r' }] }))).toEqual({});
  });

  it('a valid resource has none, and its input is left as it was', () => {
    const resource = observation({ subject: { reference: 'Patient/1' }, component: [{ code: { text: 'c' }, valueQuantity: { value: 1 } }], performer: [{ reference: '#p' }], contained: [{ resourceType: 'Practitioner', id: 'p' }] });
    const before = JSON.stringify(resource);
    expect(firstIssue(resource)).toEqual({});
    expect(JSON.stringify(resource)).toBe(before);
  });
});
