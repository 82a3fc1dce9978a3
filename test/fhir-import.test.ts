import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { x as extract } from 'tar';
import { validateResource } from '@medplum/core';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import { importPaths } from '../src/fhir/import';
import { backend, commandDatabase, createTestClient, pontCommand } from './harness';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { startFhirApi, type FhirTestApi } from './fhir-helpers';

const repo = fileURLToPath(new URL('..', import.meta.url));
const samples = join(repo, 'samples');
const PATIENTS = 6;

let api: FhirTestApi;
let dir: string;
let loaded: Resource[];
let summary: Awaited<ReturnType<typeof importPaths>>;

beforeAll(async () => {
  api = await startFhirApi();
  dir = mkdtempSync(join(tmpdir(), 'pont-synthea-'));
  extract({ file: join(samples, 'synthea-r4-50-patients.tar.gz'), cwd: dir, sync: true });
  const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort().slice(0, PATIENTS);
  for (const f of readdirSync(dir)) if (!files.includes(f)) rmSync(join(dir, f), { recursive: true });
  loaded = files.flatMap((f) => (JSON.parse(readFileSync(join(dir, f), 'utf8')) as Bundle).entry!.map((e) => e.resource!));
  summary = await importPaths(api.pont.services.fhir, [dir]);
}, 300_000);
afterAll(async () => {
  await api?.close();
  rmSync(dir, { recursive: true, force: true });
});

const refersTo = (value: unknown, ref: string) => (value as { reference?: string } | undefined)?.reference === ref;
const hasCoding = (cc: any, system: string, code: string) => (cc?.coding ?? []).some((c: any) => c.system === system && c.code === code);
const unique = (rs: Resource[]) => [...new Map(rs.map((r) => [`${r.resourceType}/${r.id}`, r])).values()];
const idsOf = (rs: Resource[]) => rs.map((r) => r.id).sort();

describe('importing Synthea transaction bundles', () => {
  it('loads every entry with no failure', () => {
    expect(summary.failures).toEqual([]);
    expect(summary.resources).toBe(loaded.length);
  });

  it('answers searches exactly as an independent evaluation of the same data', async () => {
    const data = unique(loaded);
    const patients = data.filter((r) => r.resourceType === 'Patient') as any[];
    for (const patient of patients.slice(0, 3)) {
      const ref = `Patient/${patient.id}`;
      const observations = data.filter((r: any) => r.resourceType === 'Observation' && refersTo(r.subject, ref)) as any[];
      const code = observations[0].code.coding[0];
      const cases: Array<[string, Resource[]]> = [
        [`/Observation?subject=${ref}&code=${code.system}|${code.code}`, observations.filter((o) => hasCoding(o.code, code.system, code.code))],
        [`/Condition?patient=${ref}`, data.filter((r: any) => r.resourceType === 'Condition' && refersTo(r.subject, ref))],
        [`/Encounter?subject=${ref}&date=ge2015-01-01`, data.filter((r: any) => r.resourceType === 'Encounter' && refersTo(r.subject, ref) && (r.period?.end ?? '9999') >= '2015-01-01')],
        [`/MedicationRequest?subject=${ref}&status=active`, data.filter((r: any) => r.resourceType === 'MedicationRequest' && refersTo(r.subject, ref) && r.status === 'active')],
        [`/Patient?family=${encodeURIComponent(patient.name[0].family)}`, patients.filter((p) => p.name.some((n: any) => n.family.toLowerCase().startsWith(patient.name[0].family.toLowerCase())))],
      ];
      for (const [query, expected] of cases) {
        const got = await api.searchAll(`${query}&_count=100`);
        expect(idsOf(got), query).toEqual(idsOf(expected));
        for (const r of got) expect(validateResource(r).filter((i) => i.severity === 'error'), `${r.resourceType}/${r.id}`).toEqual([]);
      }
    }
  });

  it('loading the same bundles again creates no duplicates (PUT entries)', async () => {
    const again = await importPaths(api.pont.services.fhir, [dir]);
    expect(again.failures).toEqual([]);
    const total = (await api.call('/Patient?_summary=count')).body.total;
    expect(total).toBe(PATIENTS);
  });

  it('Patient/$everything holds the whole record of a patient', async () => {
    const patient = loaded.find((r) => r.resourceType === 'Patient')!;
    const ref = `Patient/${patient.id}`;
    const conditions = unique(loaded).filter((r: any) => r.resourceType === 'Condition' && refersTo(r.subject, ref));
    const everything: Resource[] = [];
    let next: string | undefined = `/Patient/${patient.id}/$everything?_count=500`;
    while (next) {
      const res: any = await api.call(next);
      expect(res.status).toBe(200);
      everything.push(...res.body.entry.map((e: any) => e.resource));
      const url = res.body.link.find((l: any) => l.relation === 'next')?.url as string | undefined;
      next = url?.slice(url.indexOf('/Patient/'));
    }
    const got = idsOf(everything.filter((r) => r.resourceType === 'Condition'));
    expect(got).toEqual(idsOf(conditions));
    expect(everything.some((r) => r.resourceType === 'Patient' && r.id === patient.id)).toBe(true);
  });
});

