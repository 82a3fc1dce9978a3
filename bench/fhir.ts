/**
 * FHIR benchmark (`npm run bench:fhir -- [options]`, also `npm run bench:sdk`): loads the 50 Synthea sample
 * patients, repeated with new ids up to the requested size, through the real import path (`pont import` in its
 * own process on PostgreSQL), then measures read-by-id and typical searches over HTTP against the running service
 * (load from autocannon in another process), next to the same SQL run directly on the database under the same
 * access rule (the floor), as an integrator whose organisation every patient granted a full-record consent (the
 * access rule in every query); the same reads by an all-patients client give the rule's own cost. Then the
 * Connect and SDK paths, each beside its FHIR equivalent in the same run (records type=all and a patient-compartment
 * search, the lab push and `POST Observation`), the SDK summary, replayed pushes, a pharmacy stock read and a consent
 * status. Runs on embedded PGlite and on PostgreSQL, and checks issue 41's targets. Where the time goes:
 * `npm run bench:profile`.
 *
 *   --backend pglite|postgres|both   (default both; postgres runs first)
 *   --resources N                    bundle entries to load (default 500000; at least one bundle)
 *   --requests N                     requests per query kind and phase (default 300)
 *   --seconds N                      seconds of each throughput run at 1, 8 and 32 connections (default 5)
 *   --concurrency N                  clients of the SDK throughput phase (default 4)
 *   --import-concurrency N           bundles loaded at once (default: as `pont import`: 2 on postgres, 1 on pglite)
 *   --samples PATH                   synthea-r4-50-patients.tar.gz (default samples/ in the repo)
 *   --no-analyze                     skip ANALYZE after the import (PGlite has no autovacuum to do it)
 *   --keep                           keep the temporary directory (data files, PGlite data dir)
 *
 * Figures are printed as a table and written to bench/results/fhir-<backend>.json.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createClient, type ClientRecord } from '../src/auth/clients';
import { accessPolicyFor, type AccessPolicy } from '../src/policy/index';
import { loadConfig } from '../src/config';
import type { Database, Queryable, QueryResult } from '../src/db/database';
import { importPaths } from '../src/fhir/import';
import type { QueryParams } from '../src/fhir/search/parse';
import { readVersion, searchResources } from '../src/fhir/store';
import { parseSearch } from '../src/fhir/search/parse';
import type { FhirService } from '../src/fhir/service';
import { startPont, type RunningPont } from '../src/server';
import { createScratchDatabase } from '../test/harness';
import { BENCH_SCOPES, FHIR_PATH, deepPagePaths, grantFullRecordConsents, importCommand, patientCodePaths, patientIds, prepareDataset, readByIdPaths, repoRoot, take, tokenOf, type Dataset } from './fhir-data';
import { load as runLoad, type LoadRequest, type LoadSpec } from './load-client';
import { runConcurrently, stats } from './stats';

// ------------------------------------------------------------------------------------------ options

type BackendName = 'pglite' | 'postgres';

interface Options {
  backends: BackendName[];
  resources: number;
  requests: number;
  concurrency: number;
  seconds: number;
  importConcurrency?: number;
  samples: string;
  analyze: boolean;
  keep: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      backend: { type: 'string', default: 'both' },
      resources: { type: 'string', default: '500000' },
      requests: { type: 'string', default: '300' },
      concurrency: { type: 'string', default: '4' },
      seconds: { type: 'string', default: '5' },
      'import-concurrency': { type: 'string' },
      samples: { type: 'string', default: join(repoRoot, 'samples', 'synthea-r4-50-patients.tar.gz') },
      'no-analyze': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(readFileSync(fileURLToPath(import.meta.url), 'utf8').split('*/')[0]!.replace(/^\/\*\*\n/, '').replace(/^ \* ?/gm, ''));
    process.exit(0);
  }
  const positive = (name: string, text: string): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got "${text}"`);
    return n;
  };
  const backend = values.backend;
  if (backend !== 'pglite' && backend !== 'postgres' && backend !== 'both') throw new Error(`--backend must be pglite, postgres or both, got "${backend}"`);
  let samples = resolve(values.samples);
  if (existsSync(samples) && statSync(samples).isDirectory()) samples = join(samples, 'synthea-r4-50-patients.tar.gz');
  if (!existsSync(samples)) throw new Error(`Sample patients not found at ${samples} (use --samples PATH)`);
  return {
    backends: backend === 'both' ? ['postgres', 'pglite'] : [backend],
    resources: positive('resources', values.resources),
    requests: positive('requests', values.requests),
    concurrency: positive('concurrency', values.concurrency),
    seconds: positive('seconds', values.seconds),
    importConcurrency: values['import-concurrency'] === undefined ? undefined : positive('import-concurrency', values['import-concurrency']),
    samples,
    analyze: !values['no-analyze'],
    keep: values.keep,
  };
}

// ------------------------------------------------------------------------------------------ data

// ------------------------------------------------------------------------------------------ measuring

/** Runs `fn` over `items` with `concurrency` workers; per-item milliseconds and the overall rate. */
function measure<T>(items: T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<{ ms: number[]; perSecond: number }> {
  let next = 0;
  return runConcurrently(items.length, concurrency, async () => {
    const item = items[next++]!;
    const t = performance.now();
    await fn(item);
    return performance.now() - t;
  });
}

/** A Queryable that runs through `db` and records every statement (the floor replays them). */
function recording(db: Database, log: Array<[string, unknown[]]>): Queryable {
  return {
    query: (sql, params) => {
      log.push([sql, params ? [...params] : []]);
      return db.query(sql, params);
    },
    exec: (sql) => db.exec(sql),
  };
}

/**
 * Counts the statements run on `db` (a transaction counts as one) until stop(): the server's
 * services share this object, so its own queries are counted too.
 */
function countStatements(db: Database): { stop(): number } {
  const { query, transaction } = db;
  let n = 0;
  const target = db as { -readonly [K in keyof Database]: Database[K] };
  target.query = <T>(sql: string, params?: readonly unknown[]) => (n++, query.call<Database, [string, (readonly unknown[])?], Promise<QueryResult<T>>>(db, sql, params));
  target.transaction = <T>(fn: (tx: Queryable) => Promise<T>) => (n++, transaction.call<Database, [(tx: Queryable) => Promise<T>], Promise<T>>(db, fn));
  return {
    stop() {
      target.query = query;
      target.transaction = transaction;
      return n;
    },
  };
}

/** `/api/fhir/R4/Type?a=1&a=2` (or an absolute next link) -> type, id, query as koa would give it. */
function parseFhirPath(path: string): { type: string; id?: string; query: QueryParams; querystring: string } {
  const url = new URL(path, 'http://x');
  const rest = url.pathname.slice(url.pathname.indexOf(FHIR_PATH) + FHIR_PATH.length + 1).split('/');
  const query: QueryParams = {};
  for (const [k, v] of url.searchParams) {
    const prev = query[k];
    query[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return { type: rest[0]!, id: rest[1], query, querystring: url.search.slice(1) };
}

/**
 * fetch, with one retry when a kept-alive connection was closed by the server just as the request
 * went out (the server closes idle connections after 5 s; a busy event loop can lose that race).
 * Such retries are counted and reported; any other network error stops the benchmark.
 */
let networkRetries = 0;
async function httpGet(url: string, headers: Record<string, string>): Promise<Response> {
  try {
    return await fetch(url, { headers });
  } catch (err) {
    const code = (err as { cause?: { code?: string } }).cause?.code;
    if (code !== 'ECONNRESET' && code !== 'UND_ERR_SOCKET') throw new Error(`GET ${url}: ${(err as Error).message} (${String((err as { cause?: unknown }).cause)})`);
    networkRetries++;
    return fetch(url, { headers });
  }
}

interface Workload {
  name: string;
  example: string;
  /** Paths under the server's base URL, one per request. */
  paths: string[];
}

interface QueryFigures {
  name: string;
  example: string;
  requests: number;
  /** Mean resources per response (matches; plus included for _include). */
  meanMatches: number;
  meanIncluded: number;
  /** Latency with one connection; requests/s at 1, 8 and 32 connections; SQL statements the server ran per request. */
  http: { p50: number; p95: number; perSecondAt: PerSecondAt; statementsPerRequest: number };
  /** The store's own statements for each request, replayed on the Database one after another. */
  floor: { statementsPerRequest: number; p50: number; p95: number; perSecond: number };
  /** HTTP p50 beyond the bare stack's p50 plus the floor's p50: what Pont itself adds. */
  overheadP50: number;
  ratioP50: number;
  ratioP95: number;
}

/** Connections of the throughput phases. */
const CONNECTIONS = [1, 8, 32] as const;
type PerSecondAt = Record<`${(typeof CONNECTIONS)[number]}`, number>;

/** Largest resident set of this process (the server runs in it) seen while load ran. */
let peakRss = 0;

const sampleRss = () => (peakRss = Math.max(peakRss, process.memoryUsage().rss));
const load = (spec: LoadSpec) => runLoad(spec, sampleRss);

/** Latency with one connection over `paths` (after a warm-up), then requests/s at each of CONNECTIONS for `seconds`. */
async function httpFigures(pont: RunningPont, paths: string[], headers: Record<string, string>, seconds: number) {
  const spec = { url: pont.url, paths, headers };
  await load({ ...spec, connections: 1, amount: Math.max(10, Math.ceil(paths.length / 10)) });
  const latency = await load({ ...spec, connections: 1, amount: paths.length });
  const perSecondAt = {} as PerSecondAt;
  for (const c of CONNECTIONS) perSecondAt[c] = (await load({ ...spec, connections: c, seconds })).perSecond;
  return { p50: latency.p50, p95: latency.p95, perSecondAt };
}

type StackFigures = Awaited<ReturnType<typeof httpFigures>>;

/** The HTTP stack alone: GET /healthz (no authentication, no SQL), with the same load generator. */
function httpStackOnly(pont: RunningPont, n: number, seconds: number): Promise<StackFigures> {
  return httpFigures(pont, Array.from({ length: n }, () => '/healthz'), {}, seconds);
}

/** The access rule the server applies to `client` on FHIR routes: the floor runs the same SQL the request does. */
function policyOf(client: ClientRecord): AccessPolicy {
  return accessPolicyFor({ kind: 'client', clientId: client.client_id, organizationId: client.organization_id, scopes: client.scopes, allPatients: client.all_patients }, 'fhir');
}

async function runWorkload(pont: RunningPont, headers: Record<string, string>, policy: AccessPolicy, w: Workload, stack: StackFigures, seconds: number): Promise<QueryFigures> {
  const { fhir, db } = pont.services;
  // Results per response, counted once outside the timed runs.
  let matches = 0;
  let included = 0;
  for (const path of w.paths) {
    const res = await httpGet(pont.url + path, headers);
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${w.name}: GET ${path} -> ${res.status} ${text.slice(0, 300)}`);
    const body = JSON.parse(text) as { resourceType: string; entry?: Array<{ search?: { mode?: string } }> };
    if (body.resourceType !== 'Bundle') matches++;
    else for (const e of body.entry ?? []) e.search?.mode === 'include' ? included++ : matches++;
  }
  const counted = countStatements(db);
  const latency = await load({ url: pont.url, paths: w.paths, headers, connections: 1, amount: w.paths.length });
  const serverStatements = counted.stop();
  const http = await httpFigures(pont, w.paths, headers, seconds);

  // The floor: the statements the store runs for each request, recorded once, replayed on the Database.
  const statements: Array<Array<[string, unknown[]]>> = [];
  for (const path of w.paths) {
    const log: Array<[string, unknown[]]> = [];
    const tx = recording(db, log);
    const { type, id, query, querystring } = parseFhirPath(path);
    if (id !== undefined) await readVersion(tx, type, id, policy.rowFilter);
    else await searchResources(tx, fhir.baseUrl, parseSearch(type, query, fhir.baseUrl), query, policy, { selfQuery: querystring });
    statements.push(log);
  }
  const replay = async (log: Array<[string, unknown[]]>) => {
    for (const [sql, params] of log) await db.query(sql, params);
  };
  await measure(statements.slice(0, 10), 1, replay);
  const floorSeq = await measure(statements, 1, replay);

  const f = stats(floorSeq.ms);
  return {
    name: w.name,
    example: w.example,
    requests: w.paths.length,
    meanMatches: matches / w.paths.length,
    meanIncluded: included / w.paths.length,
    http: { p50: http.p50, p95: http.p95, perSecondAt: http.perSecondAt, statementsPerRequest: serverStatements / latency.requests },
    floor: { statementsPerRequest: statements.reduce((s, l) => s + l.length, 0) / statements.length, p50: f.p50, p95: f.p95, perSecond: floorSeq.perSecond },
    overheadP50: http.p50 - (stack.p50 + f.p50),
    ratioP50: http.p50 / f.p50,
    ratioP95: http.p95 / f.p95,
  };
}

