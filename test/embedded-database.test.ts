import { execFile } from 'node:child_process';
import { chmodSync, lstatSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import { openDatabase, openMigratedDatabase } from '../src/db/open';
import { listMigrations } from '../src/db/migrate';
import { startPont, type RunningPont } from '../src/server';
import { migratedDataDir, pontCommand } from './harness';

const repo = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

/** Every path under `dir` (itself included) with its permission bits, as octal text. */
function modes(dir: string): Array<{ path: string; dir: boolean; mode: string }> {
  const out = [{ path: dir, dir: true, mode: (lstatSync(dir).mode & 0o777).toString(8) }];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...modes(path));
    else out.push({ path, dir: false, mode: (lstatSync(path).mode & 0o777).toString(8) });
  }
  return out;
}
/** What is not owner-only: directories other than 0700, files other than 0600. */
const exposed = (dir: string) => modes(dir).filter((m) => m.mode !== (m.dir ? '700' : '600'));

// The embedded database belongs to one process; operator commands go through it while it runs.
describe('the embedded database with a running service', () => {
  let dataDir: string;
  let pont: RunningPont;
  const pontCli = (...args: string[]) =>
    run(process.execPath, pontCommand(...args), { cwd: repo, env: { ...process.env, PONT_DATA_DIR: dataDir, LOG_LEVEL: 'error', DATABASE_URL: '' } });

  beforeAll(async () => {
    // Initialised and migrated already (the migrated image unpacked): the first start is the last describe's test.
    dataDir = await migratedDataDir(mkdtempSync(join(tmpdir(), 'pont-embedded-')));
    const config = loadConfig({ PORT: '0', LOG_LEVEL: 'error', PONT_DATA_DIR: dataDir });
    pont = await startPont(config);
  });
  afterAll(async () => {
    await pont?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('refuses a second process on the same data directory instead of corrupting it', async () => {
    const second = await run(process.execPath, pontCommand('serve'), {
      cwd: repo,
      env: { ...process.env, PONT_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: '' },
    }).catch((e) => e);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`is in use by process ${process.pid}`);
  }, 120_000);

  it('runs operator commands through the running service: a client created by the CLI gets a token at once', async () => {
    const created = await pontCli('clients', 'create', '--name', 'cli', '--org', 'org-cli', '--scopes', 'patients:read');
    const client = JSON.parse(created.stdout);
    const token = await fetch(`${pont.url}/api/v1/connect/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
    });
    expect(token.status).toBe(200);
    const { access_token } = (await token.json()) as { access_token: string };

    await pontCli('keys', 'rotate');
    const jwks = (await (await fetch(`${pont.url}/.well-known/jwks.json`)).json()) as { keys: unknown[] };
    expect(jwks.keys.length).toBeGreaterThanOrEqual(2);
    const read = await fetch(`${pont.url}/api/fhir/R4/Patient`, { headers: { authorization: `Bearer ${access_token}` } });
    expect(read.status).toBe(200); // a token signed before the rotation still works
  }, 120_000);

  it('keeps its files to its own user: the directory 0700, every file in it 0600 (the WAL holds the signing key)', async () => {
    // Written after start too: a client, a key rotation (new WAL records, new relation files).
    await pontCli('keys', 'rotate');
    const all = modes(dataDir);
    expect(all.length).toBeGreaterThan(100);
    expect(all.some((m) => m.path.includes('pg_wal'))).toBe(true);
    expect(exposed(dataDir)).toEqual([]);
  }, 120_000);

  it('a data directory of an older install, world-readable and writable, is made owner-only at open', async () => {
    const old = await migratedDataDir(mkdtempSync(join(tmpdir(), 'pont-old-')));
    try {
      const first = await openDatabase({ dataDir: old });
      await first.query('CREATE TABLE t (x int)');
      await first.close();
      for (const m of modes(old)) chmodSync(m.path, m.dir ? 0o777 : 0o666);
      expect(exposed(old).length).toBeGreaterThan(100);
      const again = await openDatabase({ dataDir: old });
      try {
        expect(exposed(old)).toEqual([]);
      } finally {
        await again.close();
      }
    } finally {
      rmSync(old, { recursive: true, force: true });
    }
  });

  it('a data directory left by a process that died is taken over', async () => {
    const orphan = await migratedDataDir(mkdtempSync(join(tmpdir(), 'pont-orphan-')));
    try {
      const { writeFileSync } = await import('node:fs');
      writeFileSync(join(orphan, 'pont.pid'), '999999');
      const db = await openDatabase({ dataDir: orphan });
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      await db.close();
    } finally {
      rmSync(orphan, { recursive: true, force: true });
    }
  });
});

// PGlite's memory is one WebAssembly.Memory per instance that grows and never shrinks (docs/operators.md "Deployment").
describe('the embedded database\'s memory', () => {
  it('a first start initialises and migrates a new data directory elsewhere: no initdb instance stays in the serving process', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'pont-first-'));
    try {
      const before = process.memoryUsage().external;
      const { db, applied } = await openMigratedDatabase({ dataDir });
      try {
        expect(applied).toEqual(listMigrations().map((m) => m.version));
        // initdb is a second PGlite instance plus initdb's own module (~430 MB of WebAssembly memory, freed only when
        // the garbage collector gets to it); the serving instance alone is ~140 MB.
        expect((process.memoryUsage().external - before) / 2 ** 20).toBeLessThan(300);
        expect((await db.query<{ version: string }>('SELECT version FROM schema_migrations ORDER BY version')).rows.map((r) => r.version)).toEqual(applied);
        // What initdb wrote (world-readable, as PGlite writes its files) is the owner's only once open.
        expect(exposed(dataDir)).toEqual([]);
      } finally {
        await db.close();
      }
      const again = await openMigratedDatabase({ dataDir });
      expect(again.applied).toEqual([]);
      await again.db.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 300_000);

  it('runs PostgreSQL with a small shared buffer pool: it is touched in full at start, and the file cache holds the rest', async () => {
    const db = await openDatabase({});
    try {
      expect((await db.query<{ shared_buffers: string }>('SHOW shared_buffers')).rows[0]!.shared_buffers).toBe('16MB');
    } finally {
      await db.close();
    }
  });
});
