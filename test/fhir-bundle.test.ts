import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bundle, Organization } from '@medplum/fhirtypes';
import { startFhirApi, type FhirTestApi } from './fhir-helpers';

let api: FhirTestApi;
beforeAll(async () => {
  api = await startFhirApi();
});
afterAll(async () => {
  await api?.close();
});

const post = (json: unknown, headers: Record<string, string> = {}) => api.call('', { method: 'POST', json, headers });
const count = async (query: string) => (await api.call(`${query}${query.includes('?') ? '&' : '?'}_summary=count`)).body.total as number;

describe('transaction bundles', () => {
  it('writes every entry atomically and rewrites urn:uuid references', async () => {
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          fullUrl: 'urn:uuid:61ebe359-bfdc-4613-8bf2-c5e300945f0a',
          resource: { resourceType: 'Patient', name: [{ family: 'Transact' }], identifier: [{ system: 'urn:t', value: 'tx-1' }] },
          request: { method: 'POST', url: 'Patient' },
        },
        {
          fullUrl: 'urn:uuid:88f151c0-a954-468a-88f0-f9a6c9a49f6f',
          resource: {
            resourceType: 'Encounter',
            status: 'finished',
            class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
            subject: { reference: 'urn:uuid:61ebe359-bfdc-4613-8bf2-c5e300945f0a' },
          },
          request: { method: 'POST', url: 'Encounter' },
        },
        { resource: { resourceType: 'Organization', id: 'org-tx', name: 'Tx Org' }, request: { method: 'PUT', url: 'Organization/org-tx' } },
      ],
    };
    const res = await post(bundle, { Prefer: 'return=representation' });
    expect(res.status).toBe(200);
    expect(res.body.type).toBe('transaction-response');
    expect(res.body.entry.map((e: any) => e.response.status)).toEqual(['201 Created', '201 Created', '201 Created']);
    const patientId = res.body.entry[0].resource.id;
    expect(res.body.entry[1].resource.subject.reference).toBe(`Patient/${patientId}`);
    expect(res.body.entry[0].response.location).toMatch(new RegExp(`/Patient/${patientId}/_history/1$`));
    expect(await count(`/Encounter?subject=Patient/${patientId}`)).toBe(1);
  });

  it('keeps nothing when one entry fails, and says which', async () => {
    const before = await count('/Patient');
    const res = await post({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { resource: { resourceType: 'Patient', name: [{ family: 'Never' }] }, request: { method: 'POST', url: 'Patient' } },
        { resource: { resourceType: 'Patient', birthDate: 'not-a-date' }, request: { method: 'POST', url: 'Patient' } },
      ],
    });
    expect(res.status).toBe(400);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(res.body.issue[0].diagnostics).toContain('entry[1]');
    expect(res.body.issue[0].expression).toEqual(['Patient.birthDate']);
    expect(await count('/Patient')).toBe(before);
    expect(await count('/Patient?family=Never')).toBe(0);
  });

  it('in a large bundle (checked a slice at a time) reports the first bad entry, whatever is wrong with it', async () => {
    const before = await count('/Organization');
    const org = (i: number) => ({ resource: { resourceType: 'Organization', name: `Many ${i}` }, request: { method: 'POST', url: 'Organization' } });
    const entries: any[] = Array.from({ length: 40 }, (_, i) => org(i));
    entries[23] = { resource: { resourceType: 'Organization', name: 'Bad', active: 'yes' }, request: { method: 'POST', url: 'Organization' } };
    entries[31] = { resource: { resourceType: 'Organization', id: 'absent-org', name: 'Gone' }, request: { method: 'PUT', url: 'Organization/absent-org', ifMatch: 'W/"7"' } };
    const res = await post({ resourceType: 'Bundle', type: 'transaction', entry: entries });
    expect(res.status).toBe(400);
    expect(res.body.issue[0].diagnostics).toContain('entry[23]');
    expect(res.body.issue[0].expression).toEqual(['Organization.active']);
    // Without the invalid entry, the version conflict further on is the first problem.
    entries[23] = org(23);
    const conflict = await post({ resourceType: 'Bundle', type: 'transaction', entry: entries });
    expect(conflict.status).toBe(412);
    expect(JSON.stringify(conflict.body)).toContain('entry[31]');
    expect(await count('/Organization')).toBe(before);
    entries[31] = org(31);
    expect((await post({ resourceType: 'Bundle', type: 'transaction', entry: entries })).status).toBe(200);
    expect(await count('/Organization')).toBe(before + 40);
  });

  it('a version conflict inside a transaction rolls back the other writes', async () => {
    const org = await api.create<Organization>({ resourceType: 'Organization', name: 'Versioned' });
    const res = await post({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { resource: { resourceType: 'Patient', name: [{ family: 'Rollback' }] }, request: { method: 'POST', url: 'Patient' } },
        { resource: { ...org, name: 'Renamed' }, request: { method: 'PUT', url: `Organization/${org.id}`, ifMatch: 'W/"7"' } },
      ],
    });
    expect(res.status).toBe(412);
    expect(await count('/Patient?family=Rollback')).toBe(0);
    expect((await api.call(`/Organization/${org.id}`)).body.name).toBe('Versioned');
  });

  it('ifNoneExist makes a create conditional: loading the same bundle twice creates nothing new', async () => {
    const bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          fullUrl: 'urn:uuid:2b5f8a1e-0000-4000-8000-000000000001',
          resource: { resourceType: 'Patient', identifier: [{ system: 'urn:t', value: 'cond-1' }] },
          request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=urn:t|cond-1' },
        },
        {
          resource: { resourceType: 'Observation', status: 'final', code: { text: 'note' }, subject: { reference: 'urn:uuid:2b5f8a1e-0000-4000-8000-000000000001' } },
          request: { method: 'POST', url: 'Observation' },
        },
      ],
    };
    const first = await post(bundle);
    const second = await post(bundle);
    expect(first.body.entry[0].response.status).toBe('201 Created');
    expect(second.body.entry[0].response.status).toBe('200 OK');
    expect(await count('/Patient?identifier=urn:t|cond-1')).toBe(1);
    const patient = (await api.call('/Patient?identifier=urn:t|cond-1')).body.entry[0].resource;
    expect(await count(`/Observation?subject=Patient/${patient.id}`)).toBe(2); // both observations point at the one patient
  });

  it('conditional update by search creates once, then updates', async () => {
    const entry = (family: string) => ({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [{ resource: { resourceType: 'Patient', identifier: [{ system: 'urn:t', value: 'upd-1' }], name: [{ family }] }, request: { method: 'PUT', url: 'Patient?identifier=urn:t|upd-1' } }],
    });
    expect((await post(entry('First'))).body.entry[0].response.status).toBe('201 Created');
    expect((await post(entry('Second'))).body.entry[0].response.status).toBe('200 OK');
    const found = (await api.call('/Patient?identifier=urn:t|upd-1')).body;
    expect(found.total).toBe(1);
    expect(found.entry[0].resource.name[0].family).toBe('Second');
  });

  it("resolves a conditional reference (Patient?identifier=…) to the one resource it matches; none or several fail the transaction; outside a transaction it is a 400 (found by another vendor's writer: stored as written, the data was no patient's)", async () => {
    const patient = await api.call('/Patient', { method: 'POST', json: { resourceType: 'Patient', identifier: [{ system: 'urn:t', value: 'condref-1' }] } });
    expect(patient.status).toBe(201);
    const observation = (subject: string, code = 'condref') => ({ resource: { resourceType: 'Observation', status: 'final', code: { text: code }, subject: { reference: subject } }, request: { method: 'POST', url: 'Observation' } });
    const ok = await post({ resourceType: 'Bundle', type: 'transaction', entry: [observation('Patient?identifier=urn:t|condref-1'), observation('Patient?identifier=urn:t%7Ccondref-1', 'condref-2')] });
    expect(ok.status).toBe(200);
    for (const entry of ok.body.entry) {
      const stored = (await api.call(new URL(entry.response.location).pathname.replace(/^.*\/R4/, '').replace(/\/_history\/\d+$/, ''))).body;
      expect(stored.subject).toEqual({ reference: `Patient/${patient.body.id}` });
    }
    expect(await count(`/Observation?patient=Patient/${patient.body.id}`)).toBe(2);
    // No match, or several: the transaction fails and writes nothing.
    const before = await count('/Observation?code:text=condref-none');
    const none = await post({ resourceType: 'Bundle', type: 'transaction', entry: [observation('Patient?identifier=urn:t|nobody', 'condref-none')] });
    expect(none.status).toBe(400);
    expect(none.body.issue[0].diagnostics).toMatch(/entry\[0\].*Patient\?identifier=urn:t\|nobody.*no Patient/);
    await api.call('/Patient', { method: 'POST', json: { resourceType: 'Patient', identifier: [{ system: 'urn:t', value: 'condref-twice' }] } });
    await api.call('/Patient', { method: 'POST', json: { resourceType: 'Patient', identifier: [{ system: 'urn:t', value: 'condref-twice' }] } });
    const several = await post({ resourceType: 'Bundle', type: 'transaction', entry: [observation('Patient?identifier=urn:t|condref-twice', 'condref-none')] });
    expect(several.status).toBe(412);
    expect(await count('/Observation?code:text=condref-none')).toBe(before);
    // Anywhere else (a plain create, an update, a batch's entry) a conditional reference is refused, never stored as a string.
    const plain = await api.call('/Observation', { method: 'POST', json: observation('Patient?identifier=urn:t|condref-1', 'condref-none').resource });
    expect(plain.status).toBe(400);
    expect(plain.body.issue[0].diagnostics).toMatch(/Observation\.subject refers to Patient\?identifier=urn:t\|condref-1, a conditional reference.*transaction/);
    const batch = await post({ resourceType: 'Bundle', type: 'batch', entry: [observation('Patient?identifier=urn:t|condref-1', 'condref-none')] });
    expect(batch.body.entry[0].response.status).toMatch(/^400/);
    expect(await count('/Observation?code:text=condref-none')).toBe(before);
  });

  it('refuses malformed bundles with 400', async () => {
    for (const body of [
      { resourceType: 'Patient' },
      { resourceType: 'Bundle', type: 'collection', entry: [] },
      { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient' } }] },
      { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient' }, request: { method: 'PATCH', url: 'Patient/1' } }] },
      { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Observation' } }] },
      { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient', id: 'a' }, request: { method: 'PUT', url: 'Patient/a' } }, { resource: { resourceType: 'Patient', id: 'a' }, request: { method: 'PUT', url: 'Patient/a' } }] },
    ]) {
      const res = await post(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
  });
});

describe('batch bundles', () => {
  it('processes each entry on its own and reports each outcome', async () => {
    const res = await post({
      resourceType: 'Bundle',
      type: 'batch',
      entry: [
        { resource: { resourceType: 'Patient', name: [{ family: 'BatchOk' }] }, request: { method: 'POST', url: 'Patient' } },
        { resource: { resourceType: 'Patient', gender: 'robot' }, request: { method: 'POST', url: 'Patient' } },
        { request: { method: 'GET', url: 'Patient?family=BatchOk' } },
        { request: { method: 'GET', url: 'Patient/nope' } },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.type).toBe('batch-response');
    expect(res.body.entry.map((e: any) => e.response.status)).toEqual(['201 Created', '400', '200 OK', '404']);
    expect(res.body.entry[1].response.outcome.resourceType).toBe('OperationOutcome');
    expect(res.body.entry[2].resource.total).toBe(1);
    expect(await count('/Patient?family=BatchOk')).toBe(1);
  });
});
