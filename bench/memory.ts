/**
 * Memory of the server on the embedded database (`npm run bench:memory -- [options]`): the resident set and its parts
 * (process.memoryUsage(): rss, heapUsed, heapTotal, external, arrayBuffers; PGlite's WebAssembly memory is in
 * external) and the peak (the kernel's VmHWM), in three phases. Each runs in a process of its own started as
 * `npm start` starts the server (node --max-old-space-size=512, and NPM_START_ENV), with the server in it:
 *
 *   first-start  an empty data directory: start to ready (initdb, migrations), then idle
 *   load         the dataset's data directory: import the resources in the server's process (PGlite is one
 *                process's database), ANALYZE, a full-record consent per patient for the benchmark's organisation
 *   serve        a restart on the loaded data directory, then read load for --seconds per kind (autocannon in another
 *                process, --connections at once): read by id, patient + code, patient + date range, _include, a deep
 *                page, Connect records and the SDK summary (bench:fhir's reads), as a consented integrator
 *
 * The loaded data directory is kept under the repository's ignored data/ (data/bench-memory-<N>/) and reused by the
 * next run, so the import is paid once; `--reload` loads it again. Figures go to
 * bench/results/memory-pglite-<N>[-<label>].json, with the load average before and after each phase.
 *
 *   --resources N     bundle entries to load (default 50000)
 *   --seconds N       read load per query kind (default 10)
 *   --connections N   connections of the read load (default 8)
 *   --phases LIST     phases to run, comma-separated (default first-start,serve; load runs when the data is missing)
 *   --reload          load the data directory again
 *   --label TEXT      suffix of the results file (e.g. before, after)
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createClient } from '../src/auth/clients';
import type { Scope } from '../src/core/scopes';
import { loadConfig } from '../src/config';
import { importPaths } from '../src/fhir/import';
import { startPont, type RunningPont } from '../src/server';
import { NPM_START_ENV, prepareDataset } from './fhir-data';
import { load as runLoad } from './load-client';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const thisFile = fileURLToPath(import.meta.url);
const FHIR = '/api/fhir/R4';
const SCOPES: Scope[] = ['fhir:read', 'consents:write', 'patient:diagnostics:read', 'patients:read', 'labs:read', 'prescriptions:read', 'documents:read'];
const ORG = 'org-bench';

const log = (msg: string) => process.stderr.write(`[bench:memory ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const MiB = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;
const loadAverage = () => loadavg().map((v) => Math.round(v * 100) / 100);

/** The parts of this process's memory, MiB; peakRss is the kernel's high-water mark since start or the last reset. */
interface Snapshot {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  peakRss: number;
}

function snapshot(): Snapshot {
  const m = process.memoryUsage();
  const hwm = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0) * 1024;
  return { rss: MiB(m.rss), heapUsed: MiB(m.heapUsed), heapTotal: MiB(m.heapTotal), external: MiB(m.external), arrayBuffers: MiB(m.arrayBuffers), peakRss: MiB(hwm) };
}

/** Starts the high-water mark again (Linux: clear_refs 5), so the next peak is the phase's own. */
const resetPeak = () => writeFileSync('/proc/self/clear_refs', '5');

function serverEnv(dataDir: string): Record<string, string> {
  return {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'error',
    PONT_DATA_DIR: dataDir,
    // Thousands of requests a minute from one client: lift the per-client limits (still counted, as in production).
    PONT_RATE_LIMITS: 'default=999999999/60,fhir=999999999/60',
  };
}

async function start(dataDir: string): Promise<{ pont: RunningPont; seconds: number }> {
  const t = performance.now();
  const pont = await startPont(loadConfig(serverEnv(dataDir)));
  return { pont, seconds: (performance.now() - t) / 1000 };
}

