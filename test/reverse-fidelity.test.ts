import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * The reverse probe: a small clinic pushes realistic, imperfect data through the Connect/SDK write routes, then a
 * FHIR-native app of another vendor (its own organisation, reading by the patient's consent) reads the FHIR Pont
 * wrote, judged as a US Core 6 / IPS reader would; and the clinic reads its records back through Connect.
 * (A helper's probe: the tests whose names say what happened before failed before the fixes of their commit; the others
 * pin what held.)
 */
const UCUM = 'http://unitsofmeasure.org';
const OBS_CATEGORY = 'http://terminology.hl7.org/CodeSystem/observation-category';
const V3_INTERP = 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation';
const V2_0074 = 'http://terminology.hl7.org/CodeSystem/v2-0074';
const HEALTH_ID = 'https://pont.health/fhir/sid/health-id';

let pont: TestServer;
let clinic: TestClient; // the integrator: speaks only Connect/SDK
let smartApp: TestClient; // another vendor's FHIR-native app, reading with the patient's consent
let healthId: string;
let patientId: string;

const call = (c: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(path, { ...init, headers: { ...c.headers, ...(init.headers as Record<string, string>) } });

async function fhir(path: string): Promise<any> {
  const res = await call(smartApp, `/api/fhir/R4/${path}`);
  expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

/** Push a lab result; the Observation and DiagnosticReport Pont wrote, as the FHIR app reads them. */
async function pushLab(body: Record<string, unknown>, headers: Record<string, string> = {}) {
  const res = await call(clinic, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, ...body }, headers });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { answer: res.body, obs: await fhir(`Observation/${res.body.lab_result_id}`), report: await fhir(`DiagnosticReport/${res.body.diagnostic_report_id}`) };
}

async function pushVisit(body: Record<string, unknown>) {
  const res = await call(clinic, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { answer: res.body, enc: await fhir(`Encounter/${res.body.encounter_id}`) };
}

async function records(type: string): Promise<any[]> {
  const res = await call(clinic, `/api/v1/connect/patient/${healthId}/records?type=${type}&limit=1000`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.records[type];
}

beforeAll(async () => {
  pont = await startTestServer();
  clinic = await createTestClient(
    pont,
    ['health_id:verify', 'labs:write', 'encounters:write', 'labs:read', 'patients:read', 'patient:diagnostics:read', 'consents:write', 'consents:read', 'patients:profile:read'],
    { organizationId: 'org-clinic', name: 'Clinique du Lac' },
  );
  smartApp = await createTestClient(pont, ['fhir:read', 'consents:write'], { organizationId: 'org-smart-vendor', name: 'vendor SMART app' });
  const resolved = await call(clinic, '/api/v1/connect/patients/resolve', {
    method: 'POST',
    json: { first_name: 'Zoé', last_name: 'Nkoulou-Étoundi', date_of_birth: '1958', sex: 'female', phone_number: '+237 6 99 12 34 56' },
  });
  expect(resolved.status, JSON.stringify(resolved.body)).toBe(201);
  healthId = resolved.body.health_id;
  // The patient, at the other vendor's facility, consents to it reading her record.
  const expires_at = new Date(Date.now() + 30 * 86_400_000).toISOString();
  const grant = await call(smartApp, `/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at, purpose: 'Suivi diabète' } });
  expect(grant.status, JSON.stringify(grant.body)).toBe(201);
  const found = await fhir(`Patient?identifier=${encodeURIComponent(`${HEALTH_ID}|${healthId}`)}`);
  patientId = found.entry[0].resource.id;
}, 120_000);

afterAll(async () => {
  await pont?.close();
});

describe('POST /api/v1/connect/patients/resolve: names with accents, a birth year only', () => {
  it('the Patient is US Core-readable and says exactly what was given (accents, 1958, female, the Health ID)', async () => {
    const patient = await fhir(`Patient/${patientId}`);
    expect(patient.name).toEqual([{ use: 'official', given: ['Zoé'], family: 'Nkoulou-Étoundi' }]);
    expect(patient.birthDate).toBe('1958');
    expect(patient.gender).toBe('female');
    expect(patient.identifier).toContainEqual({ system: HEALTH_ID, value: healthId });
    expect(patient.telecom).toEqual([{ system: 'phone', value: '+237 6 99 12 34 56' }]);
    // Resolving again (accents dropped, other case) finds her: one person, one Patient.
    const again = await call(clinic, '/api/v1/connect/patients/resolve', { method: 'POST', json: { first_name: 'ZOE', last_name: 'nkoulou etoundi', date_of_birth: '1958', sex: 'female' } });
    expect(again.body).toMatchObject({ status: 'found', health_id: healthId, patient: { first_name: 'Zoé', last_name: 'Nkoulou-Étoundi', date_of_birth: '1958', sex: 'female' } });
  });

  it('what was not said is not invented (no sex: no gender; no birth date: none)', async () => {
    const res = await call(clinic, '/api/v1/connect/patients/resolve', { method: 'POST', json: { first_name: 'Amadou' } });
    expect(res.status).toBe(201);
    expect(res.body.patient).toMatchObject({ first_name: 'Amadou', last_name: null, date_of_birth: null, sex: null });
    const bundle = await call(clinic, `/api/v1/connect/patient/search?health_id=${res.body.health_id}`);
    expect(bundle.status).toBe(200);
    const patient = (await call(clinic, `/api/v1/sdk/patients/${res.body.health_id}/fhir/$everything`)).body.entry.find((e: any) => e.resource.resourceType === 'Patient').resource;
    expect(patient.gender).toBeUndefined();
    expect(patient.birthDate).toBeUndefined();
    expect(patient.name).toEqual([{ use: 'official', given: ['Amadou'] }]);
  });
});

describe('POST /api/v1/sdk/records/lab-results, read by a FHIR-native app', () => {
  it('category laboratory, code as text (no LOINC invented), status, issued, resolvable subject; the report is LAB and lists it', async () => {
    const { obs, report } = await pushLab({ test_name: 'Glycémie à jeun', result_value: '6.8', unit: 'mmol/L', flagged: true, flag_level: 'high', effective_at: '2026-11-20' });
    expect(obs.category).toContainEqual({ coding: [{ system: OBS_CATEGORY, code: 'laboratory' }] });
    expect(obs.code).toEqual({ text: 'Glycémie à jeun' });
    expect(obs.status).toBe('final');
    expect(obs.issued).toBeDefined();
    expect(obs.effectiveDateTime).toBe('2026-11-20');
    expect(obs.subject).toEqual({ reference: `Patient/${patientId}` });
    expect(obs.interpretation).toEqual([{ coding: [{ system: V3_INTERP, code: 'H' }] }]);
    expect(report.category).toContainEqual({ coding: [{ system: V2_0074, code: 'LAB' }] });
    expect(report.result).toEqual([{ reference: `Observation/${obs.id}` }]);
    expect(report.subject).toEqual(obs.subject);
    expect(report.issued).toBeDefined();
    expect(report.effectiveDateTime).toBe('2026-11-20');
    await fhir(obs.subject.reference);
    // The app finds it as US Core searches do.
    const byCategory = await fhir(`Observation?patient=${patientId}&category=${encodeURIComponent(`${OBS_CATEGORY}|laboratory`)}`);
    expect(byCategory.entry.map((e: any) => e.resource.id)).toContain(obs.id);
    const reports = await fhir(`DiagnosticReport?patient=${patientId}&category=LAB`);
    expect(reports.entry.map((e: any) => e.resource.id)).toContain(report.id);
  });

  it('results in words stay words of the right type ("positive", "1+", "Négatif" as valueString, never a Quantity), a limit "<0.5" is a Quantity with comparator', async () => {
    const malaria = await pushLab({ test_name: 'Malaria RDT', result_value: 'positive', flagged: true, effective_at: '2026-11-20' });
    expect(malaria.obs.valueString).toBe('positive');
    expect(malaria.obs.valueQuantity).toBeUndefined();
    expect(malaria.obs.interpretation[0].coding).toEqual([{ system: V3_INTERP, code: 'A' }]);
    const dipstick = await pushLab({ test_name: 'Protéines urinaires (bandelette)', result_value: '1+', effective_at: '2026-11-20' });
    expect(dipstick.obs.valueString).toBe('1+');
    expect(dipstick.obs.interpretation).toBeUndefined(); // nothing said, nothing invented
    expect(dipstick.answer).toMatchObject({ flagged: null, flag: null });
    const hiv = await pushLab({ test_name: 'HIV 1/2 Ab', result_value: 'Négatif', flagged: false, effective_at: '2026-11-20' });
    expect(hiv.obs.valueString).toBe('Négatif');
    expect(hiv.obs.interpretation[0].coding).toEqual([{ system: V3_INTERP, code: 'N' }]);
    const crp = await pushLab({ test_name: 'CRP', result_value: '<0.5', unit: 'mg/L', flagged: false, effective_at: '2026-11-21T09:30:00+01:00' });
    expect(crp.obs.valueQuantity).toMatchObject({ value: 0.5, comparator: '<', unit: 'mg/L' });
    expect(crp.obs.effectiveDateTime).toBe('2026-11-21T09:30:00+01:00');
    // A number written with a decimal comma and a unit is refused, not stored as words.
    const comma = await call(clinic, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, test_name: 'K', result_value: '5,6', unit: 'mmol/L' } });
    expect(comma.status).toBe(422);
  });

  it('a unit that is not UCUM ("x10^9/L") is left as text, honestly: no UCUM system or code claimed', async () => {
    const { obs } = await pushLab({ test_name: 'WBC', result_value: '12.4', unit: 'x10^9/L', flagged: true, effective_at: '2026-11-20' });
    expect(obs.valueQuantity).toEqual({ value: 12.4, unit: 'x10^9/L' });
    expect(obs.interpretation[0].coding).toEqual([{ system: V3_INTERP, code: 'A' }]);
  });

  it('the map writes a UCUM-coded unit when a record gives unit_code (so the push could)', async () => {
    const res = await call(clinic, '/api/v1/sdk/records/lab-results', {
      method: 'POST',
      json: { health_id: healthId, record: { test_name: 'CRP', value_numeric: 3, unit: 'mg/L', unit_code: 'mg/L', status: 'final', effective_at: '2026-11-20' } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect((await fhir(`Observation/${res.body.lab_result_id}`)).valueQuantity).toEqual({ value: 3, unit: 'mg/L', system: UCUM, code: 'mg/L' });
  });

  it('a unit that is UCUM (g/dL, mg/L, mmol/L) is written as valueQuantity with system UCUM and its code, as US Core and IPS readers require (it was words only)', async () => {
    for (const [name, value, unit] of [['Hémoglobine', '9.1', 'g/dL'], ['CRP', '12', 'mg/L'], ['Kaliémie', '4.1', 'mmol/L']] as const) {
      const { obs } = await pushLab({ test_name: name, result_value: value, unit, effective_at: '2026-11-20' });
      expect(obs.valueQuantity, name).toMatchObject({ unit, system: UCUM, code: unit });
    }
  });

  it('each limit of the reference range carries the unit, low and high alike, and a range with only an upper limit (it was on the low limit only)', async () => {
    const glucose = await pushLab({ test_name: 'Glycémie à jeun', result_value: '6.8', unit: 'mmol/L', reference_low: 3.9, reference_high: 6.1, flagged: true, flag_level: 'high', effective_at: '2026-11-20' });
    expect(glucose.obs.referenceRange).toEqual([{ low: expect.objectContaining({ value: 3.9, unit: 'mmol/L' }), high: expect.objectContaining({ value: 6.1, unit: 'mmol/L' }) }]);
    const chol = await pushLab({ test_name: 'Cholestérol total', result_value: '5.9', unit: 'mmol/L', reference_high: 5.2, flagged: true, flag_level: 'high', effective_at: '2026-11-19' });
    expect(chol.obs.referenceRange).toEqual([{ high: expect.objectContaining({ value: 5.2, unit: 'mmol/L' }) }]);
    // And the integrator reads back the range it pushed, in its unit.
    const record = (await records('lab_results')).find((r) => r.id === chol.obs.id);
    expect(record).toMatchObject({ reference_high: 5.2, reference_range_unit: 'mmol/L' });
  });

});

describe('POST /api/v1/sdk/records/encounters, read by a FHIR-native app', () => {
  it('a visit with a reason in words: type and reason as text, class AMB (v3 ActCode), status, resolvable subject, the start given', async () => {
    const { enc } = await pushVisit({ encounter_type: 'consultation', reason: 'Fièvre depuis 3 jours', started_at: '2026-11-20T08:00:00Z' });
    expect(enc.type).toEqual([{ text: 'consultation' }]);
    expect(enc.reasonCode).toEqual([{ text: 'Fièvre depuis 3 jours' }]);
    expect(enc.class).toEqual({ system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' });
    expect(enc.status).toBe('finished');
    expect(enc.subject).toEqual({ reference: `Patient/${patientId}` });
    expect(enc.period.start).toBe('2026-11-20T08:00:00Z');
    const found = await fhir(`Encounter?patient=${patientId}`);
    expect(found.entry.map((e: any) => e.resource.id)).toContain(enc.id);
  });

  it('a visit pushed with only its start (finished) gets no invented end (it ended at the push: a nine-day consultation); one pushed with no time is now', async () => {
    const started = await pushVisit({ encounter_type: 'consultation', reason: 'Toux', started_at: '2026-11-20T08:00:00Z' });
    expect(started.enc.period).toEqual({ start: '2026-11-20T08:00:00Z' });
    const minimal = await pushVisit({ encounter_type: 'follow-up' });
    expect(minimal.enc.period.start).toBe(minimal.enc.period.end);
    expect(Date.now() - Date.parse(minimal.enc.period.start)).toBeLessThan(60_000);
    const visits = await records('visits');
    expect(visits.find((v) => v.id === started.enc.id)).toMatchObject({ started_at: '2026-11-20T08:00:00Z', ended_at: null });
  });

  it('a visit known only by its date ("2026-11-20") is accepted and written at that precision (it was a 422)', async () => {
    const res = await call(clinic, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, encounter_type: 'consultation', reason: 'Paludisme', started_at: '2026-11-20' } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect((await fhir(`Encounter/${res.body.encounter_id}`)).period.start).toBe('2026-11-20');
  });

  it('a decision-support alert is a DetectedIssue for the patient, implicating a resolvable Encounter, with severity, detail and rule', async () => {
    const res = await call(clinic, '/api/v1/sdk/records/encounters', {
      method: 'POST',
      json: { health_id: healthId, encounter_type: 'cdss_alert', alert_type: 'drug_interaction', severity: 'high', clinical_note: 'Warfarine + aspirine', cdss_rule_id: 'R-12' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const issue = await fhir(`DetectedIssue/${res.body.detected_issue_id}`);
    expect(issue).toMatchObject({ status: 'final', severity: 'high', detail: 'Warfarine + aspirine', patient: { reference: `Patient/${patientId}` } });
    expect(issue.implicated).toEqual([{ reference: `Encounter/${res.body.encounter_id}` }]);
    await fhir(issue.implicated[0].reference);
  });
});

describe('consent routes, read as FHIR Consent', () => {
  it('a grant is an active R4 Consent of the patient (scope, category, policy, provision period, the organisation as actor); a revoke makes it inactive', async () => {
    // Another organisation (a pharmacy) reads its own Consent through FHIR: another organisation's is not its to see.
    const other = await createTestClient(pont, ['consents:write', 'consents:read', 'fhir:read'], { organizationId: 'org-pharmacie' });
    const read = async (id: string) => {
      const res = await call(other, `/api/fhir/R4/Consent/${id}`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body;
    };
    const expires_at = new Date(Date.now() + 7 * 86_400_000).toISOString();
    const grant = await call(other, `/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at } });
    expect(grant.status, JSON.stringify(grant.body)).toBe(201);
    const consent = await read(grant.body.consent_id);
    expect(consent).toMatchObject({ status: 'active', patient: { reference: `Patient/${patientId}` }, scope: { coding: [{ code: 'patient-privacy' }] } });
    expect(consent.category.length).toBeGreaterThan(0);
    expect(consent.policyRule ?? consent.policy).toBeDefined();
    expect(Date.parse(consent.provision.period.end)).toBe(Date.parse(expires_at.replace(/\.\d+Z$/, 'Z')));
    expect(consent.provision.actor[0].reference.identifier.value).toBe('org-pharmacie');
    // A request the patient has not answered is a proposed Consent: no FHIR reader takes it as permission.
    const asked = await call(other, '/api/v1/sdk/consents/request', { method: 'POST', json: { health_id: healthId, purpose: 'Dispensation', requested_scopes: ['prescriptions:read'] } });
    expect(asked.status, JSON.stringify(asked.body)).toBe(201);
    expect((await read(asked.body.consent_request_id)).status).toBe('proposed');
    const revoked = await call(other, `/api/v1/connect/patient/${healthId}/consent/revoke`, { method: 'POST', json: {} });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    expect((await read(grant.body.consent_id)).status).toBe('inactive');
  });
});

