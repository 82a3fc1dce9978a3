import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { NPM_START_ENV, repoRoot } from './fhir-data';

export interface ServeProcess {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * `pont serve ARGS…` of this checkout in a process of its own, as `npm start` runs it (V8 old space capped at 512 MB, NPM_START_ENV),
 * with `env` over this process's; resolves with the URL it prints once it listens (bench/growth.ts,
 * bench/metrics-compare.ts).
 */
export async function spawnServe(args: string[], env: Record<string, string>): Promise<ServeProcess> {
  const child = spawn(process.execPath, [join(repoRoot, 'bin', 'pont.js'), 'serve', ...args], {
    env: { ...process.env, ...NPM_START_ENV, NODE_OPTIONS: '--max-old-space-size=512', PONT_ENV: 'development', HOST: '127.0.0.1', LOG_LEVEL: 'error', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((r) => child.once('exit', r));
  const url = await new Promise<string>((resolveUrl, reject) => {
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const m = /Pont is listening on (http:\/\/\S+)/.exec(output);
      if (m) resolveUrl(m[1]!);
    });
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    void exited.then(() => reject(new Error(`pont serve exited before listening:\n${output}`)));
  });
  return {
    url,
    child,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
