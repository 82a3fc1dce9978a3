import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEvent, Bundle, Resource } from '@medplum/fhirtypes';
import { loadConfig } from '../src/config';
import { startPont, type RunningPont } from '../src/server';
import { createClient, revokeClient } from '../src/auth/clients';
import type { Database } from '../src/db/database';
import type { ClientPrincipal } from '../src/core/principal';
import type { BulkExportWorker } from '../src/bulk/worker';
import { MAX_ATTEMPTS, MAX_READ_LINES, readAhead } from '../src/bulk/jobs';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { once } from 'node:events';
import type { ChildProcess } from 'node:child_process';
import pg from 'pg';
import { serve } from './serve-process';
import { eventually } from './eventually';
import { join } from 'node:path';
import { validateFhirResource } from '../src/fhir/validate';
import { parametersResource, parseExportParameters, queryParameters } from '../src/bulk/params';
import { backend, createScratchDatabase, createTestClient, postgresAdminUrl, startTestServer, type TestClient, type TestServer } from './harness';

const FHIR = '/api/fhir/R4';
const ASYNC = { prefer: 'respond-async' };
const CLINICAL = ['Patient', 'Condition', 'Observation', 'MedicationRequest'];
const DAY_MS = 24 * 3600 * 1000;

let pont: TestServer;
let writer: TestClient;
let reader: TestClient;
let operator: TestClient;
let outsider: TestClient;
let colleague: TestClient;
const patients: string[] = [];

const worker = (p: RunningPont = pont) => p.services.workers.find((w) => w.name === 'bulk-export') as BulkExportWorker;
const fhir = (p: RunningPont, c: TestClient, path: string, init: RequestInit = {}) => fetch(`${p.url}${FHIR}${path}`, { ...init, headers: { ...c.headers, ...(init.headers as Record<string, string>) } });
/** A path relative to the server, from an absolute URL it published. */
const local = (url: string) => url.slice(url.indexOf(FHIR) + FHIR.length);

async function kickOff(c: TestClient, path: string, init: RequestInit = {}, p: RunningPont = pont): Promise<string> {
  const res = await fhir(p, c, path, { ...init, headers: { ...ASYNC, ...(init.headers as Record<string, string>) } });
  expect(res.status, await res.clone().text()).toBe(202);
  return local(res.headers.get('content-location')!);
}

interface Manifest {
  transactionTime: string;
  request: string;
  requiresAccessToken: boolean;
  output: Array<{ type: string; url: string; count: number }>;
  error: unknown[];
}

/** Runs the queued jobs, then reads the manifest and every file (each line parsed and validated as R4). */
async function finish(c: TestClient, status: string, p: RunningPont = pont): Promise<{ manifest: Manifest; resources: Resource[] }> {
  await worker(p).drain();
  const res = await fhir(p, c, status);
  expect(res.status, await res.clone().text()).toBe(200);
  const manifest = (await res.json()) as Manifest;
  const resources: Resource[] = [];
  for (const file of manifest.output) {
    const got = await fhir(p, c, local(file.url));
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toMatch(/^application\/fhir\+ndjson/);
    const lines = (await got.text()).split('\n');
    expect(lines.pop()).toBe(''); // every line ends with a newline
    expect(lines.length).toBe(file.count);
    for (const line of lines) {
      const resource = JSON.parse(line) as Resource;
      expect(resource.resourceType).toBe(file.type);
      validateFhirResource(resource);
      resources.push(resource);
    }
  }
  return { manifest, resources };
}

async function exportOf(c: TestClient, path: string, init: RequestInit = {}) {
  return finish(c, await kickOff(c, path, init));
}

/** Every match of a search by `c`, following next links. */
async function searchAll(c: TestClient, path: string, p: RunningPont = pont): Promise<Resource[]> {
  const out: Resource[] = [];
  let next: string | undefined = path.includes('?') ? `${path}&_count=1000` : `${path}?_count=1000`;
  while (next) {
    const res = await fhir(p, c, next);
    expect(res.status).toBe(200);
    const bundle = (await res.json()) as Bundle;
    out.push(...(bundle.entry ?? []).filter((e) => e.search?.mode === 'match').map((e) => e.resource!));
    const url = bundle.link?.find((l) => l.relation === 'next')?.url;
    next = url && local(url);
  }
  return out;
}

const keys = (resources: Resource[]) => resources.map((r) => `${r.resourceType}/${r.id}`).sort();
const ofTypes = (resources: Resource[], types: string[]) => resources.filter((r) => types.includes(r.resourceType));

async function searchKeys(c: TestClient, types: string[], query = ''): Promise<string[]> {
  const all: Resource[] = [];
  for (const t of types) all.push(...(await searchAll(c, `/${t}${query}`)));
  return keys(all);
}

async function createRecord(p: RunningPont, c: TestClient, patientId: string, n: number): Promise<void> {
  const subject = { reference: `Patient/${patientId}` };
  const resources = [
    ...Array.from({ length: n }, (_, i) => ({ resourceType: 'Condition', subject, code: { text: `Condition ${i}` } })),
    { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '718-7' }] }, subject },
    { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2345-7' }] }, subject },
    { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Salbutamol' }, subject },
  ];
  for (const r of resources) expect((await fhir(p, c, `/${r.resourceType}`, { method: 'POST', body: JSON.stringify(r), headers: { 'content-type': 'application/json' } })).status).toBe(201);
}

async function registerPatient(p: RunningPont, c: TestClient, name: string): Promise<{ id: string; healthId: string }> {
  const res = await fetch(`${p.url}/api/v1/connect/patients/resolve`, {
    method: 'POST',
    headers: { ...c.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ first_name: 'Bulk', last_name: name, date_of_birth: '1980-02-03' }),
  });
  expect(res.status).toBeLessThan(300);
  const healthId = ((await res.json()) as { health_id: string }).health_id;
  const found = await fhir(p, c, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${healthId}`);
  return { id: (((await found.json()) as Bundle).entry![0]!.resource as Resource).id!, healthId };
}

/**
 * A process that runs no exports itself (PONT_BULK_EXPORT_CONCURRENCY=0, files of 2): its jobs stay queued until
 * the test claims and steps them. With an operator client of `organizationId` and one patient's record.
 */
/**
 * An operator client (every patient) made in `db`, for tests that run several processes on one database: returns
 * how to get its token from any of them.
 */
async function operatorOf(db: Database): Promise<(p: { url: string }) => Promise<TestClient>> {
  const record = await createClient(db, { name: 'operator', organizationId: 'org-op', scopes: ['fhir:read', 'fhir:write', 'health_id:verify'], allPatients: true });
  return async (p) => {
    const res = await fetch(`${p.url}/api/v1/connect/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: record.client_id, client_secret: record.client_secret }),
    });
    const body = (await res.json()) as { access_token: string };
    return { ...record, access_token: body.access_token, headers: { authorization: `Bearer ${body.access_token}` } } as TestClient;
  };
}

async function queuedServer(organizationId: string, patientName: string): Promise<{ server: TestServer; client: TestClient }> {
  const server = await startTestServer({ PONT_BULK_EXPORT_CONCURRENCY: '0', PONT_BULK_EXPORT_FILE_RESOURCES: '2' });
  const client = await createTestClient(server, ['fhir:read', 'fhir:write', 'health_id:verify'], { organizationId, allPatients: true });
  const p = await registerPatient(server, client, patientName);
  await createRecord(server, client, p.id, 3);
  return { server, client };
}

