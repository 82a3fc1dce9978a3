import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Resource } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { addLocalCodeTable, LOCAL_LAB } from '../../test/local-code-table';
import { loadMappings } from './index';
import { ageInYears, textOf, ucumTimeCode, yearsOf } from './runtime';

/** Issue 39: toText() of the parts the new record types read as text. */
describe('toText() of questionnaire answers, planned activities and relatives\' conditions', () => {
  it('a questionnaire item: its question, linkId and every answer; a group its items; nothing answered, nothing', () => {
    expect(textOf({ linkId: '44250-9', text: 'Little interest or pleasure in doing things', answer: [{ valueCoding: { system: 'http://loinc.org', code: 'LA6569-3', display: 'Several days' } }] })).toBe(
      'Little interest or pleasure in doing things [44250-9]: Several days',
    );
    expect(textOf({ linkId: '44261-6', answer: [{ valueInteger: 11 }] })).toBe('[44261-6]: 11');
    expect(textOf({ linkId: 'allergies', answer: [{ valueString: 'dust' }, { valueString: 'cats' }] })).toBe('[allergies]: dust, cats');
    expect(textOf({ linkId: 'g', text: 'General', item: [{ linkId: 'g.1', text: 'Sex', answer: [{ valueCoding: { code: 'M', display: 'Male' } }] }, { linkId: 'g.2', text: 'Born', answer: [{ valueDate: '1960-03-13' }] }] })).toBe(
      'Sex [g.1]: Male; Born [g.2]: 1960-03-13',
    );
    expect(textOf({ linkId: 'smoke', text: 'Do you smoke?', answer: [{ valueBoolean: true, item: [{ linkId: 'smoke.1', text: 'How many a day?', answer: [{ valueInteger: 10 }] }] }] })).toBe(
      'Do you smoke? [smoke]: true; How many a day? [smoke.1]: 10',
    );
    expect(textOf({ linkId: 'x', text: 'Unanswered' })).toBeUndefined();
  });

  it('a planned activity: what, and its status; its description when it has no code', () => {
    expect(textOf({ code: { coding: [{ system: 'http://snomed.info/sct', code: '229070002', display: 'Stretching exercises' }] }, status: 'completed' })).toBe('Stretching exercises (completed)');
    expect(textOf({ description: 'Eve will review photos of high and low density foods', status: 'not-started' })).toBe('Eve will review photos of high and low density foods (not-started)');
  });

  it('a time given by its UCUM code alone reads in words (an onset at 5 a: 5 years); another unit, or a code the unit does not repeat, as written', () => {
    expect(textOf({ value: 5, unit: 'a', system: 'http://unitsofmeasure.org', code: 'a' })).toBe('5 years');
    expect(textOf({ value: 1, system: 'http://unitsofmeasure.org', code: 'a' })).toBe('1 year');
    expect(textOf({ value: 6, unit: 'mo' })).toBe('6 months');
    expect(textOf({ value: 50, unit: 'yr', system: 'http://unitsofmeasure.org', code: 'a' })).toBe('50 yr');
    expect(textOf({ value: 3, unit: 'd', system: 'http://example.org/units' })).toBe('3 d');
    expect(textOf({ value: 2, unit: 'constructor' })).toBe('2 constructor');
  });

  it('samples (SampledData): the data and how to read them', () => {
    expect(textOf({ origin: { value: 0, unit: 'mmol/L' }, period: 300000, dimensions: 1, data: '5.1 6.2 11.8 14.2' })).toBe('5.1 6.2 11.8 14.2 (origin 0 mmol/L, every 300000 ms)');
    // A CGM's limits of detection: its 40 is "40 or less".
    expect(textOf({ origin: { value: 0, unit: 'mg/dL' }, period: 300000, dimensions: 1, lowerLimit: 40, upperLimit: 400, data: '40 52 118' })).toBe('40 52 118 (origin 0 mg/dL, every 300000 ms, lower limit 40, upper limit 400)');
    expect(textOf({ origin: { value: 2048 }, period: 10, factor: 1.612, dimensions: 3, data: '2041 2043 E 2046 2040 2042' })).toBe('2041 2043 E 2046 2040 2042 (origin 2048, factor 1.612, every 10 ms, 3 dimensions)');
  });

  it('a planned activity NOT to be done (doNotPerform) says so: anticoagulation forbidden is not anticoagulation scheduled', () => {
    expect(textOf({ status: 'scheduled', code: { text: 'Anticoagulation' }, doNotPerform: true })).toBe('Do not: Anticoagulation (scheduled)');
    expect(textOf({ status: 'scheduled', code: { text: 'Anticoagulation' }, doNotPerform: false })).toBe('Anticoagulation (scheduled)');
  });

  it("a relative's condition: what, its onset, its outcome, whether it contributed to death", () => {
    expect(textOf({ code: { text: 'Heart Attack' }, contributedToDeath: true, onsetAge: { value: 74, unit: 'yr' } })).toBe('Heart Attack (onset 74 yr; contributed to death)');
    expect(textOf({ code: { coding: [{ system: 'http://snomed.info/sct', code: '22298006' }] }, outcome: { text: 'Deceased' } })).toBe('22298006 (Deceased)');
  });

  it('leaves the other kinds as they were: a coding, a concept, a component', () => {
    expect(textOf({ system: 'http://snomed.info/sct', code: '1', display: 'One' })).toBe('One');
    expect(textOf({ coding: [{ code: 'A' }], text: 'Concept' })).toBe('Concept');
    // A concept without text: the first coding with words, before a local code given bare.
    expect(textOf({ coding: [{ system: 'urn:local', code: '101' }, { system: 'http://snomed.info/sct', code: '185349003', display: 'Encounter for check up' }] })).toBe('Encounter for check up');
    expect(textOf({ coding: [{ system: 'urn:local', code: '101' }, { system: 'urn:other', code: 'X' }] })).toBe('101');
    expect(textOf({ code: { text: 'Systolic' }, valueQuantity: { value: 120, unit: 'mm[Hg]' } })).toBe('Systolic: 120 mm[Hg]');
  });
});