/**
 * Samples come from the loaded data, ordered by a hash of the ids (not by insertion order), so both
 * backends get the same requests for the same data.
 */
async function workloads(pont: RunningPont, headers: Record<string, string>, n: number): Promise<Workload[]> {
  const db = pont.services.db;
  const ids = await patientIds(db, n);
  const base = FHIR_PATH;

  const deep = await deepPagePaths((path) => httpGet(pont.url + path, headers), n);

  const q = (s: string) => encodeURIComponent(s);
  return [
    {
      name: 'read by id',
      example: 'GET /{type}/{id}',
      paths: await readByIdPaths(db, n),
    },
    {
      name: 'patient + code',
      example: 'Observation?subject=Patient/X&code=http://loinc.org|NNNN-N',
      paths: await patientCodePaths(db, n),
    },
    {
      name: 'patient + date range',
      example: 'Observation?subject=Patient/X&date=ge2015-01-01&date=lt2018-01-01',
      paths: take(ids, n).map((id) => `${base}/Observation?subject=${q(`Patient/${id}`)}&date=ge2015-01-01&date=lt2018-01-01`),
    },
    {
      name: '_include',
      example: 'Encounter?subject=Patient/X&_include=Encounter:participant',
      paths: take(ids, n).map((id) => `${base}/Encounter?subject=${q(`Patient/${id}`)}&_include=Encounter:participant`),
    },
    {
      name: 'deep page (21+)',
      example: 'Observation?_count=50, next link of page 20, 21, ...',
      paths: deep,
    },
  ];
}

