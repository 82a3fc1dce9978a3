/**
 * Growth benchmark (`npm run bench:growth -- [options]`, issue 28 item 5): what one PostgreSQL database serves with
 * one and two Pont processes, and with two behind PgBouncer, and what each request and each stored resource costs —
 * the figures the README's capacity plan ("Capacity plan") rests on.
 *
 * One scratch database on PostgreSQL (127.0.0.1:5432) is loaded with copies of the Synthea sample by `pont import`
 * (its own process, as an operator loads data), then ANALYZEd; the storage per resource is read from
 * pg_total_relation_size. Every patient grants the benchmark integrator's organisation a full-record consent, so
 * every read runs the consent rule. Then, for each configuration in turn (back to back, the same data):
 *
 *   workers1            `pont serve --workers 1`
 *   workers2            `pont serve --workers 2` (node cluster: two processes share the port)
 *   workers2-unprepared `pont serve --workers 2` with PONT_PREPARED_STATEMENTS=false (what PgBouncer < 1.21 needs)
 *   pgbouncer2          `pont serve --workers 2` through PgBouncer in transaction mode (Debian's pgbouncer, started
 *                       on a free port with a config under tmp/; LISTEN straight to PostgreSQL; statements unnamed)
 *
 * the server runs in its own process(es) (as `npm start`: V8 old space capped at 512 MB) and is measured with:
 * read by id and patient + code searches at --connections (autocannon in its own process, after a warm-up), and a
 * copy of the sample not loaded before POSTed as transaction Bundles over HTTP (the import throughput through the
 * server). During each, the CPU time of the Pont processes, of the PostgreSQL backends of the benchmark's database
 * and of PgBouncer is read from /proc: CPU milliseconds per request, the figure that sizes machines. --rounds N runs
 * the whole sequence N times (the machine is shared: one round's figures can be another engineer's test run).
 * In the first round, with workers1, the audit trail's cost is measured: N reads, then the bytes the audit rows and
 * their AuditEvents add once materialised.
 *
 *   --resources N          bundle entries loaded before the runs (default 100000; whole copies of the sample)
 *   --seconds N            seconds of each measured run (default 10)
 *   --warmup N             seconds of load before each measured run, not counted (default 3)
 *   --connections N        connections of the load generator (default 32)
 *   --configs a,b,...      configurations to run, in order (default all four above)
 *   --rounds N             times to run the sequence (default 2)
 *   --import-bundles N     Bundles of a fresh copy POSTed in each HTTP import (default 10, ~3,000 resources; the
 *                          same N files of the sample in every run, with new ids), after one not counted
 *   --import-concurrency N Bundles POSTed at once in the HTTP import (default 4)
 *   --audit-requests N     requests of each kind in the audit-cost phase (default and at most 1000; 0 skips it)
 *   --samples PATH         synthea-r4-50-patients.tar.gz (default samples/ in the repo)
 *   --keep                 keep the scratch directory (tmp/bench-growth-*) and database
 *
 * Figures are printed and written to bench/results/growth-postgres.json, with the load average around every run.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createClient } from '../src/auth/clients';
import { loadConfig } from '../src/config';
import { openPostgres } from '../src/db/postgres';
import { startPont } from '../src/server';
import { createScratchDatabase, freePort } from '../test/harness';
import { PGBOUNCER, startPgBouncer } from '../test/pgbouncer';
import { BENCH_SCOPES, FHIR_PATH, grantFullRecordConsents, importCommand, patientCodePaths, prepareDataset, readByIdPaths, repoRoot, tokenOf } from './fhir-data';
import { load, type LoadResult } from './load-client';
import { spawnServe } from './serve';
import { runConcurrently } from './stats';

/** PgBouncer's server connections to the database: fewer than the two processes' pools (2 x 10), so they share. */
const PGBOUNCER_POOL = 8;
/** Rate limits out of the way (each request is still counted, in the database, as in production). */
const RATE_LIMITS = 'default=999999999/60,fhir=999999999/60';

// ------------------------------------------------------------------------------------------ options

