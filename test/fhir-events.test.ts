import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resource } from '@medplum/fhirtypes';
import { EVENT_TYPES } from '../src/events/types';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { eventually } from './eventually';
import { pendingDeliveries, startReceiver, type Receiver } from './webhooks-support';

/**
 * Events come from resource changes, whatever path made them (src/events/rules.ts): here every rule is
 * triggered through /api/fhir/R4, as a FHIR client would, and a subscriber receives each event once.
 */
let pont: TestServer;
let client: TestClient;
let receiver: Receiver;
let subscriptionId: string;

beforeAll(async () => {
  pont = await startTestServer({ PONT_WEBHOOK_RETRY_DELAYS: '1s,1s,1s,1s,1s,1s' });
  client = await createTestClient(pont, ['fhir:read', 'fhir:write', 'webhooks:manage', 'health_id:verify'], { organizationId: 'org-events', facilityId: 'fac-events' });
  receiver = await startReceiver();
  const sub = await pont.json('/api/v1/connect/webhooks/subscriptions', {
    method: 'POST',
    headers: client.headers,
    json: { callback_url: receiver.url, subscribed_events: [...EVENT_TYPES], description: 'every event' },
  });
  expect(sub.status).toBe(201);
  receiver.secret = sub.body.webhook_secret;
  subscriptionId = sub.body.id;
});
afterAll(async () => {
  await receiver?.close();
  await pont?.close();
});

