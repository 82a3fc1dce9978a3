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
import { backend, createScratchDatabase } from './harness';
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
  summary = await importPaths(api.pont.services.store, [dir]);
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
    const again = await importPaths(api.pont.services.store, [dir]);
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

describe('pont import (the command)', () => {
  it('loads a .tar.gz of spec examples and prints a summary; an invalid resource is reported, not half-loaded', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'pont-import-cli-'));
    const scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
    try {
      const env = { ...process.env, LOG_LEVEL: 'error', PONT_DATA_DIR: dataDir, ...(scratch ? { DATABASE_URL: scratch.url } : {}) };
      const run = promisify(execFile);
      const result = await run('node', [join(repo, 'bin/pont.js'), 'import', join(samples, 'r4-spec-examples.tar.gz')], { env, cwd: repo }).catch((e) => e);
      // One of the 121 examples (DiagnosticReport-gingival-mass) is itself invalid: exit 1, named in the summary.
      expect(result.code).toBe(1);
      expect(result.stdout).toMatch(/Imported \d+ resources from 121 files in [\d.]+ s \(\d+ resources\/s\); 1 failures/);
      expect(result.stdout).toContain('FAILED DiagnosticReport-gingival-mass.json');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      await scratch?.drop();
    }
  }, 180_000);
});
