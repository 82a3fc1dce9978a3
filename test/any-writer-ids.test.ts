import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { schemaProblems } from './published-schema';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * Issue 38, item 1: ids are FHIR ids. A patient another system registered as `Patient/123` (loaded with PUT, as an
 * operator loads a FHIR-native app's data) reads through Connect with its own ids and receives the SDK's pushes.
 * Before, records described ids as uuids and every push for such a patient was refused (422 `patient_id: "123" is
 * not a valid uuid`).
 */
let pont: TestServer;
let operator: TestClient;
let reader: TestClient;
let sdk: TestClient;
let healthId: string;
let doc: Record<string, unknown>;

const call = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(path, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
const LAB = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] };

async function put(resource: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await call(operator, `/api/fhir/R4/${resource.resourceType}/${resource.id}`, { method: 'PUT', json: resource });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

beforeAll(async () => {
  pont = await startTestServer();
  operator = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-operator', allPatients: true });
  reader = await createTestClient(pont, ['consents:write', 'patient:diagnostics:read', 'patients:read', 'labs:read', 'prescriptions:read'], { organizationId: 'org-reader' });
  sdk = await createTestClient(pont, ['labs:write', 'encounters:write', 'labs:read', 'patients:read'], { organizationId: 'org-reader' });
  const patient = await put({ resourceType: 'Patient', id: '123', name: [{ use: 'official', family: 'Mbah', given: ['Eyong'] }], gender: 'male', birthDate: '1971-05-01' });
  healthId = patient.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
  await put({ resourceType: 'Encounter', id: 'enc.7', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: 'Patient/123' } });
  await put({
    resourceType: 'Observation', id: '1', status: 'final', category: [LAB], code: { text: 'Glucose' }, subject: { reference: 'Patient/123' },
    encounter: { reference: 'Encounter/enc.7' }, effectiveDateTime: '2026-01-05T08:00:00Z', valueQuantity: { value: 5.4, unit: 'mmol/L' },
  });
  const expires_at = new Date(Date.now() + 365 * 86_400_000).toISOString();
  expect((await call(reader, `/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at } })).status).toBe(201);
  doc = (await pont.json('/api/openapi.json')).body;
}, 120_000);
afterAll(async () => {
  await pont?.close();
});

describe('FHIR ids, not uuids', () => {
  it('records carry the writer’s ids, and the published shape describes them as FhirId', async () => {
    const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=all`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [lab] = res.body.records.lab_results;
    expect(lab).toMatchObject({ id: '1', patient_id: '123', visit_id: 'enc.7' });
    expect(res.body.records.visits[0]).toMatchObject({ id: 'enc.7', patient_id: '123' });
    expect(schemaProblems({ $ref: 'LabResult' }, lab, doc)).toEqual([]);
    const schemas = (doc as any).components.schemas;
    expect(schemas.FhirId).toMatchObject({ type: 'string', format: 'fhir-id', pattern: '^[A-Za-z0-9\\-.]{1,64}$' });
    expect(schemas.LabResult.properties.patient_id).toEqual({ anyOf: [{ $ref: '#/components/schemas/FhirId' }, { type: 'null' }] });
    expect(JSON.stringify(schemas)).not.toMatch(/"uuid"/);
  });

  it('the SDK pushes a lab result and an encounter for a patient another system registered', async () => {
    const lab = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, test_name: 'Potassium', result_value: '4.1', unit: 'mmol/L', flagged: false } });
    expect(lab.status, JSON.stringify(lab.body)).toBe(201);
    const written = await call(operator, `/api/fhir/R4/Observation/${lab.body.lab_result_id}`);
    expect(written.body.subject).toEqual({ reference: 'Patient/123' });
    const visit = await call(sdk, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, encounter_type: 'consultation' } });
    expect(visit.status, JSON.stringify(visit.body)).toBe(201);
    expect((await call(operator, `/api/fhir/R4/Encounter/${visit.body.encounter_id}`)).body.subject).toEqual({ reference: 'Patient/123' });
  });
});

describe('a medication coded without a display', () => {
  it('is named by its code (the concept’s text, else its display, else its code), given as a concept or as a Medication', async () => {
    const RX = 'http://www.nlm.nih.gov/research/umls/rxnorm';
    await put({ resourceType: 'Medication', id: 'med-coded', code: { coding: [{ system: RX, code: '861004' }] } });
    const request = (id: string, medication: Record<string, unknown>) => ({ resourceType: 'MedicationRequest', id, status: 'active', intent: 'order', subject: { reference: 'Patient/123' }, authoredOn: '2026-01-07', ...medication });
    await put(request('mr-coded', { medicationCodeableConcept: { coding: [{ system: RX, code: '314076' }] } }));
    await put(request('mr-ref', { medicationReference: { reference: 'Medication/med-coded' } }));
    const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=prescriptions&limit=1000`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const byId = Object.fromEntries(res.body.records.prescriptions.map((r: any) => [r.id, r]));
    expect(byId['mr-coded']).toMatchObject({ medication: '314076', medication_code: '314076' });
    expect(byId['mr-ref']).toMatchObject({ medication: '861004', medication_code: '861004' });
  });
});

describe('a result with ranges in two units', () => {
  it('shows the range in the value’s unit, not a band in words in another unit (200 mg/dL "desirable" says nothing of 5.2 mmol/L)', async () => {
    const U = 'http://unitsofmeasure.org';
    await put({
      resourceType: 'Observation', id: 'chol-1', status: 'final', category: [LAB], code: { coding: [{ system: 'http://loinc.org', code: '2093-3' }] }, subject: { reference: 'Patient/123' },
      effectiveDateTime: '2026-01-08T09:00:00Z', valueQuantity: { value: 5.2, unit: 'mmol/L', system: U, code: 'mmol/L' },
      referenceRange: [{ high: { value: 200, unit: 'mg/dL', system: U, code: 'mg/dL' }, text: 'desirable' }, { high: { value: 5.2, unit: 'mmol/L', system: U, code: 'mmol/L' } }],
    });
    const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`);
    expect(res.body.records.lab_results.find((r: any) => r.id === 'chol-1')).toMatchObject({ reference_high: 5.2, reference_range_unit: 'mmol/L' });
  });
});

describe('an allergy with several reactions', () => {
  it('is as severe as its gravest reaction (a mild nausea, then an anaphylaxis: severe), in its record as in the summary, which reads the same map', async () => {
    const SCT = 'http://snomed.info/sct';
    await put({
      resourceType: 'AllergyIntolerance', id: 'alg-2', patient: { reference: 'Patient/123' }, code: { coding: [{ system: SCT, code: '764146007' }] },
      clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }] },
      reaction: [{ manifestation: [{ coding: [{ system: SCT, code: '422587007' }] }], severity: 'mild' }, { manifestation: [{ coding: [{ system: SCT, code: '39579001' }] }], severity: 'severe' }],
    });
    const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=allergies&limit=1000`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.records.allergies.find((r: any) => r.id === 'alg-2')).toMatchObject({ severity: 'severe' });
  });
});

describe('several notes', () => {
  it('are all carried, each on its line (a diagnosis, a lab result): the second note was the one that said "do not prescribe"', async () => {
    const notes = [{ text: 'Diet controlled' }, { text: 'Allergic to metformin: do not prescribe' }];
    await put({ resourceType: 'Condition', id: 'cond-notes', subject: { reference: 'Patient/123' }, code: { text: 'Type 2 diabetes' }, note: notes,
      clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }] } });
    await put({ resourceType: 'Observation', id: 'obs-notes', status: 'final', category: [LAB], code: { text: 'HbA1c' }, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-01-09T08:00:00Z', valueQuantity: { value: 7.1, unit: '%' }, note: notes });
    const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=all&limit=1000`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const joined = 'Diet controlled\nAllergic to metformin: do not prescribe';
    expect(res.body.records.diagnoses.find((r: any) => r.id === 'cond-notes')).toMatchObject({ note: joined });
    expect(res.body.records.lab_results.find((r: any) => r.id === 'obs-notes')).toMatchObject({ note: joined });
  });
});

