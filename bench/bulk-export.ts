/**
 * Bulk Data export benchmark (`npm run bench:bulk -- [options]`), on PostgreSQL: the 50 Synthea sample patients
 * are loaded through `pont import`, then copied with new ids (and their own patients) in SQL up to the requested
 * size; the server runs in a process of its own (`pont serve`, heap capped at 512 MiB as `npm start` does) so that
 * its memory is its own. An operator client then runs a system-level `$export` of every type end to end (kick-off,
 * polling every 250 ms, manifest, every file downloaded, 4 at a time, and its lines counted), alone, and then again
 * while another client reads (read by id and a search, one request at a time): the reads' latency idle and during
 * the export, the server's RSS sampled every 100 ms throughout, and the CPU the export alone used (server, database
 * backends, client), which other work on the machine does not change.
 *
 *   --resources N   resources in the store (default 500000)
 *   --reads N       reads of the other client while idle (default 300)
 *   --keep          keep the scratch database (its URL is printed)
 *   --database URL  use this database (one kept by --keep): no import, copies only up to --resources; kept
 *   --baseline DIR  first measure the server of another checkout (e.g. `git archive main`, node_modules linked)
 *                   on the same store, then this one's: before and after in the same run
 *   --server-env K=V  an environment variable for the servers measured (repeatable)
 *   --out NAME      write bench/results/bulk-export-postgres-NAME.json
 *
 * Figures are printed and written to bench/results/bulk-export-postgres.json (with --baseline: a list of both).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createClient } from '../src/auth/clients';
import type { Database } from '../src/db/database';
import { openDatabase } from '../src/db/open';
import { createScratchDatabase } from '../test/harness';
import { NPM_START_ENV } from './fhir-data';
import { stats, type Stats } from './stats';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const FHIR = '/api/fhir/R4';
/** Files a client downloads at once. */
const DOWNLOADS = 4;
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

const { values } = parseArgs({
  options: {
    resources: { type: 'string', default: '500000' },
    reads: { type: 'string', default: '300' },
    keep: { type: 'boolean', default: false },
    database: { type: 'string' },
    baseline: { type: 'string' },
    'server-env': { type: 'string', multiple: true, default: [] },
    out: { type: 'string' },
    samples: { type: 'string', default: join(repoRoot, 'samples', 'synthea-r4-50-patients.tar.gz') },
  },
});
const target = Number(values.resources);
const idleReads = Number(values.reads);
/** Settings for the servers measured (`--server-env PONT_BULK_EXPORT_CONCURRENCY=2`). */
const serverEnv = Object.fromEntries(values['server-env'].map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolvePort(port));
    });
  });
}

function run(args: string[], env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, [join(repoRoot, 'bin', 'pont.js'), ...args], { env: { ...process.env, NODE_OPTIONS: '', LOG_LEVEL: 'error', ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (chunk) => (out += chunk));
  return new Promise((resolveRun, reject) => child.on('close', (code) => (code === 0 ? resolveRun(out) : reject(new Error(`pont ${args[0]}: exit ${code}: ${out}`)))));
}

/** CPU time a process has used (user + system), in seconds (Linux, USER_HZ = 100). */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN; // ended
  }
}

/** Resident set size of a process, in MiB (Linux). */
function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** `pont import` of the 50 sample patients (the server starts after it: it finds nothing to upgrade). */
async function importSample(databaseUrl: string): Promise<void> {
  log('pont import of the 50 sample patients…');
  log((await run(['import', values.samples, '--concurrency', '2'], { DATABASE_URL: databaseUrl })).trim().split('\n')[0]!);
}

/**
 * Copies of the imported resources with new ids up to the target, each copy's resources filed under its own
 * patients (the `patients` column renamed alike). Done in SQL: the copies have no search index rows, which an
 * export does not read (the other client reads originals).
 */
async function copyUpTo(db: Database): Promise<{ base: number; total: number; seconds: number }> {
  const started = performance.now();
  const count = async () => Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM fhir_resources WHERE NOT deleted')).rows[0]!.n);
  const base = await count();
  const last = (await db.query<{ rid: string }>('SELECT max(rid)::text AS rid FROM fhir_resources')).rows[0]!.rid;
  const copies = Math.max(0, Math.ceil((target - base) / base));
  for (let copy = 1; copy <= copies; copy++) {
    await db.query(
      `INSERT INTO fhir_resources (resource_type, id, version_id, last_updated, method, deleted, content, patients, author_org)
       SELECT resource_type, id || '-c' || $1, version_id, last_updated, method, deleted, jsonb_set(content, '{id}', to_jsonb(id || '-c' || $1)),
              ARRAY(SELECT p || '-c' || $1 FROM unnest(patients) p), author_org
       FROM fhir_resources WHERE NOT deleted AND rid <= $2`,
      [String(copy), last],
    );
    // And their Health IDs (not valid ones: nothing reads them), else each start of a server would issue them (backfill).
    await db.query(
      `INSERT INTO health_ids (health_id, country_code, patient_id, match_key_version)
       SELECT health_id || '-c' || $1, country_code, patient_id || '-c' || $1, match_key_version FROM health_ids
       WHERE patient_id IN (SELECT id FROM fhir_resources WHERE resource_type = 'Patient' AND rid <= $2)`,
      [String(copy), last],
    );
    if (copy % 10 === 0 || copy === copies) log(`copied ${copy}/${copies}`);
  }
  await db.exec('ANALYZE');
  return { base, total: await count(), seconds: (performance.now() - started) / 1000 };
}

