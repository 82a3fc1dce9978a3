/**
 * makeDirectory(Sync): what `mkdir -p` does, and an error (never a spin) where a directory that exists cannot hold
 * the one asked of it. Node's recursive mkdir spins at 100% CPU there: `PONT_DATA_DIR=/proc/x pont serve` hung.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { makeDirectory, makeDirectorySync } from './directories';

const root = mkdtempSync(join(tmpdir(), 'pont-dirs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** What makeDirectorySync throws for `path`, in a process of its own: a spin there is a timeout, not a stuck worker. */
function syncOutcome(path: string): string {
  const module = fileURLToPath(new URL('./directories.ts', import.meta.url));
  const script = `import('${module}').then((m) => { try { m.makeDirectorySync(${JSON.stringify(path)}, 0o700); console.log('made'); } catch (err) { console.log(err.code); } })`;
  const run = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], { timeout: 20_000, encoding: 'utf8' });
  return run.error ? `no answer (${run.error.message})` : run.stdout.trim();
}

describe('makeDirectory', () => {
  it('makes every missing directory of a path, with the mode asked; a directory already there is fine', async () => {
    const deep = join(root, 'a', 'b', 'c');
    makeDirectorySync(deep, 0o700);
    expect(statSync(deep).mode & 0o777).toBe(0o700);
    makeDirectorySync(deep, 0o700);
    await makeDirectory(join(root, 'x', 'y'), 0o700);
    expect(statSync(join(root, 'x', 'y')).isDirectory()).toBe(true);
    await makeDirectory(join(root, 'x', 'y'));
  });

  it('throws where a directory that exists cannot hold the one asked (a path under /proc, a link to nowhere, a file)', async () => {
    const dangling = join(root, 'dangling');
    symlinkSync(join(root, 'nowhere'), dangling);
    const file = join(root, 'file');
    writeFileSync(file, '');
    const paths = [join(dangling, 'data'), join(file, 'data'), file, ...(existsSync('/proc/self') ? ['/proc/pont-test', '/proc/pont-test/data'] : [])];
    for (const path of paths) {
      expect(syncOutcome(path), path).toMatch(/^E[A-Z]+$/);
      await expect(makeDirectory(path), path).rejects.toMatchObject({ code: expect.stringMatching(/^E[A-Z]+$/) });
    }
  }, 120_000);
});