describe('references to another server', () => {
  it('are no ids of ours: another EHR’s Encounter/enc.7 is not read as ours, which shares its id; ours written absolute is', async () => {
    const base = (await call(operator, '/api/fhir/R4/metadata')).body.implementation.url as string;
    const result = (id: string, encounter: string) => ({
      resourceType: 'Observation', id, status: 'final', category: [LAB], code: { text: 'Creatinine' }, subject: { reference: 'Patient/123' },
      encounter: { reference: encounter }, effectiveDateTime: '2026-01-06T08:00:00Z', valueQuantity: { value: 1.1, unit: 'mg/dL' },
    });
    await put(result('ext-1', 'https://other-ehr.example/fhir/Encounter/enc.7'));
    await put(result('ext-2', `${base}/Encounter/enc.7/_history/1`));
    const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const byId = Object.fromEntries(res.body.records.lab_results.map((r: any) => [r.id, r]));
    expect(byId['ext-1']).toMatchObject({ visit_id: null });
    expect(byId['ext-2']).toMatchObject({ visit_id: 'enc.7' });
    // Pushed back, the record names no encounter: nothing of the other server becomes a local reference.
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: byId['ext-1'] } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    expect((await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body.encounter).toBeUndefined();
  });

  it('name our patient whatever form the writer chose: a subject written as our absolute URL is found by patient= and read as a record', async () => {
    const base = (await call(operator, '/api/fhir/R4/metadata')).body.implementation.url as string;
    for (const [id, subject] of [['abs-1', `${base}/Patient/123`], ['abs-2', `${base}/Patient/123/_history/1`]] as const)
      await put({
        resourceType: 'Observation', id, status: 'final', category: [LAB], code: { text: 'Sodium' }, subject: { reference: subject },
        effectiveDateTime: '2026-01-07T08:00:00Z', valueQuantity: { value: 139, unit: 'mmol/L' },
      });
    const found = await call(operator, '/api/fhir/R4/Observation?patient=123&code:text=Sodium');
    expect(found.body.entry?.map((e: any) => e.resource.id).sort()).toEqual(['abs-1', 'abs-2']);
    const compartment = await call(operator, '/api/fhir/R4/Patient/123/Observation?code:text=Sodium');
    expect(compartment.body.entry?.map((e: any) => e.resource.id).sort()).toEqual(['abs-1', 'abs-2']);
    const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`);
    expect(res.body.records.lab_results.map((r: any) => r.id)).toEqual(expect.arrayContaining(['abs-1', 'abs-2']));
    expect(res.body.records.lab_results.find((r: any) => r.id === 'abs-1')).toMatchObject({ patient_id: '123' });
  });
});

/** What a clinician relies on in a result, as FHIR holds it: compared before and after a write-back. */
const clinical = (o: Record<string, any>) => ({
  status: o.status,
  code: (o.code?.coding ?? []).map((c: any) => `${c.system}|${c.code}`),
  effective: o.effectiveDateTime ?? o.effectivePeriod,
  quantity: o.valueQuantity && { value: o.valueQuantity.value, unit: o.valueQuantity.unit, code: o.valueQuantity.code, comparator: o.valueQuantity.comparator },
  coded: (o.valueCodeableConcept?.coding ?? []).map((c: any) => `${c.system}|${c.code}`),
  interpretation: (o.interpretation ?? []).flatMap((i: any) => i.coding ?? []).map((c: any) => `${c.system}|${c.code}`),
  ranges: (o.referenceRange ?? []).map((r: any) => ({ low: r.low?.value, high: r.high?.value, text: r.text })),
});

describe('write-back keeps meaning (issue 38 item 5)', () => {
  /** Loads `resource` as another system wrote it, reads its lab record, pushes the record back; the FHIR written. */
  async function roundTrip(resource: Record<string, any>): Promise<{ record: Record<string, any>; written: Record<string, any>; pushed: Record<string, any> }> {
    await put({ ...resource, subject: { reference: 'Patient/123' } });
    const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`);
    const record = res.body.records.lab_results.find((r: any) => r.id === resource.id);
    expect(record, `${resource.id} is a lab record`).toBeDefined();
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body;
    return { record, written, pushed: pushed.body };
  }

  it('a coded, reactive, corrected result with a text range and a date only comes back as it was', async () => {
    const original = {
      resourceType: 'Observation', id: 'hiv-2', status: 'corrected', category: [LAB],
      code: { coding: [{ system: 'http://loinc.org', code: '7918-6' }] }, effectiveDateTime: '2026-10-01',
      valueCodeableConcept: { coding: [{ system: 'http://snomed.info/sct', code: '11214006', display: 'Reactive' }] },
      interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'RR' }] }],
      referenceRange: [{ text: 'NEGATIVE' }],
    };
    const { written, pushed } = await roundTrip(original);
    expect(clinical(written)).toEqual(clinical(original));
    expect(pushed).toMatchObject({ flag: 'RR', flagged: true });
  });

  it("a result's notes keep their authors and a timing its times when pushed back; a note given two authors or an author that names nothing is a 422, never a 500", async () => {
    await put({ resourceType: 'Practitioner', id: 'dr.9', name: [{ family: 'Deshpande', given: ['Anjali'] }] });
    const original = {
      resourceType: 'Observation', id: 'gluc-3', status: 'final', category: [LAB], code: { coding: [{ system: 'http://loinc.org', code: '2345-7' }] },
      effectiveTiming: { event: ['2026-10-01T07:30:00+05:30', '2026-10-01T13:30:00+05:30'], code: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-GTSAbbreviation', code: 'BID' }] } },
      valueQuantity: { value: 6.1, unit: 'mmol/L' },
      note: [{ authorReference: { reference: 'Practitioner/dr.9' }, time: '2026-10-01T14:00:00+05:30', text: 'Told Dr Deshpande' }, { authorString: 'Ward nurse', text: 'Fasting' }],
    };
    const { record, written, pushed } = await roundTrip(original);
    // The notes were written whole (their authors by reference): not said to be otherwise.
    expect(pushed.not_written).not.toContain('notes');
    expect(record.notes).toEqual([
      { text: 'Told Dr Deshpande', author: 'Anjali Deshpande', author_string: null, author_reference: 'Practitioner/dr.9', time: '2026-10-01T14:00:00+05:30' },
      { text: 'Fasting', author: 'Ward nurse', author_string: 'Ward nurse', author_reference: null, time: null },
    ]);
    expect(written.note).toEqual(original.note);
    expect(written.effectiveTiming).toEqual(original.effectiveTiming);
    expect(written.effectiveDateTime).toBeUndefined();
    // Two authors for one note (FHIR allows one): the record's fault, said as FHIR says it.
    const twoAuthors = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: { ...record, notes: [{ ...record.notes[0], author_string: 'Someone else' }, record.notes[1]] } } });
    expect(twoAuthors.status, JSON.stringify(twoAuthors.body)).toBe(422);
    expect(twoAuthors.body.details[0].message).toContain('Only one author[x] may be given');
    // An author that names nothing the pusher may see: the field named, nothing written.
    const nobody = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: { ...record, notes: [{ ...record.notes[0], author_reference: 'Patient/nobody-here' }, record.notes[1]] } } });
    expect(nobody.status, JSON.stringify(nobody.body)).toBe(422);
    expect(nobody.body.details[0].field).toBe('record.notes[0].author_reference');
    // No time at all: a result without an effective time, as the push's own fields allow.
    const untimed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: { ...record, effective_events: [], effective_at: null, effective_timing_code: null, effective_timing_system: null } } });
    expect(untimed.status, JSON.stringify(untimed.body)).toBe(201);
    expect((await call(operator, `/api/fhir/R4/Observation/${untimed.body.lab_result_id}`)).body.effectiveTiming).toBeUndefined();
  });

  it('a result without interpretation gets none (no invented N), and keeps its UCUM code', async () => {
    const original = {
      resourceType: 'Observation', id: 'k-3', status: 'amended', category: [LAB], code: { coding: [{ system: 'http://loinc.org', code: '2823-3' }] },
      effectiveDateTime: '2026-10-02T07:30:00+01:00', valueQuantity: { value: 4.2, unit: 'mmol/L', system: 'http://unitsofmeasure.org', code: 'mmol/L' },
    };
    const { written, pushed } = await roundTrip(original);
    expect(clinical(written)).toEqual(clinical(original));
    expect(written.interpretation).toBeUndefined();
    expect(pushed).toMatchObject({ flag: null, flagged: null });
  });

  it('the push’s own fields need no flagged, take any lab status and a date alone; record and fields are not mixed', async () => {
    const res = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, test_name: 'Sodium', result_value: '139', unit: 'mmol/L', status: 'corrected', effective_at: '2026-10-03' } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Observation/${res.body.lab_result_id}`)).body;
    expect(written).toMatchObject({ status: 'corrected', effectiveDateTime: '2026-10-03' });
    expect(written.interpretation).toBeUndefined();
    const mixed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: { test_name: 'x', status: 'final' }, test_name: 'Sodium' } });
    expect(mixed.status).toBe(422);
    const neither = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId } });
    expect(neither.status).toBe(422);
    const otherPatient = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: { patient_id: 'someone-else', test_name: 'x', status: 'final' } } });
    expect(otherPatient.status).toBe(422);
    expect(JSON.stringify(otherPatient.body)).toMatch(/record\.patient_id/);
  });

  it('an organisation without rights pushes a record no more than the push’s own fields: same refusal, nothing written', async () => {
    const stranger = await createTestClient(pont, ['labs:write', 'encounters:write'], { organizationId: 'org-stranger' });
    const count = async () => (await call(operator, '/api/fhir/R4/Observation?subject=Patient/123&_summary=count')).body.total;
    const before = await count();
    const own = await call(stranger, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, test_name: 'Sodium', result_value: '139' } });
    const whole = await call(stranger, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: { test_name: 'Sodium', value: '139', status: 'final' } } });
    expect(own.status).toBeGreaterThanOrEqual(400);
    expect([whole.status, whole.body.error_code]).toEqual([own.status, own.body.error_code]);
    expect(await count()).toBe(before);
    // A visit too, given by its date alone (a form the push takes since stop 83): refused alike, nothing written, and
    // the answer names nothing of the patient's.
    const visits = async () => (await call(operator, '/api/fhir/R4/Encounter?subject=Patient/123&_summary=count')).body.total;
    const visitsBefore = await visits();
    const visit = await call(stranger, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, encounter_type: 'consultation', reason: 'Paludisme', started_at: '2026-11-20' } });
    expect([visit.status, visit.body.error_code]).toEqual([own.status, own.body.error_code]);
    expect(JSON.stringify(visit.body)).not.toMatch(/Patient\/123|Mbah|Eyong/);
    expect(await visits()).toBe(visitsBefore);
  });

  it('an encounter record pushed back keeps its class, type codes and period, and gets no invented start', async () => {
    await put({
      resourceType: 'Encounter', id: 'enc-9', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' },
      type: [{ coding: [{ system: 'http://snomed.info/sct', code: '183452005' }], text: 'Emergency hospital admission' }], subject: { reference: 'Patient/123' },
    });
    const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=visits`);
    const record = res.body.records.visits.find((r: any) => r.id === 'enc-9');
    const pushed = await call(sdk, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Encounter/${pushed.body.encounter_id}`)).body;
    expect(written.class).toEqual({ system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' });
    expect(written.period).toBeUndefined();
    expect(written.status).toBe('finished');
  });

  it("a visit pushed back keeps its places, diagnoses, length, service and parent visit; none of them may name another patient's data or nothing", async () => {
    await put({ resourceType: 'Location', id: 'ward-4', status: 'active', name: 'Ward 4' });
    await put({ resourceType: 'Condition', id: 'cond.8', subject: { reference: 'Patient/123' }, code: { text: 'Pneumonia' } });
    await put({
      resourceType: 'Encounter', id: 'enc.8', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' }, subject: { reference: 'Patient/123' },
      partOf: { reference: 'Encounter/enc.7' }, serviceType: { coding: [{ system: 'http://snomed.info/sct', code: '394579002' }] }, length: { value: 46, unit: 'h', system: 'http://unitsofmeasure.org', code: 'h' },
      diagnosis: [{ condition: { reference: 'Condition/cond.8' }, use: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/diagnosis-role', code: 'AD' }] }, rank: 1 }],
      location: [{ location: { reference: 'Location/ward-4' }, status: 'completed', period: { start: '2026-01-05T08:00:00Z', end: '2026-01-07T06:00:00Z' } }],
    });
    const record = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=visits`)).body.records.visits.find((r: any) => r.id === 'enc.8');
    const pushed = await call(sdk, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Encounter/${pushed.body.encounter_id}`)).body;
    expect(written.partOf).toEqual({ reference: 'Encounter/enc.7' });
    expect(written.serviceType.coding).toEqual([{ system: 'http://snomed.info/sct', code: '394579002' }]);
    expect(written.length).toEqual({ value: 46, unit: 'h', system: 'http://unitsofmeasure.org', code: 'h' });
    expect(written.diagnosis).toEqual([{ condition: { reference: 'Condition/cond.8', display: 'Pneumonia' }, use: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/diagnosis-role', code: 'AD' }] }, rank: 1 }]);
    expect(written.location).toEqual([{ location: { reference: 'Location/ward-4', display: 'Ward 4' }, status: 'completed', period: { start: '2026-01-05T08:00:00Z', end: '2026-01-07T06:00:00Z' } }]);
    // Another patient's visit and condition, and what does not exist: refused (422, the field named), nothing written.
    const other = await put({ resourceType: 'Patient', id: '456', name: [{ family: 'Other', given: ['Ann'] }] });
    expect(other.id).toBe('456');
    await put({ resourceType: 'Encounter', id: 'enc.other', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: 'Patient/456' } });
    await put({ resourceType: 'Condition', id: 'cond.other', subject: { reference: 'Patient/456' }, code: { text: 'Secret' } });
    const before = (await call(operator, '/api/fhir/R4/Encounter?subject=Patient/123&_summary=count')).body.total;
    for (const bad of [
      { ...record, part_of_id: 'enc.other' },
      { ...record, part_of_id: 'nothing-here' },
      { ...record, diagnoses: [{ ...record.diagnoses[0], condition_reference: 'Condition/cond.other' }] },
      { ...record, diagnoses: [{ ...record.diagnoses[0], condition_reference: 'Condition/nothing-here' }] },
      { ...record, locations: [{ ...record.locations[0], location_reference: 'Location/nothing-here' }] },
      // Words where a reference goes: named as the field, not stored (it named nothing anyone could resolve).
      { ...record, diagnoses: [{ ...record.diagnoses[0], condition_reference: 'the pneumonia above' }] },
      { ...record, locations: [{ ...record.locations[0], location_reference: 'x'.repeat(20_000) }] },
    ]) {
      const res = await call(sdk, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, record: bad } });
      expect(res.status, JSON.stringify(bad).slice(0, 300) + ' ' + JSON.stringify(res.body)).toBe(422);
      expect(res.body.details?.[0]?.field).toMatch(/^record\.(part_of_id|diagnoses\[0\]\.condition_reference|locations\[0\]\.location_reference)$/);
      expect(JSON.stringify(res.body)).not.toContain('Secret');
    }
    expect((await call(operator, '/api/fhir/R4/Encounter?subject=Patient/123&_summary=count')).body.total).toBe(before);
  });

  it('the reference range is never another population’s when one for everyone is given: by sex written in words, by an age that is not the patient’s', async () => {
    const g = (value: number) => ({ value, unit: 'g/dL', system: 'http://unitsofmeasure.org', code: 'g/dL' });
    const u = (value: number) => ({ value, unit: 'ug/dL', system: 'http://unitsofmeasure.org', code: 'ug/dL' });
    const years = (value: number) => ({ value, unit: 'a', system: 'http://unitsofmeasure.org', code: 'a' });
    // Patient/123 is a man born in 1971.
    await put({
      resourceType: 'Observation', id: 'hb-sex', status: 'final', category: [LAB], code: { coding: [{ system: 'http://loinc.org', code: '718-7' }] }, subject: { reference: 'Patient/123' },
      effectiveDateTime: '2026-04-01T08:00:00Z', valueQuantity: g(13),
      referenceRange: [{ low: g(12), high: g(15.5), appliesTo: [{ text: 'Female' }] }, { low: g(13.5), high: g(17.5), appliesTo: [{ text: 'Male' }] }],
    });
    await put({
      resourceType: 'Observation', id: 'lead-age', status: 'final', category: [LAB], code: { coding: [{ system: 'http://loinc.org', code: '5671-3' }] }, subject: { reference: 'Patient/123' },
      effectiveDateTime: '2026-04-01T08:00:00Z', valueQuantity: u(4),
      referenceRange: [{ high: u(3.5), age: { low: years(1), high: years(6) } }, { high: u(5) }],
    });
    const records = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results;
    expect(records.find((r: any) => r.id === 'hb-sex')).toMatchObject({ reference_low: 13.5, reference_high: 17.5 });
    expect(records.find((r: any) => r.id === 'lead-age')).toMatchObject({ reference_low: null, reference_high: 5 });
  });

  it('a result two sources select (listed by a report with a lab category and a LOINC panel code) is one record, on every page', async () => {
    const result = (id: string, code: string, at: string) => ({
      resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: 'http://loinc.org', code }] }, subject: { reference: 'Patient/123' }, effectiveDateTime: at, valueQuantity: { value: 1, unit: 'mmol/L' },
    });
    await put(result('bmp-na', '2951-2', '2026-03-02T08:00:00Z'));
    await put(result('bmp-k', '2823-3', '2026-03-02T08:00:00Z'));
    await put({
      resourceType: 'DiagnosticReport', id: 'bmp', status: 'final', category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0074', code: 'CH' }] }],
      code: { coding: [{ system: 'http://loinc.org', code: '51990-0' }] }, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-03-02T08:00:00Z',
      result: [{ reference: 'Observation/bmp-na' }, { reference: 'Observation/bmp-k' }],
    });
    const ids = (records: any[]) => records.map((r) => r.id).filter((id) => id.startsWith('bmp-'));
    const all = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`);
    expect(ids(all.body.records.lab_results).sort()).toEqual(['bmp-k', 'bmp-na']);
    // One at a time, following next: each still once.
    const seen: string[] = [];
    let cursor: string | null = '';
    for (let n = 0; cursor !== null && n < 100; n++) {
      const page = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      seen.push(...page.body.records.lab_results.map((r: any) => r.id));
      cursor = page.body.next_cursor;
    }
    expect(cursor).toBeNull();
    expect(seen.filter((id) => id.startsWith('bmp-')).sort()).toEqual(['bmp-k', 'bmp-na']);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('a result that is a range or a ratio (cells per field, a titre) is pushed back as the range or ratio it was, not as text', async () => {
    // With its UCUM codes, which a range pushed back lost (found by another vendor's writer).
    const ucum = { unit: '/[HPF]', system: 'http://unitsofmeasure.org', code: '/[HPF]' };
    const hpf = { low: { value: 5, ...ucum }, high: { value: 10, ...ucum } };
    const titre = { numerator: { value: 1 }, denominator: { value: 64 } };
    for (const [id, value] of [['wbc-urine', { valueRange: hpf }], ['titre', { valueRatio: titre }]] as const) {
      await put({ resourceType: 'Observation', id, status: 'final', category: [LAB], code: { text: id }, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-05-01T08:00:00Z', ...value });
      const record = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results.find((r: any) => r.id === id);
      const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record } });
      expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
      const written = (await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body;
      expect(written).toMatchObject(value);
      expect(written.valueString).toBeUndefined();
    }
  });

  it("a prescriber or requester given as a PractitionerRole (US Core's pattern) is read as the practitioner it names (found by another vendor's writer: null)", async () => {
    await put({ resourceType: 'Practitioner', id: 'dr-123', name: [{ family: 'Osler', given: ['William'], prefix: ['Dr'] }] });
    await put({ resourceType: 'PractitionerRole', id: 'pr.55', practitioner: { reference: 'Practitioner/dr-123' }, code: [{ text: 'Attending physician' }] });
    await put({ resourceType: 'PractitionerRole', id: 'pr.56', practitioner: { reference: 'https://other.example.org/fhir/Practitioner/9', display: 'Dr Jane Roe' } });
    const request = (id: string, role: string) => ({ resourceType: 'MedicationRequest', id, status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Amoxicillin 500 mg' }, subject: { reference: 'Patient/123' }, authoredOn: '2026-03-01', requester: { reference: `PractitionerRole/${role}` } });
    await put(request('mr-role', 'pr.55'));
    await put(request('mr-role-display', 'pr.56'));
    const prescriptions = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=prescriptions&limit=1000`)).body.records.prescriptions;
    expect(prescriptions.find((r: any) => r.id === 'mr-role').prescriber).toBe('Dr William Osler');
    expect(prescriptions.find((r: any) => r.id === 'mr-role-display').prescriber).toBe('Dr Jane Roe');
  });

  it("a visit of two types (SNOMED CT's check-up and the hospital's own Office Visit) is pushed back as two, never one concept of both codings (found by another vendor's writer: the hospital's code came to mean check-up)", async () => {
    const type = [
      { coding: [{ system: 'http://snomed.info/sct', code: '185349003' }], text: 'Check-up' },
      { coding: [{ system: 'urn:oid:1.2.840.114350.1.13.0.1.7.10.698084.30', code: '101' }], text: 'Office Visit' },
    ];
    await put({ resourceType: 'Encounter', id: 'two-types', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/123' }, type, period: { start: '2026-03-02T09:00:00Z', end: '2026-03-02T09:30:00Z' } });
    const record = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=visits&limit=1000`)).body.records.visits.find((r: any) => r.id === 'two-types');
    expect(record.type_concepts).toEqual(type.map((t) => ({ text: t.text, codings: t.coding.map((c) => ({ ...c, display: null })) })));
    const pushed = await call(sdk, '/api/v1/sdk/records/encounters', { method: 'POST', headers: { 'idempotency-key': 'two-types-back' }, json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    expect(pushed.body.not_written).toEqual(expect.not.arrayContaining(['type', 'types', 'type_concepts']));
    expect((await call(operator, `/api/fhir/R4/Encounter/${pushed.body.encounter_id}`)).body.type).toEqual(type);
  });

  it('a visit that ends before it starts is refused on every door (per-1): FHIR PUT, the push’s own fields, a pushed record', async () => {
    const period = { start: '2026-02-01T10:00:00Z', end: '2026-02-01T09:00:00Z' };
    const res = await call(operator, '/api/fhir/R4/Encounter/backwards', { method: 'PUT', json: { resourceType: 'Encounter', id: 'backwards', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/123' }, period } });
    expect(res.status).toBe(400);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(JSON.stringify(res.body)).toMatch(/per-1/);
    const own = await call(sdk, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, encounter_type: 'consultation', started_at: period.start, ended_at: '2026-02-01T11:00:00+02:00' } });
    expect(own.status, JSON.stringify(own.body)).toBe(422);
    expect(JSON.stringify(own.body)).toMatch(/ended_at/);
    const record = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=visits`)).body.records.visits[0];
    const pushed = await call(sdk, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, record: { ...record, started_at: period.start, ended_at: period.end } } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(422);
  });

  it('what other writers say in the fields Pont read only in part: a booster, three target diseases, a reason for as needed, a diagnosis confirmed without a clinical status, a hold’s reason', async () => {
    const SCT = 'http://snomed.info/sct';
    await put({
      resourceType: 'Immunization', id: 'dtap-b', status: 'completed', vaccineCode: { coding: [{ system: 'http://hl7.org/fhir/sid/cvx', code: '20' }] }, patient: { reference: 'Patient/123' },
      occurrenceDateTime: '2026-01-10', protocolApplied: [{ series: '5-dose', doseNumberString: 'Booster', targetDisease: [{ coding: [{ system: SCT, code: '397430003', display: 'Diphtheria' }] }, { coding: [{ system: SCT, code: '76902006', display: 'Tetanus' }] }, { coding: [{ system: SCT, code: '27836007', display: 'Pertussis' }] }] }],
    });
    await put({ resourceType: 'Observation', id: 'rx-react', status: 'final', code: { coding: [{ system: SCT, code: '293104008', display: 'Adverse reaction to vaccine' }] }, subject: { reference: 'Patient/123' }, valueCodeableConcept: { coding: [{ system: SCT, code: '39579001', display: 'Anaphylaxis' }] } });
    await put({ resourceType: 'Immunization', id: 'flu-r', status: 'completed', vaccineCode: { coding: [{ system: 'http://hl7.org/fhir/sid/cvx', code: '141' }] }, patient: { reference: 'Patient/123' }, occurrenceDateTime: '2026-01-11', reaction: [{ date: '2026-01-11T10:30:00Z', detail: { reference: 'Observation/rx-react' } }] });
    await put({
      resourceType: 'MedicationStatement', id: 'ms-prn', status: 'active', medicationCodeableConcept: { text: 'Ibuprofen 200 mg' }, subject: { reference: 'Patient/123' },
      dosage: [{ timing: { code: { text: 'every 4 to 6 hours' }, repeat: { frequency: 1, period: 4, periodMax: 6, periodUnit: 'h' } }, asNeededCodeableConcept: { text: 'headache' } }],
    });
    await put({
      resourceType: 'Condition', id: 'dx-conf', verificationStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-ver-status', code: 'confirmed' }] },
      category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-category', code: 'encounter-diagnosis' }] }], code: { text: 'Otitis media' }, subject: { reference: 'Patient/123' },
    });
    await put({ resourceType: 'MedicationRequest', id: 'rx-hold', status: 'on-hold', statusReason: { text: 'scheduled for surgery' }, intent: 'order', medicationCodeableConcept: { text: 'Warfarin 5 mg' }, subject: { reference: 'Patient/123' } });
    const records = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=all&limit=1000`)).body.records;
    expect(records.immunizations.find((r: any) => r.id === 'dtap-b')).toMatchObject({ dose_number: null, dose_number_text: 'Booster', series: '5-dose', target_disease: 'Diphtheria' });
    expect(records.immunizations.find((r: any) => r.id === 'dtap-b').target_disease_codings.map((c: any) => c.display)).toEqual(['Diphtheria', 'Tetanus', 'Pertussis']);
    expect(records.immunizations.find((r: any) => r.id === 'flu-r')).toMatchObject({ reaction: 'Anaphylaxis', reaction_references: ['Observation/rx-react'] });
    expect(records.medication_statements.find((r: any) => r.id === 'ms-prn')).toMatchObject({ as_needed: true, as_needed_reason: 'headache', period: 4, period_max: 6, timing: 'every 4 to 6 hours' });
    expect(records.diagnoses.find((r: any) => r.id === 'dx-conf')).toMatchObject({ status: 'confirmed' });
    expect(records.prescriptions.find((r: any) => r.id === 'rx-hold')).toMatchObject({ status: 'on_hold', status_reason: 'scheduled for surgery' });
  });

  it('an organisation without rights learns nothing from the encounter push’s new refusals: a period backwards or a source no type has is the same 422 for a registered and an unknown Health ID, and nothing is written', async () => {
    const stranger = await createTestClient(pont, ['encounters:write', 'labs:write'], { organizationId: 'org-stranger-2' });
    const { checkDigits } = await import('../src/healthid/healthid');
    const unknown = `${healthId.slice(0, 2)}${'7'.repeat(healthId.length - 3)}`;
    const unregistered = `${unknown}${checkDigits(unknown)}`;
    const count = async () => (await call(operator, '/api/fhir/R4/Encounter?subject=Patient/123&_summary=count')).body.total;
    const before = await count();
    const lab = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1`)).body.records.lab_results[0];
    const answers = async (id: string) =>
      Promise.all([
        call(stranger, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: id, encounter_type: 'consultation', started_at: '2026-02-01T10:00:00Z', ended_at: '2026-02-01T09:00:00Z' } }),
        call(stranger, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: id, record: { ...lab, source: 'bogus' } } }),
      ]).then((res) => res.map((r) => [r.status, r.body.error_code, r.body.message]));
    const known = await answers(healthId);
    expect(known.map(([status]) => status)).toEqual([422, 422]);
    expect(await answers(unregistered)).toEqual(known);
    expect(await count()).toBe(before);
  });

  it('a pushed record whose source no source of its type has is refused naming it, not written as the first source', async () => {
    const record = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1`)).body.records.lab_results[0];
    const bogus = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: { ...record, source: 'bogus' } } });
    expect(bogus.status, JSON.stringify(bogus.body)).toBe(422);
    expect(JSON.stringify(bogus.body)).toMatch(/record\.source/);
    const { source: _source, ...unsaid_ } = record;
    const unsaid = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: unsaid_ } });
    expect(unsaid.status, JSON.stringify(unsaid.body)).toBe(201);
  });

  it('a vital sign written without a category, coded as one of FHIR’s vital signs, is a vital', async () => {
    await put({
      resourceType: 'Observation', id: 'hr-nocat', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }] }, subject: { reference: 'Patient/123' },
      effectiveDateTime: '2026-05-02T08:00:00Z', valueQuantity: { value: 72, unit: '/min', system: 'http://unitsofmeasure.org', code: '/min' },
    });
    // An arterial saturation (2708-6), which a blood gas panel reports, is not taken for a pulse oximetry.
    await put({ resourceType: 'Observation', id: 'sao2-abg', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2708-6' }] }, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-05-02T08:00:00Z', valueQuantity: { value: 82, unit: '%' } });
    const vitals = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=vitals&limit=1000`)).body.records.vitals;
    expect(vitals.find((r: any) => r.id === 'hr-nocat')).toMatchObject({ type: '8867-4', value: 72, unit: '/min' });
    expect(vitals.find((r: any) => r.id === 'sao2-abg')).toBeUndefined();
  });

  it('a report-only result with a coded conclusion is pushed back with its codes, not its words alone', async () => {
    await put({
      resourceType: 'DiagnosticReport', id: 'cx-9', status: 'final', category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0074', code: 'MB' }] }],
      code: { coding: [{ system: 'http://loinc.org', code: '630-4' }], text: 'Urine culture' }, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-10-25T09:00:00Z',
      conclusion: 'No growth', conclusionCode: [{ coding: [{ system: 'http://snomed.info/sct', code: '264868006', display: 'No growth' }] }],
    });
    const record = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results.find((r: any) => r.id === 'cx-9');
    expect(record).toMatchObject({ value_coded: 'No growth', value_code: '264868006', value_code_system: 'http://snomed.info/sct' });
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    // Pushed as it came: a report whose conclusion is the result.
    const written = (await call(operator, `/api/fhir/R4/DiagnosticReport/${pushed.body.lab_result_id}`)).body;
    expect(written.conclusionCode).toEqual([{ coding: [{ system: 'http://snomed.info/sct', code: '264868006', display: 'No growth' }] }]);
    expect(written.conclusion).toBe('No growth');
  });

  it('an encounter classed in another system is pushed back in that system, never relabelled v3 ActCode', async () => {
    const classes: Array<[string, { system?: string; code: string }]> = [['enc-r', { system: 'http://terminology.hl7.org/CodeSystem/v2-0004', code: 'R' }], ['enc-local', { code: 'OUTPT' }]];
    for (const [id, cls] of classes) {
      await put({ resourceType: 'Encounter', id, status: 'finished', class: cls, subject: { reference: 'Patient/123' }, period: { start: '2026-02-01T08:00:00Z' } });
      const record = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=visits`)).body.records.visits.find((r: any) => r.id === id);
      expect(record).toMatchObject({ class: cls.code, class_coding: { system: cls.system ?? null, code: cls.code } });
      const pushed = await call(sdk, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, record } });
      expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
      expect((await call(operator, `/api/fhir/R4/Encounter/${pushed.body.encounter_id}`)).body.class).toEqual(cls);
    }
  });
});

