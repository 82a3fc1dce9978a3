import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import type { Consent } from '@medplum/fhirtypes';
import pg from 'pg';
import { x as extract } from 'tar';
import { inject } from 'vitest';
import { loadConfig, type Config } from '../src/config';
import { startPont, type RunningPont } from '../src/server';
import { createClient } from '../src/auth/clients';
import { migrate } from '../src/db/migrate';
import { migratedEmbeddedImage, migratedTemplateName } from './migrated';
import { openPostgres } from '../src/db/postgres';
import { postgresAdminUrl, withAdmin } from './postgres-admin';
import type { Scope } from '../src/core/scopes';
import type { PortalRole } from '../src/auth/portal-accounts';

/** Which backend this test run uses (vitest sets it per project). */
export const backend = (process.env.PONT_TEST_DB ?? 'pglite') as 'pglite' | 'postgres';

export { postgresAdminUrl } from './postgres-admin';

/**
 * A database of its own for a test (dropped by `drop`, or in the postgres project when the run ends): empty, or (`migrated`) with every migration applied, copied
 * from a template migrated once per set of migrations (CREATE DATABASE … TEMPLATE takes ~0.1 s where migrating takes
 * ~1 s, and a run starts some seventy servers). The migrations themselves are still run: to make the template, by
 * the tests of migrating (test/database.test.ts), and by every command test on an empty database.
 */
