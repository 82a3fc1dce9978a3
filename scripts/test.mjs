#!/usr/bin/env node
/**
 * `npm test`: vitest (its arguments are this script's), and beside it the type check (`tsc -p .`) and the Python and
 * PHP client suites. The client suites spend most of their minute each waiting (their own Pont process starting and
 * seeding, Retry-After, timeouts), and the type check (8-15 s of one core) ran alone before everything else; all
 * three now run while vitest does, whose first seconds (its build, its workers' start) leave a core free. What they
 * print is shown whole once vitest has ended, so that no line of theirs lands inside vitest's report. Every suite runs
 * to its end; the exit code is 1 if any failed.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('..', import.meta.url));

/** Runs a command in the repository; `capture`: its output kept for later instead of shown. */
function run(command, args, capture) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: repo, stdio: capture ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    const chunks = [];
    if (capture) for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk) => chunks.push(chunk));
    child.on('error', (err) => resolve({ ok: false, output: `${command}: ${err.message}\n` }));
    child.on('close', (code) => resolve({ ok: code === 0, output: Buffer.concat(chunks).toString('utf8') }));
  });
}

const beside = [
  ['Type check (tsc -p .)', run(process.execPath, [fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url)), '-p', '.'], true)],
  ['Python client', run('npm', ['run', '-s', 'test:python'], true)],
  ['PHP client', run('npm', ['run', '-s', 'test:php'], true)],
];
const vitest = await run(process.execPath, [fileURLToPath(new URL('../node_modules/vitest/vitest.mjs', import.meta.url)), 'run', ...process.argv.slice(2)], false);
let ok = vitest.ok;
for (const [name, pending] of beside) {
  const result = await pending;
  process.stdout.write(`\n── ${name}: ${result.ok ? 'passed' : 'FAILED'} ──\n${result.output}`);
  ok &&= result.ok;
}
process.exit(ok ? 0 : 1);
