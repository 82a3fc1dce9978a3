/**
 * What the FHIR benchmarks share (bench/fhir.ts, bench/growth.ts): the Synthea sample copied to the size wanted,
 * `pont import` in a process of its own, tokens, consents, and the requests drawn from the loaded data.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { x as extract } from 'tar';
import type { Queryable } from '../src/db/database';
import { uuidV5 } from '../src/core/hash';
import { runConcurrently } from './stats';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The environment `npm start` and the image give the server besides its flags (package.json's start script, the
 * Dockerfile): two malloc arenas unless this environment names its own (docs/operators.md "Deployment", Memory). Benchmarks that
 * start a server as `npm start` does add it.
 */
export const NPM_START_ENV = { MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2' };
export const FHIR_PATH = '/api/fhir/R4';

/** The integrator's scopes: it reads under the consent rule, grants consents and pushes lab results. */
export const BENCH_SCOPES = ['fhir:read', 'consents:write', 'patient:diagnostics:read', 'patients:read', 'labs:read', 'prescriptions:read', 'documents:read', 'labs:write', 'fhir:write', 'consents:read', 'pharmacy:stock:read'] as const;

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

export interface Dataset {
  dir: string;
  files: number;
  /** Bundle entries written (what the import counts). */
  entries: number;
  copies: number;
  bundlesPerCopy: number;
  /** Each copy's directory (`dir/copy-NNN`) and its bundle entries. */
  copyDirs: Array<{ dir: string; entries: number }>;
}

/**
 * Copy k of the sample replaces every UUID in the text of every bundle (resource ids, `urn:uuid:`
 * fullUrls, `Type/id` references and request URLs, and the UUID identifiers Synthea gives patients)
 * by UUIDv5(k:uuid), so references stay consistent inside each copy and nothing is shared between
 * copies: Organization and Practitioner are copied too. Copy 0 is the sample as it is.
 * Stops after the bundle that reaches `target` entries, or after `maxCopies` whole copies.
 */
export function prepareDataset(samples: string, target: number, dir: string, maxCopies = Number.MAX_SAFE_INTEGER): Dataset {
  const raw = join(dir, 'sample');
  mkdirSync(raw, { recursive: true });
  extract({ file: samples, cwd: raw, sync: true });
  const bundles: Array<{ name: string; text: string; entries: number }> = [];
  const visit = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) visit(path);
      else if (name.endsWith('.json')) {
        const text = readFileSync(path, 'utf8');
        bundles.push({ name, text, entries: (JSON.parse(text) as { entry?: unknown[] }).entry?.length ?? 0 });
      }
    }
  };
  visit(raw);
  if (!bundles.length) throw new Error(`No bundles in ${samples}`);
  const out = join(dir, 'bundles');
  const copyDirs: Dataset['copyDirs'] = [];
  let entries = 0;
  let files = 0;
  let copy = 0;
  for (; entries < target && copy < maxCopies; copy++) {
    const copyDir = join(out, `copy-${String(copy).padStart(3, '0')}`);
    mkdirSync(copyDir, { recursive: true });
    copyDirs.push({ dir: copyDir, entries: 0 });
    const ids = new Map<string, string>();
    const rename = (uuid: string) => {
      let v = ids.get(uuid);
      if (!v) ids.set(uuid, (v = uuidV5('bench-copy', `${copy}:${uuid.toLowerCase()}`)));
      return v;
    };
    for (const [i, b] of bundles.entries()) {
      if (entries >= target) break;
      writeFileSync(join(copyDir, `${String(i).padStart(3, '0')}.json`), copy === 0 ? b.text : b.text.replace(UUID, rename));
      entries += b.entries;
      copyDirs.at(-1)!.entries += b.entries;
      files++;
    }
  }
  rmSync(raw, { recursive: true, force: true });
  return { dir: out, files, entries, copies: copy, bundlesPerCopy: bundles.length, copyDirs };
}

