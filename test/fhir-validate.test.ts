import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, type FhirResource } from 'fhir-kit-client';
import type { OperationOutcome, Patient } from '@medplum/fhirtypes';
import { createTestClient, type TestClient, type TestServer } from './harness';
import { FHIR_JSON, startTwoOrganisations, type FhirInit as Init, type TwoOrganisations } from './fhir-two-orgs';

/**
 * `$validate` (issue 25 item 4): the store's validator without storing anything, on `POST {type}/$validate` (mode
 * create) and `POST {type}/{id}/$validate` (mode update or delete, read like a read), through HTTP and fhir-kit-client.
 */
let pont: TestServer, a: TestClient, b: TestClient, fhir: TwoOrganisations['fhir'];
beforeAll(async () => void ({ pont, a, b, fhir } = await startTwoOrganisations()));
afterAll(async () => void (await pont?.close()));
const validate = (who: TestClient, path: string, json?: unknown) => fhir(who, `${path}/$validate`, { method: 'POST', json });

const patient: Patient = { resourceType: 'Patient', name: [{ family: 'Ngono', given: ['Awa'] }], gender: 'female', birthDate: '1975-06-01' };
/** Every stored row and version: $validate must not change either. */
/** What writes would change: resources and versions, but the AuditEvents the audit trail materialises meanwhile. */
async function storeSize(): Promise<string> {
  const { rows } = await pont.services.db.query<{ n: string; v: string }>(
    `SELECT (SELECT count(*) FROM fhir_resources WHERE resource_type <> 'AuditEvent') AS n,
            (SELECT count(*) FROM fhir_resource_versions v JOIN fhir_resources r USING (rid) WHERE r.resource_type <> 'AuditEvent') AS v`,
  );
  return `${rows[0]!.n}/${rows[0]!.v}`;
}
const errors = (outcome: OperationOutcome) => outcome.issue.filter((i) => i.severity === 'error');
const noIssues = (outcome: OperationOutcome) => outcome.resourceType === 'OperationOutcome' && outcome.issue.length === 1 && outcome.issue[0]!.severity === 'information';

