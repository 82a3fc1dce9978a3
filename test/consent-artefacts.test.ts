import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { backend, createScratchDatabase, createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { createClient } from '../src/auth/clients';
import { openDatabase } from '../src/db/open';
import { loadConfig } from '../src/config';
import { startPont } from '../src/server';
import { bearerFrom, startPontProcess, stopPontProcess, type PontProcess } from './webhooks-support';
import { eventually } from './eventually';

/**
 * Consent artefacts (issue 43): a consent states a purpose, kinds of record (hi_types), a period of care
 * (date_range), an erasure date and a fetch frequency; the patient may narrow a request when approving; the one
 * policy shows exactly what the artefact covers on every door.
 */
let pont: TestServer;
let hospital: TestClient;
let clinic: TestClient;
let healthId: string;
let patientId: string;
let patientToken: string;
const ids: Record<string, string> = {};

const fhir = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(`/api/fhir/R4${path}`, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
const connect = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(`/api/v1/connect${path}`, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
const mobile = (path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(`/api/v1/mobile${path}`, { ...init, headers: { authorization: `Bearer ${patientToken}`, ...(init.headers as Record<string, string>) } });
const inDays = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString();
const ref = (r: { resourceType: string; id: string }) => `${r.resourceType}/${r.id}`;

async function write(name: string, resource: Record<string, unknown>) {
  const res = await fhir(hospital, `/${resource.resourceType}`, { method: 'POST', json: { ...(resource.resourceType === 'Immunization' ? {} : { subject: { reference: `Patient/${patientId}` } }), ...resource } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  ids[name] = `${resource.resourceType}/${res.body.id}`;
}

beforeAll(async () => {
  pont = await startTestServer();
  hospital = await createTestClient(pont, ['health_id:verify', 'fhir:read', 'fhir:write', 'consents:write', 'consents:read'], { organizationId: 'org-hospital' });
  clinic = await createTestClient(pont, ['health_id:verify', 'consents:read', 'consents:write', 'patients:read', 'labs:read', 'prescriptions:read', 'fhir:read', 'patient:profile:read', 'patient:diagnostics:read'], {
    organizationId: 'org-clinic',
  });
  const resolved = await connect(hospital, '/patients/resolve', { method: 'POST', json: { first_name: 'Asha', last_name: 'Artefact', date_of_birth: '1980-02-02', sex: 'female' } });
  healthId = resolved.body.health_id;
  patientId = (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${healthId}`)).body.entry[0].resource.id;
  const medication = { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Metformin 500 mg' } };
  await write('rx2024', { ...medication, authoredOn: '2024-05-01' });
  await write('rx2023', { ...medication, authoredOn: '2023-05-01' });
  await write('rxUndated', { ...medication });
  // A date of 2024 with no day: no date of care (a part of a date is not inside a period, whatever it reads as text).
  await write('rxPartial', { ...medication, authoredOn: '2024-06' });
  await write('report2024', { resourceType: 'DiagnosticReport', status: 'final', code: { text: 'CBC' }, effectiveDateTime: '2024-06-01T10:00:00Z' });
  await write('lab2024', { resourceType: 'Observation', status: 'final', code: { text: 'Hemoglobin' }, effectiveDateTime: '2024-06-01T10:00:00Z', valueQuantity: { value: 12, unit: 'g/dL' } });
  await write('vaccine2024', { resourceType: 'Immunization', status: 'completed', vaccineCode: { text: 'BCG' }, occurrenceDateTime: '2024-02-01', patient: { reference: `Patient/${patientId}` } });
  const code = await connect(hospital, `/patient/${healthId}/mobile/pairing-code`, { method: 'POST' });
  patientToken = (await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: healthId, code: code.body.code } })).body.access_token;
});
afterAll(async () => {
  await pont?.close();
});

describe('hostile input on the artefact fields is a 4xx in the documented shape, never a 500', () => {
  const base = () => ({ health_id: healthId, purpose: 'follow-up', requested_scopes: ['prescriptions:read'] });
  const cases: Array<[string, Record<string, unknown>]> = [
    ['dates reversed', { date_range: { from: '2024-12-31', to: '2024-01-01' } }],
    ['a date that is no date', { date_range: { from: '2024-13-40', to: '2024-12-31' } }],
    ['half a range', { date_range: { from: '2024-01-01' } }],
    ['an unknown purpose', { purpose_of_use: 'MARKETING' }],
    ['a purpose of the wrong type', { purpose_of_use: 7 }],
    ['an unknown kind of record', { hi_types: ['Prescription', 'Genome'] }],
    ['10,000 kinds of record', { hi_types: Array.from({ length: 10_000 }, () => 'Prescription') }],
    ['a kind twice', { hi_types: ['Prescription', 'Prescription'] }],
    ['no kinds at all', { hi_types: [] }],
    ['hi_types not a list', { hi_types: 'Prescription' }],
    ['a frequency of zero', { frequency: { count: 0, unit: 'day' } }],
    ['a fractional frequency', { frequency: { count: 1.5, unit: 'day' } }],
    ['a frequency per fortnight', { frequency: { count: 1, unit: 'fortnight' } }],
    ['erasure in the past', { erase_at: '2001-01-01T00:00:00Z' }],
    ['erasure that is no date', { erase_at: 'tomorrow' }],
    ['an unknown field of the range', { date_range: { from: '2024-01-01', to: '2024-12-31', tz: 'x' } }],
  ];
  for (const [name, fields] of cases)
    it(`request: ${name}`, async () => {
      const res = await pont.json('/api/v1/sdk/consents/request', { method: 'POST', headers: clinic.headers, json: { ...base(), ...fields } });
      expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expect(res.body).toMatchObject({ status: 'error', error_code: expect.any(String), message: expect.any(String) });
    });
  it('grant: dates reversed and an unknown purpose are refused the same way', async () => {
    for (const fields of [{ date_range: { from: '2025-01-01', to: '2024-01-01' } }, { purpose_of_use: 'caremgt' }]) {
      const res = await connect(clinic, `/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(30), ...fields } });
      expect(res.status).toBe(422);
      expect(res.body.error_code).toBe('VALIDATION_FAILED');
    }
  });
});

describe('request → approve narrower → read: exactly 2024 prescriptions, on every door', () => {
  let requestId: string;
  it('the request states purpose, kinds, period and erasure; the answer shows them', async () => {
    const res = await pont.json('/api/v1/sdk/consents/request', {
      method: 'POST',
      headers: clinic.headers,
      json: {
        health_id: healthId,
        purpose: 'diabetes follow-up',
        requested_scopes: ['patients:read', 'prescriptions:read', 'labs:read'],
        purpose_of_use: 'CAREMGT',
        hi_types: ['Prescription', 'DiagnosticReport'],
        date_range: { from: '2024-01-01', to: '2024-12-31' },
        expires_at: inDays(60),
        erase_at: inDays(90),
      },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ purpose_of_use: 'CAREMGT', hi_types: ['Prescription', 'DiagnosticReport'], date_range: { from: '2024-01-01', to: '2024-12-31' }, frequency: null });
    requestId = res.body.consent_request_id;
    const mine = await mobile('/consents');
    expect(mine.body.items.find((c: any) => c.consent_id === requestId)).toMatchObject({ status: 'pending', hi_types: ['Prescription', 'DiagnosticReport'], date_range: { from: '2024-01-01', to: '2024-12-31' } });
  });

  it('approving wider than asked is a 422 and the request stays pending', async () => {
    for (const json of [{ hi_types: ['Prescription', 'ImmunizationRecord'] }, { date_range: { from: '2023-01-01', to: '2024-12-31' } }, { expires_at: inDays(120) }]) {
      const res = await mobile(`/consent-requests/${requestId}/approve`, { method: 'POST', json });
      expect(res.status, JSON.stringify(json)).toBe(422);
      expect(res.body.error_code).toBe('VALIDATION_FAILED');
    }
    expect((await connect(clinic, `/patient/${healthId}/consent`)).body.status).toBe('pending');
  });

  it('the patient approves prescriptions only; the grant records what was approved', async () => {
    const res = await mobile(`/consent-requests/${requestId}/approve`, { method: 'POST', json: { hi_types: ['Prescription'] } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ status: 'active', hi_types: ['Prescription'], purpose_of_use: 'CAREMGT', date_range: { from: '2024-01-01', to: '2024-12-31' } });
    const status = await connect(clinic, `/patient/${healthId}/consent`);
    expect(status.body).toMatchObject({ status: 'active', hi_types: ['Prescription'], scopes: ['patients:read', 'prescriptions:read'] });
    // The FHIR Consent carries it in R4's own elements.
    const consent = (await fhir(hospital, `/Consent?patient=${patientId}`)).body.entry?.map((e: any) => e.resource) ?? [];
    const stored = (await fhir(clinic, `/Consent/${requestId}`)).body;
    expect(consent.length + 1).toBeGreaterThan(0);
    expect(stored.provision.purpose).toEqual([{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActReason', code: 'CAREMGT' }]);
    expect(stored.provision.dataPeriod).toEqual({ start: '2024-01-01', end: '2024-12-31' });
    expect(stored.provision.code[0].coding).toEqual([{ system: 'https://pont.health/fhir/CodeSystem/hi-type', code: 'Prescription' }]);
  });

  it('FHIR search, includes and $everything show the 2024 prescription and nothing else', async () => {
    const search = async (q: string) => ((await fhir(clinic, q)).body.entry ?? []).filter((e: any) => e.search?.mode !== 'outcome' && e.resource.resourceType !== 'OperationOutcome').map((e: any) => ref(e.resource)).sort();
    expect(await search(`/MedicationRequest?patient=${patientId}`)).toEqual([ids.rx2024]);
    expect(await search(`/MedicationRequest`)).toEqual([ids.rx2024]);
    expect(await search(`/DiagnosticReport?patient=${patientId}`)).toEqual([]);
    expect(await search(`/Observation?patient=${patientId}`)).toEqual([]);
    expect(await search(`/Immunization?patient=${patientId}`)).toEqual([]);
    // The patient the records are about comes with every kind (an exchange's bundles carry it), whatever the period.
    expect(await search(`/MedicationRequest?patient=${patientId}&_include=MedicationRequest:subject`)).toEqual([ids.rx2024, `Patient/${patientId}`].sort());
    expect(await search(`/DiagnosticReport?patient=${patientId}&_revinclude=Observation:subject`)).toEqual([]);
    // Counts count what is shown.
    for (const [q, n] of [[`/MedicationRequest?patient=${patientId}&_summary=count`, 1], [`/MedicationRequest?_total=accurate`, 1], [`/Observation?patient=${patientId}&_summary=count`, 0], [`/DiagnosticReport?_summary=count`, 0]] as const)
      expect((await fhir(clinic, q)).body.total, q).toBe(n);
    // History: of the type, of the prescription, of one outside (as absent as a read of it).
    expect(await search(`/MedicationRequest/_history`)).toEqual([ids.rx2024]);
    expect(await search(`/${ids.rx2024}/_history`)).toEqual([ids.rx2024]);
    for (const outside of [ids.rx2023, ids.report2024]) {
      const history = await fhir(clinic, `/${outside}/_history`);
      expect(history.status === 404 || (await search(`/${outside}/_history`)).length === 0, `${outside}: ${history.status}`).toBe(true);
    }
    const everyKind = ['MedicationRequest:subject', 'DiagnosticReport:subject', 'Observation:subject', 'Immunization:patient'].map((r) => `&_revinclude=${r}`).join('');
    expect(await search(`/Patient?_id=${patientId}${everyKind}`)).toEqual([ids.rx2024, `Patient/${patientId}`].sort());
    expect((await fhir(clinic, `/${ids.rx2024}`)).status).toBe(200);
    for (const other of [ids.rx2023, ids.rxUndated, ids.rxPartial, ids.report2024, ids.lab2024, ids.vaccine2024]) expect((await fhir(clinic, `/${other}`)).status, other).toBe(404);
    const everything = await fhir(clinic, `/Patient/${patientId}/$everything`);
    const got = (everything.body.entry ?? []).map((e: any) => ref(e.resource)).filter((r: string) => !r.startsWith('Patient/') && !r.startsWith('Consent/'));
    expect(got).toEqual([ids.rx2024]);
  });

  it('the Connect records route and the SDK FHIR helpers by Health ID show the same', async () => {
    const res = await connect(clinic, `/patient/${healthId}/records?type=all&limit=100`);
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(200);
    const records = res.body.records as Record<string, Array<{ id: string }>>;
    expect(Object.fromEntries(Object.entries(records).filter(([, list]) => list.length).map(([type, list]) => [type, list.map((r) => r.id)]))).toEqual({ prescriptions: [ids.rx2024!.split('/')[1]] });
    // The SDK's FHIR helpers by Health ID: the same searches, the same $everything.
    const sdk = async (path: string) => {
      const res = await pont.json(`/api/v1/sdk/patients/${healthId}/fhir/${path}`, { headers: clinic.headers });
      expect(res.status, `${path}: ${JSON.stringify(res.body).slice(0, 200)}`).toBeLessThan(500);
      return ((res.body.entry ?? []) as any[]).filter((e) => e.search?.mode !== 'outcome' && e.resource.resourceType !== 'OperationOutcome').map((e) => ref(e.resource));
    };
    expect(await sdk('MedicationRequest')).toEqual([ids.rx2024]);
    expect(await sdk('DiagnosticReport')).toEqual([]);
    expect((await sdk('$everything')).filter((r) => !r.startsWith('Patient/') && !r.startsWith('Consent/'))).toEqual([ids.rx2024]);
  });

  it('the SDK summary shows the same: one medication (2024), no labs, reports or immunizations', async () => {
    const res = await pont.json(`/api/v1/sdk/patients/${healthId}/summary`, { headers: clinic.headers });
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(200);
    const text = JSON.stringify(res.body);
    expect(text.match(/Metformin/g) ?? []).toHaveLength(1);
    for (const absent of ['Hemoglobin', 'CBC', 'BCG']) expect(text).not.toContain(absent);
  });

  it('Bulk export exports the same: the 2024 prescription and the patient', async () => {
    const kick = await pont.fetch(`/api/fhir/R4/Patient/$export?_type=Patient,MedicationRequest,DiagnosticReport,Observation,Immunization`, { headers: { ...clinic.headers, prefer: 'respond-async' } });
    expect(kick.status, await kick.clone().text()).toBe(202);
    const status = kick.headers.get('content-location')!;
    await (pont.services.workers.find((w) => w.name === 'bulk-export') as unknown as { drain(): Promise<void> }).drain();
    const manifest = (await (await pont.fetch(status.slice(status.indexOf('/api/fhir')), { headers: clinic.headers })).json()) as { output: Array<{ url: string }> };
    const got: string[] = [];
    for (const file of manifest.output) {
      const text = await (await pont.fetch(file.url.slice(file.url.indexOf('/api/fhir')), { headers: clinic.headers })).text();
      for (const line of text.split('\n').filter(Boolean)) got.push(ref(JSON.parse(line)));
    }
    expect(got.sort()).toEqual([ids.rx2024, `Patient/${patientId}`].sort());
  });

  it('FHIR Subscriptions notify only what the artefact covers: a 2024 prescription, not one of 2023, not a diagnostic report', async () => {
    // A rest-hook endpoint as the Subscriptions Backport IG describes it (test/fhir-subscriptions.test.ts tests the channel itself).
    const { createServer } = await import('node:http');
    const received: any[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    onTestFinished(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))));
    const endpoint = `http://127.0.0.1:${(server.address() as { port: number }).port}/notify`;
    const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
    const topics = (await fhir(clinic, '/SubscriptionTopic')).body.entry.map((e: any) => e.fullUrl as string);
    const subscribe = async (topic: string) => {
      const res = await fhir(clinic, '/Subscription', {
        method: 'POST',
        headers: { 'content-type': 'application/fhir+json' },
        json: {
          resourceType: 'Subscription',
          meta: { profile: [`${BACKPORT}/backport-subscription`] },
          status: 'requested',
          reason: 'what the artefact covers',
          criteria: topics.find((u: string) => u.endsWith(`/${topic}`)),
          channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BACKPORT}/backport-payload-content`, valueCode: 'full-resource' }] } },
        },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      await eventually(async () => expect((await fhir(clinic, `/Subscription/${res.body.id}`)).body.status).toBe('active'));
      return res.body.id as string;
    };
    const prescriptions = await subscribe('prescription-issued');
    const reports = await subscribe('diagnosticreport-final');
    const medication = { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Insulin glargine' } };
    // Outside the artefact first (another year, another kind), then inside it: the fan-out numbers changes in order.
    await write('subRx2023', { ...medication, authoredOn: '2023-07-07' });
    await write('subReport2024', { resourceType: 'DiagnosticReport', status: 'final', code: { text: 'Lipids' }, effectiveDateTime: '2024-07-07T10:00:00Z' });
    await write('subRx2024', { ...medication, authoredOn: '2024-07-07' });
    const notices = () => received.filter((b) => b.entry?.[0]?.resource?.parameter?.some((p: any) => p.name === 'type' && p.valueCode === 'event-notification'));
    await eventually(() => expect(notices().length).toBeGreaterThanOrEqual(1));
    const all = JSON.stringify(notices());
    expect(notices()).toHaveLength(1);
    expect(notices()[0].entry.slice(1).map((e: any) => ref(e.resource))).toEqual([ids.subRx2024]);
    for (const outside of [ids.subRx2023!, ids.subReport2024!]) expect(all).not.toContain(outside.split('/')[1]);
    // What each subscription numbered: one event for the prescriptions, none for the reports.
    const since = async (id: string) =>
      Number((await fhir(clinic, `/Subscription/${id}/$status`)).body.entry[0].resource.parameter.find((p: any) => p.name === 'events-since-subscription-start').valueString);
    expect(await since(prescriptions)).toBe(1);
    expect(await since(reports)).toBe(0);
  });

  it('webhooks tell of the 2024 prescription only: not one of 2023, not a lab result', async () => {
    const { startReceiver, pendingDeliveries } = await import('./webhooks-support');
    const { createSubscription } = await import('../src/webhooks/subscriptions');
    const receiver = await startReceiver();
    onTestFinished(() => receiver.close());
    const sub = await createSubscription(pont.services.db, pont.config.webhooks.secretKey, { organizationId: 'org-clinic' }, {
      callback_url: receiver.url,
      subscribed_events: ['prescription.issued', 'lab_result.released'],
    });
    receiver.secret = sub.webhook_secret;
    const medication = { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Sitagliptin' } };
    await write('hookRx2023', { ...medication, authoredOn: '2023-08-08' });
    await write('hookLab2024', {
      resourceType: 'Observation', status: 'final', code: { text: 'HbA1c' }, effectiveDateTime: '2024-08-08T09:00:00Z', valueQuantity: { value: 7, unit: '%' },
      category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] }],
    });
    await write('hookRx2024', { ...medication, authoredOn: '2024-08-08' });
    // Deliveries are queued with the events, in the writes' transactions: once none is pending, nothing more comes.
    await eventually(async () => expect(await pendingDeliveries(pont.services.db, sub.id)).toBe(0));
    expect(receiver.received.map((r) => [r.body.type, r.body.data.prescription_id ?? r.body.data.lab_result_id])).toEqual([['prescription.issued', ids.hookRx2024!.split('/')[1]]]);
    expect(receiver.received.every((r) => r.signatureValid)).toBe(true);
    // The hospital, which wrote them all, hears all three (its own events).
    const { rows } = await pont.services.db.query<{ type: string }>(`SELECT e.type FROM events e WHERE e.data->>'prescription_id' = ANY($1::text[]) OR e.data->>'lab_result_id' = $2`, [
      [ids.hookRx2023!.split('/')[1], ids.hookRx2024!.split('/')[1]],
      ids.hookLab2024!.split('/')[1],
    ]);
    expect(rows.map((r) => r.type).sort()).toEqual(['lab_result.released', 'prescription.issued', 'prescription.issued']);
  });
});

describe('approving narrower: a shorter period and an earlier end are recorded as approved', () => {
  it('records the approved date_range and expires_at, not the asked ones', async () => {
    const other = await createTestClient(pont, ['health_id:verify', 'consents:read', 'consents:write'], { organizationId: 'org-narrow' });
    const asked = await pont.json('/api/v1/sdk/consents/request', {
      method: 'POST',
      headers: other.headers,
      json: { health_id: healthId, purpose: 'audit', requested_scopes: ['prescriptions:read'], purpose_of_use: 'HPAYMT', date_range: { from: '2020-01-01', to: '2024-12-31' }, expires_at: inDays(90), frequency: { count: 2, unit: 'week' } },
    });
    expect(asked.status).toBe(201);
    const end = new Date(Date.now() + 10 * 86_400_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const res = await mobile(`/consent-requests/${asked.body.consent_request_id}/approve`, { method: 'POST', json: { date_range: { from: '2023-01-01', to: '2023-12-31' }, expires_at: end } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ status: 'active', purpose_of_use: 'HPAYMT', date_range: { from: '2023-01-01', to: '2023-12-31' }, expires_at: end, frequency: { count: 2, unit: 'week' }, hi_types: [] });
    const stored = (await connect(other, `/patient/${healthId}/consent`)).body;
    expect(stored).toMatchObject({ date_range: { from: '2023-01-01', to: '2023-12-31' }, expires_at: end });
    // Hostile approvals are 4xx too.
    for (const json of [{ date_range: { from: '2024-12-31', to: '2024-01-01' } }, { hi_types: ['Nope'] }, { expires_at: 'soon' }, { extra: 1 }]) {
      const bad = await mobile(`/consent-requests/${asked.body.consent_request_id}/approve`, { method: 'POST', json });
      expect(bad.status, JSON.stringify(json)).toBeGreaterThanOrEqual(400);
      expect(bad.status).toBeLessThan(500);
    }
  });
});

describe('consents made before artefacts keep working', () => {
  it('a grant without the new fields reads as care management, every kind, no period, and covers every type of its classes', async () => {
    const other = await connect(hospital, '/patients/resolve', { method: 'POST', json: { first_name: 'Old', last_name: 'Grant', date_of_birth: '1970-01-01', sex: 'male' } });
    const grant = await connect(clinic, `/patient/${other.body.health_id}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at: inDays(30) } });
    expect(grant.status).toBe(201);
    expect(grant.body).toMatchObject({ purpose_of_use: 'CAREMGT', hi_types: [], date_range: null, erase_at: null, frequency: null });
    // And it reads as before: every type of its classes, of any date or none.
    const pid = (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${other.body.health_id}`)).body.entry[0].resource.id;
    const rx = await fhir(hospital, '/MedicationRequest', { method: 'POST', json: { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Old' }, subject: { reference: `Patient/${pid}` }, authoredOn: '2019-01-01' } });
    const lab = await fhir(hospital, '/Observation', { method: 'POST', json: { resourceType: 'Observation', status: 'final', code: { text: 'Undated' }, subject: { reference: `Patient/${pid}` } } });
    for (const made of [rx, lab]) expect((await fhir(clinic, `/${made.body.resourceType}/${made.body.id}`)).status).toBe(200);
    expect((await fhir(clinic, `/Patient/${pid}`)).status).toBe(200);
  });

  it('a FHIR Consent in the shape written before artefacts (no purpose, kinds, period or extensions of theirs) reads as care management, every kind, and is signed and announced', async () => {
    const other = await connect(hospital, '/patients/resolve', { method: 'POST', json: { first_name: 'Older', last_name: 'Shape', date_of_birth: '1960-06-06', sex: 'female' } });
    const hid = other.body.health_id as string;
    const pid = (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${hid}`)).body.entry[0].resource.id as string;
    const rx = await fhir(hospital, '/MedicationRequest', { method: 'POST', json: { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Older' }, subject: { reference: `Patient/${pid}` }, authoredOn: '2018-01-01' } });
    const expiresAt = new Date(Date.now() + 30 * 86_400_000).toISOString().replace(/\.\d+Z$/, 'Z');
    // As mappings/consent.map.yaml wrote a grant before 86fc4a6 (its examples file then), e.g. a store restored from then.
    const old = await pont.services.fhir.system('import').create({
      resourceType: 'Consent',
      extension: [{ url: 'https://pont.health/fhir/StructureDefinition/consent-purpose', valueString: 'continuity of care' }],
      status: 'active',
      scope: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/consentscope', code: 'patient-privacy' }] },
      category: [{ coding: [{ system: 'https://pont.health/fhir/CodeSystem/consent-type', code: 'full_record' }, { system: 'http://loinc.org', code: '59284-0' }] }],
      patient: { reference: `Patient/${pid}` },
      dateTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      policyRule: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'OPTIN' }] },
      provision: {
        type: 'permit',
        period: { end: expiresAt },
        actor: [{ role: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ParticipationType', code: 'IRCP' }] }, reference: { identifier: { system: 'https://pont.health/fhir/sid/organization-id', value: 'org-clinic' } } }],
        class: ['patients:read', 'prescriptions:read'].map((code) => ({ system: 'https://pont.health/fhir/CodeSystem/data-class', code })),
      },
    } as any, { audit: false });
    const consentId = old.id!;
    expect((await fhir(clinic, `/MedicationRequest/${rx.body.id}`)).status).toBe(200);
    expect((await fhir(clinic, `/Patient/${pid}`)).status).toBe(200);
    expect((await connect(clinic, `/patient/${hid}/consent`)).body).toMatchObject({
      consent_id: consentId, status: 'active', purpose: 'continuity of care', purpose_of_use: 'CAREMGT', hi_types: [], date_range: null, erase_at: null, frequency: null, expires_at: expiresAt,
    });
    const artefact = await connect(clinic, `/consents/${consentId}/artefact`);
    expect(artefact.status, JSON.stringify(artefact.body)).toBe(200);
    const { createLocalJWKSet, jwtVerify } = await import('jose');
    const { payload } = await jwtVerify(artefact.body.artefact, createLocalJWKSet((await pont.json('/.well-known/jwks.json')).body));
    expect(payload.consent).toMatchObject({ consent_id: consentId, purpose_of_use: 'CAREMGT', hi_types: [], date_range: null });
    const { rows } = await pont.services.db.query<{ due_at: Date }>(`SELECT due_at FROM consent_notices WHERE consent_id = $1 AND kind = 'expired' AND fired_at IS NULL`, [consentId]);
    expect(rows.map((r) => new Date(r.due_at).toISOString().replace(/\.\d+Z$/, 'Z'))).toEqual([expiresAt]);
  });
});

describe.runIf(backend === 'postgres')('migration 033 gives the consents made before it the defaults', () => {
  it('care management, every kind, no range, no erasure or frequency, their expiry; consent.expired due for those still to expire, never for those past or revoked', async () => {
    const { listMigrations, migrate } = await import('../src/db/migrate');
    const scratch = await createScratchDatabase();
    const db = await openDatabase({ databaseUrl: scratch.url });
    try {
      await db.exec('CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
      for (const m of listMigrations().filter((m) => m.version < '033')) {
        await db.exec(m.sql);
        await db.query('INSERT INTO schema_migrations (version) VALUES ($1)', [m.version]);
      }
      const future = new Date(Date.now() + 30 * 86_400_000).toISOString();
      // As the consent index wrote them then (src/db/migrations/010_consents.sql).
      for (const [id, status, expires] of [['c-active', 'active', future], ['c-past', 'active', '2020-01-01T00:00:00Z'], ['c-revoked', 'inactive', future]] as const)
        await db.query(`INSERT INTO consent_access (consent_id, patient_id, organization_id, consent_type, classes, status, granted_at, expires_at) VALUES ($1, 'p-1', 'org-old', 'full_record', '{patients:read,labs:read}', $2, now(), $3)`, [id, status, expires]);
      expect(await migrate(db)).toContain('033_consent_artefacts');
      const { rows } = await db.query<Record<string, unknown>>(
        `SELECT consent_id, purpose_of_use, resource_types, data_from, data_to, erase_at, frequency_count, frequency_unit, classes, expires_at FROM consent_access ORDER BY consent_id`,
      );
      for (const row of rows)
        expect(row).toMatchObject({ purpose_of_use: 'CAREMGT', resource_types: null, data_from: null, data_to: null, erase_at: null, frequency_count: null, frequency_unit: null, classes: ['patients:read', 'labs:read'] });
      const notices = await db.query<{ consent_id: string; due_at: Date; fired: boolean }>(`SELECT consent_id, due_at, fired_at IS NOT NULL AS fired FROM consent_notices WHERE kind = 'expired' ORDER BY consent_id`);
      expect(notices.rows.map((n) => [n.consent_id, new Date(n.due_at).toISOString(), n.fired])).toEqual([
        ['c-active', future, false],
        ['c-past', '2020-01-01T00:00:00.000Z', true], // already past: never announced, and not now
      ]);
    } finally {
      await db.close();
      await scratch.drop();
    }
  });
});

describe('the signed artefact and the revocation list', () => {
  let consentId: string;
  let intruder: TestClient;
  beforeAll(async () => {
    consentId = (await connect(clinic, `/patient/${healthId}/consent`)).body.consent_id;
    intruder = await createTestClient(pont, ['consents:read', 'consents:write'], { organizationId: 'org-intruder' });
  });

  it('verifies with the public key set (kid from /.well-known/jwks.json) and carries what was approved', async () => {
    const res = await connect(clinic, `/consents/${consentId}/artefact`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const { createLocalJWKSet, jwtVerify, decodeProtectedHeader } = await import('jose');
    const jwks = (await pont.json('/.well-known/jwks.json')).body;
    const header = decodeProtectedHeader(res.body.artefact);
    expect(jwks.keys.map((k: any) => k.kid)).toContain(header.kid);
    const { payload } = await jwtVerify(res.body.artefact, createLocalJWKSet(jwks), { issuer: pont.config.publicUrl });
    expect(payload.sub).toBe(consentId);
    expect(payload.consent).toMatchObject({
      consent_id: consentId,
      status: 'active',
      health_id: healthId,
      requester: { organization_id: 'org-clinic' },
      holders: [{ organization_id: 'org-hospital' }],
      purpose_of_use: 'CAREMGT',
      hi_types: ['Prescription'],
      date_range: { from: '2024-01-01', to: '2024-12-31' },
    });
    // The three client libraries verify it offline with the same key set (TypeScript: node:crypto; Python: the
    // standard library alone; PHP: openssl), and refuse it altered.
    const { verifyConsentArtefact } = await import('../clients/typescript/dist/index.js');
    expect(verifyConsentArtefact(res.body.artefact, jwks).consent).toMatchObject({ consent_id: consentId, hi_types: ['Prescription'] });
    const { execFileSync } = await import('node:child_process');
    const { fileURLToPath } = await import('node:url');
    const clients = fileURLToPath(new URL('../clients/', import.meta.url));
    const altered = `${res.body.artefact.slice(0, -6)}AAAAAA`;
    const python = (jws: string) =>
      execFileSync('python3', ['-c', 'import json,sys; from pont import verify_consent_artefact as v, ArtefactVerificationError as E\ntry: print(json.dumps(v(sys.argv[1], json.loads(sys.argv[2]))["consent"]))\nexcept E as e: print(json.dumps({"refused": str(e)}))', jws, JSON.stringify(jwks)], { cwd: `${clients}python`, encoding: 'utf8' });
    expect(JSON.parse(python(res.body.artefact))).toMatchObject({ consent_id: consentId, hi_types: ['Prescription'] });
    expect(JSON.parse(python(altered))).toEqual({ refused: 'The signature does not verify' });
    const php = (jws: string) =>
      execFileSync('php', ['-r', `foreach (['PontError', 'ArtefactVerificationError', 'Artefacts'] as $c) require '${clients}php/src/' . $c . '.php'; try { echo json_encode(Pont\\Artefacts::verify($argv[1], json_decode($argv[2], true))['consent']); } catch (Pont\\ArtefactVerificationError $e) { echo json_encode(['refused' => $e->getMessage()]); }`, jws, JSON.stringify(jwks)], { encoding: 'utf8' });
    expect(JSON.parse(php(res.body.artefact))).toMatchObject({ consent_id: consentId, hi_types: ['Prescription'] });
    expect(JSON.parse(php(altered))).toEqual({ refused: 'The signature does not verify' });
    // A changed byte breaks it.
    const [h, , sig] = res.body.artefact.split('.');
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...payload, consent: { ...(payload.consent as object), hi_types: ['Prescription', 'DiagnosticReport'] } })).toString('base64url')}.${sig}`;
    await expect(jwtVerify(forged, createLocalJWKSet(jwks))).rejects.toThrow();
    // As application/jose: the JWS itself.
    const raw = await pont.fetch(`/api/v1/connect/consents/${consentId}/artefact`, { headers: { ...clinic.headers, accept: 'application/jose' } });
    expect(raw.headers.get('content-type')).toMatch(/^application\/jose/);
    expect((await raw.text()).split('.')).toHaveLength(3);
  });

  it('another organisation gets the same 404 as an unknown id', async () => {
    const other = await connect(intruder, `/consents/${consentId}/artefact`);
    const unknown = await connect(intruder, `/consents/00000000-0000-4000-8000-000000000000/artefact`);
    expect(other.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(other.body.error_code).toBe(unknown.body.error_code);
    expect(other.body.message.replace(consentId, 'X')).toBe(unknown.body.message.replace('00000000-0000-4000-8000-000000000000', 'X'));
  });

  it('a revoked consent is listed since before its revocation, to its requester only, and stops access at once', async () => {
    const before = new Date(Date.now() - 1000).toISOString();
    expect((await connect(clinic, `/consents/revoked?since=${encodeURIComponent(before)}`)).body.items).toEqual([]);
    const revoked = await connect(clinic, `/patient/${healthId}/consent/revoke`, { method: 'POST', json: {} });
    expect(revoked.status).toBe(200);
    const list = await connect(clinic, `/consents/revoked?since=${encodeURIComponent(before)}`);
    expect(list.body.items).toEqual([{ consent_id: consentId, revoked_at: expect.any(String) }]);
    expect((await connect(intruder, `/consents/revoked?since=${encodeURIComponent(before)}`)).body.items).toEqual([]);
    expect((await connect(clinic, `/consents/revoked?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).body.items).toEqual([]);
    expect((await connect(clinic, `/consents/revoked?since=yesterday`)).status).toBe(422);
    expect((await fhir(clinic, `/${ids.rx2024}`)).status).toBe(404);
  });
});