const CONFIGS = {
  workers1: { workers: 1, prepared: true, pgbouncer: false, label: 'pont serve --workers 1' },
  workers2: { workers: 2, prepared: true, pgbouncer: false, label: 'pont serve --workers 2' },
  'workers2-unprepared': { workers: 2, prepared: false, pgbouncer: false, label: 'pont serve --workers 2, PONT_PREPARED_STATEMENTS=false' },
  pgbouncer2: { workers: 2, prepared: false, pgbouncer: true, label: `pont serve --workers 2 through PgBouncer (transaction mode, ${PGBOUNCER_POOL} server connections, statements unnamed)` },
} as const;
type ConfigName = keyof typeof CONFIGS;

interface Options {
  resources: number;
  seconds: number;
  warmup: number;
  connections: number;
  configs: ConfigName[];
  rounds: number;
  importBundles: number;
  importConcurrency: number;
  auditRequests: number;
  samples: string;
  keep: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      resources: { type: 'string', default: '100000' },
      seconds: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '3' },
      connections: { type: 'string', default: '32' },
      configs: { type: 'string', default: Object.keys(CONFIGS).join(',') },
      rounds: { type: 'string', default: '2' },
      'import-bundles': { type: 'string', default: '10' },
      'import-concurrency': { type: 'string', default: '4' },
      'audit-requests': { type: 'string', default: '1000' },
      samples: { type: 'string', default: join(repoRoot, 'samples', 'synthea-r4-50-patients.tar.gz') },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(readFileSync(fileURLToPath(import.meta.url), 'utf8').split('*/')[0]!.replace(/^\/\*\*\n/, '').replace(/^ \* ?/gm, ''));
    process.exit(0);
  }
  const whole = (name: string, text: string, min = 1): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number of at least ${min}, got "${text}"`);
    return n;
  };
  const configs = values.configs.split(',').map((c) => c.trim());
  for (const c of configs) if (!(c in CONFIGS)) throw new Error(`--configs: unknown configuration "${c}" (known: ${Object.keys(CONFIGS).join(', ')})`);
  if (configs.some((c) => CONFIGS[c as ConfigName].pgbouncer) && !existsSync(PGBOUNCER))
    throw new Error(`pgbouncer not found at ${PGBOUNCER} (apt-get install pgbouncer, or set PGBOUNCER; or leave pgbouncer2 out of --configs)`);
  const samples = resolve(values.samples);
  if (!existsSync(samples)) throw new Error(`Sample patients not found at ${samples} (use --samples PATH)`);
  return {
    resources: whole('resources', values.resources),
    seconds: whole('seconds', values.seconds),
    warmup: whole('warmup', values.warmup, 0),
    connections: whole('connections', values.connections),
    configs: configs as ConfigName[],
    rounds: whole('rounds', values.rounds),
    importBundles: whole('import-bundles', values['import-bundles']),
    importConcurrency: whole('import-concurrency', values['import-concurrency']),
    auditRequests: Math.min(1000, whole('audit-requests', values['audit-requests'], 0)), // the 1,000 requests drawn per kind
    samples,
    keep: values.keep,
  };
}

const log = (msg: string) => process.stderr.write(`[growth ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);

// ------------------------------------------------------------------------------------------ CPU from /proc

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** user + system CPU ticks of a process (all its threads), or undefined once it has gone. */
function ticksOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from the 3rd (state) on
    return Number(fields[11]) + Number(fields[12]); // utime, stime: the 14th and 15th
  } catch {
    return undefined;
  }
}

/** A process and its descendants (the cluster's workers are the supervisor's children). */
function processTree(pid: number): number[] {
  const children = (p: number): number[] => {
    try {
      return readdirSync(`/proc/${p}/task`).flatMap((tid) =>
        readFileSync(`/proc/${p}/task/${tid}/children`, 'utf8').split(' ').filter(Boolean).map(Number),
      );
    } catch {
      return [];
    }
  };
  const all = [pid];
  for (let i = 0; i < all.length; i++) all.push(...children(all[i]!));
  return all;
}

function rssMiBOf(pids: number[]): number {
  let kib = 0;
  for (const pid of pids) {
    try {
      kib += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // gone
    }
  }
  return kib / 1024;
}

type CpuGroups = Record<'pont' | 'postgres' | 'pgbouncer', number[]>;

