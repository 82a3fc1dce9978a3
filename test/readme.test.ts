import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import { startPont, type RunningPont } from '../src/server';
import { backend, createScratchDatabase, freePort } from './harness';

// The shell blocks of the README and the guides that a reader pastes, run as written against a fresh server (only
// its URL, and the receiver's port, put in). The generated tables: test/readme-blocks.unit.test.ts; commands and
// links: test/docs-links.unit.test.ts.
const repo = fileURLToPath(new URL('..', import.meta.url));
const readme = readFileSync(join(repo, 'README.md'), 'utf8');
const integrators = readFileSync(join(repo, 'docs/integrators.md'), 'utf8');

/** The first ```sh block after `heading` in `text`. */
function shellBlockAfter(text: string, heading: RegExp): string {
  const at = text.search(heading);
  expect(at, `no heading ${heading}`).toBeGreaterThanOrEqual(0);
  return /```sh\n([\s\S]*?)```/.exec(text.slice(at))![1]!;
}

describe('the shell blocks of the documentation, run as written', () => {
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

  const run = (script: string) => promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], { cwd: repo, env: { ...process.env, ...env } });

  it('the consent walk-through (docs/integrators.md) answers what its comments say', async () => {
    const block = shellBlockAfter(integrators, /^### Walk-through/m);
    const { stdout } = await run(block.replace(/^PONT=\S+/m, `PONT=${pont.url}`));
    const expected = [...block.matchAll(/#\s+(\d{3}|"[a-z]+")\s*$/gm)].map((m) => m[1]);
    expect(stdout.trim().split('\n')).toEqual(expected);
  }, 120_000);

  it("the README's first five minutes: demo, token, a FHIR search, a Connect record, a webhook received", async () => {
    const block = shellBlockAfter(readme, /^## The first five minutes/m);
    expect(block).toMatch(/^PONT=http:\/\/127\.0\.0\.1:8080$/m); // what `npm start` listens on
    const port = await freePort();
    const { stdout } = await run(block.replace(/^PONT=\S+/m, `PONT=${pont.url}`).replaceAll('9000', String(port)));
    const delivery = stdout.split('\n').find((line) => line.startsWith('{"id":"evt_'));
    expect(JSON.parse(delivery!)).toMatchObject({ type: 'lab_result.released', data: { test_name: 'Hemoglobin' } });
    expect(stdout).toMatch(/"display_name": "/); // the diagnosis record
    expect(stdout).toMatch(/"webhook_secret": "whsec_/);
    expect(stdout.trim().split('\n').at(-1)).toBe('204'); // unsubscribed
  }, 180_000);
});