describe('notices: consent.expired and consent.erase_due, fired by the job at their time, once, to both sides', () => {
  it('fire at expires_at and erase_at of the service clock, each exactly once, to the requester and the data holders, with the artefact id', async () => {
    const resolved = await connect(hospital, '/patients/resolve', { method: 'POST', json: { first_name: 'Nadia', last_name: 'Notice', date_of_birth: '1990-09-09', sex: 'female' } });
    const hid = resolved.body.health_id;
    const pid = (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${hid}`)).body.entry[0].resource.id;
    const grant = await connect(clinic, `/patient/${hid}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(1), erase_at: inDays(3) } });
    expect(grant.status).toBe(201);
    const consentId = grant.body.consent_id;
    const notices = async () =>
      (await pont.services.db.query<{ type: string; data: any; patient_id: string }>(`SELECT type, data, patient_id FROM events WHERE type IN ('consent.expired', 'consent.erase_due') AND data->>'consent_id' = $1 ORDER BY seq`, [consentId])).rows;
    const { eventually } = await import('./eventually');
    const { entitledOrganizations } = await import('../src/webhooks/entitlement');
    const realNow = pont.services.fhir.now;
    try {
      // Not yet due: a run of the job fires nothing.
      const { fireDueNotices } = await import('../src/consents/notices');
      expect(await fireDueNotices(pont.services.db, 'development', Date.now())).toBe(0);
      pont.services.fhir.now = () => Date.now() + 2 * 86_400_000; // two days pass: expired, not yet to erase
      const [expired] = await eventually(async () => {
        const rows = await notices();
        expect(rows.map((r) => r.type)).toEqual(['consent.expired']);
        return rows;
      });
      expect(expired!.data).toMatchObject({ consent_id: consentId, artefact_id: consentId, organization_id: 'org-clinic', health_id: hid, status: 'expired' });
      expect(expired!.patient_id).toBe(pid);
      // The grant's own event names the artefact too, and reaches the holder as well as the requester.
      const granted = (await pont.services.db.query<{ data: any }>(`SELECT data FROM events WHERE type = 'consent.granted' AND data->>'consent_id' = $1`, [consentId])).rows[0]!;
      expect(granted.data).toMatchObject({ consent_id: consentId, artefact_id: consentId });
      expect((await entitledOrganizations(pont.services.db, { type: 'consent.granted', organizationId: 'org-clinic', patientId: pid, data: granted.data })).sort()).toEqual(['org-clinic', 'org-hospital']);
      expect((await entitledOrganizations(pont.services.db, { type: 'consent.expired', organizationId: 'org-clinic', patientId: pid, data: expired!.data })).sort()).toEqual(['org-clinic', 'org-hospital']);
      pont.services.fhir.now = () => Date.now() + 4 * 86_400_000;
      await eventually(async () => expect((await notices()).map((r) => r.type)).toEqual(['consent.expired', 'consent.erase_due']));
      // Later runs (which may fire other consents' notices) fire nothing again for this one.
      await fireDueNotices(pont.services.db, 'development', Date.now() + 10 * 86_400_000);
      expect((await notices()).length).toBe(2);
    } finally {
      pont.services.fhir.now = realNow;
    }
  });

  it('runs claiming side by side fire each due notice once (FOR UPDATE SKIP LOCKED)', async () => {
    const { fireDueNotices } = await import('../src/consents/notices');
    const granted: string[] = [];
    for (let i = 0; i < 6; i++) {
      const resolved = await connect(hospital, '/patients/resolve', { method: 'POST', json: { first_name: `Burst${'abcdef'[i]}`, last_name: 'Notice', date_of_birth: '1991-01-01', sex: 'male' } });
      const grant = await connect(clinic, `/patient/${resolved.body.health_id}/consent/grant`, { method: 'POST', json: { consent_type: 'documents', expires_at: inDays(20 + i) } });
      granted.push(grant.body.consent_id);
    }
    // The clock stays real: the service's own job does not reach these; concurrent runs 30 days on do.
    const later = Date.now() + 30 * 86_400_000;
    const fired = await Promise.all(Array.from({ length: 4 }, () => fireDueNotices(pont.services.db, 'development', later)));
    const { rows } = await pont.services.db.query<{ id: string; n: string }>(
      `SELECT data->>'consent_id' AS id, count(*) AS n FROM events WHERE type = 'consent.expired' AND data->>'consent_id' = ANY($1::text[]) GROUP BY 1`,
      [granted],
    );
    expect(rows.map((r) => Number(r.n))).toEqual(granted.map(() => 1));
    expect(fired.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(granted.length);
  });
});

