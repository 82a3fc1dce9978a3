import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bundle, CodeSystem, ValueSet } from '@medplum/fhirtypes';
import type { Queryable } from '../src/db/database';
import { loadResource, resourcesOf } from '../src/fhir/term/files';
import { TerminologyLoader } from '../src/fhir/term/load';
import { TerminologyLookup } from '../src/fhir/term/lookup';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { CHRONIC_VS, chronicMapsDir } from './chronic-map';
import { eventually } from './eventually';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

// Issue 46 (4): the maps read the loaded terminology, on both databases. Code systems and a value set built here are
// loaded through the load command's path (its file reader and loader); then Connect records show the displays of
// codings written without one and a map's memberOf() (the chronic marker of test/chronic-map.ts, a copy of the maps);
// a reload is seen by the next reads (the per-process cache hears it); $validate judges bindings to loaded value sets,
// and writes refuse a code outside a loaded value set of a required binding.

const SCT = 'http://snomed.info/sct';
const LOINC = 'http://loinc.org';
const LAB = 'http://terminology.hl7.org/CodeSystem/observation-category';
const BASE = '/api/fhir/R4';
const PATIENT = 'term-maps-1';

let pont: TestServer;
let operator: TestClient;
let reader: TestClient;
let healthId: string;
let dir: string;

const snomed = (diabetes: string): CodeSystem => ({
  resourceType: 'CodeSystem', id: 'sct-fragment', url: SCT, version: 'test-1', status: 'active', content: 'fragment',
  concept: [
    { code: '44054006', display: diabetes },
    { code: '195967001', display: 'Asthma' },
    { code: '10509002', display: 'Acute bronchitis' },
  ],
});
const loinc: CodeSystem = {
  resourceType: 'CodeSystem', id: 'loinc-fragment', url: LOINC, version: '2.77', status: 'active', content: 'fragment',
  concept: [{ code: '718-7', display: 'Hemoglobin [Mass/volume] in Blood' }],
};
const chronic = (codes: string[]): ValueSet => ({
  resourceType: 'ValueSet', id: 'chronic-conditions', url: CHRONIC_VS, status: 'active',
  compose: { include: [{ system: SCT, concept: codes.map((code) => ({ code })) }] },
});

/** Loads the resources as `pont terminology load FILE` does: the file read by its reader, each resource by the loader. */
async function load(name: string, resources: Array<CodeSystem | ValueSet>): Promise<void> {
  const file = join(dir, `${name}.json`);
  const bundle: Bundle = { resourceType: 'Bundle', type: 'collection', entry: resources.map((resource) => ({ resource })) };
  writeFileSync(file, JSON.stringify(bundle));
  const loader = new TerminologyLoader(pont.services.db);
  for await (const r of resourcesOf(file)) await loadResource(loader, r);
}

