/**
 * The CLI explains itself, as real processes: the compiled build (`pontCommand`, as the image runs it), and the
 * checkout's launcher `bin/pont.js` on the sources (the last test), as an operator would. What each command line
 * answers (every command's help, the usage errors) is checked in process, in seconds, by test/cli-help.unit.test.ts;
 * here a sample of each kind shows the compiled command answers byte for byte what runCli does there.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { commands } from '../src/cli';
import { invokedAs } from '../src/cli-args';
import { cliInProcessAs } from './cli-in-process';
import { pontCommand } from './harness';

const repo = fileURLToPath(new URL('..', import.meta.url));

/** Exit code, stdout and stderr of `pont ...args` (help needs no database); `launcher`: through `node bin/pont.js`. */
function pont(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(pontCommand(...args));
}
const launcher = (...args: string[]) => run([join(repo, 'bin/pont.js'), ...args]);
function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, argv, { cwd: repo, env: { ...process.env, LOG_LEVEL: 'error' } }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code) : 0, stdout, stderr }),
    );
  });
}

/** A few processes at a time: the machine is shared. */
async function inBatches<T, R>(items: T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const SLOW = 240_000;

describe('pont --help (real processes)', () => {
  it('pont --help and pont help list every command and the exit codes, exit 0', async () => {
    for (const args of [['--help'], ['help'], ['-h']]) {
      const { code, stdout } = await pont(...args);
      expect(code).toBe(0);
      for (const command of commands) expect(stdout).toMatch(new RegExp(`^  ${escape(command.name)}  `, 'm'));
      expect(stdout).toMatch(/Exit codes:\n {2}0 {2}success\n {2}1 .*\n {2}2 {2}usage error/);
    }
  }, SLOW);

  // Every command's help, the usage errors and `help …` are asked of runCli in process (test/cli-help.unit.test.ts);
  // the compiled command, started as the image starts it, answers each kind of them byte for byte the same.
  it('the compiled command answers as runCli does: a command\'s and a group\'s help, help COMMAND, usage errors (exit 2, stderr only)', async () => {
    const lines = [
      ['clients', 'create', '--help'],
      ['keys', '--help'],
      ['help', 'agents', 'create'],
      ['help', '--help'],
      ['clients', 'create', '--name', 'x'],
      ['client', 'list'],
      ['help', 'nothing'],
      [],
    ];
    const real = await inBatches(lines, 4, (args) => pont(...args));
    // What it tells to run names the command as it was run: node and the build's bin.js.
    const program = invokedAs(pontCommand().at(-1), process.env, repo);
    for (const [i, args] of lines.entries()) {
      const inProcess = await cliInProcessAs(program, ...args);
      expect(inProcess.stdout + inProcess.stderr, `pont ${args.join(' ')}`).not.toBe('');
      expect(real[i], `pont ${args.join(' ')}`).toEqual(inProcess);
    }
    expect(real.map((r) => r.code)).toEqual([0, 0, 0, 0, 2, 2, 2, 2]);
  }, SLOW);

  // Issue 42: `npx pont` and `npm run pont --` add npm's own lines (its run banner on stdout, its notices on stderr).
  it('the help recommends node bin/pont.js, and npm in this checkout prints no update notice', async () => {
    const { code, stdout } = await launcher('--help');
    expect(code).toBe(0);
    for (const command of commands) expect(stdout).toMatch(new RegExp(`^  ${escape(command.name)}  `, 'm'));
    expect(stdout).toContain('node bin/pont.js <command>');
    expect(stdout).toContain("Run 'node bin/pont.js <command> --help' for a command's options and examples.");
    const usage = await launcher('clients', 'create', '--name', 'x');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("Run 'node bin/pont.js clients create --help' for usage.");
    expect(stdout).toContain('npm run -s pont -- <command>');
    // The project's .npmrc, whatever the person's own npm configuration (a HOME without one).
    const home = mkdtempSync(join(tmpdir(), 'pont-home-'));
    try {
      const { stdout: notifier } = await promisify(execFile)('npm', ['config', 'get', 'update-notifier'], { cwd: repo, env: { PATH: process.env.PATH!, HOME: home } });
      expect(notifier.trim()).toBe('false');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }, SLOW);
});
