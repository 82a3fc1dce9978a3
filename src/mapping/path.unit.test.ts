import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mapProbes } from '../../test/map-probes';
import { checkMappings, defaultMappingsDir, loadMappings } from './index';
import { parseExpression, PathSyntaxError } from './path';

/** The path language of the maps (mappings/README.md "Paths"): fallbacks, functions, lets, and their messages. No database. */
describe('the path language', () => {
  // FHIR requires an Observation's status and code: fixed here, so that each probe maps only what it tests.
  const { scratchDir, probe, problemsOf } = mapProbes(
    'pont-paths-',
    'map: probe\nresource: Observation\nuris:\n  loinc: http://loinc.org\nfixed:\n  status: final\n  code.coding.where(system=%loinc).code: 2345-7\n',
  );

  const obs = { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2345-7', display: 'Glucose' }] } } as const;

  it('a fallback reads the first alternative that gives a value; writing uses the first', () => {
    const map = loadMappings(
      probe(`connect:\n  id: { type: string, required: true }\n  name: { type: string, nullable: true }\n  value: { type: number, nullable: true }
fields:\n  id: id\n  name: code.text | code.coding.first().display\n  value: valueQuantity.value | valueInteger\n`),
    ).get('probe');
    expect(map.fromFhir({ ...obs, id: 'a', valueInteger: 7 } as any)).toEqual({ id: 'a', name: 'Glucose', value: 7 });
    expect(map.fromFhir({ ...obs, id: 'a', code: { ...obs.code, text: 'Blood glucose' }, valueQuantity: { value: 5.5 } } as any)).toEqual({ id: 'a', name: 'Blood glucose', value: 5.5 });
    expect(map.toFhir({ id: 'a', name: 'Glucose', value: 7 })).toEqual({ resourceType: 'Observation', id: 'a', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2345-7' }], text: 'Glucose' }, valueQuantity: { value: 7 } });
  });

  it("exists() of an element narrowed by where() is written: true writes it, its conditions met (%resource.element as written so far), false nothing; another exists() stays read only", () => {
    const map = loadMappings(
      probe(`connect:\n  id: { type: string, required: true }\n  patient_id: { type: id, required: true }\n  by_patient: { type: boolean, nullable: true }
fields:\n  id: id\n  patient_id:\n    fhir: subject\n    reference: Patient\n  by_patient: performer.where(reference = %resource.subject.reference).exists()\n`),
    ).get('probe');
    const base = { resourceType: 'Observation', id: 'a', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2345-7' }] }, subject: { reference: 'Patient/p1' } };
    expect(map.toFhir({ id: 'a', patient_id: 'p1', by_patient: true })).toEqual({ ...base, performer: [{ reference: 'Patient/p1' }] });
    expect(map.toFhir({ id: 'a', patient_id: 'p1', by_patient: false })).toEqual(base);
    expect(map.fromFhir({ ...base, performer: [{ reference: 'Practitioner/x' }, { reference: 'Patient/p1' }] } as any)).toEqual({ id: 'a', patient_id: 'p1', by_patient: true });
    // Another patient as the performer is not this one.
    expect(map.fromFhir({ ...base, performer: [{ reference: 'Patient/p2' }] } as any)).toEqual({ id: 'a', patient_id: 'p1', by_patient: null });
    // Without where(), or with a condition writing cannot meet, exists() is read only, as before.
    for (const path of ['performer.exists()', "performer.where(reference = %resource.subject.reference and display.empty()).exists()"]) {
      const dir = probe(`connect:\n  id: { type: string, required: true }\n  by_patient: { type: boolean, nullable: true }\nfields:\n  id: id\n  by_patient: ${path}\n`);
      expect(problemsOf(dir), path).toEqual([expect.stringMatching(/writing needs one alternative/)]);
    }
  });

  it('a value read through resolve() of a reference written elsewhere is not written again, knowing what it names; a reference\'s own display is', () => {
    const map = loadMappings(
      probe(`connect:\n  id: { type: string, required: true }\n  reason_references: { type: string, list: true }\n  reason: { type: string, nullable: true }\n  focus: { type: string, nullable: true }\n  focus_reference: { type: string, nullable: true }
fields:\n  id: id\n  focus_reference: focus[0].reference\n  focus: focus[0].display | focus[0].resolve().toText()\n  reason_references: basedOn.reference\n  reason: note[0].text | basedOn[0].resolve().toText()\n`),
    ).get('probe');
    const resolved = new Map<string, unknown>([['ServiceRequest/sr', { resourceType: 'ServiceRequest', id: 'sr', code: { text: 'Check-up' } }], ['Specimen/sp', { resourceType: 'Specimen', id: 'sp', type: { text: 'Blood' } }]]);
    const record = { id: 'a', reason_references: ['ServiceRequest/sr'], reason: 'Check-up', focus_reference: 'Specimen/sp', focus: 'Blood' };
    const written = map.toFhir(record, { resolved });
    expect((written as any).note).toBeUndefined();
    expect((written as any).basedOn).toEqual([{ reference: 'ServiceRequest/sr' }]);
    expect((written as any).focus).toEqual([{ reference: 'Specimen/sp', display: 'Blood' }]);
    // Not knowing what it names (nothing resolved), or a reason of its own: written.
    expect((map.toFhir(record) as any).note).toEqual([{ text: 'Check-up' }]);
    expect((map.toFhir({ ...record, reason: 'Fasting' }, { resolved }) as any).note).toEqual([{ text: 'Fasting' }]);
  });

  it('first(), join() and toDate()', () => {
    const map = loadMappings(
      probe(`connect:\n  id: { type: string, required: true }\n  codes: { type: string, nullable: true }\n  day: { type: date, nullable: true }\n  second: { type: string, nullable: true }
fields:\n  id: id\n  codes: code.coding.code.join(', ')\n  day: effectiveDateTime.toDate()\n  second: category.coding.where(system=%loinc).first().code\n`),
    ).get('probe');
    const resource = { ...obs, id: 'a', code: { coding: [{ code: 'x' }, { code: 'y' }] }, effectiveDateTime: '2024-03-12T09:30:00+02:00', category: [{ coding: [{ system: 'http://loinc.org', code: 'p' }, { system: 'http://loinc.org', code: 'q' }] }] };
    expect(map.fromFhir(resource as any)).toEqual({ id: 'a', codes: 'x, y', day: '2024-03-12', second: 'p' });
  });

  it('firstWord() and lastWord(): the first word of a text, and its last of two or more; read only, into a string', () => {
    const map = loadMappings(
      probe(`connect:\n  id: { type: string, required: true }\n  first: { type: string, nullable: true }\n  last: { type: string, nullable: true }
fields:\n  id: id\n  first: { fhir: code.text.firstWord(), write: false }\n  last: code.text | code.text.lastWord()\n`),
    ).get('probe');
    const named = (text: string) => map.fromFhir({ ...obs, id: 'a', code: { ...obs.code, text } } as any);
    expect(named('  Sunita Devi\tSharma ').first).toBe('Sunita');
    expect(named('Madonna')).toEqual({ id: 'a', first: 'Madonna', last: 'Madonna' });
    expect(map.fromFhir({ ...obs, id: 'a' } as any)).toEqual({ id: 'a', first: null, last: null });
    // Writing uses the writable alternative; a word is never written.
    expect((map.toFhir({ id: 'a', first: 'Sunita', last: 'Sharma' }) as any).code).toEqual({ coding: [{ system: 'http://loinc.org', code: '2345-7' }], text: 'Sharma' });
    const words = loadMappings(
      probe(`connect:\n  id: { type: string, required: true }\n  first: { type: string, nullable: true }\n  last: { type: string, nullable: true }
fields:\n  id: id\n  first: { fhir: 'note[0].text.firstWord()', write: false }\n  last: { fhir: 'note[0].text.lastWord()', write: false }\n`),
    ).get('probe');
    const noted = (text: string) => words.fromFhir({ ...obs, id: 'a', note: [{ text }] } as any);
    expect(noted('  Sunita Devi\tSharma ')).toEqual({ id: 'a', first: 'Sunita', last: 'Sharma' });
    expect(noted('Madonna')).toEqual({ id: 'a', first: 'Madonna', last: null });
    expect(noted('   ')).toEqual({ id: 'a', first: null, last: null });
    const dir = probe(`connect:\n  id: { type: string, required: true }\n  n: { type: number, nullable: true }\nfields:\n  id: id\n  n: { fhir: code.text.lastWord(), write: false }\n`);
    expect(problemsOf(dir)).toEqual([expect.stringContaining('lastWord() reads a word of a text into a Connect string: n is a number, text a FHIR string')]);
  });

  it('countryCode(): a country as its ISO 3166 code, from the code or its name; else the next alternative; read only, into a string', () => {
    const map = loadMappings(
      probe(`connect:\n  id: { type: string, required: true }\n  country: { type: string, nullable: true }
fields:\n  id: id\n  country: code.text.countryCode() | code.text\n`),
    ).get('probe');
    const of = (text: string) => map.fromFhir({ ...obs, id: 'a', code: { ...obs.code, text } } as any).country;
    expect(['Kenya', 'Cameroun', 'Cameroon', 'Sénégal', 'senegal', 'ke', 'CM', "Cote d'Ivoire", 'Ouganda'].map(of)).toEqual(['KE', 'CM', 'CM', 'SN', 'SN', 'KE', 'CM', 'CI', 'UG']);
    // What it does not know is read as written, by the next alternative; writing writes the code as given.
    expect(of('Ruritania')).toBe('Ruritania');
    expect((map.toFhir({ id: 'a', country: 'KE' }) as any).code.text).toBe('KE');
    const dir = probe(`connect:\n  id: { type: string, required: true }\n  n: { type: number, nullable: true }\nfields:\n  id: id\n  n: { fhir: code.text.countryCode(), write: false }\n`);
    expect(problemsOf(dir)).toEqual([expect.stringContaining('countryCode() reads a country code of a text into a Connect string: n is a number')]);
  });

  it('a let chooses a part once; %resource compares with another element: the applicable reference range', () => {
    const map = loadMappings(
      probe(`let:
  range: referenceRange.where(low.unit = %resource.valueQuantity.unit) | referenceRange.where(high.unit = %resource.valueQuantity.unit) | referenceRange.first()
connect:\n  id: { type: string, required: true }\n  low: { type: number, nullable: true }\n  high: { type: number, nullable: true }\n  unit: { type: string, nullable: true }
fields:\n  id: id\n  low: '%range.low.value'\n  high: '%range.high.value'\n  unit: '%range.low.unit | %range.high.unit'\n`),
    ).get('probe');
    const ranges = [
      { low: { value: 120, unit: 'g/L' }, high: { value: 160, unit: 'g/L' } },
      { high: { value: 17, unit: 'g/dL' } },
    ];
    expect(map.fromFhir({ ...obs, id: 'a', valueQuantity: { value: 13.5, unit: 'g/dL' }, referenceRange: ranges } as any)).toEqual({ id: 'a', low: null, high: 17, unit: 'g/dL' });
    expect(map.fromFhir({ ...obs, id: 'a', valueQuantity: { value: 140, unit: 'g/L' }, referenceRange: ranges } as any)).toEqual({ id: 'a', low: 120, high: 160, unit: 'g/L' });
    expect(map.toFhir({ id: "a", low: 1, high: 2, unit: 'mg' })).toEqual({ resourceType: 'Observation', id: 'a', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2345-7' }] }, referenceRange: [{ low: { value: 1, unit: 'mg' }, high: { value: 2 } }] });
  });

  it('%patient: a condition on the patient the resource is about, when the reader has it (the range for her sex)', () => {
    const dir = probe(`let:
  range: referenceRange.where(appliesTo.text = %patient.gender) | referenceRange.where(appliesTo.coding.code = '248152002' and %patient.gender = 'female') | referenceRange.first()
connect:\n  id: { type: string, required: true }\n  low: { type: number, nullable: true }
fields:\n  id: id\n  low: '%range.low.value'\n`);
    const map = loadMappings(dir).get('probe');
    expect(map.readsPatient).toBe(true);
    const ranges = [{ low: { value: 13 }, appliesTo: [{ text: 'male' }] }, { low: { value: 12 }, appliesTo: [{ coding: [{ code: '248152002' }] }] }];
    const o = { ...obs, id: 'a', referenceRange: ranges } as any;
    expect(map.readFhir(o, { patient: { resourceType: 'Patient', gender: 'female' } }).connect.low).toBe(12);
    expect(map.readFhir(o, { patient: { resourceType: 'Patient', gender: 'male' } }).connect.low).toBe(13);
    // Without the patient (a webhook's reading) the conditions on it fail: the next alternative.
    expect(map.readFhir(o).connect.low).toBe(13);
    expect(map.toFhir({ id: 'a', low: 1 })).toMatchObject({ referenceRange: [{ low: { value: 1 } }] });
    expect(loadMappings(probe('connect:\n  id: { type: string, required: true }\nfields:\n  id: id\n')).get('probe').readsPatient).toBe(false);
    writeFileSync(join(dir, 'probe.map.yaml'), readFileSync(join(dir, 'probe.map.yaml'), 'utf8').replace("%patient.gender = 'female'", "%patient.gendr = 'female'"));
    expect(problemsOf(dir).join('\n')).toMatch(/probe\.map\.yaml:\d+:\d+: .*gendr.*did you mean .*gender/);
  });

  it('toText() reads any element as text, and join() joins elements as text; neither is written', () => {
    const map = loadMappings(
      probe(`connect:\n  id: { type: string, required: true }\n  value: { type: string, nullable: true }\n  parts: { type: string, nullable: true }
fields:\n  id: id\n  value: valueString | valueRange.toText() | valueRatio.toText() | valueQuantity.toText() | valuePeriod.toText() | valueBoolean.toText() | valueCodeableConcept.toText()\n  parts: note[0].text | component.join('; ')\n`),
    ).get('probe');
    const value = (v: object) => map.fromFhir({ ...obs, id: 'a', ...v } as any).value;
    expect(value({ valueRange: { low: { value: 1, unit: 'mg/L' }, high: { value: 3, unit: 'mg/L' } } })).toBe('1–3 mg/L');
    expect(value({ valueRange: { low: { value: 1, unit: 'g/L' }, high: { value: 3, unit: 'mg/dL' } } })).toBe('1 g/L–3 mg/dL');
    expect(value({ valueRange: { high: { value: 3, code: 'mg/L' } } })).toBe('<=3 mg/L');
    expect(value({ valueRange: { low: { unit: 'mg/L' } } })).toBeNull();
    expect(value({ valueRatio: { numerator: { value: 1 }, denominator: { value: 128 } } })).toBe('1:128');
    expect(value({ valueRatio: { numerator: { value: 5, unit: 'mg' }, denominator: { value: 1, unit: 'mL' } } })).toBe('5 mg / 1 mL');
    expect(value({ valueQuantity: { value: 5, comparator: '<', unit: 'mg/L' } })).toBe('<5 mg/L');
    expect(value({ valuePeriod: { start: '2024-01-01' } })).toBe('2024-01-01 – …');
    expect(value({ valueBoolean: false })).toBe('false');
    // A concept without text: the first coding with words, else the first code.
    expect(value({ valueCodeableConcept: { coding: [{ code: 'x' }, { code: 'y', display: 'Why' }] } })).toBe('Why');
    expect(value({ valueCodeableConcept: { coding: [{ code: 'x' }, { code: 'y' }] } })).toBe('x');
    // A coding without a display reads as the display its code system gives (HL7 v2/v3 and FHIR code systems).
    expect(value({ valueCodeableConcept: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0074', code: 'HM' }] } })).toBe('Hematology');
    expect(value({ valueCodeableConcept: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'H' }] } })).toBe('High');
    const components = [
      { code: { text: 'Systolic' }, valueQuantity: { value: 120, unit: 'mm[Hg]' } },
      { code: { coding: [{ display: 'Diastolic' }] }, dataAbsentReason: { text: 'Not measured' } },
    ];
    expect(map.fromFhir({ ...obs, id: 'a', component: components } as any).parts).toBe('Systolic: 120 mm[Hg]; Diastolic: Not measured');
    // Written: the writable alternatives only.
    expect(map.toFhir({ id: 'a', value: '1–3 mg/L', parts: 'p' })).toMatchObject({ valueString: '1–3 mg/L', note: [{ text: 'p' }] });
    expect(problemsOf(probe(`connect:\n  id: { type: string, required: true }\n  n: { type: number, nullable: true }\nfields:\n  id: id\n  n: valueQuantity.value | valueRange.toText()\n`))).toEqual([
      expect.stringMatching(/probe\.map\.yaml:\d+:\d+: toText\(\) reads elements as text: n is a number/),
    ]);
  });

  it('the lab map reads one reference range whole: its limits and its words never come from two ranges', () => {
    const lab = loadMappings(defaultMappingsDir).get('lab-result');
    const o = {
      ...obs, id: 'a', valueQuantity: { value: 4, unit: 'mmol/L' },
      referenceRange: [
        { low: { value: 3.1, unit: 'mmol/L' }, high: { value: 6.2, unit: 'mmol/L' }, appliesTo: [{ coding: [{ code: '248153007', display: 'Male' }] }] },
        { low: { value: 2.6, unit: 'mmol/L' }, high: { value: 5.9, unit: 'mmol/L' }, text: 'female, adult' },
      ],
    };
    // Not knowing the patient's sex: the range in words that the value falls in (its words say whose it is).
    expect(lab.readFhir(o as any).connect).toMatchObject({ reference_low: 2.6, reference_high: 5.9, reference_range_text: 'female, adult' });
    expect(lab.readFhir(o as any, { patient: { resourceType: 'Patient', gender: 'unknown' } }).connect).toMatchObject({ reference_low: 2.6, reference_range_text: 'female, adult' });
    expect(lab.readFhir({ ...o, valueQuantity: { value: 6, unit: 'mmol/L' } } as any).connect).toMatchObject({ reference_low: 3.1, reference_high: 6.2, reference_range_text: 'Male' });
    expect(lab.readFhir(o as any, { patient: { resourceType: 'Patient', gender: 'male' } }).connect).toMatchObject({ reference_low: 3.1, reference_range_text: 'Male' });
  });

  it('exists() reads whether an element is there, never false and never written', () => {
    const map = loadMappings(
      probe(`connect:\n  id: { type: string, required: true }\n  flagged: { type: boolean, nullable: true }\nfields:\n  id: id\n  flagged: valueBoolean | interpretation.exists()\n`),
    ).get('probe');
    expect(map.fromFhir({ ...obs, id: 'a', interpretation: [{ text: 'high' }] } as any).flagged).toBe(true);
    expect(map.fromFhir({ ...obs, id: 'a' } as any).flagged).toBeNull();
    expect(map.fromFhir({ ...obs, id: 'a', valueBoolean: false, interpretation: [{ text: 'x' }] } as any).flagged).toBe(false);
    expect(map.toFhir({ id: 'a', flagged: true })).toMatchObject({ valueBoolean: true });
    expect(problemsOf(probe(`connect:\n  id: { type: string, required: true }\n  t: { type: string, nullable: true }\nfields:\n  id: id\n  t: valueString | note.exists()\n`))).toEqual([
      expect.stringMatching(/exists\(\) reads whether an element is there: t is a string, not a boolean$/),
    ]);
  });

  it('a narrative written elsewhere reads as lines, its table cells apart; ours comes back exactly', () => {
    const note = loadMappings(defaultMappingsDir).get('clinical-note');
    const div = `<div xmlns="http://www.w3.org/1999/xhtml">\n\t<table>\n<tr><th>Allergen</th><th>Reaction</th></tr>\n\t<tr><td>Doxycycline</td><td>Hives</td></tr><tr><td>Asthma</td><td/><td>Mild</td><td></td></tr></table><p>Seen   by <b>Dr A</b> &amp; team</p></div>`;
    const composition = { resourceType: 'Composition', id: 'c', status: 'final', type: { text: 'Note' }, date: '2024-03-12', author: [{ display: 'A' }], title: 'T', section: [{ title: 'Allergies', text: { status: 'generated', div } }] };
    expect(note.readFhir(composition as any).connect.sections).toBe('Allergies: Allergen | Reaction\nDoxycycline | Hives\nAsthma |  | Mild\nSeen by Dr A & team');
    const U = '0b0a3c57-0d55-4b2e-9a39-6f3f2b9a1c03';
    const ours = note.toFhir({ id: U, visit_id: U, provider_id: U, status: 'draft', history_of_present_illness: '  two  spaces\tand <b>not markup</b>\n', created_at: '2024-03-12' });
    expect(note.fromFhir(ours).history_of_present_illness).toBe('  two  spaces\tand <b>not markup</b>\n');
  });

  it('write: false reads a field and never writes it; a required field cannot be read only', () => {
    const map = loadMappings(
      probe(`connect:\n  id: { type: string, required: true }\n  parts: { type: string, nullable: true }\nfields:\n  id: id\n  parts:\n    fhir: component.join('; ')\n    write: false\n`),
    ).get('probe');
    expect(map.fromFhir({ ...obs, id: 'a', component: [{ code: { text: 'A' }, valueString: 'x' }] } as any).parts).toBe('A: x');
    expect(map.toFhir({ id: 'a', parts: 'A: x' })).not.toHaveProperty('component');
    expect(problemsOf(probe(`connect:\n  id: { type: string, required: true }\n  parts: { type: string, required: true }\nfields:\n  id: id\n  parts:\n    fhir: component.join('; ')\n    write: false\n`))).toEqual([
      expect.stringMatching(/probe\.map\.yaml:15:12: `parts` is required, so it is written: it cannot be read only$/),
    ]);
  });

  it('resolve() reads a contained resource, or one the reader resolved; never written', () => {
    const dir = scratchDir();
    writeFileSync(
      join(dir, 'probe.map.yaml'),
      `map: probe\nresource: MedicationRequest\nfixed:\n  status: active\n  intent: order\n  subject.reference: Patient/p\nconnect:\n  id: { type: string, required: true }\n  medication: { type: string, required: true }\nfields:\n  id: id\n  medication: medicationCodeableConcept.text | medicationReference.resolve().code.text\n`,
    );
    const map = loadMappings(dir).get('probe');
    const request = { resourceType: 'MedicationRequest', id: 'a', status: 'active', intent: 'order', contained: [{ resourceType: 'Medication', id: 'm1', code: { text: 'Aspirin' } }], medicationReference: { reference: '#m1' } };
    expect(map.fromFhir(request as any)).toEqual({ id: 'a', medication: 'Aspirin' });
    const stored = { ...request, contained: undefined, medicationReference: { reference: 'Medication/m1' } };
    expect(map.fromFhir(stored as any)).toEqual({ id: 'a' });
    expect(map.referencesOf(stored as any)).toEqual(['Medication/m1']);
    expect(map.fromFhir(stored as any, { resolved: new Map([['Medication/m1', { resourceType: 'Medication', id: 'm1', code: { text: 'Aspirin' } }]]) })).toEqual({ id: 'a', medication: 'Aspirin' });
    expect(map.toFhir({ id: 'a', medication: 'Aspirin' })).toEqual({ resourceType: 'MedicationRequest', id: 'a', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Aspirin' }, subject: { reference: 'Patient/p' } });
    // A reference to several types: the rest of the path must be an element of one of them.
    writeFileSync(join(dir, 'probe.map.yaml'), readFileSync(join(dir, 'probe.map.yaml'), 'utf8').replace('medicationReference.resolve().code', 'subject.resolve().vaccineCode'));
    expect(problemsOf(dir)[0]).toMatch(/resolve\(\) of subject leads to Patient, Group: none has vaccineCode\.text$/);
  });

  it('where(… .empty()): the name in use is one whose period has not ended (issue 38: a maiden name was read as the name)', () => {
    const maps = loadMappings();
    const patient = {
      resourceType: 'Patient',
      name: [{ use: 'official', family: 'Diallo', given: ['Awa'], period: { end: '2015-12-31' } }, { use: 'usual', family: 'Diallo-Fouda', given: ['Awa'] }],
    } as any;
    expect(maps.get('patient-summary').readFhir(patient).connect).toMatchObject({ first_name: 'Awa', last_name: 'Diallo-Fouda' });
    expect(maps.get('patient-summary').readFhir({ ...patient, name: [patient.name[0]] }).connect).toMatchObject({ last_name: 'Diallo' });
    // Writing adds an official name in use beside the ended one, never into it.
    const written = maps.get('patient-profile').toFhir({ health_id: 'CM100000000006', first_name: 'Awa', last_name: 'Fouda' }) as any;
    expect(written.name).toEqual([{ use: 'official', family: 'Fouda', given: ['Awa'] }]);
    expect(parseExpression("name.where(period.end.empty())")[0]!.steps[0]!.where[0]).toMatchObject({ empty: true, path: [{ name: 'period' }, { name: 'end' }] });
    expect(() => parseExpression("name.where(period.end.empty)")).toThrow(PathSyntaxError);
  });

  it('an unknown function is named, with a suggestion, at its file, line and column', () => {
    const dir = probe(`connect:\n  id: { type: string, required: true }\n  name: { type: string, nullable: true }\nfields:\n  id: id\n  name: code.coding.frist().display\n`);
    expect(problemsOf(dir)).toEqual([`${join(dir, 'probe.map.yaml')}:13:21: malformed path \`code.coding.frist().display\`: unknown function 'frist', did you mean 'first'; functions: where(), first(), resolve(), join(), toDate(), toText(), exists(), memberOf(), firstWord(), lastWord(), countryCode()`]);
    expect(() => parseExpression('code.text.joint(",")')).toThrow(/unknown function 'joint', did you mean 'join'/);
    expect(() => parseExpression('code.coding.count()')).toThrow(PathSyntaxError);
    // FHIRPath's escapes in quoted text; an unknown one is named.
    expect(parseExpression("section.join('\\n\\n')")[0]!.finish).toMatchObject({ kind: 'join', separator: '\n\n' });
    expect(parseExpression("name.where(text='O\\'Brien \\\\ co')")[0]!.steps[0]!.where[0]!.value).toBe("O'Brien \\ co");
    expect(() => parseExpression("a.join('\\q')")).toThrow(/unknown escape \\q/);
  });

  it('refuses what cannot work: joined text into a number, nothing after join(), a let that does not exist, no writable alternative', () => {
    const dir = probe(`let:\n  range: referenceRange.first()\nconnect:\n  id: { type: string, required: true }\n  a: { type: number, nullable: true }\n  b: { type: string, nullable: true }\n  c: { type: string, nullable: true }\n  d: { type: number, nullable: true }
fields:\n  id: id\n  a: valueQuantity.value | component.join(',')\n  b: code.text.join(',').x\n  c: '%rnage.text'\n  d: referenceRange.where(low.unit = %resource.valueQuantity.unit).low.value\n`);
    const problems = problemsOf(dir).map((p) => p.replace(join(dir, 'probe.map.yaml'), 'F'));
    expect(problems).toEqual([
      'F:18:38: join() reads elements as text: a is a number',
      'F:19:25: malformed path `code.text.join(\',\').x`: join() ends a path: nothing may follow it',
      'F:20:8: unknown let %rnage (did you mean `range`?): declare it under `let` (before its use)',
      'F:21:6: writing needs one alternative of `referenceRange.where(low.unit = %resource.valueQuantity.unit).low.value` without %resource or resolve(): add one (e.g. `| referenceRange.first()`)',
    ]);
  });

  it('a map that could emit invalid FHIR: an element FHIR requires, written by an optional field or by nothing', () => {
    const dir = scratchDir();
    writeFileSync(join(dir, 'probe.map.yaml'), `map: probe\nresource: Observation\nconnect:\n  id: { type: string, required: true }\n  status: { type: string, nullable: true }\nfields:\n  id: id\n  status: status\n`);
    expect(problemsOf(dir).map((p) => p.replace(join(dir, 'probe.map.yaml'), 'F'))).toEqual([
      'F:5:3: FHIR requires Observation.status, which `status` writes: make it `required: true` (a record read back may still lack it)',
      'F:6:1: FHIR requires Observation.code: map a required Connect field, a `fixed` value or a `defaults` value to it',
    ]);
  });

  it('a problem inside a folded path (>-) points at its own line and column', () => {
    const dir = probe(`connect:\n  id: { type: string, required: true }\n  name: { type: string, nullable: true }\nfields:\n  id: id\n  name: >-\n    code.text\n    | code.coding.frist().display\n`);
    expect(problemsOf(dir)[0]!.replace(dir, 'D')).toMatch(/^D\/probe\.map\.yaml:15:19: malformed path .*unknown function 'frist'/);
  });

  it('a duplicate key is named, with the line where it was first given', () => {
    const dir = probe(`connect:\n  id: { type: string, required: true }\n  name: string\nfields:\n  id: id\n  name: code.text\n  name: code.coding.display\n`);
    expect(problemsOf(dir)).toEqual([`${join(dir, 'probe.map.yaml')}:14:3: duplicate key \`name\` (first given on line 13): a key may be given once in a mapping`]);
  });

  it('an example that does not hold lists every difference, each at its value', () => {
    const dir = scratchDir();
    cpSync(defaultMappingsDir, dir, { recursive: true });
    const file = join(dir, 'diagnosis.examples.yaml');
    const text = readFileSync(file, 'utf8');
    const broken = text.replace('display_name: Malaria due to Plasmodium falciparum', 'display_name: Malaria').replace('is_primary: true', 'is_primary: false');
    expect(broken).not.toBe(text);
    writeFileSync(file, broken);
    const messages = checkMappings(dir).problems.map((p) => p.problem);
    expect(messages.filter((m) => m.includes('toFhir(connect)') && m.includes('code.text'))).toHaveLength(1);
    expect(messages.filter((m) => m.includes('toFhir(connect)') && m.includes('extension'))).toHaveLength(1);
  });
});

/**
 * Issue 38: the reference range for the patient's age. Comparisons in where() (`<`, `<=`, `>`, `>=`, an element
 * without a value an open limit), `.exists()`, and `%age_years`, the patient's age at the resource's date.
 */
describe('comparisons and %age_years: the range that applies by age, else the band the value is in, else the first', () => {
  const { probe, problemsOf } = mapProbes(
    'pont-ages-',
    'map: probe\nresource: Observation\nuris:\n  loinc: http://loinc.org\nfixed:\n  status: final\n  code.coding.where(system=%loinc).code: 718-7\n',
  );
  const obs = { resourceType: 'Observation', id: 'a', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '718-7' }] } };
  const fields = `connect:\n  id: { type: string, required: true }\n  low: { type: number, nullable: true }\n  high: { type: number, nullable: true }\n  text: { type: string, nullable: true }
fields:\n  id: id\n  low: '%range.low.value'\n  high: '%range.high.value'\n  text: '%range.text'\n`;
  const a = (value: number, code = 'a') => ({ value, unit: code, system: 'http://unitsofmeasure.org', code });
  const gdl = (value: number) => ({ value, unit: 'g/dL', system: 'http://unitsofmeasure.org', code: 'g/dL' });
  const byAge = [
    { low: gdl(11.5), high: gdl(15.5), age: { low: a(6), high: a(12) } },
    { low: gdl(12), high: gdl(16), age: { low: a(12), high: a(18) } },
    { low: gdl(12), high: gdl(15.5), age: { low: a(18) } },
  ];
  const ageLet = `let:
  range: >-
    referenceRange.where(age.exists() and age.low.value <= %age_years and age.high.value > %age_years).first()
    | referenceRange.where(text.exists() and low.value <= %resource.valueQuantity.value and high.value >= %resource.valueQuantity.value).first()
    | referenceRange.first()
`;
  const patient = (birthDate?: string) => ({ resourceType: 'Patient', id: 'p', ...(birthDate ? { birthDate } : {}) }) as any;

  it('compares numbers: <, <=, >, >= with a number or another element; an element without a value is an open limit', () => {
    const map = loadMappings(
      probe(`let:\n  range: referenceRange.where(low.value <= %resource.valueQuantity.value and high.value > %resource.valueQuantity.value).first() | referenceRange.where(low.exists() and low.value > 100).first() | referenceRange.first()\n${fields}`),
    ).get('probe');
    const ranges = [{ high: gdl(5), text: 'low' }, { low: gdl(5), high: gdl(10), text: 'normal' }, { low: gdl(10), text: 'high' }, { low: gdl(200), high: gdl(300), text: 'odd' }];
    const read = (value: number | undefined) => map.fromFhir({ ...obs, ...(value === undefined ? {} : { valueQuantity: gdl(value) }), referenceRange: ranges } as any).text;
    expect(read(3)).toBe('low'); // no low limit: open below
    expect(read(5)).toBe('normal'); // 5 <= 5 and 5 < 10
    expect(read(9.99)).toBe('normal');
    expect(read(10)).toBe('high'); // no high limit: open above
    expect(read(250)).toBe('high');
    // Without the value to compare with, the comparison is not met: the next alternative (a low limit over 100).
    expect(read(undefined)).toBe('odd');
    const parsed = parseExpression('referenceRange.where(low.value <= 5 and high.value>%age_years and text.exists())')[0]!.steps[0]!.where;
    expect(parsed).toMatchObject([{ op: '<=', value: 5 }, { op: '>', ageYears: true }, { exists: true }]);
  });

  it('%age_years: the range whose ages contain the patient\'s age at the result, an absent age limit open', () => {
    const map = loadMappings(probe(`${ageLet}${fields}`)).get('probe');
    expect(map.readsPatient).toBe(true);
    const o = { ...obs, effectiveDateTime: '2024-09-18', valueQuantity: gdl(8.9), referenceRange: byAge } as any;
    const low = (p: any, resource = o) => map.readFhir(resource, { patient: p }).connect.low;
    expect(low(patient('2009-06-14'))).toBe(12); // 15 years old: 12–18 a
    expect(low(patient('2015-01-01'))).toBe(11.5); // 9: 6–12 a
    expect(low(patient('2012-09-18'))).toBe(12); // 12 today: 12–18 a (the high limit is not in the range)
    expect(low(patient('2012-09-19'))).toBe(11.5); // 12 tomorrow
    expect(map.readFhir(o, { patient: patient('1950-03-01') }).connect).toMatchObject({ low: 12, high: 15.5 }); // 74: 18 a and over
    // The date of the result: effectivePeriod.start, effectiveInstant, else issued.
    expect(low(patient('2009-06-14'), { ...o, effectiveDateTime: undefined, effectivePeriod: { start: '2020-01-02T08:00:00+01:00' } })).toBe(11.5);
    expect(low(patient('2009-06-14'), { ...o, effectiveDateTime: undefined, issued: '2020-01-02T08:00:00Z' })).toBe(11.5);
    // Ages in months (or weeks, days) compare as the years they are: 6 mo is half a year.
    const infant = [
      { low: gdl(9.5), high: gdl(13.5), age: { low: a(0, 'mo'), high: a(6, 'mo') } },
      { low: gdl(10.5), high: gdl(13.5), age: { low: a(6, 'mo'), high: a(24, 'mo') } },
      { low: gdl(11), high: gdl(14), age: { low: a(2) } },
    ];
    const io = { ...o, effectiveDateTime: '2024-09-18T10:00:00+02:00', referenceRange: infant };
    expect(low(patient('2024-06-01'), io)).toBe(9.5); // 3 months
    expect(low(patient('2023-09-01'), io)).toBe(10.5); // a year
    expect(low(patient('2020-09-01'), io)).toBe(11); // 4 years
    expect(low(patient('2024-09-15'), { ...io, referenceRange: [{ low: gdl(1), age: { low: a(0, 'd'), high: a(7, 'd') } }, { low: gdl(2), age: { low: a(7, 'd') } }] })).toBe(1); // 3 days
  });

  it('partial birth dates (1990, 1990-05) count from their first day', () => {
    const map = loadMappings(probe(`${ageLet}${fields}`)).get('probe');
    const o = (effectiveDateTime: string) => ({ ...obs, effectiveDateTime, valueQuantity: gdl(8.9), referenceRange: byAge }) as any;
    const low = (birthDate: string, when: string) => map.readFhir(o(when), { patient: patient(birthDate) }).connect.low;
    expect(low('2009', '2021-06-01')).toBe(12); // 12 from 2009-01-01
    expect(low('2009', '2020-12-31')).toBe(11.5); // 11
    expect(low('2009-06', '2021-06-01')).toBe(12); // 12 from 2009-06-01
    expect(low('2009-06', '2021-05-31')).toBe(11.5);
    expect(low('1990-05', '2024')).toBe(12); // a result dated by its year alone: its first day too; 33: 18 a and over (12–15.5)
    expect(map.readFhir(o('2024'), { patient: patient('1990-05') }).connect.high).toBe(15.5);
  });

  it('without the age (no birthDate, no patient, no date of the result): the band the value is in, else the first', () => {
    const map = loadMappings(probe(`${ageLet}${fields}`)).get('probe');
    const banded = [...byAge, { low: gdl(8), high: gdl(10), text: 'moderate anaemia' }, { low: gdl(10), high: gdl(11.5), text: 'mild anaemia' }];
    const o = { ...obs, effectiveDateTime: '2024-09-18', valueQuantity: gdl(8.9), referenceRange: banded } as any;
    expect(map.readFhir(o, { patient: patient() }).connect).toMatchObject({ low: 8, text: 'moderate anaemia' });
    expect(map.readFhir(o).connect).toMatchObject({ low: 8, text: 'moderate anaemia' });
    expect(map.readFhir({ ...o, effectiveDateTime: undefined }, { patient: patient('2009-06-14') }).connect.text).toBe('moderate anaemia');
    expect(map.readFhir({ ...o, valueQuantity: gdl(10.5) }, { patient: patient() }).connect.text).toBe('mild anaemia');
    expect(map.readFhir({ ...o, valueQuantity: gdl(20) }, { patient: patient() }).connect).toMatchObject({ low: 11.5, high: 15.5, text: null });
    expect(map.readFhir({ ...o, referenceRange: byAge }, { patient: patient() }).connect.low).toBe(11.5);
    // Writing: a comparison is never written (the let's writable alternative is referenceRange.first()).
    expect(map.toFhir({ id: 'a', low: 1, high: 2 })).toMatchObject({ referenceRange: [{ low: { value: 1 }, high: { value: 2 } }] });
  });

  it('lab-result, observation and vital choose the range one way: the same let', () => {
    const lets = ['lab-result', 'observation', 'vital'].map((m) => /\n {2}range:\n((?: {4}.*\n)+)/.exec(readFileSync(join(defaultMappingsDir, `${m}.map.yaml`), 'utf8'))?.[1]);
    expect(lets[0]).toContain('%age_years');
    expect(lets[1]).toBe(lets[0]);
    expect(lets[2]).toBe(lets[0]);
  });

  it("lab-result, observation and vital read a result's parts one way: the same component_list, declared and mapped", () => {
    const blocks = ['lab-result', 'observation', 'vital'].map((m) =>
      [...readFileSync(join(defaultMappingsDir, `${m}.map.yaml`), 'utf8').matchAll(/\n {2}component_list:\n((?: {4}.*\n|\n)+)/g)].map((b) => b[1]),
    );
    expect(blocks[0]).toHaveLength(2);
    expect(blocks[0]![0]).toContain('value_boolean');
    expect(blocks[1]).toEqual(blocks[0]);
    expect(blocks[2]).toEqual(blocks[0]);
  });

  it('the lab map: the range for a child by age; written back, every range with its ages, the single fields not again', () => {
    const maps = loadMappings();
    const lab = maps.get('lab-result');
    const o = { ...obs, category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] }], subject: { reference: 'Patient/p' }, effectiveDateTime: '2024-09-18', valueQuantity: gdl(8.9), referenceRange: byAge } as any;
    const record = lab.readFhir(o, { patient: patient('2009-06-14') }).connect as any;
    expect(record).toMatchObject({ reference_low: 12, reference_high: 16, reference_range_unit: 'g/dL' });
    expect(record.reference_ranges.map((r: any) => [r.age_low, r.age_high, r.age_unit])).toEqual([[6, 12, 'a'], [12, 18, 'a'], [18, null, 'a']]);
    for (const m of ['observation', 'vital']) expect(maps.get(m).readFhir(o, { patient: patient('2009-06-14') }).connect).toMatchObject(m === 'vital' ? { reference_ranges: record.reference_ranges } : { reference_low: 12, reference_high: 16 });
    // Written back (the SDK push of a record as read): the three ranges as FHIR gave them, the open age limit left out.
    expect((lab.toFhir(record) as any).referenceRange).toEqual(byAge);
    // Single fields that no range gives are written into the first, and must agree with it.
    expect(() => lab.toFhir({ ...record, reference_low: 13 })).toThrow(/reference_low.*contradicts 11\.5/);
    // Without the list (the SDK push's own fields): the single range, as before.
    expect((lab.toFhir({ ...record, reference_ranges: [] }) as any).referenceRange).toEqual([{ low: { value: 12, unit: 'g/dL' }, high: { value: 16 } }]);
  });

  it('a field may go to several paths without a value table: each receives the value; a range limit with a unit alone is left out', () => {
    const map = loadMappings(
      probe(`connect:\n  id: { type: string, required: true }\n  low: { type: number, nullable: true }\n  high: { type: number, nullable: true }\n  unit: { type: string, nullable: true }
fields:\n  id: id\n  low: valueRange.low.value\n  high: valueRange.high.value\n  unit:\n    fhir: [valueRange.low.unit, valueRange.high.unit]\n`),
    ).get('probe');
    expect((map.toFhir({ id: 'a', low: 1, high: 3, unit: 'mg/L' }) as any).valueRange).toEqual({ low: { value: 1, unit: 'mg/L' }, high: { value: 3, unit: 'mg/L' } });
    expect((map.toFhir({ id: 'a', low: 1, unit: 'mg/L' }) as any).valueRange).toEqual({ low: { value: 1, unit: 'mg/L' } });
    expect(map.fromFhir({ ...obs, valueRange: { high: { value: 3, unit: 'mg/L' } } } as any)).toEqual({ id: 'a', low: null, high: 3, unit: 'mg/L' });
  });

  it('refuses comparisons that cannot work, where the map names them', () => {
    const bad = (range: string) => problemsOf(probe(`let:\n  range: ${range} | referenceRange.first()\n${fields}`)).map((p) => p.replace(/^.*probe\.map\.yaml:/, '')).slice(0, 1); // (the fields then name an unknown let)
    expect(bad("referenceRange.where(low.value < 'x')")).toEqual([expect.stringMatching(/^9:\d+: .*low\.value is a FHIR decimal: < compares numbers, `x` is not one/)]);
    expect(bad('referenceRange.where(text >= 3)')).toEqual([expect.stringMatching(/^9:\d+: .*text is a FHIR string: >= compares numbers/)]);
    expect(bad('referenceRange.where(low.value <= %resource.status)')).toEqual([expect.stringMatching(/^9:\d+: .*%resource\.status \(a code\) does not fit/)]);
    expect(bad('referenceRange.where(text = %age_years)')).toEqual([expect.stringMatching(/^9:\d+: .*%age_years is a number of years: compare it with <, <=, > or >=/)]);
    expect(bad('referenceRange.where(%resource.valueInteger <= %age_years)')).toEqual([expect.stringMatching(/^9:\d+: .*%age_years compares with the value of an age \(e\.g\. age\.low\.value\): valueInteger is not the value of a quantity/)]);
    expect(() => parseExpression('referenceRange.where(%age_years < 3)')).toThrow(/%age_years goes on the right/);
    expect(() => parseExpression('referenceRange.where(low.value =< 3)')).toThrow(PathSyntaxError);
  });
});
