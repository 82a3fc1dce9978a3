/**
 * Where a request spends its time (`npm run bench:profile -- [options]`): loads the Synthea sample (copied up to
 * --resources) into a scratch PostgreSQL database with `pont import`, starts Pont in this process, grants an
 * integrator's organisation a full-record consent from every patient, then sends each kind of request below
 * --requests times, one at a time, under V8's CPU profiler, and attributes the server's CPU time to the parts of the
 * code (policy, SQL assembly, search, mapping, validation, audit, JSON, the pg driver, koa) by the file a sampled
 * function belongs to. Time not on the CPU (waiting for PostgreSQL, which runs on the same machine) is the rest of
 * the wall time. Figures to bench/results/profile-postgres.json.
 *
 *   --resources N   bundle entries to load (default 20000)
 *   --requests N    requests of each kind (default 200)
 *   --only TEXT     only the kinds whose name contains TEXT (e.g. records)
 *   --no-profiler   latency and statements only, without V8's CPU profiler (whose sampling slows every request): for
 *                   comparing two trees' p50
 *   --keep          keep the scratch database and, with --explain, the statements explained (text and values, as JSON
 *                   files beside the dataset), for trying a statement's variants by hand; drop them when done
 *   --explain       also print PostgreSQL's plan (EXPLAIN ANALYZE, BUFFERS) of each kind's costliest statements (up to
 *                   three that every request runs; PROFILE_SQL=1 prints their text too), run
 *                   once more with the values of its last execution (PROFILE_GENERIC=1: its generic plan, which a
 *                   prepared statement settles on)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session, type Profiler } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createClient } from '../src/auth/clients';
import { loadConfig } from '../src/config';
import { startPont } from '../src/server';
import { createScratchDatabase } from '../test/harness';
import { BENCH_SCOPES, FHIR_PATH, deepPagePaths, grantFullRecordConsents, importCommand, patientCodePaths, prepareDataset, readByIdPaths, repoRoot, tokenOf } from './fhir-data';
import { PLANNED_ANEW_AFTER, plannedAnew } from './planned-anew';
import { stats } from './stats';

/** The part of the code a sampled function's file belongs to: first match wins. */
const PARTS: Array<[string, RegExp]> = [
  ['policy', /\/src\/policy\//],
  ['SQL assembly', /\/src\/db\/sql\.ts|\/src\/fhir\/search\/sql\.ts/],
  ['search parsing', /\/src\/fhir\/search\//],
  ['mapping', /\/src\/mapping\//],
  ['records', /\/src\/records\//],
  ['validation', /\/src\/fhir\/(validate|check)|@medplum\/core/],
  ['audit', /\/src\/audit\/|audit-trail/],
  ['store and repository', /\/src\/fhir\//],
  ['pg driver', /node_modules\/(pg|pg-protocol|pg-types|postgres-)/],
  ['HTTP (koa, routes, auth)', /node_modules\/(koa|@koa|jose)|\/src\/(http|routes|auth|connect|sdk)\//],
  ['other Pont code', /\/src\//],
  ['node internals', /^node:|^internal\//],
];

/** The part of a JS function's file; undefined for natives and V8's own entries. */
function partOfFile(url: string): string {
  for (const [name, re] of PARTS) if (re.test(url)) return name;
  return 'other libraries';
}

/**
 * The part a sample counts for: its function's file's part; a native function (no file) is named, with the part of
 * the nearest caller that has a file (`native writev ← pg driver`), so that a native's cost shows whose it is.
 */
function partOf(node: Profiler.ProfileNode, parentOf: Map<number, Profiler.ProfileNode>): string {
  const { url, functionName } = node.callFrame;
  if (url) return partOfFile(url);
  if (functionName === '(garbage collector)') return 'GC';
  if (functionName === '(idle)' || functionName === '(program)') return functionName;
  let caller = parentOf.get(node.id);
  while (caller && !caller.callFrame.url) caller = parentOf.get(caller.id);
  const name = /^(parse|stringify)$/.test(functionName) ? 'JSON' : `native ${functionName || '(anonymous)'}`;
  return caller ? `${name} <- ${partOfFile(caller.callFrame.url)}` : name;
}

/**
 * Every statement the server sends, timed from submission to its answer (round trip and PostgreSQL's work), by its
 * first words: how many a request makes and what they cost. pg's Client.query is wrapped for the run.
 */
const statements = new Map<string, { count: number; prepared: number; ms: number; each: number[]; last: { text: string; values: unknown[] } }>();
const clientQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const answer = clientQuery.apply(this, args);
  const config = args[0] as string | { text?: string };
  const text = typeof config === 'string' ? config : config?.text;
  if (typeof text !== 'string' || !(answer instanceof Promise)) return answer;
  const values = (Array.isArray(args[1]) ? args[1] : (config as { values?: unknown[] }).values) ?? [];
  const started = performance.now();
  const key = text.replace(/\s+/g, ' ').trim().slice(0, 70);
  const done = () => {
    const s = statements.get(key) ?? { count: 0, prepared: 0, ms: 0, each: [] as number[], last: { text, values } };
    s.count++;
    if (typeof config === 'object' && (config as { name?: string }).name) s.prepared++;
    const ms = performance.now() - started;
    s.ms += ms;
    s.each.push(ms);
    s.last = { text, values };
    statements.set(key, s);
  };
  answer.then(done, done);
  return answer;
} as typeof pg.Client.prototype.query;

/** CPU ms by function (self time) over a profile, the `top` costliest: where to look inside a part. */
function hottest(profile: Profiler.Profile, top: number): Array<[string, number]> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const out = new Map<string, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    const { functionName, url, lineNumber } = byId.get(samples[i]!)!.callFrame;
    if (functionName === '(idle)') continue;
    const where = url ? ` ${url.replace(/^.*\/(node_modules|src)\//, '$1/')}:${lineNumber + 1}` : '';
    const key = `${functionName || '(anonymous)'}${where}`;
    out.set(key, (out.get(key) ?? 0) + (deltas[i] ?? 0) / 1000);
  }
  return [...out].sort((a, b) => b[1] - a[1]).slice(0, top);
}

/** CPU ms by part over a profile (samples × their intervals). */
function attribute(profile: Profiler.Profile): Record<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map(profile.nodes.flatMap((n) => (n.children ?? []).map((c) => [c, n] as const)));
  const out: Record<string, number> = {};
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    const part = partOf(byId.get(samples[i]!)!, parentOf);
    out[part] = (out[part] ?? 0) + (deltas[i] ?? 0) / 1000;
  }
  return out;
}

/**
 * What PostgreSQL's plan cache makes of a statement run as a named prepared statement on one connection, 10 times
 * with the same values: by default (custom plans first, then a generic plan if it looks no worse), and each way
 * forced: ms per execution after the first and the plans it made.
 */
/** EXPLAIN (ANALYZE, BUFFERS) of a statement, rolled back (it may be a write). */
async function explained(url: string, text: string, values: unknown[]): Promise<{ rows: Array<{ 'QUERY PLAN': string }> }> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    await client.query('BEGIN');
    // PROFILE_GENERIC=1: the plan a prepared statement settles on (generic, as the server's run once a text is
    // prepared and PostgreSQL finds the generic plan as cheap), not the custom plan of these values.
    if (!process.env.PROFILE_GENERIC) return await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, values);
    await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
    await client.query(`PREPARE profiled_generic AS ${text}`);
    // EXECUTE takes no bind parameters: the values as literals, as the driver would send them.
    const asText = (v: unknown): string =>
      Array.isArray(v) ? `{${v.map((x) => (x === null ? 'NULL' : `"${asText(x).replace(/[\\"]/g, '\\$&')}"`)).join(',')}}` : v instanceof Date ? v.toISOString() : typeof v === 'object' ? JSON.stringify(v) : String(v);
    const literal = (v: unknown) => (v === null || v === undefined ? 'NULL' : client.escapeLiteral(asText(v)));
    return await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE profiled_generic(${values.map(literal).join(', ')})`);
  } finally {
    await client.query('ROLLBACK');
    await client.end();
  }
}

async function preparedCosts(url: string, text: string, values: unknown[]): Promise<string> {
  const out: string[] = [];
  for (const mode of ['auto', 'force_custom_plan', 'force_generic_plan']) {
    const client = new pg.Client(url);
    await client.connect();
    try {
      await client.query(`SET plan_cache_mode = ${mode}`);
      const ms: number[] = [];
      for (let i = 0; i < 10; i++) {
        // Rolled back: a write (the audit trail's INSERT) runs again with the same values.
        await client.query('BEGIN');
        const t = performance.now();
        await client.query({ name: 'profiled', text, values });
        ms.push(performance.now() - t);
        await client.query('ROLLBACK');
      }
      const { rows } = await client.query<{ generic_plans: string; custom_plans: string }>("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'profiled'");
      const later = ms.slice(1);
      out.push(`${mode} ${(later.reduce((a, b) => a + b, 0) / later.length).toFixed(2)} ms (plans: ${rows[0]?.custom_plans} custom, ${rows[0]?.generic_plans} generic)`);
    } finally {
      await client.end();
    }
  }
  return out.join('; ');
}

async function main() {
  const { values } = parseArgs({ options: { resources: { type: 'string', default: '20000' }, requests: { type: 'string', default: '200' }, only: { type: 'string' }, explain: { type: 'boolean' }, 'no-profiler': { type: 'boolean' }, keep: { type: 'boolean' } } });
  const n = Number(values.requests);
  const dir = mkdtempSync(join(tmpdir(), 'pont-profile-'));
  const scratch = await createScratchDatabase();
  const session = new Session();
  session.connect();
  try {
    const data = prepareDataset(join(repoRoot, 'samples', 'synthea-r4-50-patients.tar.gz'), Number(values.resources), dir);
    const pont = await startPont(loadConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'error', DATABASE_URL: scratch.url, PONT_RATE_LIMITS: 'default=999999999/60,fhir=999999999/60' }));
    try {
      await importCommand(scratch.url, data.dir, 2);
      await pont.services.db.exec('ANALYZE');
      const client = await createClient(pont.services.db, { name: 'profile', organizationId: 'org-bench', scopes: [...BENCH_SCOPES] });
      const headers = { authorization: `Bearer ${await tokenOf(pont.url, client)}`, accept: 'application/fhir+json' };
      // The same reads by an operator client (all patients: no consent rule), for the policy's own cost.
      const operator = await createClient(pont.services.db, { name: 'profile-operator', organizationId: 'org-bench', scopes: ['fhir:read'], allPatients: true });
      const operatorHeaders = { authorization: `Bearer ${await tokenOf(pont.url, operator)}`, accept: 'application/fhir+json' };
      const healthIds = await grantFullRecordConsents(pont.url, headers, pont.services.db);
      await pont.services.db.exec('ANALYZE consent_access');
      const patientOf = new Map((await pont.services.db.query<{ health_id: string; patient_id: string }>('SELECT health_id, patient_id FROM health_ids WHERE patient_id IS NOT NULL')).rows.map((r) => [r.health_id, r.patient_id]));
      const reads = await readByIdPaths(pont.services.db, n);
      const searches = await patientCodePaths(pont.services.db, n);
      const deep = await deepPagePaths((path) => fetch(`${pont.url}${path}`, { headers }), n);
      const hid = (i: number) => healthIds[i % healthIds.length]!;
      // Answers uncompressed, as bench:fhir's load generator (autocannon) takes them: fetch would ask for gzip.
      const send = async (path: string, init: RequestInit = {}, as = headers) => {
        const res = await fetch(`${pont.url}${path}`, { ...init, headers: { 'accept-encoding': 'identity', ...as, ...(init.headers as Record<string, string>) } });
        const text = await res.text();
        if (res.status >= 300) throw new Error(`${path}: ${res.status} ${text.slice(0, 300)}`);
      };
      const observation = (i: number) => ({
        resourceType: 'Observation',
        status: 'final',
        category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] }],
        code: { coding: [{ system: 'http://loinc.org', code: '718-7', display: 'Hemoglobin [Mass/volume] in Blood' }] },
        subject: { reference: `Patient/${patientOf.get(hid(i))}` },
        effectiveDateTime: new Date().toISOString(),
        valueQuantity: { value: 10 + (i % 50) / 10, unit: 'g/dL', system: 'http://unitsofmeasure.org', code: 'g/dL' },
      });
      const kinds: Array<[string, (i: number) => Promise<void>]> = [
        ['FHIR read by id', (i) => send(reads[i % reads.length]!)],
        ['FHIR read by id, operator', (i) => send(reads[i % reads.length]!, {}, operatorHeaders)],
        ['FHIR patient + code', (i) => send(searches[i % searches.length]!)],
        ['FHIR patient + code, operator', (i) => send(searches[i % searches.length]!, {}, operatorHeaders)],
        ['FHIR deep page (21+)', (i) => send(deep[i % deep.length]!)],
        ['FHIR deep page (21+), operator', (i) => send(deep[i % deep.length]!, {}, operatorHeaders)],
        ['FHIR Observation?patient (100)', (i) => send(`${FHIR_PATH}/Observation?patient=Patient/${patientOf.get(hid(i))}&_sort=-date&_count=100`)],
        ['Connect records?type=all', (i) => send(`/api/v1/connect/patient/${hid(i)}/records?type=all&limit=100`)],
        ['SDK summary', (i) => send(`/api/v1/sdk/patients/${hid(i)}/summary`)],
        ['FHIR POST Observation', (i) => send(`${FHIR_PATH}/Observation`, { method: 'POST', headers: { 'content-type': 'application/fhir+json' }, body: JSON.stringify(observation(i)) })],
        [
          'SDK lab push',
          (i) =>
            send('/api/v1/sdk/records/lab-results', {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'idempotency-key': `profile-${i}` },
              body: JSON.stringify({ health_id: hid(i), test_name: 'Hemoglobin', result_value: String(10 + (i % 50) / 10), unit: 'g/dL', flagged: false }),
            }),
        ],
      ];
      const result: Record<string, unknown> = { resources: data.entries, requests: n, commit: process.env.GIT_COMMIT ?? null };
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 100 });
      for (const [name, request] of kinds) {
        if (values.only && !name.toLowerCase().includes(values.only.toLowerCase())) continue;
        for (let i = 0; i < 20; i++) await request(n + i); // warm up
        const ms: number[] = [];
        statements.clear();
        if (!values['no-profiler']) await session.post('Profiler.start');
        const started = performance.now();
        for (let i = 0; i < n; i++) {
          const t = performance.now();
          await request(i);
          ms.push(performance.now() - t);
        }
        const wall = performance.now() - started;
        const profile = values['no-profiler'] ? { nodes: [], startTime: 0, endTime: 0 } : (await session.post('Profiler.stop')).profile;
        // PROFILE_SAVE=DIR keeps each kind's profile (DIR/<kind>.cpuprofile) for a closer look (Chrome's DevTools, speedscope).
        if (process.env.PROFILE_SAVE && !values['no-profiler']) writeFileSync(join(process.env.PROFILE_SAVE, `${name.replace(/[^A-Za-z0-9]+/g, '-')}.cpuprofile`), JSON.stringify(profile));
        const cpu = attribute(profile);
        delete cpu['(idle)'];
        const perRequest = Object.fromEntries(
          Object.entries(cpu)
            .sort((a, b) => b[1] - a[1])
            .map(([k, v]) => [k, Number((v / n).toFixed(3))]),
        );
        const s = stats(ms);
        const functions = hottest(profile, Number(process.env.PROFILE_TOP ?? 15)).map(([k, v]) => [k, Number((v / n).toFixed(3))] as const);
        const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)] ?? 0;
        const sql = [...statements]
          .sort((a, b) => b[1].ms - a[1].ms)
          .map(([k, v]) => [k, { perRequest: Number((v.count / n).toFixed(2)), prepared: Number((v.prepared / v.count).toFixed(2)), ms: Number((v.ms / n).toFixed(3)), p50: Number(median(v.each).toFixed(3)) }] as const);
        const sqlMs = sql.reduce((sum, [, v]) => sum + v.ms, 0);
        result[name] = { p50: s.p50, p95: s.p95, wallPerRequest: wall / n, sqlMsPerRequest: Number(sqlMs.toFixed(3)), statements: Object.fromEntries(sql), cpuMsPerRequest: perRequest, hottestFunctions: Object.fromEntries(functions) };
        console.log(`\n${name}: p50 ${s.p50.toFixed(2)} ms, p95 ${s.p95.toFixed(2)} ms; CPU ms a request by part (the benchmark's own client included in "other"):`);
        for (const [k, v] of Object.entries(perRequest)) console.log(`  ${k.padEnd(28)} ${v.toFixed(3)}`);
        console.log('  the costliest functions (self time, ms a request):');
        for (const [k, v] of functions) console.log(`    ${v.toFixed(3)}  ${k}`);
        console.log(`  statements, ${sqlMs.toFixed(2)} ms a request from submission to answer (count a request, ms a request, p50 of one):`);
        for (const [k, v] of sql.slice(0, 12)) console.log(`    ${v.perRequest.toFixed(2)} × ${v.ms.toFixed(3)} ms (p50 ${v.p50.toFixed(3)}) ${v.prepared < 1 ? `(${(100 * v.prepared).toFixed(0)}% prepared) ` : ''} ${k}`);
        // The statements a request runs at least once, costliest first (the background's own are left out).
        for (const [key] of values.explain ? sql.filter(([, v]) => v.perRequest >= 0.9).slice(0, 3) : []) {
          const { text, values: params } = statements.get(key)!.last;
          try {
            const plan = await explained(scratch.url, text, params);
            console.log(`  the plan of ${key.slice(0, 40)}…:\n${plan.rows.map((r) => `    ${r['QUERY PLAN']}`).join('\n')}`);
            console.log(`  as a prepared statement, 10 executions each: ${await preparedCosts(scratch.url, text, params)}`);
            if (process.env.PROFILE_SQL) console.log(`  its text: ${text}\n  its values: ${JSON.stringify(params)}`);
            if (values.keep) writeFileSync(join(dir, `${name.replace(/\W+/g, '-')}-${key.slice(0, 12).replace(/\W+/g, '-')}.json`), JSON.stringify({ text, values: params }));
          } catch (err) {
            // A write that cannot run twice with the same values (a unique key): no plan.
            console.log(`  its plan: not shown, it cannot run again with the same values (${(err as Error).message})`);
          }
        }
      }
      result.plannedAnew = await plannedAnew(pont.services.db);
      console.log(`\nprepared statements PostgreSQL planned anew at every execution (a custom plan ${PLANNED_ANEW_AFTER} times or more, never a generic one), on any connection:`);
      for (const { statement, custom } of result.plannedAnew as Array<{ statement: string; custom: number }>) console.log(`  ${String(custom).padStart(5)} ×  ${statement.slice(0, 120)}`);
      writeFileSync(join(repoRoot, 'bench', 'results', 'profile-postgres.json'), JSON.stringify(result, null, 2) + '\n');
    } finally {
      await pont.close();
    }
  } finally {
    session.disconnect();
    if (values.keep) console.log(`\nkept: the database ${scratch.url} and ${dir} (the statements explained, as JSON); drop them when done`);
    else {
      await scratch.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

await main();
process.exit(0);
