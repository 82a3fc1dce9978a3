import type { Encounter } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { schemaProblems } from './published-schema';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * Issue 26, fidelity: FHIR written by other systems, posted through /api/fhir/R4, read back as Connect records.
 * Each case is one defect of the issue; nothing clinically meaningful may be lost or made up.
 */
let pont: TestServer;
let operator: TestClient;
let reader: TestClient;
let sdk: TestClient;
let patientId: string;
let healthId: string;

const call = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(path, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
const LOINC = 'http://loinc.org';
const SCT = 'http://snomed.info/sct';
const UCUM = 'http://unitsofmeasure.org';
const LAB = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] };
const ACTIVE_ALLERGY = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }] };
const VITAL = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] };

/** Posts a resource about the patient; returns its id. */
async function post(resource: Record<string, unknown>): Promise<string> {
  const subject = ['AllergyIntolerance', 'DetectedIssue', 'Immunization'].includes(resource.resourceType as string) ? 'patient' : 'subject';
  const res = await call(operator, `/api/fhir/R4/${resource.resourceType}`, { method: 'POST', json: { ...resource, [subject]: { reference: `Patient/${patientId}` } } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id;
}

/** The record of `type` made from the resource `id`. */
async function record(type: string, id: string): Promise<Record<string, any>> {
  const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=${type}&limit=1000`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const found = res.body.records[type].find((r: any) => r.id === id);
  expect(found, `${type} ${id} is in the records`).toBeDefined();
  return found;
}

beforeAll(async () => {
  pont = await startTestServer();
  operator = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-operator', allPatients: true });
  reader = await createTestClient(pont, ['consents:write', 'patient:diagnostics:read', 'patients:read', 'labs:read', 'prescriptions:read', 'documents:read'], { organizationId: 'org-reader' });
  const created = await call(operator, '/api/fhir/R4/Patient', { method: 'POST', json: { resourceType: 'Patient', name: [{ family: 'Okafor', given: ['Ada'] }], gender: 'female', birthDate: '1980-02-03' } });
  expect(created.status).toBe(201);
  patientId = created.body.id;
  healthId = created.body.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
  const expires_at = new Date(Date.now() + 365 * 86_400_000).toISOString();
  const granted = await call(reader, `/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at } });
  expect(granted.status).toBe(201);
  sdk = await createTestClient(pont, ['labs:write', 'encounters:write', 'labs:read', 'patients:read'], { organizationId: 'org-reader' });
}, 120_000);
afterAll(async () => {
  await pont?.close();
});