beforeAll(async () => {
  // Files of at most 3 resources: every type spans several files.
  pont = await startTestServer({ PONT_BULK_EXPORT_FILE_RESOURCES: '3' });
  writer = await createTestClient(pont, ['health_id:verify', 'fhir:read', 'fhir:write'], { organizationId: 'org-writer' });
  reader = await createTestClient(pont, ['fhir:read', 'consents:write'], { organizationId: 'org-reader' });
  colleague = await createTestClient(pont, ['fhir:read'], { organizationId: 'org-reader', name: 'same organisation, another client' });
  outsider = await createTestClient(pont, ['fhir:read'], { organizationId: 'org-outsider' });
  operator = await createTestClient(pont, ['fhir:read', 'audit:read'], { organizationId: 'org-operator', allPatients: true });
  for (let i = 0; i < 4; i++) {
    const p = await registerPatient(pont, writer, `Export${i}`);
    patients.push(p.id);
    await createRecord(pont, writer, p.id, 2 + i);
    // The reader holds a full-record consent of patients 0 and 1, diagnostics only of patient 2, nothing of patient 3.
    const consent = i < 2 ? 'full_record' : i === 2 ? 'diagnostics' : undefined;
    if (consent) {
      const grant = await pont.json(`/api/v1/connect/patient/${p.healthId}/consent/grant`, { method: 'POST', headers: reader.headers, json: { consent_type: consent, expires_at: new Date(Date.now() + DAY_MS).toISOString() } });
      expect(grant.status).toBeLessThan(300);
    }
  }
}, 120_000);
afterAll(async () => {
  await pont?.close();
});

describe('bulk export: kick-off, status, manifest, files', () => {
  it('an operator exports everything: the manifest of the IG, files of one type and at most 3 resources, each line valid R4, the set its search finds', async () => {
    const { manifest, resources } = await exportOf(operator, '/$export?_type=Patient,Condition,Observation,MedicationRequest');
    expect(manifest.requiresAccessToken).toBe(true);
    expect(manifest.error).toEqual([]);
    expect(manifest.request).toBe(`${pont.config.publicUrl}${FHIR}/$export?_type=Patient,Condition,Observation,MedicationRequest`);
    expect(Date.parse(manifest.transactionTime)).not.toBeNaN();
    expect(manifest.output.every((f) => f.count >= 1 && f.count <= 3)).toBe(true);
    expect(manifest.output.filter((f) => f.type === 'Condition').length).toBeGreaterThan(1);
    expect(keys(resources)).toEqual(await searchKeys(operator, CLINICAL));
    expect(new Set(keys(resources)).size).toBe(resources.length); // no resource twice
  });

  it('the CapabilityStatement declares the export operations of the Bulk Data IG', async () => {
    const statement = (await (await fetch(`${pont.url}${FHIR}/metadata`)).json()) as any;
    expect(statement.instantiates).toContain('http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data');
    expect(statement.rest[0].operation).toContainEqual({ name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export' });
    const group = statement.rest[0].resource.find((r: { type: string }) => r.type === 'Group');
    expect(group.operation).toContainEqual({ name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/group-export' });
  });

  it('an export of types with nothing stored completes with no files', async () => {
    const { manifest } = await exportOf(operator, '/$export?_type=Account,Basic');
    expect(manifest.output).toEqual([]);
  });

  it('a file is the file of its part in the export directory, served whole; cancelling removes the directory', async () => {
    const status = await kickOff(operator, '/$export?_type=Patient');
    const { manifest } = await finish(operator, status);
    const id = status.split('/').pop()!;
    const dir = join(pont.config.bulkExport.dir, id);
    expect(readdirSync(dir).sort()).toEqual(manifest.output.map((f) => `${f.url.split('/').pop()}.ndjson`).sort());
    const res = await fhir(pont, operator, local(manifest.output[0]!.url));
    const whole = await res.text();
    expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(whole)));
    expect(whole).toBe(readFileSync(join(dir, `${manifest.output[0]!.url.split('/').pop()}.ndjson`), 'utf8'));
    expect((await fhir(pont, operator, status, { method: 'DELETE' })).status).toBe(202);
    expect(existsSync(dir)).toBe(false);
  });

  it('a file missing from the directory (not shared by every process): 500, never a short or empty file', async () => {
    const status = await kickOff(operator, '/$export?_type=Patient');
    const { manifest } = await finish(operator, status);
    const path = join(pont.config.bulkExport.dir, status.split('/').pop()!, `${manifest.output[0]!.url.split('/').pop()}.ndjson`);
    truncateSync(path, 10);
    expect((await fhir(pont, operator, local(manifest.output[0]!.url))).status).toBe(500);
    rmSync(path);
    const res = await fhir(pont, operator, local(manifest.output[0]!.url));
    expect(res.status).toBe(500);
    expect(((await res.json()) as Resource).resourceType).toBe('OperationOutcome');
  });

  it('the janitor removes a job directory with no job once it is an hour old, and nothing younger', async () => {
    const dir = pont.config.bulkExport.dir;
    const [old, young] = ['a'.repeat(32), 'b'.repeat(32)].map((id) => join(dir, id));
    for (const d of [old!, young!]) {
      mkdirSync(d, { recursive: true });
      writeFileSync(join(d, '1.ndjson'), '{"resourceType":"Patient"}\n');
    }
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    utimesSync(old!, twoHoursAgo, twoHoursAgo);
    await pont.services.bulkExports.purgeExpired();
    expect(existsSync(old!)).toBe(false);
    expect(existsSync(young!)).toBe(true);
    rmSync(young!, { recursive: true });
  });

  it('a part whose transaction fails leaves no file and no row: the export resumes from the last committed part', async () => {
    const exports = pont.services.bulkExports;
    const saved = exports.settings.concurrency;
    exports.settings.concurrency = 0;
    try {
      const status = await kickOff(operator, '/$export?_type=Condition');
      const task = (await exports.claim())!;
      const repo = pont.services.fhir.repository({ principal: task.principal, channel: 'fhir' });
      expect(await exports.step(task, repo)).toBe('more');
      const dir = join(pont.config.bulkExport.dir, task.jobId);
      const before = readdirSync(dir);
      // The audit record of the part fails: the part's transaction rolls back after its file was written.
      const audit = repo.audit.bind(repo);
      repo.audit = async () => {
        throw new Error('audit trail unavailable');
      };
      await expect(exports.step(task, repo)).rejects.toThrow(/audit trail unavailable/);
      repo.audit = audit;
      expect(readdirSync(dir)).toEqual(before);
      while ((await exports.step(task, repo)) === 'more');
      await exports.completeFinished();
      const { resources } = await finish(operator, status);
      expect(keys(resources)).toEqual(await searchKeys(operator, ['Condition']));
    } finally {
      exports.settings.concurrency = saved;
    }
  });

  it('a consent-bound client gets exactly what its searches find: no class or patient its consents do not cover', async () => {
    const { resources } = await exportOf(reader, '/$export');
    const clinical = ofTypes(resources, CLINICAL);
    expect(keys(clinical)).toEqual(await searchKeys(reader, CLINICAL));
    // Patients 0 and 1 in full, patient 2's labs only, nothing of patient 3; and nothing of another type it may not see.
    const about = (r: Resource) => (r.resourceType === 'Patient' ? r.id : (r as { subject?: { reference?: string } }).subject?.reference?.slice('Patient/'.length));
    expect(clinical.some((r) => about(r) === patients[3])).toBe(false);
    expect(clinical.filter((r) => about(r) === patients[2]).every((r) => r.resourceType === 'Observation')).toBe(true);
    expect(clinical.filter((r) => about(r) === patients[2]).length).toBe(2);
    for (const type of new Set(resources.map((r) => r.resourceType))) expect(keys(ofTypes(resources, [type]))).toEqual(await searchKeys(reader, [type]));
  });

  it('Patient/$export: the data of every patient the client may see; Group/{id}/$export: of the Group members only', async () => {
    const patientLevel = await exportOf(reader, '/Patient/$export?_type=Patient,Condition,Observation');
    expect(keys(patientLevel.resources)).toEqual(await searchKeys(reader, ['Patient', 'Condition', 'Observation']));

    const group = await fhir(pont, writer, '/Group', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ resourceType: 'Group', type: 'person', actual: true, member: [{ entity: { reference: `Patient/${patients[1]}` } }] }),
    });
    expect(group.status).toBe(201);
    const groupId = ((await group.json()) as Resource).id;
    const { resources } = await exportOf(operator, `/Group/${groupId}/$export?_type=Patient,Condition,MedicationRequest`);
    const want = keys([
      ...(await searchAll(operator, `/Patient?_id=${patients[1]}`)),
      ...(await searchAll(operator, `/Condition?patient=${patients[1]}`)),
      ...(await searchAll(operator, `/MedicationRequest?patient=${patients[1]}`)),
    ]);
    expect(keys(resources)).toEqual(want);
    expect(want.length).toBe(1 + 3 + 1);
    // A Group that does not exist, or that the caller may not see: 404 before any job.
    expect((await fhir(pont, operator, '/Group/no-such-group/$export', { headers: ASYNC })).status).toBe(404);
  });

  it('POST with a Parameters resource; _typeFilter narrows a type as its search does', async () => {
    const status = await kickOff(reader, '/$export', {
      method: 'POST',
      headers: { 'content-type': 'application/fhir+json' },
      body: JSON.stringify({
        resourceType: 'Parameters',
        parameter: [
          { name: '_type', valueString: 'Observation,Condition' },
          { name: '_typeFilter', valueString: 'Observation?code=http://loinc.org|718-7' },
          { name: '_outputFormat', valueString: 'application/fhir+ndjson' },
        ],
      }),
    });
    const { resources } = await finish(reader, status);
    expect(keys(ofTypes(resources, ['Observation']))).toEqual(await searchKeys(reader, ['Observation'], '?code=http://loinc.org|718-7'));
    expect(ofTypes(resources, ['Observation']).length).toBe(3); // patients 0, 1 and 2
    expect(keys(ofTypes(resources, ['Condition']))).toEqual(await searchKeys(reader, ['Condition']));
  });

  it('_since: only what changed after it; nothing changed after the export began (its transactionTime)', async () => {
    const conditions = await searchAll(operator, `/Condition?patient=${patients[0]}`);
    const changed = { ...conditions[0]!, code: { text: 'Changed' } };
    const put = await fhir(pont, writer, `/Condition/${changed.id}`, { method: 'PUT', body: JSON.stringify(changed), headers: { 'content-type': 'application/json' } });
    expect(put.status).toBe(200);
    const since = new Date(Date.parse(((await put.json()) as Resource).meta!.lastUpdated!) - 1).toISOString();
    const status = await kickOff(operator, `/$export?_type=Condition&_since=${encodeURIComponent(since)}`);
    // Written after the kick-off: not in this export (the next one, _since its transactionTime, has it).
    await createRecord(pont, writer, patients[0]!, 1);
    const { manifest, resources } = await finish(operator, status);
    const changedSince = (await searchAll(operator, `/Condition?_lastUpdated=gt${encodeURIComponent(since)}`)).filter((r) => r.meta!.lastUpdated! <= manifest.transactionTime);
    expect(keys(resources)).toEqual(keys(changedSince));
    expect(keys(resources)).toContain(`Condition/${changed.id}`);
    expect(resources.every((r) => r.meta!.lastUpdated! > since && r.meta!.lastUpdated! <= manifest.transactionTime)).toBe(true);
  });

  it('every export is audited: the kick-off (who, which types) and each file (how many resources, of how many patients)', async () => {
    await exportOf(reader, '/$export?_type=Condition');
    const audits = (await searchAll(operator, `/AuditEvent?altid=${reader.client_id}`)) as AuditEvent[];
    const operation = (a: AuditEvent) => a.subtype?.find((s) => s.system === 'https://pont.health/fhir/CodeSystem/operation')?.code;
    const kickOffs = audits.filter((a) => operation(a) === 'bulkExportKickOff' && a.outcomeDesc?.includes('Condition'));
    expect(kickOffs.length).toBeGreaterThan(0);
    const files = audits.filter((a) => operation(a) === 'bulkExport' && /file \d+: \d+ Condition resource\(s\) of \d+ patient\(s\)/.test(a.outcomeDesc ?? ''));
    expect(files.length).toBeGreaterThan(0);
    expect(files.every((a) => a.entity?.some((e) => e.what?.reference?.startsWith('Patient/')))).toBe(true);
    expect(audits.some((a) => operation(a) === 'bulkExport' && /completed: \d+ resource\(s\)/.test(a.outcomeDesc ?? ''))).toBe(true);
  });
});

