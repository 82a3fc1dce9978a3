import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { Bundle, Patient } from '@medplum/fhirtypes';
import { createClient } from '../src/auth/clients';
import { openDatabase } from '../src/db/open';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { backend, createScratchDatabase, createTestClient } from './harness';
import { startFhirApi, type FhirTestApi } from './fhir-helpers';
import { startPontProcess, stopPontProcess, type PontProcess } from './webhooks-support';

let api: FhirTestApi;
beforeAll(async () => {
  api = await startFhirApi();
});
afterAll(async () => {
  await api?.close();
});

const ROUNDS = 4;
const PARALLEL = 8;
const system = 'https://hospital.example/mrn';

/** PARALLEL conditional creates of the same patient, sent at once through `send`; returns the statuses. */
async function race(send: (mrn: string) => Promise<number>, mrn: string): Promise<number[]> {
  return Promise.all(Array.from({ length: PARALLEL }, () => send(mrn)));
}

const patientWith = (mrn: string): Patient => ({ resourceType: 'Patient', identifier: [{ system, value: mrn }], name: [{ family: 'Race', given: [mrn] }] });

describe('conditional writes are race-free (defect: concurrent If-None-Exist made 5-7 duplicates on PostgreSQL)', () => {
  it('parallel creates with the same If-None-Exist make exactly one resource; the others answer 200 with it', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const mrn = `race-${round}-${Date.now()}`;
      const statuses = await race(
        async (m) => (await api.call('/Patient', { method: 'POST', json: patientWith(m), headers: { 'if-none-exist': `identifier=${system}|${m}` } })).status,
        mrn,
      );
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 200)).toHaveLength(PARALLEL - 1);
      expect((await api.call(`/Patient?identifier=${system}|${mrn}&_summary=count`)).body.total).toBe(1);
    }
  });

  it('so do transaction ifNoneExist entries and conditional updates (PUT Type?criteria, in a Bundle or on its own)', async () => {
    const mrn = `tx-${Date.now()}`;
    const bundle = (m: string): Bundle => ({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [{ resource: patientWith(m), request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=${system}|${m}` } }],
    });
    const statuses = await race(async (m) => (await api.call('', { method: 'POST', json: bundle(m) })).status, mrn);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect((await api.call(`/Patient?identifier=${system}|${mrn}&_summary=count`)).body.total).toBe(1);

    const upd = `put-${Date.now()}`;
    const puts = await race(async (m) => (await api.call(`/Patient?identifier=${system}|${m}`, { method: 'PUT', json: patientWith(m) })).status, upd);
    expect(puts.filter((s) => s === 201)).toHaveLength(1);
    expect(puts.filter((s) => s === 200)).toHaveLength(PARALLEL - 1);
    const found = await api.searchAll(`/Patient?identifier=${system}|${upd}`);
    expect(found).toHaveLength(1);
    expect(found[0]!.meta!.versionId).toBe(String(PARALLEL));
  });

  it('refuses criteria that match several resources (412) and a body whose id is not the match (400)', async () => {
    const mrn = `twice-${Date.now()}`;
    await api.create(patientWith(mrn));
    await api.create(patientWith(mrn));
    expect((await api.call('/Patient', { method: 'POST', json: patientWith(mrn), headers: { 'if-none-exist': `identifier=${system}|${mrn}` } })).status).toBe(412);
    expect((await api.call(`/Patient?identifier=${system}|${mrn}`, { method: 'PUT', json: patientWith(mrn) })).status).toBe(412);
    const one = `one-${Date.now()}`;
    await api.create(patientWith(one));
    expect((await api.call(`/Patient?identifier=${system}|${one}`, { method: 'PUT', json: { ...patientWith(one), id: 'another-id' } })).status).toBe(400);
    expect((await api.call('/Patient', { method: 'PUT', json: patientWith(one) })).status).toBe(400);
  });
});

describe.runIf(backend === 'postgres')('conditional creates across two server processes on one PostgreSQL', () => {
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
  let processes: PontProcess[] = [];
  let token = '';

  beforeAll(async () => {
    scratch = await createScratchDatabase({ migrated: true });
    // Two processes behind one public URL, as behind a load balancer: tokens of one are good at the other.
    const env = { PONT_PUBLIC_URL: 'http://pont.test' };
    processes = [await startPontProcess(scratch.url, env)];
    processes.push(await startPontProcess(scratch.url, env));
    const db = await openDatabase({ databaseUrl: scratch.url });
    const client = await createClient(db, { name: 'race', organizationId: 'org-race', scopes: ['fhir:read', 'fhir:write'] });
    await db.close();
    const res = await fetch(`${processes[0]!.url}/api/v1/connect/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
    });
    token = ((await res.json()) as { access_token: string }).access_token;
  }, 120_000);
  afterAll(async () => {
    for (const p of processes) await stopPontProcess(p, 'SIGTERM');
    await scratch?.drop();
  });

  it('exactly one Patient per round, whichever process each request reaches', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const mrn = `two-${round}-${Date.now()}`;
      let n = 0;
      const statuses = await race(async (m) => {
        const url = processes[n++ % 2]!.url;
        const res = await fetch(`${url}/api/fhir/R4/Patient`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json', 'if-none-exist': `identifier=${system}|${m}` },
          body: JSON.stringify(patientWith(m)),
        });
        return res.status;
      }, mrn);
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      const count = await fetch(`${processes[1]!.url}/api/fhir/R4/Patient?identifier=${system}|${mrn}&_summary=count`, { headers: { authorization: `Bearer ${token}` } });
      expect(((await count.json()) as Bundle).total).toBe(1);
    }
  }, 120_000);
});

