import { format } from 'node:util';
import { runCli } from '../src/cli';

/**
 * `pont ...args` in this process: runCli, what bin.js runs with process.argv.slice(2) (its return is the process's
 * exit code), with what it writes through console.log and console.error kept as the process's stdout and stderr
 * would hold them. For the answers that open no database (help, usage errors): a real process for each (0.7 s to
 * start, more on a busy machine) told nothing more, the start being the same for every command line; one real
 * process each for a sample of them checks that the compiled command answers the same (test/cli-help.test.ts).
 */
export const cliInProcess = (...args: string[]) => cliInProcessAs('pont', ...args);

/** cliInProcess, the command named `program` in what it tells to run (as runCli names it after how it was run: invokedAs). */
export async function cliInProcessAs(program: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { log, error } = console;
  let stdout = '';
  let stderr = '';
  console.log = (...parts: unknown[]) => void (stdout += `${format(...parts)}\n`);
  console.error = (...parts: unknown[]) => void (stderr += `${format(...parts)}\n`);
  try {
    const code = await runCli(args, program);
    return { code, stdout, stderr };
  } finally {
    console.log = log;
    console.error = error;
  }
}