describe('importing a bulk export (one ndjson file per type, referring to each other in any order)', () => {
  it('loads every resource with no failure, checks references once complete, and registers every patient', async () => {
    const bulk = mkdtempSync(join(tmpdir(), 'pont-bulk-'));
    try {
      extract({ file: join(samples, 'synthea-bulk-10-patients-ndjson.tar.gz'), cwd: bulk, sync: true });
      const lines = readdirSync(bulk)
        .filter((f) => f.endsWith('.ndjson') && f !== 'log.ndjson')
        .flatMap((f) => readFileSync(join(bulk, f), 'utf8').split('\n').filter((l) => l.trim()));
      const result = await importPaths(api.pont.services.fhir, [bulk]);
      expect(result.failures).toEqual([]);
      expect(result.skipped.map((f) => f.split('/').pop())).toEqual(['log.ndjson']);
      expect(result.resources).toBe(lines.length);
      // Every imported patient got a Health ID and is known to the Connect layer.
      const patients = lines.map((l) => JSON.parse(l)).filter((r) => r.resourceType === 'Patient');
      const connect = await createTestClient(api.pont, ['health_id:verify']);
      for (const p of patients) {
        const stored = (await api.call(`/Patient/${p.id}`)).body;
        const healthId = stored.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM)?.value;
        expect(healthId, p.id).toMatch(/^[A-Z]{2}\d{12}$/);
        const verified = await api.pont.json(`/api/v1/connect/patients/verify/${healthId}`, { headers: connect.headers });
        expect(verified.status).toBe(200);
        expect(verified.body.patient.last_name).toBe(p.name.find((n: any) => n.use === 'official').family);
      }
    } finally {
      rmSync(bulk, { recursive: true, force: true });
    }
  }, 300_000);
});

// The command's summary and reports: the same on both databases (what it writes goes through the store, whose import
// on each database the tests above run).
describe.runIf(backend === 'postgres')('pont import (the command)', () => {
  it('loads a .tar.gz of spec examples and prints a summary; an invalid resource and dangling references are reported, not half-loaded', async () => {
    // A database initialised and migrated (on PGlite the migrated image unpacked, not a first start's 8 to 15 s).
    const database = await commandDatabase();
    try {
      const env = { ...process.env, LOG_LEVEL: 'error', ...database.env };
      const run = promisify(execFile);
      const result = await run(process.execPath, pontCommand('import', join(samples, 'r4-spec-examples.tar.gz')), { env, cwd: repo }).catch((e) => e);
      // Two of the 121 examples are themselves invalid R4: DiagnosticReport-gingival-mass (bad base64) and
      // MedicationRequest-medrx0301 (dispenseRequest.performer is a Practitioner; R4 allows an Organization only):
      // exit 1, each named in the summary.
      // The examples also refer to resources the package does not hold (Practitioner/example...): once the
      // import is complete, each dangling reference is reported with the element that holds it.
      expect(result.code).toBe(1);
      expect(result.stdout).toMatch(/Imported 119 resources from 121 files in [\d.]+ s \(\d+ resources\/s\); \d+ failures/);
      expect(result.stdout).toContain('FAILED DiagnosticReport-gingival-mass.json');
      expect(result.stdout).toContain('FAILED MedicationRequest-medrx0301.json: entry[0]: Invalid MedicationRequest: MedicationRequest.dispenseRequest.performer may refer to Organization, not Practitioner');
      expect(result.stdout).toContain('FAILED AllergyIntolerance/example: AllergyIntolerance.recorder refers to Practitioner/example, which does not exist');
    } finally {
      await database.cleanup();
    }
  }, 180_000);
});