describe('referential integrity (defect: a Condition about a Patient that does not exist was stored)', () => {
  const condition = (subject: string) => ({
    resourceType: 'Condition',
    clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }] },
    code: { text: 'Malaria' },
    subject: { reference: subject },
  });

  it('refuses a reference to a resource that does not exist, naming the element', async () => {
    const res = await api.call('/Condition', { method: 'POST', json: condition('Patient/no-such-patient') });
    expect(res.status).toBe(400);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(res.body.issue[0].expression).toEqual(['Condition.subject']);
    expect(res.body.issue[0].diagnostics).toContain('Patient/no-such-patient');
    expect((await api.call('/Condition?_summary=count')).body.total).toBe(0);
  });

  it('checks transactions after urn:uuid rewriting, against their own entries too', async () => {
    const ok: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { fullUrl: 'urn:uuid:0b7b9a0e-1111-4a3e-9f00-000000000001', resource: { resourceType: 'Patient', name: [{ family: 'Tx' }] }, request: { method: 'POST', url: 'Patient' } },
        { resource: condition('urn:uuid:0b7b9a0e-1111-4a3e-9f00-000000000001') as any, request: { method: 'POST', url: 'Condition' } },
      ],
    };
    expect((await api.call('', { method: 'POST', json: ok })).status).toBe(200);
    const bad: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { resource: { resourceType: 'Patient', name: [{ family: 'Kept?' }] }, request: { method: 'POST', url: 'Patient' } },
        { resource: condition('Patient/missing') as any, request: { method: 'POST', url: 'Condition' } },
        { resource: condition('urn:uuid:0b7b9a0e-1111-4a3e-9f00-00000000dead') as any, request: { method: 'POST', url: 'Condition' } },
      ],
    };
    const refused = await api.call('', { method: 'POST', json: bad });
    expect(refused.status).toBe(400);
    expect(refused.body.issue[0].diagnostics).toMatch(/entry\[1\]: Condition.subject refers to Patient\/missing/);
    expect((await api.call('/Patient?family=Kept')).body.total).toBe(0);
    const urn = await api.call('', { method: 'POST', json: { ...bad, entry: [bad.entry![2]] } });
    expect(urn.status).toBe(400);
    expect(urn.body.issue[0].diagnostics).toContain('urn:uuid:0b7b9a0e-1111-4a3e-9f00-00000000dead');
  });

  it('refuses to delete what a live resource refers to (409), unless the referrer goes in the same transaction', async () => {
    const patient = await api.create({ resourceType: 'Patient', name: [{ family: 'Held' }] });
    const held = await api.create(condition(`Patient/${patient.id}`) as any);
    const refused = await api.call(`/Patient/${patient.id}`, { method: 'DELETE' });
    expect(refused.status).toBe(409);
    expect(refused.body.issue[0].diagnostics).toContain(`Condition/${held.id}`);
    expect((await api.call(`/Patient/${patient.id}`)).status).toBe(200);
    const both: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { request: { method: 'DELETE', url: `Patient/${patient.id}` } },
        { request: { method: 'DELETE', url: `Condition/${held.id}` } },
      ],
    };
    expect((await api.call('', { method: 'POST', json: both })).status).toBe(200);
    expect((await api.call(`/Patient/${patient.id}`)).status).toBe(410);
  });
});

