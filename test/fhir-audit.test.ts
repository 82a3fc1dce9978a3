import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEvent, Patient } from '@medplum/fhirtypes';
import { createTestClient, type TestClient } from './harness';
import { startFhirApi, type FhirTestApi } from './fhir-helpers';

let api: FhirTestApi;
let reader: TestClient;
let patient: Patient & { id: string };

beforeAll(async () => {
  api = await startFhirApi();
  reader = await createTestClient(api.pont, ['patients:read', 'labs:read'], { organizationId: 'org-reader', allPatients: true });
  patient = await api.create<Patient>({ resourceType: 'Patient', name: [{ family: 'Audited' }] });
  await api.create({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: `Patient/${patient.id}` } });
});
afterAll(async () => {
  await api?.close();
});

async function auditsBy(clientId: string): Promise<AuditEvent[]> {
  return (await api.searchAll(`/AuditEvent?altid=${clientId}&_count=100`)) as AuditEvent[];
}
const as = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  api.pont.json(`/api/fhir/R4${path}`, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });

describe('FHIR access to patient data is audited', () => {
  it('a read names the client, its organisation, the patient and the purpose', async () => {
    const before = (await auditsBy(reader.client_id)).length;
    const res = await as(reader, `/Patient/${patient.id}`, { headers: { 'X-Purpose-Of-Use': 'treatment', 'X-Request-ID': 'req-audit-1' } });
    expect(res.status).toBe(200);
    const audits = await auditsBy(reader.client_id);
    expect(audits).toHaveLength(before + 1);
    const event = audits.find((a) => a.entity?.some((e) => e.what?.identifier?.value === 'req-audit-1'))!;
    expect(event.action).toBe('R');
    expect(event.outcome).toBe('0');
    expect(event.purposeOfEvent?.[0].text).toBe('treatment');
    expect(event.agent.map((a) => a.altId)).toEqual([reader.client_id, 'org-reader']);
    expect(event.entity?.[0].what?.reference).toBe(`Patient/${patient.id}`);
  });

  it('a search names every patient whose data it returned', async () => {
    const other = await api.create<Patient>({ resourceType: 'Patient', name: [{ family: 'AuditedToo' }] });
    await as(reader, '/Patient?family=audited', { headers: { 'X-Request-ID': 'req-audit-2' } });
    const event = (await auditsBy(reader.client_id)).find((a) => a.entity?.some((e) => e.what?.identifier?.value === 'req-audit-2'))!;
    const named = event.entity!.map((e) => e.what?.reference).filter(Boolean).sort();
    expect(named).toEqual([`Patient/${patient.id}`, `Patient/${other.id}`].sort());
    const obs = await as(reader, `/Observation?subject=Patient/${patient.id}`, { headers: { 'X-Request-ID': 'req-audit-3' } });
    expect(obs.body.total).toBe(1);
    const obsEvent = (await auditsBy(reader.client_id)).find((a) => a.entity?.some((e) => e.what?.identifier?.value === 'req-audit-3'))!;
    expect(obsEvent.entity?.[0].what?.reference).toBe(`Patient/${patient.id}`);
  });

  it("data about a patient only through another resource (a result naming only its specimen) is audited as that patient's", async () => {
    // As another writer sends it: the Observation names its Specimen, the Specimen the patient. The access rule files
    // it under that patient; its reads are accesses to the patient's data like any other.
    const specimen = await api.create({ resourceType: 'Specimen', subject: { reference: `Patient/${patient.id}` } });
    const result = await api.create({ resourceType: 'Observation', status: 'final', code: { text: 'by specimen' }, specimen: { reference: `Specimen/${specimen.id}` } });
    const read = await as(reader, `/Observation/${result.id}`, { headers: { 'X-Request-ID': 'req-audit-specimen-1' } });
    expect(read.status).toBe(200);
    const searched = await as(reader, `/Observation?specimen=Specimen/${specimen.id}`, { headers: { 'X-Request-ID': 'req-audit-specimen-2' } });
    expect(searched.body.total).toBe(1);
    const audits = await auditsBy(reader.client_id);
    for (const request of ['req-audit-specimen-1', 'req-audit-specimen-2']) {
      const event = audits.find((a) => a.entity?.some((e) => e.what?.identifier?.value === request));
      expect(event, request).toBeDefined();
      expect(event!.entity?.[0].what?.reference, request).toBe(`Patient/${patient.id}`);
    }
  });

  it('a write is audited in its own transaction: a refused write leaves no AuditEvent', async () => {
    const writer = await createTestClient(api.pont, ['fhir:write'], { organizationId: 'org-writer' });
    // The writer registers its own patient (the treating relationship that lets it write about them).
    const own = await as(writer, '/Patient', { method: 'POST', json: { resourceType: 'Patient', name: [{ family: 'Own' }] } });
    expect(own.status).toBe(201);
    const ok = await as(writer, '/Observation', { method: 'POST', json: { resourceType: 'Observation', status: 'final', code: { text: 'y' }, subject: { reference: `Patient/${own.body.id}` } } });
    expect(ok.status).toBe(201);
    const bad = await as(writer, '/Observation', { method: 'POST', json: { resourceType: 'Observation', status: 'nonsense', code: { text: 'y' }, subject: { reference: `Patient/${own.body.id}` } } });
    expect(bad.status).toBe(400);
    const audits = await auditsBy(writer.client_id);
    expect(audits.map((a) => a.action)).toEqual(['C', 'C']);
  });

  it('nobody writes AuditEvents through the API', async () => {
    const [existing] = await auditsBy(reader.client_id);
    for (const [path, init] of [
      ['/AuditEvent', { method: 'POST', json: { ...existing, id: undefined } }],
      [`/AuditEvent/${existing.id}`, { method: 'PUT', json: { ...existing, outcome: '8' } }],
      [`/AuditEvent/${existing.id}`, { method: 'DELETE' }],
      ['', { method: 'POST', json: { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: `AuditEvent/${existing.id}` } }] } }],
    ] as const) {
      const res = await api.call(path, init as RequestInit & { json?: unknown });
      expect(res.status, `${init.method} ${path}`).toBe(403);
    }
    expect((await api.call(`/AuditEvent/${existing.id}`)).body.outcome).toBe('0');
  });

  it('reading the audit trail needs audit:read, also through _revinclude, _include and $everything', async () => {
    expect((await as(reader, '/AuditEvent')).status).toBe(403);
    expect((await as(reader, `/Patient?_id=${patient.id}&_revinclude=AuditEvent:patient`)).status).toBe(403);
    const everything = await as(reader, `/Patient/${patient.id}/$everything`);
    expect(everything.status).toBe(200);
    expect(everything.body.entry.map((e: any) => e.resource.resourceType)).not.toContain('AuditEvent');
    // An _include whose targets the caller may not read leaves them out.
    const withOrg = await api.create({ resourceType: 'Patient', managingOrganization: { reference: `Organization/${(await api.create({ resourceType: 'Organization', name: 'Hidden' })).id}` } });
    const included = await as(reader, `/Patient?_id=${withOrg.id}&_include=Patient:organization`);
    expect(included.body.entry.map((e: any) => e.resource.resourceType)).toEqual(['Patient']);
    expect((await api.call(`/Patient?_id=${withOrg.id}&_include=Patient:organization`)).body.entry).toHaveLength(2);
  });
});
