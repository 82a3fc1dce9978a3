import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resource } from '@medplum/fhirtypes';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { startReceiver, type Receiver } from './webhooks-support';

/**
 * A second security review of the access policy (src/policy) as an attacker with ordinary client credentials,
 * after the first findings were closed. Each `it` names a hole the review found (each failed against the policy
 * as it then was) and asserts the behaviour that closes it.
 *
 * Cast: org A registers patient P (and P2) and writes about them; org B holds P's full-record consent;
 * org C has no consent (its own patient PC); each probe that reads the audit trail uses its own organisation.
 */
let pont: TestServer;
let A: TestClient;
let B: TestClient;
let C: TestClient;
let operator: TestClient;
let P: string;
let P2: string;
let healthId: string;
let PC: string;
let conditionId: string;
let encounterId: string;

const SNOMED = 'http://snomed.info/sct';
const LAB = [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] }];

type Init = RequestInit & { json?: unknown };
const call = (client: TestClient, path: string, init: Init = {}) =>
  pont.json(path, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
const fhir = (client: TestClient, path: string, init: Init = {}) => call(client, `/api/fhir/R4${path}`, init);
const connect = (client: TestClient, path: string, init: Init = {}) => call(client, `/api/v1/connect${path}`, init);
const inAYear = () => new Date(Date.now() + 365 * 86_400_000).toISOString();
const diagnostics = (body: any) => body?.issue?.[0]?.diagnostics as string | undefined;

async function create<T extends Resource>(client: TestClient, resource: T): Promise<T & { id: string }> {
  const res = await fhir(client, `/${resource.resourceType}`, { method: 'POST', json: resource });
  if (res.status !== 201) throw new Error(`${resource.resourceType}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}
const condition = (patient: string, code = '44054006', extra: Record<string, unknown> = {}) =>
  ({ resourceType: 'Condition', code: { coding: [{ system: SNOMED, code }] }, subject: { reference: `Patient/${patient}` }, ...extra }) as Resource;

beforeAll(async () => {
  pont = await startTestServer({ PONT_WEBHOOK_RETRY_DELAYS: '1s,1s,1s,1s,1s,1s' });
  const scopes = ['fhir:read', 'fhir:write', 'consents:write', 'patients:read', 'labs:read', 'documents:read', 'webhooks:manage'] as const;
  A = await createTestClient(pont, [...scopes], { organizationId: 'org-a' });
  B = await createTestClient(pont, [...scopes], { organizationId: 'org-b' });
  C = await createTestClient(pont, ['fhir:read', 'fhir:write', 'patients:read', 'labs:read', 'documents:read', 'webhooks:manage'], { organizationId: 'org-c' });
  operator = await createTestClient(pont, ['fhir:read', 'fhir:write', 'audit:read'], { organizationId: 'org-operator', allPatients: true });

  const patient = await create(A, { resourceType: 'Patient', name: [{ family: 'Attack', given: ['Pat'] }], gender: 'female', birthDate: '1981-02-03' } as Resource);
  P = patient.id;
  healthId = (patient as any).identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
  P2 = (await create(A, { resourceType: 'Patient', name: [{ family: 'Attack', given: ['Two'] }], gender: 'male', birthDate: '1975-07-08' } as Resource)).id;
  conditionId = (await create(A, condition(P))).id;
  encounterId = (await create(A, { resourceType: 'Encounter', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: `Patient/${P}` } } as Resource)).id;
  const granted = await connect(B, `/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at: inAYear() } });
  expect(granted.status).toBe(201);
  PC = (await create(C, { resourceType: 'Patient', name: [{ family: 'Own', given: ['Cee'] }], birthDate: '1990-01-01' } as Resource)).id;
});
afterAll(async () => {
  await pont?.close();
});

describe('patient data tied to its patient only through another resource', () => {
  it('HOLE (closed): a DocumentReference of P that names P only through context.encounter is readable by C (no consent)', async () => {
    const doc = await create(A, {
      resourceType: 'DocumentReference',
      status: 'current',
      context: { encounter: [{ reference: `Encounter/${encounterId}` }] },
      content: [{ attachment: { contentType: 'text/plain', data: Buffer.from('HIV positive, started ART').toString('base64') } }],
    } as Resource);
    const res = await fhir(C, `/DocumentReference/${doc.id}`);
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(404);
    expect(JSON.stringify((await fhir(C, '/DocumentReference?_count=1000')).body)).not.toContain(doc.id);
  });

  it('HOLE (closed): an Observation of P that names P only through encounter/specimen is readable by C (no consent)', async () => {
    const obs = await create(A, {
      resourceType: 'Observation',
      status: 'final',
      category: LAB,
      code: { text: 'HIV-1 viral load' },
      encounter: { reference: `Encounter/${encounterId}` },
      valueQuantity: { value: 120000, unit: 'copies/mL' },
    } as Resource);
    const res = await fhir(C, `/Observation/${obs.id}`);
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(404);
  });

  it('HOLE (closed): a Provenance of A\'s Condition (target: Condition, no Patient reference) is readable by C', async () => {
    const prov = await create(A, {
      resourceType: 'Provenance',
      target: [{ reference: `Condition/${conditionId}` }],
      recorded: '2024-01-01T00:00:00Z',
      reason: [{ text: 'diagnosis confirmed: HIV' }],
      agent: [{ who: { display: 'Dr A' } }],
    } as Resource);
    expect((await fhir(C, `/Provenance/${prov.id}`)).status).toBe(404);
  });
});