/** `pont serve` of the checkout in `dir` on `databaseUrl`, heap capped as `npm start` does; resolves once it is ready. */
async function startServer(dir: string, databaseUrl: string): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, ['--max-old-space-size=512', join(dir, 'bin', 'pont.js'), 'serve'], {
    env: { ...process.env, ...NPM_START_ENV, NODE_OPTIONS: '', ...serverEnv, DATABASE_URL: databaseUrl, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'error', PONT_RATE_LIMITS: 'default=999999999/60,fhir=999999999/60' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  // The first start on a kept store issues the copied Patients their Health IDs (src/fhir/store/backfill.ts): minutes.
  for (let i = 0; ; i++) {
    const ready = await fetch(`${url}/readyz`).then((r) => r.ok).catch(() => false);
    if (ready) break;
    if (i > 18_000 || child.exitCode !== null) {
      child.kill('SIGTERM');
      throw new Error('server did not start within 30 minutes');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, url };
}

/**
 * The server of the checkout in `dir`: the other client's reads idle, then an export alone and one beside those
 * reads. Each export's reads are split by phase: while the files are written (kick-off to manifest) and while they
 * are downloaded.
 */
async function measure(db: Database, databaseUrl: string, dir: string, label: string, store: number) {
  // The exports of an earlier round or run, and their files, gone before: no autovacuum of them during this one.
  await db.query('DELETE FROM bulk_export_jobs');
  await db.exec('VACUUM bulk_export_parts');
  const { child: server, url } = await startServer(dir, databaseUrl);
  try {
    log(`${label}: server of ${dir}`);
    const token = async (scopes: string[]) => {
      const c = await createClient(db, { name: 'bench', organizationId: 'org-bench', scopes: scopes as never, allPatients: true });
      const res = await fetch(`${url}/api/v1/connect/auth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant_type: 'client_credentials', client_id: c.client_id, client_secret: c.client_secret }) });
      return { authorization: `Bearer ${((await res.json()) as { access_token: string }).access_token}` };
    };
    const exporter = await token(['fhir:read']);
    const other = await token(['fhir:read']);

    // The other client's reads: a resource by id and a search by patient, alternately, one at a time.
    const sample = (await db.query<{ id: string; patient: string }>(`SELECT resource_type, id, patients[1] AS patient FROM fhir_resources WHERE resource_type = 'Observation' AND id NOT LIKE '%-c_' AND id NOT LIKE '%-c__' ORDER BY md5(id) LIMIT 200`)).rows;
    /** The other client (bench/reader.ts, a process of its own) reading until stopped: when each read started (epoch ms), and its milliseconds. */
    const startReader = () => {
      const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'bench', 'reader.ts')], {
        env: { ...process.env, NODE_OPTIONS: '', BENCH_URL: url, BENCH_AUTHORIZATION: other.authorization, BENCH_SAMPLE: JSON.stringify(sample) },
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      const reads: Array<{ at: number; ms: number }> = [];
      let partial = '';
      child.stdout!.setEncoding('utf8').on('data', (text: string) => {
        const lines = (partial + text).split('\n');
        partial = lines.pop()!;
        for (const line of lines) reads.push({ at: Number(line.split(' ')[0]), ms: Number(line.split(' ')[1]) });
      });
      const closed = new Promise<number | null>((r) => child.once('close', r));
      return {
        reads,
        async until(count: number) {
          while (reads.length < count && child.exitCode === null) await new Promise((r) => setTimeout(r, 50));
        },
        async stop() {
          child.stdin!.end();
          const code = await closed;
          if (code !== 0) throw new Error(`reader: exit ${code}`);
          return reads;
        },
      };
    };
    const WARM_UP = 50;
    const idleReader = startReader();
    await idleReader.until(WARM_UP + idleReads);
    const idle = (await idleReader.stop()).slice(WARM_UP, WARM_UP + idleReads).map((r) => r.ms);
    const rssIdle = rssMiB(server.pid!);
    log(`${label}: idle reads: p50 ${stats(idle).p50.toFixed(1)} ms, p95 ${stats(idle).p95.toFixed(1)} ms; server RSS ${rssIdle.toFixed(0)} MiB`);

    /**
     * One export end to end. CPU used meanwhile, measured on a machine other work shares: the server, its database
     * backends (client backends: not autovacuum; first and last value seen of each, sampled with the RSS every
     * 100 ms) and this process (the client).
     */
    const exportOnce = async (withReads: boolean) => {
      let rssMax = rssMiB(server.pid!);
      const serverCpu = cpuSeconds(server.pid!);
      const clientCpu = process.cpuUsage();
      const backends = new Map<number, { first: number; last: number }>();
      const sampleBackends = async () => {
        const { rows } = await db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`);
        for (const { pid } of rows) {
          const used = cpuSeconds(pid);
          if (Number.isNaN(used)) continue;
          const seen = backends.get(pid);
          if (seen) seen.last = used;
          else backends.set(pid, { first: used, last: used });
        }
      };
      await sampleBackends();
      const sampler = setInterval(() => {
        rssMax = Math.max(rssMax, rssMiB(server.pid!));
        void sampleBackends().catch(() => undefined);
      }, 100);
      const reader = withReads ? startReader() : undefined;
      await reader?.until(WARM_UP);
      const at = { kickOff: Date.now(), manifest: 0, end: 0 };
      const started = performance.now();
      const kick = await fetch(`${url}${FHIR}/$export`, { headers: { ...exporter, prefer: 'respond-async' } });
      if (kick.status !== 202) throw new Error(`kick-off: ${kick.status} ${await kick.text()}`);
      const status = kick.headers.get('content-location')!;
      let manifest: { output: Array<{ type: string; url: string; count: number }> };
      for (;;) {
        const res = await fetch(status, { headers: exporter });
        if (res.status === 200) {
          manifest = (await res.json()) as typeof manifest;
          break;
        }
        if (res.status !== 202) throw new Error(`status: ${res.status} ${await res.text()}`);
        await res.arrayBuffer();
        await new Promise((r) => setTimeout(r, 250));
      }
      at.manifest = Date.now();
      const generated = (performance.now() - started) / 1000;
      await sampleBackends();
      const cpuAtManifest = { server: cpuSeconds(server.pid!), database: [...backends.values()].reduce((sum, b) => sum + b.last - b.first, 0), client: process.cpuUsage(clientCpu) };
      log(`${label}: manifest after ${generated.toFixed(1)} s: ${manifest.output.length} files`);
      // Files downloaded DOWNLOADS at a time, as bulk clients do; lines counted as the bytes stream in.
      let lines = 0;
      let bytes = 0;
      const queue = [...manifest.output];
      await Promise.all(
        Array.from({ length: DOWNLOADS }, async () => {
          for (let file = queue.shift(); file; file = queue.shift()) {
            const res = await fetch(file.url, { headers: { ...exporter, 'accept-encoding': 'identity' } });
            if (res.status !== 200) throw new Error(`file: ${res.status}`);
            for await (const chunk of res.body!) {
              const buf = chunk as Uint8Array;
              bytes += buf.length;
              for (let i = buf.indexOf(10); i !== -1; i = buf.indexOf(10, i + 1)) lines++;
            }
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      at.end = Date.now();
      // The reads during each phase (one that straddles the manifest counts for neither).
      const reads = (await reader?.stop()) ?? [];
      const within = (from: number, to: number) => reads.filter((r) => r.at >= from && r.at + r.ms <= to).map((r) => r.ms);
      const during = { generating: within(at.kickOff, at.manifest), downloading: within(at.manifest, at.end) };
      clearInterval(sampler);
      await sampleBackends();
      const used = process.cpuUsage(clientCpu);
      const cpu = {
        server: round(cpuSeconds(server.pid!) - serverCpu),
        database: round([...backends.values()].reduce((sum, b) => sum + b.last - b.first, 0)),
        client: round((used.user + used.system) / 1e6),
      };
      // The same, while the files were written (kick-off to manifest); the rest is the downloads'.
      const cpuWriting = {
        server: round(cpuAtManifest.server - serverCpu),
        database: round(cpuAtManifest.database),
        client: round((cpuAtManifest.client.user + cpuAtManifest.client.system) / 1e6),
      };
      const counted = manifest.output.reduce((sum, f) => sum + f.count, 0);
      if (counted !== lines) throw new Error(`manifest counts ${counted} resources, files hold ${lines} lines`);
      log(`${label}: export${withReads ? ' with reads' : ''}: ${lines} resources in ${seconds.toFixed(1)} s; CPU s ${JSON.stringify(cpu)} (writing ${JSON.stringify(cpuWriting)}); load ${loadavg()[0]!.toFixed(1)}`);
      return { lines, bytes, files: manifest.output.length, generated, seconds, cpu, cpuWriting, rssMax, during };
    };

    // Alone (throughput, what it costs), then again beside the other client's reads (their latency).
    const alone = await exportOnce(false);
    const beside = await exportOnce(true);
    const { lines, bytes, generated, seconds, cpu, cpuWriting } = alone;
    const rssMax = Math.max(alone.rssMax, beside.rssMax);
    const during = [...beside.during.generating, ...beside.during.downloading];

    const idleStats = stats(idle);
    const duringStats = stats(during);
    const cpuTotal = cpu.server + cpu.database + cpu.client;
    return {
      date: new Date().toISOString(),
      backend: 'postgres',
      server: label,
      server_env: serverEnv,
      machine: { cpus: cpus().length, load_average_at_end: loadavg().map(round) },
      store: { resources: store },
      export: {
        resources: lines,
        files: alone.files,
        megabytes: Math.round(bytes / 1048576),
        seconds_to_manifest: round(generated),
        seconds_end_to_end: round(seconds),
        resources_per_second: Math.round(lines / seconds),
        parallel_downloads: DOWNLOADS,
        seconds_end_to_end_beside_reads: round(beside.seconds),
      },
      cpu_seconds_during_export: cpu,
      cpu_seconds_while_files_written: cpuWriting,
      // CPU microseconds per resource exported: what each side costs, whatever else the machine runs.
      cpu_us_per_resource: { server: round((cpu.server * 1e6) / lines), database: round((cpu.database * 1e6) / lines), client: round((cpu.client * 1e6) / lines) },
      // What the export costs in CPU, whatever else the machine runs: resources per second if its 2 cores did nothing
      // else (server, database and client CPU spread over both), an estimate.
      resources_per_cpu_second: Math.round(lines / cpuTotal),
      estimated_resources_per_second_on_2_idle_cores: Math.round((2 * lines) / cpuTotal),
      server_rss_mib: { idle: Math.round(rssIdle), max_during_export: Math.round(rssMax) },
      other_client_reads_ms: {
        idle: rounded(idleStats),
        during_export: rounded(duringStats),
        while_files_written: rounded(stats(beside.during.generating)),
        while_files_downloaded: rounded(stats(beside.during.downloading)),
      },
      targets: [
        { target: 'export >= 20,000 resources/s end to end', met: lines / seconds >= 20_000 },
        { target: 'server RSS < 500 MiB throughout', met: rssMax < 500 },
        { target: 'reads during the export within 2x of idle (p50 and p95)', met: duringStats.p50 <= 2 * idleStats.p50 && duringStats.p95 <= 2 * idleStats.p95 },
      ],
    };
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => server.once('close', r));
  }
}

async function main(): Promise<void> {
  const scratch = values.database ? { url: values.database, drop: async () => undefined } : await createScratchDatabase();
  let db: Database | undefined;
  try {
    await run(['migrate'], { DATABASE_URL: scratch.url });
    db = await openDatabase({ databaseUrl: scratch.url });
    if (!values.database) await importSample(scratch.url);
    const seeded = await copyUpTo(db);
    log(`store: ${seeded.total.toLocaleString('en')} resources (${seeded.base.toLocaleString('en')} before, the rest copied in ${seeded.seconds.toFixed(0)} s)`);

    // With --baseline, its server first and this checkout's next, on the same store, one after the other.
    const results = [];
    if (values.baseline) results.push(await measure(db, scratch.url, resolve(values.baseline), 'before', seeded.total));
    results.push(await measure(db, scratch.url, repoRoot, values.baseline ? 'after' : 'this checkout', seeded.total));

    mkdirSync(join(repoRoot, 'bench', 'results'), { recursive: true });
    const out = join(repoRoot, 'bench', 'results', `bulk-export-postgres${values.out ? `-${values.out}` : ''}.json`);
    writeFileSync(out, `${JSON.stringify(values.baseline ? results : results[0], null, 2)}\n`);
    console.log(JSON.stringify(results, null, 2));
    log(`written to ${out}`);
  } finally {
    await db?.close().catch(() => undefined);
    if (values.keep || values.database) log(`kept: ${scratch.url}`);
    else await scratch.drop();
  }
}

const round = (v: number) => Math.round(v * 10) / 10;
const rounded = (s: Stats) => ({ n: s.n, p50: round(s.p50), p95: round(s.p95), mean: round(s.mean) });

await main();