describe('what other writers leave implicit (issue 38 items 2, 4, 6)', () => {
  it('an uncategorised result a laboratory report lists is a lab result, in records and the summary; one no report lists is not', async () => {
    const lonely = { resourceType: 'Observation', status: 'final', code: { text: 'Mood' }, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-09-01', valueString: 'calm' };
    await put({ ...lonely, id: 'obs-mood' });
    await put({
      resourceType: 'Observation', id: 'glu-hh', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2345-7' }] }, subject: { reference: 'Patient/123' },
      effectiveDateTime: '2026-11-20T06:00:00Z', valueQuantity: { value: 1000, unit: 'mg/dL' },
      interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'HH' }] }],
    });
    await put({
      resourceType: 'DiagnosticReport', id: 'rep-1', status: 'final', code: { text: 'Chemistry' }, subject: { reference: 'Patient/123' },
      category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0074', code: 'LAB' }] }], result: [{ reference: 'Observation/glu-hh' }],
    });
    const labs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results;
    expect(labs.map((r: any) => r.id)).toContain('glu-hh');
    expect(labs.map((r: any) => r.id)).not.toContain('obs-mood');
    expect(labs.find((r: any) => r.id === 'glu-hh')).toMatchObject({ flag: 'HH', flag_level: 'critical_high', value_numeric: 1000 });
    const summary = await call(sdk, `/api/v1/sdk/patients/${healthId}/summary`);
    expect(summary.status, JSON.stringify(summary.body)).toBe(200);
    expect(summary.body.recent_labs.map((r: any) => r.id)).toContain('glu-hh');
  });

  it('a result or vital sign categorised only in the writer’s own code system is read as what a report or its code says, and is one record type, not an observation too', async () => {
    // Epic-style: a category of the vendor's own (no HL7 code), read as if there were none, and no more.
    const vendor = { coding: [{ system: 'urn:oid:1.2.840.114350.1.13.0.1.7.10.798268.30', code: 'Lab', display: 'Lab' }] };
    const vendorVital = { coding: [{ system: 'urn:oid:1.2.840.114350.1.13.0.1.7.10.798268.30', code: 'Vitals' }] };
    await put({
      resourceType: 'Observation', id: 'k-vendor', status: 'final', category: [vendor], code: { coding: [{ system: 'http://loinc.org', code: '2823-3' }], text: 'Potassium' },
      subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-21T06:00:00Z', valueQuantity: { value: 6.9, unit: 'mmol/L' },
    });
    await put({
      resourceType: 'DiagnosticReport', id: 'rep-vendor', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '24323-8' }] }, subject: { reference: 'Patient/123' },
      category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0074', code: 'LAB' }] }], result: [{ reference: 'Observation/k-vendor' }],
    });
    await put({
      resourceType: 'Observation', id: 'wt-vendor', status: 'final', category: [vendorVital], code: { coding: [{ system: 'http://loinc.org', code: '29463-7' }] },
      subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-21T06:00:00Z', valueQuantity: { value: 81, unit: 'kg' },
    });
    // A survey of the vendor's own category, listed by no report and coded as no vital sign: an observation.
    await put({ resourceType: 'Observation', id: 'phq-vendor', status: 'final', category: [vendor], code: { text: 'PHQ-2' }, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-21', valueInteger: 1 });
    const all = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=all&limit=1000`)).body.records;
    const ids = (type: string) => all[type].map((r: any) => r.id);
    expect(ids('lab_results')).toContain('k-vendor');
    expect(ids('vitals')).toContain('wt-vendor');
    expect(ids('observations')).toContain('phq-vendor');
    expect(ids('observations')).not.toContain('k-vendor');
    expect(ids('observations')).not.toContain('wt-vendor');
    // Read alone, observations leave out the same (as do their later pages: they are one search).
    const alone = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=observations&limit=1000`)).body.records.observations.map((r: any) => r.id);
    expect(alone).toEqual(ids('observations'));
    for (const id of ['glu-hh', 'hr-nocat', 'k-vendor', 'wt-vendor']) expect(alone).not.toContain(id);
  });

  it('a care team, an imaging study and a risk assessment (US Core, Synthea, the specification) are records, members named from what they reference; each under its class’s consent', async () => {
    await put({ resourceType: 'Practitioner', id: 'npi-1234567893', name: [{ family: 'Okafor', given: ['Chidi'], prefix: ['Dr.'] }] });
    await put({
      resourceType: 'CareTeam', id: 'ct-778', status: 'active', name: 'Primary care team', subject: { reference: 'Patient/123' }, period: { start: '2024-02-01' },
      category: [{ coding: [{ system: 'http://loinc.org', code: 'LA27975-4' }] }],
      participant: [{ role: [{ coding: [{ system: 'http://nucc.org/provider-taxonomy', code: '207Q00000X' }] }], member: { reference: 'Practitioner/npi-1234567893' } }],
      reasonCode: [{ coding: [{ system: 'http://snomed.info/sct', code: '44054006', display: 'Diabetes' }] }],
    });
    await put({
      resourceType: 'ImagingStudy', id: 'is-2291', status: 'available', subject: { reference: 'Patient/123' }, started: '2026-03-04T10:15:00Z',
      identifier: [{ system: 'urn:dicom:uid', value: 'urn:oid:1.2.840.113619.2.55.3.1' }], referrer: { reference: 'Practitioner/npi-1234567893' }, numberOfSeries: 1,
      series: [{ uid: '1.2.840.113619.2.55.3.2', modality: { system: 'http://dicom.nema.org/resources/ontology/DCM', code: 'CT' }, bodySite: { system: 'http://snomed.info/sct', code: '51185008' } }],
    });
    // A fall risk with a qualitative risk and no probability (valid FHIR, which the validator refused: ras-2).
    await put({
      resourceType: 'RiskAssessment', id: 'fall-88', status: 'final', subject: { reference: 'Patient/123' }, occurrenceDateTime: '2026-03-04T10:00:00Z',
      code: { coding: [{ system: 'http://loinc.org', code: '73830-2' }] }, performer: { reference: 'Practitioner/npi-1234567893' },
      prediction: [{ outcome: { coding: [{ system: 'http://snomed.info/sct', code: '217082002', display: 'Accidental fall' }] }, qualitativeRisk: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/risk-probability', code: 'high' }] } }],
    });
    const all = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=all&limit=1000`)).body;
    expect(all.records.risk_assessments).toEqual([
      expect.objectContaining({ id: 'fall-88', code: '73830-2', performer: 'Dr. Chidi Okafor', predictions: [expect.objectContaining({ outcome: 'Accidental fall', qualitative_risk_code: 'high', probability: null })] }),
    ]);
    expect(all.records.care_teams).toEqual([
      expect.objectContaining({ id: 'ct-778', status: 'active', name: 'Primary care team', category_code: 'LA27975-4', reason: 'Diabetes', reason_code: '44054006',
        participants: [expect.objectContaining({ member_reference: 'Practitioner/npi-1234567893', name: 'Dr. Chidi Okafor', role_code: '207Q00000X', role_system: 'http://nucc.org/provider-taxonomy' })] }),
    ]);
    expect(all.records.imaging_studies).toEqual([
      expect.objectContaining({ id: 'is-2291', study_uid: 'urn:oid:1.2.840.113619.2.55.3.1', modalities: ['CT'], referrer: 'Dr. Chidi Okafor', series: [expect.objectContaining({ modality: 'CT', body_site: '51185008' })] }),
    ]);
    for (const [type, shape] of [['care_teams', 'CareTeam'], ['imaging_studies', 'ImagingStudy'], ['risk_assessments', 'RiskAssessment']]) expect(schemaProblems({ $ref: shape! }, all.records[type!][0], doc)).toEqual([]);
    // An organisation the patient allowed only the summary sees the care team, not the imaging study (diagnostics).
    const summaryOnly = await createTestClient(pont, ['consents:write', 'patient:diagnostics:read', 'patients:read', 'labs:read'], { organizationId: 'org-summary-only' });
    const expires_at = new Date(Date.now() + 365 * 86_400_000).toISOString();
    expect((await call(summaryOnly, `/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'summary', expires_at } })).status).toBe(201);
    const seenRes = await call(summaryOnly, `/api/v1/connect/patient/${healthId}/records?type=all&limit=1000`);
    expect(seenRes.status, JSON.stringify(seenRes.body)).toBe(200);
    const seen = seenRes.body;
    expect(seen.records.care_teams.map((r: any) => r.id)).toEqual(['ct-778']);
    expect(seen.records.imaging_studies).toBeUndefined();
    expect(seen.withheld).toEqual(expect.arrayContaining(['imaging_studies', 'risk_assessments']));
    expect((await call(summaryOnly, `/api/v1/connect/patient/${healthId}/records?type=imaging_studies`)).status).toBe(403);
    // Nor through FHIR, where a resource it may not see is one it cannot tell exists.
    expect((await call(summaryOnly, '/api/fhir/R4/ImagingStudy/is-2291')).status).toBe(404);
    expect((await call(summaryOnly, '/api/fhir/R4/CareTeam/ct-778')).status).toBe(200);
  });

  it('an encounter class written without its system reads as the v3 code it names', async () => {
    await put({ resourceType: 'Encounter', id: 'enc-nosys', status: 'finished', class: { code: 'EMER' }, subject: { reference: 'Patient/123' } });
    const visits = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=visits`)).body.records.visits;
    expect(visits.find((v: any) => v.id === 'enc-nosys')).toMatchObject({ class: 'EMER' });
  });

  it('the summary names a patient recorded with a usual name only, and takes sex from US Core birth sex or a national extension', async () => {
    const patient = await put({
      resourceType: 'Patient', id: 'pat-usual.1', name: [{ use: 'usual', family: 'Diallo', given: ['Awa'] }], birthDate: '2009-06-14',
      extension: [{ url: 'http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex', valueCode: 'F' }], deceasedDateTime: '2026-01-02',
    });
    const other = await put({
      resourceType: 'Patient', id: 'pat-national', name: [{ family: 'Mensah', given: ['Kofi'] }],
      extension: [{ url: 'https://fhir.example.cm/StructureDefinition/sexe', valueCoding: { system: 'http://hl7.org/fhir/administrative-gender', code: 'male' } }],
    });
    const expires_at = new Date(Date.now() + 365 * 86_400_000).toISOString();
    for (const p of [patient, other]) {
      const hid = p.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
      expect((await call(reader, `/api/v1/connect/patient/${hid}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at } })).status).toBe(201);
    }
    const hid = (p: Record<string, any>) => p.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
    const first = await call(sdk, `/api/v1/sdk/patients/${hid(patient)}/summary`);
    expect(first.body.patient).toMatchObject({ first_name: 'Awa', last_name: 'Diallo', sex: 'female', deceased: true, deceased_at: '2026-01-02' });
    expect((await call(sdk, `/api/v1/sdk/patients/${hid(other)}/summary`)).body.patient).toMatchObject({ first_name: 'Kofi', last_name: 'Mensah', sex: 'male', deceased: null });
  });
});

