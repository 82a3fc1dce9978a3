/**
 * Terminology benchmark (issue 46, item 6; docs/benchmarks.md "Terminology"), on PostgreSQL:
 * 1. writes a generated SNOMED-like release in RF2 (`--concepts`, default 300,000: levels of about 3 children each,
 *    depth 12, 15% of concepts with a second parent on the level above: a polyhierarchy) and loads it with
 *    `pont terminology load` as a process of its own, timed, its peak memory (RSS) measured;
 * 2. loads a value set of the concepts under one with about 10,000 descendants (is-a);
 * 3. writes `--observations` Observations (default 500,000) coded with random concepts, in SQL (resource rows and
 *    their `code` index rows, hashed as the indexer hashes);
 * 4. starts `pont serve` on the database and times, one request at a time: `$lookup` and `$validate-code` of random
 *    codes, the first page of the 10,000-code value set's `$expand`, and an Observation search with `code:below`
 *    against the same search with the explicit list of codes (POST _search, one `code` parameter of every code).
 *
 *   npx tsx bench/terminology.ts [--concepts 300000] [--observations 500000] [--runs 200] [--out bench/results/terminology.json]
 * The scratch database is dropped at the end unless --keep.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, createWriteStream } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { hashKey } from '../src/core/hash';
import { openDatabase } from '../src/db/open';
import { createScratchDatabase, freePort } from '../test/harness';
import { NPM_START_ENV } from './fhir-data';
import { stats } from './stats';

const { values } = parseArgs({
  options: {
    concepts: { type: 'string', default: '300000' },
    observations: { type: 'string', default: '500000' },
    runs: { type: 'string', default: '200' },
    out: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const CONCEPTS = Number(values.concepts);
const OBSERVATIONS = Number(values.observations);
const RUNS = Number(values.runs);
const SCT = 'http://snomed.info/sct';
const log = (...a: unknown[]) => console.error(new Date().toISOString().slice(11, 19), ...a);

/** A seeded random number generator, so every run generates the same hierarchy. */
let seed = 46;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed / 2147483648);
const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;

/** RF2 files of a generated hierarchy: the concept ids by level, and the number of is-a rows. */
async function writeRelease(dir: string): Promise<{ levels: string[][]; edges: number }> {
  const levels: string[][] = [['100000000']];
  let made = 1;
  while (made < CONCEPTS) {
    const above = levels[levels.length - 1]!;
    const size = Math.min(CONCEPTS - made, levels.length < 11 ? above.length * 3 : CONCEPTS);
    levels.push(Array.from({ length: size }, (_, i) => String(100000000 + made + i)));
    made += size;
  }
  const write = async (name: string, header: string, rows: (emit: (line: string) => void) => void) => {
    const out = createWriteStream(join(dir, name));
    out.write(header + '\n');
    rows((line) => out.write(line + '\n'));
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  };
  const T = '20250101\t1\t900000000000207008';
  await write('sct2_Concept_Snapshot_INT_20250101.txt', 'id\teffectiveTime\tactive\tmoduleId\tdefinitionStatusId', (emit) => {
    for (const level of levels) for (const id of level) emit(`${id}\t${T}\t900000000000074008`);
  });
  await write('sct2_Description_Snapshot-en_INT_20250101.txt', 'id\teffectiveTime\tactive\tmoduleId\tconceptId\tlanguageCode\ttypeId\tterm\tcaseSignificanceId', (emit) => {
    levels.forEach((level, depth) =>
      level.forEach((id) => {
        emit(`${id}1\t${T}\t${id}\ten\t900000000000003001\tGenerated concept ${id} of level ${depth} (finding)\t900000000000448009`);
        emit(`${id}2\t${T}\t${id}\ten\t900000000000013009\tGenerated concept ${id} level ${depth}\t900000000000448009`);
      }),
    );
  });
  await write('der2_cRefset_LanguageSnapshot-en_INT_20250101.txt', 'id\teffectiveTime\tactive\tmoduleId\trefsetId\treferencedComponentId\tacceptabilityId', (emit) => {
    for (const level of levels) for (const id of level) emit(`l${id}\t${T}\t900000000000509007\t${id}2\t900000000000548007`);
  });
  let edges = 0;
  await write('sct2_Relationship_Snapshot_INT_20250101.txt', 'id\teffectiveTime\tactive\tmoduleId\tsourceId\tdestinationId\trelationshipGroup\ttypeId\tcharacteristicTypeId\tmodifierId', (emit) => {
    for (let depth = 1; depth < levels.length; depth++) {
      const above = levels[depth - 1]!;
      levels[depth]!.forEach((id, i) => {
        const first = above[Math.floor(i / 3) % above.length]!;
        emit(`r${id}1\t${T}\t${id}\t${first}\t0\t116680003\t900000000000011006\t900000000000451002`);
        edges++;
        if (depth >= 2 && random() < 0.15) {
          const second = pick(above);
          if (second !== first) (emit(`r${id}2\t${T}\t${id}\t${second}\t0\t116680003\t900000000000011006\t900000000000451002`), edges++);
        }
      });
    }
  });
  return { levels, edges };
}

