import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer } from 'node:net';
import { promisify } from 'node:util';
import type { Consent } from '@medplum/fhirtypes';
import pg from 'pg';
import { inject } from 'vitest';
import { loadConfig, type Config } from '../src/config';
import { startPont, type RunningPont } from '../src/server';
import { createClient } from '../src/auth/clients';
import type { Scope } from '../src/core/scopes';
import type { PortalRole } from '../src/auth/portal-accounts';

/** Which backend this test run uses (vitest sets it per project). */
export const backend = (process.env.PONT_TEST_DB ?? 'pglite') as 'pglite' | 'postgres';

/** PostgreSQL server used by the postgres project; each test file gets a database of its own. */
export const postgresAdminUrl = process.env.PONT_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export async function createScratchDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `pont_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: postgresAdminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(postgresAdminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: postgresAdminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/** A database for operator commands (`bin/pont.js`) of this backend: the environment that selects it, and its removal. */
export async function commandDatabase(): Promise<{ env: Record<string, string>; cleanup(): Promise<void> }> {
  if (backend === 'postgres') {
    const scratch = await createScratchDatabase();
    return { env: { DATABASE_URL: scratch.url }, cleanup: scratch.drop };
  }
  const dir = mkdtempSync(join(tmpdir(), 'pont-cli-'));
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
  const scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
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
  if (!scratch) config.dataDir = undefined; // PGlite in memory
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

/** A TCP port free now on 127.0.0.1 (for a child process's port, or PgBouncer's). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
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
