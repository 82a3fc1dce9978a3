import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgent } from '../src/auth/agents';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { syncedId } from '../src/bridge/sync';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { startReceiver, verifySignature, type Receiver } from './webhooks-support';

/**
 * Bridge sync as an agent written from the README's protocol would use it: batches with failures, resends
 * after a lost reply, changes, gaps (a resource whose patient comes later), and the sync_failed event.
 */
let pont: TestServer;
let agent: Awaited<ReturnType<typeof createAgent>>;
let operator: TestClient;
let receiver: Receiver;

beforeAll(async () => {
  pont = await startTestServer({ PONT_WEBHOOK_RETRY_DELAYS: '1s,1s,1s,1s,1s,1s' });
  agent = await createAgent(pont.services.db, { organizationId: 'org-hospital', facilityId: 'fac-ward-1' });
  operator = await createTestClient(pont, ['fhir:read'], { organizationId: 'org-operator', allPatients: true });
  const hospital = await createTestClient(pont, ['webhooks:manage'], { organizationId: 'org-hospital' });
  receiver = await startReceiver();
  const sub = await pont.json('/api/v1/connect/webhooks/subscriptions', {
    method: 'POST',
    headers: hospital.headers,
    json: { callback_url: receiver.url, subscribed_events: ['bridge_agent.sync_failed'], description: 'agent failures' },
  });
  expect(sub.status).toBe(201);
  receiver.secret = sub.body.webhook_secret;
});
afterAll(async () => {
  await receiver?.close();
  await pont?.close();
});

const sync = (batch_id: string, resources: unknown[], groups?: unknown) =>
  pont.json('/api/v1/bridge/sync', {
    method: 'POST',
    headers: { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)) },
    json: { batch_id, resources, ...(groups !== undefined && { groups }) },
  });
const read = (type: string, id: string) => pont.json(`/api/fhir/R4/${type}/${id}`, { headers: operator.headers });

const patient = { resourceType: 'Patient', id: 'MRN-1001', identifier: [{ system: 'urn:ward-1:mrn', value: '1001' }], name: [{ use: 'official', family: 'Ngono', given: ['Alice'] }], gender: 'female', birthDate: '1990-04-01' };
const encounter = { resourceType: 'Encounter', id: 'ENC-1', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: 'Patient/MRN-1001' } };
const observation = (id: string, value: number, patientRef = 'Patient/MRN-1001') => ({
  resourceType: 'Observation',
  id,
  status: 'final',
  category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
  code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }], text: 'Heart rate' },
  subject: { reference: patientRef },
  // ENC-1 is MRN-1001's visit: another patient's result is in none of theirs.
  ...(patientRef === 'Patient/MRN-1001' ? { encounter: { reference: 'Encounter/ENC-1' } } : {}),
  valueQuantity: { value, unit: '/min' },
});