describe('the purpose of use: stated with X-Purpose-Of-Use, matched with the artefact, audited as purposeOfEvent', () => {
  it('a read stating another purpose sees nothing; the consent purpose or no code sees what it covers; the AuditEvent codes the purpose', async () => {
    const resolved = await connect(hospital, '/patients/resolve', { method: 'POST', json: { first_name: 'Priya', last_name: 'Purpose', date_of_birth: '1985-05-05', sex: 'female' } });
    const hid = resolved.body.health_id;
    const pid = (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${hid}`)).body.entry[0].resource.id;
    const rx = await fhir(hospital, '/MedicationRequest', {
      method: 'POST',
      json: { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Insulin' }, subject: { reference: `Patient/${pid}` }, authoredOn: '2025-01-01' },
    });
    const grant = await connect(clinic, `/patient/${hid}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(30), purpose_of_use: 'DSRCH' } });
    expect(grant.body.purpose_of_use).toBe('DSRCH');
    const read = (purpose?: string, requestId?: string) =>
      fhir(clinic, `/MedicationRequest/${rx.body.id}`, { headers: { ...(purpose !== undefined && { 'X-Purpose-Of-Use': purpose }), ...(requestId && { 'X-Request-ID': requestId }) } });
    expect((await read('CAREMGT')).status).toBe(404);
    expect((await fhir(clinic, `/MedicationRequest?patient=${pid}`, { headers: { 'X-Purpose-Of-Use': 'PUBHLTH' } })).body.total).toBe(0);
    expect((await connect(clinic, `/patient/${hid}/records?type=prescriptions`, { headers: { 'X-Purpose-Of-Use': 'HPAYMT' } })).status).toBe(403);
    expect((await read('DSRCH', 'req-purpose-stated')).status).toBe(200);
    expect((await read(undefined, 'req-purpose-consent')).status).toBe(200);
    expect((await read('research on diabetes')).status).toBe(200); // free text, as before artefacts: audited as text
    const { buildAuditEvent } = await import('../src/audit/audit');
    for (const requestId of ['req-purpose-stated', 'req-purpose-consent']) {
      const { rows } = await pont.services.db.query<{ record: any; recorded: Date }>('SELECT record, recorded FROM audit_log WHERE request_id = $1', [requestId]);
      expect(rows).toHaveLength(1);
      const event = buildAuditEvent(rows[0]!.record, new Date(rows[0]!.recorded));
      expect(event.purposeOfEvent?.[0]?.coding).toEqual([{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActReason', code: 'DSRCH' }]);
    }
  });
});

describe('frequency: fetches counted per consent, atomically; 429 with Retry-After once spent', () => {
  async function patientWithPrescription(first: string) {
    const resolved = await connect(hospital, '/patients/resolve', { method: 'POST', json: { first_name: first, last_name: 'Frequency', date_of_birth: '1979-07-07', sex: 'male' } });
    const hid = resolved.body.health_id;
    const pid = (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${hid}`)).body.entry[0].resource.id;
    const rx = await fhir(hospital, '/MedicationRequest', {
      method: 'POST',
      json: { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Aspirin' }, subject: { reference: `Patient/${pid}` }, authoredOn: '2025-02-02' },
    });
    return { hid, pid, rxId: rx.body.id as string };
  }

  it('three a day: three reads, then 429 with Retry-After in the documented shape; the data holder is not limited', async () => {
    const { hid, pid, rxId } = await patientWithPrescription('Fay');
    const grant = await connect(clinic, `/patient/${hid}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(30), frequency: { count: 3, unit: 'day' } } });
    expect(grant.body.frequency).toEqual({ count: 3, unit: 'day' });
    expect((await fhir(clinic, `/MedicationRequest/${rxId}`)).status).toBe(200);
    expect((await fhir(clinic, `/MedicationRequest?patient=${pid}`)).status).toBe(200);
    expect((await connect(clinic, `/patient/${hid}/records?type=prescriptions`)).status).toBe(200);
    const spent = await fhir(clinic, `/MedicationRequest/${rxId}`);
    expect(spent.status).toBe(429);
    expect(Number(spent.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(spent.headers.get('retry-after'))).toBeLessThanOrEqual(86_400);
    expect(spent.body.resourceType).toBe('OperationOutcome');
    const connectSpent = await connect(clinic, `/patient/${hid}/records?type=prescriptions`);
    expect(connectSpent.status).toBe(429);
    expect(connectSpent.body.error_code).toBe('RATE_LIMITED');
    expect((await fhir(hospital, `/MedicationRequest/${rxId}`)).status).toBe(200);
  });

  it('a limit granted to an organisation whose reads were not counted counts from its next read, in this process and in another', async () => {
    // A second process on the same database (PGlite is one process's database).
    const second = backend === 'postgres' ? await startPont(loadConfig({ PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: pont.config.databaseUrl, PONT_PUBLIC_URL: pont.config.publicUrl })) : undefined;
    try {
      const late = await createTestClient(pont, ['health_id:verify', 'consents:write', 'prescriptions:read', 'fhir:read'], { organizationId: 'org-late' });
      const servers = [pont, ...(second ? [second] : [])];
      const read = (server: { url: string }, rxId: string) => fetch(`${server.url}/api/fhir/R4/MedicationRequest/${rxId}`, { headers: late.headers }).then((r) => r.status);
      // Reads under a consent with no limit: every process knows the organisation's reads are not counted.
      const unlimited = await patientWithPrescription('Unlimited');
      await connect(late, `/patient/${unlimited.hid}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(30) } });
      for (const server of servers) for (let i = 0; i < 3; i++) expect(await read(server, unlimited.rxId)).toBe(200);
      const limited = await patientWithPrescription('Limited');
      await connect(late, `/patient/${limited.hid}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(30), frequency: { count: 2, unit: 'day' } } });
      // The process that granted counts the very next read; the other once it heard the change.
      expect(await read(pont, limited.rxId)).toBe(200);
      await Promise.all(servers.map((s) => s.services.db.listenersCaughtUp()));
      expect(await read(servers.at(-1)!, limited.rxId)).toBe(200);
      for (const server of servers) expect(await read(server, limited.rxId)).toBe(429);
      for (const server of servers) expect(await read(server, unlimited.rxId)).toBe(200);
    } finally {
      await second?.close();
    }
  });

  it('a bulk export is one fetch, however many files it writes; a second export the limit refuses fails with the reason', async () => {
    const exporter = await createTestClient(pont, ['health_id:verify', 'consents:write', 'prescriptions:read', 'patient:profile:read', 'fhir:read'], { organizationId: 'org-export' });
    const { hid, pid, rxId } = await patientWithPrescription('Exported');
    await fhir(hospital, '/MedicationRequest', {
      method: 'POST',
      json: { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Statin' }, subject: { reference: `Patient/${pid}` }, authoredOn: '2025-03-03' },
    });
    await connect(exporter, `/patient/${hid}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(30), frequency: { count: 2, unit: 'day' } } });
    const settings = pont.services.bulkExports.settings;
    const saved = settings.partResources;
    settings.partResources = 1; // a file a prescription
    onTestFinished(() => void (settings.partResources = saved));
    const exportOnce = async () => {
      const kick = await pont.fetch('/api/fhir/R4/Patient/$export?_type=MedicationRequest', { headers: { ...exporter.headers, prefer: 'respond-async' } });
      expect(kick.status, await kick.clone().text()).toBe(202);
      const status = kick.headers.get('content-location')!;
      await (pont.services.workers.find((w) => w.name === 'bulk-export') as unknown as { drain(): Promise<void> }).drain();
      return pont.json(status.slice(status.indexOf('/api/fhir')), { headers: exporter.headers });
    };
    // Two files (a prescription each): one fetch.
    const first = await exportOnce();
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.output.map((f: { count: number }) => f.count)).toEqual([1, 1]);
    expect((await fhir(exporter, `/MedicationRequest/${rxId}`)).status).toBe(200); // the second fetch
    expect((await fhir(exporter, `/MedicationRequest/${rxId}`)).status).toBe(429);
    const second = await exportOnce();
    expect(second.status).toBe(500);
    expect(JSON.stringify(second.body)).toMatch(/frequency is spent/);
  });

  it('a concurrent burst of 20 reads under "5 an hour" gets exactly 5 answers', async () => {
    const { hid, rxId } = await patientWithPrescription('Burst');
    await connect(clinic, `/patient/${hid}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(30), frequency: { count: 5, unit: 'hour' } } });
    const statuses = await Promise.all(Array.from({ length: 20 }, () => fhir(clinic, `/MedicationRequest/${rxId}`).then((r) => r.status)));
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
  });
});