/** CPU milliseconds each group of processes used between start and stop (processes started meanwhile: all of theirs). */
async function measureCpu<T>(groups: () => Promise<CpuGroups>, during: () => Promise<T>): Promise<{ result: T; cpuMs: Record<keyof CpuGroups, number>; lostProcesses: number }> {
  const snapshot = async () => {
    const g = await groups();
    return Object.fromEntries(Object.entries(g).map(([k, pids]) => [k, new Map(pids.map((p) => [p, ticksOf(p)] as const).filter((e): e is [number, number] => e[1] !== undefined))])) as Record<
      keyof CpuGroups,
      Map<number, number>
    >;
  };
  const before = await snapshot();
  const result = await during();
  const after = await snapshot();
  let lostProcesses = 0;
  const cpuMs = {} as Record<keyof CpuGroups, number>;
  for (const k of Object.keys(before) as Array<keyof CpuGroups>) {
    let ticks = 0;
    for (const [pid, t] of after[k]) ticks += t - (before[k].get(pid) ?? 0);
    for (const pid of before[k].keys()) if (!after[k].has(pid)) lostProcesses++;
    cpuMs[k] = (ticks / TICKS_PER_SECOND) * 1000;
  }
  return { result, cpuMs, lostProcesses };
}

// ------------------------------------------------------------------------------------------ storage

interface TableSize {
  table: string;
  /** pg_table_size (heap, TOAST, free-space and visibility maps) over the table and its partitions. */
  tableBytes: number;
  /** pg_indexes_size: tableBytes + indexBytes = pg_total_relation_size. */
  indexBytes: number;
  rows?: number;
}

