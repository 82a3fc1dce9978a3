/**
 * `npm run bench:hl7`: the HL7 v2 Bridge agent end to end (issue 45). Pont in this process on a scratch PostgreSQL
 * database; `pont bridge-agent` as its own process, from the build (`npm run build` first) as a facility's install
 * runs it; a laboratory system simulated by bench/hl7-lab.ts in a third
 * (BENCH_CONNECTIONS, default 4, @medplum/hl7 MLLP clients, each sending ORU^R01 messages with 5 OBX one after the
 * other; 100 patients). Figures:
 * 1. Pont up, BENCH_MESSAGES (default 3000): ACKs per second and ACK latency p50/p95 at the client; messages per
 *    second through to Pont (until the last DiagnosticReport is stored).
 * 2. Pont unreachable, BENCH_BACKLOG messages (default 20000; the figure is 100000): ACKs per second, and the
 *    agent's memory (RSS now and its peak, VmHWM) with that backlog queued.
 * 3. The agent restarted on that queue (its memory after reading the queue at start), Pont back: how fast the
 *    backlog drains (for at most BENCH_DRAIN_SECONDS, default 600) and the agent's peak memory meanwhile.
 * Written to bench/results/hl7.json (BENCH_RESULT names another file). BENCH_AGENT_PROFILE=DIR: a CPU profile of
 * each agent process. BENCH_WORKERS=N: Pont as `pont serve --workers N` in processes of its own instead of in this
 * one (a facility's Pont on a machine of several cores).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createAgent } from '../src/auth/agents';
import { loadConfig } from '../src/config';
import { startPont } from '../src/server';
import { openPostgres } from '../src/db/postgres';
import { createScratchDatabase } from '../test/harness';
import { plannedAnew } from './planned-anew';
import { spawnServe } from './serve';
import { stats } from './stats';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 3000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 4);
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 20000);
const DRAIN_SECONDS = Number(process.env.BENCH_DRAIN_SECONDS ?? 600);
const WORKERS = Number(process.env.BENCH_WORKERS ?? 0);
const repoRoot = fileURLToPath(new URL('..', import.meta.url));

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * The CPU time (user + system, ms) a process of this machine has used: /proc/PID/stat's utime and stime, in clock
 * ticks (100 a second on Linux). What each process costs a message, which the machine's other load does not change
 * as much as it changes the rates.
 */
function cpuMsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function startAgentProcess(config: Record<string, unknown>, dir: string): Promise<{ child: ChildProcess; port: number; rssKiB(): number; peakKiB(): number; cpuMs(): number; stop(): Promise<void> }> {
  const file = join(dir, `agent-${config.mllp_port}.json`);
  writeFileSync(file, JSON.stringify(config));
  chmodSync(file, 0o600);
  // BENCH_AGENT_PROFILE=DIR: a CPU profile of each agent process, written to DIR when it stops.
  const profile = process.env.BENCH_AGENT_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_AGENT_PROFILE}`] : [];
  const child = spawn(process.execPath, [...profile, '--enable-source-maps', join(repoRoot, 'dist/bin.js'), 'bridge-agent', '--config', file], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (c) => {
    out = (out + c).slice(-10_000);
    if (/"level":"(warn|error)"/.test(String(c))) process.stderr.write(String(c).slice(0, 600));
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => /bridge agent listening/.test(out) && (clearInterval(timer), resolve()), 50);
    child.once('exit', () => (clearInterval(timer), reject(new Error(`agent exited: ${out}`))));
  });
  return {
    child,
    port: config.mllp_port as number,
    rssKiB: () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? NaN),
    peakKiB: () => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? NaN),
    cpuMs: () => cpuMsOf(child.pid!),
    async stop() {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The laboratory (bench/hl7-lab.ts) sending `count` messages; every ACK's latency. */
async function burst(port: number, count: number, run: string): Promise<{ seconds: number; latencies: number[]; codes: Record<string, number>; cpuMs: number }> {
  const lab = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'bench/hl7-lab.ts'), String(port), String(count), run], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  lab.stdout!.on('data', (c) => (out += c));
  const [code] = await once(lab, 'exit');
  if (code !== 0) throw new Error(`the laboratory process exited with ${code}`);
  return JSON.parse(out);
}

async function main() {
  execFileSync(process.execPath, [join(repoRoot, 'scripts/build.mjs')], { stdio: 'inherit' });
  const dir = mkdtempSync(join(tmpdir(), 'pont-bench-hl7-'));
  const scratch = await createScratchDatabase();
  const env = { LOG_LEVEL: 'error', PONT_RATE_LIMITS: 'default=999999999/60', DATABASE_URL: scratch.url };
  const pont = WORKERS
    ? await spawnServe(['--workers', String(WORKERS)], { ...env, PORT: String(await freePort()) })
    : await startPont(loadConfig({ ...env, PORT: '0' })).then((running) => ({ url: running.url, stop: () => running.close(), db: running.services.db }));
  const db = await openPostgres(scratch.url, 2);
  try {
    const credentials = await createAgent(db, { organizationId: 'org-bench', facilityId: 'fac-bench' });
    const base = { agent_id: credentials.agent_id, agent_key: credentials.agent_key, facility_id: 'fac-bench', mllp_host: '127.0.0.1', max_message_bytes: 1024 * 1024 };

    // 1. Through to Pont.
    const agent = await startAgentProcess({ ...base, pont_url: pont.url, mllp_port: await freePort(), queue_dir: join(dir, 'q1') }, dir);
    const reports = async () => Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM fhir_resources WHERE resource_type = 'DiagnosticReport' AND NOT deleted")).rows[0]!.n);
    const started = performance.now();
    const agentCpuBefore = agent.cpuMs();
    const pontCpuBefore = process.cpuUsage();
    const sent = await burst(agent.port, MESSAGES, 'R');
    console.log(`acknowledged: ${JSON.stringify(sent.codes)} in ${sent.seconds.toFixed(1)} s`);
    for (let last = -1, n = await reports(); n < MESSAGES; n = await reports()) {
      if (n !== last) console.log(`in Pont: ${n} reports`);
      last = n;
      await new Promise((r) => setTimeout(r, 500));
    }
    const throughSeconds = (performance.now() - started) / 1000;
    // CPU a message cost each process (Pont's only when it runs in this process; PostgreSQL's is not counted).
    const pontCpu = process.cpuUsage(pontCpuBefore);
    const perMessage = (ms: number) => Math.round((ms / MESSAGES) * 1000) / 1000;
    const cpuMsPerMessage = { agent: perMessage(agent.cpuMs() - agentCpuBefore), laboratory: perMessage(sent.cpuMs), ...(WORKERS ? {} : { pont: perMessage((pontCpu.user + pontCpu.system) / 1000) }) };
    const ack = stats(sent.latencies);
    const rssAfterRun = agent.rssKiB();
    const peakAfterRun = agent.peakKiB();
    await agent.stop();
    const through = {
      messages: MESSAGES,
      connections: CONNECTIONS,
      ack_per_second: Math.round(MESSAGES / sent.seconds),
      ack_p50_ms: Math.round(ack.p50 * 10) / 10,
      ack_p95_ms: Math.round(ack.p95 * 10) / 10,
      acks: sent.codes,
      in_pont_per_second: Math.round(MESSAGES / throughSeconds),
      seconds_until_all_in_pont: Math.round(throughSeconds * 10) / 10,
      agent_rss_mib: Math.round(rssAfterRun / 1024),
      agent_peak_rss_mib: Math.round(peakAfterRun / 1024),
      cpu_ms_per_message: cpuMsPerMessage,
    };
    console.log(`through to Pont: ${JSON.stringify(through)}`);

    // 2. Pont unreachable: the backlog on disk, and the agent's memory with it.
    const mib = (kib: number) => Math.round(kib / 1024);
    const down = await startAgentProcess({ ...base, pont_url: `http://127.0.0.1:${await freePort()}`, mllp_port: await freePort(), queue_dir: join(dir, 'q2') }, dir);
    const rssBefore = down.rssKiB();
    const queued = await burst(down.port, BACKLOG, 'B');
    const backlog = {
      messages: BACKLOG,
      ack_per_second: Math.round(BACKLOG / queued.seconds),
      ack_p50_ms: Math.round(stats(queued.latencies).p50 * 10) / 10,
      ack_p95_ms: Math.round(stats(queued.latencies).p95 * 10) / 10,
      acks: queued.codes,
      agent_rss_mib_empty: mib(rssBefore),
      agent_rss_mib_with_backlog: mib(down.rssKiB()),
      agent_peak_rss_mib: mib(down.peakKiB()),
    };
    await down.stop();
    console.log(`backlog with Pont down: ${JSON.stringify(backlog)}`);

    // 3. The agent restarted on that queue, Pont back: the backlog drains in full batches.
    const before = await reports();
    const drainStarted = performance.now();
    const back = await startAgentProcess({ ...base, pont_url: pont.url, mllp_port: await freePort(), queue_dir: join(dir, 'q2') }, dir);
    const rssAtStart = back.rssKiB();
    let drained = 0;
    while ((drained = (await reports()) - before) < BACKLOG && performance.now() - drainStarted < DRAIN_SECONDS * 1000) await new Promise((r) => setTimeout(r, 500));
    const drainSeconds = (performance.now() - drainStarted) / 1000;
    const drain = {
      messages: drained,
      of: BACKLOG,
      seconds: Math.round(drainSeconds * 10) / 10,
      in_pont_per_second: Math.round(drained / drainSeconds),
      agent_rss_mib_after_start: mib(rssAtStart),
      agent_peak_rss_mib: mib(back.peakKiB()),
    };
    await back.stop();
    console.log(`backlog drained into Pont: ${JSON.stringify(drain)}`);
    // Pont in this process: the statements its pool kept planning anew (bench/planned-anew.ts).
    const anew = 'db' in pont ? await plannedAnew(pont.db) : undefined;
    for (const { statement, custom } of anew ?? []) console.log(`planned anew ${custom} times: ${statement.slice(0, 160)}`);

    mkdirSync(join(repoRoot, 'bench', 'results'), { recursive: true });
    writeFileSync(join(repoRoot, 'bench', 'results', process.env.BENCH_RESULT ?? 'hl7.json'), JSON.stringify({ at: new Date().toISOString(), node: process.version, database: 'postgres', pont_workers: WORKERS, load_average_1m: loadavg()[0], through, backlog, drain, planned_anew: anew }, null, 2) + '\n');
  } finally {
    await db.close();
    await pont.stop();
    await scratch.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
