import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resource } from '@medplum/fhirtypes';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { startReceiver, type Receiver } from './webhooks-support';

/**
 * One access policy (src/policy) governs every door. Each `describe` replays one security finding as an
 * attacker would, over HTTP against the real app, with the controls that show the door still opens for
 * those it should open for.
 *
 * Cast: org A registers patient P and writes about them (owner); org B holds P's consent; org C has none;
 * W holds only fhir:write; an operator (all patients) checks what is really stored.
 */
let pont: TestServer;
let A: TestClient;
let B: TestClient;
let C: TestClient;
let W: TestClient;
let operator: TestClient;
/** Every client of org C (its AuditEvents name one of them). */
const clientsOfC = new Set<string>();
/** P, registered by A. */
let P: string;
let healthId: string;
/** A patient C registered itself: C may write about them. */
let PC: string;
let conditionId: string;
let observationId: string;
let documentId: string;

const SNOMED = 'http://snomed.info/sct';
const LAB = [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] }];
const FACILITY_TAG = 'https://pont.health/fhir/CodeSystem/facility';

type Init = RequestInit & { json?: unknown };
const call = (client: TestClient, path: string, init: Init = {}) =>
  pont.json(path, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
const fhir = (client: TestClient, path: string, init: Init = {}) => call(client, `/api/fhir/R4${path}`, init);
const connect = (client: TestClient, path: string, init: Init = {}) => call(client, `/api/v1/connect${path}`, init);
const inAYear = () => new Date(Date.now() + 365 * 86_400_000).toISOString();

async function create<T extends Resource>(client: TestClient, resource: T): Promise<T & { id: string }> {
  const res = await fhir(client, `/${resource.resourceType}`, { method: 'POST', json: resource });
  if (res.status !== 201) throw new Error(`${resource.resourceType}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}
const condition = (patient: string, code = '44054006', extra: Record<string, unknown> = {}) =>
  ({ resourceType: 'Condition', code: { coding: [{ system: SNOMED, code }] }, subject: { reference: `Patient/${patient}` }, ...extra }) as Resource;
/** A Condition the validator refuses (clinicalStatus must be a CodeableConcept). */
const invalidCondition = (patient: string) => condition(patient, '1', { clinicalStatus: 'not-a-codeable-concept' });
const grant = (client: TestClient, consentType: string) =>
  connect(client, `/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: consentType, expires_at: inAYear() } });
const errorCode = (body: any) => body?.issue?.[0]?.details?.coding?.[0]?.code;
const diagnostics = (body: any) => body?.issue?.[0]?.diagnostics as string | undefined;
/** What the operator (who sees everything) finds stored. */
const stored = async (type: string, id: string) => (await fhir(operator, `/${type}/${id}`)).body;
/** The ids a search or history answers (it must answer 200 with a Bundle). */
async function idsFound(client: TestClient, query: string): Promise<string[]> {
  const res = await fhir(client, query);
  expect(res.status, query).toBe(200);
  expect(res.body.resourceType, query).toBe('Bundle');
  // Not the informational note an empty searchset of a consent-bound caller carries.
  return (res.body.entry ?? []).filter((e: any) => e.search?.mode !== 'outcome').map((e: any) => e.resource?.id ?? e.fullUrl?.split('/').slice(-1)[0]);
}
const countOf = async (client: TestClient, query: string) => (await fhir(client, `${query}${query.includes('?') ? '&' : '?'}_summary=count`)).body.total as number;

beforeAll(async () => {
  pont = await startTestServer({ PONT_WEBHOOK_RETRY_DELAYS: '1s,1s,1s,1s,1s,1s' });
  A = await createTestClient(pont, ['fhir:read', 'fhir:write', 'consents:write', 'patients:read', 'labs:read', 'documents:read'], { organizationId: 'org-a' });
  B = await createTestClient(pont, ['fhir:read', 'fhir:write', 'consents:write', 'patients:read', 'labs:read', 'documents:read'], { organizationId: 'org-b' });
  C = await createTestClient(pont, ['fhir:read', 'fhir:write', 'patients:read', 'labs:read', 'audit:read'], { organizationId: 'org-c' });
  clientsOfC.add(C.client_id);
  W = await createTestClient(pont, ['fhir:write'], { organizationId: 'org-w' });
  operator = await createTestClient(pont, ['fhir:read', 'fhir:write', 'audit:read'], { organizationId: 'org-operator', allPatients: true });

  const patient = await create(A, { resourceType: 'Patient', name: [{ family: 'Doors', given: ['Pat'] }], gender: 'female', birthDate: '1980-05-05' } as Resource);
  P = patient.id;
  healthId = (patient as any).identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
  conditionId = (await create(A, condition(P))).id;
  observationId = (
    await create(A, { resourceType: 'Observation', status: 'final', category: LAB, code: { text: 'Hemoglobin' }, subject: { reference: `Patient/${P}` }, valueQuantity: { value: 12, unit: 'g/dL' } } as Resource)
  ).id;
  documentId = (
    await create(A, { resourceType: 'DocumentReference', status: 'current', subject: { reference: `Patient/${P}` }, content: [{ attachment: { contentType: 'text/plain', data: 'aGVsbG8=' } }] } as Resource)
  ).id;
  expect((await grant(B, 'full_record')).status).toBe(201);
  PC = (await create(C, { resourceType: 'Patient', name: [{ family: 'Own', given: ['Cee'] }], birthDate: '1990-01-01' } as Resource)).id;
});
afterAll(async () => {
  await pont?.close();
});