export async function createScratchDatabase({ migrated = false }: { migrated?: boolean } = {}): Promise<{ url: string; drop(): Promise<void> }> {
  const runPrefix = scratchDatabasePrefix();
  const name = `${runPrefix ?? 'pont_test_'}${randomBytes(6).toString('hex')}`;
  await withAdmin(async (admin) => {
    if (!migrated) return void (await admin.query(`CREATE DATABASE ${name}`));
    const template = migratedTemplateName();
    try {
      await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
    } catch (err) {
      if ((err as { code?: string }).code !== '3D000') throw err; // 3D000: no such template yet
      await makeMigratedTemplate(admin, template);
      await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
    }
  });
  return {
    url: databaseUrl(name),
    drop: async () => {
      if (!runPrefix) await withAdmin((admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

/**
 * In the postgres project the run drops its databases together at its end (test/global-databases.ts): their names'
 * prefix. Elsewhere (the pglite project, a benchmark outside vitest) each is dropped by its `drop`.
 */
function scratchDatabasePrefix(): string | undefined {
  try {
    return inject('scratchDatabasePrefix');
  } catch {
    return undefined; // not in a vitest worker
  }
}

function databaseUrl(name: string): string {
  const url = new URL(postgresAdminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * Migrates a database under a name of its own, then renames it to `template`: concurrent test files (and runs) each
 * make one, the first rename wins and the others drop theirs; nobody copies a half-migrated template. Templates of
 * other sets of migrations (older checkouts' runs) are dropped.
 */
async function makeMigratedTemplate(admin: pg.Client, template: string): Promise<void> {
  const building = `${template}_${randomBytes(4).toString('hex')}`;
  await admin.query(`CREATE DATABASE ${building}`);
  const db = await openPostgres(databaseUrl(building), 1);
  try {
    await migrate(db);
  } finally {
    await db.close();
  }
  try {
    await admin.query(`ALTER DATABASE ${building} RENAME TO ${template}`);
  } catch (err) {
    await admin.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
    // Another made it first: 42P04, or 23505 when both renames reach the catalog's unique index at once.
    if (!['42P04', '23505'].includes((err as { code?: string }).code ?? '')) throw err;
  }
  const { rows } = await admin.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'pont\\_template\\_%' AND datname <> $1 AND datname NOT LIKE $1 || '\\_%'", [template]);
  for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => undefined);
}

/**
 * `dir`, made an embedded data directory already initialised and migrated: the migrated image (test/migrated.ts)
 * unpacked, in 1 to 2 s, where a first start's initdb and migrations in WebAssembly take 8 to 15 s on the 2-core
 * machine. For the tests of what a service or a command does with its data directory; the first start itself is
 * tested in test/embedded-database.test.ts. Returns `dir`.
 */
export async function migratedDataDir(dir: string): Promise<string> {
  const image = await migratedEmbeddedImage();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  await pipeline(Readable.from(Buffer.from(await image.arrayBuffer())), extract({ cwd: dir }));
  return dir;
}

/**
 * A database for operator commands (`bin/pont.js`) of this backend: the environment that selects it, and its removal.
 * Migrated already, as after a first start (the migrated template, or the image unpacked): a `pont serve` on it was
 * listening after 6 to 7.5 s where on an empty PostgreSQL database it took 7.4 to 10.7 s (load 5).
 */
export async function commandDatabase(): Promise<{ env: Record<string, string>; cleanup(): Promise<void> }> {
  if (backend === 'postgres') {
    const scratch = await createScratchDatabase({ migrated: true });
    return { env: { DATABASE_URL: scratch.url }, cleanup: scratch.drop };
  }
  const dir = await migratedDataDir(mkdtempSync(join(tmpdir(), 'pont-cli-')));
  return { env: { PONT_DATA_DIR: dir }, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
}

export interface TestServer extends RunningPont {
  config: Config;
  /** fetch against the server; `path` is relative to its base URL. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** fetch + JSON body + status, for brevity in tests. */
  json<T = any>(path: string, init?: RequestInit & { json?: unknown }): Promise<{ status: number; body: T; headers: Headers }>;
}

/** Starts the real service on a random port, on a fresh database of the selected backend. */
export async function startTestServer(env: Record<string, string> = {}): Promise<TestServer> {
  const scratch = backend === 'postgres' ? await createScratchDatabase({ migrated: true }) : undefined;
  // Bulk export files of this server only, removed with it.
  const exportDir = env.PONT_BULK_EXPORT_DIR ? undefined : mkdtempSync(join(tmpdir(), 'pont-exports-'));
  // The retention pass a service runs 30 s after start would move rows and make partitions under tests that arrange
  // them (as before PONT_RETENTION_START_DELAY, an hour): a test that wants it sets the variable.
  const config = loadConfig({
    PORT: '0',
    LOG_LEVEL: 'error',
    PONT_RETENTION_START_DELAY: '1h',
    ...(exportDir && { PONT_BULK_EXPORT_DIR: exportDir }),
    ...env,
    ...(scratch ? { DATABASE_URL: scratch.url } : {}),
  });
  if (!scratch) {
    config.dataDir = undefined; // PGlite in memory, from the migrated image
    config.embeddedImage = await migratedEmbeddedImage();
  }
  const pont = await startPont(config);
  const doFetch = (path: string, init?: RequestInit) => fetch(pont.url + path, init);
  return {
    ...pont,
    config,
    fetch: doFetch,
    async json(path, init = {}) {
      const { json, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (json !== undefined && !headers.has('content-type')) headers.set('content-type', 'application/json');
      const res = await doFetch(path, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body });
      const text = await res.text();
      let body: any = text;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        /* not JSON: keep the text */
      }
      return { status: res.status, body, headers: res.headers };
    },
    async close() {
      await pont.close();
      await scratch?.drop();
      if (exportDir) rmSync(exportDir, { recursive: true, force: true });
    },
  };
}

/**
 * Time passes for one consent: its grant and its period move `ms` into the past, written through the store like
 * any change, so the Consent and the index the policy reads stay in step. Expiry is compared with the database's
 * clock (now() in src/policy), so moving the data is how a test skips ahead instead of sleeping.
 */
export async function backdateConsent(pont: RunningPont, consentId: string, ms: number): Promise<void> {
  const repo = pont.services.fhir.system('test: time passes');
  const consent = await repo.read<Consent>('Consent', consentId, { audit: false });
  const earlier = (instant: string | undefined) => (instant === undefined ? undefined : new Date(Date.parse(instant) - ms).toISOString());
  const period = consent.provision?.period;
  await repo.update<Consent>({
    ...consent,
    ...(consent.dateTime && { dateTime: earlier(consent.dateTime) }),
    ...(period && { provision: { ...consent.provision, period: { ...period, start: earlier(period.start), end: earlier(period.end) } } }),
  });
}

export interface TestClient {
  client_id: string;
  client_secret: string;
  organization_id: string;
  access_token: string;
  /** `Authorization: Bearer …` for fetch. */
  headers: Record<string, string>;
}

/**
 * An integration client on the test server's database (what `pont clients create` does), with an
 * access token from the real token endpoint.
 */
export async function createTestClient(
  pont: TestServer,
  scopes: Scope[],
  options: { organizationId?: string; facilityId?: string; name?: string; allPatients?: boolean } = {},
): Promise<TestClient> {
  const client = await createClient(pont.services.db, {
    name: options.name ?? 'test client',
    organizationId: options.organizationId ?? 'org-test',
    facilityId: options.facilityId,
    scopes,
    allPatients: options.allPatients,
  });
  const { status, body } = await pont.json('/api/v1/connect/auth/token', {
    method: 'POST',
    json: { grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret },
  });
  if (status !== 200) throw new Error(`token request failed: ${status} ${JSON.stringify(body)}`);
  return {
    client_id: client.client_id,
    client_secret: client.client_secret,
    organization_id: client.organization_id,
    access_token: body.access_token,
    headers: { authorization: `Bearer ${body.access_token}` },
  };
}

/** A developer-portal user made as `pont portal-users create` makes one, with its password set through the set-password page. */
export async function createPortalPerson(pont: TestServer, organizationId: string, email: string, password: string, role: PortalRole = 'admin'): Promise<void> {
  const created = await pont.services.access.portal.create({ organizationId, email, role });
  if (created === 'exists') throw new Error(`${email} exists`);
  const res = await pont.fetch('/portal/set-password', {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: created.setPasswordToken, password, confirm: password }),
  });
  if (res.status !== 302) throw new Error(`setting the password of ${email}: ${res.status}, not 302`);
}

/**
 * A TCP port free now on 127.0.0.1, for a process of its own to listen on (an agent, PgBouncer, a replica). It is
 * drawn below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range): a port from `listen(0)` could be
 * taken by any outgoing connection or another test's `listen(0)` before the child binds it (a full run lost an agent
 * to EADDRINUSE so). Each vitest worker draws from a band of its own, from a random place in it, so two workers never
 * hand out the same port and a worker's next file does not start where the last one did.
 */
export async function freePort(): Promise<number> {
  const band = portBand();
  for (let tries = 0; tries < band.size; tries++) {
    const port = band.start + (band.next++ % band.size);
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port in ${band.start}–${band.start + band.size - 1}`);
}

let band: { start: number; size: number; next: number } | undefined;
function portBand(): { start: number; size: number; next: number } {
  if (band) return band;
  const BANDS = 16;
  const lowest = 10_000;
  let ephemeralStart = 32_768;
  try {
    ephemeralStart = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || ephemeralStart;
  } catch {
    // not Linux: the usual range's start
  }
  const size = Math.floor((ephemeralStart - lowest) / BANDS);
  if (size < 100) throw new Error(`the ephemeral port range starts at ${ephemeralStart}: no room below it for test ports`);
  const worker = Number(process.env.VITEST_POOL_ID ?? 1) % BANDS;
  band = { start: lowest + worker * size, size, next: Math.floor(Math.random() * size) };
  return band;
}

function canListen(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

/**
 * The `pont` command as the tests start it: node's arguments for `pont ARGS…` on the compiled build made once for
 * the run (test/global-build.ts), as the image and `npm start` run it (with source maps); outside the integration
 * projects (no build provided), `bin/pont.js` on the sources. `spawn(process.execPath, pontCommand('serve'))`.
 */
export function pontCommand(...args: string[]): string[] {
  const build = inject('pontBuild');
  return build ? ['--enable-source-maps', join(build, 'bin.js'), ...args] : [join(repoRoot, 'bin/pont.js'), ...args];
}

/** Runs `pont ARGS…` (`pontCommand`, a process of its own) with `env` over this process's: its exit code, its stdout as JSON, its stderr. */
export async function runPont(env: Record<string, string>, ...args: string[]): Promise<{ code: number; json: any; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, pontCommand(...args), { env: { ...process.env, ...env } });
    return { code: 0, json: JSON.parse(stdout), stderr };
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, json: undefined, stderr: e.stderr };
  }
}
