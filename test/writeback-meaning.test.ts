import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * A record read from FHIR and pushed back through the map it was read with must not change meaning: a reason given by
 * reference alone stays one reason; an age range in a UCUM unit of time is written with its UCUM code; a measurement
 * the patient made still says so. Through HTTP against the real app and store.
 */
let pont: TestServer;
let operator: TestClient;
let reader: TestClient;
let sdk: TestClient;
let healthId: string;

const call = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(path, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });

async function put(resource: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await call(operator, `/api/fhir/R4/${resource.resourceType}/${resource.id}`, { method: 'PUT', json: resource });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

async function recordOf(type: string, id: string): Promise<Record<string, any>> {
  const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=${type}&limit=1000`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const record = res.body.records[type].find((r: any) => r.id === id);
  expect(record, `${id} is a ${type} record`).toBeDefined();
  return record;
}

beforeAll(async () => {
  pont = await startTestServer();
  operator = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-operator', allPatients: true });
  reader = await createTestClient(pont, ['consents:write', 'patient:diagnostics:read', 'patients:read', 'labs:read'], { organizationId: 'org-reader' });
  sdk = await createTestClient(pont, ['labs:write', 'encounters:write', 'labs:read', 'patients:read'], { organizationId: 'org-reader' });
  const patient = await put({ resourceType: 'Patient', id: 'wb-1', name: [{ use: 'official', family: 'Otieno', given: ['Achieng'] }], gender: 'female', birthDate: '1980-02-01' });
  healthId = patient.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
  await put({ resourceType: 'Patient', id: 'wb-other', name: [{ family: 'Kamau' }], gender: 'male', birthDate: '1975-03-04' });
  const expires_at = new Date(Date.now() + 365 * 86_400_000).toISOString();
  expect((await call(reader, `/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at } })).status).toBe(201);
}, 120_000);
afterAll(async () => {
  await pont?.close();
});

describe('a visit whose reason is given by reference alone', () => {
  it('is pushed back with the one reason, its reference, not also the Condition’s name as a reason in words', async () => {
    await put({ resourceType: 'Condition', id: 'wb-htn', subject: { reference: 'Patient/wb-1' }, code: { text: 'Hypertension' } });
    await put({
      resourceType: 'Encounter', id: 'wb-enc-1', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
      subject: { reference: 'Patient/wb-1' }, reasonReference: [{ reference: 'Condition/wb-htn' }],
    });
    const record = await recordOf('visits', 'wb-enc-1');
    expect(record).toMatchObject({ reason: 'Hypertension', reasons: [], reason_references: ['Condition/wb-htn'], reasons_referenced: 'Hypertension' });
    const pushed = await call(sdk, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Encounter/${pushed.body.encounter_id}`)).body;
    expect(written.reasonReference).toEqual([{ reference: 'Condition/wb-htn' }]);
    expect(written.reasonCode).toBeUndefined();
    // The reason is held as the name of the Condition referenced, as read: said, as every name read from another
    // resource is, not written as words of its own.
    expect(pushed.body.not_written).toEqual(['reason', 'reasons_referenced']);
    // Read again, the pushed visit is the record it was pushed from.
    expect(await recordOf('visits', pushed.body.encounter_id)).toMatchObject({ reason: 'Hypertension', reasons: [], reason_references: ['Condition/wb-htn'] });
  });

  it('a reason in words beside a reference to something else is still written: two reasons stay two', async () => {
    const pushed = await call(sdk, '/api/v1/sdk/records/encounters', {
      method: 'POST',
      json: { health_id: healthId, record: { class: 'AMB', status: 'finished', reason: 'chest pain', reason_references: ['Condition/wb-htn'] } },
    });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Encounter/${pushed.body.encounter_id}`)).body;
    expect(written.reasonCode).toEqual([{ text: 'chest pain' }]);
    expect(written.reasonReference).toEqual([{ reference: 'Condition/wb-htn' }]);
  });

  it('a Connect integrator’s reason in words alone is written as the reason', async () => {
    const pushed = await call(sdk, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, record: { class: 'AMB', status: 'finished', reason: 'chest pain' } } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    expect(pushed.body.not_written).toEqual([]);
    const written = (await call(operator, `/api/fhir/R4/Encounter/${pushed.body.encounter_id}`)).body;
    expect(written.reasonCode).toEqual([{ text: 'chest pain' }]);
    expect(written.reasonReference).toBeUndefined();
  });
});