describe('bridge sync', () => {
  let first: any;

  it('writes each resource under Pont id, references translated, tagged with facility and agent; the patient gets a Health ID', async () => {
    const res = await sync('batch-1', [patient, encounter, observation('OBS-1', 72)]);
    expect(res.status).toBe(200);
    first = res.body;
    expect(first.counts).toEqual({ created: 3, updated: 0, unchanged: 0, failed: 0 });
    expect(first.results.map((r: any) => [r.index, r.status, r.resource_type, r.source_id])).toEqual([
      [0, 'created', 'Patient', 'MRN-1001'],
      [1, 'created', 'Encounter', 'ENC-1'],
      [2, 'created', 'Observation', 'OBS-1'],
    ]);
    const [p, , o] = first.results.map((r: any) => r.id);
    const stored = (await read('Observation', o)).body;
    expect(stored.subject.reference).toBe(`Patient/${p}`);
    expect(stored.meta.tag).toEqual(
      expect.arrayContaining([
        { system: 'https://pont.health/fhir/CodeSystem/facility', code: 'fac-ward-1' },
        { system: 'https://pont.health/fhir/CodeSystem/bridge-agent', code: agent.agent_id },
      ]),
    );
    const storedPatient = (await read('Patient', p)).body;
    expect(storedPatient.identifier.some((i: any) => i.system === HEALTH_ID_SYSTEM)).toBe(true);
  });

  it('a resend after a lost reply gets the same answer and writes nothing; other content under the same batch id is 409', async () => {
    const again = await sync('batch-1', [patient, encounter, observation('OBS-1', 72)]);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first);
    expect((await read('Observation', first.results[2].id)).body.meta.versionId).toBe('1');
    const other = await sync('batch-1', [observation('OBS-1', 80)]);
    expect(other.status).toBe(409);
  });

  it('the same resources in a new batch are unchanged; a changed one is updated, not duplicated', async () => {
    const res = await sync('batch-2', [patient, encounter, observation('OBS-1', 75)]);
    expect(res.body.results.map((r: any) => r.status)).toEqual(['unchanged', 'unchanged', 'updated']);
    expect(res.body.results.map((r: any) => r.id)).toEqual(first.results.map((r: any) => r.id));
    const obs = (await read('Observation', first.results[2].id)).body;
    expect(obs.valueQuantity.value).toBe(75);
    expect(obs.meta.versionId).toBe('2');
    expect((await read('Patient', first.results[0].id)).body.meta.versionId).toBe('1');
  });

  it('a batch with failures writes the rest, says why for each failure, and raises a signed bridge_agent.sync_failed', async () => {
    const from = receiver.received.length;
    const res = await sync('batch-3', [
      observation('OBS-2', 70),
      { resourceType: 'Observation', id: 'OBS-3', status: 'bogus', code: { text: 'x' } },
      { resourceType: 'Observation', status: 'final', code: { text: 'no id' } },
      'not a resource',
      observation('OBS-4', 66, 'Patient/MRN-LATER'),
    ]);
    expect(res.status).toBe(200);
    expect(res.body.results.map((r: any) => r.status)).toEqual(['created', 'failed', 'failed', 'failed', 'failed']);
    for (const r of res.body.results.slice(1)) expect(r.error).toBeTruthy();
    expect(res.body.results[4].error).toMatch(/subject/);
    await receiver.waitFor(from + 1);
    const delivery = receiver.received[from]!;
    expect(verifySignature(delivery.rawBody, delivery.headers['x-service-signature'] as string, receiver.secret)).toBe(true);
    expect(delivery.body.type).toBe('bridge_agent.sync_failed');
    // Metadata only (the default): the counts, not the errors, which may quote patient data.
    expect(delivery.body.data).toEqual({ agent_id: agent.agent_id, facility_id: 'fac-ward-1', batch_id: 'batch-3', counts: { created: 1, updated: 0, unchanged: 0, failed: 4 } });
    const { rows } = await pont.services.db.query<{ data: any }>(`SELECT data FROM events WHERE type = 'bridge_agent.sync_failed'`);
    expect(rows[0]!.data.first_errors.map((e: any) => e.index)).toEqual([1, 2, 3, 4]);
  });

  it('a group is written whole or not at all: one refused, the others of its group fail with it, the rest of the batch is written', async () => {
    const report = (id: string, results: string[]) => ({ resourceType: 'DiagnosticReport', id, status: 'final', code: { text: 'panel' }, subject: { reference: 'Patient/MRN-1001' }, result: results.map((r) => ({ reference: `Observation/${r}` })) });
    const res = await sync('batch-groups-1', [observation('OBS-G1', 70), report('DR-G1', ['OBS-G1', 'OBS-G2']), observation('OBS-G2', 71, 'Patient/MRN-NOBODY'), observation('OBS-G3', 72)], [[0, 1, 2]]);
    expect(res.status).toBe(200);
    expect(res.body.results.map((r: any) => r.status)).toEqual(['failed', 'failed', 'failed', 'created']);
    expect(res.body.results[0].error).toMatch(/^not written with its group: resources\[2\] was refused: .*subject/);
    expect(res.body.results[2].error).toMatch(/^resources\[2\]: .*subject/);
    for (const id of ['OBS-G1', 'OBS-G2']) expect((await read('Observation', syncedId('fac-ward-1', 'Observation', id))).status).toBe(404);
    expect((await read('DiagnosticReport', syncedId('fac-ward-1', 'DiagnosticReport', 'DR-G1'))).status).toBe(404);
    // Sent again with the patient: the group goes through; the same batch under its id with other groups is 409.
    const again = await sync('batch-groups-2', [observation('OBS-G1', 70), report('DR-G1', ['OBS-G1', 'OBS-G2']), observation('OBS-G2', 71)], [[2, 0, 1]]);
    expect(again.body.results.map((r: any) => r.status)).toEqual(['created', 'created', 'created']);
    expect((await sync('batch-groups-2', [observation('OBS-G1', 70), report('DR-G1', ['OBS-G1', 'OBS-G2']), observation('OBS-G2', 71)], [[0, 1]])).status).toBe(409);
    // The same groups given in another order are the same batch.
    const replayed = await sync('batch-groups-2', [observation('OBS-G1', 70), report('DR-G1', ['OBS-G1', 'OBS-G2']), observation('OBS-G2', 71)], [[1, 2, 0]]);
    expect([replayed.status, replayed.headers.get('idempotent-replayed')]).toEqual([200, 'true']);
    // A group that names one resource twice (a result and its correction): in batch order, in one transaction.
    const corrected = await sync('batch-groups-3', [observation('OBS-G4', 60), observation('OBS-G4', 61), 'not a resource'], [[0, 1, 2]]);
    expect(corrected.body.results.map((r: any) => r.status)).toEqual(['failed', 'failed', 'failed']);
    expect(corrected.body.results[0].error).toMatch(/^not written with its group: resources\[2\] was refused: not a FHIR resource/);
    const twice = await sync('batch-groups-4', [observation('OBS-G4', 60), observation('OBS-G4', 61)], [[0, 1]]);
    expect(twice.body.results.map((r: any) => r.status)).toEqual(['created', 'updated']);
    expect((await read('Observation', twice.body.results[1].id)).body.valueQuantity.value).toBe(61);
  });

  it('a resource given again as it was, in each group that needs it, is written once; a group refused does not take it from the others', async () => {
    const newcomer = { resourceType: 'Patient', id: 'MRN-REPEAT', name: [{ family: 'Repeat' }], gender: 'male', birthDate: '1970-01-01' };
    const mine = (id: string, value: number) => observation(id, value, 'Patient/MRN-REPEAT');
    const ok = await sync('batch-repeat-1', [newcomer, mine('OBS-R1', 1), newcomer, mine('OBS-R2', 2)], [[0, 1], [2, 3]]);
    expect(ok.body.results.map((r: any) => r.status)).toEqual(['created', 'created', 'unchanged', 'created']);
    // The first group refused (its result names a visit of another patient): the second still brings the patient.
    const another = { ...newcomer, id: 'MRN-REPEAT-2' };
    const theirs = (id: string) => ({ ...observation(id, 3, 'Patient/MRN-REPEAT-2'), encounter: { reference: 'Encounter/ENC-1' } });
    const part = await sync('batch-repeat-2', [another, theirs('OBS-R3'), another, observation('OBS-R4', 4, 'Patient/MRN-REPEAT-2')], [[0, 1], [2, 3]]);
    expect(part.body.results.map((r: any) => r.status)).toEqual(['failed', 'failed', 'created', 'created']);
    expect((await read('Patient', part.body.results[2].id)).status).toBe(200);
  });

  it('groups that name no resource, or one twice, are a 422 naming them, and nothing is written', async () => {
    for (const [groups, path] of [
      [[[0, 5]], 'groups.0.1'],
      [[[0, 1], [1, 0]], 'groups.1.0'],
      [[[0, 0]], 'groups.0.1'],
      [[[0]], 'groups.0'],
      [[['0', 1]], 'groups.0.0'],
      ['all', 'groups'],
    ] as const) {
      const res = await sync(`batch-bad-groups-${path}-${JSON.stringify(groups).length}`, [observation('OBS-BG1', 1), observation('OBS-BG2', 2)], groups);
      expect(res.status, JSON.stringify(groups)).toBe(422);
      expect(res.body.details[0].field).toBe(`body.${path}`);
    }
    expect((await read('Observation', syncedId('fac-ward-1', 'Observation', 'OBS-BG1'))).status).toBe(404);
    // A group is a run of consecutive resources: another between two of its own (a later version of one of them,
    // written before the group's last) would be written out of the batch's order (found by an outside review).
    const interleaved = await sync('batch-bad-groups-run', [observation('OBS-BG1', 1), observation('OBS-BG2', 2), observation('OBS-BG1', 3)], [[0, 2]]);
    expect(interleaved.status).toBe(422);
    expect(interleaved.body.details).toEqual([{ field: 'body.groups.0', message: 'is not a run of consecutive resources (a group is one, in any order)' }]);
    expect((await sync('batch-twice-zero', [observation('OBS-BG1', 1), observation('OBS-BG2', 2)], [[0, 0]])).body.details[0].message).toBe('resources[0] is in this group twice');
  });

  it('a grouped batch from a caller that is no Bridge agent (a client with the sync scope, with or without an agent id; a patient token) is 401: nothing written, nothing said of the resources', async () => {
    const client = await createTestClient(pont, ['bridge_agent:sync', 'fhir:write'], { organizationId: 'org-hospital' });
    const registrar = await createTestClient(pont, ['health_id:verify', 'consents:write'], { organizationId: 'org-hospital' });
    const resolved = await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: registrar.headers, json: { first_name: 'Door', last_name: 'Patient', date_of_birth: '1991-02-03', sex: 'female' } });
    expect(resolved.status).toBe(201);
    const code = await pont.json(`/api/v1/connect/patient/${resolved.body.health_id}/mobile/pairing-code`, { method: 'POST', headers: registrar.headers });
    expect(code.status).toBe(201);
    const token = await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: resolved.body.health_id, code: code.body.code } });
    expect(token.body.access_token).toMatch(/^pat_/);
    const callers: Array<[string, Record<string, string>]> = [
      ['a client token with bridge_agent:sync', client.headers],
      ['a client token naming the agent', { ...client.headers, 'x-bridge-agent-id': agent.agent_id, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)) }],
      ["a patient's token", { authorization: `Bearer ${token.body.access_token}` }],
    ];
    for (const [who, headers] of callers) {
      const res = await pont.json('/api/v1/bridge/sync', { method: 'POST', headers, json: { batch_id: 'batch-door', resources: [observation('OBS-DOOR1', 1), observation('OBS-DOOR2', 2)], groups: [[0, 1]] } });
      expect(`${who}: ${res.status}`).toBe(`${who}: 401`);
      expect(res.body).toMatchObject({ status: 'error', error_code: 'UNAUTHENTICATED' });
      expect(JSON.stringify(res.body)).not.toMatch(/OBS-DOOR|results/);
    }
    for (const id of ['OBS-DOOR1', 'OBS-DOOR2']) expect((await read('Observation', syncedId('fac-ward-1', 'Observation', id))).status).toBe(404);
    // The agent's own batch of that id was never taken: sent now, it is written, not answered as a replay.
    expect((await sync('batch-door', [patient, encounter, observation('OBS-DOOR1', 1), observation('OBS-DOOR2', 2)], [[2, 3]])).body.results.map((r: any) => r.status)).not.toContain('failed');
  });

  it('a gap is filled later: the patient comes in a later batch, then the resource that failed goes through', async () => {
    const later = { ...patient, id: 'MRN-LATER', identifier: [{ system: 'urn:ward-1:mrn', value: 'LATER' }], name: [{ use: 'official', family: 'Later', given: ['Bob'] }] };
    const res = await sync('batch-4', [later, observation('OBS-4', 66, 'Patient/MRN-LATER')]);
    expect(res.body.results.map((r: any) => r.status)).toEqual(['created', 'created']);
  });

  it('the same resource twice in a batch: written in order, the last one wins', async () => {
    const res = await sync('batch-twice', [observation('OBS-5', 60), observation('OBS-5', 61)]);
    expect(res.body.results.map((r: any) => r.status)).toEqual(['created', 'updated']);
    expect((await read('Observation', res.body.results[1].id)).body.valueQuantity.value).toBe(61);
  });

  it('a resource tagged if-absent is created when the facility has none of that id, and otherwise left as it is; the tag is not kept', async () => {
    const ifAbsent = { system: 'https://pont.health/fhir/CodeSystem/bridge-write', code: 'if-absent' };
    const thin = (id: string) => ({ resourceType: 'Patient', id, name: [{ family: 'Thin' }], meta: { tag: [ifAbsent] } });
    const res = await sync('batch-if-absent', [thin('MRN-1001'), thin('MRN-2002')]);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.results.map((r: any) => r.status)).toEqual(['unchanged', 'created']);
    const kept = (await read('Patient', res.body.results[0].id)).body;
    expect(kept).toMatchObject({ birthDate: '1990-04-01', name: [{ family: 'Ngono' }] });
    const created = (await read('Patient', res.body.results[1].id)).body;
    expect(created.name).toEqual([{ family: 'Thin' }]);
    expect(JSON.stringify(created.meta.tag)).not.toContain('if-absent');
  });

  it('refuses a batch over the limit (413) and a malformed one (422)', async () => {
    const big = Array.from({ length: 1001 }, (_, i) => observation(`OBS-BIG-${i}`, 60));
    expect((await sync('batch-big', big)).status).toBe(413);
    expect((await sync('', [patient])).status).toBe(422);
    expect((await sync('batch-empty', [])).status).toBe(422);
  });
});