/** `pont import PATH... --concurrency N` on the PostgreSQL database at `databaseUrl`: its summary line, parsed. */
export async function importCommand(
  databaseUrl: string,
  paths: string | string[],
  concurrency: number,
  env: Record<string, string> = {},
): Promise<{ resources: number; seconds: number; failures: Array<{ file: string; message: string }> }> {
  const child = spawn(process.execPath, [join(repoRoot, 'bin', 'pont.js'), 'import', ...[paths].flat(), '--concurrency', String(concurrency)], {
    // As an operator runs it: without the server's heap cap (NODE_OPTIONS of the benchmark's own process).
    env: { ...process.env, NODE_OPTIONS: '', DATABASE_URL: databaseUrl, LOG_LEVEL: 'error', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (chunk) => (out += chunk));
  await new Promise((resolveExit) => child.on('close', resolveExit));
  const m = /Imported (\d+) resources from \d+ files in ([\d.]+) s .*; (\d+) failures/.exec(out);
  if (!m) throw new Error(`pont import: ${out}`);
  const failures = [...out.matchAll(/^ {2}FAILED (.*?): (.*)$/gm)].map((f) => ({ file: f[1]!, message: f[2]! }));
  return { resources: Number(m[1]), seconds: Number(m[2]), failures };
}

/** An access token of `client` from the token endpoint of the server at `baseUrl`. */
export async function tokenOf(baseUrl: string, client: { client_id: string; client_secret: string }): Promise<string> {
  const res = await fetch(`${baseUrl}/api/v1/connect/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
  });
  const token = (await res.json()) as { access_token?: string };
  if (res.status !== 200 || !token.access_token) throw new Error(`token request failed: ${res.status} ${JSON.stringify(token)}`);
  return token.access_token;
}

/** Every patient with a Health ID (returned) grants the caller's organisation a full-record consent for a year, through the grant route. */
export async function grantFullRecordConsents(baseUrl: string, headers: Record<string, string>, db: Queryable, concurrency = 4): Promise<string[]> {
  const healthIds = (await db.query<{ health_id: string }>('SELECT health_id FROM health_ids WHERE patient_id IS NOT NULL ORDER BY md5(health_id)')).rows.map((r) => r.health_id);
  let next = 0;
  await runConcurrently(healthIds.length, concurrency, async () => {
    const healthId = healthIds[next++]!;
    const t = performance.now();
    const res = await fetch(`${baseUrl}/api/v1/connect/patient/${healthId}/consent/grant`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ consent_type: 'full_record', expires_at: new Date(Date.now() + 365 * 86_400_000).toISOString() }),
    });
    if (res.status !== 201) throw new Error(`consent grant: ${res.status} ${await res.text()}`);
    return performance.now() - t;
  });
  return healthIds;
}

/** n items drawn in order from `pool`, cycling when it is smaller. */
export function take<T>(pool: T[], n: number): T[] {
  if (!pool.length) throw new Error('no samples in the data for a workload');
  return Array.from({ length: n }, (_, i) => pool[i % pool.length]!);
}

/*
 * Samples come from the loaded data, ordered by a hash of the ids (not by insertion order), so every backend and
 * configuration gets the same requests for the same data.
 */

/** `GET /{type}/{id}` of n resources (any type but the audit trail and consents: the integrator reads clinical data). */
export async function readByIdPaths(db: Queryable, n: number): Promise<string[]> {
  const reads = await db.query<{ resource_type: string; id: string }>(
    `SELECT resource_type, id FROM fhir_resources WHERE NOT deleted AND resource_type NOT IN ('AuditEvent', 'Consent') ORDER BY md5(id || 'read') LIMIT $1`,
    [n],
  );
  return take(reads.rows, n).map((r) => `${FHIR_PATH}/${r.resource_type}/${r.id}`);
}

/** `Observation?subject=Patient/X&code=http://loinc.org|C` for n (patient, code) pairs found in the data. */
export async function patientCodePaths(db: Queryable, n: number): Promise<string[]> {
  const codes = await db.query<{ subject: string; code: string }>(
    `SELECT r.content->'subject'->>'reference' AS subject, c->>'code' AS code
       FROM fhir_resources r, jsonb_array_elements(r.content->'code'->'coding') c
      WHERE r.resource_type = 'Observation' AND NOT r.deleted AND c->>'system' = 'http://loinc.org'
        AND r.content->'subject'->>'reference' LIKE 'Patient/%'
      ORDER BY md5(r.id || (c->>'code')) LIMIT $1`,
    [n],
  );
  const q = (s: string) => encodeURIComponent(s);
  return take(codes.rows, n).map((r) => `${FHIR_PATH}/Observation?subject=${q(r.subject)}&code=${q(`http://loinc.org|${r.code}`)}`);
}

/** Patient ids (n, cycling) for the per-patient searches. */
export async function patientIds(db: Queryable, n: number): Promise<string[]> {
  const patients = await db.query<{ id: string }>(`SELECT id FROM fhir_resources WHERE resource_type = 'Patient' AND NOT deleted ORDER BY md5(id || 'patient') LIMIT $1`, [n]);
  return patients.rows.map((r) => r.id);
}

/**
 * Deep pages: the `next` links of Observation?_count=50 from page 21 on, `n` of them (a walk that runs out of pages
 * starts again from page 1). `get` fetches a path under the server's URL.
 */
export async function deepPagePaths(get: (path: string) => Promise<Response>, n: number): Promise<string[]> {
  const deep: string[] = [];
  const first = `${FHIR_PATH}/Observation?_count=50`;
  let url = first;
  let page = 1;
  let walked = 0;
  while (deep.length < n) {
    if (page > 20) deep.push(url);
    const res = await get(url);
    if (res.status !== 200) throw new Error(`deep page walk: ${res.status} ${await res.text()}`);
    const body = (await res.json()) as { link?: Array<{ relation: string; url: string }> };
    const next = body.link?.find((l) => l.relation === 'next')?.url;
    walked++;
    if (next) {
      url = next.slice(next.indexOf(FHIR_PATH));
      page++;
    } else {
      if (page <= 20) throw new Error(`Observation?_count=50 has only ${page} pages: load more data for the deep-page test`);
      url = first;
      page = 1;
    }
    if (walked > 100 * n) throw new Error('deep page walk does not end');
  }
  return deep;
}