describe('existence oracles on writes', () => {
  const invalid = (id: string) => ({ resourceType: 'Condition', id, subject: { reference: `Patient/${PC}` }, clinicalStatus: 'not-a-codeable-concept' });

  it('HOLE (closed): PUT with an invalid body answers 404 for A\'s hidden Condition but 400 for an id that does not exist (side-effect-free oracle)', async () => {
    const absent = randomUUID();
    const hidden = await fhir(C, `/Condition/${conditionId}`, { method: 'PUT', json: invalid(conditionId) });
    const none = await fhir(C, `/Condition/${absent}`, { method: 'PUT', json: invalid(absent) });
    expect(`${hidden.status}`).toBe(`${none.status}`);
  });

  it('HOLE (closed): a reference to A\'s hidden Condition is accepted (201) while one to a missing id is 400 "does not exist" (existence oracle)', async () => {
    const list = (target: string) => ({ resourceType: 'List', status: 'current', mode: 'working', entry: [{ item: { reference: `Condition/${target}` } }] });
    const hidden = await fhir(C, '/List', { method: 'POST', json: list(conditionId) });
    const none = await fhir(C, '/List', { method: 'POST', json: list(randomUUID()) });
    expect(none.status).toBe(400);
    expect(diagnostics(none.body)).toContain('does not exist');
    expect(hidden.status, 'a reference to a resource the caller may not see must answer like a missing one').toBe(none.status);
  });

  it("HOLE (closed): C cannot pin A's Condition with a reference to it, so A (owner) still deletes its own Condition", async () => {
    const target = (await create(A, condition(P, '73211009'))).id;
    const pin = await fhir(C, '/List', { method: 'POST', json: { resourceType: 'List', status: 'current', mode: 'working', entry: [{ item: { reference: `Condition/${target}` } }] } });
    expect(pin.status, 'a reference to a hidden resource is a reference to nothing').toBe(400);
    const del = await fhir(A, `/Condition/${target}`, { method: 'DELETE' });
    expect(del.status, diagnostics(del.body)).toBe(204);
  });

  it("HOLE (closed): C, without any relationship to P, writes a Patient that links to P (Patient.link is not checked), which also pins P", async () => {
    const res = await fhir(C, '/Patient', { method: 'POST', json: { resourceType: 'Patient', name: [{ family: 'Impostor' }], link: [{ other: { reference: `Patient/${P}` }, type: 'replaces' }] } });
    expect(res.status, 'writing a reference to P needs a relationship with P').toBe(403);
  });

  it("HOLE (closed): A's DELETE answers 409 naming B's Observation, which A may not see (hidden id and existence)", async () => {
    const target = (await create(A, condition(P, '38341003'))).id;
    const hiddenObs = await create(B, {
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'note by B' },
      subject: { reference: `Patient/${P}` },
      focus: [{ reference: `Condition/${target}` }],
    } as Resource);
    expect((await fhir(A, `/Observation/${hiddenObs.id}`)).status).toBe(404); // A may not see it
    const del = await fhir(A, `/Condition/${target}`, { method: 'DELETE' });
    expect(JSON.stringify(del.body)).not.toContain(hiddenObs.id);
  });
});

describe('the audit trail as an oracle', () => {
  it("HOLE (closed): a refused read is audited for operators only: the caller's own audit trail does not name the hidden resource's patient", async () => {
    const X = await createTestClient(pont, ['fhir:read', 'audit:read'], { organizationId: 'org-x' });
    expect((await fhir(X, `/Condition/${conditionId}`)).status).toBe(404);
    expect((await fhir(X, `/Condition/${randomUUID()}`)).status).toBe(404);
    const trail = await fhir(X, '/AuditEvent?_count=1000');
    expect(trail.status).toBe(200);
    // The 404 said nothing, and the caller's own audit trail does not say it either: refusals are the operators'.
    expect(JSON.stringify(trail.body)).not.toContain(P);
    const refusals = await fhir(operator, `/AuditEvent?altid=${X.client_id}&outcome=4&_count=100`);
    expect(refusals.body.entry?.length ?? 0, 'the refusal of the hidden Condition is audited all the same').toBeGreaterThanOrEqual(1);
  });
});