// ------------------------------------------------------------------------------------------ the policy's own cost

interface PolicyCost {
  name: string;
  rounds: number;
  /** Medians over the rounds of each client's p50 (ms). */
  organisation: number;
  operator: number;
  /** The median over the rounds of organisation p50 / operator p50, less 1. */
  cost: number;
  /** Each round's organisation p50 / operator p50. */
  ratios: number[];
}
const POLICY_ROUNDS = 8;

/**
 * The access policy's own cost on a read by id and a patient + code search: the same requests by the integrator
 * (an organisation with consents: the rule on every row) and by an operator client (no rule), one connection, in
 * turn for POLICY_ROUNDS rounds (each round's first client alternating); the cost is the median of the rounds' ratios
 * of the two p50s, each ratio of two blocks a second apart. Measured apart, minutes away from each other, the two
 * differed by the machine's drift more than by the rule (±20% either way on a shared machine); three rounds of
 * 300 requests, their medians compared, still moved by ±10% between runs of the same tree (stop 61).
 */
async function policyCosts(pont: RunningPont, sets: Workload[], organisation: Record<string, string>, operator: Record<string, string>): Promise<PolicyCost[]> {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const out: PolicyCost[] = [];
  for (const w of sets.filter((w) => w.name === 'read by id' || w.name === 'patient + code')) {
    const p50s = { organisation: [] as number[], operator: [] as number[] };
    const amount = Math.ceil(w.paths.length / 2);
    for (let round = 0; round < POLICY_ROUNDS; round++) {
      const clients = [['organisation', organisation], ['operator', operator]] as const;
      for (const [who, headers] of round % 2 ? [...clients].reverse() : clients)
        p50s[who].push((await load({ url: pont.url, paths: w.paths, headers, connections: 1, amount })).p50);
    }
    const ratios = p50s.organisation.map((o, i) => o / p50s.operator[i]!);
    out.push({ name: w.name, rounds: POLICY_ROUNDS, organisation: median(p50s.organisation), operator: median(p50s.operator), cost: median(ratios) - 1, ratios: ratios.map((r) => Number(r.toFixed(3))) });
  }
  return out;
}