describe('the Health ID is Pont’s, and the registry follows the Patient on every path (defect: a PUT dropped it)', () => {
  let connect: Awaited<ReturnType<typeof createTestClient>>;
  beforeAll(async () => {
    connect = await createTestClient(api.pont, ['health_id:verify']);
  });
  const resolve = (json: unknown) => api.pont.json('/api/v1/connect/patients/resolve', { method: 'POST', json, headers: connect.headers });
  const verify = (healthId: string) => api.pont.json(`/api/v1/connect/patients/verify/${healthId}`, { headers: connect.headers });
  const healthIdOf = (p: Patient) => p.identifier?.find((i) => i.system === HEALTH_ID_SYSTEM)?.value;

  it('a PUT without the Health ID keeps it: FHIR search by it still finds the patient and verify shows the new names', async () => {
    const created = await resolve({ first_name: 'Amina', last_name: 'Keep', date_of_birth: '1990-04-01', sex: 'female' });
    const healthId = created.body.health_id as string;
    const [stored] = await api.searchAll(`/Patient?identifier=${HEALTH_ID_SYSTEM}|${healthId}`);
    const put = await api.call(`/Patient/${stored!.id}`, {
      method: 'PUT',
      json: { resourceType: 'Patient', id: stored!.id, name: [{ use: 'official', family: 'Kept', given: ['Amina'] }], birthDate: '1990-04-01', gender: 'female' },
    });
    expect(put.status).toBe(200);
    expect(healthIdOf(put.body)).toBe(healthId);
    expect(await api.searchAll(`/Patient?identifier=${HEALTH_ID_SYSTEM}|${healthId}`)).toHaveLength(1);
    const verified = await verify(healthId);
    expect(verified.body.patient).toMatchObject({ first_name: 'Amina', last_name: 'Kept' });
    // The match key moved with the demographics: resolving by the new ones finds the same Health ID.
    const again = await resolve({ first_name: 'Amina', last_name: 'Kept', date_of_birth: '1990-04-01', sex: 'female' });
    expect(again.body).toMatchObject({ status: 'found', health_id: healthId });
  });

  it('refuses a changed or foreign Health ID, and an invalid one', async () => {
    const a = (await resolve({ first_name: 'Bea', last_name: 'One', date_of_birth: '1991-01-01' })).body.health_id as string;
    const b = (await resolve({ first_name: 'Bea', last_name: 'Two', date_of_birth: '1991-01-01' })).body.health_id as string;
    const [stored] = await api.searchAll(`/Patient?identifier=${HEALTH_ID_SYSTEM}|${a}`);
    const withId = (value: string) => ({ ...stored, identifier: [{ system: HEALTH_ID_SYSTEM, value }] });
    expect((await api.call(`/Patient/${stored!.id}`, { method: 'PUT', json: withId(b) })).status).toBe(400);
    expect((await api.call('/Patient', { method: 'POST', json: { resourceType: 'Patient', identifier: [{ system: HEALTH_ID_SYSTEM, value: b }] } })).status).toBe(409);
    expect((await api.call('/Patient', { method: 'POST', json: { resourceType: 'Patient', identifier: [{ system: HEALTH_ID_SYSTEM, value: 'CM482930174620' }] } })).status).toBe(400);
  });

  it('concurrent PUTs creating one Patient id: one creates it with a Health ID, the others update it, none is a 500 (defect: the losers broke the registry’s one-ID-a-patient index)', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const id = `put-race-${round}-${randomBytes(4).toString('hex')}`;
      const put = (given: string) => api.call(`/Patient/${id}`, { method: 'PUT', json: { resourceType: 'Patient', id, name: [{ family: 'Race', given: [given] }] } });
      const answers = await Promise.all(Array.from({ length: PARALLEL }, (_, i) => put(`n${i}`)));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
      const healthIds = new Set(answers.map((a) => healthIdOf(a.body)));
      expect(healthIds.size).toBe(1);
      const [healthId] = [...healthIds];
      expect((await api.searchAll(`/Patient?identifier=${HEALTH_ID_SYSTEM}|${healthId}`)).map((p) => p.id)).toEqual([id]);
    }
  });

  it('a deleted Patient created again by PUT gets its Health ID back (defect: a 500, the registry still held it)', async () => {
    const id = `recreated-${randomBytes(4).toString('hex')}`;
    const put = (family: string) => api.call(`/Patient/${id}`, { method: 'PUT', json: { resourceType: 'Patient', id, name: [{ family }] } });
    const first = await put('Before');
    expect(first.status).toBe(201);
    expect((await api.call(`/Patient/${id}`, { method: 'DELETE' })).status).toBe(204);
    const again = await put('After');
    expect(again.status).toBe(201);
    expect(healthIdOf(again.body)).toBe(healthIdOf(first.body));
  });

  it('a Patient created through FHIR gets a Health ID, a registry row and a match key', async () => {
    const res = await api.call('/Patient', {
      method: 'POST',
      json: { resourceType: 'Patient', name: [{ use: 'official', family: 'Fhirborn', given: ['Chidi'] }], birthDate: '1985-06-15', gender: 'male' },
    });
    expect(res.status).toBe(201);
    const healthId = healthIdOf(res.body)!;
    expect(healthId).toMatch(/^CM\d{12}$/);
    expect((await verify(healthId)).body.patient).toMatchObject({ first_name: 'Chidi', last_name: 'Fhirborn', date_of_birth: '1985-06-15' });
    const resolved = await resolve({ first_name: 'chidi', last_name: 'FHIRBORN', date_of_birth: '1985-06-15', sex: 'male' });
    expect(resolved.body).toMatchObject({ status: 'found', health_id: healthId });
  });
});