describe('finding 1: conditional create never reads across organisations', () => {
  it('C (no consent): If-None-Exist naming A\'s Condition matches nothing; C\'s own Condition is created', async () => {
    const res = await fhir(C, '/Condition', { method: 'POST', headers: { 'If-None-Exist': `_id=${conditionId}` }, json: condition(PC) });
    expect(res.status).toBe(201);
    expect(res.body.id).not.toBe(conditionId);
    expect(res.body.subject.reference).toBe(`Patient/${PC}`);
  });

  it('W (fhir:write only, no read scope): a conditional create is refused 403', async () => {
    const res = await fhir(W, '/Condition', { method: 'POST', headers: { 'If-None-Exist': `_id=${conditionId}` }, json: condition(P) });
    expect(res.status).toBe(403);
    expect(JSON.stringify(res.body)).not.toContain('44054006');
  });

  it('a transaction entry with request.ifNoneExist naming A\'s Condition creates C\'s own, and W\'s is refused', async () => {
    const bundle = (patient: string) => ({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [{ resource: condition(patient), request: { method: 'POST', url: 'Condition', ifNoneExist: `_id=${conditionId}` } }],
    });
    const res = await fhir(C, '', { method: 'POST', json: bundle(PC) });
    expect(res.status).toBe(200);
    const entry = res.body.entry[0];
    expect(entry.response.status).toMatch(/^201/);
    expect(entry.response.location).not.toContain(conditionId);
    expect(entry.resource?.id).not.toBe(conditionId);
    expect((await fhir(W, '', { method: 'POST', json: bundle(P) })).status).toBe(403);
  });

  it('the oracle: an invalid body answers the same whether the criteria name A\'s hidden Condition or nothing', async () => {
    const hidden = await fhir(C, '/Condition', { method: 'POST', headers: { 'If-None-Exist': `_id=${conditionId}` }, json: invalidCondition(PC) });
    const none = await fhir(C, '/Condition', { method: 'POST', headers: { 'If-None-Exist': `_id=${randomUUID()}` }, json: invalidCondition(PC) });
    // No match for C either way: the body is validated and refused (400), as for criteria that match nothing.
    expect(none.status).toBe(400);
    expect(hidden.status).toBe(none.status);
    expect(diagnostics(hidden.body)).toBe(diagnostics(none.body));
    expect(JSON.stringify(hidden.body)).not.toContain(conditionId);
  });

  it('control: B (consent) conditional-creating with criteria matching A\'s Condition gets it back (200)', async () => {
    const res = await fhir(B, '/Condition', { method: 'POST', headers: { 'If-None-Exist': `_id=${conditionId}` }, json: condition(P) });
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(conditionId);
  });
});

