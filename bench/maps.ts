/**
 * What reading FHIR through each record map costs (`npm run bench:maps`): every resource of the map's type in the
 * Synthea sample (up to 2,000 a map), read with readFhir as records retrieval reads them (with a patient, so that
 * the maps choosing by it do), rounds interleaved so that every map meets the machine's drift alike. Prints µs a
 * resource per map (median of the rounds) and writes bench/results/maps.json. No database, no HTTP: the interpreter
 * alone (src/mapping/runtime.ts), for comparing two trees' maps or runtime.
 *
 *   --rounds N   timed rounds (default 15, after 3 untimed)
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Resource } from '@medplum/fhirtypes';
import { loadMappings } from '../src/mapping/index';
import { repoRoot } from './fhir-data';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '15' } } });
const rounds = Number(values.rounds);
const dir = mkdtempSync(join(tmpdir(), 'pont-bench-maps-'));
const byType = new Map<string, Resource[]>();
let patient: Resource | undefined;
try {
  execFileSync('tar', ['xzf', join(repoRoot, 'samples', 'synthea-r4-50-patients.tar.gz'), '-C', dir]);
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
    const bundle = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { entry: Array<{ resource: Resource }> };
    for (const { resource } of bundle.entry) {
      if (resource.resourceType === 'Patient') patient ??= resource;
      const list = byType.get(resource.resourceType) ?? [];
      if (list.length < 2000) list.push(resource);
      byType.set(resource.resourceType, list);
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const mappings = loadMappings();
const maps = mappings
  .names()
  .map((name) => mappings.get(name))
  .filter((m) => m.record && byType.has(m.resourceType));
const context = { patient, localBase: 'https://pont.example/api/fhir/R4' };
const times = new Map<string, number[]>(maps.map((m) => [m.name, []]));
for (let round = 0; round < rounds + 3; round++)
  for (const map of maps) {
    const resources = byType.get(map.resourceType)!;
    const t = process.hrtime.bigint();
    for (const r of resources) map.readFhir(r, context);
    if (round >= 3) times.get(map.name)!.push(Number(process.hrtime.bigint() - t) / 1000 / resources.length);
  }
const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;
const result = maps.map((m) => ({ map: m.name, resources: byType.get(m.resourceType)!.length, usPerResource: Number(median(times.get(m.name)!).toFixed(2)) }));
console.log(`== readFhir per record map (node ${process.version}, median of ${rounds} rounds)`);
for (const r of result) console.log(`${r.map.padEnd(24)} ${String(r.resources).padStart(6)} resources  ${r.usPerResource.toFixed(1).padStart(7)} µs each`);
writeFileSync(join(repoRoot, 'bench', 'results', 'maps.json'), JSON.stringify({ commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot }).toString().trim(), node: process.version, rounds, maps: result }, null, 2) + '\n');