describe('webhooks: an event about a patient reaches an artefact consent only for its kinds, and within a date range only for care inside it', () => {
  it('Prescription kinds hear prescription events, not lab events; a date range hears events about the patient, and about a resource whose care date is inside it', async () => {
    const { entitledOrganizations } = await import('../src/webhooks/entitlement');
    const hear = async (pid: string, type: string) => (await entitledOrganizations(pont.services.db, { type, organizationId: 'org-hospital', patientId: pid, data: {} })).sort();
    const newPatient = async (first: string) => {
      const r = await connect(hospital, '/patients/resolve', { method: 'POST', json: { first_name: first, last_name: 'Hooks', date_of_birth: '1970-03-03', sex: 'female' } });
      const pid = (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${r.body.health_id}`)).body.entry[0].resource.id as string;
      return { hid: r.body.health_id as string, pid };
    };
    const kinds = await newPatient('Kinds');
    await connect(clinic, `/patient/${kinds.hid}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at: inDays(30), hi_types: ['Prescription'] } });
    expect(await hear(kinds.pid, 'prescription.issued')).toEqual(['org-clinic', 'org-hospital']);
    expect(await hear(kinds.pid, 'lab_result.released')).toEqual(['org-hospital']);
    expect(await hear(kinds.pid, 'document.issued')).toEqual(['org-hospital']);
    expect(await hear(kinds.pid, 'patient.updated')).toEqual(['org-clinic', 'org-hospital']);
    const ranged = await newPatient('Ranged');
    await connect(clinic, `/patient/${ranged.hid}/consent/grant`, {
      method: 'POST',
      json: { consent_type: 'full_record', expires_at: inDays(30), hi_types: ['Prescription'], date_range: { from: '2024-01-01', to: '2024-12-31' } },
    });
    expect(await hear(ranged.pid, 'prescription.issued')).toEqual(['org-hospital']); // names no resource: no date to judge
    expect(await hear(ranged.pid, 'patient.updated')).toEqual(['org-clinic', 'org-hospital']);
    // An event naming its resource is judged by that resource's date of care, as a read of it would be.
    const rx = async (authoredOn?: string) =>
      (await fhir(hospital, '/MedicationRequest', { method: 'POST', json: { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Ranged' }, subject: { reference: `Patient/${ranged.pid}` }, ...(authoredOn && { authoredOn }) } })).body.id as string;
    const heard = async (id: string) => (await entitledOrganizations(pont.services.db, { type: 'prescription.issued', organizationId: 'org-hospital', patientId: ranged.pid, data: { prescription_id: id, patient_id: ranged.pid } })).sort();
    expect(await heard(await rx('2024-03-03'))).toEqual(['org-clinic', 'org-hospital']);
    expect(await heard(await rx('2023-03-03'))).toEqual(['org-hospital']);
    expect(await heard(await rx())).toEqual(['org-hospital']);
    expect(await heard('no-such-prescription')).toEqual(['org-hospital']);
    const legacy = await newPatient('Legacy');
    await connect(clinic, `/patient/${legacy.hid}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at: inDays(30) } });
    expect(await hear(legacy.pid, 'lab_result.released')).toEqual(['org-clinic', 'org-hospital']);
  });

  it('attack: an event that names another in-range record (another patient\'s, or its own patient\'s) is not heard for an out-of-range one', async () => {
    // prescription.dispensed names the dispense and its authorizingPrescription (prescription_id, a MedicationRequest
    // id the writer chose). Ids are unique per type only: MedicationDispense/<that id> may exist too (ids assigned
    // by PUT collide across types as a matter of course), and its date was judged in place of the event's dispense.
    const { entitledOrganizations } = await import('../src/webhooks/entitlement');
    const newPatient = async (first: string) => {
      const r = await connect(hospital, '/patients/resolve', { method: 'POST', json: { first_name: first, last_name: 'Collide', date_of_birth: '1971-04-04', sex: 'male' } });
      return (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${r.body.health_id}`)).body.entry[0].resource.id as string;
    };
    const ranged = await newPatient('Ranged');
    const other = await newPatient('Other');
    const hid = (await fhir(hospital, `/Patient/${ranged}`)).body.identifier.find((i: any) => i.system === 'https://pont.health/fhir/sid/health-id').value;
    await connect(clinic, `/patient/${hid}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at: inDays(30), date_range: { from: '2024-01-01', to: '2024-12-31' } } });
    const prescription = async (id: string) => {
      const res = await fhir(hospital, `/MedicationRequest/${id}`, {
        method: 'PUT',
        json: { resourceType: 'MedicationRequest', id, status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Collide' }, subject: { reference: `Patient/${ranged}` }, authoredOn: '2023-04-04' },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
    };
    const dispense = async (id: string, pid: string, when: string, rx?: string) => {
      if (rx) await prescription(rx);
      const res = await fhir(hospital, `/MedicationDispense/${id}`, {
        method: 'PUT',
        json: { resourceType: 'MedicationDispense', id, status: 'completed', medicationCodeableConcept: { text: 'Collide' }, subject: { reference: `Patient/${pid}` }, whenHandedOver: when, ...(rx && { authorizingPrescription: [{ reference: `MedicationRequest/${rx}` }] }) },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
    };
    const heard = async (id: string, rx: string | null) =>
      (await entitledOrganizations(pont.services.db, { type: 'prescription.dispensed', organizationId: 'org-hospital', patientId: ranged, data: { dispense_id: id, patient_id: ranged, health_id: hid, status: 'completed', prescription_id: rx } })).sort();
    // Another patient's dispense of 2024, and one of the ranged patient's of 2024, whose ids a prescription shares.
    await dispense('a-wave4-other-2024', other, '2024-05-05');
    await dispense('a-wave4-own-2024', ranged, '2024-06-06');
    await dispense('z-wave4-2023', ranged, '2023-05-05', 'a-wave4-other-2024');
    await dispense('z-wave4-2023b', ranged, '2023-07-07', 'a-wave4-own-2024');
    await dispense('z-wave4-2024', ranged, '2024-07-07', 'rx-wave4-plain');
    expect(await heard('z-wave4-2023', 'a-wave4-other-2024')).toEqual(['org-hospital']);
    expect(await heard('z-wave4-2023b', 'a-wave4-own-2024')).toEqual(['org-hospital']);
    // The in-range dispense is heard, as before.
    expect(await heard('z-wave4-2024', 'rx-wave4-plain')).toEqual(['org-clinic', 'org-hospital']);
    expect(await heard('z-wave4-2024', null)).toEqual(['org-clinic', 'org-hospital']);
    // An event naming only another patient's in-range record is not heard either.
    expect(await heard('no-such-dispense', 'a-wave4-other-2024')).toEqual(['org-hospital']);
  });
});

describe.runIf(backend === 'postgres')('two server processes: one frequency, one revocation, one artefact', () => {
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
  const processes: PontProcess[] = [];
  afterAll(async () => {
    for (const p of processes) await stopPontProcess(p, 'SIGTERM');
    await scratch?.drop();
  });

  it('fetches are counted across both; a revocation on one stops reads on the other, which lists it as revoked', async () => {
    scratch = await createScratchDatabase({ migrated: true });
    const env = { PONT_PUBLIC_URL: 'http://pont.test' };
    processes.push(await startPontProcess(scratch.url, env), await startPontProcess(scratch.url, env));
    const [a, b] = processes.map((p) => p.url) as [string, string];
    const db = await openDatabase({ databaseUrl: scratch.url });
    const writer = await createClient(db, { name: 'writer', organizationId: 'org-writer', scopes: ['health_id:verify', 'fhir:write', 'fhir:read'] });
    const reader = await createClient(db, { name: 'reader', organizationId: 'org-reader', scopes: ['health_id:verify', 'consents:write', 'consents:read', 'fhir:read'] });
    await db.close();
    const w = await bearerFrom(a, writer);
    const r = await bearerFrom(a, reader);
    const post = (url: string, headers: Record<string, string>, path: string, body: unknown) => fetch(`${url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
    const healthId = ((await (await post(a, w, '/api/v1/connect/patients/resolve', { first_name: 'Two', last_name: 'Artefacts' })).json()) as { health_id: string }).health_id;
    const pid = ((await (await fetch(`${a}/api/fhir/R4/Patient?identifier=https://pont.health/fhir/sid/health-id|${healthId}`, { headers: w })).json()) as any).entry[0].resource.id;
    const rx = (await (await post(a, { ...w, 'content-type': 'application/fhir+json' }, '/api/fhir/R4/MedicationRequest', {
      resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Atenolol' }, subject: { reference: `Patient/${pid}` }, authoredOn: '2024-04-04',
    })).json()) as { id: string };
    const grant = await post(a, r, `/api/v1/connect/patient/${healthId}/consent/grant`, {
      consent_type: 'prescriptions', expires_at: inDays(30), hi_types: ['Prescription'], date_range: { from: '2024-01-01', to: '2024-12-31' }, frequency: { count: 4, unit: 'hour' },
    });
    expect(grant.status).toBe(201);
    const consentId = ((await grant.json()) as { consent_id: string }).consent_id;
    const read = (url: string) => fetch(`${url}/api/fhir/R4/MedicationRequest/${rx.id}`, { headers: r }).then((res) => res.status);
    const statuses = await Promise.all(Array.from({ length: 10 }, (_, i) => read(i % 2 ? a : b)));
    expect(statuses.filter((s) => s === 200)).toHaveLength(4);
    expect(statuses.filter((s) => s === 429)).toHaveLength(6);
    // The artefact from either process verifies with the key set of the other.
    const artefact = ((await (await fetch(`${a}/api/v1/connect/consents/${consentId}/artefact`, { headers: r })).json()) as { artefact: string }).artefact;
    const { createLocalJWKSet, jwtVerify } = await import('jose');
    const jwks = (await (await fetch(`${b}/.well-known/jwks.json`)).json()) as { keys: Array<Record<string, string>> };
    expect((await jwtVerify(artefact, createLocalJWKSet(jwks))).payload.sub).toBe(consentId);
    const since = new Date(Date.now() - 60_000).toISOString();
    expect((await post(a, r, `/api/v1/connect/patient/${healthId}/consent/revoke`, {})).status).toBe(200);
    expect(await read(b)).toBe(404);
    const listed = (await (await fetch(`${b}/api/v1/connect/consents/revoked?since=${encodeURIComponent(since)}`, { headers: r })).json()) as { items: Array<{ consent_id: string }> };
    expect(listed.items.map((i) => i.consent_id)).toEqual([consentId]);
  }, 120_000);
});
