import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from 'fhir-kit-client';
import type { Observation, Patient } from '@medplum/fhirtypes';
import { createTestClient, type TestClient, type TestServer } from './harness';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { applyResourcePatch, parsePatch } from '../src/fhir/patch';
import { FHIR_JSON, startTwoOrganisations, type FhirInit as Init, type TwoOrganisations } from './fhir-two-orgs';

/**
 * FHIR PATCH (issue 25 item 3): JSON Patch and FHIRPath Patch on PATCH Type/id, conditional PATCH Type?search and
 * transaction entries, through HTTP and the stock client fhir-kit-client. Two organisations: A writes, B (same
 * scopes, no consent) must neither see nor change A's data.
 */
let pont: TestServer, a: TestClient, b: TestClient, fhir: TwoOrganisations['fhir'];
beforeAll(async () => void ({ pont, a, b, fhir } = await startTwoOrganisations()));
afterAll(async () => void (await pont?.close()));
const JSON_PATCH = 'application/json-patch+json';
const jsonPatch = (who: TestClient, path: string, ops: unknown, headers: Record<string, string> = {}) => fhir(who, path, { method: 'PATCH', json: ops, type: JSON_PATCH, headers });
const fhirPathPatch = (who: TestClient, path: string, operations: unknown[], headers: Record<string, string> = {}) =>
  fhir(who, path, { method: 'PATCH', json: { resourceType: 'Parameters', parameter: operations }, headers });
/** One FHIRPath Patch operation: `parts` in order, each a name and its value part. */
const op = (type: string, path: string, extra: Record<string, unknown>[] = []) => ({
  name: 'operation',
  part: [{ name: 'type', valueCode: type }, { name: 'path', valueString: path }, ...extra],
});

async function createPatient(who = a, extra: Partial<Patient> = {}): Promise<Patient & { id: string }> {
  const res = await fhir(who, '/Patient', {
    method: 'POST',
    json: { resourceType: 'Patient', name: [{ family: 'Mbeki', given: ['Thandi', 'N'] }], gender: 'female', birthDate: '1980-02-03', ...extra },
  });
  expect(res.status).toBe(201);
  return res.body;
}
const read = async (id: string, type = 'Patient') => (await fhir(a, `/${type}/${id}`)).body;
const versions = async (id: string, type = 'Patient') => (await fhir(a, `/${type}/${id}/_history`)).body.entry.length as number;

