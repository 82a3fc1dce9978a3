import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { pontCommand } from './harness';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

/** `pont serve` as a child process: its stdout and stderr, and its URL once it listens. */
export async function serve(args: string[], env: Record<string, string>): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn(process.execPath, pontCommand('serve', ...args), {
    cwd: repoRoot,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve((clearInterval(timer), m[1]!));
    }, 50);
    child.once('exit', () => (clearInterval(timer), reject(new Error(`exited: ${out}`))));
  });
  return { child, url, output: () => out };
}

/** SIGTERM; the exit code. */
export async function terminate(child: ChildProcess): Promise<number | null> {
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  return (await exited)[0];
}

/** The JSON log lines of a process's output. */
export const jsonLines = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, any>);