describe('long values are stored and searchable (defect: a 6.5 KB family name answered 500, index row size exceeds btree maximum)', () => {
  /** Incompressible text: PostgreSQL compresses index tuples, so a repeated character would not show the defect. */
  const incompressible = (chars: number) => randomBytes(chars).toString('base64').replace(/[^A-Za-z]/g, 'x').slice(0, chars);

  it('a Patient with a 6.5 KB family name is stored and found by prefix and exactly', async () => {
    const family = incompressible(6_500);
    const patient = await api.create<Patient>({ resourceType: 'Patient', name: [{ family, given: ['Long'] }] });
    const byPrefix = await api.call(`/Patient?family=${family.slice(0, 40)}`);
    expect(byPrefix.body.entry.map((e: any) => e.resource.id)).toEqual([patient.id]);
    const exact = await api.call(`/Patient?family:exact=${family}`);
    expect(exact.status).toBe(200);
    expect(exact.body.entry.map((e: any) => e.resource.id)).toEqual([patient.id]);
    const longPrefix = await api.call(`/Patient?family=${family.slice(0, 3_000)}`);
    expect(longPrefix.body.entry.map((e: any) => e.resource.id)).toEqual([patient.id]);
  });

  it('a uri and an external reference of 5 KB are stored and found', async () => {
    const url = `https://example.org/fhir/ValueSet/${incompressible(5_000)}`;
    const created = await api.call('/ValueSet', { method: 'POST', json: { resourceType: 'ValueSet', status: 'active', url } });
    expect(created.status).toBe(201);
    const found = await api.call(`/ValueSet?url=${encodeURIComponent(url)}`);
    expect(found.body.entry.map((e: any) => e.resource.id)).toEqual([created.body.id]);
    // An external reference as long.
    const reference = `https://other.example/fhir/Group/${incompressible(5_000)}`;
    const list = await api.call('/List', { method: 'POST', json: { resourceType: 'List', status: 'current', mode: 'working', subject: { reference } } });
    expect(list.status).toBe(201);
    const byRef = await api.call(`/List?subject=${encodeURIComponent(reference)}`);
    expect(byRef.body.entry.map((e: any) => e.resource.id)).toEqual([list.body.id]);
  });
});
