/**
 * What validating a resource costs, per resource, on the 15,053 Synthea resources of samples/ (each run twice, the
 * second timed): Pont's whole check (`validateFhirResource`: the fast check of src/fhir/base-validity.ts, the validator
 * where it is not sure, Pont's own checks), the fast check alone, and @medplum/core's validator alone.
 * Written to bench/results/validation.json.
 *
 *   npm run bench:validation
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateResource } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { x as extract } from 'tar';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { passesBaseDefinitions } from '../src/fhir/base-validity';
import { validateFhirResource } from '../src/fhir/validate';
import { repoRoot } from './fhir-data';

loadFhirDefinitions();
const dir = mkdtempSync(join(tmpdir(), 'pont-bench-validation-'));
const resources: Resource[] = [];
try {
  extract({ file: join(repoRoot, 'samples', 'synthea-r4-50-patients.tar.gz'), cwd: dir, sync: true });
  for (const f of readdirSync(dir, { recursive: true }) as string[])
    if (f.endsWith('.json')) for (const e of JSON.parse(readFileSync(join(dir, f), 'utf8')).entry) resources.push(e.resource);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

function microseconds(check: (r: Resource) => unknown): number {
  let took = 0;
  for (let run = 0; run < 2; run++) {
    const started = performance.now();
    for (const r of resources) {
      try {
        check(r);
      } catch {
        // an invalid sample counts as checked
      }
    }
    took = performance.now() - started;
  }
  return Math.round((took * 10_000) / resources.length) / 10;
}

const result = {
  at: new Date().toISOString(),
  node: process.version,
  load_average_1m: loadavg()[0],
  resources: resources.length,
  us_per_resource: {
    validateFhirResource: microseconds(validateFhirResource),
    fast_check_alone: microseconds(passesBaseDefinitions),
    medplum_validator_alone: microseconds(validateResource),
  },
  fast_check_sure: resources.filter((r) => passesBaseDefinitions(r)).length,
};
console.log(JSON.stringify(result, null, 2));
mkdirSync(join(repoRoot, 'bench', 'results'), { recursive: true });
writeFileSync(join(repoRoot, 'bench', 'results', process.env.BENCH_RESULT ?? 'validation.json'), JSON.stringify(result, null, 2) + '\n');