describe('a patient named by a reference Pont does not take as local', () => {
  let receiverB: Receiver;
  let receiverC: Receiver;
  beforeAll(async () => {
    receiverB = await startReceiver();
    receiverC = await startReceiver();
    for (const [client, receiver] of [[B, receiverB], [C, receiverC]] as const) {
      const sub = await connect(client, '/webhooks/subscriptions', { method: 'POST', json: { callback_url: receiver.url, subscribed_events: ['lab_result.released'] } });
      expect(sub.status, JSON.stringify(sub.body)).toBe(201);
      receiver.secret = sub.body.webhook_secret;
    }
  });
  afterAll(async () => {
    await receiverB?.close();
    await receiverC?.close();
  });

  const spoofed = () =>
    fhir(C, '/Observation', {
      method: 'POST',
      json: {
        resourceType: 'Observation',
        status: 'final',
        category: LAB,
        code: { text: 'Spoofed result' },
        subject: { reference: `http://elsewhere.example/fhir/Patient/${P}` },
        interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'HH' }] }],
        valueQuantity: { value: 99, unit: 'mmol/L' },
      },
    });
  let written: { status: number; body: any } | undefined;
  beforeAll(async () => {
    written = await spoofed();
  });

  it("HOLE (closed): C's lab result with subject 'http://elsewhere.example/fhir/Patient/<P>' is refused (422): no event, no Health ID learnt, nothing stored", async () => {
    expect(written!.status, JSON.stringify(written!.body).slice(0, 300)).toBe(422);
    const eventsOfC = await pont.services.db.query(`SELECT 1 FROM events WHERE meta->>'organization_id' = $1 AND type = 'lab_result.released'`, [C.organization_id]);
    expect(eventsOfC.rows).toHaveLength(0);
    expect(receiverC.received).toHaveLength(0);
  });

  it("HOLE (closed): nor does the write tell B (P's consent holder) of a lab result C made up", async () => {
    const deliveriesB = await connect(B, '/webhooks/deliveries?limit=100');
    expect(deliveriesB.status).toBe(200);
    const events = await pont.services.db.query<{ id: string }>(`SELECT id FROM events WHERE meta->>'organization_id' = $1`, [C.organization_id]);
    const ofC = new Set(events.rows.map((r) => String(r.id)));
    expect(deliveriesB.body.deliveries.filter((d: any) => ofC.has(String(d.event_id)))).toEqual([]);
  });
});

describe('patients named by identifier, bypassing the 422', () => {
  it('HOLE (closed): A\'s Condition whose subject is an MRN identifier (no type, not the Health ID system) is stored unplaced and readable by C', async () => {
    const res = await fhir(A, '/Condition', { method: 'POST', json: condition(P, '86406008', { subject: { identifier: { system: 'urn:oid:1.2.3.4.hospital-a.mrn', value: 'MRN-000123' } } }) });
    // README: a patient named only by identifier is 422 for a non-operator. If it is stored, C must not read it.
    if (res.status === 201) expect((await fhir(C, `/Condition/${res.body.id}`)).status).toBe(404);
    else expect(res.status).toBe(422);
  });

  it('HOLE (closed): C (no consent) writes a Condition naming P by Health ID when the Reference also carries a non-local reference (urn:oid) — accepted instead of 422', async () => {
    const res = await fhir(C, '/Condition', {
      method: 'POST',
      json: condition(P, '86406008', { subject: { reference: 'urn:oid:2.16.840.1.113883.3.1', identifier: { system: HEALTH_ID_SYSTEM, value: healthId } } }),
    });
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(422);
  });

  it('HOLE (closed): C (no consent) writes a Condition naming P by Health ID with the system spelled with a trailing slash — accepted instead of 422', async () => {
    const res = await fhir(C, '/Condition', { method: 'POST', json: condition(P, '86406008', { subject: { identifier: { system: `${HEALTH_ID_SYSTEM}/`, value: healthId } } }) });
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(422);
  });
});

describe('break-glass', () => {
  it('HOLE (closed): one batch request with X-Emergency-Reason opens break-glass windows on several patients (README: one patient per request)', async () => {
    const E = await createTestClient(pont, ['fhir:read', 'fhir:write', 'patients:read', 'emergency:access'], { organizationId: 'org-e' });
    const res = await fhir(E, '', {
      method: 'POST',
      headers: { 'X-Emergency-Reason': 'unconscious patient' },
      json: {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          { request: { method: 'GET', url: `Patient/${P}` } },
          { request: { method: 'GET', url: `Patient/${P2}` } },
        ],
      },
    });
    const statuses = (res.body.entry ?? []).map((e: any) => e.response?.status);
    expect(res.status === 403 || statuses.filter((s: string) => s?.startsWith('200')).length <= 1, JSON.stringify(statuses)).toBe(true);
  });
});
