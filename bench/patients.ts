/**
 * Patient operations benchmark (`npx tsx bench/patients.ts [--backend pglite|postgres|both] [--n N] [--concurrency C]`),
 * over HTTP with a real client and token, on a fresh database:
 *
 * - POST /patients/resolve creating N new patients (Patient + Health ID + 2 events + AuditEvent per call);
 * - the same N resolved again (found by match key), verify of each Health ID, profile search of each;
 * - bursts of 20 identical concurrent resolves: patients created per burst (must be exactly 1).
 *
 * Prints p50/p95 latency (ms) and requests per second; writes bench/results/patients-<backend>.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createTestClient, startTestServer, type TestServer } from '../test/harness';
import { runConcurrently, stats } from './stats';

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    backend: { type: 'string', default: 'both' },
    n: { type: 'string', default: '200' },
    concurrency: { type: 'string', default: '4' },
  },
});
const n = Number(values.n);
const concurrency = Number(values.concurrency);
const resultsDir = resolve(dirname(fileURLToPath(import.meta.url)), 'results');

async function timed(pont: TestServer, path: string, init: RequestInit, expected: number): Promise<number> {
  const started = performance.now();
  const res = await pont.fetch(path, init);
  await res.arrayBuffer();
  if (res.status !== expected) throw new Error(`${path}: ${res.status}, expected ${expected}`);
  return performance.now() - started;
}

async function run(backend: 'pglite' | 'postgres') {
  process.env.PONT_TEST_DB = backend;
  const pont = await startTestServer({ PONT_RATE_LIMITS: 'default=1000000/60' });
  try {
    const client = await createTestClient(pont, ['health_id:verify', 'patient:profile:read']);
    const headers = { ...client.headers, 'content-type': 'application/json' };
    const person = (i: number) => ({ first_name: `Bench${i}`, last_name: 'Patient', date_of_birth: '1980-01-01', sex: 'other' });
    const healthIds: string[] = [];

    const phase = async (name: string, expected: number, request: (i: number) => [string, RequestInit]) => {
      let i = 0;
      const { ms, perSecond } = await runConcurrently(n, concurrency, () => timed(pont, ...request(i++), expected));
      return { name, ...stats(ms), perSecond };
    };
    const post = (body: unknown): RequestInit => ({ method: 'POST', headers, body: JSON.stringify(body) });

    const results = [];
    results.push(await phase('resolve (created)', 201, (i) => ['/api/v1/connect/patients/resolve', post(person(i))]));
    const { rows } = await pont.services.db.query<{ health_id: string }>('SELECT health_id FROM health_ids');
    healthIds.push(...rows.map((r) => r.health_id));
    results.push(await phase('resolve (found by demographics)', 200, (i) => ['/api/v1/connect/patients/resolve', post(person(i))]));
    results.push(await phase('resolve (found by health_id)', 200, (i) => ['/api/v1/connect/patients/resolve', post({ health_id: healthIds[i % healthIds.length] })]));
    results.push(await phase('verify', 200, (i) => [`/api/v1/connect/patients/verify/${healthIds[i % healthIds.length]}`, { headers }]));
    results.push(await phase('patient search', 200, (i) => [`/api/v1/connect/patient/search?health_id=${healthIds[i % healthIds.length]}`, { headers }]));

    const createdPerBurst: number[] = [];
    for (let burst = 0; burst < 10; burst++) {
      const statuses = await Promise.all(
        Array.from({ length: 20 }, async () => (await pont.fetch('/api/v1/connect/patients/resolve', post(person(100_000 + burst)))).status),
      );
      createdPerBurst.push(statuses.filter((s) => s === 201).length);
    }

    console.log(`\n${backend}: n=${n}, concurrency=${concurrency}`);
    for (const r of results) {
      console.log(`  ${r.name.padEnd(34)} p50 ${r.p50.toFixed(1).padStart(7)} ms  p95 ${r.p95.toFixed(1).padStart(7)} ms  ${r.perSecond.toFixed(1).padStart(7)} req/s`);
    }
    console.log(`  20 identical concurrent resolves, 10 bursts: patients created per burst = ${createdPerBurst.join(',')}`);
    mkdirSync(resultsDir, { recursive: true });
    writeFileSync(resolve(resultsDir, `patients-${backend}.json`), JSON.stringify({ n, concurrency, results, createdPerBurst }, null, 2) + '\n');
  } finally {
    await pont.close();
  }
}

for (const backend of values.backend === 'both' ? (['pglite', 'postgres'] as const) : [values.backend as 'pglite' | 'postgres']) {
  await run(backend);
}
