/**
 * /metrics against the benchmark's own figures (`npm run bench:metrics -- [options]`, issue 28 "How this will be
 * checked"): does what Pont says about its requests agree with what a client measured?
 *
 * A scratch database on PostgreSQL (127.0.0.1:5432) gets the first bundles of the Synthea sample by `pont import`;
 * `pont serve` runs in a process of its own with METRICS_PORT and METRICS_TOKEN (as an operator deploys it), and
 * autocannon (bench/load.ts, a process of its own) reads by id, then searches Observations by patient + code. Each
 * workload: a warm-up of a fixed number of requests (its rate sizes the measured run), a scrape of /metrics, the
 * measured run (a fixed number of requests, so none is in flight at either scrape), a scrape again. Between the
 * two scrapes, per route template and status of `pont_http_request_duration_seconds`: the request count against
 * autocannon's count, the mean (_sum / _count) against the mean of autocannon's per-response times, and p50 / p95
 * estimated from the histogram's buckets (linear within a bucket, as PromQL's histogram_quantile) against
 * autocannon's exact ones.
 *
 *   --seconds N      about how long each measured run lasts (default 5)
 *   --connections N  autocannon's connections (default 4)
 *   --resources N    bundle entries imported (default 1500: whole bundles of the sample's first patients)
 *   --samples PATH   synthea-r4-50-patients.tar.gz (default samples/ in the repo)
 *
 * Figures are printed and written to bench/results/metrics-compare.json.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createClient } from '../src/auth/clients';
import { openPostgres } from '../src/db/postgres';
import { createScratchDatabase, freePort } from '../test/harness';
import { importCommand, patientCodePaths, prepareDataset, readByIdPaths, repoRoot, tokenOf } from './fhir-data';
import { load, type LoadResult } from './load-client';
import { spawnServe } from './serve';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '4' },
    resources: { type: 'string', default: '1500' },
    samples: { type: 'string', default: join(repoRoot, 'samples', 'synthea-r4-50-patients.tar.gz') },
  },
});
const options = { seconds: Number(values.seconds), connections: Number(values.connections), resources: Number(values.resources) };
/** Warm-up requests per connection: enough to load the code paths and measure a steady rate (a few seconds). */
const WARMUP_PER_CONNECTION = 250;
const METRIC = 'pont_http_request_duration_seconds';