const call = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) => pont.json(path, { ...init, headers: { ...client.headers } });
const put = async (resource: any) => {
  const res = await call(operator, `${BASE}/${resource.resourceType}/${resource.id}`, { method: 'PUT', json: resource });
  expect([200, 201], JSON.stringify(res.body).slice(0, 400)).toContain(res.status);
  return res.body;
};
async function records(type: string): Promise<any[]> {
  const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=${type}&limit=100`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.records[type];
}
const diagnosis = async (id: string) => (await records('diagnoses')).find((r) => r.id === id);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'pont-term-maps-'));
  pont = await startTestServer({ PONT_MAPPINGS_DIR: chronicMapsDir(dir) });
  operator = await createTestClient(pont, ['fhir:write', 'fhir:read'], { organizationId: 'org-term-maps', allPatients: true });
  const patient = await put({ resourceType: 'Patient', id: PATIENT, name: [{ family: 'Okafor', given: ['Ada'] }], gender: 'female', birthDate: '1961-04-02' });
  healthId = patient.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
  reader = await createTestClient(pont, ['consents:write', 'patient:diagnostics:read', 'patients:read', 'labs:read'], { organizationId: 'org-term-maps-reader' });
  const granted = await call(reader, `/api/v1/connect/patient/${healthId}/consent/grant`, {
    method: 'POST',
    json: { consent_type: 'full_record', expires_at: new Date(Date.now() + 365 * 86_400_000).toISOString() },
  });
  expect(granted.status, JSON.stringify(granted.body)).toBe(201);
  // Coded by another system: no text, no display.
  const condition = (id: string, code: string, date: string) => ({
    resourceType: 'Condition', id, subject: { reference: `Patient/${PATIENT}` }, recordedDate: date,
    clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }] },
    code: { coding: [{ system: SCT, code }] },
  });
  await put(condition('dm', '44054006', '2024-03-01'));
  await put(condition('bronchitis', '10509002', '2024-03-02'));
  await put({ ...condition('local', 'X-17', '2024-03-03'), code: { coding: [{ system: 'https://clinic.example.org/codes', code: 'X-17' }] } });
  await put({
    resourceType: 'Observation', id: 'hb', status: 'final', subject: { reference: `Patient/${PATIENT}` }, effectiveDateTime: '2024-03-04T09:00:00Z',
    category: [{ coding: [{ system: LAB, code: 'laboratory' }] }],
    code: { coding: [{ system: LOINC, code: '718-7' }] },
    valueQuantity: { value: 13.2, unit: 'g/dL', system: 'http://unitsofmeasure.org', code: 'g/dL' },
  });
});
afterAll(async () => {
  await pont?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('records read the loaded terminology (displays, memberOf())', () => {
  it('before any load: the bare code, and chronic null (the value set is not loaded)', async () => {
    expect(await diagnosis('dm')).toMatchObject({ display_name: '44054006', snomed_display: null, chronic: null, codings: [{ system: SCT, code: '44054006', display: null }] });
    expect((await records('lab_results')).find((r) => r.id === 'hb')).toMatchObject({ test_name: '718-7' });
  });

  it("after a load: the code system's display, and chronic from the value set's expansion", async () => {
    await load('first', [snomed('Diabetes mellitus type 2'), loinc, chronic(['44054006', '195967001'])]);
    // The load is announced (NOTIFY): the records read it at once (this process's cache forgets what it kept).
    await eventually(async () => expect(await diagnosis('dm')).toMatchObject({ display_name: 'Diabetes mellitus type 2', chronic: true }), { timeoutMs: 5000 });
    expect(await diagnosis('dm')).toMatchObject({
      display_name: 'Diabetes mellitus type 2',
      snomed_display: 'Diabetes mellitus type 2',
      codings: [{ system: SCT, code: '44054006', display: 'Diabetes mellitus type 2' }],
      chronic: true,
    });
    expect(await diagnosis('bronchitis')).toMatchObject({ display_name: 'Acute bronchitis', chronic: false });
    // A code of a system not loaded: its code, and not in the value set (whose codes are all SNOMED CT).
    expect(await diagnosis('local')).toMatchObject({ display_name: 'X-17', chronic: false });
    expect((await records('lab_results')).find((r) => r.id === 'hb')).toMatchObject({ test_name: 'Hemoglobin [Mass/volume] in Blood' });
    // The SDK summary reads its sections alike.
    const summary = await call(reader, `/api/v1/sdk/patients/${healthId}/summary`);
    expect(summary.status, JSON.stringify(summary.body)).toBe(200);
    expect(summary.body.recent_labs.find((r: any) => r.id === 'hb')).toMatchObject({ test_name: 'Hemoglobin [Mass/volume] in Blood' });
  });

  it('a reload (a new display, the value set changed) is seen by the next reads, within seconds', async () => {
    await diagnosis('dm'); // cached now
    await load('second', [snomed('Type 2 diabetes mellitus'), chronic(['10509002'])]);
    await eventually(async () => expect(await diagnosis('dm')).toMatchObject({ display_name: 'Type 2 diabetes mellitus', chronic: false }), { timeoutMs: 5000 });
    expect(await diagnosis('bronchitis')).toMatchObject({ chronic: true });
  });

  it('a page asks at most one statement, none once the process has the answers; a load empties the cache', async () => {
    const lookup = new TerminologyLookup(pont.services.db);
    let statements = 0;
    const counted: Queryable = { query: (sql, params) => (statements++, pont.services.db.query(sql, params)), exec: (sql) => pont.services.db.exec(sql) };
    const asked = { codings: [{ system: SCT, code: '195967001' }, { system: 'https://clinic.example.org/codes', code: 'X-17' }], members: [{ valueSet: CHRONIC_VS, system: SCT, code: '10509002' }] };
    // Until its listening connection is ready nothing is cached; then a second look needs no statement.
    await eventually(async () => {
      statements = 0;
      await lookup.answers(counted, asked);
      const first = statements;
      const answers = await lookup.answers(counted, asked);
      expect([first, statements]).toEqual([first, first]);
      expect(answers!.display(SCT, '195967001')).toBe('Asthma');
      expect(answers!.memberOf(CHRONIC_VS, SCT, '10509002')).toBe(true);
      expect(answers!.memberOf('https://example.org/fhir/ValueSet/not-loaded', SCT, '10509002')).toBeUndefined();
    });
    await load('third', [snomed('Diabetes mellitus type 2'), chronic(['44054006'])]);
    await eventually(async () => expect((await lookup.answers(counted, asked))!.memberOf(CHRONIC_VS, SCT, '10509002')).toBe(false), { timeoutMs: 5000 });
    await lookup.close();
  });
});

describe('$validate judges bindings to loaded value sets', () => {
  it('required refuses (error), extensible warns, a value set not loaded is not judged', async () => {
    const writer = await createTestClient(pont, ['fhir:write'], { organizationId: 'org-term-maps-validate' });
    const validate = async (resource: object) =>
      (await pont.json(`${BASE}/${(resource as { resourceType: string }).resourceType}/$validate`, { method: 'POST', headers: writer.headers, json: resource })).body;
    const marital = (code: string) => ({ resourceType: 'Patient', maritalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', code }] } });
    const allergy = (code: string) => ({
      resourceType: 'AllergyIntolerance',
      patient: { reference: 'Patient/x' },
      clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code }] },
    });
    // Not loaded: W (widowed) is not judged against a loaded expansion (R4's own value set has it).
    expect((await validate(marital('W'))).issue).toEqual([expect.objectContaining({ severity: 'information' })]);
    expect((await validate(allergy('resolved'))).issue).toEqual([expect.objectContaining({ severity: 'information' })]);
    await load('bindings', [
      // Narrower versions of R4's value sets of Patient.maritalStatus (extensible) and AllergyIntolerance.clinicalStatus (required).
      { resourceType: 'ValueSet', id: 'test-marital', url: 'http://hl7.org/fhir/ValueSet/marital-status', status: 'active',
        compose: { include: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', concept: [{ code: 'M' }, { code: 'S' }] }] } },
      { resourceType: 'ValueSet', id: 'test-allergy-clinical', url: 'http://hl7.org/fhir/ValueSet/allergyintolerance-clinical', status: 'active',
        compose: { include: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', concept: [{ code: 'active' }] }] } },
    ]);
    expect((await validate(marital('M'))).issue).toEqual([expect.objectContaining({ severity: 'information' })]);
    // A warning (beside "No issues detected": no error), not a refusal.
    const warned = (await validate(marital('W'))).issue.filter((i: any) => i.severity !== 'information');
    expect(warned).toEqual([expect.objectContaining({ severity: 'warning', code: 'code-invalid', expression: ['Patient.maritalStatus'] })]);
    expect(warned[0].details.text).toContain('extensible binding');
    expect((await validate(allergy('active'))).issue).toEqual([expect.objectContaining({ severity: 'information' })]);
    const refused = await validate(allergy('resolved'));
    expect(refused.issue).toEqual([expect.objectContaining({ severity: 'error', code: 'code-invalid', expression: ['AllergyIntolerance.clinicalStatus'] })]);
    expect(refused.issue[0].details.text).toContain('required binding');
    // A CodeableConcept passes with one coding in the value set.
    const two = { resourceType: 'Patient', maritalStatus: { coding: [{ system: 'http://example.org/local', code: 'wed' }, { system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', code: 'M' }] } };
    expect((await validate(two)).issue).toEqual([expect.objectContaining({ severity: 'information' })]);
  });

  it('writes refuse a code outside a loaded value set of a required binding (400, as $validate says); extensible ones are not refused', async () => {
    // The value sets of the test before are loaded (this file's database): allergy-clinical {active}, marital-status {M, S}.
    const allergy = (code: string) => ({
      resourceType: 'AllergyIntolerance',
      patient: { reference: `Patient/${PATIENT}` },
      clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code }] },
      code: { text: 'Penicillin' },
    });
    const post = (resource: any) => call(operator, `${BASE}/${resource.resourceType}`, { method: 'POST', json: resource });
    const refused = await post(allergy('resolved'));
    expect(refused.status).toBe(400);
    expect(refused.body.issue).toEqual([expect.objectContaining({ severity: 'error', code: 'code-invalid', expression: ['AllergyIntolerance.clinicalStatus'] })]);
    expect((await post(allergy('active'))).status).toBe(201);
    // In a transaction, the entry is named and nothing is written.
    const bundle = await call(operator, BASE, {
      method: 'POST',
      json: { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: allergy('active'), request: { method: 'POST', url: 'AllergyIntolerance' } }, { resource: allergy('resolved'), request: { method: 'POST', url: 'AllergyIntolerance' } }] },
    });
    expect(bundle.status).toBe(400);
    expect(JSON.stringify(bundle.body)).toContain('allergyintolerance-clinical');
    // Extensible: a write stores W (widowed), outside the loaded marital-status.
    expect((await post({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: `Patient/${PATIENT}` } })).status).toBe(201);
    const widowed = await call(operator, `${BASE}/Patient/${PATIENT}`);
    const put = await call(operator, `${BASE}/Patient/${PATIENT}`, {
      method: 'PUT',
      json: { ...widowed.body, maritalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', code: 'W' }] } },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
  });
});
