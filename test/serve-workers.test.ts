import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { backend, createScratchDatabase, pontCommand } from './harness';
import { eventually } from './eventually';

/** `pont serve --workers N`: N processes on one port, restarted when one dies, all stopped by one signal. */
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
/** The script `pontCommand` runs (the compiled bin.js): the workers of its primary run it too. */
const entry = pontCommand().find((a) => !a.startsWith('--'))!;
/** The worker processes of a `pont serve` primary (its children that run pont, not others such as tsx's esbuild service). */
const children = (pid: number) =>
  execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(pid)], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l.includes(entry))
    .map((l) => Number(l.trim().split(/\s+/)[0]));

describe('pont serve --workers', () => {
  let server: ChildProcess | undefined;
  afterAll(() => {
    server?.kill('SIGKILL');
  });

  it('refuses several workers on the embedded database', () => {
    const env = { ...process.env, PORT: '0', LOG_LEVEL: 'error' } as Record<string, string | undefined>;
    delete env.DATABASE_URL;
    const run = () => execFileSync(process.execPath, pontCommand('serve', '--workers', '2'), { cwd: repoRoot, env, encoding: 'utf8', stdio: 'pipe' });
    expect(run).toThrow(/--workers needs PostgreSQL/);
  });

  it.runIf(backend === 'postgres')('serves from N processes, starts a dead one again, and stops them all on SIGTERM', async () => {
    const scratch = await createScratchDatabase({ migrated: true });
    try {
      server = spawn(process.execPath, pontCommand('serve', '--workers', '2'), {
        cwd: repoRoot,
        env: { ...process.env, DATABASE_URL: scratch.url, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'error' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      const url = await new Promise<string>((resolve, reject) => {
        const heard = (c: Buffer) => {
          out += c;
          const m = /listening on (http:\/\/\S+).*2 worker processes/.exec(out);
          if (m) resolve(m[1]!);
        };
        server!.stdout!.on('data', heard);
        server!.stderr!.on('data', heard);
        server!.once('exit', () => reject(new Error(`exited: ${out}`)));
      });
      const workers = children(server.pid!);
      expect(workers).toHaveLength(2);
      for (let i = 0; i < 10; i++) expect((await fetch(`${url}/healthz`)).status).toBe(200);

      // A worker that dies is replaced; the others serve meanwhile.
      process.kill(workers[0]!, 'SIGKILL');
      const replaced = await eventually(() => {
        const now = children(server!.pid!);
        expect(now).toHaveLength(2);
        expect(now).not.toContain(workers[0]);
        return now;
      }, { intervalMs: 100 }); // each look runs ps
      expect((await fetch(`${url}/healthz`)).status).toBe(200);

      const exited = once(server, 'exit');
      server.kill('SIGTERM');
      const [code] = await exited;
      server = undefined;
      expect(code).toBe(0);
      for (const pid of replaced) expect(() => process.kill(pid, 0)).toThrow();
    } finally {
      await scratch.drop();
    }
  });
});