describe('finding 2: only the owner updates or deletes; creating about a patient needs a relationship', () => {
  let before: any;
  beforeAll(async () => {
    before = await stored('Condition', conditionId);
  });
  const unchanged = async () => {
    const now = await fhir(A, `/Condition/${conditionId}`);
    expect(now.status).toBe(200);
    expect(now.body).toEqual(before);
  };
  const edited = () => ({ ...before, note: [{ text: 'tampered' }] });

  it('C: PUT of A\'s Condition is 404 and changes nothing', async () => {
    const res = await fhir(C, `/Condition/${conditionId}`, { method: 'PUT', json: edited() });
    expect(res.status).toBe(404);
    await unchanged();
  });

  it('C: DELETE of A\'s Condition is 404 and A still reads it', async () => {
    expect((await fhir(C, `/Condition/${conditionId}`, { method: 'DELETE' })).status).toBe(404);
    await unchanged();
  });

  it('C: PUT of P\'s demographics is 404 and changes nothing', async () => {
    const patient = await stored('Patient', P);
    const res = await fhir(C, `/Patient/${P}`, { method: 'PUT', json: { ...patient, name: [{ family: 'Hijacked' }] } });
    expect(res.status).toBe(404);
    expect(await stored('Patient', P)).toEqual(patient);
  });

  it('C: conditional update PUT Condition?_id=<A\'s id> does not change A\'s Condition', async () => {
    // Without an id: the criteria match nothing C may see, so C's own new Condition is created.
    const own = await fhir(C, `/Condition?_id=${conditionId}`, { method: 'PUT', json: condition(PC, '38341003') });
    expect(own.status).toBe(201);
    expect(own.body.id).not.toBe(conditionId);
    // With A's id in the body: an update of what C does not own, answered as if it did not exist.
    const aimed = await fhir(C, `/Condition?_id=${conditionId}`, { method: 'PUT', json: edited() });
    expect(aimed.status).toBe(404);
    await unchanged();
  });

  it('C: a transaction entry PUT or DELETE of A\'s Condition fails the whole transaction (404), nothing committed', async () => {
    const mine = `/Condition?subject=Patient/${PC}`;
    const count = await countOf(C, mine);
    for (const entry of [
      { resource: edited(), request: { method: 'PUT', url: `Condition/${conditionId}` } },
      { request: { method: 'DELETE', url: `Condition/${conditionId}` } },
    ]) {
      const res = await fhir(C, '', {
        method: 'POST',
        json: { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: condition(PC, '195967001'), request: { method: 'POST', url: 'Condition' } }, entry] },
      });
      expect(res.status, entry.request.method).toBe(404);
      await unchanged();
      expect(await countOf(C, mine)).toBe(count);
    }
  });

  it('B (consent holder, not owner) may not update A\'s Condition (404)', async () => {
    expect((await fhir(B, `/Condition/${conditionId}`, { method: 'PUT', json: edited() })).status).toBe(404);
    await unchanged();
  });

  it('control: A (owner) updates (200) and deletes (204) its own Condition', async () => {
    const own = await create(A, condition(P, '73211009'));
    const updated = await fhir(A, `/Condition/${own.id}`, { method: 'PUT', json: { ...own, note: [{ text: 'reviewed' }] } });
    expect(updated.status).toBe(200);
    expect(updated.body.meta.versionId).toBe('2');
    expect((await fhir(A, `/Condition/${own.id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await fhir(A, `/Condition/${own.id}`)).status).toBe(410);
  });

  it('C creating a Condition about P is 403 CONSENT_REQUIRED (OperationOutcome) and stores nothing; B (consent) creates one (201)', async () => {
    const code = '840539006';
    const refused = await fhir(C, '/Condition', { method: 'POST', json: condition(P, code) });
    expect(refused.status).toBe(403);
    expect(refused.body.resourceType).toBe('OperationOutcome');
    expect(errorCode(refused.body)).toBe('CONSENT_REQUIRED');
    expect(await countOf(operator, `/Condition?subject=Patient/${P}&code=${SNOMED}|${code}`)).toBe(0);
    const allowed = await fhir(B, '/Condition', { method: 'POST', json: condition(P, code) });
    expect(allowed.status).toBe(201);
    expect(await countOf(operator, `/Condition?subject=Patient/${P}&code=${SNOMED}|${code}`)).toBe(1);
  });

  it('a transaction naming several patients is judged in one: one patient C may not write about fails it all (403), two of its own pass', async () => {
    const code = '38341003';
    const own1 = await create(C, { resourceType: 'Patient', name: [{ family: 'Own-one' }] } as Resource);
    const own2 = await create(C, { resourceType: 'Patient', name: [{ family: 'Own-two' }] } as Resource);
    const bundle = (patients: string[]) => ({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: patients.map((p) => ({ resource: condition(p, code), request: { method: 'POST', url: 'Condition' } })),
    });
    const refused = await fhir(C, '', { method: 'POST', json: bundle([own1.id, P, own2.id]) });
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);
    expect(errorCode(refused.body)).toBe('CONSENT_REQUIRED');
    for (const p of [own1.id, P, own2.id]) expect(await countOf(operator, `/Condition?subject=Patient/${p}&code=${SNOMED}|${code}`)).toBe(0);
    const allowed = await fhir(C, '', { method: 'POST', json: bundle([own1.id, own2.id]) });
    expect(allowed.status, JSON.stringify(allowed.body)).toBe(200);
    for (const p of [own1.id, own2.id]) expect(await countOf(operator, `/Condition?subject=Patient/${p}&code=${SNOMED}|${code}`)).toBe(1);
  });
});

describe('finding 3: the history of a deleted resource', () => {
  let id: string;
  beforeAll(async () => {
    const obs = await create(A, { resourceType: 'Observation', status: 'preliminary', category: LAB, code: { text: 'Ferritin' }, subject: { reference: `Patient/${P}` } } as Resource);
    id = obs.id;
    expect((await fhir(A, `/Observation/${id}`, { method: 'PUT', json: { ...obs, status: 'final', valueQuantity: { value: 30, unit: 'ng/mL' } } })).status).toBe(200);
    expect((await fhir(A, `/Observation/${id}`, { method: 'DELETE' })).status).toBe(204);
  });

  it('C sees none of it: instance history 404, vread 404, absent from type history', async () => {
    expect((await fhir(C, `/Observation/${id}/_history`)).status).toBe(404);
    expect((await fhir(C, `/Observation/${id}/_history/1`)).status).toBe(404);
    expect((await fhir(C, `/Observation/${id}/_history/2`)).status).toBe(404);
    expect(await idsFound(C, '/Observation/_history?_count=1000')).not.toContain(id);
  });

  it('control: B (consent) reads the versions', async () => {
    const history = await fhir(B, `/Observation/${id}/_history`);
    expect(history.status).toBe(200);
    expect(history.body.entry).toHaveLength(3);
    expect((await fhir(B, `/Observation/${id}/_history/1`)).status).toBe(200);
    expect(await idsFound(B, '/Observation/_history?_count=1000')).toContain(id);
  });
});

describe('finding 4: patient data outside the compartment', () => {
  it('a Binary whose securityContext is P is not readable by C (404); B reads it', async () => {
    const binary = await create(A, { resourceType: 'Binary', contentType: 'text/plain', data: 'c2VjcmV0', securityContext: { reference: `Patient/${P}` } } as Resource);
    expect((await fhir(C, `/Binary/${binary.id}`)).status).toBe(404);
    expect(await idsFound(C, '/Binary?_count=1000')).not.toContain(binary.id);
    expect((await fhir(B, `/Binary/${binary.id}`)).status).toBe(200);
  });

  it('a Device of P is not readable by C (404); B reads it', async () => {
    const device = await create(A, { resourceType: 'Device', patient: { reference: `Patient/${P}` }, deviceName: [{ name: 'Pacemaker', type: 'user-friendly-name' }] } as Resource);
    expect((await fhir(C, `/Device/${device.id}`)).status).toBe(404);
    expect(await idsFound(C, '/Device?_count=1000')).not.toContain(device.id);
    expect(await idsFound(B, '/Device?_count=1000')).toContain(device.id);
    expect((await fhir(B, `/Device/${device.id}`)).status).toBe(200);
  });

  it('a collection Bundle: refused 422 when its Condition names no patient; not readable by C when it names P', async () => {
    const collection = (subject: unknown) => ({ resourceType: 'Bundle', type: 'collection', entry: [{ resource: { ...condition(P), subject } }] });
    const unplaced = await fhir(A, '/Bundle', { method: 'POST', json: collection({ display: 'a patient' }) });
    expect(unplaced.status).toBe(422);
    const placed = await create(A, collection({ reference: `Patient/${P}` }) as Resource);
    expect((await fhir(C, `/Bundle/${placed.id}`)).status).toBe(404);
    expect(await idsFound(C, '/Bundle?_count=1000')).not.toContain(placed.id);
    expect(await idsFound(A, '/Bundle?_count=1000')).toContain(placed.id);
    expect((await fhir(A, `/Bundle/${placed.id}`)).status).toBe(200);
  });

  it('a Condition naming its subject by Health ID identifier only is 422 for a non-operator', async () => {
    for (const client of [A, C]) {
      const res = await fhir(client, '/Condition', { method: 'POST', json: { ...condition(P), subject: { identifier: { system: HEALTH_ID_SYSTEM, value: healthId } } } });
      expect(res.status).toBe(422);
    }
  });

  it('a Condition with a contained Patient is 422', async () => {
    const res = await fhir(A, '/Condition', {
      method: 'POST',
      json: { ...condition(P), contained: [{ resourceType: 'Patient', id: 'p1', name: [{ family: 'Hidden' }] }], subject: { reference: '#p1' } },
    });
    expect(res.status).toBe(422);
  });
});

describe('finding 5: webhooks follow consent classes', () => {
  let D: TestClient;
  let docsOnly: Receiver;
  let fullRecord: Receiver;
  const subscribe = async (client: TestClient, receiver: Receiver) => {
    const sub = await connect(client, '/webhooks/subscriptions', {
      method: 'POST',
      json: { callback_url: receiver.url, subscribed_events: ['lab_result.released', 'document.issued'] },
    });
    expect(sub.status, JSON.stringify(sub.body)).toBe(201);
    receiver.secret = sub.body.webhook_secret;
  };
  beforeAll(async () => {
    D = await createTestClient(pont, ['consents:write', 'webhooks:manage', 'documents:read'], { organizationId: 'org-d' });
    expect((await grant(D, 'documents')).status).toBe(201);
    docsOnly = await startReceiver();
    fullRecord = await startReceiver();
    await subscribe(D, docsOnly);
    // Control: B, with P's full-record consent, hears both.
    await subscribe(await createTestClient(pont, ['webhooks:manage'], { organizationId: 'org-b' }), fullRecord);
  });
  afterAll(async () => {
    await docsOnly?.close();
    await fullRecord?.close();
  });

  it('D (documents-only consent) receives document.issued and never lab_result.released', async () => {
    const lab = await create(A, { resourceType: 'Observation', status: 'final', category: LAB, code: { text: 'Potassium' }, subject: { reference: `Patient/${P}` }, valueQuantity: { value: 4.1, unit: 'mmol/L' } } as Resource);
    const doc = await create(A, { resourceType: 'DocumentReference', status: 'current', subject: { reference: `Patient/${P}` }, content: [{ attachment: { contentType: 'text/plain', data: 'ZG9j' } }] } as Resource);
    const control = await fullRecord.waitFor(2);
    expect(control.map((r) => r.body.type).sort()).toEqual(['document.issued', 'lab_result.released']);
    expect(control.find((r) => r.body.type === 'lab_result.released')!.body.data.lab_result_id).toBe(lab.id);
    const [first] = await docsOnly.waitFor(1);
    expect(first!.body.type).toBe('document.issued');
    expect(first!.signatureValid).toBe(true);
    expect(JSON.stringify(first!.body)).toContain(doc.id);
    // Deliveries of one subscription may arrive in any order: the server's own records of D's deliveries
    // (queued with the events, in the writes' transactions) hold no lab delivery either.
    const deliveries = await connect(D, '/webhooks/deliveries?limit=100');
    expect(deliveries.status).toBe(200);
    expect(deliveries.body.deliveries.filter((d: any) => d.status !== 'cancelled').map((d: any) => d.event_type)).toEqual(['document.issued']);
    expect(docsOnly.received.map((r) => r.body.type)).not.toContain('lab_result.released');
  });
});

describe('finding 6: facility data is written by clients of that facility only', () => {
  const stock = (facility: string) => ({
    facility_id: facility,
    items: [{ medication: { code: '308182', code_system: 'http://www.nlm.nih.gov/research/umls/rxnorm', display: 'Amoxicillin 250 MG Oral Capsule' }, quantity_on_hand: 10, unit: 'capsules' }],
  });
  const bloodUnit = (facility: string) => ({
    resourceType: 'BiologicallyDerivedProduct',
    meta: { tag: [{ system: FACILITY_TAG, code: facility }] },
    extension: [{ url: 'https://pont.health/fhir/StructureDefinition/blood-group', valueCode: 'O-' }],
    productCategory: 'fluid',
    productCode: { coding: [{ system: 'https://pont.health/fhir/CodeSystem/blood-component', code: 'plasma' }] },
    status: 'available',
    quantity: 1,
    storage: [{ duration: { end: inAYear() } }],
  });

  it('pharmacy stock of facility F: a client bound to no facility 403, a client bound to F 200', async () => {
    const unbound = await createTestClient(pont, ['pharmacy:write'], { organizationId: 'org-e' });
    const boundF = await createTestClient(pont, ['pharmacy:write'], { organizationId: 'org-e', facilityId: 'fac-f' });
    expect((await connect(unbound, '/pharmacy/stock', { method: 'PUT', json: stock('fac-f') })).status).toBe(403);
    const ok = await connect(boundF, '/pharmacy/stock', { method: 'PUT', json: stock('fac-f') });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
  });

  it('a blood unit of facility F written by a client bound to facility G is 403; bound to F it is 201', async () => {
    const boundG = await createTestClient(pont, ['fhir:write'], { organizationId: 'org-e', facilityId: 'fac-g' });
    const boundF = await createTestClient(pont, ['fhir:write'], { organizationId: 'org-e', facilityId: 'fac-f' });
    expect((await fhir(boundG, '/BiologicallyDerivedProduct', { method: 'POST', json: bloodUnit('fac-f') })).status).toBe(403);
    expect((await fhir(boundF, '/BiologicallyDerivedProduct', { method: 'POST', json: bloodUnit('fac-f') })).status).toBe(201);
  });

  it("A's PaymentReconciliation is not found by C's FHIR search; A finds it", async () => {
    const facilityA = await createTestClient(pont, ['fhir:write', 'payments:read'], { organizationId: 'org-a', facilityId: 'fac-a' });
    const cPayments = await createTestClient(pont, ['payments:read'], { organizationId: 'org-c' });
    clientsOfC.add(cPayments.client_id);
    const payment = await create(facilityA, {
      resourceType: 'PaymentReconciliation',
      meta: { tag: [{ system: FACILITY_TAG, code: 'fac-a' }] },
      status: 'active',
      created: '2026-11-21T09:00:00Z',
      paymentDate: '2026-11-21',
      paymentAmount: { value: 2500, currency: 'XAF' },
      detail: [{ type: { coding: [{ system: 'https://pont.health/fhir/CodeSystem/payment-method', code: 'cash' }] }, amount: { value: 2500, currency: 'XAF' } }],
    } as Resource);
    expect(await idsFound(cPayments, '/PaymentReconciliation?_count=1000')).not.toContain(payment.id);
    expect(await idsFound(cPayments, `/PaymentReconciliation?_id=${payment.id}`)).toEqual([]);
    expect((await fhir(cPayments, `/PaymentReconciliation/${payment.id}`)).status).toBe(404);
    expect(await idsFound(facilityA, `/PaymentReconciliation?_id=${payment.id}`)).toEqual([payment.id]);
  });
});

describe('finding 9: the audit trail shows an organisation its own accesses only', () => {
  const agentIds = (event: any): string[] => (event.agent ?? []).map((a: any) => a.altId ?? a.who?.identifier?.value);

  it("C (audit:read, not operator) finds only AuditEvents of org C's accesses; the operator sees A's too", async () => {
    // Accesses by both: A reads its data, C reads its own patient and is refused A's.
    expect((await fhir(A, `/Condition/${conditionId}`)).status).toBe(200);
    expect((await fhir(C, `/Patient/${PC}`)).status).toBe(200);
    expect((await fhir(C, `/Condition/${conditionId}`)).status).toBe(404);

    const mine = await fhir(C, '/AuditEvent?_count=1000');
    expect(mine.status).toBe(200);
    const events = (mine.body.entry ?? []).map((e: any) => e.resource);
    expect(events.some((e: any) => agentIds(e).includes(C.client_id))).toBe(true);
    for (const event of events) {
      expect(agentIds(event).some((id) => clientsOfC.has(id)), JSON.stringify(event.agent)).toBe(true);
      expect(agentIds(event), event.id).toContain('org-c');
      expect(agentIds(event), event.id).not.toContain(A.client_id);
      expect(agentIds(event), event.id).not.toContain('org-a');
    }
    expect(((await fhir(C, `/AuditEvent?altid=${A.client_id}`)).body.entry ?? []).filter((e: any) => e.search?.mode === 'match')).toEqual([]);

    const all = await fhir(operator, `/AuditEvent?altid=${A.client_id}&_count=1000`);
    expect(all.status).toBe(200);
    expect(all.body.entry?.length).toBeGreaterThan(0);
    for (const e of all.body.entry) expect(agentIds(e.resource)).toContain(A.client_id);
  });
});

describe('finding 10: refusals reveal nothing', () => {
  it("C's read of A's Condition and of a random id answer alike (404, same diagnostics modulo the id)", async () => {
    const absent = randomUUID();
    const hidden = await fhir(C, `/Condition/${conditionId}`);
    const none = await fhir(C, `/Condition/${absent}`);
    expect(hidden.status).toBe(404);
    expect(none.status).toBe(404);
    expect(errorCode(hidden.body)).toBe(errorCode(none.body));
    expect(diagnostics(hidden.body)).toBe(diagnostics(none.body)!.replace(absent, conditionId));
  });

  it('C: DELETE of A\'s Condition with If-Match: W/"1" is 404, not 412', async () => {
    const res = await fhir(C, `/Condition/${conditionId}`, { method: 'DELETE', headers: { 'If-Match': 'W/"1"' } });
    expect(res.status).toBe(404);
    expect((await fhir(A, `/Condition/${conditionId}`)).status).toBe(200);
  });

  it('every answer carrying patient data has Cache-Control: no-store', async () => {
    const answers: Array<[string, Promise<{ status: number; headers: Headers }>]> = [
      ['A read Condition', fhir(A, `/Condition/${conditionId}`)],
      ['A search Condition', fhir(A, `/Condition?subject=Patient/${P}`)],
      ['A read Patient', fhir(A, `/Patient/${P}`)],
      ['A vread Observation', fhir(A, `/Observation/${observationId}/_history/1`)],
      ['A history Observation', fhir(A, `/Observation/${observationId}/_history`)],
      ['A read DocumentReference', fhir(A, `/DocumentReference/${documentId}`)],
      ['A $everything', fhir(A, `/Patient/${P}/$everything`)],
      ['B read Condition', fhir(B, `/Condition/${conditionId}`)],
      ['B conditional create (existing)', fhir(B, '/Condition', { method: 'POST', headers: { 'If-None-Exist': `_id=${conditionId}` }, json: condition(P) })],
      ['C refused read', fhir(C, `/Condition/${conditionId}`)],
    ];
    for (const [label, answer] of answers) {
      const res = await answer;
      expect(res.status, label).toBeLessThan(500);
      expect(res.headers.get('cache-control'), label).toBe('no-store');
    }
  });
});

describe('searches by every door: the type, POST _search and the patient compartment', () => {
  /** P's Conditions (or another patient's), searched by each door a FHIR search has. */
  const doors = (patient: string): Array<[string, (client: TestClient) => ReturnType<typeof fhir>]> => [
    ['type search', (client) => fhir(client, `/Condition?subject=Patient/${patient}`)],
    ['POST _search', (client) => fhir(client, '/Condition/_search', { method: 'POST', body: `subject=Patient/${patient}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } })],
    ['compartment search', (client) => fhir(client, `/Patient/${patient}/Condition`)],
  ];
  /** An answer with the patient's id taken out of its links, to compare a hidden patient's with a missing one's. */
  const withoutId = (body: unknown, id: string) => JSON.parse(JSON.stringify(body).replaceAll(id, '<patient>'));

  it("C (no consent) finds none of P's data by any door, answered exactly as for a patient that does not exist", async () => {
    const absent = randomUUID();
    for (const [door, search] of doors(P)) {
      const hidden = await search(C);
      const none = await doors(absent).find(([d]) => d === door)![1](C);
      expect(hidden.status, door).toBe(200);
      expect(hidden.body.total, door).toBe(0);
      expect((hidden.body.entry ?? []).filter((e: any) => e.search?.mode === 'match'), door).toEqual([]);
      expect(withoutId(hidden.body, P), door).toEqual(withoutId(none.body, absent));
    }
  });

  it('W (fhir:write, no read scope) is refused 403 by every door', async () => {
    for (const [door, search] of doors(P)) expect((await search(W)).status, door).toBe(403);
  });

  it("control: B (consent) finds P's Condition by every door, whole", async () => {
    const read = (await fhir(B, `/Condition/${conditionId}`)).body;
    for (const [door, search] of doors(P)) {
      const res = await search(B);
      expect(res.status, door).toBe(200);
      expect(res.body.entry.find((e: any) => e.resource.id === conditionId)?.resource, door).toEqual(read);
    }
  });
});

