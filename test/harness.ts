import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig, type Config } from '../src/config';
import { startPont, type RunningPont } from '../src/server';
import { createClient } from '../src/auth/clients';
import type { Scope } from '../src/auth/scopes';

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
  const config = loadConfig({ PORT: '0', LOG_LEVEL: 'error', ...env, ...(scratch ? { DATABASE_URL: scratch.url } : {}) });
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
    },
  };
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