/** Issue 38: the patient's age at a result, in years, for the reference range of their age (%age_years). */
describe('ageInYears(): completed years and the part of the year since the last birthday', () => {
  it('whole years on the birthday, less the day before; leap days', () => {
    expect(ageInYears('2012-09-18', '2024-09-18')).toBe(12);
    expect(ageInYears('2012-09-18', '2024-09-17')).toBeLessThan(12);
    expect(ageInYears('2012-09-18', '2024-09-17')).toBeGreaterThan(11.99);
    expect(Math.floor(ageInYears('2009-06-14', '2024-09-18')!)).toBe(15);
    expect(ageInYears('2008-02-29', '2024-02-28')).toBeLessThan(16);
    expect(ageInYears('2008-02-29', '2024-02-29')).toBe(16);
    expect(ageInYears('2008-02-29', '2023-03-01')).toBe(15);
    expect(ageInYears('2024-01-01', '2024-07-02')).toBeCloseTo(0.5, 2);
  });

  it('a date-time counts by its date; partial dates from their first day; nothing for what cannot be told', () => {
    expect(ageInYears('2012-09-18', '2024-09-18T23:30:00-05:00')).toBe(12);
    expect(ageInYears('2012', '2024-01-01')).toBe(12);
    expect(ageInYears('2012-05', '2024-04-30')).toBeLessThan(12);
    expect(ageInYears('2012-05', '2024-05-01')).toBe(12);
    expect(ageInYears('2012-05-01', '2024')).toBeLessThan(12);
    expect(ageInYears(undefined, '2024-01-01')).toBeUndefined();
    expect(ageInYears('2012-01-01', undefined)).toBeUndefined();
    expect(ageInYears('not a date', '2024-01-01')).toBeUndefined();
    expect(ageInYears('2025-01-01', '2024-01-01')).toBeUndefined(); // before birth
  });

  it("a pushed age's unit of time as its UCUM code (ucumTimeCode): the code itself, or its words; other words none", () => {
    expect(['a', 'mo', 'wk', 'd', 'h', 'min'].map(ucumTimeCode)).toEqual(['a', 'mo', 'wk', 'd', 'h', 'min']);
    expect(['years', 'Year', 'months', 'week', 'days', 'hours', 'minute'].map(ucumTimeCode)).toEqual(['a', 'a', 'mo', 'wk', 'd', 'h', 'min']);
    expect(['yrs', 'y', 'A', 'kg', 's', ''].map(ucumTimeCode)).toEqual([undefined, undefined, undefined, undefined, undefined, undefined]);
  });

  it('an age in any UCUM unit of time, in years (yearsOf)', () => {
    expect(yearsOf({ value: 6, code: 'mo' })).toBe(0.5);
    expect(yearsOf({ value: 18, unit: 'a' })).toBe(18);
    expect(yearsOf({ value: 2, unit: 'years' })).toBe(2);
    expect(yearsOf({ value: 365.25, code: 'd' })).toBe(1);
    expect(yearsOf({ value: 3 })).toBe(3); // no unit: years, as ages are given
    expect(yearsOf({ value: 3, code: 'kg' })).toBeUndefined();
    expect(yearsOf({ code: 'a' })).toBeUndefined();
  });
});

