import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import { startPont, type RunningPont } from '../src/server';
import { backend, createScratchDatabase } from './harness';

const repo = fileURLToPath(new URL('..', import.meta.url));
// The generated tables: test/readme-blocks.unit.test.ts.
const readme = readFileSync(join(repo, 'README.md'), 'utf8');

describe('the consent walk-through, run as written', () => {
  let pont: RunningPont;
  let dataDir: string;
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>> | undefined;
  let env: Record<string, string>;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'pont-readme-'));
    scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
    env = { PORT: '0', LOG_LEVEL: 'error', PONT_DATA_DIR: join(dataDir, 'db'), ...(scratch ? { DATABASE_URL: scratch.url } : {}) };
    pont = await startPont(loadConfig(env));
  });
  afterAll(async () => {
    await pont?.close();
    await scratch?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers what its comments say', async () => {
    const block = /### Walk-through[^\n]*\n+```sh\n([\s\S]*?)```/.exec(readme)![1]!;
    const script = block.replace(/^PONT=\S+/m, `PONT=${pont.url}`);
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], { cwd: repo, env: { ...process.env, ...env } });
    const expected = [...block.matchAll(/#\s+(\d{3}|"[a-z]+")\s*$/gm)].map((m) => m[1]);
    expect(stdout.trim().split('\n')).toEqual(expected);
  }, 120_000);
});