// ------------------------------------------------------------------------------------------ SDK and Connect records

interface Latency {
  requests: number;
  p50: number;
  p95: number;
  perSecondSequential: number;
  perSecond: number;
}

interface SdkFigures {
  /** GET /api/v1/connect/patient/{health_id}/records (type=all, limit 100): mean records per answer. */
  records: Latency & { meanRecords: number };
  /** Its FHIR equivalent: one patient-compartment search of the same size (Observation?patient=…&_sort=-date&_count=100). */
  compartment: Latency & { meanMatches: number };
  summary: Latency;
  /** POST /api/v1/sdk/records/lab-results, each with a new Idempotency-Key (Observation + DiagnosticReport); req/s at 8. */
  push: Latency;
  /** Its FHIR equivalent: POST /api/fhir/R4/Observation of the same result; req/s at 8. */
  fhirCreate: Latency;
  /** The same pushes sent again with their keys: stored answers replayed. */
  replay: Latency;
  /** GET /api/v1/connect/pharmacy/stock (the first page of the network's stock). */
  stock: Latency;
  /** GET /api/v1/connect/patient/{health_id}/consent. */
  consentStatus: Latency;
}

/** Clients of the write-rate runs (issue 41: the pushes' rate at 8 connections against FHIR creates'). */
const WRITE_CONCURRENCY = 8;

/**
 * Latency of `n` requests over one connection, then requests/s of `n` more over `concurrency`, from the load generator
 * in its own process as the FHIR queries are measured (after a warm-up of 10). `make(i)`: the i-th request, each
 * sent once (pushes carry keys of their own).
 */
async function loadFigures(pont: RunningPont, headers: Record<string, string>, n: number, concurrency: number, make: (i: number) => LoadRequest, expectStatus = 200): Promise<Latency> {
  const requests = (from: number, count: number) => Array.from({ length: count }, (_, i) => make(from + i));
  const spec = { url: pont.url, paths: [], headers, expectStatus };
  await load({ ...spec, requests: requests(2 * n, 10), connections: 1, amount: 10 });
  const seq = await load({ ...spec, requests: requests(0, n), connections: 1, amount: n });
  const conc = await load({ ...spec, requests: requests(n, n), connections: concurrency, amount: n });
  return { requests: n, p50: seq.p50, p95: seq.p95, perSecondSequential: seq.perSecond, perSecond: conc.perSecond };
}

/** The Connect and SDK paths, each beside its FHIR equivalent, measured in turn in the same run. */
async function sdkFigures(pont: RunningPont, db: Queryable, headers: Record<string, string>, healthIds: string[], n: number, concurrency: number): Promise<SdkFigures> {
  const hid = (i: number) => healthIds[i % healthIds.length]!;
  const patientOf = new Map((await db.query<{ health_id: string; patient_id: string }>('SELECT health_id, patient_id FROM health_ids WHERE patient_id IS NOT NULL')).rows.map((r) => [r.health_id, r.patient_id]));
  const get = (path: string): LoadRequest => ({ method: 'GET', path });
  const post = (path: string, body: unknown, extra: Record<string, string> = {}): LoadRequest => ({ method: 'POST', path, body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...extra } });
  const figures = (make: (i: number) => LoadRequest, expectStatus = 200, clients = concurrency) => loadFigures(pont, headers, n, clients, make, expectStatus);

  const recordsOf = (i: number) => get(`/api/v1/connect/patient/${hid(i)}/records?type=all&limit=100`);
  const compartmentOf = (i: number) => get(`${FHIR_PATH}/Observation?patient=${patientOf.get(hid(i))}&_sort=-date&_count=100`);
  // What the answers hold, counted once outside the timed runs.
  let records = 0;
  let matches = 0;
  const sampled = Math.min(n, 50);
  for (let i = 0; i < sampled; i++) {
    const body = (await (await httpGet(`${pont.url}${recordsOf(i).path}`, headers)).json()) as { records: Record<string, unknown[]> };
    records += Object.values(body.records).reduce((s, l) => s + l.length, 0);
    const bundle = (await (await httpGet(`${pont.url}${compartmentOf(i).path}`, headers)).json()) as { entry?: Array<{ search?: { mode?: string } }> };
    matches += (bundle.entry ?? []).filter((e) => e.search?.mode === 'match').length;
  }
  const value = (i: number) => 10 + (i % 50) / 10;
  const push = (i: number) =>
    post('/api/v1/sdk/records/lab-results', { health_id: hid(i), test_name: 'Hemoglobin', loinc_code: '718-7', result_value: String(value(i)), unit: 'g/dL', flagged: false }, { 'idempotency-key': `bench-${i}` });
  const observation = (i: number) => ({
    resourceType: 'Observation',
    status: 'final',
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] }],
    code: { coding: [{ system: 'http://loinc.org', code: '718-7', display: 'Hemoglobin [Mass/volume] in Blood' }], text: 'Hemoglobin' },
    subject: { reference: `Patient/${patientOf.get(hid(i))}` },
    effectiveDateTime: new Date().toISOString(),
    valueQuantity: { value: value(i), unit: 'g/dL', system: 'http://unitsofmeasure.org', code: 'g/dL' },
    interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'N' }] }],
  });
  const result: SdkFigures = {
    records: { ...(await figures(recordsOf)), meanRecords: records / sampled },
    compartment: { ...(await figures(compartmentOf)), meanMatches: matches / sampled },
    summary: await figures((i) => get(`/api/v1/sdk/patients/${hid(i)}/summary`)),
    push: await figures(push, 201, WRITE_CONCURRENCY),
    fhirCreate: await figures((i) => ({ ...post(`${FHIR_PATH}/Observation`, observation(i)), headers: { 'content-type': 'application/fhir+json' } }), 201, WRITE_CONCURRENCY),
    // The same keys again: the stored answers, replayed.
    replay: await figures(push, 201),
    stock: await figures(() => get('/api/v1/connect/pharmacy/stock')),
    consentStatus: await figures((i) => get(`/api/v1/connect/patient/${hid(i)}/consent`)),
  };
  const replayed = await fetch(`${pont.url}${push(0).path}`, { method: 'POST', headers: { ...headers, ...push(0).headers }, body: push(0).body });
  if (replayed.headers.get('idempotent-replayed') !== 'true') throw new Error(`a push sent again was not replayed: ${replayed.status} ${await replayed.text()}`);
  return result;
}

