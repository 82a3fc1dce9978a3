import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { x as extract } from 'tar';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import { importPaths } from '../src/fhir/import';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { backend, createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { startReceiver, type Receiver } from './webhooks-support';

/**
 * Records out and in: every Synthea patient's records through Connect, compared with an independent reading
 * of the same FHIR resources; the SDK summary; pushed encounters and lab results; the per-patient FHIR helpers.
 */
const samples = fileURLToPath(new URL('../samples', import.meta.url));
/**
 * All 50 sample patients on PostgreSQL (15,053 resources, 45 to 60 s of import). On PGlite, where importing the 50
 * took 90 s, the first 10 by file name (2,523 resources, of every resource type the 50 hold): every test below runs
 * there as here, through the same SQL; the 40 more patients add data of the same types, not statements.
 */
const PATIENTS = backend === 'postgres' ? 50 : 10;
const LAB = 'http://terminology.hl7.org/CodeSystem/observation-category';
const RECORD_SCOPES = ['health_id:verify', 'consents:read', 'consents:write', 'patient:diagnostics:read', 'patients:read', 'labs:read', 'prescriptions:read'] as const;

let pont: TestServer;
/** Reads with each patient's full-record consent. */
let reader: TestClient;
/** The operator's view, for checks. */
let operator: TestClient;
let data: Resource[];
const healthIdOf = new Map<string, string>();
let dir: string;

const inAYear = () => new Date(Date.now() + 365 * 86_400_000).toISOString();
/**
 * Writing data about a patient needs a consent covering it (or having registered the patient): `org` records
 * the patient's full-record consent through a client of its own with consents:write.
 */
async function consentFor(org: string, healthId: string): Promise<TestClient> {
  const granter = await createTestClient(pont, ['consents:write'], { organizationId: org });
  const granted = await call(granter, `/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at: inAYear() } });
  expect(granted.status).toBe(201);
  return granter;
}

const call = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(path, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
const records = (client: TestClient, healthId: string, query = '') => call(client, `/api/v1/connect/patient/${healthId}/records${query}`);

/** Every record of one type, following next_cursor. */
async function allRecords(client: TestClient, healthId: string, type: string, limit = 1000): Promise<any[]> {
  const out: any[] = [];
  let cursor: string | null = null;
  do {
    const res = await records(client, healthId, `?type=${type}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    out.push(...res.body.records[type]);
    cursor = res.body.next_cursor;
  } while (cursor);
  return out;
}

const of = (patientId: string) => (ref: unknown) => [`Patient/${patientId}`, `urn:uuid:${patientId}`].includes((ref as { reference?: string } | undefined)?.reference ?? '');
const inCategory = (r: any, system: string, code: string) => (r.category ?? []).some((c: any) => (c.coding ?? []).some((x: any) => x.system === system && x.code === code));

/** The independent reading: which resources each record type holds for a patient, straight from the files. */
function expectedIds(patientId: string): Record<string, string[]> {
  const mine = of(patientId);
  const ids = (pred: (r: any) => boolean) => data.filter(pred).map((r) => r.id!).sort();
  return {
    diagnoses: ids((r: any) => r.resourceType === 'Condition' && mine(r.subject)),
    allergies: ids((r: any) => r.resourceType === 'AllergyIntolerance' && mine(r.patient)),
    prescriptions: ids((r: any) => r.resourceType === 'MedicationRequest' && mine(r.subject)),
    lab_results: ids(
      (r: any) =>
        (r.resourceType === 'Observation' && mine(r.subject) && inCategory(r, LAB, 'laboratory')) ||
        (r.resourceType === 'DiagnosticReport' && mine(r.subject) && inCategory(r, 'http://terminology.hl7.org/CodeSystem/v2-0074', 'LAB') && !(r.result ?? []).length),
    ),
    vitals: ids((r: any) => r.resourceType === 'Observation' && mine(r.subject) && inCategory(r, LAB, 'vital-signs')),
    clinical_notes: ids((r: any) => r.resourceType === 'Composition' && mine(r.subject)),
    immunizations: ids((r: any) => r.resourceType === 'Immunization' && mine(r.patient)),
    // Issue 39: the types read since that Synthea writes.
    procedures: ids((r: any) => r.resourceType === 'Procedure' && mine(r.subject)),
    care_plans: ids((r: any) => r.resourceType === 'CarePlan' && mine(r.subject)),
    goals: ids((r: any) => r.resourceType === 'Goal' && mine(r.subject)),
  };
}

beforeAll(async () => {
  pont = await startTestServer({ PONT_WEBHOOK_RETRY_DELAYS: '1s,1s,1s,1s,1s,1s' });
  dir = mkdtempSync(join(tmpdir(), 'pont-records-'));
  extract({ file: join(samples, 'synthea-r4-50-patients.tar.gz'), cwd: dir, sync: true });
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .slice(0, PATIENTS)
    .map((f) => join(dir, f));
  data = files.flatMap((f) => (JSON.parse(readFileSync(f, 'utf8')) as Bundle).entry!.map((e) => e.resource!));
  const summary = await importPaths(pont.services.fhir, files);
  expect(summary.failures).toEqual([]);
  reader = await createTestClient(pont, [...RECORD_SCOPES, 'documents:read'], { organizationId: 'org-reader' });
  operator = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-operator', allPatients: true });
  for (const p of data.filter((r) => r.resourceType === 'Patient') as any[]) {
    const read = await call(operator, `/api/fhir/R4/Patient/${p.id}`);
    const healthId = read.body.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
    healthIdOf.set(p.id, healthId);
    const granted = await call(reader, `/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at: inAYear() } });
    expect(granted.status).toBe(201);
  }
}, 600_000);
afterAll(async () => {
  await pont?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe(`records retrieval of ${PATIENTS} Synthea patients (${backend})`, () => {
  it('holds, for every patient and type, exactly the resources an independent reading finds, newest first', async () => {
    expect(healthIdOf.size).toBe(PATIENTS);
    for (const [patientId, healthId] of healthIdOf) {
      const expected = expectedIds(patientId);
      const all = await records(reader, healthId, '?limit=1000');
      expect(all.status).toBe(200);
      expect(all.body.withheld).toEqual([]);
      for (const type of Object.keys(expected)) {
        const got = all.body.truncated.includes(type) ? await allRecords(reader, healthId, type) : all.body.records[type];
        expect(got.map((r: any) => r.id).sort(), `${type} of ${healthId}`).toEqual(expected[type]);
        if (type !== 'clinical_notes') for (const r of got) expect(r.patient_id, `${type} ${r.id}`).toBe(patientId);
      }
    }
    // 50 patients × every type (22 since issue 39), each type=all read and some paged: longer than the default minute.
  }, 240_000);

  it('many at once (more than the answers built together: src/records/service.ts ANSWERS_AT_ONCE) each get their own patient, as read alone', async () => {
    const patients = [...healthIdOf.values()].slice(0, 6);
    const alone = new Map<string, unknown>();
    for (const healthId of patients) alone.set(healthId, (await records(reader, healthId, '?limit=20')).body);
    const summaries = new Map<string, unknown>();
    for (const healthId of patients) summaries.set(healthId, (await call(reader, `/api/v1/sdk/patients/${healthId}/summary`)).body);
    // 24 records and 12 summaries at once, each patient's several times over, interleaved.
    const asked: Array<{ healthId: string; kind: 'records' | 'summary' }> = [
      ...[...patients, ...patients, ...patients, ...patients].map((healthId) => ({ healthId, kind: 'records' as const })),
      ...[...patients, ...patients].map((healthId) => ({ healthId, kind: 'summary' as const })),
    ];
    const answers = await Promise.all(asked.map(({ healthId, kind }) => (kind === 'records' ? records(reader, healthId, '?limit=20') : call(reader, `/api/v1/sdk/patients/${healthId}/summary`))));
    answers.forEach((res, i) => {
      const { healthId, kind } = asked[i]!;
      expect(res.status, `${kind} of ${healthId}`).toBe(200);
      expect(res.body, `${kind} of ${healthId}`).toEqual((kind === 'records' ? alone : summaries).get(healthId));
    });
  });

  it('says what each record is: fields read from the FHIR resource', async () => {
    const byId = new Map(data.map((r) => [r.id, r as any]));
    // A patient with blood pressures among their vital signs.
    const [patientId, healthId] = [...healthIdOf].find(([id]) =>
      data.some((r: any) => r.resourceType === 'Observation' && of(id)(r.subject) && r.code.coding.some((c: any) => ['85354-9', '55284-4'].includes(c.code))),
    )!;
    const all = (await records(reader, healthId, '?limit=1000')).body.records;
    for (const d of all.diagnoses) {
      const c = byId.get(d.id);
      expect(d.display_name).toBe(c.code.text);
      expect(d.code).toBe(c.code.coding[0].code);
      expect(d.status).toBe(c.verificationStatus?.coding?.[0]?.code === 'refuted' ? 'ruled_out' : c.clinicalStatus.coding[0].code === 'active' ? 'active' : 'resolved');
    }
    for (const m of all.prescriptions) {
      const mr = byId.get(m.id);
      expect(m.medication).toBe(mr.medicationCodeableConcept?.text ?? null);
      expect(m.status).toBe(mr.status.replace(/-/g, '_'));
    }
    for (const l of all.lab_results.filter((x: any) => x.source === 'observation')) {
      const o = byId.get(l.id);
      expect(l.test_name).toBe(o.code.text);
      expect(l.value_numeric).toBe(o.valueQuantity?.value ?? null);
      expect(l.unit).toBe(o.valueQuantity?.unit ?? null);
    }
    const bp = all.vitals.filter((v: any) => ['85354-9', '55284-4'].includes(v.type));
    expect(bp.length).toBeGreaterThan(0);
    for (const v of bp) {
      const o = byId.get(v.id);
      expect(v.systolic).toBe(o.component.find((c: any) => c.code.coding[0].code === '8480-6').valueQuantity.value);
      expect(v.diastolic).toBe(o.component.find((c: any) => c.code.coding[0].code === '8462-4').valueQuantity.value);
    }
    // Newest first.
    const times = all.vitals.map((v: any) => Date.parse(v.recorded_at));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(patientId).toBeTruthy();
  });

  it('pages a type with next_cursor: every record once, in order', async () => {
    const [, healthId] = [...healthIdOf].find(([id]) => expectedIds(id).vitals.length > 25)!;
    const whole = await allRecords(reader, healthId, 'vitals');
    const paged = await allRecords(reader, healthId, 'vitals', 7);
    expect(paged.map((r) => r.id)).toEqual(whole.map((r) => r.id));
    const first = await records(reader, healthId, '?type=all&limit=2');
    expect(first.body.truncated).toContain('vitals');
    expect(first.body.records.vitals).toHaveLength(2);
    expect(first.body).not.toHaveProperty('next_cursor');
  });

  it('with since, returns only what changed after it', async () => {
    const [patientId, healthId] = [...healthIdOf][1]!;
    const cond = (await call(operator, `/api/fhir/R4/Condition?patient=Patient/${patientId}&_count=1`)).body.entry[0].resource;
    // The instant of the patient's latest change: everything before it is old, the update below comes after it.
    const latest = (await call(operator, `/api/fhir/R4/Condition?patient=Patient/${patientId}&_sort=-_lastUpdated&_count=1`)).body.entry[0].resource;
    const since = latest.meta.lastUpdated;
    const updated = await call(operator, `/api/fhir/R4/Condition/${cond.id}`, { method: 'PUT', json: { ...cond, note: [{ text: 'reviewed' }] } });
    expect(updated.status).toBe(200);
    const changed = await records(reader, healthId, `?type=diagnoses&since=${encodeURIComponent(since)}`);
    expect(changed.body.records.diagnoses.map((d: any) => d.id)).toEqual([cond.id]);
  });

  it('refuses bad input with 422 naming the problem, and unknown patients with 404', async () => {
    const [, healthId] = [...healthIdOf][0]!;
    const unknown = await records(reader, healthId, '?type=medications');
    expect(unknown.status).toBe(422);
    expect(unknown.body.message).toMatch(/diagnoses/);
    expect((await records(reader, healthId, '?limit=0')).status).toBe(422);
    expect((await records(reader, healthId, '?type=vitals&cursor=bogus')).status).toBe(422);
    expect((await records(reader, healthId, '?since=yesterday')).status).toBe(422);
    expect((await records(reader, 'CM0000000000', '')).status).toBe(422);
    expect((await records(reader, 'CM4829301746XX', '')).status).toBe(422);
  });
});

describe('consent gates records by type', () => {
  let narrow: TestClient;
  let healthId: string;
  beforeAll(async () => {
    narrow = await createTestClient(pont, [...RECORD_SCOPES], { organizationId: 'org-narrow' });
    healthId = [...healthIdOf.values()][2]!;
    const granted = await call(narrow, `/api/v1/connect/patient/${healthId}/consent/grant`, {
      method: 'POST',
      json: { consent_type: 'full_record', scopes: ['patients:read'], expires_at: inAYear() },
    });
    expect(granted.status).toBe(201);
  });

  it('answers a covered type, refuses an uncovered one (403 CONSENT_REQUIRED), withholds it from type=all', async () => {
    expect((await records(narrow, healthId, '?type=diagnoses')).status).toBe(200);
    const refused = await records(narrow, healthId, '?type=lab_results');
    expect(refused.status).toBe(403);
    expect(refused.body.error_code).toBe('CONSENT_REQUIRED');
    const all = await records(narrow, healthId);
    expect(all.status).toBe(200);
    expect(Object.keys(all.body.records).sort()).toEqual(['adverse_events', 'allergies', 'body_structures', 'care_plans', 'care_teams', 'clinical_impressions', 'device_requests', 'devices', 'diagnoses', 'episodes_of_care', 'family_history', 'goals', 'immunization_evaluations', 'immunization_recommendations', 'immunizations', 'nutrition_orders', 'procedures', 'vision_prescriptions', 'visits']);
    expect(all.body.withheld.sort()).toEqual([
      'administrations', 'alerts', 'appointments', 'assessments', 'clinical_notes', 'communication_requests', 'communications', 'dispenses', 'documents', 'flags', 'imaging_studies', 'lab_results', 'media', 'medication_statements', 'observations', 'orders', 'prescriptions', 'reports', 'risk_assessments', 'specimens', 'tasks', 'vitals',
    ]);
  });

  it('refuses everything without consent, and reads nothing of another patient', async () => {
    const other = [...healthIdOf.values()][3]!;
    expect((await records(narrow, other)).status).toBe(403);
    const summary = await call(narrow, `/api/v1/sdk/patients/${other}/summary`);
    expect(summary.status).toBe(403);
    expect(summary.body.error_code).toBe('CONSENT_REQUIRED');
  });
});

describe('the SDK summary', () => {
  it("holds the patient, the blood group of their ABO/Rh Observation, active medications and allergies, recent labs and visits", async () => {
    const [patientId, healthId] = [...healthIdOf].find(([id]) => data.some((r: any) => r.resourceType === 'MedicationRequest' && r.status === 'active' && of(id)(r.subject)))!;
    const blood = await call(operator, '/api/fhir/R4/Observation', {
      method: 'POST',
      json: {
        resourceType: 'Observation',
        status: 'final',
        category: [{ coding: [{ system: LAB, code: 'laboratory' }] }],
        code: { coding: [{ system: 'http://loinc.org', code: '882-1' }], text: 'ABO and Rh group' },
        subject: { reference: `Patient/${patientId}` },
        effectiveDateTime: '2020-01-01T00:00:00Z',
        valueCodeableConcept: { coding: [{ system: 'http://snomed.info/sct', code: '278152006', display: 'Blood group AB Rh(D) negative' }] },
      },
    });
    expect(blood.status).toBe(201);
    const res = await call(reader, `/api/v1/sdk/patients/${healthId}/summary`);
    expect(res.status).toBe(200);
    const patient = data.find((r) => r.id === patientId) as any;
    const official = patient.name.find((n: any) => n.use === 'official');
    const whole = official.text ?? [...(official.prefix ?? []), ...(official.given ?? []), official.family, ...(official.suffix ?? [])].filter(Boolean).join(' ');
    expect(res.body.patient).toEqual({ first_name: official.given[0], last_name: official.family, full_name: whole, date_of_birth: patient.birthDate, sex: patient.gender, deceased: null, deceased_at: null, blood_group: 'AB-' });
    const active = data.filter((r: any) => r.resourceType === 'MedicationRequest' && r.status === 'active' && of(patientId)(r.subject)).map((r) => r.id).sort();
    expect(res.body.active_medications.map((m: any) => m.id).sort()).toEqual(active.slice(0, 50));
    expect(res.body.recent_labs.length).toBeLessThanOrEqual(10);
    expect(res.body.recent_visits).toHaveLength(5);
    const encounterDates = data.filter((r: any) => r.resourceType === 'Encounter' && of(patientId)(r.subject)).map((e: any) => e.period.start).sort().reverse();
    expect(res.body.recent_visits.map((v: any) => v.started_at)).toEqual(encounterDates.slice(0, 5));
    expect(res.body.withheld).toEqual([]);
  });
});

describe('pushes', () => {
  let sdk: TestClient;
  let granter: TestClient;
  let receiver: Receiver;
  let healthId: string;
  let patientId: string;

  beforeAll(async () => {
    sdk = await createTestClient(pont, ['encounters:write', 'labs:write', 'webhooks:manage', 'patient:diagnostics:read', 'labs:read', 'patients:read', 'fhir:read'], {
      organizationId: 'org-lab',
      facilityId: 'fac-lab',
    });
    receiver = await startReceiver();
    const sub = await call(sdk, '/api/v1/connect/webhooks/subscriptions', {
      method: 'POST',
      json: { callback_url: receiver.url, subscribed_events: ['lab_result.released', 'encounter.created'], description: 'lab results' },
    });
    expect(sub.status).toBe(201);
    receiver.secret = sub.body.webhook_secret;
    [patientId, healthId] = [...healthIdOf][4]!;
    granter = await consentFor('org-lab', healthId);
  });
  afterAll(async () => {
    await receiver?.close();
  });

  const push = (path: string, json: unknown, key?: string) =>
    call(sdk, `/api/v1/sdk/records/${path}`, { method: 'POST', json, headers: key ? { 'idempotency-key': key } : {} });

  it('a lab result becomes an Observation and its DiagnosticReport; lab_result.released carries exactly the §6.2 fields', async () => {
    const from = receiver.received.length;
    const res = await push('lab-results', { health_id: healthId, test_name: 'Hemoglobin', result_value: '6.1', unit: 'g/dL', flagged: true, flag_level: 'critical', interpretation: 'critically low' });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ health_id: healthId, flagged: true, flag: 'AA' });
    const obs = (await call(operator, `/api/fhir/R4/Observation/${res.body.lab_result_id}`)).body;
    expect(obs.valueQuantity).toEqual({ value: 6.1, unit: 'g/dL', system: 'http://unitsofmeasure.org', code: 'g/dL' });
    expect(obs.interpretation[0].coding[0].code).toBe('AA');
    expect(obs.subject.reference).toBe(`Patient/${patientId}`);
    const report = (await call(operator, `/api/fhir/R4/DiagnosticReport/${res.body.diagnostic_report_id}`)).body;
    expect(report.result).toEqual([{ reference: `Observation/${res.body.lab_result_id}` }]);
    expect(report.conclusion).toBe('critically low');

    await receiver.waitFor(from + 1);
    const event = receiver.received.slice(from).find((r) => r.body.type === 'lab_result.released')!.body;
    expect(event.id).toMatch(/^evt_/);
    expect(event.version).toBe('1.0');
    expect(new Date(event.created_at).toISOString()).toBe(event.created_at);
    expect(event.data).toEqual({ health_id: healthId, lab_result_id: res.body.lab_result_id, test_name: 'Hemoglobin', flagged: true, facility_id: 'fac-lab' });
    expect(event.meta).toMatchObject({ organization_id: 'org-lab', facility_id: 'fac-lab' });
  });

  it('the pusher reads back what it wrote once its consent has ended (it is the author)', async () => {
    const res = await push('lab-results', { health_id: healthId, test_name: 'Culture', result_value: 'no growth', flagged: false });
    expect(res.status).toBe(201);
    const revoked = await call(granter, `/api/v1/connect/patient/${healthId}/consent/revoke`, { method: 'POST', json: {} });
    expect(revoked.status).toBe(200);
    const mine = await records(sdk, healthId, '?type=lab_results');
    expect(mine.status).toBe(200);
    const pushed = mine.body.records.lab_results.find((r: any) => r.id === res.body.lab_result_id);
    expect(pushed).toMatchObject({ value: 'no growth', value_numeric: null, flag: 'N', source: 'observation' });
    // ...and nothing else of the patient's record.
    expect(mine.body.records.lab_results.every((r: any) => ['Hemoglobin', 'Culture'].includes(r.test_name))).toBe(true);
    // Without consent it writes nothing more about the patient.
    expect((await push('lab-results', { health_id: healthId, test_name: 'Culture', result_value: 'again', flagged: false })).status).toBe(403);
    granter = await consentFor('org-lab', healthId);
  });

  it('a decision-support alert becomes an Encounter and the DetectedIssue it raised', async () => {
    const from = receiver.received.length;
    const res = await push('encounters', {
      health_id: healthId,
      encounter_type: 'cdss_alert',
      clinical_note: 'Warfarin with fluconazole increases bleeding risk',
      severity: 'high',
      alert_type: 'drug_interaction',
      cdss_rule_id: 'DDI-0042',
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const issue = (await call(operator, `/api/fhir/R4/DetectedIssue/${res.body.detected_issue_id}`)).body;
    expect(issue).toMatchObject({ severity: 'high', detail: 'Warfarin with fluconazole increases bleeding risk', implicated: [{ reference: `Encounter/${res.body.encounter_id}` }] });
    const encounter = (await call(operator, `/api/fhir/R4/Encounter/${res.body.encounter_id}`)).body;
    expect(encounter.type[0].text).toBe('cdss_alert');
    await receiver.waitFor(from + 1);
    expect(receiver.received.slice(from).map((r) => r.body.type)).toContain('encounter.created');
  });

  it('refuses a bad push with every problem listed, writing nothing and keeping no key', async () => {
    const before = (await call(operator, `/api/fhir/R4/Observation?patient=Patient/${patientId}&_summary=count`)).body.total;
    const bad = await push('lab-results', { health_id: healthId, test_name: '', result_value: 5, flagged: 'yes', flag_level: 'severe' }, 'key-bad-then-good');
    expect(bad.status).toBe(422);
    expect(bad.body.details.map((d: any) => d.field).sort()).toEqual(['body.flag_level', 'body.flagged', 'body.result_value', 'body.test_name']);
    const contradiction = await push('lab-results', { health_id: healthId, test_name: 'K', result_value: '4', flagged: true, flag_level: 'normal' }, 'key-bad-then-good');
    expect(contradiction.status).toBe(422);
    expect((await call(operator, `/api/fhir/R4/Observation?patient=Patient/${patientId}&_summary=count`)).body.total).toBe(before);
    const good = await push('lab-results', { health_id: healthId, test_name: 'K', result_value: '4', flagged: false }, 'key-bad-then-good');
    expect(good.status).toBe(201);
    expect(good.headers.get('idempotent-replayed')).toBeNull();
    const alert = await push('encounters', { health_id: healthId, encounter_type: 'cdss_alert' });
    expect(alert.status).toBe(422);
    expect(alert.body.details.map((d: any) => d.field).sort()).toEqual(['body.alert_type', 'body.severity']);
  });

  it('a date that is no day of the calendar is a 422 naming the field, on the push\'s fields and in a pushed record; 29 February 2024 is written', async () => {
    const count = async () => (await call(operator, `/api/fhir/R4/Observation?patient=Patient/${patientId}&_summary=count`)).body.total;
    const before = await count();
    const own = await push('lab-results', { health_id: healthId, test_name: 'K', result_value: '4', flagged: false, effective_at: '2023-02-29T10:00:00Z' });
    expect(own.status, JSON.stringify(own.body)).toBe(422);
    expect(own.body.details).toEqual([expect.objectContaining({ field: 'body.effective_at', message: expect.stringMatching(/calendar/) })]);
    const day = await push('lab-results', { health_id: healthId, test_name: 'K', result_value: '4', flagged: false, effective_at: '2023-02-30' });
    expect(day.status).toBe(422);
    expect(day.body.details.map((d: any) => d.field)).toEqual(['body.effective_at']);
    const record = await push('lab-results', { health_id: healthId, record: { test_name: 'K', status: 'final', effective_at: '2023-02-29T10:00:00Z' } });
    expect(record.status, JSON.stringify(record.body)).toBe(422);
    expect(record.body.details).toEqual([expect.objectContaining({ field: 'body.record.effective_at', message: expect.stringMatching(/calendar/) })]);
    expect(await count()).toBe(before);
    const leap = await push('lab-results', { health_id: healthId, test_name: 'K', result_value: '4', flagged: false, effective_at: '2024-02-29T10:00:00Z' });
    expect(leap.status, JSON.stringify(leap.body)).toBe(201);
    expect((await call(operator, `/api/fhir/R4/Observation/${leap.body.lab_result_id}`)).body.effectiveDateTime).toBe('2024-02-29T10:00:00Z');
    const leapRecord = await push('lab-results', { health_id: healthId, record: { test_name: 'K', status: 'final', effective_at: '2024-02-29T10:00:00Z' } });
    expect(leapRecord.status, JSON.stringify(leapRecord.body)).toBe(201);
  });

  it('needs a registered patient: 404 for an unknown Health ID, 422 for a malformed one', async () => {
    const valid = [...healthIdOf.values()][0]!;
    // Same country and a valid checksum but not registered: recompute the check digits of another body.
    const { checkDigits } = await import('../src/healthid/healthid');
    const body = `CM${'1'.repeat(10)}`;
    const unregistered = `${body}${checkDigits(body)}`;
    expect((await push('encounters', { health_id: unregistered, encounter_type: 'consultation' })).status).toBe(404);
    expect((await push('encounters', { health_id: valid.slice(0, -1) + 'X', encounter_type: 'consultation' })).status).toBe(422);
  });
});

describe('idempotency', () => {
  let sdk: TestClient;
  let healthId: string;
  let patientId: string;
  beforeAll(async () => {
    sdk = await createTestClient(pont, ['encounters:write', 'labs:write'], { organizationId: 'org-idem' });
    [patientId, healthId] = [...healthIdOf][5]!;
    await consentFor('org-idem', healthId);
  });
  const count = async () => (await call(operator, `/api/fhir/R4/Encounter?patient=Patient/${patientId}&_summary=count`)).body.total;
  const push = (json: unknown, key: string) => call(sdk, '/api/v1/sdk/records/encounters', { method: 'POST', json, headers: { 'idempotency-key': key } });

  it('replays the first answer for the same key and payload, and refuses another payload with 409', async () => {
    const before = await count();
    const payload = { health_id: healthId, encounter_type: 'consultation', reason: 'cough' };
    const first = await push(payload, 'retry-1');
    const again = await push({ reason: 'cough', encounter_type: 'consultation', health_id: healthId }, 'retry-1');
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await count()).toBe(before + 1);
    const other = await push({ ...payload, reason: 'fever' }, 'retry-1');
    expect(other.status).toBe(409);
    expect(other.body.error_code).toBe('IDEMPOTENCY_CONFLICT');
    expect(await count()).toBe(before + 1);
  });

  it('the same key sent many times at once writes once', async () => {
    const before = await count();
    const payload = { health_id: healthId, encounter_type: 'consultation', reason: 'race' };
    const answers = await Promise.all(Array.from({ length: 8 }, () => push(payload, 'race-1')));
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(201));
    expect(new Set(answers.map((a) => a.body.encounter_id)).size).toBe(1);
    expect(await count()).toBe(before + 1);
  });

  it('keys are per client, and must be 1-255 printable characters', async () => {
    const other = await createTestClient(pont, ['encounters:write'], { organizationId: 'org-idem' });
    const payload = { health_id: healthId, encounter_type: 'consultation', reason: 'shared key' };
    const a = await push(payload, 'shared-key');
    const b = await call(other, '/api/v1/sdk/records/encounters', { method: 'POST', json: payload, headers: { 'idempotency-key': 'shared-key' } });
    expect(b.status).toBe(201);
    expect(b.body.encounter_id).not.toBe(a.body.encounter_id);
    expect((await push(payload, 'x'.repeat(256))).status).toBe(400);
  });
});

describe('per-patient FHIR helpers', () => {
  it('search one type of the patient of a Health ID with FHIR parameters, and $everything, consent-gated', async () => {
    const [patientId, healthId] = [...healthIdOf][0]!;
    const active = await call(reader, `/api/v1/sdk/patients/${healthId}/fhir/MedicationRequest?status=active`);
    expect(active.status).toBe(200);
    expect(active.body.resourceType).toBe('Bundle');
    const expected = data.filter((r: any) => r.resourceType === 'MedicationRequest' && r.status === 'active' && of(patientId)(r.subject)).map((r) => r.id).sort();
    // Matches only: an empty answer also carries the informational note of a consent-bound caller.
    expect(active.body.entry?.filter((e: any) => e.search.mode === 'match').map((e: any) => e.resource.id).sort() ?? []).toEqual(expected);
    const conditions = await call(reader, `/api/v1/sdk/patients/${healthId}/fhir/Condition?clinical-status=active&_count=2`);
    expect(conditions.status).toBe(200);
    for (const e of conditions.body.entry ?? []) expect(e.resource.subject.reference).toBe(`Patient/${patientId}`);
    const next = conditions.body.link.find((l: any) => l.relation === 'next');
    if (next) expect(next.url).toContain(`/api/v1/sdk/patients/${healthId}/fhir/Condition?`);
    expect((await call(reader, `/api/v1/sdk/patients/${healthId}/fhir/Condition?patient=Patient/x`)).status).toBe(400);
    expect((await call(reader, `/api/v1/sdk/patients/${healthId}/fhir/Condition?bogus=1`)).status).toBe(400);
    const everything = await call(reader, `/api/v1/sdk/patients/${healthId}/fhir/$everything?_count=50`);
    expect(everything.status).toBe(200);
    expect(everything.body.entry[0].resource).toMatchObject({ resourceType: 'Patient', id: patientId });
    const stranger = await createTestClient(pont, ['patients:read', 'prescriptions:read'], { organizationId: 'org-stranger' });
    expect((await call(stranger, `/api/v1/sdk/patients/${healthId}/fhir/MedicationRequest`)).status).toBe(403);
    expect((await call(stranger, `/api/v1/sdk/patients/${healthId}/fhir/$everything`)).status).toBe(403);
  });
});