describe('a pushed reference range for an age, without age_unit_code', () => {
  const UCUM = 'http://unitsofmeasure.org';
  /** A reference range as the record shape has it (every field there, null when not said), with these values. */
  const range = (given: Record<string, unknown>) => ({
    low: null, high: null, unit: 'g/dL', unit_code: 'g/dL', text: null, type: null, type_codings: [], type_text: null, applies_to: null, applies_to_concepts: [],
    age_low: null, age_high: null, age_unit: null, age_unit_code: null, ...given,
  });
  it('in a UCUM unit of time (a) is written with its UCUM code; in its words (years) keeps the words and gets the code; other words stay words', async () => {
    const record = {
      test_name: 'Hemoglobin', status: 'final', effective_at: '2026-10-01T08:00:00Z', value_numeric: 12.1, unit: 'g/dL', unit_code: 'g/dL',
      reference_ranges: [
        range({ low: 11.5, high: 15.5, age_low: 6, age_high: 12, age_unit: 'a' }),
        range({ low: 12, high: 16, age_low: 12, age_high: 18, age_unit: 'years' }),
        range({ low: 9.5, high: 13.5, age_low: 0, age_high: 6, age_unit: 'mo' }),
        range({ low: 13, high: 17, age_low: 18, age_unit: 'yrs' }),
      ],
    };
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body;
    expect(written.referenceRange.map((r: any) => r.age)).toEqual([
      { low: { value: 6, unit: 'a', system: UCUM, code: 'a' }, high: { value: 12, unit: 'a', system: UCUM, code: 'a' } },
      { low: { value: 12, unit: 'years', system: UCUM, code: 'a' }, high: { value: 18, unit: 'years', system: UCUM, code: 'a' } },
      { low: { value: 0, unit: 'mo', system: UCUM, code: 'mo' }, high: { value: 6, unit: 'mo', system: UCUM, code: 'mo' } },
      { low: { value: 18, unit: 'yrs' } },
    ]);
    // What was pushed and what was written agree: the code added is no change of meaning to report.
    expect(pushed.body.not_written).toEqual([]);
    const back = await recordOf('lab_results', pushed.body.lab_result_id);
    expect(back.reference_ranges.map((r: any) => [r.age_unit, r.age_unit_code])).toEqual([['a', 'a'], ['years', 'a'], ['mo', 'mo'], ['yrs', null]]);
  });

  it('an age_unit_code given is kept as given, never replaced', async () => {
    const record = {
      test_name: 'Hemoglobin', status: 'final', effective_at: '2026-10-01T08:00:00Z', value_numeric: 12.1, unit: 'g/dL', unit_code: 'g/dL',
      reference_ranges: [range({ low: 11.5, high: 15.5, age_low: 72, age_high: 144, age_unit: 'months', age_unit_code: 'mo' })],
    };
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body;
    expect(written.referenceRange[0].age).toEqual({ low: { value: 72, unit: 'months', system: UCUM, code: 'mo' }, high: { value: 144, unit: 'months', system: UCUM, code: 'mo' } });
  });
});

describe('a result the patient measured themselves (patient-generated data)', () => {
  const LAB = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] };
  const selfTest = (id: string, performer: Array<Record<string, string>>) => ({
    resourceType: 'Observation', id, status: 'final', category: [LAB], code: { coding: [{ system: 'http://loinc.org', code: '2339-0' }], text: 'Glucose' },
    subject: { reference: 'Patient/wb-1' }, effectiveDateTime: '2026-10-02T07:00:00Z', valueQuantity: { value: 5.9, unit: 'mmol/L', system: 'http://unitsofmeasure.org', code: 'mmol/L' }, performer,
  });

  it('reads performed_by_patient true, and pushed back still names the patient as its performer', async () => {
    await put(selfTest('wb-self-1', [{ reference: 'Patient/wb-1' }]));
    const record = await recordOf('lab_results', 'wb-self-1');
    expect(record.performed_by_patient).toBe(true);
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body;
    expect(written.performer).toEqual([{ reference: 'Patient/wb-1' }]);
    expect((await recordOf('lab_results', pushed.body.lab_result_id)).performed_by_patient).toBe(true);
  });

  it('a result someone else performed reads null and is pushed back with no performer (the others are read only)', async () => {
    await put({ resourceType: 'Practitioner', id: 'wb-nurse', name: [{ family: 'Wanjiru' }] });
    await put(selfTest('wb-clinic-1', [{ reference: 'Practitioner/wb-nurse' }]));
    const record = await recordOf('lab_results', 'wb-clinic-1');
    expect(record.performed_by_patient).toBeNull();
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    expect((await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body.performer).toBeUndefined();
  });

  it('a push cannot make the performer another patient: performed_by_patient names the Health ID’s patient, whatever else the record says', async () => {
    const record = { ...(await recordOf('lab_results', 'wb-self-1')), id: undefined };
    // Another patient's id as the record's patient: refused, nothing written.
    const other = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: { ...record, patient_id: 'wb-other' } } });
    expect(other.status, JSON.stringify(other.body)).toBe(422);
    expect(other.body.details).toEqual([expect.objectContaining({ field: 'record.patient_id' })]);
    // Another patient among the performer references (read only), or no patient_id at all: the performer written is
    // the Health ID's patient alone.
    for (const given of [{ performer_references: ['Patient/wb-other'] }, { patient_id: null, performer_references: ['Patient/wb-other', 'Patient/wb-1'] }]) {
      const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: { ...record, ...given } } });
      expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
      const written = (await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body;
      expect(written.subject).toEqual({ reference: 'Patient/wb-1' });
      expect(written.performer).toEqual([{ reference: 'Patient/wb-1' }]);
      expect(pushed.body.not_written).toContain('performer_references');
    }
    // Without performed_by_patient, no performer at all.
    const without = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: { ...record, performed_by_patient: null } } });
    expect(without.status, JSON.stringify(without.body)).toBe(201);
    expect((await call(operator, `/api/fhir/R4/Observation/${without.body.lab_result_id}`)).body.performer).toBeUndefined();
  });
});