describe('blind dump: conditional creates with invalid bodies never tell whether A has matching data', () => {
  const matching: string[] = [];
  beforeAll(async () => {
    for (let i = 0; i < 5; i++) {
      const code = `9${Math.floor(Math.random() * 1e9)}`;
      await create(A, condition(P, code));
      matching.push(code);
    }
  });

  it('50 random probes: the statuses (and messages) for matching and non-matching criteria are the same', async () => {
    const probe = (client: TestClient, code: string) =>
      fhir(client, '/Condition', { method: 'POST', headers: { 'If-None-Exist': `code=${SNOMED}|${code}` }, json: invalidCondition(PC) });
    // Control: for A (who sees its data) a matching probe does answer differently: the oracle is real.
    expect((await probe(A, matching[0]!)).status).toBe(200);

    // 25 probes of codes A wrote, 25 of codes nobody wrote, in random order.
    const hits = Array.from({ length: 50 }, (_, i) => i < 25).sort(() => Math.random() - 0.5);
    const seen = { match: new Set<string>(), none: new Set<string>() };
    for (const hit of hits) {
      const code = hit ? matching[Math.floor(Math.random() * matching.length)]! : `8${Math.floor(Math.random() * 1e9)}`;
      const res = await probe(C, code);
      expect(res.status, `probe ${code}`).not.toBe(200);
      seen[hit ? 'match' : 'none'].add(`${res.status} ${diagnostics(res.body)}`);
    }
    expect([...seen.match].sort()).toEqual([...seen.none].sort());
    expect([...new Set([...seen.match, ...seen.none])].map((s) => s.slice(0, 4))).toEqual(['400 ']);
  });
});

