import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEvent, Bundle, Resource } from '@medplum/fhirtypes';
import { backdateConsent, createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * Randomised: several organisations × patients × consent states, then every read path exercised by every
 * organisation. The number of records returned to an organisation that may not see them must be zero,
 * through reads, searches, counts, includes, chains, _has, history and $everything; every refused access
 * leaves an audit record.
 */
const SEED = Number(process.env.PONT_MATRIX_SEED ?? 20261122);
let state = SEED;
const random = () => ((state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;

type ConsentState = 'none' | 'full' | 'diagnostics' | 'pending' | 'denied' | 'revoked' | 'expired' | 'regranted';
const STATES: readonly ConsentState[] = ['none', 'full', 'diagnostics', 'pending', 'denied', 'revoked', 'expired', 'regranted'];
const ORGS = ['org-a', 'org-b', 'org-c'] as const;
const PATIENTS = 6;
/** What each state lets the organisation read, by data class (docs/integrators.md "Consent"). */
const CLASSES: Record<ConsentState, string[]> = {
  none: [],
  full: ['patients:read', 'labs:read', 'prescriptions:read', 'documents:read', 'appointments:read', 'fhir:read'],
  diagnostics: ['labs:read'],
  pending: [],
  denied: [],
  revoked: [],
  expired: [],
  regranted: ['patients:read', 'labs:read', 'prescriptions:read', 'documents:read', 'appointments:read', 'fhir:read'],
};
const CLASS_OF: Record<string, string> = {
  Patient: 'patients:read',
  Condition: 'patients:read',
  Encounter: 'patients:read',
  Observation: 'labs:read',
  MedicationRequest: 'prescriptions:read',
  // Issue 39: types read as records since, one of each class they are in.
  Procedure: 'patients:read',
  Goal: 'patients:read',
  QuestionnaireResponse: 'labs:read',
  Media: 'documents:read',
  // Stop 84: a Task names what it concerns in its code, focus, inputs and outputs, so only a full record covers it
  // (fhir:read); a message asked for is a document's; a lens prescription is no medication's.
  Task: 'fhir:read',
  CommunicationRequest: 'documents:read',
  VisionPrescription: 'patients:read',
};
/** The Connect record type of each of those (records?type=…). */
const RECORD_TYPE_OF: Record<string, string> = {
  Procedure: 'procedures',
  Goal: 'goals',
  QuestionnaireResponse: 'assessments',
  Media: 'media',
  Task: 'tasks',
  CommunicationRequest: 'communication_requests',
  VisionPrescription: 'vision_prescriptions',
};

let pont: TestServer;
let writer: TestClient;
let registrar: TestClient;
const readers = new Map<string, TestClient>();
const patients: Array<{ id: string; healthId: string; name: string; resources: Resource[] }> = [];
const states = new Map<string, ConsentState>(); // `${org}|${patientId}`
let emergency: TestClient;
let emergencyPatient: string;
/** Consents granted for a day, then moved two days into the past (the "expired" state). */
const expiring: string[] = [];

const fhir = (c: TestClient, path: string, headers: Record<string, string> = {}) => pont.json(`/api/fhir/R4${path}`, { headers: { ...c.headers, ...headers } });
const connect = (c: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) => pont.json(`/api/v1/connect${path}`, { ...init, headers: c.headers });
const later = (ms: number) => new Date(Date.now() + ms).toISOString();

function visible(org: string, patientId: string, type: string): boolean {
  return CLASSES[states.get(`${org}|${patientId}`) ?? 'none'].includes(CLASS_OF[type]!);
}

beforeAll(async () => {
  pont = await startTestServer();
  writer = await createTestClient(pont, ['health_id:verify', 'fhir:read', 'fhir:write'], { organizationId: 'org-writer' });
  registrar = await createTestClient(pont, ['consents:write'], { organizationId: 'org-writer' });
  for (const org of ORGS)
    readers.set(org, await createTestClient(pont, ['health_id:verify', 'fhir:read', 'consents:read', 'consents:write', 'patient:profile:read', 'patient:diagnostics:read'], { organizationId: org }));
  emergency = await createTestClient(pont, ['fhir:read', 'emergency:access'], { organizationId: 'org-er' });
  for (let i = 0; i < PATIENTS; i++) {
    const name = `Matrix${i}`;
    const res = await connect(writer, '/patients/resolve', { method: 'POST', json: { first_name: 'Pat', last_name: name, date_of_birth: `1970-01-0${i + 1}` } });
    const healthId = res.body.health_id as string;
    const patient = (await fhir(writer, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${healthId}`)).body.entry[0].resource;
    const subject = { reference: `Patient/${patient.id}` };
    const resources: Resource[] = [patient];
    for (const r of [
      { resourceType: 'Condition', subject, code: { text: 'Asthma' } },
      { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '718-7' }] }, subject },
      { resourceType: 'Encounter', status: 'finished', class: { code: 'AMB' }, subject },
      { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Salbutamol' }, subject },
      { resourceType: 'Procedure', status: 'completed', code: { text: 'Spirometry' }, subject },
      { resourceType: 'Goal', lifecycleStatus: 'active', description: { text: 'No night-time symptoms' }, subject },
      { resourceType: 'QuestionnaireResponse', status: 'completed', subject, item: [{ linkId: 'act-1', text: 'Asthma control', answer: [{ valueInteger: 19 }] }] },
      { resourceType: 'Media', status: 'completed', content: { contentType: 'image/jpeg', url: 'https://images.example/1.jpg' }, subject },
      { resourceType: 'Task', status: 'in-progress', intent: 'order', code: { text: 'HIV viral load' }, for: subject, authoredOn: '2026-01-05T09:00:00Z' },
      { resourceType: 'CommunicationRequest', status: 'active', subject, payload: [{ contentString: 'Call back about the results' }], authoredOn: '2026-01-05T10:00:00Z' },
      {
        resourceType: 'VisionPrescription',
        status: 'active',
        created: '2026-01-05T11:00:00Z',
        patient: subject,
        dateWritten: '2026-01-05T11:00:00Z',
        prescriber: { display: 'Dr Optom' },
        lensSpecification: [{ product: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/ex-visionprescriptionproduct', code: 'lens' }] }, eye: 'right', sphere: -2 }],
      },
    ]) {
      const created = await pont.json(`/api/fhir/R4/${r.resourceType}`, { method: 'POST', json: r, headers: writer.headers });
      expect(created.status).toBe(201);
      resources.push(created.body);
    }
    patients.push({ id: patient.id, healthId, name, resources });
  }
  // Random consent states; expiring ones last only a moment.
  for (const org of ORGS)
    for (const p of patients) {
      const s = pick(STATES);
      states.set(`${org}|${p.id}`, s);
      const reader = readers.get(org)!;
      const grant = (consent_type: string, expires_at: string) =>
        connect(reader, `/patient/${p.healthId}/consent/grant`, { method: 'POST', json: { consent_type, expires_at } });
      if (s === 'full' || s === 'regranted' || s === 'revoked') await grant('full_record', later(86_400_000));
      if (s === 'diagnostics') await grant('diagnostics', later(86_400_000));
      if (s === 'revoked' || s === 'regranted') await connect(reader, `/patient/${p.healthId}/consent/revoke`, { method: 'POST', json: {} });
      if (s === 'regranted') await grant('full_record', later(86_400_000));
      if (s === 'expired') expiring.push((await grant('full_record', later(86_400_000))).body.consent_id);
      if (s === 'pending' || s === 'denied') {
        const req = await pont.json('/api/v1/sdk/consents/request', { method: 'POST', headers: reader.headers, json: { health_id: p.healthId, purpose: 'matrix', requested_scopes: ['patients:read'] } });
        if (s === 'denied') {
          const code = await connect(writer, `/patient/${p.healthId}/mobile/pairing-code`, { method: 'POST' });
          expect(code.status).toBe(403); // the writer lacks consents:write
          // Nor may the reader pair the patient: a pending request is no relationship (issue 20). The registering
          // organisation pairs the app.
          expect((await connect(reader, `/patient/${p.healthId}/mobile/pairing-code`, { method: 'POST' })).status).toBe(403);
          const own = await connect(registrar, `/patient/${p.healthId}/mobile/pairing-code`, { method: 'POST' });
          const token = (await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: p.healthId, code: own.body.code } })).body.access_token;
          await pont.json(`/api/v1/mobile/consent-requests/${req.body.consent_request_id}/deny`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
        }
      }
    }
  emergencyPatient = patients[0]!.id;
  for (const consentId of expiring) await backdateConsent(pont, consentId, 2 * 86_400_000); // the expiring consents have expired
}, 180_000);
afterAll(async () => {
  await pont?.close();
});

const idsIn = (bundle: Bundle, mode = 'match') => (bundle.entry ?? []).filter((e) => e.search?.mode === mode).map((e) => `${e.resource!.resourceType}/${e.resource!.id}`).sort();

describe(`consent matrix (seed ${SEED}): ${ORGS.length} organisations × ${PATIENTS} patients`, () => {
  it('reads, vreads and instance histories: 200 exactly where allowed, 404 (as if absent) otherwise', async () => {
    for (const org of ORGS)
      for (const p of patients)
        for (const r of p.resources) {
          const want = visible(org, p.id, r.resourceType);
          const reader = readers.get(org)!;
          const label = `${org} ${states.get(`${org}|${p.id}`)} ${r.resourceType}`;
          expect((await fhir(reader, `/${r.resourceType}/${r.id}`)).status, label).toBe(want ? 200 : 404);
          expect((await fhir(reader, `/${r.resourceType}/${r.id}/_history/1`)).status, label).toBe(want ? 200 : 404);
          expect((await fhir(reader, `/${r.resourceType}/${r.id}/_history`)).status, label).toBe(want ? 200 : 404);
        }
  });

  it('searches, population searches, counts and type histories return exactly what is allowed', async () => {
    for (const org of ORGS) {
      const reader = readers.get(org)!;
      for (const type of Object.keys(CLASS_OF)) {
        const expected = patients.flatMap((p) => p.resources.filter((r) => r.resourceType === type && visible(org, p.id, type)).map((r) => `${type}/${r.id}`)).sort();
        const all = await fhir(reader, `/${type}?_count=1000`);
        expect(idsIn(all.body), `${org} ${type}`).toEqual(expected);
        expect(all.body.total, `${org} ${type} total`).toBe(expected.length);
        expect((await fhir(reader, `/${type}?_summary=count`)).body.total, `${org} ${type} count`).toBe(expected.length);
        const history = await fhir(reader, `/${type}/_history?_count=1000`);
        const historyIds = [...new Set((history.body.entry ?? []).map((e: any) => `${type}/${e.resource?.id ?? e.fullUrl.split('/').pop()}`))].sort();
        expect(historyIds, `${org} ${type} history`).toEqual(expected);
        if (type !== 'Patient')
          for (const p of patients) {
            // VisionPrescription has no subject, only its patient.
            const mine = await fhir(reader, `/${type}?${type === 'VisionPrescription' ? 'patient' : 'subject'}=Patient/${p.id}`);
            expect(mine.body.total, `${org} ${type} of ${p.name}`).toBe(visible(org, p.id, type) ? 1 : 0);
          }
      }
    }
  });

  it('includes, revincludes, chains and _has reveal nothing more', async () => {
    for (const org of ORGS) {
      const reader = readers.get(org)!;
      const allowedPatients = patients.filter((p) => visible(org, p.id, 'Patient')).map((p) => `Patient/${p.id}`).sort();
      const allowedObs = patients.filter((p) => visible(org, p.id, 'Observation'));
      const inc = await fhir(reader, '/Observation?_include=Observation:subject&_count=1000');
      expect(idsIn(inc.body, 'include'), `${org} _include`).toEqual(allowedPatients.filter((ref) => allowedObs.some((p) => `Patient/${p.id}` === ref)));
      const rev = await fhir(reader, '/Patient?_revinclude=Observation:subject&_count=1000');
      expect(idsIn(rev.body, 'match'), `${org} Patient`).toEqual(allowedPatients);
      expect(idsIn(rev.body, 'include').length, `${org} _revinclude`).toBe(allowedObs.filter((p) => visible(org, p.id, 'Patient')).length);
      for (const p of patients) {
        const chained = await fhir(reader, `/Observation?subject:Patient.family=${p.name}`);
        expect(chained.body.total, `${org} chain ${p.name}`).toBe(visible(org, p.id, 'Observation') && visible(org, p.id, 'Patient') ? 1 : 0);
        const has = await fhir(reader, `/Patient?_has:Observation:subject:code=718-7&family=${p.name}`);
        expect(has.body.total, `${org} _has ${p.name}`).toBe(visible(org, p.id, 'Observation') && visible(org, p.id, 'Patient') ? 1 : 0);
        const everything = await fhir(reader, `/Patient/${p.id}/$everything`);
        if (!visible(org, p.id, 'Patient')) expect(everything.status, `${org} $everything ${p.name}`).toBe(404);
        else {
          // The organisation's own consents for the patient are in the compartment too: it sees them.
          const got = idsIn(everything.body).filter((id) => id !== `Patient/${p.id}` && !id.startsWith('Consent/'));
          expect(got, `${org} $everything ${p.name}`).toEqual(p.resources.filter((r) => r.resourceType !== 'Patient' && visible(org, p.id, r.resourceType)).map((r) => `${r.resourceType}/${r.id}`).sort());
        }
      }
    }
  });

  it('Connect: the profile needs consent; the status says which state the organisation is in', async () => {
    for (const org of ORGS)
      for (const p of patients) {
        const s = states.get(`${org}|${p.id}`)!;
        const reader = readers.get(org)!;
        expect((await connect(reader, `/patient/search?health_id=${p.healthId}`)).status, `${org} ${s}`).toBe(visible(org, p.id, 'Patient') ? 200 : 403);
        const status = (await connect(reader, `/patient/${p.healthId}/consent`)).body.status;
        const expected = { none: 'none', full: 'active', diagnostics: 'active', pending: 'pending', denied: 'denied', revoked: 'revoked', expired: 'expired', regranted: 'active' }[s];
        expect(status, `${org} ${s}`).toBe(expected);
      }
  });

  it('Connect records of the types of issue 39: read where the consent covers their class, withheld where it does not', async () => {
    for (const org of ORGS)
      for (const p of patients) {
        const label = `${org} ${states.get(`${org}|${p.id}`)} ${p.name}`;
        const res = await connect(readers.get(org)!, `/patient/${p.healthId}/records?type=all&limit=1000`);
        if (!CLASSES[states.get(`${org}|${p.id}`) ?? 'none'].length) {
          expect(res.status, label).toBe(403);
          continue;
        }
        expect(res.status, label).toBe(200);
        for (const [resourceType, type] of Object.entries(RECORD_TYPE_OF)) {
          const want = p.resources.filter((r) => r.resourceType === resourceType).map((r) => r.id);
          if (visible(org, p.id, resourceType)) expect(res.body.records[type].map((r: { id: string }) => r.id), `${label} ${type}`).toEqual(want);
          else {
            expect(res.body.records[type], `${label} ${type}`).toBeUndefined();
            expect(res.body.withheld, `${label} ${type}`).toContain(type);
          }
          const one = await connect(readers.get(org)!, `/patient/${p.healthId}/records?type=${type}`);
          expect(one.status, `${label} type=${type}`).toBe(visible(org, p.id, resourceType) ? 200 : 403);
        }
      }
  });

  it('break-glass opens one patient to one organisation, and only with the stated reason', async () => {
    const reason = { 'x-emergency-reason': 'cardiac arrest' };
    const target = patients.find((p) => p.id === emergencyPatient)!;
    expect((await fhir(emergency, `/Observation?subject=Patient/${target.id}`)).body.total).toBe(0);
    expect((await fhir(emergency, `/Observation?subject=Patient/${target.id}`, reason)).body.total).toBe(1);
    expect((await fhir(emergency, `/Observation?subject=Patient/${target.id}`)).body.total).toBe(0); // not without the reason
    expect((await fhir(emergency, '/Observation?_count=1000', reason)).status).toBe(403);
    for (const p of patients.filter((q) => q.id !== target.id)) expect((await fhir(emergency, `/Observation?subject=Patient/${p.id}`)).body.total).toBe(0);
  });

  it('every refused access left an audit record, and every allowed one too', async () => {
    const operator = await createTestClient(pont, ['audit:read'], { organizationId: 'org-operator', allPatients: true });
    for (const org of ORGS) {
      const reader = readers.get(org)!;
      const events: AuditEvent[] = [];
      let next: string | undefined = `/AuditEvent?altid=${reader.client_id}&_count=1000`;
      while (next) {
        const page: { body: Bundle } = await fhir(operator, next);
        events.push(...(page.body.entry ?? []).map((e) => e.resource as AuditEvent));
        const url = page.body.link?.find((l) => l.relation === 'next')?.url;
        next = url ? url.slice(url.indexOf('/AuditEvent')) : undefined;
      }
      const refusedReads = patients.flatMap((p) => p.resources.filter((r) => !visible(org, p.id, r.resourceType))).length * 3;
      const allowedReads = patients.flatMap((p) => p.resources.filter((r) => visible(org, p.id, r.resourceType))).length * 3;
      expect(events.filter((e) => e.outcome === '4' && e.subtype?.some((s) => s.code === 'fhirRead' || s.code === 'fhirVread' || s.code === 'fhirInstanceHistory' || s.code?.startsWith('fhirRead'))).length, org).toBeGreaterThanOrEqual(refusedReads);
      expect(events.filter((e) => e.outcome === '0').length, org).toBeGreaterThanOrEqual(allowedReads);
    }
  });
});