const fhir = (path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(`/api/fhir/R4${path}`, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
const create = async <T extends Resource>(r: T): Promise<T & { id: string }> => {
  const res = await fhir(`/${r.resourceType}`, { method: 'POST', json: r });
  if (res.status !== 201) throw new Error(`${r.resourceType}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
};
const update = async <T extends Resource>(r: T): Promise<T> => {
  const res = await fhir(`/${r.resourceType}/${r.id}`, { method: 'PUT', json: r });
  if (res.status !== 200) throw new Error(`${r.resourceType}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
};

/**
 * Waits for `expected` deliveries, then returns the events delivered since `from`, in the order they were recorded
 * (deliveries run in parallel and may arrive in another order: the outbox's sequence tells).
 */
async function eventsSince(from: number, expected: number): Promise<Array<{ type: string; data: any }>> {
  await receiver.waitFor(from + expected);
  // Until every queued delivery has arrived, so that an event raised twice would show.
  await eventually(async () => expect(await pendingDeliveries(pont.services.db, subscriptionId)).toBe(0));
  const received = receiver.received.slice(from).map((r) => ({ id: r.body.id as string, type: r.body.type, data: r.body.data }));
  const { rows } = await pont.services.db.query<{ id: string }>('SELECT id FROM events WHERE id = ANY($1::text[]) ORDER BY seq', [received.map((e) => e.id)]);
  const order = new Map(rows.map((r, i) => [r.id, i]));
  return received.sort((a, b) => order.get(a.id)! - order.get(b.id)!).map(({ type, data }) => ({ type, data }));
}

const labCategory = [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] }];

describe('events from resource changes through /api/fhir/R4', () => {
  let patient: Resource & { id: string };
  let healthId: string;

  it('Patient: created (and its Health ID), updated only when demographics change', async () => {
    const from = receiver.received.length;
    patient = await create({ resourceType: 'Patient', name: [{ use: 'official', family: 'Evented', given: ['Ada'] }], gender: 'female', birthDate: '1980-02-02' } as Resource);
    healthId = (patient as any).identifier[0].value;
    await update({ ...patient, active: true } as Resource); // not demographics: no event
    await update({ ...patient, name: [{ use: 'official', family: 'Renamed', given: ['Ada'] }] } as Resource);
    const events = await eventsSince(from, 3);
    expect(events.map((e) => e.type)).toEqual(['patient.created', 'health_id.created', 'patient.updated']);
    expect(events[0]!.data).toEqual({ patient_id: patient.id, health_id: healthId });
    expect(events[1]!.data).toEqual({ health_id: healthId, patient_id: patient.id });
  });

  it('Encounter: created, then closed when it reaches finished', async () => {
    const from = receiver.received.length;
    const enc = await create({
      resourceType: 'Encounter',
      status: 'in-progress',
      class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
      subject: { reference: `Patient/${patient.id}` },
    } as Resource);
    await update({ ...enc, status: 'finished' } as Resource);
    const events = await eventsSince(from, 2);
    expect(events.map((e) => e.type)).toEqual(['encounter.created', 'encounter.closed']);
    expect(events[0]!.data).toMatchObject({ encounter_id: enc.id, patient_id: patient.id, health_id: healthId });
  });

  it('lab order, lab result released (exactly the §6.2 fields) and amended', async () => {
    const from = receiver.received.length;
    await create({
      resourceType: 'ServiceRequest',
      status: 'active',
      intent: 'order',
      category: [{ coding: [{ system: 'http://snomed.info/sct', code: '108252007' }] }],
      code: { text: 'Full blood count' },
      subject: { reference: `Patient/${patient.id}` },
    } as Resource);
    const obs = await create({
      resourceType: 'Observation',
      status: 'final',
      category: labCategory,
      code: { coding: [{ system: 'http://loinc.org', code: '718-7', display: 'Hemoglobin' }] },
      subject: { reference: `Patient/${patient.id}` },
      valueQuantity: { value: 6.1, unit: 'g/dL' },
      interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'LL' }] }],
    } as Resource);
    await update({ ...obs, status: 'amended', valueQuantity: { value: 6.4, unit: 'g/dL' } } as Resource);
    const events = await eventsSince(from, 3);
    expect(events.map((e) => e.type)).toEqual(['lab_order.created', 'lab_result.released', 'lab_result.amended']);
    expect(events[1]!.data).toEqual({ health_id: healthId, lab_result_id: obs.id, test_name: 'Hemoglobin', flagged: true, facility_id: 'fac-events' });
  });

  it('prescriptions: issued, cancelled, dispensed', async () => {
    const from = receiver.received.length;
    const med = { coding: [{ system: 'http://www.nlm.nih.gov/research/umls/rxnorm', code: '198211', display: 'Amoxicillin 500 MG' }] };
    const rx = await create({ resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: med, subject: { reference: `Patient/${patient.id}` } } as Resource);
    const rx2 = await create({ resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: med, subject: { reference: `Patient/${patient.id}` } } as Resource);
    await update({ ...rx2, status: 'cancelled' } as Resource);
    await create({
      resourceType: 'MedicationDispense',
      status: 'completed',
      medicationCodeableConcept: med,
      subject: { reference: `Patient/${patient.id}` },
      authorizingPrescription: [{ reference: `MedicationRequest/${rx.id}` }],
    } as Resource);
    const events = await eventsSince(from, 4);
    expect(events.map((e) => e.type)).toEqual(['prescription.issued', 'prescription.issued', 'prescription.cancelled', 'prescription.dispensed']);
    expect(events[3]!.data).toMatchObject({ prescription_id: rx.id, patient_id: patient.id });
  });

  it('appointments: created, checked in, cancelled', async () => {
    const from = receiver.received.length;
    const appointment = (status: string) =>
      ({ resourceType: 'Appointment', status, participant: [{ actor: { reference: `Patient/${patient.id}` }, status: 'accepted' }] }) as Resource;
    const a = await create({ ...appointment('booked'), start: '2026-12-01T09:00:00Z', end: '2026-12-01T09:30:00Z' } as Resource);
    await update({ ...a, status: 'checked-in' } as Resource);
    const b = await create(appointment('proposed'));
    await update({ ...b, status: 'cancelled' } as Resource);
    const events = await eventsSince(from, 4);
    expect(events.map((e) => e.type)).toEqual(['appointment.created', 'appointment.checked_in', 'appointment.created', 'appointment.cancelled']);
    expect(events[1]!.data).toMatchObject({ appointment_id: a.id, patient_id: patient.id, health_id: healthId });
  });

  it('documents: issued (DocumentReference current, Composition final) and verified', async () => {
    const from = receiver.received.length;
    const doc = await create({
      resourceType: 'DocumentReference',
      status: 'current',
      subject: { reference: `Patient/${patient.id}` },
      content: [{ attachment: { contentType: 'text/plain', data: 'aGVsbG8=' } }],
    } as Resource);
    const org = await create({ resourceType: 'Organization', name: 'Checking lab' } as Resource);
    await update({ ...doc, authenticator: { reference: `Organization/${org.id}` } } as Resource);
    await create({
      resourceType: 'Composition',
      status: 'final',
      type: { text: 'Discharge summary' },
      subject: { reference: `Patient/${patient.id}` },
      date: '2026-11-01',
      author: [{ reference: `Organization/${org.id}` }],
      title: 'Discharge summary',
    } as Resource);
    const events = await eventsSince(from, 3);
    expect(events.map((e) => e.type)).toEqual(['document.issued', 'document.verified', 'document.issued']);
  });

  it('a transaction that fails raises nothing; one that commits raises each event once', async () => {
    const from = receiver.received.length;
    const bad = await fhir('', {
      method: 'POST',
      json: {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { resource: { resourceType: 'Patient', name: [{ family: 'Never' }] }, request: { method: 'POST', url: 'Patient' } },
          { resource: { resourceType: 'Encounter', status: 'planned', class: { code: 'AMB' }, subject: { reference: 'Patient/absent' } }, request: { method: 'POST', url: 'Encounter' } },
        ],
      },
    });
    expect(bad.status).toBe(400);
    const good = await fhir('', {
      method: 'POST',
      json: {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [{ resource: { resourceType: 'Encounter', status: 'planned', class: { code: 'AMB' }, subject: { reference: `Patient/${patient.id}` } }, request: { method: 'POST', url: 'Encounter' } }],
      },
    });
    expect(good.status).toBe(200);
    const events = await eventsSince(from, 1);
    expect(events.map((e) => e.type)).toEqual(['encounter.created']);
  });

  it('a Connect resolve raises patient.created and health_id.created once each, like any other Patient write', async () => {
    const from = receiver.received.length;
    const res = await pont.json('/api/v1/connect/patients/resolve', {
      method: 'POST',
      headers: client.headers,
      json: { first_name: 'Connected', last_name: 'Once', date_of_birth: '2001-01-01' },
    });
    expect(res.status).toBe(201);
    const events = await eventsSince(from, 2);
    expect(events.map((e) => e.type)).toEqual(['patient.created', 'health_id.created']);
    expect(events[1]!.data.health_id).toBe(res.body.health_id);
  });
});