describe('pairing and Bridge sync, by organisations without rights', () => {
  const mobile = (token: string, path: string) => pont.json(`/api/v1/mobile${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });

  it("an app paired by an organisation never approves that organisation's own request; it approves another's", async () => {
    // A registered P, so A may pair P's app; C (no relationship) may not.
    const C2 = await createTestClient(pont, ['consents:write'], { organizationId: 'org-c' });
    expect((await connect(C2, `/patient/${healthId}/mobile/pairing-code`, { method: 'POST' })).status).toBe(403);
    const code = await connect(A, `/patient/${healthId}/mobile/pairing-code`, { method: 'POST' });
    expect(code.status).toBe(201);
    const token = (await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: healthId, code: code.body.code } })).body.access_token as string;
    const request = (client: TestClient) =>
      call(client, '/api/v1/sdk/consents/request', { method: 'POST', json: { health_id: healthId, purpose: 'follow-up', requested_scopes: ['labs:read'] } });
    const own = await request(A);
    expect(own.status).toBe(201);
    const refused = await mobile(token, `/consent-requests/${own.body.consent_request_id}/approve`);
    expect(refused.status).toBe(403);
    // Nothing changed: the request is still pending, and A holds no consent from it.
    const consents = (await pont.json('/api/v1/mobile/consents', { headers: { authorization: `Bearer ${token}` } })).body.items as any[];
    expect(consents.find((c) => c.consent_id === own.body.consent_request_id || c.id === own.body.consent_request_id)?.status).not.toBe('active');
    const D = await createTestClient(pont, ['consents:write'], { organizationId: 'org-d' });
    const other = await request(D);
    expect(other.status).toBe(201);
    expect((await mobile(token, `/consent-requests/${other.body.consent_request_id}/approve`)).status).toBe(200);
  });

  it("a Bridge agent of another organisation on the same facility id cannot overwrite, nor learn, the first organisation's synced data", async () => {
    const { createAgent } = await import('../src/auth/agents');
    const agentOf = (org: string) => createAgent(pont.services.db, { organizationId: org, facilityId: 'fac-shared' });
    const [ours, theirs] = [await agentOf('org-a'), await agentOf('org-c')];
    const shared = (value: number) => ({ resourceType: 'Observation', id: 'OBS-SHARED', status: 'final', code: { text: 'Ward scale calibration' }, valueQuantity: { value, unit: 'kg' } });
    const sync = (agent: typeof ours, batch: string, value: number, extra: { groups?: number[][]; repeat?: boolean } = {}) =>
      pont.json('/api/v1/bridge/sync', {
        method: 'POST',
        headers: { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)) },
        json: { batch_id: batch, resources: extra.repeat ? [shared(value), shared(value)] : [shared(value)], ...(extra.groups && { groups: extra.groups }) },
      });
    const first = await sync(ours, 'shared-1', 70);
    expect(first.body.results[0].status, JSON.stringify(first.body)).toBe('created');
    const id = first.body.results[0].id;
    // The same content (an 'unchanged' would reveal it) and new content: both fail, and A's stays as it was.
    for (const [batch, value] of [['shared-2', 70], ['shared-3', 99]] as const) {
      const attempt = await sync(theirs, batch, value);
      expect(attempt.status).toBe(200);
      expect(attempt.body.results[0].status).toBe('failed');
      expect(attempt.body.counts).toMatchObject({ failed: 1, unchanged: 0, updated: 0 });
      expect(attempt.body.results[0].error).toMatch(/not found/);
    }
    // As a group, the resource given twice (a repeat is written once): both fail alike, whatever A holds.
    for (const [batch, value] of [['shared-4', 70], ['shared-5', 99]] as const) {
      const grouped = await sync(theirs, batch, value, { groups: [[0, 1]], repeat: true });
      expect(grouped.body.results.map((r: any) => r.status)).toEqual(['failed', 'failed']);
      expect(grouped.body.counts).toMatchObject({ failed: 2, unchanged: 0, updated: 0 });
      expect(grouped.body.results[0].error).toMatch(/not found/);
    }
    const kept = await stored('Observation', id);
    expect(kept.valueQuantity.value).toBe(70);
    expect(kept.meta.versionId).toBe('1');
  });
});