describe('references followed under the policy (issue 38 item 3)', () => {
  it('directory data is named, the specimen of the patient is read, and nothing of another patient’s specimen is shown', async () => {
    await put({ resourceType: 'Practitioner', id: 'pr-9', name: [{ family: 'Okonkwo', given: ['Ada'] }] });
    // Another patient, for whom the reader has no consent, and a specimen of theirs with a note.
    await put({ resourceType: 'Patient', id: 'other-9', name: [{ family: 'Other' }] });
    await put({ resourceType: 'Specimen', id: 'sp-other', subject: { reference: 'Patient/other-9' }, type: { text: 'Secret serum' }, note: [{ text: 'Belongs to someone else' }] });
    await put({ resourceType: 'Specimen', id: 'sp-own', subject: { reference: 'Patient/123' }, type: { text: 'Serum' }, note: [{ text: 'Specimen hemolyzed.' }] });
    for (const [id, specimen] of [['k-own', 'sp-own'], ['k-other', 'sp-other']])
      await put({
        resourceType: 'Observation', id, status: 'final', category: [LAB], code: { text: 'Potassium' }, subject: { reference: 'Patient/123' },
        effectiveDateTime: '2026-11-21', valueQuantity: { value: 6.1, unit: 'mmol/L' }, specimen: { reference: `Specimen/${specimen}` }, performer: [{ reference: 'Practitioner/pr-9' }],
      });
    const labs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results;
    expect(labs.find((r: any) => r.id === 'k-own')).toMatchObject({ specimen: 'Serum', specimen_note: 'Specimen hemolyzed.', performer: 'Ada Okonkwo' });
    // A result that refers to another patient's specimen is in that patient's compartment too: without a consent for
    // both, the reader sees neither the result nor anything of the specimen.
    expect(labs.find((r: any) => r.id === 'k-other')).toBeUndefined();
    expect(JSON.stringify(labs)).not.toMatch(/Secret serum|Belongs to someone else/);
  });
});