describe('bulk export: only the client that asked', () => {
  it('another organisation, and another client of the same organisation, get 404 on the status, the files and DELETE', async () => {
    const status = await kickOff(reader, '/$export?_type=Condition');
    const { manifest } = await finish(reader, status);
    for (const other of [outsider, colleague]) {
      expect((await fhir(pont, other, status)).status).toBe(404);
      for (const file of manifest.output) expect((await fhir(pont, other, local(file.url))).status).toBe(404);
      const del = await fhir(pont, other, status, { method: 'DELETE' });
      expect(del.status).toBe(404);
      expect(((await del.json()) as Resource).resourceType).toBe('OperationOutcome');
    }
    // Still there for the reader.
    expect((await fhir(pont, reader, local(manifest.output[0]!.url))).status).toBe(200);
    expect((await fhir(pont, reader, status)).status).toBe(200);
  });

  it('a type the client may not read: 403 before any job starts (its next export is not refused as concurrent)', async () => {
    const labs = await createTestClient(pont, ['labs:read'], { organizationId: 'org-reader' });
    for (const path of ['/$export?_type=Observation,Condition', '/$export?_typeFilter=Condition%3Fcode%3Dx', '/$export?_typeFilter=Observation%3Fsubject:Patient.name%3Dx']) {
      const res = await fhir(pont, labs, path, { headers: ASYNC });
      expect(res.status, path).toBe(403);
      expect(((await res.json()) as Resource).resourceType).toBe('OperationOutcome');
    }
    const { resources } = await exportOf(labs, '/$export');
    expect(new Set(resources.map((r) => r.resourceType))).toEqual(new Set(['Observation']));
    expect(keys(resources)).toEqual(await searchKeys(labs, ['Observation']));
  });

  it('a file whose patient revoked the consent after it was written is withheld (410); the others are served, and the next export leaves the patient out', async () => {
    const consenting = await createTestClient(pont, ['fhir:read', 'consents:write'], { organizationId: 'org-withdrawn' });
    const [kept, leaving] = [await registerPatient(pont, writer, 'Stays'), await registerPatient(pont, writer, 'Leaves')];
    for (const p of [kept, leaving]) {
      await createRecord(pont, writer, p.id, 1);
      const grant = await pont.json(`/api/v1/connect/patient/${p.healthId}/consent/grant`, { method: 'POST', headers: consenting.headers, json: { consent_type: 'full_record', expires_at: new Date(Date.now() + DAY_MS).toISOString() } });
      expect(grant.status).toBeLessThan(300);
    }
    const { manifest } = await exportOf(consenting, '/$export?_type=Condition');
    const fileOf = async (url: string) => fhir(pont, consenting, local(url));
    const about = async (url: string) => ((await (await fileOf(url)).text()).includes(`Patient/${leaving.id}`) ? 'leaving' : 'kept');
    const files = await Promise.all(manifest.output.map(async (f) => ({ url: f.url, about: await about(f.url) })));
    expect(files.map((f) => f.about)).toContain('leaving');

    const revoke = await pont.json(`/api/v1/connect/patient/${leaving.healthId}/consent/revoke`, { method: 'POST', headers: consenting.headers, json: { purpose: 'the patient asked' } });
    expect(revoke.status).toBe(200);
    for (const f of files) {
      const res = await fileOf(f.url);
      if (f.about === 'leaving') {
        expect(res.status).toBe(410);
        expect(((await res.json()) as { resourceType: string }).resourceType).toBe('OperationOutcome');
      } else expect(res.status).toBe(200);
    }
    const again = await exportOf(consenting, '/$export?_type=Condition');
    expect(again.resources.some((r) => JSON.stringify(r).includes(`Patient/${leaving.id}`))).toBe(false);
    expect(again.resources.some((r) => JSON.stringify(r).includes(`Patient/${kept.id}`))).toBe(true);
  });

  it('a file whose patient\'s Consent resource was deleted after it was written is withheld (410)', async () => {
    const consenting = await createTestClient(pont, ['fhir:read', 'fhir:write', 'consents:write'], { organizationId: 'org-consent-deleted' });
    const p = await registerPatient(pont, writer, 'ConsentDeleted');
    await createRecord(pont, writer, p.id, 1);
    const grant = await pont.json(`/api/v1/connect/patient/${p.healthId}/consent/grant`, { method: 'POST', headers: consenting.headers, json: { consent_type: 'full_record', expires_at: new Date(Date.now() + DAY_MS).toISOString() } });
    expect(grant.status).toBeLessThan(300);
    const { manifest } = await exportOf(consenting, '/$export?_type=Condition');
    expect(manifest.output.length).toBeGreaterThan(0);
    const consent = ((await (await fhir(pont, consenting, `/Consent?patient=Patient/${p.id}`)).json()) as Bundle).entry![0]!.resource!;
    await pont.services.fhir.system('test: the Consent is deleted').delete('Consent', consent.id!);
    for (const f of manifest.output) expect((await fhir(pont, consenting, local(f.url))).status).toBe(410);
  });

  it.runIf(backend === 'postgres')('a consent change that began before a file was read and committed after: the file is withheld (410)', async () => {
    const consenting = await createTestClient(pont, ['fhir:read', 'consents:write'], { organizationId: 'org-consent-race' });
    const p = await registerPatient(pont, writer, 'Race');
    await createRecord(pont, writer, p.id, 1);
    const grant = await pont.json(`/api/v1/connect/patient/${p.healthId}/consent/grant`, { method: 'POST', headers: consenting.headers, json: { consent_type: 'full_record', expires_at: new Date(Date.now() + DAY_MS).toISOString() } });
    expect(grant.status).toBeLessThan(300);
    const exports = pont.services.bulkExports;
    const saved = exports.settings.concurrency;
    exports.settings.concurrency = 0;
    // The revocation's transaction, as the consent index writes it (src/consents/record.ts), begun before the file is
    // read (after the kick-off: one open at the kick-off is waited for before any read).
    const revocation = new pg.Client({ connectionString: pont.config.databaseUrl });
    await revocation.connect();
    try {
      const status = await kickOff(consenting, '/$export?_type=Condition');
      await revocation.query('BEGIN');
      await revocation.query('SELECT pg_current_xact_id()');
      const task = (await exports.claim())!;
      const repo = pont.services.fhir.repository({ principal: task.principal, channel: 'fhir' });
      while ((await exports.step(task, repo)) === 'more');
      await exports.completeFinished();
      await revocation.query(`INSERT INTO consent_changes (organization_id, patient_id) VALUES ('org-consent-race', $1)`, [p.id]);
      await revocation.query(`UPDATE consent_access SET status = 'inactive', updated_at = now() WHERE organization_id = 'org-consent-race' AND patient_id = $1`, [p.id]);
      await revocation.query('COMMIT');
      const manifest = (await (await fhir(pont, consenting, status)).json()) as { output: Array<{ url: string }> };
      expect(manifest.output.length).toBeGreaterThan(0);
      for (const f of manifest.output) expect((await fhir(pont, consenting, local(f.url))).status).toBe(410);
    } finally {
      exports.settings.concurrency = saved;
      await revocation.end();
    }
  });

  it('files expire (PONT_BULK_EXPORT_TTL, default 24 h): then 404, and the janitor removes them', async () => {
    // The operator: a consent-bound reader's consents (a day) would end first, and withhold its files before that.
    const status = await kickOff(operator, '/$export?_type=Condition');
    const { manifest } = await finish(operator, status);
    const expires = Date.parse((await fhir(pont, operator, status)).headers.get('expires')!);
    expect(expires - Date.now()).toBeGreaterThan(DAY_MS - 60_000);
    const exports = pont.services.bulkExports;
    exports.now = () => expires - 1000;
    try {
      expect((await fhir(pont, operator, status)).status).toBe(200);
      expect((await fhir(pont, operator, local(manifest.output[0]!.url))).status).toBe(200);
      exports.now = () => expires + 1000;
      expect((await fhir(pont, operator, status)).status).toBe(404);
      expect((await fhir(pont, operator, local(manifest.output[0]!.url))).status).toBe(404);
      expect(await exports.purgeExpired()).toBeGreaterThan(0);
    } finally {
      exports.now = Date.now;
    }
    expect((await fhir(pont, operator, status)).status).toBe(404); // removed, not only hidden
  });
});

