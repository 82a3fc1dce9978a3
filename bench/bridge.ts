/**
 * `npm run bench:bridge`: how fast one Bridge Agent's sync is ingested. The 50 Synthea sample patients are sent
 * as an agent would send them (each resource with its own id, references as `Type/id`), in batches of
 * BENCH_BATCH resources (default 500), one batch at a time, on PGlite and on PostgreSQL; then the same batches
 * again (every item `unchanged`). Figures: resources/s and batch latency p50/p95; written to bench/results/bridge.json.
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { x as extract } from 'tar';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import { createAgent } from '../src/auth/agents';
import { loadConfig } from '../src/config';
import { startPont } from '../src/server';
import { createScratchDatabase } from '../test/harness';
import { stats } from './stats';

const BATCH = Number(process.env.BENCH_BATCH ?? 500);
const repoRoot = fileURLToPath(new URL('..', import.meta.url));

/** The sample as an agent sends it: Synthea's `urn:uuid:` references become `Type/id`. */
function agentResources(): Resource[] {
  const dir = mkdtempSync(join(tmpdir(), 'pont-bench-bridge-'));
  try {
    extract({ file: join(repoRoot, 'samples', 'synthea-r4-50-patients.tar.gz'), cwd: dir, sync: true });
    const out: Resource[] = [];
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.json')).sort()) {
      const bundle = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Bundle;
      const typeOf = new Map(bundle.entry!.map((e) => [e.fullUrl!, e.resource!.resourceType]));
      const text = JSON.stringify(bundle.entry!.map((e) => e.resource!)).replace(/"urn:uuid:([0-9a-f-]{36})"/g, (_, id) => `"${typeOf.get(`urn:uuid:${id}`) ?? 'Resource'}/${id}"`);
      out.push(...(JSON.parse(text) as Resource[]));
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function run(backend: 'pglite' | 'postgres', resources: Resource[]) {
  const scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
  const config = loadConfig({ PORT: '0', LOG_LEVEL: 'error', PONT_RATE_LIMITS: 'default=999999999/60', ...(scratch ? { DATABASE_URL: scratch.url } : {}) });
  if (!scratch) config.dataDir = undefined;
  const pont = await startPont(config);
  try {
    const agent = await createAgent(pont.services.db, { organizationId: 'org-bench', facilityId: 'fac-bench' });
    const send = async (batchId: string, batch: Resource[]) => {
      const res = await fetch(`${pont.url}/api/v1/bridge/sync`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)) },
        body: JSON.stringify({ batch_id: batchId, resources: batch }),
      });
      const body = (await res.json()) as { counts: Record<string, number> };
      if (res.status !== 200) throw new Error(`sync ${batchId}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      return body.counts;
    };
    const pass = async (label: string) => {
      const ms: number[] = [];
      const counts: Record<string, number> = { created: 0, updated: 0, unchanged: 0, failed: 0 };
      const started = performance.now();
      for (let i = 0; i < resources.length; i += BATCH) {
        const t = performance.now();
        const c = await send(`${label}-${i}`, resources.slice(i, i + BATCH));
        ms.push(performance.now() - t);
        for (const [k, v] of Object.entries(c)) counts[k] = (counts[k] ?? 0) + v;
      }
      const seconds = (performance.now() - started) / 1000;
      const s = stats(ms);
      return { resources: resources.length, seconds, perSecond: resources.length / seconds, batchP50: s.p50, batchP95: s.p95, counts };
    };
    const first = await pass('first');
    const again = await pass('again');
    return { backend, batch: BATCH, first, again };
  } finally {
    await pont.close();
    await scratch?.drop();
  }
}

async function main() {
  const resources = agentResources();
  const results = [];
  for (const backend of ['postgres', 'pglite'] as const) {
    const r = await run(backend, resources);
    results.push(r);
    for (const [name, p] of [['first sync', r.first], ['the same again', r.again]] as const)
      console.log(
        `${backend.padEnd(8)} ${name.padEnd(15)} ${p.resources} resources in ${p.seconds.toFixed(1)} s = ${Math.round(p.perSecond)} resources/s; batch of ${BATCH}: p50 ${Math.round(p.batchP50)} ms, p95 ${Math.round(p.batchP95)} ms; ${JSON.stringify(p.counts)}`,
      );
  }
  mkdirSync(join(repoRoot, 'bench', 'results'), { recursive: true });
  writeFileSync(join(repoRoot, 'bench', 'results', 'bridge.json'), JSON.stringify({ at: new Date().toISOString(), node: process.version, results }, null, 2) + '\n');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
