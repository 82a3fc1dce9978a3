import { format } from 'node:util';
import { runCli } from '../src/cli';

/**
 * `pont ...args` in this process: runCli, what bin.js runs with process.argv.slice(2) (its return is the process's
 * exit code), with what it writes through console.log and console.error kept as the process's stdout and stderr
 * would hold them. For the answers that open no database (help, usage errors): a real process for each (0.7 s to
 * start, more on a busy machine) told nothing more, the start being the same for every command line; one real
 * process each for a sample of them checks that the compiled command answers the same (test/cli-help.test.ts).
 */
export async function cliInProcess(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { log, error } = console;
  let stdout = '';
  let stderr = '';
  console.log = (...parts: unknown[]) => void (stdout += `${format(...parts)}\n`);
  console.error = (...parts: unknown[]) => void (stderr += `${format(...parts)}\n`);
  try {
    const code = await runCli(args);
    return { code, stdout, stderr };
  } finally {
    console.log = log;
    console.error = error;
  }
}