/** `pont ARGS` with /usr/bin/time: its output, seconds and peak resident memory. */
function pont(env: Record<string, string>, ...args: string[]): Promise<{ stdout: string; seconds: number; maxRssMb: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn('/usr/bin/time', ['-f', 'MAXRSS %M', process.execPath, 'bin/pont.js', ...args], { env: { ...process.env, ...env, LOG_LEVEL: 'error' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => {
      const rss = Number(/MAXRSS (\d+)/.exec(stderr)?.[1]) / 1024;
      if (code !== 0) reject(new Error(`pont ${args.join(' ')}: exit ${code}\n${stderr}`));
      else resolve({ stdout, seconds: (performance.now() - started) / 1000, maxRssMb: Math.round(rss) });
    });
  });
}

async function startServer(env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, ['--max-old-space-size=512', 'bin/pont.js', 'serve'], {
    env: { ...process.env, ...NPM_START_ENV, ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'error', PONT_RATE_LIMITS: 'default=999999999/60,fhir=999999999/60' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let i = 0; i < 1200; i++) {
    if (await fetch(`${url}/readyz`).then((r) => r.ok).catch(() => false)) return { child, url };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new Error('server did not start');
}

async function timed(runs: number, request: (i: number) => Promise<Response>): Promise<ReturnType<typeof stats>> {
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    const res = await request(i);
    const body = await res.text();
    if (!res.ok) throw new Error(`${res.status}: ${body.slice(0, 300)}`);
    ms.push(performance.now() - started);
  }
  const s = stats(ms);
  return { ...s, p50: Math.round(s.p50 * 10) / 10, p95: Math.round(s.p95 * 10) / 10, mean: Math.round(s.mean * 10) / 10 };
}

const scratch = await createScratchDatabase();
const env = { DATABASE_URL: scratch.url };
const dir = mkdtempSync(join(tmpdir(), 'pont-bench-term-'));
let server: { child: ChildProcess; url: string } | undefined;
const db = await openDatabase({ databaseUrl: scratch.url });
try {
  log(`writing an RF2 release of ${CONCEPTS} concepts…`);
  const { levels, edges } = await writeRelease(dir);
  log(`${levels.length} levels (${levels.map((l) => l.length).join(', ')}), ${edges} is-a rows; loading it with pont terminology load…`);
  const load = await pont(env, 'terminology', 'load', dir);
  const loaded = JSON.parse(load.stdout);
  log(`loaded in ${load.seconds.toFixed(1)} s, peak RSS ${load.maxRssMb} MB`);
  const closure = Number((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM term_closure')).rows[0]!.n);

  // A concept with about 10,000 descendants (the value set), and one with about 1,000.
  const near = async (n: number) =>
    (
      await db.query<{ code: string; n: number }>(
        `SELECT c.code, count(*)::int AS n FROM term_closure cl JOIN term_concepts c ON c.cid = cl.ancestor
         WHERE cl.ancestor IN (SELECT cid FROM term_concepts ORDER BY cid LIMIT 2000) GROUP BY c.code ORDER BY abs(count(*) - $1) LIMIT 1`,
        [n],
      )
    ).rows[0]!;
  const big = await near(10_000);
  const small = await near(1_000);
  log(`value set root ${big.code} (${big.n} codes), small subtree ${small.code} (${small.n})`);
  const vsFile = join(dir, 'valueset.json');
  writeFileSync(vsFile, JSON.stringify({ resourceType: 'ValueSet', id: 'bench-10k', url: 'http://example.org/ValueSet/bench-10k', status: 'active', compose: { include: [{ system: SCT, filter: [{ property: 'concept', op: 'is-a', value: big.code }] }] } }));
  const vsLoad = await pont(env, 'terminology', 'load', vsFile);

  log(`writing ${OBSERVATIONS} Observations…`);
  const seedStarted = performance.now();
  await db.exec(`CREATE FUNCTION pg_temp.h3(a text, b text, c text) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE h text := md5(convert_to(a, 'UTF8') || '\\x00'::bytea || convert_to(b, 'UTF8') || '\\x00'::bytea || convert_to(c, 'UTF8'));
    BEGIN RETURN ('x' || substr(h, 15, 2) || substr(h, 13, 2) || substr(h, 11, 2) || substr(h, 9, 2) || substr(h, 7, 2) || substr(h, 5, 2) || substr(h, 3, 2) || substr(h, 1, 2))::bit(64)::bigint; END $$`);
  const { rows: range } = await db.query<{ lo: string; n: number }>(`SELECT min(cid)::text AS lo, count(*)::int AS n FROM term_concepts`);
  for (let done = 0; done < OBSERVATIONS; done += 50_000) {
    const n = Math.min(50_000, OBSERVATIONS - done);
    await db.query(
      `WITH picked AS (
         SELECT g, (SELECT code FROM term_concepts WHERE cid = $3::bigint + (g::bigint * 2654435761) % $4) AS code FROM generate_series($1::int + 1, $1::int + $2::int) g
       ), written AS (
         INSERT INTO fhir_resources (resource_type, id, version_id, last_updated, method, deleted, content, patients, author_org)
         SELECT 'Observation', 'obs-' || g, 1, now(), 'POST', false,
                jsonb_build_object('resourceType', 'Observation', 'id', 'obs-' || g, 'status', 'final', 'meta', jsonb_build_object('versionId', '1', 'lastUpdated', now()),
                  'code', jsonb_build_object('coding', jsonb_build_array(jsonb_build_object('system', '${SCT}', 'code', code)))),
                '{}', 'org-bench'
         FROM picked RETURNING rid, content->'code'->'coding'->0->>'code' AS code
       )
       INSERT INTO fhir_idx_token (rid, hash_identity, hash_value, hash_sys_value, system, value, display)
       SELECT rid, $5::bigint, pg_temp.h3('Observation', 'code', code), pont_token_hash('Observation', 'code', '${SCT}', code), '${SCT}', code, NULL FROM written`,
      [done, n, range[0]!.lo, range[0]!.n, hashKey('Observation', 'code')],
    );
    log(`  ${done + n}`);
  }
  await db.exec('ANALYZE');
  const seedSeconds = (performance.now() - seedStarted) / 1000;

  server = await startServer(env);
  const created = JSON.parse((await pont(env, 'clients', 'create', '--name', 'bench', '--org', 'org-bench', '--scopes', 'fhir:read terminology:read', '--all-patients')).stdout);
  const token = (
    (await (await fetch(`${server.url}/api/v1/connect/auth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant_type: 'client_credentials', client_id: created.client_id, client_secret: created.client_secret }) })).json()) as { access_token: string }
  ).access_token;
  const headers = { authorization: `Bearer ${token}` };
  const get = (path: string) => fetch(`${server!.url}/api/fhir/R4/${path}`, { headers });
  const all = levels.flat();
  const codeAt = (i: number) => all[(i * 7919) % all.length]!;

  // Warm up (connections, plans), then measure; a FHIR read of one Observation is the floor every request pays (token, rate limits, audit).
  for (let i = 0; i < 20; i++) await (await get(`Observation/obs-${i + 1}`)).text();
  const read = await timed(RUNS, (i) => get(`Observation/obs-${(i % OBSERVATIONS) + 1}`));
  for (let i = 0; i < 20; i++) await (await get(`CodeSystem/$lookup?system=${SCT}&code=${codeAt(i + 5000)}`)).text();
  const lookup = await timed(RUNS, (i) => get(`CodeSystem/$lookup?system=${SCT}&code=${codeAt(i)}`));
  const validate = await timed(RUNS, (i) => get(`CodeSystem/$validate-code?url=${SCT}&code=${codeAt(i + 1000)}`));
  const expand100 = await timed(RUNS, () => get(`ValueSet/bench-10k/$expand?count=100`));
  const expand1000 = await timed(Math.min(RUNS, 100), () => get(`ValueSet/bench-10k/$expand`));
  const expandFilter = await timed(Math.min(RUNS, 100), (i) => get(`ValueSet/bench-10k/$expand?count=100&filter=${encodeURIComponent(`concept ${String(i % 9)}`)}`));

  const codesUnder = async (code: string) =>
    (await db.query<{ code: string }>(`SELECT d.code FROM term_concepts a JOIN term_closure cl ON cl.ancestor = a.cid JOIN term_concepts d ON d.cid = cl.descendant WHERE a.code = $1`, [code])).rows.map((r) => r.code);
  const search = async (root: { code: string; n: number }, runs: number) => {
    const list = (await codesUnder(root.code)).map((c) => `${SCT}|${c}`).join(',');
    const below = await timed(runs, () => get(`Observation?code:below=${encodeURIComponent(`${SCT}|${root.code}`)}`));
    const explicit = await timed(runs, () =>
      fetch(`${server!.url}/api/fhir/R4/Observation/_search`, { method: 'POST', headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ code: list }) }),
    );
    const total = ((await (await get(`Observation?code:below=${encodeURIComponent(`${SCT}|${root.code}`)}&_summary=count`)).json()) as { total: number }).total;
    return { codes: root.n, matches: total, below, explicit, ratio: Math.round((below.p50 / explicit.p50) * 100) / 100 };
  };
  const searchSmall = await search(small, Math.min(RUNS, 50));
  const searchBig = await search(big, Math.min(RUNS, 30));

  const result = {
    date: new Date().toISOString(),
    machine: `${cpus().length} cores, shared`,
    database: 'PostgreSQL (scratch database)',
    concepts: CONCEPTS,
    levels: levels.length,
    isARows: edges,
    closureRows: closure,
    load: { seconds: Math.round(load.seconds * 10) / 10, peakRssMb: load.maxRssMb, loaded: loaded.loaded },
    valueSetLoad: { seconds: Math.round(vsLoad.seconds * 10) / 10, codes: big.n },
    observations: OBSERVATIONS,
    observationSeedSeconds: Math.round(seedSeconds),
    observationRead: read,
    lookup,
    validateCode: validate,
    expand10kFirstPage100: expand100,
    expand10kFirstPage1000: expand1000,
    expand10kFilterPage100: expandFilter,
    searchBelow1k: searchSmall,
    searchBelow10k: searchBig,
  };
  console.log(JSON.stringify(result, null, 2));
  if (values.out) writeFileSync(values.out, JSON.stringify(result, null, 2) + '\n');
} finally {
  if (server && server.child.exitCode === null) {
    const exited = new Promise((resolve) => server!.child.once('exit', resolve));
    server.child.kill('SIGTERM');
    await exited;
  }
  await db.close();
  rmSync(dir, { recursive: true, force: true });
  if (!values.keep) await scratch.drop();
  else log(`kept ${scratch.url}`);
}