// Parameters refused before any job is written: the same on both databases, run once.
describe.runIf(backend === 'postgres')('bulk export: bad input', () => {
  const refused = async (c: TestClient, path: string, init: RequestInit, status: number, text: RegExp) => {
    const res = await fhir(pont, c, path, init);
    const body = (await res.json()) as { resourceType: string; issue: Array<{ diagnostics: string }> };
    expect(res.status, path).toBe(status);
    expect(body.resourceType).toBe('OperationOutcome');
    expect(body.issue[0]!.diagnostics).toMatch(text);
  };

  it('no Prefer: respond-async, bad parameters, break-glass: 400 OperationOutcome', async () => {
    await refused(reader, '/$export', {}, 400, /respond-async/);
    await refused(reader, '/$export?_outputFormat=text/csv', { headers: ASYNC }, 400, /_outputFormat/);
    await refused(reader, '/$export?_since=yesterday', { headers: ASYNC }, 400, /_since/);
    await refused(reader, '/$export?_type=Nonsense', { headers: ASYNC }, 400, /_type/);
    await refused(reader, `/$export?_type=${Array.from({ length: 300 }, () => 'Patient').join(',')}`, { headers: ASYNC }, 400, /_type/);
    await refused(reader, '/$export?_typeFilter=Observation', { headers: ASYNC }, 400, /_typeFilter/);
    await refused(reader, '/$export?_typeFilter=Observation%3Fno-such-param%3D1', { headers: ASYNC }, 400, /no-such-param|Unknown/i);
    await refused(reader, '/$export?_type=Condition&_typeFilter=Observation%3Fcode%3Dx', { headers: ASYNC }, 400, /_type/);
    await refused(reader, '/$export?_typeFilter=Observation%3F_include%3DObservation:subject', { headers: ASYNC }, 400, /_include/);
    await refused(reader, '/$export?_elements=id', { headers: ASYNC }, 400, /not supported/);
    await refused(reader, '/$export?whatever=1', { headers: ASYNC }, 400, /Unknown/);
    await refused(reader, '/$export?patient=Patient/x', { headers: ASYNC }, 400, /patient/);
    await refused(reader, '/$export?_since=2024-01-01T00:00:00Z&_since=2024-01-02T00:00:00Z', { headers: ASYNC }, 400, /once/);
    await refused(reader, '/$export', { headers: { ...ASYNC, 'x-emergency-reason': 'unconscious' } }, 400, /one patient/);
    const post = (body: unknown) => ({ method: 'POST', headers: { ...ASYNC, 'content-type': 'application/fhir+json' }, body: JSON.stringify(body) });
    await refused(reader, '/$export', post({ resourceType: 'Patient' }), 400, /Parameters/);
    await refused(reader, '/$export', post({ resourceType: 'Parameters', parameter: [{ name: '_type', valueString: { deep: [[[[]]]] } }] }), 400, /value/);
    await refused(reader, '/$export', post({ resourceType: 'Parameters', parameter: 'no' }), 400, /Parameters/);
    await refused(reader, '/Patient/$export', post({ resourceType: 'Parameters', parameter: [{ name: 'patient', valueReference: { reference: 'Observation/1' } }] }), 400, /patient/);
  });

  it('Prefer: handling=lenient ignores what is not supported', async () => {
    const status = await kickOff(reader, '/$export?_type=Patient&_elements=id&includeAssociatedData=LatestProvenanceResources', { headers: { prefer: 'respond-async, handling=lenient' } });
    const { resources } = await finish(reader, status);
    expect(keys(resources)).toEqual(await searchKeys(reader, ['Patient']));
  });
});