describe('FHIR written elsewhere reads back whole', () => {
  it('1. a quantity keeps its comparator', async () => {
    const id = await post({ resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'CRP' }, valueQuantity: { value: 5, comparator: '<', unit: 'mg/L' } });
    expect(await record('lab_results', id)).toMatchObject({ value_numeric: 5, comparator: '<', unit: 'mg/L' });
  });

  /** Each [clinical, verification, expected] status pair posted as a `resourceType` and read back as its `recordType`. */
  const statusCases = async (resourceType: string, recordType: string, systems: [string, string], cases: Array<[string | null, string | null, string]>) => {
    for (const [clinical, verification, status] of cases) {
      const id = await post({
        resourceType,
        code: { text: `${resourceType} written elsewhere` },
        ...(clinical ? { clinicalStatus: { coding: [{ system: systems[0], code: clinical }] } } : {}),
        ...(verification ? { verificationStatus: { coding: [{ system: systems[1], code: verification }] } } : {}),
      });
      expect((await record(recordType, id)).status, `${clinical} + ${verification}`).toBe(status);
    }
  };

  it('2. every diagnosis status reads: provisional, recurrence, active without verification, entered-in-error', async () => {
    await statusCases('Condition', 'diagnoses', ['http://terminology.hl7.org/CodeSystem/condition-clinical', 'http://terminology.hl7.org/CodeSystem/condition-ver-status'], [
      ['active', 'provisional', 'provisional'],
      ['recurrence', 'confirmed', 'recurrence'],
      ['active', null, 'active'],
      [null, 'entered-in-error', 'entered_in_error'],
      ['active', 'differential', 'differential'],
      ['remission', null, 'remission'],
    ]);
  });

  it('2b. an allergy’s verification status reads too: in error, refuted and unconfirmed are never an ordinary allergy', async () => {
    await statusCases('AllergyIntolerance', 'allergies', ['http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', 'http://terminology.hl7.org/CodeSystem/allergyintolerance-verification'], [
      [null, 'entered-in-error', 'entered_in_error'],
      ['active', 'refuted', 'refuted'],
      ['inactive', 'refuted', 'refuted'],
      ['active', 'unconfirmed', 'unconfirmed'],
      ['active', 'confirmed', 'active'],
      ['resolved', null, 'resolved'],
    ]);
  });

  it('3b. a flag coded in HL7 v2 table 0078 (as systems converting v2 messages write it) is the flag', async () => {
    const id = await post({
      resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'Potassium' },
      valueQuantity: { value: 6.9, unit: 'mmol/L', system: UCUM, code: 'mmol/L' },
      interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0078', code: 'HH' }] }],
    });
    expect(await record('lab_results', id)).toMatchObject({ flag: 'HH', flag_level: 'critical_high' });
  });

  it('2c. an alert entered in error elsewhere says so, and one coded only elsewhere (v3 ActCode DRG) keeps its code', async () => {
    const id = await post({
      resourceType: 'DetectedIssue', status: 'entered-in-error', severity: 'high', detail: 'Warfarin + aspirin: bleeding risk',
      code: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'DRG' }] },
    });
    expect(await record('alerts', id)).toMatchObject({ status: 'entered-in-error', alert_type: 'DRG', severity: 'high' });
  });

  it('3. the reference range is the one for the patient’s sex, else the one in the value’s unit, with its unit; a text-only range is kept', async () => {
    const id = await post({
      resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'Haemoglobin' },
      valueQuantity: { value: 13.5, unit: 'g/dL', system: UCUM, code: 'g/dL' },
      referenceRange: [
        { low: { value: 120, unit: 'g/L', system: UCUM, code: 'g/L' }, high: { value: 160, unit: 'g/L', system: UCUM, code: 'g/L' }, appliesTo: [{ text: 'female' }] },
        { low: { value: 13, unit: 'g/dL', system: UCUM, code: 'g/dL' }, high: { value: 17, unit: 'g/dL', system: UCUM, code: 'g/dL' }, appliesTo: [{ text: 'male' }] },
      ],
    });
    // The patient is female: her range, in its own unit (not the male one that shares the value's unit), saying whom it is for.
    expect(await record('lab_results', id)).toMatchObject({ reference_low: 120, reference_high: 160, reference_range_unit: 'g/L', reference_range_text: 'female' });
    const coded = await post({
      resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'Haemoglobin' },
      valueQuantity: { value: 12.5, unit: 'g/dL', system: UCUM, code: 'g/dL' },
      referenceRange: [
        { low: { value: 13.5, unit: 'g/dL', system: UCUM, code: 'g/dL' }, high: { value: 17.5, unit: 'g/dL', system: UCUM, code: 'g/dL' }, appliesTo: [{ coding: [{ system: SCT, code: '248153007', display: 'Male' }] }] },
        { low: { value: 12, unit: 'g/dL', system: UCUM, code: 'g/dL' }, high: { value: 15.5, unit: 'g/dL', system: UCUM, code: 'g/dL' }, appliesTo: [{ coding: [{ system: SCT, code: '248152002', display: 'Female' }] }] },
      ],
    });
    expect(await record('lab_results', coded)).toMatchObject({ reference_low: 12, reference_high: 15.5, reference_range_text: 'Female' });
    // Ranges for others only (a pregnant patient's): the one in the value's unit, saying whom it is for.
    const others = await post({
      resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'Haemoglobin' },
      valueQuantity: { value: 12.5, unit: 'g/dL', system: UCUM, code: 'g/dL' },
      referenceRange: [{ low: { value: 11, unit: 'g/dL', system: UCUM, code: 'g/dL' }, appliesTo: [{ coding: [{ system: SCT, code: '77386006', display: 'Pregnant' }] }] }],
    });
    expect(await record('lab_results', others)).toMatchObject({ reference_low: 11, reference_high: null, reference_range_text: 'Pregnant' });
    const text = await post({ resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'Culture' }, valueString: 'no growth', referenceRange: [{ text: 'no growth' }] });
    expect(await record('lab_results', text)).toMatchObject({ reference_low: null, reference_high: null, reference_range_text: 'no growth' });
  });

  it('4. a coded-only concept shows its display', async () => {
    const coded = (system: string, code: string, display: string) => ({ coding: [{ system, code, display }] });
    const dx = await post({ resourceType: 'Condition', code: coded(SCT, '195967001', 'Asthma') });
    expect((await record('diagnoses', dx)).display_name).toBe('Asthma');
    const lab = await post({ resourceType: 'Observation', status: 'final', category: [LAB], code: coded(LOINC, '883-9', 'ABO group'), valueCodeableConcept: coded(SCT, '112144000', 'Blood group A') });
    expect(await record('lab_results', lab)).toMatchObject({ test_name: 'ABO group', value_coded: 'Blood group A', loinc_code: '883-9' });
    const allergy = await post({ resourceType: 'AllergyIntolerance', clinicalStatus: ACTIVE_ALLERGY, code: coded(SCT, '91936005', 'Allergy to penicillin') });
    expect((await record('allergies', allergy)).substance).toBe('Allergy to penicillin');
    const rx = await post({ resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: coded('http://www.nlm.nih.gov/research/umls/rxnorm', '197361', 'Amlodipine 5 MG') });
    expect((await record('prescriptions', rx)).medication).toBe('Amlodipine 5 MG');
    const vital = await post({ resourceType: 'Observation', status: 'final', category: [VITAL], code: coded(LOINC, '8867-4', 'Heart rate'), valueQuantity: { value: 72, unit: '/min' } });
    expect((await record('vitals', vital)).name).toBe('Heart rate');
    const visit = await post({ resourceType: 'Encounter', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, reasonCode: [coded(SCT, '10509002', 'Acute bronchitis')] });
    expect((await record('visits', visit)).reason).toBe('Acute bronchitis');
  });

  it('5. a medication given by reference shows the reference’s display', async () => {
    const medication = await call(operator, '/api/fhir/R4/Medication', { method: 'POST', json: { resourceType: 'Medication', code: { text: 'Metformin' } } });
    expect(medication.status).toBe(201);
    const id = await post({ resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationReference: { reference: `Medication/${medication.body.id}`, display: 'Metformin 500 mg tablet' } });
    expect((await record('prescriptions', id)).medication).toBe('Metformin 500 mg tablet');
  });

  it('6. a vital has its unit: blood pressure (mm[Hg]), a UCUM code only', async () => {
    const bp = await post({
      resourceType: 'Observation', status: 'final', category: [VITAL], code: { coding: [{ system: LOINC, code: '85354-9' }], text: 'Blood pressure' },
      component: [
        { code: { coding: [{ system: LOINC, code: '8480-6' }] }, valueQuantity: { value: 120, unit: 'mm[Hg]', system: UCUM, code: 'mm[Hg]' } },
        { code: { coding: [{ system: LOINC, code: '8462-4' }] }, valueQuantity: { value: 80, unit: 'mm[Hg]', system: UCUM, code: 'mm[Hg]' } },
      ],
    });
    expect(await record('vitals', bp)).toMatchObject({ systolic: 120, diastolic: 80, unit: 'mm[Hg]', value: null });
    const hr = await post({ resourceType: 'Observation', status: 'final', category: [VITAL], code: { text: 'Heart rate' }, valueQuantity: { value: 72, system: UCUM, code: '/min' } });
    expect(await record('vitals', hr)).toMatchObject({ value: 72, unit: '/min' });
  });

  it('7. an integer value and a period’s start are read', async () => {
    const id = await post({ resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'Leukocytes count' }, valueInteger: 7, effectivePeriod: { start: '2024-03-12T08:00:00Z', end: '2024-03-12T09:00:00Z' } });
    expect(await record('lab_results', id)).toMatchObject({ value_numeric: 7, effective_at: '2024-03-12T08:00:00Z' });
  });

  it('9. report-only DiagnosticReports of any lab section; a conclusion is the result, conclusionCode its code', async () => {
    const report = (section: string) => ({
      resourceType: 'DiagnosticReport', status: 'final',
      category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0074', code: section }] }],
      code: { text: `${section} report` },
      conclusion: 'No growth after 48 hours',
      conclusionCode: [{ coding: [{ system: SCT, code: '264868006', display: 'No growth' }] }],
    });
    for (const section of ['MB', 'HM', 'LAB']) {
      const id = await post(report(section));
      expect(await record('lab_results', id), section).toMatchObject({ source: 'report', value: 'No growth after 48 hours', value_coded: 'No growth', test_name: `${section} report` });
    }
  });

  it('9b. a report that is partial or appended reads as the lab result status it refines, in the published shape', async () => {
    const doc = (await pont.json('/api/openapi.json')).body;
    for (const [status, read] of [['partial', 'preliminary'], ['appended', 'amended']]) {
      const id = await post({
        resourceType: 'DiagnosticReport', status,
        category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0074', code: 'MB' }] }],
        code: { text: 'Blood culture' }, conclusion: 'Gram-positive cocci in clusters',
      });
      const got = await record('lab_results', id);
      expect(got, status).toMatchObject({ source: 'report', status: read });
      expect(schemaProblems({ $ref: 'LabResult' }, got, doc)).toEqual([]);
    }
  });

  it('10. records keep their published shape: interpretation codes outside the list, date-only dates', async () => {
    const id = await post({
      resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'HIV antibody' }, valueString: 'reactive', effectiveDateTime: '2024-03-12',
      interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'POS' }] }],
    });
    const got = await record('lab_results', id);
    expect(got).toMatchObject({ flag: 'POS', effective_at: '2024-03-12' });
    const doc = (await pont.json('/api/openapi.json')).body;
    expect(schemaProblems({ $ref: 'LabResult' }, got, doc)).toEqual([]);
    expect(schemaProblems({ $ref: 'LabResult' }, { ...got, flag: 'XYZ' }, doc)).not.toEqual([]);
    expect(schemaProblems({ $ref: 'LabResult' }, { ...got, effective_at: '12/03/2024' }, doc)).not.toEqual([]);
  });

  it('11. SNOMED as the main code, severity from the reaction, structured dosage', async () => {
    const dx = await post({ resourceType: 'Condition', code: { coding: [{ system: SCT, code: '44054006', display: 'Diabetes mellitus type 2' }], text: 'Diabetes' } });
    expect(await record('diagnoses', dx)).toMatchObject({ code_system: 'SNOMED', code: '44054006', snomed_code: '44054006', snomed_display: 'Diabetes mellitus type 2' });
    const allergy = await post({
      resourceType: 'AllergyIntolerance', clinicalStatus: ACTIVE_ALLERGY, code: { text: 'Peanut' }, criticality: 'low',
      reaction: [{ manifestation: [{ text: 'Anaphylaxis' }], severity: 'severe' }],
    });
    expect((await record('allergies', allergy)).severity).toBe('severe');
    const rx = await post({
      resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Amoxicillin 500 mg' },
      dosageInstruction: [{ timing: { repeat: { frequency: 3, period: 1, periodUnit: 'd' } }, asNeededBoolean: false, doseAndRate: [{ doseQuantity: { value: 1, unit: 'capsule' } }] }],
    });
    expect(await record('prescriptions', rx)).toMatchObject({ dose: 1, dose_unit: 'capsule', frequency: 3, period: 1, period_unit: 'd', as_needed: false });
  });

  it('13. a value of any kind reads as its text (range, titre, yes/no, time); a missing value says why', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ valueRange: { low: { value: 1, unit: 'mg/L' }, high: { value: 3, unit: 'mg/L' } } }, '1–3 mg/L'],
      [{ valueRange: { low: { value: 200, unit: 'mg/dL' } } }, '>=200 mg/dL'],
      [{ valueRatio: { numerator: { value: 1 }, denominator: { value: 128 } } }, '1:128'],
      [{ valueBoolean: false }, 'false'],
      [{ valueTime: '07:30:00' }, '07:30:00'],
    ];
    for (const [value, text] of cases) {
      const id = await post({ resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'Result' }, ...value });
      expect(await record('lab_results', id), JSON.stringify(value)).toMatchObject({ value: text, value_numeric: null });
    }
    const absent = await post({
      resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'Potassium' },
      dataAbsentReason: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/data-absent-reason', code: 'error', display: 'Error' }] },
    });
    expect(await record('lab_results', absent)).toMatchObject({ value: null, value_numeric: null, data_absent_reason: 'Error' });
    const refused = await post({ resourceType: 'Observation', status: 'final', category: [VITAL], code: { text: 'Body weight' }, dataAbsentReason: { text: 'Patient refused' } });
    expect(await record('vitals', refused)).toMatchObject({ value: null, data_absent_reason: 'Patient refused' });
  });

  it('14. an immunization known only in words keeps them; dose, reason, series and a subpotent dose are read', async () => {
    const historical = await post({ resourceType: 'Immunization', status: 'completed', vaccineCode: { text: 'Tetanus toxoid' }, occurrenceString: 'January 2012', primarySource: false });
    expect(await record('immunizations', historical)).toMatchObject({ occurred_at: null, occurrence_text: 'January 2012', primary_source: false });
    const given = await post({
      resourceType: 'Immunization', status: 'completed', vaccineCode: { coding: [{ system: 'http://hl7.org/fhir/sid/cvx', code: '140', display: 'Influenza, seasonal' }] },
      occurrenceDateTime: '2024-10-02', doseQuantity: { value: 0.25, unit: 'mL' }, isSubpotent: true, subpotentReason: [{ coding: [{ code: 'partialdose', display: 'Partial Dose' }] }],
      reasonCode: [{ coding: [{ system: SCT, code: '429060002', display: 'Procedure to meet occupational requirement' }] }],
      protocolApplied: [{ targetDisease: [{ coding: [{ system: SCT, code: '6142004', display: 'Influenza' }] }], doseNumberPositiveInt: 1, seriesDosesPositiveInt: 2 }],
    });
    expect(await record('immunizations', given)).toMatchObject({
      vaccine: 'Influenza, seasonal', cvx_code: '140', occurred_at: '2024-10-02', dose_quantity: 0.25, dose_unit: 'mL', is_subpotent: true, subpotent_reason: 'Partial Dose',
      reason: 'Procedure to meet occupational requirement', target_disease: 'Influenza', dose_number: 1, series_doses: 2,
    });
  });

  it('16. observations neither lab nor vital (smoking status, a score with parts) and reports of any kind are records too', async () => {
    const smoking = await post({
      resourceType: 'Observation', status: 'final', category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'social-history', display: 'Social History' }] }],
      code: { coding: [{ system: LOINC, code: '72166-2', display: 'Tobacco smoking status' }] }, valueCodeableConcept: { coding: [{ system: SCT, code: '8517006', display: 'Ex-smoker' }] },
    });
    expect(await record('observations', smoking)).toMatchObject({ category: 'Social History', name: 'Tobacco smoking status', loinc_code: '72166-2', value_coded: 'Ex-smoker' });
    const apgar = await post({
      resourceType: 'Observation', status: 'final', code: { text: 'Apgar score' },
      component: [{ code: { text: 'Heart rate' }, valueInteger: 2 }, { code: { text: 'Colour' }, valueCodeableConcept: { text: 'Pink' } }],
    });
    expect(await record('observations', apgar)).toMatchObject({ category: null, name: 'Apgar score', components: 'Heart rate: 2; Colour: Pink' });
    const imaging = await post({
      resourceType: 'DiagnosticReport', status: 'final', category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0074', code: 'RAD', display: 'Radiology' }] }],
      code: { coding: [{ system: LOINC, code: '24627-2', display: 'CT Chest' }] }, conclusion: 'No nodules.', effectiveDateTime: '2024-03-12T08:00:00Z',
    });
    expect(await record('reports', imaging)).toMatchObject({ category: 'Radiology', name: 'CT Chest', loinc_code: '24627-2', conclusion: 'No nodules.', status: 'final', result_ids: [] });
    // Neither is a lab result.
    const labs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results.map((r: any) => r.id);
    expect(labs).not.toContain(smoking);
    expect(labs).not.toContain(imaging);
  });

  it('17. what other writers record beside the Connect fields is read: onset, severity, stage, reactions, route, rates, the visit’s course, a note’s own sections', async () => {
    const dx = await post({
      resourceType: 'Condition', clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }] },
      category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-category', code: 'problem-list-item', display: 'Problem List Item' }] }],
      severity: { coding: [{ system: SCT, code: '24484000', display: 'Severe' }] }, code: { text: 'NSCLC' }, bodySite: [{ text: 'Left lung' }],
      onsetAge: { value: 52, unit: 'years', system: UCUM, code: 'a' }, stage: [{ summary: { text: 'T2 N1 M0' } }], note: [{ text: 'Smoker for 30 years' }],
    });
    const cm = await post({ resourceType: 'Condition', code: { coding: [{ system: 'http://hl7.org/fhir/sid/icd-10-cm', code: 'E11.9', display: 'Type 2 diabetes mellitus without complications' }] } });
    expect(await record('diagnoses', cm)).toMatchObject({ code_system: 'other', code: 'E11.9', code_system_uri: 'http://hl7.org/fhir/sid/icd-10-cm' });
    const shot = await post({
      resourceType: 'Immunization', status: 'completed', vaccineCode: { coding: [{ system: SCT, code: '871751006', display: 'Hepatitis A vaccine' }] }, occurrenceString: 'childhood',
      primarySource: false, reportOrigin: { text: 'Written Record' }, performer: [{ actor: { display: 'Dr Osei' } }],
    });
    expect(await record('immunizations', shot)).toMatchObject({ cvx_code: null, vaccine_code: '871751006', vaccine_code_system: SCT, report_origin: 'Written Record', performer: 'Dr Osei' });
    expect(await record('diagnoses', dx)).toMatchObject({ onset_text: '52 years', severity: 'Severe', body_site: 'Left lung', stage: 'T2 N1 M0', category: 'Problem List Item', note: 'Smoker for 30 years' });
    const allergy = await post({
      resourceType: 'AllergyIntolerance', clinicalStatus: ACTIVE_ALLERGY, type: 'allergy', category: ['medication'], criticality: 'high',
      code: { coding: [{ system: 'http://www.nlm.nih.gov/research/umls/rxnorm', code: '7980', display: 'Penicillin G' }] }, onsetDateTime: '2010-06',
      reaction: [{ manifestation: [{ text: 'Hives' }, { coding: [{ system: SCT, code: '56018004', display: 'Wheezing' }] }] }],
    });
    expect(await record('allergies', allergy)).toMatchObject({
      substance: 'Penicillin G', severity: null, criticality: 'high', type: 'allergy', category: 'medication', code: '7980', code_system: 'http://www.nlm.nih.gov/research/umls/rxnorm',
      reactions: 'Hives, Wheezing', onset_at: '2010-06',
    });
    const rx = await post({
      resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Morphine' }, reasonCode: [{ text: 'Post-operative pain' }],
      dosageInstruction: [
        {
          text: '1-2 mg IV every 4 h as needed', asNeededCodeableConcept: { text: 'pain' }, route: { coding: [{ system: SCT, code: '47625008', display: 'Intravenous route' }] },
          doseAndRate: [{ doseRange: { low: { value: 1, unit: 'mg' }, high: { value: 2, unit: 'mg' } } }], maxDosePerPeriod: { numerator: { value: 12, unit: 'mg' }, denominator: { value: 1, unit: 'd' } },
          timing: { repeat: { boundsDuration: { value: 3, unit: 'days' } } },
        },
        { text: 'then 1 mg every 6 h' },
      ],
      dispenseRequest: { quantity: { value: 20, unit: 'ampoule' }, numberOfRepeatsAllowed: 0 }, substitution: { allowedBoolean: false },
    });
    expect(await record('prescriptions', rx)).toMatchObject({
      dosage_text: '1-2 mg IV every 4 h as needed; then 1 mg every 6 h', as_needed_reason: 'pain', route: 'Intravenous route', dose_range: '1–2 mg', max_dose: '12 mg / 1 day',
      duration: '3 days', reason: 'Post-operative pain', dispense_quantity: 20, dispense_unit: 'ampoule', refills: 0, substitution_allowed: false,
    });
    const visit = await post({
      resourceType: 'Encounter', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' },
      priority: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActPriority', code: 'EM', display: 'emergency' }] },
      length: { value: 5, unit: 'days' }, location: [{ location: { display: 'Ward 3' } }],
      hospitalization: { admitSource: { text: 'Emergency department' }, dischargeDisposition: { text: 'Home' } },
      diagnosis: [{ condition: { reference: `Condition/${dx}` }, rank: 1 }],
    });
    const visitRecord = await record('visits', visit);
    expect(visitRecord).toMatchObject({ priority: 'emergency', priority_code: 'EM', priority_system: 'http://terminology.hl7.org/CodeSystem/v3-ActPriority', length: '5 days', location: 'Ward 3', admit_source: 'Emergency department', discharge_disposition: 'Home', diagnosis_ids: [dx] });
    // Written back, the visit keeps its coded priority (it was read only: the write-back dropped it).
    expect((pont.services.mappings.get('visit').toFhir(visitRecord) as Encounter).priority?.coding).toEqual([{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActPriority', code: 'EM' }]);
    const note = await post({
      resourceType: 'Composition', status: 'entered-in-error', type: { coding: [{ system: LOINC, code: '18842-5', display: 'Discharge summary' }] }, date: '2024-03-12T10:00:00Z',
      author: [{ display: 'Dr Mensah' }], title: 'Discharge summary',
      section: [
        { title: 'Reason for admission', code: { coding: [{ system: LOINC, code: '29299-5' }] }, text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml"><p>Fever</p></div>' } },
        { title: 'History', code: { coding: [{ system: LOINC, code: '11348-0' }] }, text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">Malaria in 2019</div>' } },
      ],
    });
    expect(await record('clinical_notes', note)).toMatchObject({
      patient_id: patientId, status: 'entered_in_error', note_type: 'Discharge summary', title: 'Discharge summary', sections: 'Reason for admission: Fever\n\nHistory: Malaria in 2019',
    });
  });

  it('18. a lab result’s parts, coded value, period, note and panel members; a vital’s interpretation, range and parts', async () => {
    const culture = await post({
      resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'Blood culture' },
      valueCodeableConcept: { coding: [{ system: SCT, code: '3092008', display: 'Staphylococcus aureus' }] }
    });
    expect(await record('lab_results', culture)).toMatchObject({ value_coded: 'Staphylococcus aureus', value_code: '3092008', value_code_system: SCT });
    const egfr = await post({
      resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'eGFR' }, effectivePeriod: { start: '2024-03-11T08:00:00Z', end: '2024-03-12T08:00:00Z' },
      component: [{ code: { text: 'eGFR (non-black)' }, valueQuantity: { value: 60, comparator: '>', unit: 'mL/min/1.73m2' } }], note: [{ text: 'Tube broken in transit, redrawn' }],
      specimen: { display: 'Serum' }, performer: [{ display: 'Central Lab' }], hasMember: [{ reference: `Observation/${culture}` }],
    });
    expect(await record('lab_results', egfr)).toMatchObject({
      components: 'eGFR (non-black): >60 mL/min/1.73m2', effective_at: '2024-03-11T08:00:00Z', effective_end: '2024-03-12T08:00:00Z', note: 'Tube broken in transit, redrawn',
      specimen: 'Serum', performer: 'Central Lab', member_ids: [culture],
    });
    const bp = await post({
      resourceType: 'Observation', status: 'final', category: [VITAL], code: { coding: [{ system: LOINC, code: '85354-9' }], text: 'Blood pressure' },
      interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'L', display: 'Below low normal' }] }],
      component: [
        { code: { coding: [{ system: LOINC, code: '8480-6', display: 'Systolic blood pressure' }] }, valueQuantity: { value: 85, unit: 'mm[Hg]' } },
        { code: { coding: [{ system: LOINC, code: '8462-4', display: 'Diastolic blood pressure' }] }, dataAbsentReason: { text: 'Not performed' } },
      ],
    });
    expect(await record('vitals', bp)).toMatchObject({ systolic: 85, diastolic: null, interpretation: 'Below low normal', components: 'Systolic blood pressure: 85 mm[Hg]; Diastolic blood pressure: Not performed' });
    const sat = await post({ resourceType: 'Observation', status: 'final', category: [VITAL], code: { text: 'SpO2' }, valueQuantity: { value: 95, unit: '%' }, referenceRange: [{ low: { value: 90, unit: '%' }, high: { value: 99, unit: '%' } }] });
    expect(await record('vitals', sat)).toMatchObject({ value: 95, reference_range: '90–99 %' });
  });

  it('19. a lab result written without a category (as the specification’s examples are) keeps its range and flag among observations; coded units are not UCUM; an as-needed reason means as needed', async () => {
    const glucose = await post({
      resourceType: 'Observation', status: 'final', code: { coding: [{ system: LOINC, code: '15074-8', display: 'Glucose [Moles/volume] in Blood' }] },
      valueQuantity: { value: 6.3, unit: 'mmol/l', system: UCUM, code: 'mmol/L' },
      interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'H', display: 'High' }] }],
      referenceRange: [{ low: { value: 3.1, unit: 'mmol/l', system: UCUM, code: 'mmol/L' }, high: { value: 6.2, unit: 'mmol/l', system: UCUM, code: 'mmol/L' } }],
    });
    expect(await record('observations', glucose)).toMatchObject({ value_numeric: 6.3, unit: 'mmol/l', unit_code: 'mmol/L', reference_low: 3.1, reference_high: 6.2, flag: 'H' });
    const snomedUnit = await post({ resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'Count' }, valueQuantity: { value: 3, unit: 'tablets', system: SCT, code: '385055001' } });
    expect(await record('lab_results', snomedUnit)).toMatchObject({ unit: 'tablets', unit_code: null });
    const prn = await post({ resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Paracetamol' }, dosageInstruction: [{ asNeededCodeableConcept: { text: 'fever' } }] });
    expect(await record('prescriptions', prn)).toMatchObject({ as_needed: true, as_needed_reason: 'fever' });
  });

  it('15. a DocumentReference from elsewhere reads as a documents record, coded only, in the published shape', async () => {
    const id = await post({
      resourceType: 'DocumentReference', status: 'current', docStatus: 'final',
      type: { coding: [{ system: LOINC, code: '18748-4', display: 'Diagnostic imaging study' }] },
      date: '2024-03-12T11:30:00Z', author: [{ display: 'Radiology, City Hospital' }],
      securityLabel: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-Confidentiality', code: 'R', display: 'restricted' }] }],
      content: [{ attachment: { contentType: 'application/pdf', url: 'https://pacs.example.org/r/1.pdf', title: 'Chest X-ray report' } }],
      context: { period: { start: '2024-03-12T09:00:00Z' }, practiceSetting: { coding: [{ system: SCT, code: '394914008', display: 'Radiology' }] } },
    });
    const got = await record('documents', id);
    expect(got).toMatchObject({
      status: 'current', doc_status: 'final', type: 'Diagnostic imaging study', loinc_code: '18748-4', title: 'Chest X-ray report', content_type: 'application/pdf',
      url: 'https://pacs.example.org/r/1.pdf', author: 'Radiology, City Hospital', practice_setting: 'Radiology', security_label: 'restricted', period_start: '2024-03-12T09:00:00Z', created_at: '2024-03-12T11:30:00Z',
    });
    expect(schemaProblems({ $ref: 'PatientDocument' }, got, (await pont.json('/api/openapi.json')).body)).toEqual([]);
  });
});

