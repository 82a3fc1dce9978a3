import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig, type Config } from '../src/config';
import { startPont, type RunningPont } from '../src/server';

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
