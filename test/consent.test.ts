import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resource } from '@medplum/fhirtypes';
import { checkDigits } from '../src/healthid/healthid';
import { backdateConsent, createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { eventually } from './eventually';
import { TRANSACTION_RUNS } from '../src/db/database';

/**
 * Consent end to end: an organisation reads a patient's data only with the patient's active consent (or
 * data it wrote itself, or break-glass), on every path, and the patient answers requests and sees who read
 * what from their own app.
 */
let pont: TestServer;
/** Writes the patient's record: a hospital where the patient was treated. */
let hospital: TestClient;
/** Asks for access: a clinic that has never seen the patient. */
let clinic: TestClient;
let healthId: string;
let patientId: string;
let observationId: string;

const CLINIC_SCOPES = [
  'health_id:verify', 'consents:read', 'consents:write', 'patients:read', 'labs:read', 'fhir:read', 'patient:profile:read', 'webhooks:manage',
] as const;

async function resolveNew(client: TestClient, first: string) {
  const res = await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: client.headers, json: { first_name: first, last_name: 'Consent', date_of_birth: '1984-03-03', sex: 'female' } });
  expect(res.status).toBe(201);
  return res.body.health_id as string;
}
const fhir = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(`/api/fhir/R4${path}`, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
const connect = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(`/api/v1/connect${path}`, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
const inAYear = () => new Date(Date.now() + 365 * 86_400_000).toISOString();

beforeAll(async () => {
  pont = await startTestServer();
  hospital = await createTestClient(pont, ['health_id:verify', 'fhir:read', 'fhir:write', 'consents:write', 'consents:read'], { organizationId: 'org-hospital' });
  clinic = await createTestClient(pont, [...CLINIC_SCOPES], { organizationId: 'org-clinic' });
  healthId = await resolveNew(hospital, 'Grace');
  const [patient] = (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${healthId}`)).body.entry.map((e: any) => e.resource);
  patientId = patient.id;
  const obs = await fhir(hospital, '/Observation', {
    method: 'POST',
    json: {
      resourceType: 'Observation',
      status: 'final',
      category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] }],
      code: { text: 'Hemoglobin' },
      subject: { reference: `Patient/${patientId}` },
      valueQuantity: { value: 12.1, unit: 'g/dL' },
    },
  });
  expect(obs.status).toBe(201);
  observationId = obs.body.id;
});
afterAll(async () => {
  await pont?.close();
});

describe('the integrator walk-through: resolve, grant, status, read, revoke, refused', () => {
  it('reads nothing without consent, everything it covers with it, nothing again once revoked', async () => {
    // Resolve: identity only, no consent needed.
    const found = await connect(clinic, '/patients/resolve', { method: 'POST', json: { health_id: healthId } });
    expect(found.body).toMatchObject({ status: 'found', health_id: healthId, patient: { first_name: 'Grace' } });

    // No consent: a FHIR read answers as for a resource that does not exist (404 OperationOutcome, nothing
    // revealed), a search finds nothing, a count counts nothing.
    const refused = await fhir(clinic, `/Observation/${observationId}`);
    expect(refused.status).toBe(404);
    expect(refused.body.resourceType).toBe('OperationOutcome');
    expect(refused.body.issue[0].details.coding[0].code).toBe('NOT_FOUND');
    expect((await fhir(clinic, `/Observation/${observationId}-absent`)).body.issue[0].diagnostics).toBe(refused.body.issue[0].diagnostics.replace(observationId, `${observationId}-absent`));
    expect((await fhir(clinic, `/Observation?patient=${patientId}`)).body.total).toBe(0);
    expect((await fhir(clinic, `/Observation?_summary=count`)).body.total).toBe(0);
    const profile = await connect(clinic, `/patient/search?health_id=${healthId}`);
    expect(profile.body.error_code).toBe('CONSENT_REQUIRED');
    expect((await connect(clinic, `/patient/${healthId}/consent`)).body).toMatchObject({ status: 'none', consent_id: null });

    // The patient, at the clinic, grants a full-record consent.
    const granted = await connect(clinic, `/patient/${healthId}/consent/grant`, {
      method: 'POST',
      json: { consent_type: 'full_record', expires_at: inAYear(), purpose: 'continuity of care', external_reference: 'MRN-9' },
    });
    expect(granted.status).toBe(201);
    expect(granted.body).toMatchObject({ health_id: healthId, organization_id: 'org-clinic', status: 'active', consent_type: 'full_record' });
    expect(granted.body.scopes).toContain('labs:read');
    const status = await connect(clinic, `/patient/${healthId}/consent`);
    expect(status.body).toMatchObject({ status: 'active', consent_id: granted.body.consent_id });

    expect((await fhir(clinic, `/Observation/${observationId}`)).status).toBe(200);
    expect((await fhir(clinic, `/Observation?patient=${patientId}`)).body.total).toBe(1);
    expect((await connect(clinic, `/patient/search?health_id=${healthId}`)).status).toBe(200);

    // Revoked: refused again, at once.
    const revoked = await connect(clinic, `/patient/${healthId}/consent/revoke`, { method: 'POST', json: {} });
    expect(revoked.body.status).toBe('revoked');
    expect((await fhir(clinic, `/Observation/${observationId}`)).status).toBe(404);
    expect((await fhir(clinic, `/Observation?patient=${patientId}`)).body.total).toBe(0);
    expect((await connect(clinic, `/patient/${healthId}/consent`)).body.status).toBe('revoked');
    expect((await connect(clinic, `/patient/${healthId}/consent/revoke`, { method: 'POST', json: {} })).status).toBe(404);
  });

  it('a consent covers the classes of its type only', async () => {
    await connect(clinic, `/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inAYear() } });
    expect((await fhir(clinic, `/Observation/${observationId}`)).status).toBe(404);
    await connect(clinic, `/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', scopes: ['labs:read'], expires_at: inAYear() } });
    expect((await fhir(clinic, `/Observation/${observationId}`)).status).toBe(200);
    expect((await fhir(clinic, `/Patient/${patientId}`)).status).toBe(404);
    await connect(clinic, `/patient/${healthId}/consent/revoke`, { method: 'POST', json: {} });
  });

  it('data that concerns two patients needs the consent of both, through a read, a search and a count', async () => {
    const first = await resolveNew(hospital, 'Ada');
    const second = await resolveNew(hospital, 'Bea');
    const idOf = async (hid: string) => (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${hid}`)).body.entry[0].resource.id as string;
    const [a, b] = [await idOf(first), await idOf(second)];
    // An observation of one patient performed by another (both in its Patient compartment).
    const shared = await fhir(hospital, '/Observation', {
      method: 'POST',
      json: { resourceType: 'Observation', status: 'final', code: { text: 'Shared' }, subject: { reference: `Patient/${a}` }, performer: [{ reference: `Patient/${b}` }] },
    });
    expect(shared.status).toBe(201);
    const seen = async () => {
      const read = await fhir(clinic, `/Observation/${shared.body.id}`);
      const search = await fhir(clinic, `/Observation?subject=Patient/${a}&code:text=Shared`);
      const count = await fhir(clinic, `/Observation?subject=Patient/${a}&code:text=Shared&_summary=count`);
      const matches = (search.body.entry ?? []).filter((e: any) => e.search?.mode === 'match');
      return { read: read.status, found: matches.length, total: count.body.total };
    };
    await connect(clinic, `/patient/${first}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at: inAYear() } });
    expect(await seen()).toEqual({ read: 404, found: 0, total: 0 });
    await connect(clinic, `/patient/${second}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at: inAYear() } });
    expect(await seen()).toEqual({ read: 200, found: 1, total: 1 });
    await connect(clinic, `/patient/${first}/consent/revoke`, { method: 'POST', json: {} });
    expect(await seen()).toEqual({ read: 404, found: 0, total: 0 });
  });

  it('an organisation reads what it wrote itself, and Consents cannot be written through FHIR', async () => {
    expect((await fhir(hospital, `/Observation/${observationId}`)).status).toBe(200);
    const forged = await fhir(clinic, '/Consent', { method: 'POST', json: { resourceType: 'Consent', status: 'active' } });
    expect(forged.status).toBe(403);
  });

  it('an expired consent grants nothing, with no action from anyone', async () => {
    const granted = await connect(clinic, `/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'diagnostics', expires_at: inAYear() } });
    expect(granted.status).toBe(201);
    expect((await fhir(clinic, `/Observation/${observationId}`)).status).toBe(200);
    await backdateConsent(pont, granted.body.consent_id, 2 * 365 * 86_400_000); // two years pass
    expect((await fhir(clinic, `/Observation/${observationId}`)).status).toBe(404);
    expect((await connect(clinic, `/patient/${healthId}/consent`)).body.status).toBe('expired');
  });
});

describe('bad input', () => {
  it('answers in the Error shape: unknown 404, bad checksum 422, past or unparseable expiry 422, unknown type and wider scopes 422', async () => {
    const grant = (hid: string, json: unknown) => connect(clinic, `/patient/${hid}/consent/grant`, { method: 'POST', json });
    const valid = { consent_type: 'full_record', expires_at: inAYear() };
    const unknown = await grant(`CM0000000000${checkDigits('CM0000000000')}`, valid);
    expect([unknown.status, unknown.body.error_code]).toEqual([404, 'HEALTH_ID_NOT_REGISTERED']);
    expect((await grant('CM482930174620', valid)).status).toBe(422);
    for (const bad of [
      { ...valid, expires_at: '2001-01-01T00:00:00Z' },
      { ...valid, expires_at: 'next tuesday' },
      { ...valid, consent_type: 'everything' },
      { consent_type: 'prescriptions', scopes: ['labs:read'], expires_at: inAYear() },
      { ...valid, purpose: '   ' },
      { ...valid, organization_id: 'org-other' },
    ]) {
      const res = await grant(healthId, bad);
      expect(res.status, JSON.stringify(bad)).toBe(422);
      expect(res.body).toMatchObject({ status: 'error', error_code: 'VALIDATION_FAILED' });
    }
  });
});

describe("requests, and the patient's own voice", () => {
  let patientToken: string;

  const mobile = (path: string, init: RequestInit & { json?: unknown } = {}, token = patientToken) =>
    pont.json(`/api/v1/mobile${path}`, { ...init, headers: { authorization: `Bearer ${token}`, ...(init.headers as Record<string, string>) } });

  it('pairs the app with a single-use code; a wrong or used code is 401 without saying whether the Health ID exists', async () => {
    const code = await connect(hospital, `/patient/${healthId}/mobile/pairing-code`, { method: 'POST' });
    expect(code.status).toBe(201);
    const wrong = await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: healthId, code: 'AAAA-AAAA' } });
    const nobody = await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: `CM0000000000${checkDigits('CM0000000000')}`, code: code.body.code } });
    expect(wrong.status).toBe(401);
    expect(nobody.status).toBe(401);
    expect(nobody.body.message).toBe(wrong.body.message);
    const token = await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: healthId, code: code.body.code } });
    expect(token.status).toBe(200);
    expect(token.body).toMatchObject({ token_type: 'Bearer' });
    expect(token.body.access_token).toMatch(/^pat_/);
    patientToken = token.body.access_token;
    expect((await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: healthId, code: code.body.code } })).status).toBe(401);
  });

  it('answers 100 concurrent exchanges of one pairing code with exactly one token, the rest 4xx (never a 500), round after round', async () => {
    const patient = await resolveNew(hospital, 'Rushed');
    const { limits } = pont.services.access;
    const realNow = limits.now;
    let skipped = 60_000;
    limits.now = () => realNow() + skipped;
    try {
      for (let round = 0; round < 3; round++, skipped += 60_000) {
        // each round in a rate-limit window of its own, later than the real one
        const code = await connect(hospital, `/patient/${patient}/mobile/pairing-code`, { method: 'POST' });
        expect(code.status).toBe(201);
        // Wrong codes for the same Health ID race with the right one (they count against the live code).
        const bodies = Array.from({ length: 100 }, (_, i) => ({ health_id: patient, code: i % 10 === 5 ? 'ZZZZ-ZZZZ' : code.body.code }));
        const answers = await Promise.all(bodies.map((json) => pont.json('/api/v1/mobile/auth/token', { method: 'POST', json })));
        const statuses = answers.map((a) => a.status);
        expect(statuses.filter((s) => s >= 500), JSON.stringify(answers.find((a) => a.status >= 500)?.body)).toEqual([]);
        expect(statuses.filter((s) => s === 200).length, statuses.join(' ')).toBe(1);
        expect(statuses.every((s) => s === 200 || (s >= 400 && s < 500))).toBe(true);
      }
    } finally {
      // The later tests go on in a window none of these failures counted in.
      limits.now = () => realNow() + skipped;
    }
  });

  it('runs a transaction that loses to a concurrent one again, and answers 503 with Retry-After (never 500) when it keeps losing', async () => {
    const patient = await resolveNew(hospital, 'Contended');
    const db = pont.services.db;
    // The database itself makes every token insert fail as a serialization failure would (SQLSTATE 40001), the first
    // `fails` times; a sequence (never rolled back) counts the runs.
    const contend = async (fails: number) => {
      await db.exec(`DROP TRIGGER IF EXISTS contend ON mobile_tokens; DROP SEQUENCE IF EXISTS contend_runs;
        CREATE SEQUENCE contend_runs;
        CREATE OR REPLACE FUNCTION contend() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF nextval('contend_runs') <= ${fails} THEN RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'; END IF; RETURN NEW; END $$;
        CREATE TRIGGER contend BEFORE INSERT ON mobile_tokens FOR EACH ROW EXECUTE FUNCTION contend();`);
    };
    const runs = async () => Number((await db.query<{ n: string }>('SELECT last_value AS n FROM contend_runs')).rows[0]!.n);
    const exchange = (code: string) => pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: patient, code } });
    try {
      const code = (await connect(hospital, `/patient/${patient}/mobile/pairing-code`, { method: 'POST' })).body.code;
      await contend(1000);
      const lost = await exchange(code);
      expect(lost.status, JSON.stringify(lost.body)).toBe(503);
      expect(lost.headers.get('retry-after')).toBe('1');
      expect(lost.body).toMatchObject({ status: 'error', error_code: 'SERVICE_UNAVAILABLE' });
      expect(await runs()).toBe(TRANSACTION_RUNS);
      // Losing twice, then winning: the caller sees only the token; the code was not used up by the lost runs.
      await contend(2);
      const won = await exchange(code);
      expect(won.status, JSON.stringify(won.body)).toBe(200);
      expect(await runs()).toBe(3);
    } finally {
      await db.exec('DROP TRIGGER IF EXISTS contend ON mobile_tokens; DROP FUNCTION IF EXISTS contend(); DROP SEQUENCE IF EXISTS contend_runs;');
    }
  });

  it('a code dies after five wrong tries', async () => {
    const code = await connect(hospital, `/patient/${healthId}/mobile/pairing-code`, { method: 'POST' });
    for (let i = 0; i < 5; i++) await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: healthId, code: `ZZZZ-ZZZ${i}` } });
    expect((await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: healthId, code: code.body.code } })).status).toBe(401);
  });

  it('a request is pending until the patient approves it in the app; then the organisation reads', async () => {
    const requested = await pont.json('/api/v1/sdk/consents/request', {
      method: 'POST',
      headers: clinic.headers,
      json: { health_id: healthId, purpose: 'second opinion', requested_scopes: ['labs:read'] },
    });
    expect(requested.status).toBe(201);
    expect(requested.body).toMatchObject({ health_id: healthId, status: 'pending', requested_scopes: ['labs:read'] });
    expect((await connect(clinic, `/patient/${healthId}/consent`)).body.status).toBe('pending');
    expect((await fhir(clinic, `/Observation/${observationId}`)).status).toBe(404);

    const mine = await mobile('/consents');
    expect(mine.status).toBe(200);
    const pending = mine.body.items.find((c: any) => c.consent_id === requested.body.consent_request_id);
    expect(pending).toMatchObject({ organization_id: 'org-clinic', status: 'pending', purpose: 'second opinion', scopes: ['labs:read'] });

    const approved = await mobile(`/consent-requests/${requested.body.consent_request_id}/approve`, { method: 'POST' });
    expect(approved.status).toBe(200);
    expect(approved.body.status).toBe('active');
    expect((await mobile(`/consent-requests/${requested.body.consent_request_id}/approve`, { method: 'POST' })).status).toBe(409);
    expect((await connect(clinic, `/patient/${healthId}/consent`)).body.status).toBe('active');
    expect((await fhir(clinic, `/Observation/${observationId}`)).status).toBe(200);

    // The patient revokes it from the app: refused again.
    expect((await mobile(`/consents/${requested.body.consent_request_id}/revoke`, { method: 'POST' })).body.status).toBe('revoked');
    expect((await fhir(clinic, `/Observation/${observationId}`)).status).toBe(404);
  });

  it('a denied request grants nothing', async () => {
    const requested = await pont.json('/api/v1/sdk/consents/request', {
      method: 'POST',
      headers: clinic.headers,
      json: { health_id: healthId, purpose: 'marketing', requested_scopes: ['prescriptions:read'] },
    });
    expect((await mobile(`/consent-requests/${requested.body.consent_request_id}/deny`, { method: 'POST' })).body.status).toBe('denied');
    expect((await connect(clinic, `/patient/${healthId}/consent`)).body.status).not.toBe('active');
  });

  it("a patient token reaches only the mobile routes and only the patient's own consents", async () => {
    const other = await resolveNew(hospital, 'Other');
    const req = await pont.json('/api/v1/sdk/consents/request', { method: 'POST', headers: clinic.headers, json: { health_id: other, purpose: 'x', requested_scopes: ['labs:read'] } });
    expect((await mobile(`/consent-requests/${req.body.consent_request_id}/approve`, { method: 'POST' })).status).toBe(404);
    const { body: openapi } = await pont.json('/api/openapi.json');
    for (const [path, ops] of Object.entries<any>(openapi.paths)) {
      for (const method of Object.keys(ops)) {
        if (path.startsWith('/api/v1/mobile') || (ops[method].security ?? []).length === 0) continue;
        const url = path.replace(/\{[^}]+\}/g, path.includes('health_id') ? healthId : 'x');
        const res = await pont.fetch(url, { method: method.toUpperCase(), headers: { authorization: `Bearer ${patientToken}`, 'content-type': 'application/json' }, body: method === 'get' || method === 'delete' ? undefined : '{}' });
        expect([401, 403], `${method} ${path}`).toContain(res.status);
      }
    }
  });

  it('shows the patient who read which kind of their data, when and why', async () => {
    const log = await mobile('/access-log?limit=200');
    expect(log.status).toBe(200);
    const clinicReads = log.body.items.filter((e: any) => e.actor.organization_id === 'org-clinic' && e.action === 'read');
    expect(clinicReads.some((e: any) => e.data_types.includes('Observation') && e.outcome === 'allowed')).toBe(true);
    expect(clinicReads.some((e: any) => e.outcome === 'refused')).toBe(true);
  });
});

describe('break-glass', () => {
  let emergency: TestClient;
  beforeAll(async () => {
    emergency = await createTestClient(pont, ['fhir:read', 'emergency:access', 'health_id:verify'], { organizationId: 'org-emergency' });
  });

  it('reads one patient without consent with a stated reason, audited BTG and shown to the patient', async () => {
    expect((await fhir(emergency, `/Observation/${observationId}`)).status).toBe(404);
    const reason = { 'x-emergency-reason': 'unconscious patient in the emergency room' };
    const read = await fhir(emergency, `/Observation/${observationId}`, { headers: reason });
    expect(read.status).toBe(200);
    expect((await fhir(emergency, `/Observation?patient=${patientId}`, { headers: reason })).body.total).toBe(1);
    // A population search names no single patient: refused under break-glass.
    expect((await fhir(emergency, '/Observation', { headers: reason })).status).toBe(403);
    expect((await fhir(emergency, `/Observation/${observationId}`, { headers: { 'x-emergency-reason': '  ' } })).status).toBe(400);
    expect((await fhir(clinic, `/Observation/${observationId}`, { headers: reason })).status).toBe(403); // no emergency:access scope

    const code = await connect(hospital, `/patient/${healthId}/mobile/pairing-code`, { method: 'POST' });
    const token = (await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: healthId, code: code.body.code } })).body.access_token;
    const log = await pont.json('/api/v1/mobile/access-log?limit=200', { headers: { authorization: `Bearer ${token}` } });
    const btg = log.body.items.filter((e: any) => e.actor.organization_id === 'org-emergency' && e.break_glass);
    expect(btg.length).toBeGreaterThan(1);
    expect(btg[0].purpose).toBe('unconscious patient in the emergency room');
  });
});

describe('break-glass through Connect and the SDK', () => {
  it('records of every type and the summary open one window and audit it once, though their reads run at once', async () => {
    const glass = await createTestClient(pont, ['health_id:verify', 'patients:read', 'labs:read', 'prescriptions:read', 'patient:diagnostics:read', 'emergency:access'], { organizationId: 'org-glass' });
    const reason = { 'x-emergency-reason': 'found unconscious' };
    const records = await connect(glass, `/patient/${healthId}/records?type=all`);
    expect(records.status).toBe(403); // no consent, no reason: refused
    const glassed = await connect(glass, `/patient/${healthId}/records?type=all`, { headers: reason });
    expect(glassed.status, JSON.stringify(glassed.body)).toBe(200);
    expect(glassed.body.records.lab_results.map((r: any) => r.id)).toEqual([observationId]);
    const summary = await pont.json(`/api/v1/sdk/patients/${healthId}/summary`, { headers: { ...glass.headers, ...reason } });
    expect(summary.status).toBe(200);
    expect(summary.body.recent_labs.map((r: any) => r.id)).toEqual([observationId]);
    const { rows: windows } = await pont.services.db.query<{ n: number }>("SELECT count(*)::int AS n FROM emergency_access WHERE organization_id = 'org-glass' AND patient_id = $1", [patientId]);
    expect(windows[0]!.n).toBe(1);
    const { rows: opened } = await pont.services.db.query<{ n: number }>("SELECT count(*)::int AS n FROM audit_log WHERE organization_id = 'org-glass' AND operation = 'breakGlass'");
    expect(opened[0]!.n).toBe(1);
  });
});

describe('webhooks follow consent', () => {
  it('patient events reach a consented organisation; consent.revoked reaches the one that lost access, then nothing more', async () => {
    const { startReceiver, pendingDeliveries } = await import('./webhooks-support');
    const receiver = await startReceiver();
    const sub = await connect(clinic, '/webhooks/subscriptions', {
      method: 'POST',
      json: { callback_url: receiver.url, subscribed_events: ['encounter.created', 'consent.granted', 'consent.revoked'], description: 'clinic' },
    });
    receiver.secret = sub.body.webhook_secret;
    const encounter = () =>
      fhir(hospital, '/Encounter', { method: 'POST', json: { resourceType: 'Encounter', status: 'planned', class: { code: 'AMB' }, subject: { reference: `Patient/${patientId}` } } as Resource });
    expect((await encounter()).status).toBe(201); // no consent yet: not for the clinic
    await connect(clinic, `/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'summary', expires_at: inAYear() } });
    expect((await encounter()).status).toBe(201);
    // Delivered before the revocation: a delivery still pending when consent goes is cancelled (by design).
    await receiver.waitFor(2);
    await connect(clinic, `/patient/${healthId}/consent/revoke`, { method: 'POST', json: {} });
    expect((await encounter()).status).toBe(201);
    await receiver.waitFor(3);
    await eventually(async () => expect(await pendingDeliveries(pont.services.db, sub.body.id)).toBe(0));
    expect(receiver.received.map((r) => r.body.type)).toEqual(['consent.granted', 'encounter.created', 'consent.revoked']);
    expect(receiver.received.every((r) => r.signatureValid)).toBe(true);
    await receiver.close();
  });

  it('a transaction about several patients notifies an organisation only about the patients that consented to it', async () => {
    const { startReceiver, pendingDeliveries } = await import('./webhooks-support');
    const receiver = await startReceiver();
    const sub = await connect(clinic, '/webhooks/subscriptions', { method: 'POST', json: { callback_url: receiver.url, subscribed_events: ['encounter.created'] } });
    receiver.secret = sub.body.webhook_secret;
    const patientOf = async (first: string) => {
      const hid = await resolveNew(hospital, first);
      return { hid, id: (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${hid}`)).body.entry[0].resource.id as string };
    };
    const [consenting, other, alsoConsenting] = [await patientOf('Odile'), await patientOf('Prisca'), await patientOf('Quenta')];
    for (const p of [consenting, alsoConsenting])
      expect((await connect(clinic, `/patient/${p.hid}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at: inAYear() } })).status).toBe(201);
    const entry = (p: { id: string }) => ({
      resource: { resourceType: 'Encounter', status: 'planned', class: { code: 'AMB' }, subject: { reference: `Patient/${p.id}` } },
      request: { method: 'POST', url: 'Encounter' },
    });
    const bundle = await fhir(hospital, '', { method: 'POST', json: { resourceType: 'Bundle', type: 'transaction', entry: [entry(other), entry(consenting), entry(other), entry(alsoConsenting)] } });
    expect(bundle.status).toBe(200);
    await receiver.waitFor(2);
    await eventually(async () => expect(await pendingDeliveries(pont.services.db, sub.body.id)).toBe(0));
    const about = receiver.received.map((r) => JSON.stringify(r.body.data));
    expect(about).toHaveLength(2);
    expect(about.some((d) => d.includes(consenting.hid) || d.includes(consenting.id))).toBe(true);
    expect(about.some((d) => d.includes(alsoConsenting.hid) || d.includes(alsoConsenting.id))).toBe(true);
    expect(about.every((d) => !d.includes(other.hid) && !d.includes(other.id))).toBe(true);
    // Decided at fan-out, not only at delivery (which checks again, for revocations in between).
    const queued = await pont.services.db.query('SELECT id FROM webhook_deliveries WHERE subscription_id = $1', [sub.body.id]);
    expect(queued.rows).toHaveLength(2);
    await receiver.close();
  });
});