describe('the SDK lab push keeps what it is given', () => {
  const push = (json: Record<string, unknown>) =>
    call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, test_name: 'CRP', flagged: false, ...json } });

  it('8. "<5" mg/L is a quantity with its comparator and unit; "5,6" with a unit is refused; text stays text', async () => {
    const less = await push({ result_value: '<5', unit: 'mg/L' });
    expect(less.status, JSON.stringify(less.body)).toBe(201);
    expect(await record('lab_results', less.body.lab_result_id)).toMatchObject({ value_numeric: 5, comparator: '<', unit: 'mg/L', value: null });
    const comma = await push({ result_value: '5,6', unit: 'mmol/L' });
    expect(comma.status).toBe(422);
    expect(JSON.stringify(comma.body)).toContain('result_value');
    const text = await push({ result_value: 'positive' });
    expect(await record('lab_results', text.body.lab_result_id)).toMatchObject({ value: 'positive', value_numeric: null, unit: null });
  });

  it('8. "1.10" keeps its significant trailing zero (value_precision, FHIR quantity-precision); "5.6" and "5" need none', async () => {
    const zero = await push({ result_value: '1.10', unit: 'mg/dL' });
    expect(zero.status, JSON.stringify(zero.body)).toBe(201);
    expect(await record('lab_results', zero.body.lab_result_id)).toMatchObject({ value_numeric: 1.1, value_precision: 2, unit: 'mg/dL' });
    const stored = await call(operator, `/api/fhir/R4/Observation/${zero.body.lab_result_id}`);
    expect(stored.body.valueQuantity._value.extension).toEqual([{ url: 'http://hl7.org/fhir/StructureDefinition/quantity-precision', valueInteger: 2 }]);
    const limit = await push({ result_value: '<5.0', unit: 'mg/L' });
    expect(await record('lab_results', limit.body.lab_result_id)).toMatchObject({ value_numeric: 5, comparator: '<', value_precision: 1 });
    for (const [written, value] of [['5.6', 5.6], ['5', 5]] as const) {
      const plain = await push({ result_value: written, unit: 'mg/L' });
      expect(await record('lab_results', plain.body.lab_result_id)).toMatchObject({ value_numeric: value, value_precision: null });
    }
  });

  it('19. a vendor’s codes and words (review of stop 73): every coding kept, words beside the code they name, the STU3 category system, activities and sections of any shape', async () => {
    const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';
    const NDC = 'http://hl7.org/fhir/sid/ndc';
    // Every coding of a dispensed medication (NDC first, as pharmacy systems write it) and of a procedure (CPT first).
    const dispense = await post({
      resourceType: 'MedicationDispense', status: 'completed', contained: [{ resourceType: 'Medication', id: 'm1', code: { coding: [{ system: NDC, code: '0406-0552-01' }, { system: RXNORM, code: '1049621', display: 'oxycodone hydrochloride 5 MG Oral Tablet' }] } }],
      medicationReference: { reference: '#m1' }, whenHandedOver: '2024-03-12T10:00:00Z',
    });
    expect((await record('dispenses', dispense)).medication_codings).toEqual([{ system: NDC, code: '0406-0552-01', display: null }, { system: RXNORM, code: '1049621', display: 'oxycodone hydrochloride 5 MG Oral Tablet' }]);
    const procedure = await post({ resourceType: 'Procedure', status: 'completed', code: { coding: [{ system: 'http://www.ama-assn.org/go/cpt', code: '44970' }, { system: SCT, code: '6025007', display: 'Laparoscopic appendectomy' }] }, performedDateTime: '2024-03-12T09:00:00Z' });
    expect((await record('procedures', procedure)).codings.map((c: any) => c.code)).toEqual(['44970', '6025007']);
    // Several reasons: every one in words, the code the first's; a report's coded conclusion names its first concept.
    const prescription = await post({
      resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Amlodipine 5 mg' },
      reasonCode: [{ coding: [{ system: SCT, code: '59621000', display: 'Essential hypertension' }] }, { text: "also for Raynaud's" }],
    });
    expect(await record('prescriptions', prescription)).toMatchObject({ reason: "Essential hypertension; also for Raynaud's" });
    const report = await post({
      resourceType: 'DiagnosticReport', status: 'final', category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0074', code: 'MB' }] }], code: { text: 'Wound culture' },
      conclusionCode: [{ coding: [{ system: SCT, code: '115329001', display: 'Methicillin resistant Staphylococcus aureus' }] }, { text: 'Heavy growth' }],
    });
    expect(await record('reports', report)).toMatchObject({ conclusion_code: 'Methicillin resistant Staphylococcus aureus' });
    // A lab result and a vital sign categorised in the system STU3 named are a lab result and a vital sign.
    const OLD = 'http://hl7.org/fhir/observation-category';
    const lab = await post({
      resourceType: 'Observation', status: 'final', category: [{ coding: [{ system: OLD, code: 'laboratory' }] }], code: { coding: [{ system: LOINC, code: '2345-7' }] }, valueQuantity: { value: 182, unit: 'mg/dL' },
      identifier: [{ system: 'urn:oid:1.2.840.114350.1.13.0.1.7.3.798268', value: 'ACC-24-5521', type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0203', code: 'ACSN' }] } }],
    });
    const pulse = await post({ resourceType: 'Observation', status: 'final', category: [{ coding: [{ system: OLD, code: 'vital-signs' }] }], code: { coding: [{ system: LOINC, code: '8867-4' }] }, valueQuantity: { value: 112, unit: '/min' } });
    // Its accession number, for reconciling with the laboratory's records.
    expect(await record('lab_results', lab)).toMatchObject({ value_numeric: 182, identifiers: [{ system: 'urn:oid:1.2.840.114350.1.13.0.1.7.3.798268', value: 'ACC-24-5521', type: 'ACSN' }] });
    expect(await record('vitals', pulse)).toMatchObject({ value: 112 });
    const observations = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=observations&limit=1000`);
    expect(observations.body.records.observations.map((r: any) => r.id)).not.toContain(lab);
    // Activities without a code (a product not to be given, an appointment) and a note's sections of sections and of entries.
    const plan = await post({
      resourceType: 'CarePlan', status: 'active', intent: 'plan',
      activity: [
        { detail: { kind: 'MedicationRequest', productCodeableConcept: { coding: [{ system: SCT, code: '372665008', display: 'Non-steroidal anti-inflammatory agent' }] }, status: 'scheduled', doNotPerform: true } },
        { detail: { kind: 'Appointment', status: 'scheduled', scheduledPeriod: { start: '2024-06-01' }, location: { display: 'Surgical clinic' } } },
        { detail: { code: { text: 'Exercise' }, description: '30 min brisk walk', status: 'in-progress', scheduledTiming: { repeat: { frequency: 3, period: 1, periodUnit: 'wk' } } } },
      ],
    });
    expect((await record('care_plans', plan)).activities).toEqual([
      'Do not: Non-steroidal anti-inflammatory agent (scheduled)',
      'Appointment, 2024-06-01 – …, at Surgical clinic (scheduled)',
      'Exercise: 30 min brisk walk, 3 per 1 wk (in-progress)',
    ]);
    const div = (text: string) => ({ status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${text}</div>` });
    const note = await post({
      resourceType: 'Composition', status: 'final', type: { coding: [{ system: LOINC, code: '18842-5', display: 'Discharge summary' }] }, date: '2024-03-14T12:00:00Z', author: [{ display: 'Dr. Mei Chen' }], title: 'Discharge summary',
      section: [
        { title: 'Clinical course', section: [{ title: 'Operation', text: div('Laparoscopic appendectomy') }, { title: 'Post-op', text: div('Wound infection day 2, started flucloxacillin') }] },
        { title: 'Medications on discharge', entry: [{ display: 'Flucloxacillin 500 mg' }] },
      ],
    });
    // Each reaction of an allergy apart: what, how severe, when, in whose words, by which route.
    const allergy = await post({
      resourceType: 'AllergyIntolerance', clinicalStatus: ACTIVE_ALLERGY, code: { coding: [{ system: SCT, code: '256349002', display: 'Peanut' }] },
      reaction: [
        { manifestation: [{ coding: [{ system: SCT, code: '39579001', display: 'Anaphylaxis' }] }, { text: 'Hives' }], severity: 'severe', onset: '2001-06-01', exposureRoute: { text: 'Oral' }, description: 'Throat closing within minutes' },
        { manifestation: [{ coding: [{ system: SCT, code: '271807003' }] }], severity: 'mild' },
      ],
    });
    expect((await record('allergies', allergy)).reaction_list).toEqual([
      { manifestations: 'Anaphylaxis, Hives', severity: 'severe', onset_at: '2001-06-01', description: 'Throat closing within minutes', exposure_route: 'Oral', exposure_route_code: null, exposure_route_system: null, substance: null, substance_code: null, substance_system: null, substance_codings: [], note: null },
      { manifestations: '271807003', severity: 'mild', onset_at: null, description: null, exposure_route: null, exposure_route_code: null, exposure_route_system: null, substance: null, substance_code: null, substance_system: null, substance_codings: [], note: null },
    ]);
    // A document held inline without its size says it is inline, beside the one at a url.
    const document = await post({
      resourceType: 'DocumentReference', status: 'current', type: { text: 'Discharge letter' },
      content: [{ attachment: { contentType: 'text/plain', data: Buffer.from('Discharged home.').toString('base64') } }, { attachment: { contentType: 'application/pdf', url: 'https://ehr.example/docs/1.pdf' } }],
    });
    expect(await record('documents', document)).toMatchObject({ inline: true, contents: [{ content_type: 'text/plain', inline: true, size: null }, { url: 'https://ehr.example/docs/1.pdf', inline: null }] });
    expect((await record('clinical_notes', note)).sections).toBe('Clinical course: Operation: Laparoscopic appendectomy\nPost-op: Wound infection day 2, started flucloxacillin\n\nMedications on discharge: Flucloxacillin 500 mg');
  });

  it('12. the summary’s blood group and the lab record of the same coded-only Observation agree', async () => {
    const id = await post({
      resourceType: 'Observation', status: 'final', category: [LAB], code: { coding: [{ system: LOINC, code: '882-1', display: 'ABO and Rh group [Type] in Blood' }] },
      effectiveDateTime: '2024-03-12T08:00:00Z', valueCodeableConcept: { coding: [{ system: SCT, code: '278149003', display: 'Blood group A Rh(D) positive' }] },
    });
    expect(await record('lab_results', id)).toMatchObject({ test_name: 'ABO and Rh group [Type] in Blood', value_coded: 'Blood group A Rh(D) positive' });
    const summary = await call(reader, `/api/v1/sdk/patients/${healthId}/summary`);
    expect(summary.status, JSON.stringify(summary.body)).toBe(200);
    expect(summary.body.patient.blood_group).toBe('A+');
  });

  it('the summary’s blood group is the newest result that stands: one entered in error or cancelled after it does not count', async () => {
    const group = (status: string, at: string, text: string) =>
      post({ resourceType: 'Observation', status, category: [LAB], code: { coding: [{ system: LOINC, code: '882-1' }] }, effectiveDateTime: at, valueCodeableConcept: { text } });
    await group('final', '2024-06-01T08:00:00Z', 'O Rh(D) negative');
    await group('entered-in-error', '2024-07-01T08:00:00Z', 'B Rh(D) positive');
    await group('cancelled', '2024-08-01T08:00:00Z', 'AB Rh(D) negative');
    const summary = await call(reader, `/api/v1/sdk/patients/${healthId}/summary`);
    expect(summary.status, JSON.stringify(summary.body)).toBe(200);
    expect(summary.body.patient.blood_group).toBe('O-');
  });

  it('12. a pushed decision-support alert and its encounter note read back through Connect', async () => {
    const res = await call(sdk, '/api/v1/sdk/records/encounters', {
      method: 'POST',
      json: { health_id: healthId, encounter_type: 'cdss_alert', alert_type: 'drug_interaction', severity: 'high', cdss_rule_id: 'R-12', clinical_note: 'Warfarin with aspirin' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(await record('visits', res.body.encounter_id)).toMatchObject({ type: 'cdss_alert', note: 'Warfarin with aspirin' });
    expect(await record('alerts', res.body.detected_issue_id)).toMatchObject({ alert_type: 'drug_interaction', severity: 'high', cdss_rule_id: 'R-12', detail: 'Warfarin with aspirin', encounter_id: res.body.encounter_id });
  });
});