/** Issue 45: a reader that needs a few fields of a record (the events' lab_result.created) reads only those. */
describe('reading some fields of a record', () => {
  it('each field read alone is what the whole record says, for every map and every resource of the other writers\' corpora', () => {
    const corpus = fileURLToPath(new URL('../../test/corpus/other-writers/', import.meta.url));
    const bundle = JSON.parse(readFileSync(join(corpus, 'northbrook-ehr.bundle.json'), 'utf8')) as { entry: Array<{ resource: Resource }> };
    const resources = [
      ...bundle.entry.map((e) => e.resource),
      ...readFileSync(join(corpus, 'savanna-lab-network.ndjson'), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Resource),
    ];
    const maps = loadMappings();
    let compared = 0;
    for (const name of maps.names()) {
      const map = maps.get(name);
      for (const resource of resources.filter((r) => r.resourceType === map.resourceType)) {
        const whole = map.readFhir(resource).connect;
        for (const field of map.fields) {
          const alone = map.readFhir(resource, {}, new Set([field])).connect;
          expect(alone[field], `${name} ${field} of ${resource.resourceType}/${resource.id}`).toEqual(whole[field]);
          compared++;
        }
      }
    }
    expect(compared).toBeGreaterThan(1000);
  });

  it('a field a value table completes (loinc_code beside a local-code table) reads the same alone', () => {
    const dir = mkdtempSync(join(tmpdir(), 'pont-maps-'));
    try {
      cpSync(fileURLToPath(new URL('../../mappings/', import.meta.url)), dir, { recursive: true });
      addLocalCodeTable(dir);
      const map = loadMappings(dir).get('lab-result');
      // The lab's own code, without its LOINC coding: loinc_code is what the table writes for HB.
      const observation = { resourceType: 'Observation', id: 'hb', status: 'final', code: { coding: [{ system: LOCAL_LAB, code: 'HB' }] }, subject: { reference: 'Patient/p' } } as Resource;
      expect(map.readFhir(observation).connect.loinc_code).toBe('718-7');
      expect(map.readFhir(observation, {}, new Set(['loinc_code'])).connect).toEqual({ loinc_code: '718-7', local_code: 'HB' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('toText() of an attachment', () => {
  const data = (text: string) => Buffer.from(text, 'utf8').toString('base64');
  it('is its text when held inline as plain text (UTF-8, any case of the charset); nothing for a PDF, a link or HTML', () => {
    expect(textOf({ contentType: 'text/plain', data: data('Margins involved.\n') })).toBe('Margins involved.');
    expect(textOf({ contentType: 'text/plain; charset=UTF-8', data: data('Ødem, 5 µm') })).toBe('Ødem, 5 µm');
    expect(textOf({ contentType: 'application/pdf', data: data('%PDF-1.4'), title: 'Report' })).toBeUndefined();
    expect(textOf({ contentType: 'text/plain', url: 'https://lab.example/r/1.txt', title: 'Report' })).toBeUndefined();
    expect(textOf({ contentType: 'text/html', data: data('<p>x</p>') })).toBeUndefined();
    expect(textOf({ contentType: 'text/plain; charset=ISO-8859-1', data: data('x') })).toBeUndefined();
  });
});

describe('a reference given by its identifier alone (an NPI, a UDI, a lot), with no display and nothing stored to resolve', () => {
  const maps = loadMappings();
  const NPI = 'http://hl7.org/fhir/sid/us-npi';
  const result = (performer: unknown[]): Resource =>
    ({ resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'Hemoglobin' }, subject: { reference: 'Patient/p1' }, performer } as Resource);
  const resolved = new Map<string, Resource>([['Practitioner/12', { resourceType: 'Practitioner', id: '12', name: [{ family: 'Lee', given: ['Ann'] }] }]]);

  it('is named by its identifier, in its place among the others: its type in words, its value, its system', () => {
    const performer = [{ reference: 'Practitioner/12' }, { identifier: { system: NPI, value: '1234567893' } }, { display: 'Dr Who' }, { identifier: { type: { text: 'NPI' }, value: '9876543213' } }];
    expect(maps.get('lab-result').readFhir(result(performer), { resolved }).connect.performer).toBe(`Ann Lee, 1234567893 (${NPI}), Dr Who, NPI 9876543213`);
  });

  it('a reference whose resource cannot be read is named by its identifier when it has one, and by nothing else', () => {
    const performer = [{ reference: 'Practitioner/99', identifier: { system: NPI, value: '1234567893' } }, { reference: 'Organization/hidden' }];
    expect(maps.get('lab-result').readFhir(result(performer), { resolved }).connect.performer).toBe(`1234567893 (${NPI})`);
  });
});

describe('a list of concepts read in words, written back', () => {
  const maps = loadMappings();
  it("is one concept per item, the first with the first's code: two categories do not become one whose words and code disagree", () => {
    const plan = {
      resourceType: 'CarePlan',
      id: 'x',
      status: 'active',
      intent: 'plan',
      subject: { reference: 'Patient/p' },
      category: [
        { coding: [{ system: 'http://hl7.org/fhir/us/core/CodeSystem/careplan-category', code: 'assess-plan' }] },
        { coding: [{ system: 'http://snomed.info/sct', code: '698360004', display: 'Diabetes self management plan' }], text: 'Diabetes self management plan' },
      ],
    } as Resource;
    const record = maps.get('care-plan').readFhir(plan).connect;
    expect(record.category).toBe('assess-plan; Diabetes self management plan');
    const written = maps.get('care-plan').toFhir(record) as { category?: unknown };
    expect(written.category).toEqual([
      { coding: [{ system: 'http://hl7.org/fhir/us/core/CodeSystem/careplan-category', code: 'assess-plan' }], text: 'assess-plan' },
      { text: 'Diabetes self management plan' },
    ]);
    // Read again, the words are the same.
    expect(maps.get('care-plan').readFhir(written as Resource).connect.category).toBe(record.category);
  });
});

describe('a resource a reference leads to, named (toText(), resolve().join())', () => {
  it('by the name in use (not an old one), else a device\'s name, an alias, a role or relationship, else its identifier', () => {
    expect(textOf({ resourceType: 'Practitioner', name: [{ use: 'old', family: 'Maiden' }, { use: 'official', family: 'Lee', given: ['Ann'] }] })).toBe('Ann Lee');
    expect(textOf({ resourceType: 'Practitioner', name: [{ family: 'Lee', period: { end: '2001-01-01' } }, { family: 'Shaw' }] })).toBe('Shaw');
    expect(textOf({ resourceType: 'Device', deviceName: [{ name: 'Acme knee implant', type: 'user-friendly-name' }] })).toBe('Acme knee implant');
    expect(textOf({ resourceType: 'Organization', alias: ['Acme Cardiology'] })).toBe('Acme Cardiology');
    expect(textOf({ resourceType: 'PractitionerRole', code: [{ text: 'Nurse' }] })).toBe('Nurse');
    expect(textOf({ resourceType: 'RelatedPerson', relationship: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-RoleCode', code: 'MTH', display: 'mother' }] }] })).toBe('mother');
    expect(textOf({ resourceType: 'Practitioner', identifier: [{ system: 'http://hl7.org/fhir/sid/us-npi', value: '1234567893' }] })).toBe('1234567893 (http://hl7.org/fhir/sid/us-npi)');
    expect(textOf({ resourceType: 'Practitioner' })).toBeUndefined();
  });
});

describe('a date-time written into a FHIR instant', () => {
  const maps = loadMappings();
  const result = (issued_at: string) => ({ id: 'r1', patient_id: 'p1', test_name: 'Hemoglobin', status: 'final', effective_at: '2024-01-05', issued_at });
  it('needs the time to the second with a zone (Observation.issued): a day alone is refused, naming the field', () => {
    expect(() => maps.get('lab-result').toFhir(result('2024-01-05'))).toThrow(/issued_at.*not a full date-time/);
    expect((maps.get('lab-result').toFhir(result('2024-01-05T10:30:00+02:00')) as { issued?: string }).issued).toBe('2024-01-05T10:30:00+02:00');
  });
});