describe('the round trip through Connect', () => {
  it('the lab record read back holds, field by field, what the integrator pushed', async () => {
    const pushed = [
      { test_name: 'Hémoglobine', result_value: '9.10', unit: 'g/dL', loinc_code: '718-7', flagged: true, flag_level: 'low', reference_low: 12, status: 'preliminary', effective_at: '2026-11-18' },
      { test_name: 'Malaria RDT', result_value: 'positive', flagged: true, flag_level: 'abnormal', interpretation: 'P. falciparum antigen detected', effective_at: '2026-11-18T10:15:00+01:00' },
      { test_name: 'CRP', result_value: '<0.5', unit: 'mg/L', flagged: false, effective_at: '2026-11-18' },
    ];
    const ids = [];
    for (const body of pushed) ids.push((await pushLab(body)).obs.id);
    const all = await records('lab_results');
    const [hb, malaria, crp] = ids.map((id) => all.find((r) => r.id === id));
    expect(hb).toMatchObject({ test_name: 'Hémoglobine', value_numeric: 9.1, value_precision: 2, unit: 'g/dL', loinc_code: '718-7', flag: 'L', flag_level: 'low', reference_low: 12, reference_range_unit: 'g/dL', status: 'preliminary', effective_at: '2026-11-18', value: null });
    expect(malaria).toMatchObject({ test_name: 'Malaria RDT', value: 'positive', value_numeric: null, unit: null, flag: 'A', flag_level: 'abnormal', interpretation: 'P. falciparum antigen detected', status: 'final', effective_at: '2026-11-18T10:15:00+01:00' });
    expect(crp).toMatchObject({ test_name: 'CRP', value_numeric: 0.5, comparator: '<', unit: 'mg/L', flag: 'N', flag_level: 'normal', status: 'final', effective_at: '2026-11-18' });
  });

  it('the visit record read back holds what the integrator pushed (type, reason in words, status, class, start with its offset, note)', async () => {
    const { enc } = await pushVisit({ encounter_type: 'consultation', reason: 'Douleurs abdominales', started_at: '2026-11-16T09:45:00+01:00', ended_at: '2026-11-16T10:05:00+01:00', clinical_note: 'Examen normal.' });
    const visit = (await records('visits')).find((v) => v.id === enc.id);
    expect(visit).toMatchObject({ type: 'consultation', reason: 'Douleurs abdominales', status: 'finished', class: 'AMB', note: 'Examen normal.' });
    expect(Date.parse(visit.started_at)).toBe(Date.parse('2026-11-16T09:45:00+01:00'));
    expect(Date.parse(visit.ended_at)).toBe(Date.parse('2026-11-16T10:05:00+01:00'));
    expect(enc.period.start).toBe('2026-11-16T09:45:00+01:00');
  });

  it('a record read and pushed back whole (`record`) writes the same record (not_written empty, every field equal but the id)', async () => {
    const labs = (await records('lab_results')).filter((r) => r.source === 'observation');
    const visits = await records('visits');
    expect(labs.length).toBeGreaterThan(5);
    const strip = ({ id, ...rest }: Record<string, unknown>) => rest;
    for (const rec of labs) {
      const res = await call(clinic, '/api/v1/sdk/records/lab-results', { method: 'POST', json: { health_id: healthId, record: rec } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.not_written, rec.test_name).toEqual([]);
      const back = (await records('lab_results')).find((r) => r.id === res.body.lab_result_id);
      expect(strip({ ...back, issued_at: null }), rec.test_name).toEqual(strip({ ...rec, issued_at: null }));
    }
    for (const rec of visits.filter((v) => v.type !== 'cdss_alert')) {
      const res = await call(clinic, '/api/v1/sdk/records/encounters', { method: 'POST', json: { health_id: healthId, record: rec } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.not_written, rec.type).toEqual([]);
      const back = (await records('visits')).find((r) => r.id === res.body.encounter_id);
      expect(strip(back), rec.type).toEqual(strip(rec));
    }
  });

  it('pushing the same result again with its Idempotency-Key writes nothing more and answers the same', async () => {
    const key = `reverse-${Date.now()}`;
    const body = { health_id: healthId, test_name: 'TSH', result_value: '2.3', unit: 'mU/L', flagged: false, effective_at: '2026-11-17' };
    const first = await call(clinic, '/api/v1/sdk/records/lab-results', { method: 'POST', json: body, headers: { 'idempotency-key': key } });
    expect(first.status).toBe(201);
    const before = (await records('lab_results')).length;
    const again = await call(clinic, '/api/v1/sdk/records/lab-results', { method: 'POST', json: body, headers: { 'idempotency-key': key } });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect((await records('lab_results')).length).toBe(before);
  });
});