describe('JSON Patch (application/json-patch+json)', () => {
  it('applies add, remove, replace, move, copy and test, as a new version (ETag, history, events)', async () => {
    const p = await createPatient();
    const res = await jsonPatch(a, `/Patient/${p.id}`, [
      { op: 'test', path: '/gender', value: 'female' },
      { op: 'replace', path: '/gender', value: 'other' },
      { op: 'add', path: '/name/0/given/-', value: 'Z' },
      { op: 'remove', path: '/name/0/given/1' },
      { op: 'move', from: '/name/0/given/1', path: '/name/0/given/0' },
      { op: 'copy', from: '/name/0/family', path: '/name/0/text' },
      { op: 'add', path: '/active', value: true },
    ]);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain(FHIR_JSON);
    expect(res.headers.get('etag')).toBe('W/"2"');
    expect(res.body).toMatchObject({ gender: 'other', active: true, name: [{ family: 'Mbeki', given: ['Z', 'Thandi'], text: 'Mbeki' }] });
    expect(await read(p.id)).toEqual(res.body);
    expect(await versions(p.id)).toBe(2);
    const { rows } = await pont.services.db.query<{ type: string }>(`SELECT type FROM events WHERE patient_id = $1 AND type LIKE 'patient.%' ORDER BY seq`, [p.id]);
    expect(rows.map((r) => r.type)).toEqual(['patient.created', 'patient.updated']);
  });

  it('concurrent patches of one resource each apply to the version before them: none lost, none refused', async () => {
    const p = await createPatient();
    const given = Array.from({ length: 8 }, (_, i) => `G${i}`);
    const results = await Promise.all(given.map((g) => jsonPatch(a, `/Patient/${p.id}`, [{ op: 'add', path: '/name/0/given/-', value: g }])));
    expect(results.map((r) => r.status)).toEqual(given.map(() => 200));
    const stored = await read(p.id);
    expect(stored.name[0].given.slice(2).sort()).toEqual(given);
    expect(stored.meta.versionId).toBe(String(given.length + 1));
    const { rows } = await pont.services.db.query(`SELECT 1 FROM audit_log WHERE operation = 'fhirPatch' AND action = 'U' AND outcome = 'success' AND $1 = ANY(patients)`, [p.id]);
    expect(rows).toHaveLength(given.length);
  });

  it('a failing test op is a 422 and changes nothing', async () => {
    const p = await createPatient();
    const res = await jsonPatch(a, `/Patient/${p.id}`, [
      { op: 'replace', path: '/gender', value: 'male' },
      { op: 'test', path: '/birthDate', value: '1999-01-01' },
    ]);
    expect(res.status).toBe(422);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(res.body.issue[0].diagnostics).toContain('operation 1');
    expect((await read(p.id)).gender).toBe('female');
    expect(await versions(p.id)).toBe(1);
  });

  it('a path that is not there is a 422', async () => {
    const p = await createPatient();
    expect((await jsonPatch(a, `/Patient/${p.id}`, [{ op: 'replace', path: '/maritalStatus/text', value: 'x' }])).status).toBe(422);
    expect((await jsonPatch(a, `/Patient/${p.id}`, [{ op: 'remove', path: '/telecom' }])).status).toBe(422);
  });

  it('a result that is no valid resource is a 422 OperationOutcome naming the problem; nothing stored, history unchanged', async () => {
    const p = await createPatient();
    for (const ops of [
      [{ op: 'replace', path: '/gender', value: 'robot' }],
      [{ op: 'add', path: '/birthDate', value: 'not a date' }],
      [{ op: 'add', path: '/name', value: 'a string where a list is due' }],
      [{ op: 'add', path: '/unknownElement', value: 1 }],
      [{ op: 'add', path: '/managingOrganization', value: { reference: 'Organization/does-not-exist' } }],
    ]) {
      const res = await jsonPatch(a, `/Patient/${p.id}`, ops);
      expect([400, 422], JSON.stringify(ops)).toContain(res.status);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
    // Invalid content (not a reference check): 422 by rule.
    expect((await jsonPatch(a, `/Patient/${p.id}`, [{ op: 'replace', path: '/gender', value: 'robot' }])).status).toBe(422);
    expect(await read(p.id)).toEqual(p);
    expect(await versions(p.id)).toBe(1);
  });

  it('refuses changes of id, resourceType and meta (400), and the whole document replaced by another id', async () => {
    const p = await createPatient();
    for (const ops of [
      [{ op: 'replace', path: '/id', value: 'other-id' }],
      [{ op: 'replace', path: '/resourceType', value: 'Practitioner' }],
      [{ op: 'replace', path: '/meta/versionId', value: '7' }],
      [{ op: 'add', path: '/meta/tag', value: [{ code: 'x' }] }],
      [{ op: 'remove', path: '/meta' }],
      [{ op: 'replace', path: '', value: { resourceType: 'Patient', id: 'elsewhere' } }],
    ]) {
      const res = await jsonPatch(a, `/Patient/${p.id}`, ops);
      expect(res.status, JSON.stringify(ops)).toBe(400);
      expect(res.body.issue[0].diagnostics).toMatch(/resourceType, id or meta/);
    }
    expect(await versions(p.id)).toBe(1);
  });

  it('honours If-Match: the current version patches, a stale one is a 412 and changes nothing', async () => {
    const p = await createPatient();
    const ok = await jsonPatch(a, `/Patient/${p.id}`, [{ op: 'replace', path: '/gender', value: 'male' }], { 'If-Match': 'W/"1"' });
    expect(ok.status).toBe(200);
    const stale = await jsonPatch(a, `/Patient/${p.id}`, [{ op: 'replace', path: '/gender', value: 'other' }], { 'If-Match': 'W/"1"' });
    expect(stale.status).toBe(412);
    expect(stale.body.resourceType).toBe('OperationOutcome');
    expect((await read(p.id)).gender).toBe('male');
    expect(await versions(p.id)).toBe(2);
  });

  it('answers 404 for an unknown resource, 410 for a deleted one, and honours Prefer: return=minimal', async () => {
    const replace = [{ op: 'replace', path: '/gender', value: 'male' }];
    expect((await jsonPatch(a, '/Patient/never-was', replace)).status).toBe(404);
    const p = await createPatient();
    expect((await fhir(a, `/Patient/${p.id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await jsonPatch(a, `/Patient/${p.id}`, replace)).status).toBe(410);
    const q = await createPatient();
    const minimal = await jsonPatch(a, `/Patient/${q.id}`, replace, { Prefer: 'return=minimal' });
    expect(minimal.status).toBe(200);
    expect(minimal.body).toBeUndefined();
    expect(minimal.headers.get('etag')).toBe('W/"2"');
  });
});

describe('FHIRPath Patch (Parameters)', () => {
  it('applies add, insert, delete, replace and move', async () => {
    const p = await createPatient(a, { identifier: [{ system: 'urn:x', value: '1' }, { system: 'urn:y', value: '2' }] });
    const res = await fhirPathPatch(a, `/Patient/${p.id}`, [
      op('add', 'Patient', [{ name: 'name', valueString: 'telecom' }, { name: 'value', valueContactPoint: { system: 'phone', value: '+237 1' } }]),
      op('add', 'Patient', [{ name: 'name', valueString: 'deceased' }, { name: 'value', valueBoolean: false }]),
      op('insert', 'Patient.identifier', [{ name: 'index', valueInteger: 0 }, { name: 'value', valueIdentifier: { system: 'urn:z', value: '0' } }]),
      op('delete', "Patient.identifier.where(system='urn:x')"),
      op('replace', 'Patient.birthDate', [{ name: 'value', valueDate: '1981-03-04' }]),
      op('replace', 'Patient.name.given[1]', [{ name: 'value', valueString: 'Nomsa' }]),
      op('move', 'Patient.identifier', [{ name: 'source', valueInteger: 1 }, { name: 'destination', valueInteger: 0 }]),
      op('add', 'Patient.name.first()', [{ name: 'name', valueString: 'period' }, { name: 'value', part: [{ name: 'start', valueDateTime: '2020-01-01' }] }]),
    ]);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({
      telecom: [{ system: 'phone', value: '+237 1' }],
      deceasedBoolean: false,
      birthDate: '1981-03-04',
      name: [{ family: 'Mbeki', given: ['Thandi', 'Nomsa'], period: { start: '2020-01-01' } }],
    });
    // The Health ID identifier Pont issued stays last.
    expect(res.body.identifier.slice(0, 2)).toEqual([{ system: 'urn:y', value: '2' }, { system: 'urn:z', value: '0' }]);
    expect(res.body.identifier).toHaveLength(3);
    expect(await read(p.id)).toEqual(res.body);
  });

  it('delete of a path that names nothing changes no element; a path naming several is a 422', async () => {
    const p = await createPatient();
    const none = await fhirPathPatch(a, `/Patient/${p.id}`, [op('delete', 'Patient.telecom')]);
    expect(none.status).toBe(200);
    const several = await fhirPathPatch(a, `/Patient/${p.id}`, [op('delete', 'Patient.name.given')]);
    expect(several.status).toBe(422);
    expect(several.body.issue[0].diagnostics).toContain('exactly one');
    expect((await fhirPathPatch(a, `/Patient/${p.id}`, [op('insert', 'Patient.name', [{ name: 'index', valueInteger: 5 }, { name: 'value', valueHumanName: { family: 'X' } }])])).status).toBe(422);
    expect((await fhirPathPatch(a, `/Patient/${p.id}`, [op('replace', 'Patient.telecom', [{ name: 'value', valueString: 'x' }])])).status).toBe(422);
  });

  it('an invalid result is a 422 and nothing is stored', async () => {
    const p = await createPatient();
    const res = await fhirPathPatch(a, `/Patient/${p.id}`, [op('replace', 'Patient.gender', [{ name: 'value', valueCode: 'robot' }])]);
    expect(res.status).toBe(422);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(await read(p.id)).toEqual(p);
    expect(await versions(p.id)).toBe(1);
  });

  it('malformed operations and unsupported paths are 400s', async () => {
    const p = await createPatient();
    for (const params of [
      [op('explode', 'Patient.gender')],
      [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }] }],
      [op('replace', 'Patient.gender')],
      [op('insert', 'Patient.name', [{ name: 'index', valueInteger: -1 }, { name: 'value', valueString: 'x' }])],
      [op('add', 'Patient', [{ name: 'name', valueString: '__proto__' }, { name: 'value', valueString: 'x' }])],
      [op('replace', 'Patient.__proto__', [{ name: 'value', valueString: 'x' }])],
      [op('replace', 'Patient.name.select(given)', [{ name: 'value', valueString: 'x' }])],
      [op('replace', 'Patient.((((', [{ name: 'value', valueString: 'x' }])],
      [op('replace', `Patient${'.name'.repeat(5000)}`, [{ name: 'value', valueString: 'x' }])],
      [op('delete', 'Patient')],
      [{ name: 'other', valueString: 'x' }],
      [],
    ]) {
      const res = await fhirPathPatch(a, `/Patient/${p.id}`, params);
      expect(res.status, JSON.stringify(params).slice(0, 200)).toBe(400);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
    expect(({} as Record<string, unknown>).x).toBeUndefined();
    expect(await versions(p.id)).toBe(1);
  });
});

describe('who may patch', () => {
  it('another organisation gets the 404 of a missing resource, audited, and changes nothing (patient data)', async () => {
    const p = await createPatient(a);
    const res = await jsonPatch(b, `/Patient/${p.id}`, [{ op: 'replace', path: '/gender', value: 'male' }]);
    expect(res.status).toBe(404);
    expect(await jsonPatch(b, '/Patient/never-was', [{ op: 'replace', path: '/gender', value: 'male' }])).toMatchObject({ status: 404 });
    const fp = await fhirPathPatch(b, `/Patient/${p.id}`, [op('replace', 'Patient.gender', [{ name: 'value', valueCode: 'male' }])]);
    expect(fp.status).toBe(404);
    expect(await read(p.id)).toEqual(p);
    const { rows } = await pont.services.db.query(`SELECT 1 FROM audit_log WHERE organization_id = 'org-b' AND outcome = 'minor-failure' AND operation = 'fhirPatch' AND $1 = ANY(patients)`, [p.id]);
    expect(rows.length).toBeGreaterThanOrEqual(2);
  });

  it('data it may read but did not write (an Organization) it still may not patch: 404, unchanged', async () => {
    const org = await fhir(a, '/Organization', { method: 'POST', json: { resourceType: 'Organization', name: 'Clinique A' } });
    expect((await fhir(b, `/Organization/${org.body.id}`)).status).toBe(200);
    const res = await jsonPatch(b, `/Organization/${org.body.id}`, [{ op: 'replace', path: '/name', value: 'Taken' }]);
    expect(res.status).toBe(404);
    // Whatever the patch: an invalid one or a failing test is the same 404, before anything is applied.
    expect((await jsonPatch(b, `/Organization/${org.body.id}`, [{ op: 'replace', path: '/name', value: 7 }])).status).toBe(404);
    expect((await jsonPatch(b, `/Organization/${org.body.id}`, [{ op: 'test', path: '/name', value: 'Other' }])).status).toBe(404);
    const { rows } = await pont.services.db.query(`SELECT 1 FROM audit_log WHERE organization_id = 'org-b' AND outcome = 'minor-failure' AND operation = 'fhirPatch' AND action = 'U'`);
    expect(rows.length).toBeGreaterThanOrEqual(3);
    expect((await read(org.body.id, 'Organization')).name).toBe('Clinique A');
  });

  it('conditional patch finds only what the caller may see', async () => {
    const p = await createPatient(a, { identifier: [{ system: 'urn:cond', value: 'only-a' }] });
    const foreign = await jsonPatch(b, '/Patient?identifier=urn:cond|only-a', [{ op: 'replace', path: '/gender', value: 'male' }]);
    expect(foreign.status).toBe(404);
    expect((await read(p.id)).gender).toBe('female');
  });

  it('needs fhir:write and the read scope of the type', async () => {
    const reader = await createTestClient(pont, ['fhir:read'], { organizationId: 'org-a' });
    const p = await createPatient(a);
    expect((await jsonPatch(reader, `/Patient/${p.id}`, [{ op: 'replace', path: '/gender', value: 'male' }])).status).toBe(403);
    // A patch reads what it changes (a test op tells its content): the write scope alone is not enough.
    const writer = await createTestClient(pont, ['fhir:write'], { organizationId: 'org-a' });
    expect((await jsonPatch(writer, `/Patient/${p.id}`, [{ op: 'test', path: '/gender', value: 'female' }])).status).toBe(403);
    expect(await versions(p.id)).toBe(1);
  });
});

describe('conditional patch', () => {
  it('patches the one match; none is a 404, several a 412, no criteria a 400', async () => {
    const p = await createPatient(a, { identifier: [{ system: 'urn:cp', value: 'one' }] });
    const res = await jsonPatch(a, '/Patient?identifier=urn:cp|one', [{ op: 'replace', path: '/gender', value: 'male' }]);
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(p.id);
    expect((await read(p.id)).gender).toBe('male');
    expect((await jsonPatch(a, '/Patient?identifier=urn:cp|none', [{ op: 'replace', path: '/gender', value: 'male' }])).status).toBe(404);
    await createPatient(a, { identifier: [{ system: 'urn:cp', value: 'two' }] });
    await createPatient(a, { identifier: [{ system: 'urn:cp', value: 'two' }] });
    expect((await jsonPatch(a, '/Patient?identifier=urn:cp|two', [{ op: 'replace', path: '/gender', value: 'male' }])).status).toBe(412);
    expect((await jsonPatch(a, '/Patient', [{ op: 'replace', path: '/gender', value: 'male' }])).status).toBe(400);
  });
});

describe('PATCH in Bundles', () => {
  const binary = (ops: unknown) => ({ resourceType: 'Binary', contentType: JSON_PATCH, data: Buffer.from(JSON.stringify(ops)).toString('base64') });
  const bundle = (who: TestClient, entry: unknown[], type = 'transaction') => fhir(who, '', { method: 'POST', json: { resourceType: 'Bundle', type, entry } });

  it('a transaction patches (Binary JSON Patch and Parameters FHIRPath Patch) atomically with its other entries', async () => {
    const p = await createPatient();
    const q = await createPatient(a, { identifier: [{ system: 'urn:tx', value: 'q' }] });
    const res = await bundle(a, [
      { fullUrl: 'urn:uuid:0b7e4a63-1111-4a4e-9c1b-2d2f0d7e1a11', resource: { resourceType: 'Organization', name: 'New' }, request: { method: 'POST', url: 'Organization' } },
      { resource: binary([{ op: 'add', path: '/managingOrganization', value: { reference: 'urn:uuid:0b7e4a63-1111-4a4e-9c1b-2d2f0d7e1a11' } }]), request: { method: 'PATCH', url: `Patient/${p.id}` } },
      {
        resource: { resourceType: 'Parameters', parameter: [op('replace', 'Patient.gender', [{ name: 'value', valueCode: 'male' }])] },
        request: { method: 'PATCH', url: 'Patient?identifier=urn:tx|q', ifMatch: 'W/"1"' },
      },
    ]);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.entry.map((e: any) => e.response.status)).toEqual(['201 Created', '200 OK', '200 OK']);
    const orgId = res.body.entry[0].response.location.split('/Organization/')[1].split('/')[0];
    expect((await read(p.id)).managingOrganization.reference).toBe(`Organization/${orgId}`);
    expect((await read(q.id)).gender).toBe('male');
  });

  it('a transaction whose other entry fails keeps nothing of its patch', async () => {
    const p = await createPatient();
    const res = await bundle(a, [
      { resource: binary([{ op: 'replace', path: '/gender', value: 'male' }]), request: { method: 'PATCH', url: `Patient/${p.id}` } },
      { resource: { resourceType: 'Observation', status: 'not-a-status', code: { text: 'x' } }, request: { method: 'POST', url: 'Observation' } },
    ]);
    expect(res.status).toBe(400);
    expect(await read(p.id)).toEqual(p);
    expect(await versions(p.id)).toBe(1);
  });

  it('a failing patch entry fails the transaction (422), a foreign one 404; in a batch each entry answers alone', async () => {
    const p = await createPatient();
    const failing = await bundle(a, [
      { resource: { resourceType: 'Organization', name: 'Never kept' }, request: { method: 'POST', url: 'Organization' } },
      { resource: binary([{ op: 'test', path: '/gender', value: 'male' }]), request: { method: 'PATCH', url: `Patient/${p.id}` } },
    ]);
    expect(failing.status).toBe(422);
    expect(failing.body.issue[0].diagnostics ?? failing.body.issue[0].details.text).toContain('entry[1]');
    expect((await fhir(a, '/Organization?name:exact=Never kept')).body.total).toBe(0);
    const foreign = await bundle(b, [{ resource: binary([{ op: 'replace', path: '/gender', value: 'male' }]), request: { method: 'PATCH', url: `Patient/${p.id}` } }]);
    expect(foreign.status).toBe(404);
    const batch = await bundle(a, [
      { resource: binary([{ op: 'replace', path: '/gender', value: 'other' }]), request: { method: 'PATCH', url: `Patient/${p.id}` } },
      { resource: binary([{ op: 'replace', path: '/gender', value: 'robot' }]), request: { method: 'PATCH', url: `Patient/${p.id}` } },
      { resource: { resourceType: 'Patient' }, request: { method: 'PATCH', url: `Patient/${p.id}` } },
    ], 'batch');
    expect(batch.status).toBe(200);
    expect(batch.body.entry.map((e: any) => e.response.status)).toEqual(['200 OK', '422', '400']);
    expect((await read(p.id)).gender).toBe('other');
    expect(await versions(p.id)).toBe(2);
  });
});

describe('hostile patches: 400/413/415/422, never a 500', () => {
  it('a 100,000-operation array, a non-array body, wrong types, deep and prototype paths, invalid UTF-8', async () => {
    const p = await createPatient();
    const huge = Array.from({ length: 100_000 }, () => ({ op: 'test', path: '/gender', value: 'female' }));
    const cases: Array<{ init: Init; expect: number[] }> = [
      { init: { json: huge, type: JSON_PATCH }, expect: [400, 413] },
      { init: { json: { op: 'replace', path: '/gender', value: 'male' }, type: JSON_PATCH }, expect: [400] },
      { init: { json: 'replace', type: JSON_PATCH }, expect: [400] },
      { init: { json: [], type: JSON_PATCH }, expect: [400] },
      { init: { json: [null], type: JSON_PATCH }, expect: [400] },
      { init: { json: [{ op: 'replace', path: 5, value: 1 }], type: JSON_PATCH }, expect: [400] },
      { init: { json: [{ op: 'frobnicate', path: '/gender' }], type: JSON_PATCH }, expect: [400] },
      { init: { json: [{ op: 'replace', path: 'gender', value: 'male' }], type: JSON_PATCH }, expect: [400] },
      { init: { json: [{ op: 'add', path: '/__proto__/polluted', value: true }], type: JSON_PATCH }, expect: [400] },
      { init: { json: [{ op: 'add', path: '/name/0/constructor/prototype/polluted', value: true }], type: JSON_PATCH }, expect: [400] },
      { init: { json: [{ op: 'move', from: '/__proto__', path: '/x' }], type: JSON_PATCH }, expect: [400] },
      { init: { raw: '[{"op":"add","path":"/name/0/extension","value":[{"url":"urn:u","valueString":"v","__proto__":{"polluted":true}}]}]', type: JSON_PATCH }, expect: [400] },
      { init: { raw: '{"resourceType":"Parameters","parameter":[{"name":"operation","part":[{"name":"type","valueCode":"add"},{"name":"path","valueString":"Patient"},{"name":"name","valueString":"extension"},{"name":"value","valueExtension":{"url":"urn:u","__proto__":{"polluted":true}}}]}]}' }, expect: [400] },
      { init: { json: [{ op: 'add', path: '/a'.repeat(2000), value: 1 }], type: JSON_PATCH }, expect: [400] },
      { init: { json: [{ op: 'add', path: '/name/0/x'.repeat(100), value: 1 }], type: JSON_PATCH }, expect: [400] },
      { init: { json: [{ op: 'add', path: '/extension', value: JSON.parse('['.repeat(60) + ']'.repeat(60)) }], type: JSON_PATCH }, expect: [400, 422] },
      { init: { json: [{ op: 'replace', path: '/gender' }], type: JSON_PATCH }, expect: [400] },
      // Each copy doubles the list: bounded before it exhausts memory.
      { init: { json: Array.from({ length: 60 }, () => ({ op: 'copy', from: '/name', path: '/name/-' })), type: JSON_PATCH }, expect: [400] },
      { init: { json: { resourceType: 'Parameters', parameter: [op('replace', `Patient.where(${'('.repeat(400)}true${')'.repeat(400)})`, [{ name: 'value', valueCode: 'x' }])] } }, expect: [400, 422] },
      { init: { json: [{ op: 'replace', path: '/gender', value: 'male' }], type: FHIR_JSON }, expect: [400] },
      { init: { json: { resourceType: 'Patient' }, type: FHIR_JSON }, expect: [400] },
      { init: { json: [{ op: 'replace', path: '/gender', value: 'male' }], type: 'text/plain' }, expect: [415] },
      { init: { raw: Buffer.from([0x5b, 0x7b, 0x22, 0x6f, 0x70, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d, 0x5d]), type: JSON_PATCH }, expect: [400] },
      { init: { raw: '[{"op":"replace","path":"/gender","value":"male"', type: JSON_PATCH }, expect: [400] },
      { init: {}, expect: [400] },
    ];
    for (const c of cases) {
      const res = await fhir(a, `/Patient/${p.id}`, { method: 'PATCH', ...c.init });
      expect(c.expect, JSON.stringify(c.init.json ?? c.init.raw ?? '').slice(0, 120)).toContain(res.status);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
    expect(await read(p.id)).toEqual(p);
    // Indexers nest without dots: a long chain is evaluated without exhausting the stack ([0] of one item is that item).
    const indexed = await fhirPathPatch(a, `/Patient/${p.id}`, [op('delete', `Patient.telecom${'[0]'.repeat(300)}`)]);
    expect(indexed.status).toBe(200);
  });
});

describe('the stock client fhir-kit-client', () => {
  it('patches with JSON Patch and sees a failed test as an error', async () => {
    const client = new Client({ baseUrl: `${pont.url}/api/fhir/R4`, bearerToken: a.access_token });
    const p = await createPatient();
    const patched = (await client.patch({ resourceType: 'Patient', id: p.id, jsonPatch: [{ op: 'replace', path: '/gender', value: 'male' }] })) as Patient;
    expect(patched.gender).toBe('male');
    expect(patched.meta?.versionId).toBe('2');
    await expect(client.patch({ resourceType: 'Patient', id: p.id, jsonPatch: [{ op: 'test', path: '/gender', value: 'female' }] })).rejects.toMatchObject({ response: { status: 422 } });
    await expect(
      client.patch({ resourceType: 'Patient', id: p.id, jsonPatch: [{ op: 'replace', path: '/gender', value: 'other' }], options: { headers: { 'If-Match': 'W/"1"' } } }),
    ).rejects.toMatchObject({ response: { status: 412 } });
  });

  it('sends a FHIRPath Patch with its raw request', async () => {
    const client = new Client({ baseUrl: `${pont.url}/api/fhir/R4`, bearerToken: a.access_token });
    const obs = await fhir(a, '/Observation', { method: 'POST', json: { resourceType: 'Observation', status: 'preliminary', code: { text: 'Hb' }, valueQuantity: { value: 11, unit: 'g/dL' } } satisfies Observation });
    expect(obs.status).toBe(201);
    const patched = (await client.request(`Observation/${obs.body.id}`, {
      method: 'PATCH',
      body: { resourceType: 'Parameters', parameter: [op('replace', 'Observation.status', [{ name: 'value', valueCode: 'final' }]), op('replace', 'Observation.value.value', [{ name: 'value', valueDecimal: 12.5 }])] },
      options: { headers: { 'Content-Type': FHIR_JSON } },
    })) as unknown as Observation;
    expect(patched).toMatchObject({ status: 'final', valueQuantity: { value: 12.5, unit: 'g/dL' } });
    // Replacing a choice element with a value of another type renames it.
    const retyped = await fhirPathPatch(a, `/Observation/${obs.body.id}`, [op('replace', 'Observation.value', [{ name: 'value', valueString: 'haemolysed' }])]);
    expect(retyped.status).toBe(200);
    expect(retyped.body.valueString).toBe('haemolysed');
    expect(retyped.body.valueQuantity).toBeUndefined();
  });
});

describe('the CapabilityStatement', () => {
  it('lists patch where update is listed', async () => {
    const res = await pont.json('/api/fhir/R4/metadata');
    const byType = new Map(res.body.rest[0].resource.map((r: any) => [r.type, r.interaction.map((i: any) => i.code)]));
    expect(byType.get('Patient')).toContain('patch');
    expect(byType.get('AuditEvent')).not.toContain('patch');
    expect(byType.get('Consent')).not.toContain('patch');
  });
});

describe('the patch module (src/fhir/patch.ts)', () => {
  const fhirPath = (...operations: unknown[]) => parsePatch(FHIR_JSON, { resourceType: 'Parameters', parameter: operations });
  const base: Patient = { resourceType: 'Patient', id: 'p1', meta: { versionId: '3' }, name: [{ family: 'A', given: ['x'] }], contact: [{ name: { family: 'C' } }] };

  it('patches a copy: the current version is never changed, even by a patch that fails', () => {
    loadFhirDefinitions();
    const current = structuredClone(base);
    const out = applyResourcePatch(current, parsePatch(JSON_PATCH, [{ op: 'replace', path: '/name/0/family', value: 'B' }]));
    expect(out.name![0]!.family).toBe('B');
    expect(current).toEqual(base);
    expect(() => applyResourcePatch(current, parsePatch(JSON_PATCH, [{ op: 'remove', path: '/name/0/given' }, { op: 'test', path: '/id', value: 'p2' }]))).toThrow(/test failed/);
    expect(current).toEqual(base);
  });

  it('knows from the definitions which elements repeat, in backbone elements too, and names choice keys by type', () => {
    loadFhirDefinitions();
    const out = applyResourcePatch(
      base,
      fhirPath(
        op('add', 'Patient.contact[0]', [{ name: 'name', valueString: 'telecom' }, { name: 'value', valueContactPoint: { system: 'phone', value: '1' } }]),
        op('add', 'Patient.contact[0]', [{ name: 'name', valueString: 'gender' }, { name: 'value', valueCode: 'male' }]),
        op('add', 'Patient', [{ name: 'name', valueString: 'multipleBirth' }, { name: 'value', valueInteger: 2 }]),
        op('replace', "Patient.name.where(family = 'A').given[0]", [{ name: 'value', valueString: 'y' }]),
      ),
    );
    expect(out.contact![0]).toEqual({ name: { family: 'C' }, telecom: [{ system: 'phone', value: '1' }], gender: 'male' });
    expect(out.multipleBirthInteger).toBe(2);
    expect(out.name![0]!.given).toEqual(['y']);
  });

  it('tells a malformed patch (400) from one this resource cannot take (422)', () => {
    loadFhirDefinitions();
    const status = (fn: () => unknown) => {
      try {
        fn();
        return 200;
      } catch (err) {
        return (err as { status: number }).status;
      }
    };
    expect(status(() => parsePatch(JSON_PATCH, { op: 'add' }))).toBe(400);
    expect(status(() => parsePatch(FHIR_JSON, [{ op: 'add', path: '/a', value: 1 }]))).toBe(400);
    expect(status(() => applyResourcePatch(base, parsePatch(JSON_PATCH, [{ op: 'add', path: '/name/7/family', value: 'x' }])))).toBe(422);
    expect(status(() => applyResourcePatch(base, fhirPath(op('replace', 'Patient.name.given.exists()', [{ name: 'value', valueBoolean: true }]))))).toBe(400);
    expect(status(() => applyResourcePatch(base, fhirPath(op('move', 'Patient.name', [{ name: 'source', valueInteger: 0 }, { name: 'destination', valueInteger: 3 }]))))).toBe(422);
    expect(status(() => applyResourcePatch(base, fhirPath(op('insert', 'Patient.name.given', [{ name: 'index', valueInteger: 0 }, { name: 'value', valueString: 'z' }]))))).toBe(200);
  });

  it('bounds the where(…) evaluations of one patch (1000 operations over a list of 10,000 would take minutes)', () => {
    loadFhirDefinitions();
    const many: Patient = { ...base, identifier: Array.from({ length: 1000 }, (_, i) => ({ system: 'urn:n', value: String(i) })) };
    const search = (n: number) => fhirPath(...Array.from({ length: n }, () => op('delete', "Patient.identifier.where(value = 'none')")));
    const started = performance.now();
    expect(applyResourcePatch(many, search(100)).identifier).toHaveLength(1000);
    const elapsed = performance.now() - started;
    expect(() => applyResourcePatch(many, search(101))).toThrow(/more than 100000 times/);
    expect(elapsed).toBeLessThan(10_000);
  });
});
