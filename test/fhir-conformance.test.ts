import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFhirApi, type FhirTestApi } from './fhir-helpers';

/** What FHIR clients (fhir-kit-client, MedplumClient) send: version-qualified Accept, conditional reads, Prefer, compartments. */
let api: FhirTestApi;
let patientId: string;
let otherId: string;
beforeAll(async () => {
  api = await startFhirApi();
  patientId = (await api.create({ resourceType: 'Patient', name: [{ family: 'Compartment' }] })).id;
  otherId = (await api.create({ resourceType: 'Patient', name: [{ family: 'Other' }] })).id;
  for (const [id, n] of [[patientId, 3], [otherId, 1]] as const)
    for (let i = 0; i < n; i++) await api.create({ resourceType: 'Condition', subject: { reference: `Patient/${id}` }, code: { text: `c${i}` } } as any);
});
afterAll(async () => {
  await api?.close();
});

describe('content negotiation', () => {
  it('takes Accept: application/fhir+json; fhirVersion=4.0 and refuses another FHIR version', async () => {
    expect((await api.call(`/Patient/${patientId}`, { headers: { accept: 'application/fhir+json; fhirVersion=4.0' } })).status).toBe(200);
    expect((await api.call(`/Patient/${patientId}`, { headers: { accept: 'application/fhir+json; fhirVersion=3.0' } })).status).toBe(406);
    expect((await api.call(`/Patient/${patientId}`, { headers: { accept: 'application/xml' } })).status).toBe(406);
  });
});

describe('conditional read', () => {
  it('answers 304 when If-None-Match names the current version or If-Modified-Since is not before the last update', async () => {
    const first = await api.call(`/Patient/${patientId}`);
    const etag = first.headers.get('etag')!;
    expect((await api.call(`/Patient/${patientId}`, { headers: { 'if-none-match': etag } })).status).toBe(304);
    expect((await api.call(`/Patient/${patientId}`, { headers: { 'if-none-match': 'W/"999"' } })).status).toBe(200);
    const lastModified = first.headers.get('last-modified')!;
    expect((await api.call(`/Patient/${patientId}`, { headers: { 'if-modified-since': lastModified } })).status).toBe(304);
    expect((await api.call(`/Patient/${patientId}`, { headers: { 'if-modified-since': 'Mon, 01 Jan 2001 00:00:00 GMT' } })).status).toBe(200);
  });
});

describe('Prefer: return=…', () => {
  const create = (prefer: string) => api.call('/Observation', { method: 'POST', json: { resourceType: 'Observation', status: 'final', code: { text: 'x' } }, headers: { prefer } });

  it('minimal: no body, the Location and ETag; OperationOutcome: an outcome; representation (default): the resource', async () => {
    const minimal = await create('return=minimal');
    expect(minimal.status).toBe(201);
    expect(minimal.body).toBeUndefined();
    expect(minimal.headers.get('location')).toMatch(/\/Observation\/[^/]+\/_history\/1$/);
    const outcome = await create('return=OperationOutcome');
    expect(outcome.body.resourceType).toBe('OperationOutcome');
    expect((await create('return=representation')).body.resourceType).toBe('Observation');
    const updated = await api.call(`/Patient/${patientId}`, { method: 'PUT', json: { resourceType: 'Patient', id: patientId, name: [{ family: 'Compartment' }], active: true }, headers: { prefer: 'return=minimal' } });
    expect(updated.status).toBe(200);
    expect(updated.body).toBeUndefined();
  });

  it('transaction entries carry their resources with return=representation', async () => {
    const bundle = { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Observation', status: 'final', code: { text: 't' } }, request: { method: 'POST', url: 'Observation' } }] };
    const plain = await api.call('', { method: 'POST', json: bundle, headers: { prefer: 'return=minimal' } });
    expect(plain.body.entry[0].resource).toBeUndefined();
    const full = await api.call('', { method: 'POST', json: bundle, headers: { prefer: 'return=representation' } });
    expect(full.body.entry[0].resource.resourceType).toBe('Observation');
  });
});

describe('compartment search', () => {
  it('GET Patient/{id}/Condition finds the conditions of that patient only, paged under the compartment path', async () => {
    const page = await api.call(`/Patient/${patientId}/Condition?_count=2`);
    expect(page.status).toBe(200);
    expect(page.body.entry).toHaveLength(2);
    for (const e of page.body.entry) expect(e.resource.subject.reference).toBe(`Patient/${patientId}`);
    const next = page.body.link.find((l: any) => l.relation === 'next').url as string;
    expect(next).toContain(`/Patient/${patientId}/Condition?`);
    const all = await api.searchAll(`/Patient/${patientId}/Condition?_count=2`);
    expect(all).toHaveLength(3);
    expect((await api.call(`/Patient/${otherId}/Condition?code:text=c0`)).body.entry).toHaveLength(1);
  });
});

describe('the CapabilityStatement', () => {
  it('states what works (no writes of AuditEvent or Consent), conditional reads, and has validators', async () => {
    const res = await api.call('/metadata');
    const byType = new Map(res.body.rest[0].resource.map((r: any) => [r.type, r]));
    const codes = (type: string) => (byType.get(type) as any).interaction.map((i: any) => i.code);
    expect(codes('AuditEvent')).not.toContain('create');
    expect(codes('Consent')).not.toContain('update');
    expect(codes('Observation')).toEqual(expect.arrayContaining(['create', 'update', 'delete', 'read', 'search-type']));
    expect((byType.get('Observation') as any).conditionalUpdate).toBe(true);
    expect((byType.get('Observation') as any).conditionalRead).toBe('full-support');
    const etag = res.headers.get('etag')!;
    expect((await api.call('/metadata', { headers: { 'if-none-match': etag } })).status).toBe(304);
  });
});

describe('one reading of _format, _pretty, _summary and _elements', () => {
  it('applies them alike on read, vread and history, and refuses bad values with 400 on each', async () => {
    const read = await api.call(`/Patient/${patientId}?_elements=name`);
    expect(Object.keys(read.body).sort()).toEqual(expect.arrayContaining(['name', 'resourceType', 'id']));
    expect(read.body.gender).toBeUndefined();
    const vread = await api.call(`/Patient/${patientId}/_history/1?_summary=true&_pretty=true`);
    expect(vread.status).toBe(200);
    const history = await api.call(`/Patient/${patientId}/_history?_elements=name`);
    expect(history.body.entry.every((e: any) => e.resource.active === undefined)).toBe(true);
    for (const path of [`/Patient/${patientId}`, `/Patient/${patientId}/_history/1`, `/Patient/${patientId}/_history`, '/Patient'])
      for (const bad of ['_summary=maybe', '_pretty=yes', '_format=xml'])
        expect((await api.call(`${path}?${bad}`)).status, `${path}?${bad}`).toBe(bad.startsWith('_format') ? 406 : 400);
  });
});
