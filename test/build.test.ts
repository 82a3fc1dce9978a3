/**
 * The compiled build (`npm run build`): what `npm start` and the image run. Built here into a directory of its
 * own beside dist/ (the two test projects run at once), then run as the image runs it: node on the JavaScript,
 * no tsx.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { x as extract } from 'tar';
import { backend, createScratchDatabase } from './harness';

const repo = fileURLToPath(new URL('..', import.meta.url));
const out = join(repo, `dist-test-${process.pid}`);
const run = promisify(execFile);
let scratch: Awaited<ReturnType<typeof createScratchDatabase>> | undefined;
let dataDir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  await run(process.execPath, [join(repo, 'scripts/build.mjs'), out], { cwd: repo });
  dataDir = mkdtempSync(join(tmpdir(), 'pont-build-'));
  scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
  env = { ...process.env, LOG_LEVEL: 'error', PONT_DATA_DIR: dataDir, DATABASE_URL: scratch?.url ?? '', PORT: '0' };
}, 120_000);
afterAll(async () => {
  rmSync(out, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
  await scratch?.drop();
});

describe('npm run build', () => {
  it('compiles every module with its source map, imports spelled for Node, the migrations beside them', () => {
    expect(readFileSync(join(out, 'cli.js'), 'utf8')).toContain("from './db/open.js'");
    expect(existsSync(join(out, 'cli.js.map'))).toBe(true);
    const migrations = readdirSync(join(repo, 'src/db/migrations'));
    expect(readdirSync(join(out, 'db/migrations'))).toEqual(migrations);
    expect(existsSync(join(out, 'db/pglite-first-start-process.js'))).toBe(true);
    expect(existsSync(join(out, 'db/pglite-first-start-process.mjs'))).toBe(false);
  });

  it('serves: the compiled `pont serve` migrates the database and answers /readyz', async () => {
    const pont = spawn(process.execPath, ['--enable-source-maps', join(out, 'bin.js'), 'serve'], { cwd: repo, env: { ...env, LOG_LEVEL: 'info' } });
    try {
      let port: string | undefined;
      for await (const line of createInterface({ input: pont.stdout })) if ((port = /listening on http:\/\/[^:]+:(\d+)/.exec(line)?.[1])) break;
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    } finally {
      pont.kill('SIGTERM');
    }
    expect(await new Promise((done) => pont.on('exit', done))).toBe(0);
  }, 60_000);

  it('imports a Synthea bundle, validating on worker threads that load the compiled modules', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pont-build-synthea-'));
    try {
      extract({ file: join(repo, 'samples/synthea-r4-50-patients.tar.gz'), cwd: dir, sync: true });
      // One patient's transaction bundle: well over the 16 resources from which validation goes to the threads.
      const file = join(dir, readdirSync(dir).filter((f) => f.endsWith('.json')).sort()[0]!);
      const { stdout } = await run(process.execPath, ['--enable-source-maps', join(out, 'bin.js'), 'import', file], { cwd: repo, env });
      expect(stdout).toMatch(/Imported \d{3,} resources from 1 files in [\d.]+ s \(\d+ resources\/s\); 0 failures/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