async function tokenOf(pont: RunningPont, client: { client_id: string; client_secret: string }): Promise<string> {
  const res = await fetch(`${pont.url}/api/v1/connect/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
  });
  const body = (await res.json()) as { access_token?: string };
  if (!body.access_token) throw new Error(`token: ${res.status} ${JSON.stringify(body)}`);
  return body.access_token;
}

// ------------------------------------------------------------------------------------------ phases (child processes)

async function firstStart(): Promise<Record<string, unknown>> {
  const dataDir = join(repoRoot, 'data', `bench-memory-first-${process.pid}`);
  rmSync(dataDir, { recursive: true, force: true });
  try {
    const { pont, seconds } = await start(dataDir);
    const ready = snapshot();
    await pont.close();
    return { startSeconds: seconds, processToReadySeconds: performance.now() / 1000, ready };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function loadPhase(resources: number, dir: string): Promise<Record<string, unknown>> {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const data = prepareDataset(join(repoRoot, 'samples', 'synthea-r4-50-patients.tar.gz'), resources, dir);
  const { pont, seconds } = await start(join(dir, 'pglite'));
  try {
    const started = snapshot();
    let last = performance.now();
    const summary = await importPaths(pont.services.fhir, [data.dir], {
      concurrency: 1,
      onProgress: (p) => {
        if (performance.now() - last < 15_000) return;
        last = performance.now();
        log(`import ${p.filesDone}/${p.filesTotal} bundles, ${p.resources} resources, rss ${snapshot().rss} MiB`);
      },
    });
    if (summary.failures.length) throw new Error(`${summary.failures.length} import failures, first: ${summary.failures[0]!.message}`);
    const db = pont.services.db;
    await db.exec('ANALYZE');
    const client = await createClient(db, { name: 'bench-memory', organizationId: ORG, scopes: SCOPES });
    const headers = { authorization: `Bearer ${await tokenOf(pont, client)}`, 'content-type': 'application/json' };
    const healthIds = (await db.query<{ health_id: string }>('SELECT health_id FROM health_ids WHERE patient_id IS NOT NULL')).rows.map((r) => r.health_id);
    const expires = new Date(Date.now() + 365 * 86_400_000).toISOString();
    for (const hid of healthIds) {
      const res = await fetch(`${pont.url}/api/v1/connect/patient/${hid}/consent/grant`, { method: 'POST', headers, body: JSON.stringify({ consent_type: 'full_record', expires_at: expires }) });
      if (res.status !== 201) throw new Error(`consent grant: ${res.status} ${await res.text()}`);
    }
    await db.exec('ANALYZE consent_access');
    const loaded = snapshot();
    const count = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM fhir_resources WHERE NOT deleted');
    writeFileSync(join(dir, 'loaded.json'), JSON.stringify({ entries: data.entries, resources: count.rows[0]!.n, patients: healthIds.length }) + '\n');
    return { startSeconds: seconds, started, importSeconds: summary.seconds, resources: count.rows[0]!.n, loaded };
  } finally {
    await pont.close();
    rmSync(data.dir, { recursive: true, force: true });
  }
}

async function servePhase(dir: string, seconds: number, connections: number): Promise<Record<string, unknown>> {
  const { pont, seconds: startSeconds } = await start(join(dir, 'pglite'));
  try {
    const ready = snapshot();
    const db = pont.services.db;
    const client = await createClient(db, { name: 'bench-memory-reader', organizationId: ORG, scopes: SCOPES });
    const headers = { authorization: `Bearer ${await tokenOf(pont, client)}`, accept: 'application/fhir+json' };
    const n = 300;
    const sample = async <T>(sql: string) => (await db.query<T>(sql, [n])).rows;
    const reads = await sample<{ resource_type: string; id: string }>(
      `SELECT resource_type, id FROM fhir_resources WHERE NOT deleted AND resource_type NOT IN ('AuditEvent', 'Consent') ORDER BY md5(id || 'read') LIMIT $1`,
    );
    const patients = await sample<{ id: string }>(`SELECT id FROM fhir_resources WHERE resource_type = 'Patient' AND NOT deleted ORDER BY md5(id || 'patient') LIMIT $1`);
    const codes = await sample<{ subject: string; code: string }>(
      `SELECT r.content->'subject'->>'reference' AS subject, c->>'code' AS code
         FROM fhir_resources r, jsonb_array_elements(r.content->'code'->'coding') c
        WHERE r.resource_type = 'Observation' AND NOT r.deleted AND c->>'system' = 'http://loinc.org'
        ORDER BY md5(r.id || (c->>'code')) LIMIT $1`,
    );
    const healthIds = await sample<{ health_id: string }>('SELECT health_id FROM health_ids WHERE patient_id IS NOT NULL ORDER BY md5(health_id) LIMIT $1');
    // Pages 21 to 40 of Observation?_count=50, by their next links.
    const deep: string[] = [];
    let url: string | undefined = `${FHIR}/Observation?_count=50`;
    for (let page = 1; url && page <= 40; page++) {
      if (page > 20) deep.push(url);
      const body = (await (await fetch(pont.url + url, { headers })).json()) as { link?: Array<{ relation: string; url: string }> };
      const next = body.link?.find((l) => l.relation === 'next')?.url;
      url = next && next.slice(next.indexOf(FHIR));
    }
    const q = encodeURIComponent;
    const kinds: Array<[string, string[]]> = [
      ['read by id', reads.map((r) => `${FHIR}/${r.resource_type}/${r.id}`)],
      ['patient + code', codes.map((r) => `${FHIR}/Observation?subject=${q(r.subject)}&code=${q(`http://loinc.org|${r.code}`)}`)],
      ['patient + date range', patients.map((p) => `${FHIR}/Observation?subject=${q(`Patient/${p.id}`)}&date=ge2015-01-01&date=lt2018-01-01`)],
      ['_include', patients.map((p) => `${FHIR}/Encounter?subject=${q(`Patient/${p.id}`)}&_include=Encounter:participant`)],
      ['deep page (21-40)', deep],
      ['Connect records type=all', healthIds.map((h) => `/api/v1/connect/patient/${h.health_id}/records?type=all&limit=100`)],
      ['SDK summary', healthIds.map((h) => `/api/v1/sdk/patients/${h.health_id}/summary`)],
    ];
    const beforeLoad = snapshot();
    resetPeak();
    let sampledPeak = 0;
    const sampleRss = () => (sampledPeak = Math.max(sampledPeak, process.memoryUsage().rss));
    // Errors (autocannon's 10 s timeouts: 32 connections queue on PGlite's one connection) are counted, not fatal:
    // what this measures is memory, and a slow kind still loads the server.
    const perKind: Record<string, { perSecond: number; p50: number; p95: number; errors: number; unexpected: Record<string, number>; rssAfter: number }> = {};
    for (const [name, paths] of kinds) {
      if (!paths.length) throw new Error(`no samples for ${name}`);
      log(`${name}: ${seconds} s at ${connections} connections`);
      const r = await runLoad({ url: pont.url, paths, headers, connections, seconds }, sampleRss, true);
      perKind[name] = { perSecond: Math.round(r.perSecond), p50: r.p50, p95: r.p95, errors: r.errors, unexpected: r.unexpected, rssAfter: snapshot().rss };
    }
    const afterLoad = snapshot();
    return { startSeconds, ready, beforeLoad, afterLoad, peakRssUnderLoad: afterLoad.peakRss, sampledPeakRss: MiB(sampledPeak), perKind };
  } finally {
    await pont.close();
  }
}

// ------------------------------------------------------------------------------------------ orchestration

const PHASES = ['first-start', 'load', 'serve'] as const;
type Phase = (typeof PHASES)[number];

/** Runs one phase in a process of its own, as `npm start` runs the server; its figures are its last line. */
async function runPhase(phase: Phase, args: string[]): Promise<Record<string, unknown>> {
  const loadBefore = loadAverage();
  const child = spawn(process.execPath, ['--max-old-space-size=512', '--import', 'tsx', thisFile, '--phase', phase, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...NPM_START_ENV, NODE_OPTIONS: '' },
  });
  let out = '';
  child.stdout.on('data', (chunk) => (out += chunk));
  const code = await new Promise<number | null>((done) => child.on('close', done));
  if (code !== 0) throw new Error(`phase ${phase} failed (exit ${code})`);
  const figures = JSON.parse(out.trim().split('\n').pop()!) as Record<string, unknown>;
  return { ...figures, loadAverage: { before: loadBefore, after: loadAverage() } };
}

function codeVersion(): { commit: string; uncommitted: string[] } {
  const git = (...args: string[]) => {
    try {
      return execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return '';
    }
  };
  return { commit: git('rev-parse', '--short', 'HEAD') || 'unknown', uncommitted: git('status', '--porcelain', '--', 'src').split('\n').filter(Boolean).map((l) => l.replace(/^\s*\S+\s+/, '')) };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      phase: { type: 'string' },
      resources: { type: 'string', default: '50000' },
      seconds: { type: 'string', default: '10' },
      connections: { type: 'string', default: '8' },
      phases: { type: 'string', default: 'first-start,serve' },
      reload: { type: 'boolean', default: false },
      label: { type: 'string' },
    },
  });
  const positive = (name: string, text: string) => {
    const v = Number(text);
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a positive integer, got "${text}"`);
    return v;
  };
  const resources = positive('resources', values.resources);
  const seconds = positive('seconds', values.seconds);
  const connections = positive('connections', values.connections);
  const dir = join(repoRoot, 'data', `bench-memory-${resources}`);

  if (values.phase) {
    const figures =
      values.phase === 'first-start' ? await firstStart() : values.phase === 'load' ? await loadPhase(resources, dir) : await servePhase(dir, seconds, connections);
    process.stdout.write(JSON.stringify({ ...figures, final: snapshot() }) + '\n');
    process.exit(0);
  }

  const phases = values.phases.split(',').map((p) => p.trim());
  for (const p of phases) if (!PHASES.includes(p as Phase)) throw new Error(`--phases: unknown phase "${p}" (${PHASES.join(', ')})`);
  const args = ['--resources', String(resources), '--seconds', String(seconds), '--connections', String(connections)];
  const result: Record<string, unknown> = { startedAt: new Date().toISOString(), node: process.version, code: codeVersion(), resources, seconds, connections, maxOldSpaceMiB: 512 };
  if (phases.includes('first-start')) {
    log('first start on an empty data directory');
    result.firstStart = await runPhase('first-start', args);
  }
  if (values.reload || phases.includes('load') || !existsSync(join(dir, 'loaded.json'))) {
    log(`loading ${resources} resources into ${dir}`);
    result.load = await runPhase('load', args);
  }
  result.dataset = JSON.parse(readFileSync(join(dir, 'loaded.json'), 'utf8'));
  if (phases.includes('serve')) {
    log('restart on the loaded data directory, then read load');
    result.serve = await runPhase('serve', args);
  }
  const file = join(repoRoot, 'bench', 'results', `memory-pglite-${resources}${values.label ? `-${values.label}` : ''}.json`);
  writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
  console.log(JSON.stringify(result, null, 2));
  log(`written to ${file}`);
}

main().catch((err) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exit(1);
});