async function tableSizes(db: pg.Client, withRows = false): Promise<Map<string, TableSize>> {
  const r = await db.query<{ name: string; table_bytes: string; index_bytes: string }>(`
    SELECT coalesce(p.relname, c.relname) AS name, sum(pg_table_size(c.oid))::text AS table_bytes, sum(pg_indexes_size(c.oid))::text AS index_bytes
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_inherits i ON i.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = i.inhparent
     WHERE n.nspname = 'public' AND c.relkind = 'r' GROUP BY 1`);
  const out = new Map<string, TableSize>();
  for (const row of r.rows) {
    const size: TableSize = { table: row.name, tableBytes: Number(row.table_bytes), indexBytes: Number(row.index_bytes) };
    if (withRows) size.rows = Number((await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${pg.escapeIdentifier(row.name)}`)).rows[0]!.n);
    out.set(row.name, size);
  }
  return out;
}

const totalBytes = (s: TableSize) => s.tableBytes + s.indexBytes;

/** Bytes (and rows, where counted) each table grew by from `a` to `b`, tables that grew only. */
function growth(a: Map<string, TableSize>, b: Map<string, TableSize>): Array<{ table: string; bytes: number; rows?: number }> {
  return [...b.values()]
    .map((s) => {
      const was = a.get(s.table);
      const rows = s.rows !== undefined && was?.rows !== undefined ? s.rows - was.rows : undefined;
      return { table: s.table, bytes: totalBytes(s) - (was ? totalBytes(was) : 0), ...(rows !== undefined ? { rows } : {}) };
    })
    .filter((g) => g.bytes > 0 || (g.rows ?? 0) > 0)
    .sort((x, y) => y.bytes - x.bytes);
}

/** The audit trail's rows still to become AuditEvents (the materialiser runs in the server processes). */
async function awaitMaterialised(db: pg.Client, timeoutMs = 300_000): Promise<number> {
  const started = Date.now();
  for (;;) {
    const pending = Number((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM audit_log WHERE NOT materialized')).rows[0]!.n);
    if (pending === 0 || Date.now() - started > timeoutMs) return pending;
    await new Promise((r) => setTimeout(r, 250)); // polling the database's state, not waiting for time to pass
  }
}

// ------------------------------------------------------------------------------------------ servers

interface Server {
  url: string;
  child: ChildProcess;
  pgbouncer?: ChildProcess;
  stop(): Promise<void>;
}

async function startServer(config: ConfigName, databaseUrl: string, scratchDir: string): Promise<Server> {
  const c = CONFIGS[config];
  const bouncer = c.pgbouncer ? await startPgBouncer(join(scratchDir, `pgbouncer-${Date.now()}`), databaseUrl, PGBOUNCER_POOL) : undefined;
  const serve = await spawnServe(['--workers', String(c.workers)], {
    PORT: String(await freePort()),
    PONT_RATE_LIMITS: RATE_LIMITS,
    DATABASE_URL: bouncer ? bouncer.url : databaseUrl,
    ...(bouncer ? { DATABASE_LISTEN_URL: databaseUrl } : {}),
    PONT_PREPARED_STATEMENTS: String(c.prepared),
  });
  return {
    url: serve.url,
    child: serve.child,
    pgbouncer: bouncer?.child,
    async stop() {
      await serve.stop();
      await bouncer?.stop();
    },
  };
}

// ------------------------------------------------------------------------------------------ measuring

interface LoadFigures {
  requests: number;
  perSecond: number;
  /** Latency under load (all connections busy), ms. */
  p50: number;
  p95: number;
  /** CPU milliseconds per request: the Pont processes, PostgreSQL's backends of this database, PgBouncer. */
  cpuMsPerRequest: { pont: number; postgres: number; pgbouncer: number };
  /** Share of the machine's CPUs the three used while the run lasted. */
  cpuShare: number;
  lostProcesses: number;
  loadavg: { before: number[]; after: number[] };
}

interface ImportFigures {
  resources: number;
  bundles: number;
  seconds: number;
  perSecond: number;
  cpuMsPerResource: { pont: number; postgres: number; pgbouncer: number };
  loadavg: { before: number[]; after: number[] };
}

const perUnit = (cpu: Record<string, number>, n: number) => ({ pont: cpu.pont! / n, postgres: cpu.postgres! / n, pgbouncer: cpu.pgbouncer! / n });

function cpuGroups(server: Server, monitor: pg.Client, database: string): () => Promise<CpuGroups> {
  return async () => ({
    pont: processTree(server.child.pid!),
    postgres: (await monitor.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database])).rows.map((r) => r.pid),
    pgbouncer: server.pgbouncer?.pid ? [server.pgbouncer.pid] : [],
  });
}

async function measureLoad(server: Server, groups: () => Promise<CpuGroups>, paths: string[], headers: Record<string, string>, options: Options): Promise<LoadFigures> {
  const spec = { url: server.url, paths, headers, connections: options.connections };
  if (options.warmup) await load({ ...spec, seconds: options.warmup });
  const before = loadavg();
  const started = performance.now();
  const { result, cpuMs, lostProcesses } = await measureCpu(groups, () => load({ ...spec, seconds: options.seconds }));
  const wall = (performance.now() - started) / 1000;
  const r: LoadResult = result;
  return {
    requests: r.requests,
    perSecond: r.perSecond,
    p50: r.p50,
    p95: r.p95,
    cpuMsPerRequest: perUnit(cpuMs, r.requests),
    cpuShare: (cpuMs.pont + cpuMs.postgres + cpuMs.pgbouncer) / 1000 / wall / cpus().length,
    lostProcesses,
    loadavg: { before, after: loadavg() },
  };
}

/** The first `bundles` transaction Bundles of a fresh copy POSTed to the FHIR base, `concurrency` at a time, by an operator client. */
async function measureHttpImport(server: Server, groups: () => Promise<CpuGroups>, copyDir: string, bundles: number, headers: Record<string, string>, concurrency: number): Promise<ImportFigures> {
  const all = readdirSync(copyDir).sort().map((f) => join(copyDir, f));
  const files = all.slice(0, bundles);
  const entries = files.reduce((n, f) => n + (JSON.parse(readFileSync(f, 'utf8')) as { entry: unknown[] }).entry.length, 0);
  const post = async (file: string) => {
    const res = await fetch(`${server.url}${FHIR_PATH}`, { method: 'POST', headers: { ...headers, 'content-type': 'application/fhir+json' }, body: readFileSync(file) });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`POST ${file}: ${res.status} ${text.slice(0, 500)}`);
  };
  // Warm-up, not counted: the copy's last bundle starts the processes' validation worker threads.
  await post(all.at(-1)!);
  const before = loadavg();
  let next = 0;
  const { result, cpuMs } = await measureCpu(groups, () =>
    runConcurrently(files.length, concurrency, async () => {
      const t = performance.now();
      await post(files[next++]!);
      return performance.now() - t;
    }),
  );
  const seconds = files.length / result.perSecond;
  return {
    resources: entries,
    bundles: files.length,
    seconds,
    perSecond: entries / seconds,
    cpuMsPerResource: perUnit(cpuMs, entries),
    loadavg: { before, after: loadavg() },
  };
}

// ------------------------------------------------------------------------------------------ the run

interface Measured {
  readById: LoadFigures;
  patientCode: LoadFigures;
  httpImport: ImportFigures;
  /** Resident set of all the Pont processes (supervisor and workers) after the reads. */
  rssMiB: number;
}

/** One configuration in one round: its figures, or why it could not be measured (the other runs go on). */
type Run = { round: number; config: ConfigName; label: string } & (Measured | { error: string });

interface AuditCost {
  requests: number;
  /** Audit rows written per request, and bytes the database grew by per request once they were AuditEvents. */
  auditRowsPerRequest: number;
  auditEventsPerRequest: number;
  bytesPerRequest: number;
  byTable: Array<{ table: string; bytes: number; rows?: number }>;
  unmaterialisedAfterWait: number;
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

async function auditCost(server: Server, monitor: pg.Client, kind: string, paths: string[], headers: Record<string, string>): Promise<AuditCost> {
  await awaitMaterialised(monitor);
  const count = async () =>
    (await monitor.query<{ audit: string; events: string }>(`SELECT (SELECT count(*) FROM audit_log)::text AS audit, (SELECT count(*) FROM fhir_resources WHERE resource_type = 'AuditEvent')::text AS events`)).rows[0]!;
  const a = await tableSizes(monitor);
  const ca = await count();
  const r = await load({ url: server.url, paths, headers, connections: 8, amount: paths.length });
  const pending = await awaitMaterialised(monitor);
  const b = await tableSizes(monitor);
  const cb = await count();
  const byTable = growth(a, b);
  log(`audit cost (${kind}): ${r.requests} requests, ${Number(cb.audit) - Number(ca.audit)} audit rows`);
  return {
    requests: r.requests,
    auditRowsPerRequest: (Number(cb.audit) - Number(ca.audit)) / r.requests,
    auditEventsPerRequest: (Number(cb.events) - Number(ca.events)) / r.requests,
    bytesPerRequest: byTable.reduce((s, t) => s + t.bytes, 0) / r.requests,
    byTable,
    unmaterialisedAfterWait: pending,
  };
}

/** Starts the configuration's server (and PgBouncer), runs `measure` against it, stops it. */
async function measureConfig(config: ConfigName, databaseUrl: string, scratchDir: string, measure: (s: Server, groups: () => Promise<CpuGroups>) => Promise<Measured>): Promise<Measured> {
  const s = await startServer(config, databaseUrl, scratchDir);
  const monitor = new pg.Client({ connectionString: databaseUrl });
  await monitor.connect();
  try {
    return await measure(s, cpuGroups(s, monitor, new URL(databaseUrl).pathname.slice(1)));
  } finally {
    await monitor.end();
    await s.stop();
  }
}

async function main(): Promise<void> {
  const code = codeVersion();
  const options = parseOptions(process.argv.slice(2));
  const startedAt = new Date().toISOString();
  mkdirSync(join(repoRoot, 'tmp'), { recursive: true });
  const scratchDir = mkdtempSync(join(repoRoot, 'tmp', 'bench-growth-'));
  // PgBouncer started by root runs as nobody, which must reach its directory inside this one.
  if (process.getuid?.() === 0) chmodSync(scratchDir, 0o755);
  const cleanups: Array<() => Promise<void>> = [];
  const cleanUp = async () => {
    for (const f of cleanups.reverse()) await f().catch((err) => log(`clean-up: ${(err as Error).message}`));
    if (!options.keep) rmSync(scratchDir, { recursive: true, force: true });
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => {
      log(`${signal}: cleaning up`);
      void cleanUp().then(() => process.exit(130));
    });

  try {
    // Data: whole copies of the sample, the first ones loaded by `pont import`, one fresh copy for each run's HTTP import.
    const runs = options.configs.length * options.rounds;
    // One copy first, to count its entries (the sample as it is).
    const sample = prepareDataset(options.samples, Number.MAX_SAFE_INTEGER, join(scratchDir, 'one'), 1);
    const copyEntries = sample.entries;
    rmSync(join(scratchDir, 'one'), { recursive: true, force: true });
    const baseCopies = Math.max(1, Math.ceil(options.resources / copyEntries));
    log(`preparing ${baseCopies} + ${runs} copies of the sample (${copyEntries.toLocaleString('en')} entries each) in ${scratchDir}`);
    const data = prepareDataset(options.samples, Number.MAX_SAFE_INTEGER, scratchDir, baseCopies + runs);
    const baseDir = join(scratchDir, 'base');
    mkdirSync(baseDir);
    const base = data.copyDirs.slice(0, baseCopies).map((c) => {
      const to = join(baseDir, c.dir.split('/').at(-1)!);
      renameSync(c.dir, to);
      return { dir: to, entries: c.entries };
    });
    const fresh = data.copyDirs.slice(baseCopies);

    const scratch = await createScratchDatabase();
    if (!options.keep) cleanups.push(scratch.drop);
    const monitor = new pg.Client({ connectionString: scratch.url });
    await monitor.connect();
    cleanups.push(() => monitor.end());
    const server = (await monitor.query<{ version: string; shared_buffers: string; max_connections: string }>(
      `SELECT version(), current_setting('shared_buffers') AS shared_buffers, current_setting('max_connections') AS max_connections`,
    )).rows[0]!;

    // The load, as an operator runs it.
    const entries = base.reduce((s, c) => s + c.entries, 0);
    log(`pont import: ${entries.toLocaleString('en')} entries (${baseCopies} copies)`);
    const importLoad = { before: loadavg(), after: [] as number[] };
    const imported = await importCommand(scratch.url, baseDir, 2);
    importLoad.after = loadavg();
    if (imported.failures.length) throw new Error(`pont import: ${imported.failures.length} failures, first: ${imported.failures[0]!.file}: ${imported.failures[0]!.message}`);
    log(`imported ${imported.resources.toLocaleString('en')} in ${imported.seconds.toFixed(1)} s`);
    await monitor.query('ANALYZE');

    // Storage per resource, after the load (before any request adds audit rows).
    const stored = await tableSizes(monitor, true);
    const resources = Number((await monitor.query<{ n: string }>('SELECT count(*)::text AS n FROM fhir_resources WHERE NOT deleted')).rows[0]!.n);
    const byType = (await monitor.query<{ resource_type: string; n: number; bytes: string }>(
      `SELECT resource_type, count(*)::int AS n, sum(pg_column_size(content))::text AS bytes FROM fhir_resources WHERE NOT deleted GROUP BY 1 ORDER BY 2 DESC`,
    )).rows;
    const databaseBytes = Number((await monitor.query<{ b: string }>('SELECT pg_database_size(current_database())::text AS b')).rows[0]!.b);

    // The integrator (consent rule on every row) and an operator client for the HTTP import, made through one server.
    const setup = await startPont(loadConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'error', DATABASE_URL: scratch.url, PONT_RATE_LIMITS: RATE_LIMITS }));
    const db = await openPostgres(scratch.url, 2);
    let healthIds: string[];
    let readPaths: string[];
    let codePaths: string[];
    const integrator = await createClient(db, { name: 'bench-growth', organizationId: 'org-bench', scopes: [...BENCH_SCOPES] });
    const operator = await createClient(db, { name: 'bench-growth-import', organizationId: 'org-bench-ops', scopes: ['fhir:read', 'fhir:write'], allPatients: true });
    try {
      const headers = { authorization: `Bearer ${await tokenOf(setup.url, integrator)}` };
      healthIds = await grantFullRecordConsents(setup.url, headers, db);
      log(`${healthIds.length} consents granted`);
      await monitor.query('ANALYZE consent_access');
      readPaths = await readByIdPaths(db, 1000);
      codePaths = await patientCodePaths(db, 1000);
    } finally {
      await setup.close();
      await db.close();
    }

    const results: Run[] = [];
    let audit: { readById: AuditCost; patientCode: AuditCost } | undefined;
    let freshIndex = 0;
    for (let round = 1; round <= options.rounds; round++) {
      for (const config of options.configs) {
        log(`round ${round}: ${CONFIGS[config].label}`);
        const run = { round, config, label: CONFIGS[config].label };
        try {
          const measured = await measureConfig(config, scratch.url, scratchDir, async (s, groups) => {
            // Tokens from this server (a token is good for any process: the keys are in the database).
            const headers = { authorization: `Bearer ${await tokenOf(s.url, integrator)}`, accept: 'application/fhir+json' };
            const importHeaders = { authorization: `Bearer ${await tokenOf(s.url, operator)}` };
            const readById = await measureLoad(s, groups, readPaths, headers, options);
            log(`  read by id: ${Math.round(readById.perSecond)}/s`);
            const patientCode = await measureLoad(s, groups, codePaths, headers, options);
            log(`  patient + code: ${Math.round(patientCode.perSecond)}/s`);
            const rssMiB = rssMiBOf(processTree(s.child.pid!));
            const httpImport = await measureHttpImport(s, groups, fresh[freshIndex++]!.dir, options.importBundles, importHeaders, options.importConcurrency);
            log(`  HTTP import: ${Math.round(httpImport.perSecond)} resources/s`);
            if (!audit && config === 'workers1' && options.auditRequests) {
              audit = {
                readById: await auditCost(s, monitor, 'read by id', readPaths.slice(0, options.auditRequests), headers),
                patientCode: await auditCost(s, monitor, 'patient + code', codePaths.slice(0, options.auditRequests), headers),
              };
            }
            return { readById, patientCode, httpImport, rssMiB };
          });
          results.push({ ...run, ...measured });
        } catch (err) {
          log(`  FAILED: ${(err as Error).message}`);
          results.push({ ...run, error: (err as Error).message });
        }
      }
    }
    const after = await tableSizes(monitor, false);

    const result = {
      benchmark: 'growth',
      startedAt,
      finishedAt: new Date().toISOString(),
      node: process.version,
      code,
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, memoryGiB: totalmem() / 2 ** 30, postgres: server.version, sharedBuffers: server.shared_buffers, maxConnections: Number(server.max_connections) },
      note: 'Everything (PostgreSQL, Pont, PgBouncer, the load generator) on the same shared machine, other engineers\' jobs included: compare configurations within a round, and the rounds with each other; loadavg is /proc/loadavg (1, 5, 15 min) before and after each run.',
      options: { ...options, samples: undefined },
      dataset: { copyEntries, baseCopies, freshCopies: runs },
      import: { command: 'pont import --concurrency 2', resources: imported.resources, seconds: imported.seconds, perSecond: imported.resources / imported.seconds, loadavg: importLoad },
      storage: {
        resources,
        databaseBytes,
        bytesPerResource: databaseBytes / resources,
        tables: [...stored.values()].sort((a, b) => totalBytes(b) - totalBytes(a)).map((t) => ({ ...t, bytesPerResource: totalBytes(t) / resources })),
        contentBytesByType: byType.map((t) => ({ type: t.resource_type, resources: t.n, meanContentBytes: Number(t.bytes) / t.n })),
      },
      consents: healthIds.length,
      auditCost: audit,
      runs: results,
      tablesAfter: [...after.values()].sort((a, b) => totalBytes(b) - totalBytes(a)),
    };
    const file = join(repoRoot, 'bench', 'results', 'growth-postgres.json');
    writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
    console.log(`${report(result)}\nwritten to ${file}`);
  } finally {
    await cleanUp();
  }
}

// ------------------------------------------------------------------------------------------ report

const int = (v: number) => Math.round(v).toLocaleString('en');
const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
const la = (l: { before: number[]; after: number[] }) => `${l.before[0]!.toFixed(1)}→${l.after[0]!.toFixed(1)}`;

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')).join('\n');
}

function report(r: {
  startedAt: string;
  code: { commit: string; uncommitted: string[] };
  machine: { cpus: number; postgres: string; sharedBuffers: string };
  options: Omit<Options, 'samples'> & { samples: undefined };
  import: { resources: number; seconds: number; perSecond: number; loadavg: { before: number[]; after: number[] } };
  storage: { resources: number; databaseBytes: number; bytesPerResource: number; tables: Array<TableSize & { bytesPerResource: number }> };
  auditCost?: { readById: AuditCost; patientCode: AuditCost };
  runs: Run[];
}): string {
  const cpu = (c: { pont: number; postgres: number; pgbouncer: number }) => `${ms(c.pont)} + ${ms(c.postgres)}${c.pgbouncer ? ` + ${ms(c.pgbouncer)}` : ''}`;
  const lines = [
    `== Pont growth benchmark: PostgreSQL (${r.machine.postgres.split(' ').slice(0, 2).join(' ')}, shared_buffers ${r.machine.sharedBuffers}), ${r.machine.cpus} CPUs, ${r.startedAt}, commit ${r.code.commit}${r.code.uncommitted.length ? ` + uncommitted ${r.code.uncommitted.join(' ')}` : ''}`,
    `import   pont import: ${int(r.import.resources)} resources in ${r.import.seconds.toFixed(1)} s = ${int(r.import.perSecond)}/s (load average ${la(r.import.loadavg)})`,
    `storage  ${int(r.storage.resources)} resources, database ${mib(r.storage.databaseBytes)} = ${int(r.storage.bytesPerResource)} bytes per resource; largest tables (table + indexes per resource):`,
    ...r.storage.tables.slice(0, 8).map((t) => `           ${t.table.padEnd(28)} ${int(t.tableBytes / r.storage.resources).padStart(6)} + ${int(t.indexBytes / r.storage.resources).padStart(6)} bytes${t.rows !== undefined ? `  (${(t.rows / r.storage.resources).toFixed(2)} rows per resource)` : ''}`),
    ...(r.auditCost
      ? [
          `audit    per request, once materialised: read by id ${r.auditCost.readById.auditRowsPerRequest.toFixed(2)} rows, ${int(r.auditCost.readById.bytesPerRequest)} bytes; patient + code ${r.auditCost.patientCode.auditRowsPerRequest.toFixed(2)} rows, ${int(r.auditCost.patientCode.bytesPerRequest)} bytes`,
        ]
      : []),
    '',
    `${r.options.connections} connections, ${r.options.seconds} s per run after ${r.options.warmup} s warm-up; CPU ms per request (resource): Pont + PostgreSQL (+ PgBouncer); load average (1 min) before→after`,
    table([
      ['round / configuration', 'read/s', 'p50', 'p95', 'CPU ms', 'load', 'code/s', 'p50', 'p95', 'CPU ms', 'load', 'import/s', 'CPU ms', 'load', 'RSS'],
      ...r.runs.map((x) =>
        'error' in x
          ? [`${x.round} ${x.config}`, 'FAILED', ...Array<string>(13).fill('')]
          : [
              `${x.round} ${x.config}`,
              int(x.readById.perSecond),
              ms(x.readById.p50),
              ms(x.readById.p95),
              cpu(x.readById.cpuMsPerRequest),
              la(x.readById.loadavg),
              int(x.patientCode.perSecond),
              ms(x.patientCode.p50),
              ms(x.patientCode.p95),
              cpu(x.patientCode.cpuMsPerRequest),
              la(x.patientCode.loadavg),
              int(x.httpImport.perSecond),
              cpu(x.httpImport.cpuMsPerResource),
              la(x.httpImport.loadavg),
              `${int(x.rssMiB)} MiB`,
            ],
      ),
    ]),
    ...r.runs.flatMap((x) => ('error' in x ? [`${x.round} ${x.config} FAILED: ${x.error}`] : [])),
    '',
    ...Object.entries(CONFIGS)
      .filter(([k]) => r.runs.some((x) => x.config === k))
      .map(([k, c]) => `${k.padEnd(20)} ${c.label}`),
  ];
  return lines.join('\n');
}

main().catch((err) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exit(1);
});
