import type { ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { defaultMappingsDir } from '../src/mapping/index';
import { mappingsVersion } from '../src/mapping/holder';
import { backend, commandDatabase, createScratchDatabase, runPont } from './harness';
import { addLocalCodeTable, LOCAL_LAB } from './local-code-table';
import { jsonLines, serve, terminate } from './serve-process';

/**
 * Issue 26, how it is checked: an informaticist adds a record type (immunizations) and a local-code table, and fixes
 * a mistake in a map, on a running server, with YAML and SIGHUP alone. The records route, its validation and the
 * served OpenAPI document follow the reloaded maps on every process; a broken map keeps the running ones.
 */
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const scratch: string[] = [];
afterAll(() => scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** The repository's maps without the immunization record type, in a directory of the repository's tmp/. */
function mapsWithoutImmunizations(): string {
  mkdirSync(join(repoRoot, 'tmp'), { recursive: true });
  const dir = mkdtempSync(join(repoRoot, 'tmp', 'live-record-type-'));
  scratch.push(dir);
  cpSync(defaultMappingsDir, dir, { recursive: true, filter: (f) => !/immunization\.(map|examples)\.yaml$/.test(f) });
  return dir;
}
const repoMap = (name: string) => readFileSync(join(defaultMappingsDir, name), 'utf8');

/** The informaticist's mistake: an element that does not exist, on the lot number's line. */
const MISTAKE = ['  lot_number: lotNumber\n', '  lot_number: lotNumbr\n'] as const;

describe('a new record type and a local-code table on a running server', () => {
  let server: ChildProcess | undefined;
  afterAll(() => void server?.kill('SIGKILL'));

  const scenario = async (workers: number, env: Record<string, string>) => {
    const dir = mapsWithoutImmunizations();
    const started = await serve(workers > 1 ? ['--workers', String(workers)] : [], { ...env, PONT_MAPPINGS_DIR: dir });
    server = started.child;
    const { url } = started;
    if (workers > 1) await vi.waitFor(() => expect(started.output()).toMatch(new RegExp(`${workers} worker processes`)), { timeout: 60_000, interval: 50 });
    /** SIGHUP, then the outcome each process logged for this version of the files. */
    const hangUp = async (msg: 'mappings reloaded' | 'mappings reload refused; the running maps stay') => {
      const seen = jsonLines(started.output()).length;
      server!.kill('SIGHUP');
      const logged = () => jsonLines(started.output()).slice(seen).filter((l) => l.msg === msg);
      await vi.waitFor(() => expect(new Set(logged().map((l) => l.pid)).size, started.output().slice(-2000)).toBe(workers), { timeout: 30_000, interval: 50 });
      return logged();
    };

    const created = await runPont(env, 'clients', 'create', '--name', 'informaticist', '--org', 'org-lab', '--scopes', 'fhir:read fhir:write patient:diagnostics:read', '--all-patients');
    expect(created.code, created.stderr).toBe(0);
    const token = await fetch(`${url}/api/v1/connect/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: created.json.client_id, client_secret: created.json.client_secret }),
    });
    const headers = { authorization: `Bearer ${((await token.json()) as { access_token: string }).access_token}`, 'content-type': 'application/json' };
    const call = async (path: string, init: RequestInit = {}) => {
      const res = await fetch(`${url}${path}`, { ...init, headers });
      return { status: res.status, body: (await res.json()) as any };
    };
    const post = (type: string, resource: object) => call(`/api/fhir/R4/${type}`, { method: 'POST', body: JSON.stringify({ resourceType: type, ...resource }) });

    const patient = await post('Patient', { name: [{ family: 'Okafor', given: ['Ada'] }], birthDate: '2019-02-03' });
    expect(patient.status).toBe(201);
    const healthId = patient.body.identifier.find((i: { system: string }) => i.system === HEALTH_ID_SYSTEM).value;
    const subject = { reference: `Patient/${patient.body.id}` };
    const immunization = await post('Immunization', {
      status: 'completed',
      vaccineCode: { coding: [{ system: 'http://hl7.org/fhir/sid/cvx', code: '08', display: 'Hep B, adolescent or pediatric' }] },
      patient: subject,
      occurrenceDateTime: '2024-05-06T10:20:00Z',
      lotNumber: 'X12',
    });
    expect(immunization.status, JSON.stringify(immunization.body)).toBe(201);
    // As the lab's own system writes it: its local code only, no LOINC.
    const observation = await post('Observation', {
      status: 'final',
      category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] }],
      code: { coding: [{ system: LOCAL_LAB, code: 'HB' }], text: 'Haemoglobin' },
      subject,
      effectiveDateTime: '2024-05-06T09:00:00Z',
      valueQuantity: { value: 13.5, unit: 'g/dL' },
    });
    expect(observation.status, JSON.stringify(observation.body)).toBe(201);
    const records = (type: string) => call(`/api/v1/connect/patient/${healthId}/records?type=${type}`);
    const openApi = async () => (await call('/api/openapi.json')).body;
    /** Several requests, so that with --workers every process is likely asked. */
    const everyProcess = async (check: () => Promise<void>) => {
      for (let i = 0; i < 2 * workers; i++) await check();
    };

    // Before: no such record type; the document does not know it.
    await everyProcess(async () => {
      const refused = await records('immunizations');
      expect(refused.status).toBe(422);
      expect(JSON.stringify(refused.body)).not.toContain('immunizations');
      expect((await openApi()).components.schemas.Immunization).toBeUndefined();
    });

    // The new map, with a mistake: the reload is refused with file:line:col, the running maps stay.
    const running = mappingsVersion(dir);
    const map = join(dir, 'immunization.map.yaml');
    writeFileSync(map, repoMap('immunization.map.yaml').replace(...MISTAKE));
    writeFileSync(join(dir, 'immunization.examples.yaml'), repoMap('immunization.examples.yaml'));
    const line = readFileSync(map, 'utf8').split('\n').indexOf(MISTAKE[1].trimEnd()) + 1;
    const refused = await hangUp('mappings reload refused; the running maps stay');
    for (const logged of refused) {
      expect(logged.version).toBe(running);
      expect(logged.error).toMatch(new RegExp(`immunization\\.map\\.yaml:${line}:\\d+: unknown FHIR element \`lotNumbr\``));
    }
    await everyProcess(async () => {
      expect((await records('immunizations')).status).toBe(422);
      expect((await call('/readyz')).body.mappings_version).toBe(running);
    });

    // Fixed, and a local-code table added to the lab results: served at once, in the records and the document.
    writeFileSync(map, repoMap('immunization.map.yaml'));
    addLocalCodeTable(dir);
    const reloaded = await hangUp('mappings reloaded');
    expect(reloaded.map((l) => l.version)).toEqual(reloaded.map(() => mappingsVersion(dir)));
    expect(server.exitCode).toBe(null);
    await everyProcess(async () => {
      const read = await records('immunizations');
      expect(read.status, JSON.stringify(read.body)).toBe(200);
      expect(read.body.records.immunizations).toEqual([
        expect.objectContaining({ id: immunization.body.id, vaccine: 'Hep B, adolescent or pediatric', cvx_code: '08', lot_number: 'X12', occurred_at: '2024-05-06T10:20:00Z' }),
      ]);
      const all = await records('all');
      expect(Object.keys(all.body.records)).toContain('immunizations');
      const labs = await records('lab_results');
      expect(labs.body.records.lab_results).toEqual([expect.objectContaining({ id: observation.body.id, local_code: 'HB', loinc_code: '718-7', test_name: 'Haemoglobin' })]);

      const doc = await openApi();
      expect(doc.components.schemas.Immunization.properties).toHaveProperty('cvx_code');
      expect(doc.components.schemas.LabResult.properties).toHaveProperty('local_code');
      const type = doc.paths['/api/v1/connect/patient/{health_id}/records'].get.parameters.find((p: { name: string }) => p.name === 'type');
      expect(type.schema.enum).toContain('immunizations');
      expect((await call('/readyz')).body.mappings_version).toBe(mappingsVersion(dir));
    });
    expect(await terminate(server)).toBe(0);
    server = undefined;
  };

  it('one process', async () => {
    const database = await commandDatabase();
    try {
      await scenario(1, database.env);
    } finally {
      await database.cleanup();
    }
  }, 300_000);

  it.runIf(backend === 'postgres')('--workers 2: every process reloads', async () => {
    const database = await createScratchDatabase({ migrated: true });
    try {
      await scenario(2, { DATABASE_URL: database.url });
    } finally {
      await database.drop();
    }
  }, 300_000);
});