describe.runIf(backend === 'postgres')('bulk export parameters (unit)', () => {
  const parse = (query: Record<string, string | string[]>, lenient = false, patientAllowed = true) => parseExportParameters(queryParameters(query), { lenient, patientAllowed });

  it('lists split on commas and repeat; _typeFilter keeps its criteria apart (commas inside them are %2C-encoded)', () => {
    const got = parse({ _type: ['Observation,Patient', 'Patient'], _typeFilter: 'Observation?code=a%2Cb&status=final,Observation?category=lab', _since: '2024-05-01T10:00:00+02:00' });
    expect(got.types).toEqual(['Observation', 'Patient']);
    expect(got.since).toBe('2024-05-01T10:00:00+02:00');
    expect(got.typeFilters.map((f) => f.query)).toEqual([{ code: 'a,b', status: 'final' }, { category: 'lab' }]);
  });

  it('patient references (POST): Patient/id or id, deduplicated; refused where the level takes none', () => {
    const raw = parametersResource({ resourceType: 'Parameters', parameter: [{ name: 'patient', valueReference: { reference: 'Patient/a' } }, { name: 'patient', valueReference: { reference: 'a' } }] });
    expect(parseExportParameters(raw, { lenient: false, patientAllowed: true }).patients).toEqual(['a']);
    expect(() => parseExportParameters(raw, { lenient: false, patientAllowed: false })).toThrow(/Patient and Group/);
  });

  it('unknown parameters: refused, or ignored with handling=lenient; a _since without a time zone is refused', () => {
    expect(() => parse({ _elements: 'id' })).toThrow(/not supported/);
    expect(parse({ _elements: 'id', other: 'x' }, true)).toEqual({ types: undefined, since: undefined, typeFilters: [], patients: undefined });
    expect(() => parse({ _since: '2024-05-01T10:00:00' })).toThrow(/_since/);
    expect(() => parse({ _outputFormat: 'application/fhir+json' })).toThrow(/_outputFormat/);
    for (const format of ['application/fhir+ndjson', 'application/ndjson', 'ndjson']) expect(parse({ _outputFormat: format }).typeFilters).toEqual([]);
  });
});

describe('bulk export: one at a time per client, cancel', () => {
  let queued: TestServer;
  let client: TestClient;
  beforeAll(async () => void ({ server: queued, client } = await queuedServer('org-q', 'Queued')), 60_000);
  afterAll(() => queued?.close());

  it('queued: 202 with X-Progress and Retry-After; a second export: 429 with Retry-After; DELETE: 202, then 404; then a new one is accepted', async () => {
    const status = await kickOff(client, '/$export', {}, queued);
    const polled = await fhir(queued, client, status);
    expect(polled.status).toBe(202);
    expect(polled.headers.get('x-progress')).toMatch(/^0 resource\(s\) exported; 0 of \d+ type\(s\) done$/);
    expect(Number(polled.headers.get('retry-after'))).toBeGreaterThan(0);
    const second = await fhir(queued, client, '/Patient/$export', { headers: ASYNC });
    expect(second.status).toBe(429);
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await second.json()) as Resource).resourceType).toBe('OperationOutcome');
    expect((await fhir(queued, client, status, { method: 'DELETE' })).status).toBe(202);
    expect((await fhir(queued, client, status)).status).toBe(404);
    expect((await fhir(queued, client, status, { method: 'DELETE' })).status).toBe(404);
    const again = await kickOff(client, '/$export?_type=Condition', {}, queued);
    expect((await fhir(queued, client, again, { method: 'DELETE' })).status).toBe(202);
  });

  it('DELETE while running: the worker stops, no file is left, the status URL answers 404', async () => {
    const status = await kickOff(client, '/$export?_type=Condition,Observation', {}, queued);
    const exports = queued.services.bulkExports;
    const task = (await exports.claim())!;
    expect(task.type).toBe('Condition');
    const repo = queued.services.fhir.repository({ principal: task.principal, channel: 'fhir' });
    expect(await exports.step(task, repo)).toBe('more');
    const running = await fhir(queued, client, status);
    expect(running.status).toBe(202);
    expect(running.headers.get('x-progress')).toBe('2 resource(s) exported; 0 of 2 type(s) done');
    expect((await fhir(queued, client, status, { method: 'DELETE' })).status).toBe(202);
    expect(await exports.step(task, repo)).toBe('lost');
    expect(await exports.files(task.jobId)).toEqual([]);
    expect((await fhir(queued, client, status)).status).toBe(404);
  });

  it('the types of one export are claimed and written side by side; it completes once every type is written, whoever notices', async () => {
    const status = await kickOff(client, '/$export?_type=Condition,Observation', {}, queued);
    const exports = queued.services.bulkExports;
    const first = (await exports.claim())!;
    const second = (await exports.claim())!;
    expect([first.type, second.type]).toEqual(['Condition', 'Observation']);
    expect(await exports.claim()).toBeUndefined();
    const repo = queued.services.fhir.repository({ principal: first.principal, channel: 'fhir' });
    while ((await exports.step(second, repo)) === 'more');
    while ((await exports.step(first, repo)) === 'more');
    // Both written, and their claimer gone before completing the export: it is still running...
    expect((await fhir(queued, client, status)).headers.get('x-progress')).toBe('5 resource(s) exported; 2 of 2 type(s) done');
    // ...until any worker's next pass completes it.
    expect((await exports.completeFinished()).map((j) => j.id)).toEqual([first.jobId]);
    const { manifest, resources } = await finish(client, status, queued);
    expect(manifest.output.map((f) => `${f.type}:${f.count}`)).toEqual(['Condition:2', 'Condition:1', 'Observation:2']);
    expect(keys(resources)).toEqual(keys([...(await searchAll(client, '/Condition', queued)), ...(await searchAll(client, '/Observation', queued))]));
  });

  it('files cut by the byte limit: the next read asks only for what a file holds; every resource is exported once', async () => {
    const exports = queued.services.bulkExports;
    const saved = { ...exports.settings };
    try {
      // One line per file (the first line of a page is always kept), pages of up to 50.
      Object.assign(exports.settings, { partResources: 50, partBytes: 1 });
      const status = await kickOff(client, '/$export?_type=Condition', {}, queued);
      const task = (await exports.claim())!;
      const repo = queued.services.fhir.repository({ principal: task.principal, channel: 'fhir' });
      expect(task.meanLineBytes).toBeUndefined();
      expect(await exports.step(task, repo)).toBe('more');
      expect(task.meanLineBytes).toBeGreaterThan(50);
      expect(readAhead(50, 1, task.meanLineBytes)).toBe(1);
      while ((await exports.step(task, repo)) === 'more');
      expect((await exports.completeFinished()).map((j) => j.id)).toEqual([task.jobId]);
      const { manifest, resources } = await finish(client, status, queued);
      const conditions = await searchAll(client, '/Condition', queued);
      expect(manifest.output.map((f) => f.count)).toEqual(conditions.map(() => 1));
      expect(keys(resources)).toEqual(keys(conditions));
    } finally {
      Object.assign(exports.settings, saved);
    }
  });

  it('a read longer than one text (48 KiB) comes back as several: every line once, in the order written, each file cut at the byte limit', async () => {
    const exports = queued.services.bulkExports;
    const saved = { ...exports.settings };
    try {
      const [patient] = await searchAll(client, '/Patient', queued);
      const written: string[] = [];
      for (let i = 0; i < 40; i++) {
        const res = await queued.json(`${FHIR}/Observation`, {
          method: 'POST',
          headers: client.headers,
          json: { resourceType: 'Observation', status: 'final', code: { text: `long ${i}` }, subject: { reference: `Patient/${patient!.id}` }, note: [{ text: `${i} `.repeat(4000) }] },
        });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        written.push((res.body as Resource).id!);
      }
      // ~8-10 kB a line: a part's reads span two or three texts, and end past 100 kB.
      Object.assign(exports.settings, { partResources: 1000, partBytes: 100_000 });
      const status = await kickOff(client, '/$export?_type=Observation', {}, queued);
      const task = (await exports.claim())!;
      const repo = queued.services.fhir.repository({ principal: task.principal, channel: 'fhir' });
      while ((await exports.step(task, repo)) === 'more');
      await exports.completeFinished();
      const { manifest, resources } = await finish(client, status, queued);
      expect(manifest.output.length).toBeGreaterThan(3);
      for (const file of manifest.output) {
        const body = await (await fhir(queued, client, local(file.url))).text();
        const lines = body.split('\n').slice(0, -1);
        // Under the limit before its last line (the first line of a part is always kept).
        expect(Buffer.byteLength(body) - Buffer.byteLength(lines.at(-1)!) - 1).toBeLessThan(100_000);
      }
      const ids = resources.map((r) => r.id!);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids.filter((id) => written.includes(id))).toEqual(written);
      expect(keys(resources)).toEqual(keys(await searchAll(client, '/Observation', queued)));
    } finally {
      Object.assign(exports.settings, saved);
    }
  });

  it('the client revoked after its kick-off: the export fails, nothing is written', async () => {
    const doomed = await createTestClient(queued, ['fhir:read'], { organizationId: 'org-q', allPatients: true });
    const status = await kickOff(doomed, '/$export?_type=Condition', {}, queued);
    await revokeClient(queued.services.db, doomed.client_id);
    const exports = queued.services.bulkExports;
    exports.settings.concurrency = 1;
    try {
      await worker(queued).drain();
    } finally {
      exports.settings.concurrency = 0;
    }
    const job = await exports.find(status.split('/').pop()!, { clientId: doomed.client_id, organizationId: 'org-q' });
    expect(job?.status).toBe('failed');
    expect(job?.error).toMatch(/revoked/);
    expect(await exports.files(job!.id)).toEqual([]);
  });

  it(`a job interrupted ${MAX_ATTEMPTS} times fails visibly: 500 with an OperationOutcome, and no files`, async () => {
    const status = await kickOff(client, '/$export?_type=Condition', {}, queued);
    const exports = queued.services.bulkExports;
    try {
      for (let i = 0; i < MAX_ATTEMPTS; i++) {
        // A claimer that dies at once: the lease runs out, the next claim is another attempt.
        exports.now = () => Date.now() + i * 61_000;
        expect((await exports.claim())?.attempts).toBe(i + 1);
      }
      exports.now = () => Date.now() + MAX_ATTEMPTS * 61_000;
      exports.settings.concurrency = 1;
      await worker(queued).drain();
      const res = await fhir(queued, client, status);
      expect(res.status).toBe(500);
      const body = (await res.json()) as { resourceType: string; issue: Array<{ diagnostics: string }> };
      expect(body.resourceType).toBe('OperationOutcome');
      expect(body.issue[0]!.diagnostics).toMatch(/interrupted/);
    } finally {
      exports.settings.concurrency = 0;
      exports.now = Date.now;
    }
  });
});