describe('POST {type}/$validate (mode create)', () => {
  it('answers 200 "no issues" for a valid resource and stores nothing', async () => {
    const before = await storeSize();
    const res = await validate(a, '/Patient', patient);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain(FHIR_JSON);
    expect(noIssues(res.body)).toBe(true);
    expect(res.body.issue[0].details.text).toBe('No issues detected');
    expect(await storeSize()).toBe(before);
  });

  it('answers 200 with the issues of an invalid resource, the ones a create would refuse, and stores nothing', async () => {
    const before = await storeSize();
    const bad = { ...patient, gender: 'robot', birthDate: 'yesterday' };
    const res = await validate(a, '/Patient', bad);
    expect(res.status).toBe(200);
    expect(errors(res.body).length).toBeGreaterThan(0);
    expect(JSON.stringify(res.body)).toMatch(/Patient\.(gender|birthDate)/);
    expect(res.body.issue.some((i: any) => i.severity === 'information')).toBe(false);
    const create = await fhir(a, '/Patient', { method: 'POST', json: bad });
    expect(create.status).toBe(400);
    expect(await storeSize()).toBe(before);
    for (const other of [{ ...patient, name: 'not a list' }, { ...patient, __proto__x: 1, constructor: 'x' }, { ...patient, text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml"><script>x</script></div>' } }]) {
      const r = await validate(a, '/Patient', other);
      expect(r.status).toBe(200);
      expect(errors(r.body).length, JSON.stringify(other)).toBeGreaterThan(0);
    }
  });

  it('takes a Parameters with resource and mode; a profile is reported as not checked', async () => {
    const wrapped = await validate(a, '/Patient', { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: patient }, { name: 'mode', valueCode: 'create' }] });
    expect(wrapped.status).toBe(200);
    expect(noIssues(wrapped.body)).toBe(true);
    const profiled = await validate(a, '/Patient', { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: patient }, { name: 'profile', valueUri: 'http://example.org/p' }] });
    expect(profiled.status).toBe(200);
    expect(profiled.body.issue.map((i: any) => i.severity)).toEqual(['information', 'warning']);
    // A Parameters validated as itself.
    const own = await validate(a, '/Parameters', { resourceType: 'Parameters', parameter: [{ name: 'x', valueString: 'y' }] });
    expect(own.status).toBe(200);
    expect(noIssues(own.body)).toBe(true);
  });

  it('reports that a type written only by Pont cannot be written here (AuditEvent, Consent)', async () => {
    const consent = await validate(a, '/Consent', { resourceType: 'Consent', status: 'active', scope: { text: 'x' }, category: [{ text: 'x' }] });
    expect(consent.status).toBe(200);
    expect(errors(consent.body).map((i) => i.details?.text)).toContain('Consents are given through the consent routes, not written through FHIR');
  });

  it('refuses a request it cannot answer with a 400, never a 500', async () => {
    for (const [path, body] of [
      ['/Patient', { ...patient, resourceType: 'Observation' }],
      ['/Patient', undefined],
      ['/Patient', { resourceType: 'Parameters', parameter: [{ name: 'mode', valueCode: 'create' }] }],
      ['/Patient', { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: patient }, { name: 'mode', valueCode: 'destroy' }] }],
      ['/Patient', { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: patient }, { name: 'mode', valueCode: 'update' }] }],
      ['/Patient', { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: patient }, { name: 'surprise', valueString: 'x' }] }],
    ] as const) {
      const res = await validate(a, path, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
    expect((await fhir(a, '/Patient/$validate?mode=delete', { method: 'POST', json: patient })).status).toBe(400);
    expect((await validate(a, '/NoSuchType', patient)).status).toBe(404);
    const hostile: Init[] = [
      { json: [patient] },
      { json: 'Patient' },
      { raw: Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]) },
      { raw: '{"resourceType":"Patient"' },
      { json: JSON.parse('{"resourceType":"Patient","extension":' + '['.repeat(100) + ']'.repeat(100) + '}') },
      { json: { ...patient, gender: 'x'.repeat(2_000_000) } },
      { json: patient, type: 'text/plain' },
    ];
    for (const init of hostile) {
      const res = await fhir(a, '/Patient/$validate', { method: 'POST', ...init });
      expect(res.status, String(init.raw ?? JSON.stringify(init.json)).slice(0, 80)).toBeGreaterThanOrEqual(200);
      expect(res.status).toBeLessThan(500);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
  });

  it('needs the type\'s read scope or fhir:write: a labs reader validates Observations, not Patients', async () => {
    const labs = await createTestClient(pont, ['labs:read'], { organizationId: 'org-a' });
    const obs = { resourceType: 'Observation', status: 'final', code: { text: 'Hb' } };
    expect((await validate(labs, '/Observation', obs)).status).toBe(200);
    expect((await validate(labs, '/Patient', patient)).status).toBe(403);
    const writer = await createTestClient(pont, ['fhir:write'], { organizationId: 'org-a' });
    expect((await validate(writer, '/Patient', patient)).status).toBe(200);
  });
});

