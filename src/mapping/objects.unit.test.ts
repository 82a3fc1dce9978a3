import type { Observation } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { mapProbes } from '../../test/map-probes';
import { defaultMappingsDir, loadMappings, MappingValueError } from './index';

/** Object fields (mappings/README.md "Object fields"): a Connect object per FHIR element, with its own fields and rules. */
describe('object fields', () => {
  // Each probe: one map of Observation, with the given connect and fields sections.
  const { probe, problemsOf: problemLines } = mapProbes('pont-objects-', 'map: probe\nresource: Observation\nuris:\n  loinc: http://loinc.org\n  ucum: http://unitsofmeasure.org\nfixed:\n  status: final\n');
  /** The problems loadMappings reports, as `line:column: problem`. */
  const problemsOf = (dir: string): string[] => problemLines(dir).map((m) => m.replace(/^.*probe\.map\.yaml:/, ''));

  const CODING = `      system:  { type: string, nullable: true }\n      code:    { type: string, nullable: true }\n      display: { type: string, nullable: true }\n`;
  const CODING_RULES = `      system: system\n      code: code\n      display: display\n`;
  const MAP = `connect:
  id: { type: string, required: true }
  name: { type: string, required: true }
  loinc_code: { type: string, nullable: true }
  codings:
    type: object
    list: true
    fields:
${CODING}  components:
    type: object
    list: true
    fields:
      name: { type: string, required: true }
      value: { type: number, nullable: true }
      unit: { type: string, nullable: true }
      interpretation:
        type: object
        list: true
        fields:
          code: { type: string, nullable: true }
          system: { type: string, nullable: true }
  range:
    type: object
    nullable: true
    fields:
      low: { type: number, nullable: true }
      text: { type: string, nullable: true }
fields:
  id: id
  name: code.text | code.coding.display
  loinc_code: code.coding.where(system=%loinc).code
  codings:
    fhir: code.coding
    fields:
${CODING_RULES}  components:
    fhir: component
    fields:
      name: code.text | code.coding.display
      value: valueQuantity.value
      unit: valueQuantity.unit
      interpretation:
        fhir: interpretation.coding
        fields:
          code: code
          system: system
  range:
    fhir: referenceRange.first()
    fields:
      low: low.value
      text: text
`;

  const bp: Observation = {
    resourceType: 'Observation',
    id: 'bp1',
    status: 'final',
    code: { text: 'Blood pressure', coding: [{ system: 'http://loinc.org', code: '85354-9', display: 'Blood pressure panel' }, { system: 'http://snomed.info/sct', code: '75367002' }] },
    component: [
      { code: { text: 'Systolic' }, valueQuantity: { value: 120, unit: 'mm[Hg]' }, interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'N' }] }] },
      { code: { text: 'Diastolic' }, valueQuantity: { value: 80, unit: 'mm[Hg]' } },
    ],
  };
  const bpRecord = {
    id: 'bp1',
    name: 'Blood pressure',
    loinc_code: '85354-9',
    codings: [
      { system: 'http://loinc.org', code: '85354-9', display: 'Blood pressure panel' },
      { system: 'http://snomed.info/sct', code: '75367002', display: null },
    ],
    components: [
      { name: 'Systolic', value: 120, unit: 'mm[Hg]', interpretation: [{ code: 'N', system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation' }] },
      { name: 'Diastolic', value: 80, unit: 'mm[Hg]', interpretation: [] },
    ],
    range: null,
  };

  it('reads one object per element (nested ones too), [] or null when FHIR has none, and writes them back as they were', () => {
    const map = loadMappings(probe(MAP)).get('probe');
    expect(map.fromFhir(bp)).toEqual(bpRecord);
    // Written: every coding once (loinc_code agrees with the LOINC coding the list wrote), every component in order.
    expect(map.toFhir(bpRecord)).toEqual(bp);
    expect(map.fromFhir({ resourceType: 'Observation', id: 'x', status: 'final', code: { text: 'X' } })).toEqual({ id: 'x', name: 'X', loinc_code: null, codings: [], components: [], range: null });
    const ranged = { ...bp, referenceRange: [{ low: { value: 90 }, text: 'normal' }, { text: 'second' }] };
    expect(map.fromFhir(ranged).range).toEqual({ low: 90, text: 'normal' });
    expect(map.toFhir({ ...bpRecord, range: { low: 90, text: 'normal' } })).toMatchObject({ referenceRange: [{ low: { value: 90 }, text: 'normal' }] });
  });

  it('the other fields write into what an object list wrote: they agree with it, or add to it, never duplicate', () => {
    const map = loadMappings(probe(MAP)).get('probe');
    const codings = [{ system: 'http://snomed.info/sct', code: '75367002', display: null }];
    // loinc_code without a LOINC coding in the list: added beside it.
    expect((map.toFhir({ ...bpRecord, codings, components: [] }) as Observation).code!.coding).toEqual([
      { system: 'http://snomed.info/sct', code: '75367002' },
      { system: 'http://loinc.org', code: '85354-9' },
    ]);
    // A loinc_code other than the list's LOINC coding: refused, as two fields writing one element must agree.
    const contradicting = { ...bpRecord, loinc_code: '55284-4' };
    expect(() => map.toFhir(contradicting)).toThrow(/loinc_code: "55284-4" contradicts "85354-9"/);
    // A name the list's display already gives is not written again as code.text (as fallbacks never are).
    const named = map.toFhir({ ...bpRecord, name: 'Blood pressure panel' }) as Observation;
    expect(named.code).toEqual({ coding: bp.code!.coding });
    expect(map.fromFhir(named)).toMatchObject({ name: 'Blood pressure panel', loinc_code: '85354-9' });
  });

  it('a field whose value reading already gives from what the objects wrote is not written again (a table too)', () => {
    const map = loadMappings(
      probe(`connect:
  id: { type: string, required: true }
  name: { type: string, required: true }
  code_system: { type: string, values: [LOINC, other], nullable: true }
  codings:
    type: object
    list: true
    fields:
${CODING}fields:
  id: id
  name: code.text
  code_system:
    fhir: code.coding[0].system
    values:
      LOINC: http://loinc.org
      other: https://example.org/local
    otherwise: other
  codings:
    fhir: code.coding
    fields:
${CODING_RULES}`),
    ).get('probe');
    const o = { resourceType: 'Observation', id: 'a', status: 'final', code: { text: 'x', coding: [{ system: 'http://hl7.org/fhir/sid/icd-10-cm', code: 'E11' }] } } as Observation;
    const record = map.fromFhir(o);
    expect(record).toMatchObject({ code_system: 'other', codings: [{ system: 'http://hl7.org/fhir/sid/icd-10-cm', code: 'E11', display: null }] });
    // `other` reads back from the ICD-10-CM coding the list wrote: not written over it.
    expect(map.toFhir(record)).toEqual(o);
    expect(() => map.toFhir({ ...record, code_system: 'LOINC' })).toThrow(/code_system: "http:\/\/loinc.org" contradicts "http:\/\/hl7.org\/fhir\/sid\/icd-10-cm"/);
    expect(map.toFhir({ ...record, codings: [] })).toMatchObject({ code: { coding: [{ system: 'https://example.org/local' }] } });
  });

  it('checks the values of each object, naming the field as object[i].field', () => {
    const map = loadMappings(probe(MAP)).get('probe');
    expect(() => map.toFhir({ ...bpRecord, components: [{ value: 1 }] })).toThrow(new MappingValueError('probe', 'components[0].name', 'is required'));
    expect(() => map.toFhir({ ...bpRecord, components: [bpRecord.components[0], { name: 'D', value: 'eighty' }] })).toThrow(/components\[1\]\.value: "eighty" is not a valid number/);
    expect(() => map.toFhir({ ...bpRecord, codings: ['LOINC'] })).toThrow(/codings: "LOINC" is not an object/);
    expect(() => map.toFhir({ ...bpRecord, codings: { code: 'x' } })).toThrow(/codings: .* is not a list/);
  });

  it('reads leniently: an object field the map cannot express is null and named as object.field', () => {
    const map = loadMappings(
      probe(`connect:
  id: { type: string, required: true }
  name: { type: string, required: true }
  components:
    type: object
    list: true
    fields:
      name: { type: string, nullable: true }
      flag: { type: string, values: [H, L], nullable: true }
fields:
  id: id
  name: code.text
  components:
    fhir: component
    write: false
    fields:
      name: code.text
      flag: interpretation[0].coding.code
`),
    ).get('probe');
    const o = { resourceType: 'Observation', id: 'a', status: 'final', code: { text: 'x' }, component: [{ code: { text: 'A' }, interpretation: [{ coding: [{ code: 'HH' }] }] }, { code: { text: 'B' }, interpretation: [{ coding: [{ code: 'H' }] }] }] } as Observation;
    expect(map.readFhir(o)).toEqual({ connect: { id: 'a', name: 'x', components: [{ name: 'A', flag: null }, { name: 'B', flag: 'H' }] }, unread: ['components.flag'] });
    expect(() => map.fromFhir(o)).toThrow(/components\.flag: FHIR "HH" is not one of the declared values/);
    // Read only: never written.
    expect(map.toFhir({ id: 'a', name: 'x', components: [{ name: 'A' }] })).toEqual({ resourceType: 'Observation', id: 'a', status: 'final', code: { text: 'x' } });
  });

  it('gives the shape: a list of objects, a nullable object, their fields nullable', () => {
    const shape = loadMappings(probe(MAP)).get('probe').shape();
    expect(shape.safeParse(bpRecord).success).toBe(true);
    expect(shape.safeParse({ ...bpRecord, codings: [{ system: 1 }] }).success).toBe(false);
    expect(shape.safeParse({ ...bpRecord, range: { low: 'x' } }).success).toBe(false);
    const json = JSON.stringify(shape.toJSONSchema());
    expect(json).toContain('"interpretation":{"anyOf":[{"type":"array","items":{"type":"object"');
  });

  it('the shipped maps write a blood pressure from elsewhere back as it was: components with their codes, values, units and interpretations', () => {
    const maps = loadMappings(defaultMappingsDir);
    const ucum = (value: number) => ({ value, unit: 'mmHg', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' });
    const pressure: Observation = {
      resourceType: 'Observation',
      id: '0b0a3c57-0d55-4b2e-9a39-6f3f2b9a1c0f',
      status: 'final',
      category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
      code: { coding: [{ system: 'http://loinc.org', code: '85354-9', display: 'Blood pressure panel with all children optional' }], text: 'Blood pressure' },
      subject: { reference: 'Patient/5d9f1a2e-8c4b-4f6e-9d3a-2b7c1e0f4a11' },
      effectiveDateTime: '2024-01-01T10:00:00Z',
      component: [
        {
          code: { coding: [{ system: 'http://loinc.org', code: '8480-6', display: 'Systolic blood pressure' }] },
          valueQuantity: ucum(150),
          interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'H' }] }],
        },
        { code: { coding: [{ system: 'http://loinc.org', code: '8462-4', display: 'Diastolic blood pressure' }] }, valueQuantity: ucum(95) },
      ],
    };
    for (const name of ['vital', 'observation', 'lab-result']) {
      const map = maps.get(name);
      const { connect, unread } = map.readFhir(pressure);
      expect(unread).toEqual([]);
      // The unit as written (mmHg), not the vital map's mm[Hg]: systolic reads back from the component, so is not written again.
      expect(map.toFhir(connect)).toMatchObject({ code: pressure.code, component: pressure.component });
    }
    expect(maps.get('vital').readFhir(pressure).connect).toMatchObject({ systolic: 150, diastolic: 95, component_list: [{ name: 'Systolic blood pressure', value_numeric: 150, unit: 'mmHg', unit_code: 'mm[Hg]', interpretations: [{ code: 'H' }] }, { name: 'Diastolic blood pressure' }] });
    // A systolic other than its component's is refused, not written beside it.
    const vital = maps.get('vital');
    expect(() => vital.toFhir({ ...vital.readFhir(pressure).connect, systolic: 140 })).toThrow(/systolic: 140 contradicts 150/);
  });

  it('reports the problems of an object field and of its fields at their line and column', () => {
    const HEADER = 'map: probe\nresource: Observation\nuris:\n  loinc: http://loinc.org\n  ucum: http://unitsofmeasure.org\nfixed:\n  status: final\n';
    /** The problems of MAP with `from` replaced by `to`, and the line and column where `to` starts. */
    const broken = (from: string, to: string) => {
      expect(MAP.split(from)).toHaveLength(2);
      const text = MAP.replace(from, to);
      const before = (HEADER + text).slice(0, HEADER.length + MAP.indexOf(from)).split('\n');
      return { problems: problemsOf(probe(text)), line: before.length, column: before[before.length - 1]!.length + 1 };
    };
    let at = broken('      value: valueQuantity.value\n', '      value: valueQuantity.valeu\n');
    expect(at.problems).toEqual([`${at.line}:${at.column + 27}: unknown FHIR element \`valeu\` in Quantity (did you mean \`value\`?)`]);
    at = broken('      name: code.text | code.coding.display\n      value:', '      name: code.txt | code.coding.display\n      value:');
    expect(at.problems[0]).toMatch(/unknown FHIR element `txt` in CodeableConcept \(did you mean `text`\?\)/);
    at = broken('    fhir: code.coding\n', '    fhir: code\n');
    expect(at.problems).toEqual([`${at.line}:${at.column + 10}: codings is a list of objects: its path ends in a repeating element without a position (e.g. \`code.coding\`), one object per element`]);
    at = broken('    fhir: code.coding\n', '    fhir: code.coding.code\n');
    expect(at.problems[0]).toMatch(/code is a FHIR code: an object maps an element with parts \(e\.g\. a Coding\)/);
    at = broken('          code: code\n', '          code: cod\n');
    expect(at.problems[0]).toMatch(/unknown FHIR element `cod` in Coding \(did you mean `code`\?\)/);
    at = broken('          system: system\n', '');
    expect(at.problems).toEqual([expect.stringMatching(/^\d+:\d+: Connect field `system` is not mapped: give it a rule under `fields`$/)]);
    at = broken('      display: display\n', '      display: display\n      dispaly: display\n');
    expect(at.problems).toEqual([`${at.line + 1}:7: \`dispaly\` is not a field declared in the fields of \`codings\` (did you mean \`display\`?)`]);
    at = broken('  codings:\n    fhir: code.coding\n    fields:\n', '  codings:\n    fhir: code.coding\n    values: { a: b }\n    fields:\n');
    expect(at.problems[0]).toMatch(/`values` does not apply to an object field: give it to the rules of its fields/);
    at = broken('  range:\n    type: object\n    nullable: true\n    fields:\n      low: { type: number, nullable: true }\n      text: { type: string, nullable: true }\n', '  range:\n    type: object\n    nullable: true\n');
    expect(at.problems[0]).toMatch(/`range` is an object: declare its fields under `fields:`/);
    at = broken('  loinc_code: { type: string, nullable: true }\n', '  loinc_code: { type: string, nullable: true, fields: { a: string } }\n');
    expect(at.problems[0]).toMatch(/`fields` declares the fields of an object: `loinc_code` is a string/);
    at = broken('  range:\n    fhir: referenceRange.first()\n    fields:\n      low: low.value\n      text: text\n', '  range: referenceRange.first()\n');
    expect(at.problems[0]).toMatch(/`range` is an object: give the rules of its fields under `fields:`/);
    // FHIR requires a component's code: a required field of the object writes it.
    at = broken('      name: { type: string, required: true }\n', '      name: { type: string, nullable: true }\n');
    expect(at.problems[0]).toMatch(/FHIR requires ObservationComponent\.code, which `name` writes: make it `required: true`/);
    // Two object lists over one element.
    at = broken('  components:\n    fhir: component\n', '  components:\n    fhir: code.coding\n');
    expect(at.problems.join('\n')).toMatch(/does not round-trip: code\.coding is already mapped on line \d+/);
  });
});