describe.skipIf(backend !== 'postgres')('bulk export: a server stopped mid-export', () => {
  it('another process on the same database takes the job over after the lease and completes it: every resource once', async () => {
    const scratch = await createScratchDatabase({ migrated: true });
    const exportDir = mkdtempSync(join(tmpdir(), 'pont-exports-'));
    const env = { PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: scratch.url, PONT_BULK_EXPORT_FILE_RESOURCES: '2', PONT_BULK_EXPORT_DIR: exportDir };
    let first: RunningPont | undefined = await startPont(loadConfig({ ...env, PONT_BULK_EXPORT_CONCURRENCY: '0' }));
    let second: RunningPont | undefined;
    try {
      const token = await operatorOf(first.services.db);
      let client = await token(first);
      const p = await registerPatient(first, client, 'Interrupted');
      await createRecord(first, client, p.id, 5);
      const status = await kickOff(client, '/$export?_type=Patient,Condition,Observation', {}, first);
      // The first process claims the job, writes one file, and stops without giving it back (as if killed).
      const exports = first.services.bulkExports;
      const job = (await exports.claim())!;
      expect(await exports.step(job, first.services.fhir.repository({ principal: job.principal, channel: 'fhir' }))).toBe('more');
      await first.close();
      first = undefined;

      second = await startPont(loadConfig(env));
      client = await token(second);
      await worker(second).drain();
      expect((await fhir(second, client, status)).status).toBe(202); // the lease still holds: nobody resumes yet
      second.services.bulkExports.now = () => Date.now() + 61_000;
      const { resources } = await finish(client, status, second);
      const want = [...(await searchAll(client, '/Patient', second)), ...(await searchAll(client, '/Condition', second)), ...(await searchAll(client, '/Observation', second))];
      expect(keys(resources)).toEqual(keys(want));
      expect(new Set(keys(resources)).size).toBe(resources.length);
    } finally {
      await first?.close();
      await second?.close();
      await scratch.drop();
      rmSync(exportDir, { recursive: true, force: true });
    }
  }, 60_000);

  it('a `pont serve` killed (SIGKILL) while it writes files: another process resumes after the lease; every file whole, every resource once', async () => {
    const scratch = await createScratchDatabase({ migrated: true });
    const exportDir = mkdtempSync(join(tmpdir(), 'pont-exports-'));
    // One resource per file: the export is 151 transactions long, and is killed in the middle of one once 20 files are
    // written (20 took the child 0.6 s, the 131 left the second process 1.8 s, on a loaded machine). It was 401 files:
    // the 250 more lengthened the transaction that writes them and the resumption, and tested nothing more.
    const conditions = 150;
    const env = { PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: scratch.url, PONT_BULK_EXPORT_FILE_RESOURCES: '1', PONT_BULK_EXPORT_DIR: exportDir };
    let setup: RunningPont | undefined = await startPont(loadConfig({ ...env, PONT_BULK_EXPORT_CONCURRENCY: '0' }));
    let child: ChildProcess | undefined;
    let second: RunningPont | undefined;
    try {
      const token = await operatorOf(setup.services.db);
      let client = await token(setup);
      const p = await registerPatient(setup, client, 'Killed');
      const subject = { reference: `Patient/${p.id}` };
      const entry = Array.from({ length: conditions }, (_, i) => ({ resource: { resourceType: 'Condition', subject, code: { text: `Condition ${i}` } }, request: { method: 'POST', url: 'Condition' } }));
      const res = await fhir(setup, client, '', { method: 'POST', headers: { 'content-type': 'application/fhir+json' }, body: JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry }) });
      expect(res.status).toBe(200);
      const status = await kickOff(client, '/$export?_type=Patient,Condition', {}, setup);
      const jobId = status.split('/').pop()!;
      await setup.close();
      setup = undefined;

      const served = await serve([], { ...env, PONT_BULK_EXPORT_CONCURRENCY: '1' });
      child = served.child;
      const files = () => setupQuery(scratch.url, 'SELECT count(*)::int AS n FROM bulk_export_parts WHERE job_id = $1', [jobId]);
      await eventually(async () => expect(await files()).toBeGreaterThanOrEqual(20), { timeoutMs: 60_000, intervalMs: 20 });
      child.kill('SIGKILL');
      await once(child, 'exit');
      child = undefined;
      const written = await files();
      expect(written).toBeLessThan(conditions + 1); // killed before the end

      second = await startPont(loadConfig(env));
      second.services.bulkExports.now = () => Date.now() + 61_000; // the dead process's lease has run out
      client = await token(second);
      await worker(second).drain();
      const { manifest, resources } = await finish(client, status, second);
      expect(manifest.output.length).toBe(conditions + 1);
      const want = [...(await searchAll(client, '/Patient', second)), ...(await searchAll(client, '/Condition', second))];
      expect(keys(resources)).toEqual(keys(want));
      expect(new Set(keys(resources)).size).toBe(resources.length);
      expect(manifest.output.every((f) => f.count === 1)).toBe(true);
    } finally {
      child?.kill('SIGKILL');
      await setup?.close();
      await second?.close();
      await scratch.drop();
      rmSync(exportDir, { recursive: true, force: true });
    }
  }, 120_000);
});