// ------------------------------------------------------------------------------------------ one backend

interface BackendResult {
  backend: BackendName;
  startedAt: string;
  node: string;
  /** The code measured: commit, and files of src/ that differed from it. */
  code: { commit: string; uncommitted: string[] };
  dataset: { entries: number; copies: number; files: number; bundlesPerCopy: number; orgsAndPractitioners: 'copied per copy' };
  import: { resources: number; seconds: number; perSecond: number; concurrency: number; failures: number; firstFailures: string[] };
  stored: { resources: number; byType: Record<string, number>; databaseBytes: number; dataDirBytes?: number };
  analyze: boolean;
  concurrency: number;
  /** Seconds of each throughput run. */
  seconds: number;
  /** Requests sent again after the server closed an idle kept-alive connection under them. */
  networkRetries: number;
  /** GET /healthz: what HTTP and koa cost without authentication or SQL. */
  httpStackOnly: StackFigures;
  queries: QueryFigures[];
  /** The organisation's and the operator's latency of the same requests, measured in turn (policyCosts). */
  policyCost: PolicyCost[];
  /** Issue 13's targets, met or not (they are set for PostgreSQL at >= 500k resources). */
  targets: Array<{ target: string; value: string; met: boolean }>;
  /** Resident set of the process that runs the server (MiB): after the import, and the largest seen under load. */
  serverRssMiB: { afterImport: number; peakUnderLoad: number };
  sdk: SdkFigures;
}

function dirBytes(path: string): number {
  let total = 0;
  for (const name of readdirSync(path)) {
    const p = join(path, name);
    const s = statSync(p);
    total += s.isDirectory() ? dirBytes(p) : s.size;
  }
  return total;
}

