import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Patient } from '@medplum/fhirtypes';
import { startFhirApi, type FhirTestApi } from './fhir-helpers';

let api: FhirTestApi;
beforeAll(async () => {
  api = await startFhirApi({ PONT_MAX_BODY_BYTES: '200000' });
});
afterAll(async () => {
  await api?.close();
});

const patient: Patient = { resourceType: 'Patient', name: [{ family: 'Okafor', given: ['Ada'] }], gender: 'female', birthDate: '1990-04-12' };

async function countPatients(): Promise<number> {
  return (await api.call('/Patient?_summary=count')).body.total;
}

describe('FHIR create, read, update, delete, history', () => {
  it('creates with a server id, version 1, Location and ETag', async () => {
    const res = await api.call('/Patient', { method: 'POST', json: { ...patient, id: 'client-chosen' } });
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toContain('application/fhir+json');
    expect(res.body.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.body.meta.versionId).toBe('1');
    expect(res.headers.get('etag')).toBe('W/"1"');
    expect(res.headers.get('location')).toBe(`${api.pont.url}/api/fhir/R4/Patient/${res.body.id}/_history/1`);
    const read = await api.call(`/Patient/${res.body.id}`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(res.body);
  });

  it('updates with If-Match, refuses a stale version with 412, and keeps every version', async () => {
    const created = await api.create(patient);
    const v2 = await api.call(`/Patient/${created.id}`, { method: 'PUT', headers: { 'If-Match': 'W/"1"' }, json: { ...created, gender: 'other' } });
    expect(v2.status).toBe(200);
    expect(v2.body.meta.versionId).toBe('2');
    const stale = await api.call(`/Patient/${created.id}`, { method: 'PUT', headers: { 'If-Match': 'W/"1"' }, json: { ...created, gender: 'male' } });
    expect(stale.status).toBe(412);
    expect(stale.body.resourceType).toBe('OperationOutcome');
    expect((await api.call(`/Patient/${created.id}`)).body.gender).toBe('other');
    expect((await api.call(`/Patient/${created.id}/_history/1`)).body.gender).toBe('female');
    const history = await api.call(`/Patient/${created.id}/_history`);
    expect(history.body.type).toBe('history');
    expect(history.body.entry.map((e: any) => e.resource.meta.versionId)).toEqual(['2', '1']);
  });

  it('creates with PUT when the id is new (update-as-create)', async () => {
    const res = await api.call('/Patient/pont-fixed-1', { method: 'PUT', json: { ...patient, id: 'pont-fixed-1' } });
    expect(res.status).toBe(201);
    expect(res.body.id).toBe('pont-fixed-1');
  });

  it('deletes: reads then answer 410, history keeps the deletion, a second delete is harmless', async () => {
    const created = await api.create(patient);
    expect((await api.call(`/Patient/${created.id}`, { method: 'DELETE' })).status).toBe(204);
    const gone = await api.call(`/Patient/${created.id}`);
    expect(gone.status).toBe(410);
    expect(gone.body.issue[0].code).toBe('deleted');
    expect((await api.call(`/Patient?_id=${created.id}`)).body.total).toBe(0);
    const history = await api.call(`/Patient/${created.id}/_history`);
    expect(history.body.entry.map((e: any) => e.request.method)).toEqual(['DELETE', 'POST']);
    expect((await api.call(`/Patient/${created.id}`, { method: 'DELETE' })).status).toBe(204);
  });

  it('answers unknown ids, versions and types with 404 OperationOutcomes', async () => {
    expect((await api.call('/Patient/does-not-exist')).status).toBe(404);
    expect((await api.call('/Patient/does-not-exist/_history')).status).toBe(404);
    const created = await api.create(patient);
    expect((await api.call(`/Patient/${created.id}/_history/9`)).status).toBe(404);
    const unknownType = await api.call('/Spaceship/1');
    expect(unknownType.status).toBe(404);
    expect(unknownType.body.resourceType).toBe('OperationOutcome');
  });
});

describe('FHIR writes refuse bad input and leave the store unchanged', () => {
  const bad: Array<[string, RequestInit & { json?: unknown }, number]> = [
    ['unknown element', { method: 'POST', json: { ...patient, favouriteColour: 'blue' } }, 400],
    ['invalid date', { method: 'POST', json: { ...patient, birthDate: '1990-13-45' } }, 400],
    ['wrong type', { method: 'POST', json: { ...patient, gender: 42 } }, 400],
    ['code outside the value set', { method: 'POST', json: { ...patient, gender: 'robot' } }, 400],
    ['resourceType mismatch', { method: 'POST', json: { resourceType: 'Observation', status: 'final', code: { text: 'x' } } }, 400],
    ['array instead of object', { method: 'POST', json: [patient] }, 400],
    ['empty array', { method: 'POST', json: { ...patient, name: [] } }, 400],
    ['array in an array', { method: 'POST', json: { ...patient, address: [{ line: [['x']] }] } }, 400],
    ['array for a single value', { method: 'POST', json: { ...patient, address: [{ state: [] }] } }, 400],
    ['unpaired surrogate escape', { method: 'POST', body: '{"resourceType":"Patient","name":[{"family":"\\ud800"}]}', headers: { 'content-type': 'application/fhir+json' } }, 400],
    ['malformed JSON', { method: 'POST', body: '{"resourceType": "Patient",', headers: { 'content-type': 'application/fhir+json' } }, 400],
    ['XML', { method: 'POST', body: '<Patient/>', headers: { 'content-type': 'application/fhir+xml' } }, 415],
    ['huge body', { method: 'POST', json: { ...patient, text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${'x'.repeat(300_000)}</div>` } } }, 413],
  ];
  for (const [what, init, status] of bad) {
    it(`${what}: ${status}`, async () => {
      const before = await countPatients();
      const res = await api.call('/Patient', init);
      expect(res.status).toBe(status);
      expect(res.body.resourceType).toBe('OperationOutcome');
      expect(res.body.issue.length).toBeGreaterThan(0);
      expect(await countPatients()).toBe(before);
    });
  }

  it('names the element at fault', async () => {
    const res = await api.call('/Patient', { method: 'POST', json: { ...patient, birthDate: 'yesterday' } });
    expect(res.body.issue[0].expression).toEqual(['Patient.birthDate']);
  });

  it('refuses an update whose body id differs from the url', async () => {
    const created = await api.create(patient);
    const res = await api.call(`/Patient/${created.id}`, { method: 'PUT', json: { ...created, id: 'other' } });
    expect(res.status).toBe(400);
    expect((await api.call(`/Patient/other`)).status).toBe(404);
  });

  it('never answers a 5xx to odd requests', async () => {
    const paths = [
      '/Patient/%00', '/Patient/' + 'a'.repeat(500), '/Patient?_count=-1', '/Patient?_count=abc', '/Patient?birthdate=ge', '/Patient?_sort=nonsense',
      '/Patient?_include=Nope:x', '/Patient?_cursor=garbage', '/Patient?name:bogus=x', '/Observation?value-quantity=abc|x', '/Patient?_format=xml',
      '/Patient/x/_history/abc', '/Patient?general-practitioner=Spaceship/1', '/Observation?subject.nothing=1', '/Patient?_elements=a.b',
    ];
    for (const path of paths) {
      const res = await api.call(path);
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      expect(res.status, path).toBeLessThan(500);
      expect(res.body.resourceType, path).toBe('OperationOutcome');
    }
  });
});

describe('CapabilityStatement', () => {
  it('is public and describes what the server supports', async () => {
    const res = await api.pont.json('/api/fhir/R4/metadata');
    expect(res.status).toBe(200);
    expect(res.body.resourceType).toBe('CapabilityStatement');
    expect(res.body.fhirVersion).toBe('4.0.1');
    const patientCaps = res.body.rest[0].resource.find((r: any) => r.type === 'Patient');
    expect(patientCaps.searchParam.map((p: any) => p.name)).toEqual(expect.arrayContaining(['_id', 'name', 'birthdate', 'identifier']));
    expect(patientCaps.operation[0].name).toBe('everything');
    expect(res.body.rest[0].interaction.map((i: any) => i.code)).toEqual(['transaction', 'batch']);
  });
});