/** One number from a statement on `url`, outside any server (the test watches a process it does not own). */
async function setupQuery(url: string, text: string, values: unknown[]): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ n: number }>(text, values)).rows[0]!.n;
  } finally {
    await client.end();
  }
}

describe.skipIf(backend !== 'postgres')('bulk export: a write still open at the kick-off', () => {
  it('is waited for and exported: not lost between this export and the next one _since its transactionTime', async () => {
    const { server, client } = await queuedServer('org-open', 'OpenWrite');
    let release = () => {};
    try {
      const exports = server.services.bulkExports;
      const [patient] = await searchAll(client, '/Patient', server);
      const principal: ClientPrincipal = { kind: 'client', clientId: client.client_id, organizationId: 'org-open', scopes: ['fhir:read', 'fhir:write'], allPatients: true };
      const repo = server.services.fhir.repository({ principal, channel: 'fhir' });
      const held = new Promise<void>((resolve) => (release = resolve));
      let wrote = () => {};
      const written = new Promise<void>((resolve) => (wrote = resolve));
      let open: Resource | undefined;
      // A write through the repository whose transaction stays open (a large Bundle still committing).
      const writing = repo.transaction(async () => {
        open = await repo.create({ resourceType: 'Observation', status: 'final', code: { text: 'open at the kick-off' }, subject: { reference: `Patient/${patient!.id}` } } as Resource);
        wrote();
        await held;
      });
      await written;
      // One written after it and committed: the export's reads go past the open one's place.
      const after = await server.json(`${FHIR}/Observation`, {
        method: 'POST',
        headers: client.headers,
        json: { resourceType: 'Observation', status: 'final', code: { text: 'committed' }, subject: { reference: `Patient/${patient!.id}` } },
      });
      expect(after.status).toBe(201);
      const status = await kickOff(client, '/$export?_type=Observation', {}, server);
      const progress = await fhir(server, client, status);
      expect(progress.status).toBe(202);
      expect(progress.headers.get('x-progress')).toMatch(/^waiting for \d+ write\(s\) still open at the kick-off/);
      // The claim waits for the open write: it ends once the claim has looked twice (the export reads nothing before).
      const look = exports.openAtKickOff.bind(exports);
      let looks = 0;
      exports.openAtKickOff = async (jobId) => {
        const open = await look(jobId);
        if (++looks === 2) release();
        return open;
      };
      const task = (await exports.claim())!;
      const taskRepo = server.services.fhir.repository({ principal: task.principal, channel: 'fhir' });
      while ((await exports.step(task, taskRepo)) === 'more');
      await exports.completeFinished();
      release();
      await writing;
      const { manifest, resources } = await finish(client, status, server);
      expect(open!.meta!.lastUpdated! <= manifest.transactionTime).toBe(true);
      expect(resources.map((r) => r.id)).toEqual(expect.arrayContaining([open!.id, after.body.id]));
      expect(keys(resources)).toEqual(keys(await searchAll(client, '/Observation', server)));
    } finally {
      release();
      await server.close();
    }
  }, 60_000);

  it("another database's transaction open at the kick-off is not waited for (a snapshot lists every database's)", async () => {
    const { server, client } = await queuedServer('org-elsewhere', 'Elsewhere');
    const other = new pg.Client({ connectionString: postgresAdminUrl }); // the server's maintenance database, not Pont's
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT pg_current_xact_id()'); // an xid: in every snapshot taken while it is open
      const status = await kickOff(client, '/$export?_type=Observation', {}, server);
      const progress = await fhir(server, client, status);
      expect(progress.headers.get('x-progress')).toMatch(/^0 resource\(s\) exported/);
      // The claim reads at once (it waited, looking again and again, for the other database's transaction).
      const exports = server.services.bulkExports;
      const task = (await exports.claim())!;
      const repo = server.services.fhir.repository({ principal: task.principal, channel: 'fhir' });
      while ((await exports.step(task, repo)) === 'more');
      await exports.completeFinished();
      const { resources } = await finish(client, status, server);
      expect(keys(resources)).toEqual(keys(await searchAll(client, '/Observation', server)));
    } finally {
      await other.query('ROLLBACK').catch(() => {});
      await other.end();
      await server.close();
    }
  }, 60_000);
});

describe.runIf(backend === 'postgres')('bulk export: reads of a part (unit)', () => {
  it('asks for what the part still takes at the mean line size (10% more), at most MAX_READ_LINES; 100 before any size is known', () => {
    const MiB8 = 8 * 1024 * 1024;
    // ExplanationOfBenefits of ~7 kB: ~1,318 fill a file, 1,000 at most per read; 1 MiB left: ~165.
    expect(readAhead(10_000, MiB8, 7000)).toBe(MAX_READ_LINES);
    expect(readAhead(10_000, 1024 * 1024, 7000)).toBe(Math.ceil(((1024 * 1024) / 7000) * 1.1));
    expect(readAhead(3, MiB8, 500)).toBe(3);
    expect(readAhead(50, 1, 300)).toBe(1);
    expect(readAhead(10_000, MiB8, undefined)).toBe(100);
  });
});