const log = (msg: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

async function runBackend(backend: BackendName, options: Options, data: Dataset, scratchDir: string): Promise<BackendResult> {
  const startedAt = new Date().toISOString();
  const env: Record<string, string> = {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'error',
    // The benchmark client makes thousands of requests a minute: lift the per-client limits (the
    // limiter still counts every request in the database, as in production).
    PONT_RATE_LIMITS: 'default=999999999/60,fhir=999999999/60',
  };
  const scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
  if (scratch) onInterrupt.add(scratch.drop);
  const dataDir = join(scratchDir, `pglite-${Date.now()}`);
  if (scratch) env.DATABASE_URL = scratch.url;
  else env.PONT_DATA_DIR = dataDir;
  const config = loadConfig(env);
  let pont: RunningPont | undefined;
  try {
    pont = await startPont(config);
    const { db, fhir } = pont.services;
    log(`${backend}: server at ${pont.url}; importing ${data.entries.toLocaleString('en')} entries from ${data.files} bundles`);

    const concurrency = options.importConcurrency ?? (backend === 'postgres' ? 2 : 1);
    // On PostgreSQL the import is `pont import` in a process of its own, as an operator runs it: the server's
    // memory is then the server's. The embedded database belongs to this process: it imports here.
    const summary = scratch ? await importCommand(scratch.url, data.dir, concurrency) : await importWithProgress(fhir, data.dir, concurrency, backend);
    log(`${backend}: imported ${summary.resources.toLocaleString('en')} in ${summary.seconds.toFixed(1)} s`);
    if (summary.failures.length) log(`${backend}: ${summary.failures.length} failures, first: ${summary.failures[0]!.file}: ${summary.failures[0]!.message}`);
    if (options.analyze) {
      const t = performance.now();
      await db.exec('ANALYZE');
      log(`${backend}: ANALYZE in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    }

    const types = await db.query<{ resource_type: string; n: number }>(
      'SELECT resource_type, count(*)::int AS n FROM fhir_resources WHERE NOT deleted GROUP BY 1 ORDER BY 2 DESC',
    );
    const size = await db.query<{ bytes: string }>('SELECT pg_database_size(current_database())::text AS bytes');

    // An integrator's client, reading under the access rule: every patient has granted its organisation a
    // full-record consent (the rule still runs on every row: each is checked against the consent index).
    const client = await createClient(db, { name: 'bench', organizationId: 'org-bench', scopes: [...BENCH_SCOPES] });
    const headers = { authorization: `Bearer ${await tokenOf(pont.url, client)}`, accept: 'application/fhir+json' };
    const t = performance.now();
    const healthIds = await grantFullRecordConsents(pont.url, headers, db);
    log(`${backend}: ${healthIds.length} consents granted in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    // What autovacuum does on PostgreSQL after that many inserts (and PGlite, which has none, never needs: its
    // statistics stay unset, estimated from the table's size): without it the planner would plan the consent rule
    // for an empty consent table, the statistics of the ANALYZE run above.
    if (options.analyze) await db.exec('ANALYZE consent_access');

    // The consent rule's own cost: the same reads by an operator client with all-patient access (no rule).
    const operator = await createClient(db, { name: 'bench-operator', organizationId: 'org-bench', scopes: ['fhir:read'], allPatients: true });
    const operatorHeaders = { authorization: `Bearer ${await tokenOf(pont.url, operator)}`, accept: 'application/fhir+json' };

    const queries: QueryFigures[] = [];
    networkRetries = 0;
    const rssAfterImport = process.memoryUsage().rss;
    peakRss = 0;
    log(`${backend}: GET /healthz`);
    const stackOnly = await httpStackOnly(pont, options.requests, options.seconds);
    const sets = await workloads(pont, headers, options.requests);
    for (const w of sets) {
      log(`${backend}: ${w.name} (${w.paths.length} requests)`);
      queries.push(await runWorkload(pont, headers, policyOf(client), w, stackOnly, options.seconds));
    }
    for (const w of sets.filter((w) => w.name === 'read by id' || w.name === 'patient + code')) {
      const name = `${w.name}, no consent rule`;
      log(`${backend}: ${name}`);
      queries.push(await runWorkload(pont, operatorHeaders, policyOf(operator), { ...w, name, example: `${w.example} (all-patients client)` }, stackOnly, options.seconds));
    }
    log(`${backend}: the policy's own cost (organisation and operator in turn)`);
    const policyCost = await policyCosts(pont, sets, headers, operatorHeaders);
    log(`${backend}: SDK (records, summary, pushes)`);
    const sdk = await sdkFigures(pont, db, headers, healthIds, options.requests, options.concurrency);
    const result: Omit<BackendResult, 'targets'> = {
      backend,
      startedAt,
      node: process.version,
      code,
      dataset: { entries: data.entries, copies: data.copies, files: data.files, bundlesPerCopy: data.bundlesPerCopy, orgsAndPractitioners: 'copied per copy' },
      import: {
        resources: summary.resources,
        seconds: summary.seconds,
        perSecond: summary.resources / summary.seconds,
        concurrency,
        failures: summary.failures.length,
        firstFailures: summary.failures.slice(0, 5).map((f) => `${f.file}: ${f.message}`),
      },
      stored: {
        resources: types.rows.reduce((s, r) => s + r.n, 0),
        byType: Object.fromEntries(types.rows.map((r) => [r.resource_type, r.n])),
        databaseBytes: Number(size.rows[0]!.bytes),
        ...(scratch ? {} : { dataDirBytes: dirBytes(dataDir) }),
      },
      analyze: options.analyze,
      concurrency: options.concurrency,
      seconds: options.seconds,
      networkRetries,
      httpStackOnly: stackOnly,
      serverRssMiB: { afterImport: rssAfterImport / 2 ** 20, peakUnderLoad: peakRss / 2 ** 20 },
      queries,
      policyCost,
      sdk,
    };
    return { ...result, targets: targets(result) };
  } finally {
    await pont?.close();
    await scratch?.drop();
    if (scratch) onInterrupt.delete(scratch.drop);
    if (!options.keep) rmSync(dataDir, { recursive: true, force: true });
  }
}

async function importWithProgress(fhir: FhirService, dir: string, concurrency: number, backend: BackendName) {
  const started = performance.now();
  let last = started;
  return importPaths(fhir, [dir], {
    concurrency,
    onProgress: (p) => {
      const now = performance.now();
      if (now - last < 15_000) return;
      last = now;
      const rate = p.resources / ((now - started) / 1000);
      log(`${backend}: import ${p.filesDone}/${p.filesTotal} bundles, ${p.resources.toLocaleString('en')} resources, ${Math.round(rate)}/s, ${p.failures.length} failed`);
    },
  });
}

// ------------------------------------------------------------------------------------------ report

const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const int = (v: number) => Math.round(v).toLocaleString('en');

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')).join('\n');
}

const perSecondCells = (at: PerSecondAt) => CONNECTIONS.map((c) => int(at[c]));

/**
 * Issue 41's targets, checked on one run's figures: each in units of the bare stack's p50 (GET /healthz) or as a
 * ratio to its FHIR equivalent measured in the same run, so that the machine's speed cancels out.
 */
function targets(r: Omit<BackendResult, 'targets'>): Array<{ target: string; value: string; met: boolean }> {
  const stack = r.httpStackOnly;
  const unit = stack.p50;
  const q = (name: string) => r.queries.find((x) => x.name === name)!;
  const read = q('read by id');
  const share = read.http.perSecondAt['32'] / stack.perSecondAt['32'];
  const ratio = (a: number, b: number) => `${(a / b).toFixed(2)} x (${ms(a)} / ${ms(b)} ms)`;
  const out = [
    { target: 'read by id: overhead beyond stack + SQL floor <= 2 stack units at p50', value: `${(read.overheadP50 / unit).toFixed(2)} units (${ms(read.overheadP50)} ms)`, met: read.overheadP50 <= 2 * unit },
    { target: 'read by id: req/s at 32 connections >= 50% of GET /healthz', value: `${(share * 100).toFixed(1)}%`, met: share >= 0.5 },
  ];
  for (const p of r.policyCost) {
    out.push({ target: `${p.name}: the policy's own cost (organisation vs operator client, in turn) <= 5%`, value: `${(p.cost * 100).toFixed(1)}% (median of ${p.rounds} rounds' ratios; p50s ${ms(p.organisation)} vs ${ms(p.operator)} ms)`, met: p.cost <= 0.05 });
  }
  for (const name of ['patient + code', 'patient + date range', '_include', 'deep page (21+)']) {
    const s = q(name);
    const bound = 1.5 * (unit + s.floor.p50) + 2 * unit;
    out.push({ target: `${name}: HTTP p50 <= 1.5 x (stack + floor) + 2 stack units`, value: `${ms(s.http.p50)} <= ${ms(bound)} ms`, met: s.http.p50 <= bound });
  }
  const importShare = r.import.perSecond / stack.perSecondAt['1'];
  out.push({ target: "import >= 0.76 x the stack's 1-connection rate", value: `${importShare.toFixed(2)} (${int(r.import.perSecond)}/s vs ${int(stack.perSecondAt['1'])}/s)`, met: importShare >= 0.76 });
  // Issue 41 item 3: the records and the summary against one patient-compartment FHIR search of the same size
  // (Observation?patient&_sort=-date&_count=100); beside it, the ratio to a patient + code search (the issue's table).
  const compartment = r.sdk.compartment.p50;
  const patientCode = q('patient + code').http.p50;
  const against = (p50: number) => `${ratio(p50, compartment)}; ${(p50 / patientCode).toFixed(2)} x patient + code`;
  out.push({ target: 'Connect records type=all p50 <= 3 x a patient-compartment search', value: against(r.sdk.records.p50), met: r.sdk.records.p50 <= 3 * compartment });
  out.push({ target: 'SDK summary p50 <= 2 x a patient-compartment search', value: against(r.sdk.summary.p50), met: r.sdk.summary.p50 <= 2 * compartment });
  out.push({ target: 'SDK lab push p50 <= 2 x FHIR POST Observation', value: ratio(r.sdk.push.p50, r.sdk.fhirCreate.p50), met: r.sdk.push.p50 <= 2 * r.sdk.fhirCreate.p50 });
  const pushRate = r.sdk.push.perSecond / r.sdk.fhirCreate.perSecond;
  out.push({ target: `SDK lab pushes/s at ${WRITE_CONCURRENCY} connections >= 40% of FHIR creates'`, value: `${(pushRate * 100).toFixed(0)}% (${int(r.sdk.push.perSecond)} vs ${int(r.sdk.fhirCreate.perSecond)}/s)`, met: pushRate >= 0.4 });
  out.push({ target: 'server RSS under load <= 500 MiB', value: `${r.serverRssMiB.peakUnderLoad.toFixed(0)} MiB`, met: r.serverRssMiB.peakUnderLoad <= 500 });
  return out;
}

function report(r: BackendResult): string {
  const lines = [
    `== Pont FHIR benchmark: ${r.backend} (node ${r.node}, ${r.startedAt}, commit ${r.code.commit}${r.code.uncommitted.length ? ` + uncommitted ${r.code.uncommitted.join(' ')}` : ''})`,
    `data    ${int(r.dataset.entries)} bundle entries = ${r.dataset.copies} cop${r.dataset.copies === 1 ? 'y' : 'ies'} of the 50 Synthea patients (new ids per copy, Organization/Practitioner copied too)`,
    `stored  ${int(r.stored.resources)} distinct resources, database ${(r.stored.databaseBytes / 2 ** 20).toFixed(0)} MiB${r.stored.dataDirBytes !== undefined ? `, data dir ${(r.stored.dataDirBytes / 2 ** 20).toFixed(0)} MiB` : ''}`,
    `import  ${int(r.import.resources)} resources in ${r.import.seconds.toFixed(1)} s = ${int(r.import.perSecond)} resources/s (${r.import.concurrency} bundle${r.import.concurrency === 1 ? '' : 's'} at a time, ${r.import.failures} failures)`,
    `queries ${r.queries[0]?.requests ?? 0} requests each; latency with 1 connection; req/s at 1, 8 and 32 connections (autocannon in its own process, ${r.seconds} s each); floor = the store's own SQL statements replayed on the Database${r.analyze ? '; after ANALYZE' : ''}`,
    `server  RSS ${r.serverRssMiB.afterImport.toFixed(0)} MiB after the import, at most ${r.serverRssMiB.peakUnderLoad.toFixed(0)} MiB under load`,
    '',
    table([
      ['query', 'results', 'HTTP p50', 'p95', 'req/s 1', 'req/s 8', 'req/s 32', 'stmts', 'SQL p50', 'p95', 'stmts', 'overhead p50', 'x p50'],
      ['GET /healthz (no auth, no SQL)', '', `${ms(r.httpStackOnly.p50)} ms`, `${ms(r.httpStackOnly.p95)} ms`, ...perSecondCells(r.httpStackOnly.perSecondAt), '0', '', '', '', '', ''],
      ...r.queries.map((q) => [
        q.name,
        q.meanIncluded ? `${q.meanMatches.toFixed(1)}+${q.meanIncluded.toFixed(1)}` : q.meanMatches.toFixed(1),
        `${ms(q.http.p50)} ms`,
        `${ms(q.http.p95)} ms`,
        ...perSecondCells(q.http.perSecondAt),
        q.http.statementsPerRequest.toFixed(1),
        `${ms(q.floor.p50)} ms`,
        `${ms(q.floor.p95)} ms`,
        q.floor.statementsPerRequest.toFixed(1),
        `${ms(q.overheadP50)} ms`,
        q.ratioP50.toFixed(1),
      ]),
    ]),
    '',
    `Connect and SDK beside their FHIR equivalents (${r.sdk.records.requests} requests each, health IDs drawn in turn; latency with 1 client, req/s with 1 and ${r.concurrency} clients, ${WRITE_CONCURRENCY} for writes)`,
    table([
      ['request', 'p50', 'p95', 'req/s 1', 'req/s n', 'stack units'],
      ...([
        [`records type=all limit=100 (${r.sdk.records.meanRecords.toFixed(0)} records)`, r.sdk.records],
        [`  FHIR: Observation?patient&_sort=-date&_count=100 (${r.sdk.compartment.meanMatches.toFixed(0)} matches)`, r.sdk.compartment],
        ['SDK summary', r.sdk.summary],
        ['push lab result, new Idempotency-Key', r.sdk.push],
        ['  FHIR: POST Observation', r.sdk.fhirCreate],
        ['the same push again (replayed)', r.sdk.replay],
        ['pharmacy stock, first page', r.sdk.stock],
        ['consent status', r.sdk.consentStatus],
      ] as const).map(([name, l]) => [name, `${ms(l.p50)} ms`, `${ms(l.p95)} ms`, int(l.perSecondSequential), int(l.perSecond), (l.p50 / r.httpStackOnly.p50).toFixed(1)]),
    ]),
    '',
    "targets (issue 41; judged at 50,000 resources on PostgreSQL, in stack units or against the FHIR equivalent of the same run):",
    ...r.targets.map((t) => `  ${t.met ? 'met    ' : 'NOT MET'}  ${t.target}: ${t.value}`),
    '',
    'results: resources per response (matches+included); stmts: SQL statements per request (HTTP: all the server ran, auth and rate limit included; floor: the store\'s); overhead: HTTP p50 - (GET /healthz p50 + SQL p50); x: HTTP p50 / SQL p50',
    ...(r.networkRetries ? [`${r.networkRetries} requests were sent again after the server closed an idle connection under them`] : []),
  ];
  return lines.join('\n');
}

// ------------------------------------------------------------------------------------------ main

/** Clean-up to run when the benchmark is interrupted (scratch databases to drop). */
const onInterrupt = new Set<() => Promise<void>>();

/** Read at start: what is measured is what was loaded then, whatever happens to the files later. */
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
let code: { commit: string; uncommitted: string[] } = { commit: 'unknown', uncommitted: [] };

async function main(): Promise<void> {
  code = codeVersion();
  const options = parseOptions(process.argv.slice(2));
  const scratchDir = mkdtempSync(join(tmpdir(), 'pont-bench-'));
  // Ctrl-C must not leave gigabytes of bundles and data files, or a scratch database, behind.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: cleaning up`);
      // Dropping the scratch database ends the server's connections under it: errors from those are expected now.
      process.on('uncaughtException', () => undefined);
      if (!options.keep) rmSync(scratchDir, { recursive: true, force: true });
      void Promise.allSettled([...onInterrupt].map((f) => f())).then(() => process.exit(130));
    });
  }
  const resultsDir = join(repoRoot, 'bench', 'results');
  mkdirSync(resultsDir, { recursive: true });
  try {
    log(`preparing ${options.resources.toLocaleString('en')} resources from ${options.samples} in ${scratchDir}`);
    const data = prepareDataset(options.samples, options.resources, scratchDir);
    log(`${data.files} bundles, ${data.entries.toLocaleString('en')} entries, ${data.copies} copies`);
    for (const backend of options.backends) {
      const result = await runBackend(backend, options, data, scratchDir);
      const file = join(resultsDir, `fhir-${backend}.json`);
      writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
      console.log(`${report(result)}\nwritten to ${file}\n`);
    }
  } finally {
    if (options.keep) log(`kept ${scratchDir}`);
    else rmSync(scratchDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exit(1);
});