describe('what an outside probe of stop 67 found (IPS, UK Core, ABDM, AU Base writers)', () => {
  const summary = async () => (await call(sdk, `/api/v1/sdk/patients/${healthId}/summary`)).body;

  it('a result entered in error, or cancelled, is no recent lab of the summary (a critical potassium that never was); its record still says so', async () => {
    const K = { coding: [{ system: 'http://loinc.org', code: '2823-3', display: 'Potassium' }] };
    const HH = [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'HH' }] }];
    await put({ resourceType: 'Observation', id: 'k-ok', status: 'final', category: [LAB], code: K, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-26T08:00:00Z', valueQuantity: { value: 4.1, unit: 'mmol/L' } });
    await put({ resourceType: 'Observation', id: 'k-eie', status: 'entered-in-error', category: [LAB], code: K, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-26T09:00:00Z', valueQuantity: { value: 7.9, unit: 'mmol/L' }, interpretation: HH });
    await put({ resourceType: 'Observation', id: 'k-cancelled', status: 'cancelled', category: [LAB], code: K, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-26T10:00:00Z', dataAbsentReason: { text: 'Haemolysed' } });
    const recent = (await summary()).recent_labs.map((r: any) => r.id);
    expect(recent).toContain('k-ok');
    expect(recent).not.toContain('k-eie');
    expect(recent).not.toContain('k-cancelled');
    const labs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results;
    expect(labs.find((r: any) => r.id === 'k-eie')).toMatchObject({ status: 'entered-in-error' });
  });

  it('a prescription not to give (doNotPerform) says so, and is no active medication of the summary: aspirin forbidden is not aspirin ordered', async () => {
    await put({
      resourceType: 'MedicationRequest', id: 'rx-dnp', status: 'active', intent: 'order', doNotPerform: true, subject: { reference: 'Patient/123' }, authoredOn: '2026-11-26',
      medicationCodeableConcept: { coding: [{ system: 'http://snomed.info/sct', code: '387458008', display: 'Aspirin' }] }, reasonCode: [{ text: 'Active GI bleed' }],
    });
    await put({
      resourceType: 'MedicationRequest', id: 'rx-give', status: 'active', intent: 'order', subject: { reference: 'Patient/123' }, authoredOn: '2026-11-26',
      medicationCodeableConcept: { coding: [{ system: 'http://snomed.info/sct', code: '387517004', display: 'Paracetamol' }] },
    });
    const rx = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=prescriptions&limit=1000`)).body.records.prescriptions;
    expect(rx.find((r: any) => r.id === 'rx-dnp')).toMatchObject({ medication: 'Aspirin', do_not_perform: true });
    expect(rx.find((r: any) => r.id === 'rx-give')).toMatchObject({ medication: 'Paracetamol', do_not_perform: null });
    const active = (await summary()).active_medications.map((r: any) => r.id);
    expect(active).toContain('rx-give');
    expect(active).not.toContain('rx-dnp');
  });
});

describe('what an outside probe of stop 67 found, in a result’s reference range', () => {
  it('a range only in another unit is no range of the value: 250 mg/dL is shown without 3.9–5.6 mmol/L, a unitless range or value keeps its range', async () => {
    const U = 'http://unitsofmeasure.org';
    const glucose = { coding: [{ system: 'http://loinc.org', code: '2345-7' }] };
    const mmol = { low: { value: 3.9, unit: 'mmol/L', system: U, code: 'mmol/L' }, high: { value: 5.6, unit: 'mmol/L', system: U, code: 'mmol/L' } };
    const result = (id: string, value: Record<string, unknown>, referenceRange: unknown[], category = [LAB]) => put({
      resourceType: 'Observation', id, status: 'final', category, code: glucose, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-20T08:00:00Z', ...value, referenceRange,
    });
    await result('glu-mg', { valueQuantity: { value: 250, unit: 'mg/dL', system: U, code: 'mg/dL' } }, [mmol]);
    await result('glu-nounit', { valueQuantity: { value: 5.1, unit: 'mmol/L', system: U, code: 'mmol/L' } }, [{ low: { value: 3.9 }, high: { value: 5.6 } }]);
    await result('glu-text', { valueString: 'High' }, [mmol]);
    await result('glu-obs', { valueQuantity: { value: 250, unit: 'mg/dL', system: U, code: 'mg/dL' } }, [mmol], [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'exam' }] }]);
    const records = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=all&limit=1000`)).body.records;
    expect(records.lab_results.find((r: any) => r.id === 'glu-mg')).toMatchObject({ value_numeric: 250, unit: 'mg/dL', reference_low: null, reference_high: null, reference_range_unit: null });
    expect(records.lab_results.find((r: any) => r.id === 'glu-nounit')).toMatchObject({ reference_low: 3.9, reference_high: 5.6 });
    expect(records.lab_results.find((r: any) => r.id === 'glu-text')).toMatchObject({ value: 'High', reference_low: 3.9, reference_high: 5.6, reference_range_unit: 'mmol/L' });
    expect(records.observations.find((r: any) => r.id === 'glu-obs')).toMatchObject({ reference_low: null, reference_high: null });
    // The ranges are all kept in reference_ranges, whatever the unit, and a record pushed back writes its range first.
    expect(records.lab_results.find((r: any) => r.id === 'glu-mg').reference_ranges).toHaveLength(1);
  });
});

describe('what an outside probe of stop 67 found, in a result’s interpretation', () => {
  it('a result interpreted both normal and critically high is flagged by the gravest (HH), in its record as in the push’s answer, not by the first', async () => {
    const V3 = 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation';
    const wbc = { coding: [{ system: 'http://loinc.org', code: '6690-2' }] };
    await put({
      resourceType: 'Observation', id: 'wbc-2', status: 'final', category: [LAB], code: wbc, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-19T08:00:00Z',
      valueQuantity: { value: 25, unit: '10*3/uL' }, interpretation: [{ coding: [{ system: V3, code: 'N' }] }, { coding: [{ system: V3, code: 'HH' }] }],
    });
    await put({
      resourceType: 'Observation', id: 'wbc-3', status: 'final', category: [LAB], code: wbc, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-19T08:00:00Z',
      valueQuantity: { value: 3, unit: '10*3/uL' }, interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0078', code: 'N' }, { system: V3, code: 'L' }] }],
    });
    const labs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results;
    const record = labs.find((r: any) => r.id === 'wbc-2');
    expect(record).toMatchObject({ flag: 'HH', flag_level: 'critical_high' });
    expect(labs.find((r: any) => r.id === 'wbc-3')).toMatchObject({ flag: 'L', flag_level: 'low' });
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', headers: { 'idempotency-key': 'wbc-2-back' }, json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    expect(pushed.body).toMatchObject({ flagged: true, flag: 'HH' });
  });
});

describe('what an outside probe of stop 67 found, in vitals and subjects', () => {
  it('a blood pressure whose components are coded in SNOMED CT (UK Core, IPS) has its systolic and diastolic', async () => {
    const SCT = 'http://snomed.info/sct';
    const mmHg = (value: number) => ({ value, unit: 'mm[Hg]', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' });
    await put({
      resourceType: 'Observation', id: 'bp-sct', status: 'final', subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-18T08:00:00Z',
      category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
      code: { coding: [{ system: SCT, code: '75367002', display: 'Blood pressure' }] },
      component: [{ code: { coding: [{ system: SCT, code: '271649006' }] }, valueQuantity: mmHg(170) }, { code: { coding: [{ system: SCT, code: '271650006' }] }, valueQuantity: mmHg(95) }],
    });
    const vitals = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=vitals&limit=1000`)).body.records.vitals;
    expect(vitals.find((r: any) => r.id === 'bp-sct')).toMatchObject({ systolic: 170, diastolic: 95, unit: 'mm[Hg]' });
  });

  it('a result whose patient is named only in words (subject.display) is refused as one named by identifier only is: stored, it would be in no patient’s record', async () => {
    const writer = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-reader' });
    const res = await call(writer, '/api/fhir/R4/Observation', {
      method: 'POST', json: { resourceType: 'Observation', status: 'final', category: [LAB], code: { text: 'Potassium' }, subject: { display: 'Probe patient' }, valueQuantity: { value: 6.9, unit: 'mmol/L' } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(res.body.issue[0].diagnostics).toMatch(/Observation\.subject names a patient by name only \(display\)/);
    // Another subject given in words (a device, a location) is not a patient.
    const device = await call(writer, '/api/fhir/R4/Observation', {
      method: 'POST', json: { resourceType: 'Observation', status: 'final', code: { text: 'Room temperature' }, subject: { type: 'Location', display: 'Ward 7B' }, valueQuantity: { value: 21, unit: 'Cel' } },
    });
    expect(device.status, JSON.stringify(device.body)).toBe(201);
  });
});

describe('what an outside probe of stop 67 found, in documents', () => {
  it('a document sent as XML and as its rendered PDF: the single fields are the first attachment’s (no PDF title on the XML), and every attachment is listed', async () => {
    await put({
      resourceType: 'DocumentReference', id: 'doc-2', status: 'current', subject: { reference: 'Patient/123' }, date: '2026-11-17T08:00:00Z', type: { text: 'Discharge summary' },
      content: [{ attachment: { contentType: 'application/xml', url: 'https://ehr.example/docs/1.xml' } }, { attachment: { contentType: 'application/pdf', url: 'https://ehr.example/docs/1.pdf', title: 'Rendered PDF' } }],
    });
    const docs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=documents&limit=1000`)).body.records.documents;
    expect(docs.find((r: any) => r.id === 'doc-2')).toMatchObject({
      title: null, content_type: 'application/xml', url: 'https://ehr.example/docs/1.xml',
      contents: [{ content_type: 'application/xml', url: 'https://ehr.example/docs/1.xml', title: null, size: null }, { content_type: 'application/pdf', url: 'https://ehr.example/docs/1.pdf', title: 'Rendered PDF', size: null }],
    });
  });
});

describe('what an outside probe of stop 67 found, in the summary’s patient', () => {
  it('a name written as text alone (IPS, ABDM) is the summary’s full_name; first and last name stay null rather than guessed', async () => {
    const patient = await put({ resourceType: 'Patient', id: 'ravi', name: [{ text: 'Ravi Kumar' }], gender: 'male', birthDate: '1980-02-02' });
    const hid = patient.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
    const expires_at = new Date(Date.now() + 365 * 86_400_000).toISOString();
    expect((await call(reader, `/api/v1/connect/patient/${hid}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at } })).status).toBe(201);
    const summary = (await call(sdk, `/api/v1/sdk/patients/${hid}/summary`)).body;
    expect(summary.patient).toMatchObject({ full_name: 'Ravi Kumar', first_name: null, last_name: null });
    expect((await call(sdk, `/api/v1/sdk/patients/${healthId}/summary`)).body.patient.full_name).toBe('Eyong Mbah');
  });
});

describe('what an outside probe of stop 67 found, in a push’s answer', () => {
  it('a negative result pushed back is not flagged, in the push’s answer as in its lab_result.released event: one rule for both', async () => {
    const V3 = 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation';
    await put({
      resourceType: 'Observation', id: 'covid-neg', status: 'final', category: [LAB], code: { coding: [{ system: 'http://loinc.org', code: '94500-6' }] }, subject: { reference: 'Patient/123' },
      effectiveDateTime: '2026-11-16T08:00:00Z', valueCodeableConcept: { coding: [{ system: 'http://snomed.info/sct', code: '260385009', display: 'Negative' }] }, interpretation: [{ coding: [{ system: V3, code: 'NEG' }] }],
    });
    const labs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results;
    const record = labs.find((r: any) => r.id === 'covid-neg');
    expect(record).toMatchObject({ flag: 'NEG' });
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', headers: { 'idempotency-key': 'covid-neg-back' }, json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    expect(pushed.body).toMatchObject({ flag: 'NEG', flagged: false });
  });
});

describe('what an outside probe of stop 67 found, in values pushed back', () => {
  it('a yes/no, a time, an instant and a period are pushed back as the types they were, not as text (valueString "false")', async () => {
    const values: Array<[string, Record<string, unknown>]> = [
      ['v-bool', { valueBoolean: false }],
      ['v-time', { valueTime: '07:30:00' }],
      ['v-dt', { valueDateTime: '2026-04-30T08:15:00Z' }],
      ['v-period', { valuePeriod: { start: '2026-04-30T08:00:00Z', end: '2026-05-01T08:00:00Z' } }],
    ];
    for (const [id, value] of values)
      await put({ resourceType: 'Observation', id, status: 'final', category: [LAB], code: { text: id }, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-15T08:00:00Z', ...value });
    const labs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results;
    expect(labs.find((r: any) => r.id === 'v-bool')).toMatchObject({ value_boolean: false, value: 'false' });
    for (const [id, value] of values) {
      const record = labs.find((r: any) => r.id === id);
      const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', headers: { 'idempotency-key': `${id}-back` }, json: { health_id: healthId, record } });
      expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
      const written = (await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body;
      expect(written, id).toMatchObject(value);
      expect(written.valueString, id).toBeUndefined();
    }
  });
});

describe('what an outside probe of stop 67 found, in a component without a value', () => {
  it('a component’s coded reason for no value (data-absent-reason error) is read as its code and pushed back as that code, not as the word alone', async () => {
    const DAR = 'http://terminology.hl7.org/CodeSystem/data-absent-reason';
    await put({
      resourceType: 'Observation', id: 'panel-dar', status: 'final', category: [LAB], code: { text: 'Lipid panel' }, subject: { reference: 'Patient/123' }, effectiveDateTime: '2026-11-14T08:00:00Z',
      component: [
        { code: { coding: [{ system: 'http://loinc.org', code: '2093-3' }] }, valueQuantity: { value: 5.2, unit: 'mmol/L' } },
        { code: { coding: [{ system: 'http://loinc.org', code: '2571-8' }] }, dataAbsentReason: { coding: [{ system: DAR, code: 'error' }] } },
      ],
    });
    const labs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results;
    const record = labs.find((r: any) => r.id === 'panel-dar');
    expect(record.component_list[1]).toMatchObject({ data_absent_code: 'error' });
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', headers: { 'idempotency-key': 'panel-dar-back' }, json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body;
    expect(written.component[1].dataAbsentReason.coding).toEqual([{ system: DAR, code: 'error' }]);
  });
});

describe('what an outside probe of stop 68 found (US Core exports, Epic- and Cerner-style writers)', () => {
  const summary = async () => (await call(sdk, `/api/v1/sdk/patients/${healthId}/summary`)).body;
  const subject = { reference: 'Patient/123' };
  const VER = 'http://terminology.hl7.org/CodeSystem/allergyintolerance-verification';
  const CLIN = 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical';

  it('a refuted allergy is no active allergy of the summary (a disproven peanut allergy is not one); an unconfirmed one still is', async () => {
    const allergy = (id: string, verification: string | undefined, text: string) =>
      put({
        resourceType: 'AllergyIntolerance', id, patient: subject, code: { text }, criticality: 'high', recordedDate: '2026-11-20',
        clinicalStatus: { coding: [{ system: CLIN, code: 'active' }] },
        ...(verification ? { verificationStatus: { coding: [{ system: VER, code: verification }] } } : {}),
      });
    await allergy('al-refuted', 'refuted', 'Peanut');
    await allergy('al-unconfirmed', 'unconfirmed', 'Shellfish');
    await allergy('al-confirmed', 'confirmed', 'Penicillin');
    await allergy('al-unverified', undefined, 'Latex');
    const active = (await summary()).active_allergies.map((r: any) => r.id);
    expect(active).toEqual(expect.arrayContaining(['al-unconfirmed', 'al-confirmed', 'al-unverified']));
    expect(active).not.toContain('al-refuted');
    // The record says what it is.
    const records = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=allergies&limit=1000`)).body.records.allergies;
    expect(records.find((r: any) => r.id === 'al-refuted')).toMatchObject({ verification_status: 'refuted' });
  });

  it("a statement that the patient has no known allergy, or that nothing is known (IPS's absent-unknown codes, SNOMED CT's), is no active allergy of the summary; its record says what it is (found by a write-back probe: \"No information about allergies\" listed as an allergy)", async () => {
    const statement = (id: string, coding: { system: string; code: string; display: string }) =>
      put({ resourceType: 'AllergyIntolerance', id, patient: subject, code: { coding: [coding] }, recordedDate: '2026-11-22', clinicalStatus: { coding: [{ system: CLIN, code: 'active' }] } });
    await statement('al-ips-none', { system: 'http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips', code: 'no-allergy-info', display: 'No information about allergies' });
    await statement('al-ips-nka', { system: 'http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips', code: 'no-known-allergies', display: 'No known allergies' });
    await statement('al-sct-nkda', { system: 'http://snomed.info/sct', code: '409137002', display: 'No known history of drug allergy' });
    await put({ resourceType: 'AllergyIntolerance', id: 'al-sulfa', patient: subject, code: { coding: [{ system: 'http://snomed.info/sct', code: '387406002', display: 'Sulfonamide' }] }, recordedDate: '2026-11-22', clinicalStatus: { coding: [{ system: CLIN, code: 'active' }] } });
    const active = (await summary()).active_allergies.map((r: any) => r.id);
    expect(active).toContain('al-sulfa');
    for (const id of ['al-ips-none', 'al-ips-nka', 'al-sct-nkda']) expect(active, id).not.toContain(id);
    const records = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=allergies&limit=1000`)).body.records.allergies;
    expect(records.find((r: any) => r.id === 'al-ips-nka')).toMatchObject({ substance: 'No known allergies', code: 'no-known-allergies', code_system: 'http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips' });
  });

  it('a proposal (a suggestion nobody ordered) is no active medication or care plan of the summary; an order and a plan are', async () => {
    const rx = (id: string, intent: string, text: string) =>
      put({ resourceType: 'MedicationRequest', id, status: 'active', intent, subject, authoredOn: '2026-11-21', medicationCodeableConcept: { text } });
    await rx('rx-proposal', 'proposal', 'Atorvastatin 40 mg (suggested)');
    await rx('rx-option', 'option', 'Rosuvastatin 10 mg (one of two)');
    await rx('rx-order', 'order', 'Metformin 500 mg');
    await rx('rx-plan', 'plan', 'Lisinopril 10 mg (home medication)');
    const plan = (id: string, intent: string) =>
      put({ resourceType: 'CarePlan', id, status: 'active', intent, subject, title: `Plan ${id}`, period: { start: '2026-11-21' } });
    await plan('cp-proposal', 'proposal');
    await plan('cp-plan', 'plan');
    const s = await summary();
    const meds = s.active_medications.map((r: any) => r.id);
    expect(meds).toEqual(expect.arrayContaining(['rx-order', 'rx-plan']));
    expect(meds).not.toContain('rx-proposal');
    expect(meds).not.toContain('rx-option');
    const plans = s.active_care_plans.map((r: any) => r.id);
    expect(plans).toContain('cp-plan');
    expect(plans).not.toContain('cp-proposal');
  });

  it('a visit entered in error, cancelled or only planned is no recent visit of the summary (an emergency visit that never happened took one of five places)', async () => {
    const visit = (id: string, status: string, start: string) =>
      put({ resourceType: 'Encounter', id, status, class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'EMER' }, subject, period: { start } });
    await visit('enc-done', 'finished', '2026-11-22T08:00:00Z');
    await visit('enc-eie', 'entered-in-error', '2026-11-23T08:00:00Z');
    await visit('enc-cancelled', 'cancelled', '2026-11-23T09:00:00Z');
    await visit('enc-planned', 'planned', '2027-01-10T09:00:00Z');
    const recent = (await summary()).recent_visits.map((r: any) => r.id);
    expect(recent).toContain('enc-done');
    for (const id of ['enc-eie', 'enc-cancelled', 'enc-planned']) expect(recent).not.toContain(id);
  });

  it('a modifier extension Pont does not understand is refused on every write (FHIR R4 §2.4: it may negate what it is in), so no door shows a heparin “not given” as an active medication', async () => {
    const notGiven = { url: 'http://ehr.example/fhir/StructureDefinition/not-given', valueBoolean: true };
    const rx = { resourceType: 'MedicationRequest', id: 'rx-modext', status: 'active', intent: 'order', subject, authoredOn: '2026-11-24', medicationCodeableConcept: { text: 'Heparin 5000 units' } };
    for (const resource of [
      { ...rx, modifierExtension: [notGiven] },
      // In an element (a dosage), and in a contained resource, as well.
      { ...rx, dosageInstruction: [{ text: '5000 units SC', modifierExtension: [notGiven] }] },
      { ...rx, contained: [{ resourceType: 'Medication', id: 'm1', code: { text: 'Heparin' }, modifierExtension: [notGiven] }], medicationCodeableConcept: undefined, medicationReference: { reference: '#m1' } },
    ]) {
      const res = await call(operator, '/api/fhir/R4/MedicationRequest/rx-modext', { method: 'PUT', json: resource });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.resourceType).toBe('OperationOutcome');
      expect(res.body.issue[0]).toMatchObject({ code: 'extension' });
      expect(res.body.issue[0].details.text).toContain('http://ehr.example/fhir/StructureDefinition/not-given');
    }
    // The one modifier Pont understands (a topic's status, on the Basic it publishes a topic as) is understood there only.
    const topicStatus = { url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.status', valueCode: 'retired' };
    const elsewhere = await call(operator, '/api/fhir/R4/MedicationRequest/rx-modext', { method: 'PUT', json: { ...rx, modifierExtension: [topicStatus] } });
    expect(elsewhere.status, JSON.stringify(elsewhere.body)).toBe(400);
    const bundle = await call(operator, '/api/fhir/R4', { method: 'POST', json: { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { ...rx, id: undefined, modifierExtension: [notGiven] }, request: { method: 'POST', url: 'MedicationRequest' } }] } });
    expect(bundle.status).toBe(400);
    expect((await call(operator, '/api/fhir/R4/MedicationRequest/rx-modext')).status).toBe(404);
    expect((await summary()).active_medications.map((r: any) => r.id)).not.toContain('rx-modext');
    // An extension that is no modifier is kept, as ever.
    await put({ ...rx, extension: [{ url: 'http://ehr.example/fhir/StructureDefinition/local-note', valueString: 'ward stock' }] });
    expect((await summary()).active_medications.map((r: any) => r.id)).toContain('rx-modext');
  });

  it('a resource’s encounter is its own patient’s: a result of one patient filed in another’s visit is refused on every write, so no record shows that visit as its context', async () => {
    const otherPatient = await put({ resourceType: 'Patient', id: 'a.b-c', name: [{ family: 'Other' }] });
    const other = (id: string, encounter: string) => ({
      resourceType: 'Observation', id, status: 'final', category: [LAB], code: { text: 'Glucose' }, subject: { reference: 'Patient/a.b-c' },
      encounter: { reference: encounter }, effectiveDateTime: '2026-11-24T08:00:00Z', valueQuantity: { value: 5.1, unit: 'mmol/L' },
    });
    // enc.7 is Patient/123's, written absolute or relative.
    for (const encounter of ['Encounter/enc.7', `${pont.url}/api/fhir/R4/Encounter/enc.7`]) {
      const res = await call(operator, '/api/fhir/R4/Observation/obs-crossed', { method: 'PUT', json: other('obs-crossed', encounter) });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.issue[0].diagnostics).toMatch(/Encounter\/enc\.7.*another patient/);
      expect(res.body.issue[0].expression).toEqual(['Observation.encounter']);
    }
    // Naming the visit's patient beside (an attacker's review: focus, performer) makes it no less another patient's visit.
    for (const extra of [{ focus: [{ reference: 'Patient/123' }] }, { performer: [{ reference: 'Patient/123' }] }]) {
      const res = await call(operator, '/api/fhir/R4/Observation/obs-crossed', { method: 'PUT', json: { ...other('obs-crossed', 'Encounter/enc.7'), ...extra } });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
    }
    // In a transaction too, and an encounter of the same bundle counts.
    const tx = await call(operator, '/api/fhir/R4', { method: 'POST', json: { resourceType: 'Bundle', type: 'transaction', entry: [
      { resource: other('obs-crossed', 'Encounter/enc.7'), request: { method: 'PUT', url: 'Observation/obs-crossed' } },
    ] } });
    expect(tx.status).toBe(400);
    expect((await call(operator, '/api/fhir/R4/Observation/obs-crossed')).status).toBe(404);
    const own = await call(operator, '/api/fhir/R4', { method: 'POST', json: { resourceType: 'Bundle', type: 'transaction', entry: [
      { resource: { resourceType: 'Encounter', id: 'enc-abc', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: 'Patient/a.b-c' } }, request: { method: 'PUT', url: 'Encounter/enc-abc' } },
      { resource: other('obs-own', 'Encounter/enc-abc'), request: { method: 'PUT', url: 'Observation/obs-own' } },
    ] } });
    expect(own.status, JSON.stringify(own.body)).toBe(200);
    // A push naming another patient's visit is refused as well: one the pusher may not see does not exist, one it may
    // (a consent of that patient's) is another patient's.
    const otherHealthId = otherPatient.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
    const record = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1`)).body.records.lab_results[0];
    const pushWith = (visit_id: string, key: string) => call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', headers: { 'idempotency-key': key }, json: { health_id: healthId, record: { ...record, visit_id } } });
    // Without a consent of that patient, their visit is answered as one that does not exist: the same answer, word for
    // word but the id, nothing written.
    const unseen = await pushWith('enc-abc', 'unseen-visit');
    const none = await pushWith('enc-none', 'no-visit');
    expect(unseen.status).toBe(422);
    expect(unseen.body.details).toEqual([{ field: 'record.visit_id', message: none.body.details[0].message.replace('enc-none', 'enc-abc') }]);
    const filed = await call(operator, `/api/fhir/R4/Observation?encounter=Encounter/enc-abc&subject=Patient/123`);
    expect(filed.status).toBe(200);
    expect((filed.body.entry ?? []).filter((e: any) => e.search?.mode === 'match')).toEqual([]);
    const expires_at = new Date(Date.now() + 365 * 86_400_000).toISOString();
    expect((await call(reader, `/api/v1/connect/patient/${otherHealthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at } })).status).toBe(201);
    const pushed = await pushWith('enc-abc', 'crossed-visit');
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(422);
    expect(pushed.body.details).toEqual([{ field: 'record.visit_id', message: expect.stringContaining("Encounter/enc-abc, which is another patient's encounter") }]);
  });

  it('a panel is its members: a CBC pushed back keeps them (it was written empty), and a vital signs panel lists them as a lab panel does', async () => {
    const obs = (id: string, code: string, extra: Record<string, unknown>) =>
      put({ resourceType: 'Observation', id, status: 'final', subject, effectiveDateTime: '2026-11-24T07:00:00Z', code: { coding: [{ system: 'http://loinc.org', code }] }, ...extra });
    await obs('hgb-1', '718-7', { category: [LAB], valueQuantity: { value: 13.2, unit: 'g/dL' } });
    await obs('wbc-1', '6690-2', { category: [LAB], valueQuantity: { value: 6.1, unit: '10*3/uL' } });
    await obs('cbc-1', '58410-2', { category: [LAB], hasMember: [{ reference: 'Observation/hgb-1' }, { reference: 'Observation/wbc-1' }] });
    const VS = [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }];
    await obs('hr-1', '8867-4', { category: VS, valueQuantity: { value: 72, unit: '/min' } });
    await obs('vs-1', '85353-1', { category: VS, hasMember: [{ reference: 'Observation/hr-1' }] });
    const records = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=all&limit=1000`)).body.records;
    const cbc = records.lab_results.find((r: any) => r.id === 'cbc-1');
    expect(cbc.member_ids).toEqual(['hgb-1', 'wbc-1']);
    expect(records.vitals.find((r: any) => r.id === 'vs-1').member_ids).toEqual(['hr-1']);
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', headers: { 'idempotency-key': 'cbc-1-back' }, json: { health_id: healthId, record: cbc } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body;
    expect(written.hasMember).toEqual([{ reference: 'Observation/hgb-1' }, { reference: 'Observation/wbc-1' }]);
  });

  it('a record pushed back says which of its fields the FHIR written does not hold (a visit’s service provider is read only; its places and admission source are written back): not a silent 201', async () => {
    await put({
      resourceType: 'Encounter', id: 'enc-hosp', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' }, subject, period: { start: '2026-11-05T08:00:00Z', end: '2026-11-07T08:00:00Z' },
      hospitalization: { admitSource: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/admit-source', code: 'emd' }] } },
      location: [{ location: { display: 'Ward 3' } }], serviceProvider: { display: 'Mercy Hospital' },
    });
    const visits = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=visits&limit=1000`)).body.records.visits;
    const record = visits.find((r: any) => r.id === 'enc-hosp');
    expect(record).toMatchObject({ admit_source_code: 'emd', location: 'Ward 3' });
    const sdkVisits = await createTestClient(pont, ['encounters:write', 'patients:read'], { organizationId: 'org-reader' });
    const pushed = await call(sdkVisits, '/api/v1/sdk/records/encounters', { method: 'POST', headers: { 'idempotency-key': 'enc-hosp-back' }, json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    expect(pushed.body.not_written).toContain('facility');
    expect(pushed.body.not_written).not.toContain('location');
    expect(pushed.body.not_written).not.toContain('admit_source_code');
    expect(pushed.body.not_written).not.toContain('class');
    expect(pushed.body.not_written).not.toContain('started_at');
    const visit = (await call(operator, `/api/fhir/R4/Encounter/${pushed.body.encounter_id}`)).body;
    expect(visit.hospitalization?.admitSource?.coding).toEqual([{ system: 'http://terminology.hl7.org/CodeSystem/admit-source', code: 'emd' }]);
    expect(visit.location).toEqual([{ location: { display: 'Ward 3' } }]);
    // A record whose fields are all written says so.
    await put({ resourceType: 'Observation', id: 'na-plain', status: 'final', category: [LAB], code: { coding: [{ system: 'http://loinc.org', code: '2345-7', display: 'Glucose' }] }, subject, effectiveDateTime: '2026-11-24T07:00:00Z', valueQuantity: { value: 5.2, unit: 'mmol/L', system: 'http://unitsofmeasure.org', code: 'mmol/L' } });
    const labs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results;
    const plain = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', headers: { 'idempotency-key': 'na-plain-back' }, json: { health_id: healthId, record: labs.find((r: any) => r.id === 'na-plain') } });
    expect(plain.status, JSON.stringify(plain.body)).toBe(201);
    expect(plain.body.not_written).toEqual([]);
  });

  it('a report-only result of another laboratory section (MB, microbiology) reads with its section and is pushed back with it, not as LAB (found in a review: it read without its section and was written back as LAB)', async () => {
    const V2_0074 = 'http://terminology.hl7.org/CodeSystem/v2-0074';
    for (const section of ['MB', 'LAB']) {
      await put({ resourceType: 'DiagnosticReport', id: `culture-${section}`, status: 'final', category: [{ coding: [{ system: V2_0074, code: section }] }], code: { text: 'Blood culture' }, subject, effectiveDateTime: '2026-11-20T07:00:00Z', conclusion: 'No growth after 5 days' });
    }
    const labs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results;
    for (const section of ['MB', 'LAB']) {
      const record = labs.find((r: any) => r.id === `culture-${section}`);
      expect(record, section).toMatchObject({ source: 'report', categories: [{ system: V2_0074, code: section, display: null }] });
      const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', headers: { 'idempotency-key': `culture-${section}-back` }, json: { health_id: healthId, record } });
      expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
      expect(pushed.body.not_written, section).toEqual([]);
      // The answer says what was written: a report, which is also the report that issues it (found by another vendor's
      // writer: `diagnostic_report_id: null` beside the report's id).
      expect(pushed.body.diagnostic_report_id, section).toBe(pushed.body.lab_result_id);
      const written = (await call(operator, `/api/fhir/R4/DiagnosticReport/${pushed.body.lab_result_id}`)).body;
      expect(written.category, section).toEqual([{ coding: [{ system: V2_0074, code: section }] }]);
    }
    // A report-only record pushed without a section of table 0074 is a laboratory report (LAB), as the SDK writes one.
    const record = { ...labs.find((r: any) => r.id === 'culture-MB'), categories: [] };
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', headers: { 'idempotency-key': 'culture-none-back' }, json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    expect((await call(operator, `/api/fhir/R4/DiagnosticReport/${pushed.body.lab_result_id}`)).body.category).toEqual([{ coding: [{ system: V2_0074, code: 'LAB' }] }]);
  });

  it('a body site coded only (SNOMED CT) is pushed back with its coding, not as its code in words', async () => {
    const SCT = 'http://snomed.info/sct';
    await put({ resourceType: 'Observation', id: 'hb-site', status: 'final', category: [LAB], code: { coding: [{ system: 'http://loinc.org', code: '718-7' }] }, subject, effectiveDateTime: '2026-11-24T07:00:00Z', valueQuantity: { value: 13.1, unit: 'g/dL' }, bodySite: { coding: [{ system: SCT, code: '368208006' }] } });
    const labs = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=lab_results&limit=1000`)).body.records.lab_results;
    const record = labs.find((r: any) => r.id === 'hb-site');
    expect(record.body_site_codings).toEqual([{ system: SCT, code: '368208006', display: null }]);
    const pushed = await call(sdk, '/api/v1/sdk/records/lab-results', { method: 'POST', headers: { 'idempotency-key': 'hb-site-back' }, json: { health_id: healthId, record } });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const written = (await call(operator, `/api/fhir/R4/Observation/${pushed.body.lab_result_id}`)).body;
    expect(written.bodySite.coding).toEqual([{ system: SCT, code: '368208006' }]);
  });

  it('a push of thousands of unknown keys a kilobyte long is a bounded 422 (an attacker’s review: the answer echoed 30 MB)', async () => {
    const junk = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`${'k'.repeat(1500)}${i}`, 1]));
    for (const json of [{ health_id: healthId, record: { source: 'observation', ...junk } }, { health_id: healthId, test_name: 'x', result_value: '1', ...junk }]) {
      const res = await pont.fetch('/api/v1/sdk/records/lab-results', { method: 'POST', headers: { ...sdk.headers, 'content-type': 'application/json' }, body: JSON.stringify(json) });
      const text = await res.text();
      expect(res.status).toBe(422);
      expect(text.length).toBeLessThan(20_000);
      expect(JSON.parse(text).error_code).toBe('VALIDATION_FAILED');
    }
  });

  it('a visit’s provider is the name of its provider_id, whatever the other participants’ references give; every participant is listed with their name', async () => {
    await put({ resourceType: 'Practitioner', id: 'pr-kumar', name: [{ prefix: ['Dr'], given: ['Anita'], family: 'Kumar' }] });
    await put({
      resourceType: 'Encounter', id: 'enc-inpt', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' }, subject, period: { start: '2026-11-01T08:00:00Z', end: '2026-11-03T08:00:00Z' },
      participant: [
        { type: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ParticipationType', code: 'ATND', display: 'attender' }] }], individual: { reference: 'Practitioner/pr-kumar' } },
        { individual: { display: 'Nurse Joy' } },
      ],
    });
    const visits = (await call(reader, `/api/v1/connect/patient/${healthId}/records?type=visits&limit=1000`)).body.records.visits;
    const record = visits.find((r: any) => r.id === 'enc-inpt');
    expect(record).toMatchObject({ provider_id: 'pr-kumar', provider: 'Dr Anita Kumar' });
    expect(record.participants).toEqual([
      { provider_id: 'pr-kumar', name: 'Dr Anita Kumar', role: 'attender', role_code: 'ATND', role_system: 'http://terminology.hl7.org/CodeSystem/v3-ParticipationType' },
      { provider_id: null, name: 'Nurse Joy', role: null, role_code: null, role_system: null },
    ]);
  });
});