describe('bulk export: an export directory that cannot be used', () => {
  let broken: TestServer;
  let client: TestClient;
  let notADirectory: string;
  beforeAll(async () => {
    // PONT_BULK_EXPORT_DIR names a file (an operator's typo, a volume not mounted): every mkdir and rm under it fails
    // (ENOTDIR; EACCES behaves alike for a non-root process and a 0700 directory it does not own).
    const parent = mkdtempSync(join(tmpdir(), 'pont-exports-broken-'));
    notADirectory = join(parent, 'exports');
    writeFileSync(notADirectory, 'not a directory');
    broken = await startTestServer({ PONT_BULK_EXPORT_CONCURRENCY: '0', PONT_BULK_EXPORT_DIR: notADirectory });
    client = await createTestClient(broken, ['fhir:read', 'fhir:write', 'health_id:verify'], { organizationId: 'org-broken', allPatients: true });
    const p = await registerPatient(broken, client, 'Broken');
    await createRecord(broken, client, p.id, 1);
  }, 60_000);
  afterAll(async () => {
    await broken?.close();
    rmSync(join(notADirectory, '..'), { recursive: true, force: true });
  });

  it(`the export fails visibly after ${MAX_ATTEMPTS} attempts (500 on its status URL), DELETE cancels it, and the client may export again`, async () => {
    const status = await kickOff(client, '/$export?_type=Condition', {}, broken);
    const exports = broken.services.bulkExports;
    try {
      for (let i = 0; i <= MAX_ATTEMPTS; i++) {
        // Each attempt's step fails (the directory), its lease runs out, the next claim is another attempt; the last fails the job.
        exports.now = () => Date.now() + i * 61_000;
        exports.settings.concurrency = 1;
        await worker(broken).drain();
        exports.settings.concurrency = 0;
      }
      const res = await fhir(broken, client, status);
      expect(res.status, 'the status URL after every attempt failed').toBe(500);
    } finally {
      exports.settings.concurrency = 0;
      exports.now = Date.now;
    }
  });

  it('DELETE of an export whose directory cannot be removed: 202 (the rows go), not 500 with the job kept and the client blocked (429)', async () => {
    const other = await createTestClient(broken, ['fhir:read'], { organizationId: 'org-broken', allPatients: true });
    const status = await kickOff(other, '/$export?_type=Patient', {}, broken);
    const del = await fhir(broken, other, status, { method: 'DELETE' });
    expect(del.status, await del.clone().text()).toBe(202);
    const again = await fhir(broken, other, '/$export?_type=Patient', { headers: ASYNC });
    expect(again.status).toBe(202);
  });
});

describe.runIf(backend === 'postgres')('bulk export: cancel while a part is being written', () => {
  let queued: TestServer;
  let client: TestClient;
  beforeAll(async () => void ({ server: queued, client } = await queuedServer('org-cancel-race', 'CancelRace')), 60_000);
  afterAll(() => queued?.close());

  it('DELETE arriving while the worker reads a part: 202, the worker stops (no deadlock between the two), nothing is left', async () => {
    const status = await kickOff(client, '/$export?_type=Condition', {}, queued);
    const exports = queued.services.bulkExports;
    const task = (await exports.claim())!;
    const repo = queued.services.fhir.repository({ principal: task.principal, channel: 'fhir' });
    const watcher = new pg.Client({ connectionString: queued.config.databaseUrl });
    await watcher.connect();
    let cancelled: Promise<Response> | undefined;
    try {
      const exportPageQuery = repo.exportPageQuery.bind(repo);
      // The client's DELETE comes while the step is reading the part (its task row locked): wait until the DELETE waits.
      repo.exportPageQuery = (async (...args: Parameters<typeof exportPageQuery>) => {
        if (!cancelled) {
          cancelled = fhir(queued, client, status, { method: 'DELETE' });
          await eventually(async () => {
            const { rows } = await watcher.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%DELETE FROM bulk_export_jobs%'`);
            expect(rows[0].n).toBe(1);
          });
        }
        return exportPageQuery(...args);
      }) as typeof repo.exportPageQuery;
      const stepped = await exports.step(task, repo).then(
        (outcome) => outcome,
        (err: unknown) => `step failed: ${(err as Error).message}`,
      );
      const del = await cancelled!;
      expect(del.status, await del.clone().text()).toBe(202);
      expect(stepped).not.toMatch(/deadlock/);
      expect(existsSync(join(queued.config.bulkExport.dir, task.jobId))).toBe(false);
      expect((await fhir(queued, client, status)).status).toBe(404);
    } finally {
      await watcher.end();
    }
  });
});

// The export files alone, no database: run once.
describe.runIf(backend === 'postgres')('bulk export: a short write (disk full, file size limit)', () => {
  it('a part whose bytes did not all reach the file is never finished as whole (finish fails, or the size is every byte written)', async () => {
    // RLIMIT_FSIZE (ulimit -f, 1 KiB blocks) makes write(2) write what fits and return the count, as a full disk does
    // (ENOSPC comes only on the next write); Node ignores SIGXFSZ. The part here is one write of 1,500 bytes.
    const dir = mkdtempSync(join(tmpdir(), 'pont-exports-short-'));
    const script = `
      import { ExportFiles } from './src/bulk/files.ts';
      const files = new ExportFiles(${JSON.stringify(dir)});
      const w = await files.writer('0123456789abcdef0123456789abcdef', 1);
      const line = JSON.stringify({ resourceType: 'Basic', id: 'x', text: 'a'.repeat(1450) });
      try {
        await w.write(line + '\\n');
        console.log(JSON.stringify({ written: Buffer.byteLength(line) + 1, finished: await w.finish() }));
      } catch (err) {
        console.log(JSON.stringify({ written: Buffer.byteLength(line) + 1, failed: err.code ?? String(err) }));
      }`;
    try {
      const { execFileSync } = await import('node:child_process');
      const out = execFileSync('bash', ['-c', `ulimit -f 1 && exec node --import tsx --input-type=module -e "$SCRIPT"`], {
        cwd: new URL('..', import.meta.url).pathname,
        env: { ...process.env, SCRIPT: script },
      }).toString();
      const result = JSON.parse(out.trim().split('\n').pop()!) as { written: number; finished?: number; failed?: string };
      if (result.failed === undefined) expect(result.finished, 'the size finish() reports, which becomes the part row\'s bytes').toBe(result.written);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.runIf(backend === 'postgres')('bulk export: an export failing while another of its types writes a part', () => {
  let queued: TestServer;
  let client: TestClient;
  beforeAll(async () => void ({ server: queued, client } = await queuedServer('org-fail-race', 'FailRace')), 60_000);
  afterAll(() => queued?.close());

  it('the failed export keeps no file and no part: a part of another type written meanwhile goes too', async () => {
    const status = await kickOff(client, '/$export?_type=Condition,Observation', {}, queued);
    const exports = queued.services.bulkExports;
    const failing = (await exports.claim())!;
    const writing = (await exports.claim())!;
    expect([failing.type, writing.type]).toEqual(['Condition', 'Observation']);
    const repo = queued.services.fhir.repository({ principal: writing.principal, channel: 'fhir' });
    const transaction = repo.transaction.bind(repo);
    // Condition's worker fails the export (its attempts ran out) while Observation's step has its task and is about to read.
    const watcher = new pg.Client({ connectionString: queued.config.databaseUrl });
    await watcher.connect();
    let failed: Promise<void> | undefined;
    repo.transaction = (async (fn: (sql: any) => Promise<unknown>) =>
      transaction((sql) =>
        fn({
          ...sql,
          query: async (text: string, values?: unknown[]) => {
            if (text.includes('pg_current_snapshot') && !failed) {
              failed = exports.fail(failing, 'interrupted too often');
              // Done, or waiting for this step (a fix may make it wait): either way the step goes on.
              const waiting = eventually(async () => {
                const { rows } = await watcher.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE bulk_export_jobs SET status = ''failed''%'`);
                expect(rows[0].n).toBe(1);
              });
              await Promise.race([failed, waiting]);
            }
            return sql.query(text, values as any);
          },
        }),
      )) as typeof repo.transaction;
    try {
      await exports.step(writing, repo);
      await failed;
    } finally {
      await watcher.end();
    }
    const job = await exports.find(failing.jobId, { clientId: client.client_id, organizationId: 'org-fail-race' });
    expect(job?.status).toBe('failed');
    const dir = join(queued.config.bulkExport.dir, failing.jobId);
    // Left over: part rows, and patient data on disk until the failed export expires (PONT_BULK_EXPORT_TTL).
    expect({ parts: await exports.files(failing.jobId), files: existsSync(dir) ? readdirSync(dir) : [] }).toEqual({ parts: [], files: [] });
    expect((await fhir(queued, client, status)).status).toBe(500);
  });
});