describe('POST {type}/{id}/$validate (mode update or delete)', () => {
  it('validates an update of a resource the caller owns, and its delete', async () => {
    const created = (await fhir(a, '/Patient', { method: 'POST', json: patient })).body;
    const before = await storeSize();
    const update = await validate(a, `/Patient/${created.id}`, { ...created, gender: 'male' });
    expect(update.status).toBe(200);
    expect(noIssues(update.body)).toBe(true);
    const invalid = await validate(a, `/Patient/${created.id}`, { ...created, gender: 'robot' });
    expect(errors(invalid.body).length).toBeGreaterThan(0);
    const del = await fhir(a, `/Patient/${created.id}/$validate?mode=delete`, { method: 'POST' });
    expect(del.status).toBe(200);
    expect(noIssues(del.body)).toBe(true);
    expect(await storeSize()).toBe(before);
    expect((await fhir(a, `/Patient/${created.id}`)).body.gender).toBe('female');
    expect((await validate(a, `/Patient/${created.id}`, { ...created, id: 'another' })).status).toBe(400);
    const wrongMode = await validate(a, `/Patient/${created.id}`, { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: created }, { name: 'mode', valueCode: 'create' }] });
    expect(wrongMode.status).toBe(400);
  });

  it('a resource the caller may not see answers 404 like a read (audited); unknown 404, deleted 410', async () => {
    const created = (await fhir(a, '/Patient', { method: 'POST', json: patient })).body;
    expect((await fhir(b, `/Patient/${created.id}`)).status).toBe(404);
    const foreign = await validate(b, `/Patient/${created.id}`, { ...created, gender: 'male' });
    expect(foreign.status).toBe(404);
    expect((await fhir(b, `/Patient/${created.id}/$validate?mode=delete`, { method: 'POST' })).status).toBe(404);
    const { rows } = await pont.services.db.query(`SELECT 1 FROM audit_log WHERE organization_id = 'org-b' AND outcome = 'minor-failure' AND operation = 'fhirValidateInstance' AND $1 = ANY(patients)`, [created.id]);
    expect(rows.length).toBe(2);
    expect((await validate(a, '/Patient/never-was', { ...patient, id: 'never-was' })).status).toBe(404);
    expect((await fhir(a, `/Patient/${created.id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await validate(a, `/Patient/${created.id}`, created)).status).toBe(410);
  });

  it('data the caller may read but not change is reported as an error issue (the write would be refused)', async () => {
    const org = (await fhir(a, '/Organization', { method: 'POST', json: { resourceType: 'Organization', name: 'Clinique A' } })).body;
    const res = await validate(b, `/Organization/${org.id}`, { ...org, name: 'Taken' });
    expect(res.status).toBe(200);
    expect(errors(res.body).map((i) => i.code)).toEqual(['forbidden']);
    expect((await fhir(b, `/Organization/${org.id}`, { method: 'PUT', json: { ...org, name: 'Taken' } })).status).toBe(404);
  });
});

describe('the stock client fhir-kit-client', () => {
  it('calls $validate with operation(), at type and instance level', async () => {
    const client = new Client({ baseUrl: `${pont.url}/api/fhir/R4`, bearerToken: a.access_token });
    const kit = (r: object) => r as unknown as FhirResource;
    const ok = (await client.operation({ name: '$validate', resourceType: 'Patient', input: kit(patient) })) as unknown as OperationOutcome;
    expect(noIssues(ok)).toBe(true);
    const bad = (await client.operation({ name: 'validate', resourceType: 'Patient', input: kit({ ...patient, gender: 'robot' }) })) as unknown as OperationOutcome;
    expect(errors(bad).length).toBeGreaterThan(0);
    const created = (await client.create({ resourceType: 'Patient', body: kit(patient) })) as unknown as Patient & { id: string };
    const params = kit({ resourceType: 'Parameters', parameter: [{ name: 'resource', resource: { ...created, gender: 'male' } }, { name: 'mode', valueCode: 'update' }] });
    const instance = (await client.operation({ name: 'validate', resourceType: 'Patient', id: created.id, input: params })) as unknown as OperationOutcome;
    expect(noIssues(instance)).toBe(true);
    const foreign = new Client({ baseUrl: `${pont.url}/api/fhir/R4`, bearerToken: b.access_token });
    await expect(foreign.operation({ name: 'validate', resourceType: 'Patient', id: created.id, input: params })).rejects.toMatchObject({ response: { status: 404 } });
  });
});

describe('the CapabilityStatement', () => {
  it('lists $validate on every type', async () => {
    const res = await pont.json('/api/fhir/R4/metadata');
    for (const r of res.body.rest[0].resource) expect(r.operation.map((o: any) => o.name), r.type).toContain('validate');
  });
});