const log = (msg: string) => process.stderr.write(`[metrics ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);

// ------------------------------------------------------------------------------------------ the exposition

/** One series of the request histogram: cumulative bucket counts by upper bound (seconds, +Inf last). */
interface Series {
  method: string;
  route: string;
  status: string;
  count: number;
  sum: number;
  buckets: Array<{ le: number; n: number }>;
}

/** The request histogram's series in a Prometheus text exposition, by `method route status`. */
function parseRequests(text: string): Map<string, Series> {
  const out = new Map<string, Series>();
  const line = new RegExp(`^${METRIC}_(bucket|sum|count)\\{(.*)\\} (\\S+)$`);
  for (const row of text.split('\n')) {
    const m = line.exec(row);
    if (!m) continue;
    const labels = Object.fromEntries([...m[2]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
    const key = `${labels.method} ${labels.route} ${labels.status}`;
    let s = out.get(key);
    if (!s) out.set(key, (s = { method: labels.method!, route: labels.route!, status: labels.status!, count: 0, sum: 0, buckets: [] }));
    const value = Number(m[3]);
    if (m[1] === 'bucket') s.buckets.push({ le: labels.le === '+Inf' ? Infinity : Number(labels.le), n: value });
    else if (m[1] === 'sum') s.sum = value;
    else s.count = value;
  }
  return out;
}

/** What each series gained from `before` to `after` (counters only grow within one process). */
function gained(before: Map<string, Series>, after: Map<string, Series>): Series[] {
  return [...after.values()]
    .map((a) => {
      const b = before.get(`${a.method} ${a.route} ${a.status}`);
      return { ...a, count: a.count - (b?.count ?? 0), sum: a.sum - (b?.sum ?? 0), buckets: a.buckets.map((x, i) => ({ le: x.le, n: x.n - (b?.buckets[i]?.n ?? 0) })) };
    })
    .filter((s) => s.count > 0);
}

/** The series of a workload as one (a read by id spans several route templates): the same buckets, added up. */
function merged(series: Series[]): Series {
  return series.reduce((a, s) => ({ ...a, count: a.count + s.count, sum: a.sum + s.sum, buckets: a.buckets.map((b, i) => ({ le: b.le, n: b.n + s.buckets[i]!.n })) }), {
    ...series[0]!,
    route: 'all',
    count: 0,
    sum: 0,
    buckets: series[0]!.buckets.map((b) => ({ le: b.le, n: 0 })),
  });
}

/** The q-quantile from cumulative buckets, in ms, and the bucket it falls in: linear within it (histogram_quantile). */
function quantile(q: number, s: Series): { ms: number; bucket: [number, number] } {
  const rank = q * s.count;
  let lower = 0;
  let below = 0;
  for (const { le, n } of s.buckets) {
    if (n >= rank) {
      if (le === Infinity) return { ms: lower * 1000, bucket: [lower * 1000, Infinity] }; // as PromQL: the highest finite bound
      return { ms: (lower + ((le - lower) * (rank - below)) / (n - below)) * 1000, bucket: [lower * 1000, le * 1000] };
    }
    lower = le;
    below = n;
  }
  return { ms: NaN, bucket: [NaN, NaN] };
}

// ------------------------------------------------------------------------------------------ the run

interface Comparison {
  workload: string;
  connections: number;
  client: { requests: number; mean: number; p50: number; p95: number; perSecond: number };
  /** `all`: the workload's series added up, then each route template and status. */
  server: Array<{ method: string; route: string; status: string; requests: number; mean: number; p50: { ms: number; bucket: [number, number] }; p95: { ms: number; bucket: [number, number] } }>;
  loadavg: { before: number[]; after: number[] };
}

async function main(): Promise<void> {
  mkdirSync(join(repoRoot, 'tmp'), { recursive: true });
  const scratchDir = mkdtempSync(join(repoRoot, 'tmp', 'bench-metrics-'));
  const scratch = await createScratchDatabase();
  const db = await openPostgres(scratch.url, 2);
  let serve: Awaited<ReturnType<typeof spawnServe>> | undefined;
  try {
    const data = prepareDataset(values.samples, options.resources, scratchDir, 1);
    log(`pont import: ${data.entries} entries`);
    const imported = await importCommand(scratch.url, data.dir, 2);
    if (imported.failures.length) throw new Error(`pont import: ${imported.failures[0]!.file}: ${imported.failures[0]!.message}`);
    await db.exec('ANALYZE');
    const integrator = await createClient(db, { name: 'bench-metrics', organizationId: 'org-bench', scopes: ['fhir:read'], allPatients: true });
    const workloads = [
      { workload: 'read by id', paths: await readByIdPaths(db, 500) },
      { workload: 'search patient + code', paths: await patientCodePaths(db, 500) },
    ];

    // As an operator deploys it: /metrics on a port of its own, behind a token.
    const metricsPort = await freePort();
    const metricsToken = randomBytes(32).toString('hex');
    serve = await spawnServe([], {
      PORT: String(await freePort()),
      DATABASE_URL: scratch.url,
      PONT_RATE_LIMITS: 'default=999999999/60,fhir=999999999/60',
      METRICS_PORT: String(metricsPort),
      METRICS_TOKEN: metricsToken,
    });
    const scrape = async () => {
      const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } });
      if (res.status !== 200) throw new Error(`GET /metrics: ${res.status}`);
      return parseRequests(await res.text());
    };
    const headers = { authorization: `Bearer ${await tokenOf(serve.url, integrator)}`, accept: 'application/fhir+json' };

    const results: Comparison[] = [];
    for (const { workload, paths } of workloads) {
      const spec = { url: serve.url, paths, headers, connections: options.connections };
      // Fixed numbers of requests, never a duration: autocannon waits for every answer, so none is in flight at a scrape.
      const warm = await load({ ...spec, amount: options.connections * WARMUP_PER_CONNECTION });
      const amount = Math.max(options.connections * WARMUP_PER_CONNECTION, Math.round(warm.perSecond * options.seconds));
      const before = await scrape();
      const la = loadavg();
      const client: LoadResult = await load({ ...spec, amount });
      const server = gained(before, await scrape());
      results.push({
        workload,
        connections: options.connections,
        client: { requests: client.requests, mean: client.mean, p50: client.p50, p95: client.p95, perSecond: client.perSecond },
        server: [merged(server), ...server].map((s) => ({ method: s.method, route: s.route, status: s.status, requests: s.count, mean: (s.sum / s.count) * 1000, p50: quantile(0.5, s), p95: quantile(0.95, s) })),
        loadavg: { before: la, after: loadavg() },
      });
      log(`${workload}: ${client.requests} requests`);
    }

    const result = {
      benchmark: 'metrics-compare',
      at: new Date().toISOString(),
      node: process.version,
      machine: { cpus: cpus().length },
      note: 'client: autocannon per-response times (bench/load.ts), request sent to response received, in its own process; server: pont_http_request_duration_seconds between two scrapes, Koa middleware in to out (routing, auth, database, serialisation), not the socket, HTTP parsing or the event-loop queue before it. p50/p95 server-side are estimated from the buckets (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1 s, …).',
      options: { ...options, imported: imported.resources },
      workloads: results,
    };
    const file = join(repoRoot, 'bench', 'results', 'metrics-compare.json');
    writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
    console.log(`${report(results)}\nwritten to ${file}`);
  } finally {
    await serve?.stop();
    await db.close();
    await scratch.drop();
    rmSync(scratchDir, { recursive: true, force: true });
  }
}

// ------------------------------------------------------------------------------------------ report

const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const bucket = (b: [number, number]) => `(${b[0]}, ${b[1] === Infinity ? '+Inf' : b[1]}]`;

function report(results: Comparison[]): string {
  const rows = [['workload / route (status)', 'requests client', 'server', 'mean client', 'server', 'p50 client', 'server (bucket)', 'p95 client', 'server (bucket)']];
  for (const r of results) {
    const [all, ...routes] = r.server;
    const server = (s: Comparison['server'][number]) => [String(s.requests), ms(s.mean), `${ms(s.p50.ms)} ${bucket(s.p50.bucket)}`, `${ms(s.p95.ms)} ${bucket(s.p95.bucket)}`];
    const [n, mean, p50, p95] = server(all!);
    rows.push([`${r.workload} (${r.connections} conn., ${Math.round(r.client.perSecond)}/s)`, String(r.client.requests), n!, ms(r.client.mean), mean!, ms(r.client.p50), p50!, ms(r.client.p95), p95!]);
    for (const s of routes) {
      const [n, mean, p50, p95] = server(s);
      rows.push([`  ${s.method} ${s.route} (${s.status})`, '', n!, '', mean!, '', p50!, '', p95!]);
    }
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return ['latency in ms; client: autocannon per response; server: /metrics histogram, p50/p95 estimated within a bucket (ms)', ...rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '))].join('\n');
}

main().catch((err) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exit(1);
});
