import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './harness';

/** Debian's pgbouncer (`apt-get install pgbouncer`), or where PGBOUNCER says. */
export const PGBOUNCER = process.env.PGBOUNCER ?? '/usr/sbin/pgbouncer';

export interface PgBouncer {
  child: ChildProcess;
  /** `databaseUrl` through PgBouncer. */
  url: string;
  stop(): Promise<void>;
}

/**
 * PgBouncer in transaction mode on a free port in front of `databaseUrl`'s database, with `poolSize` server
 * connections, its files in `dir`; resolves once it answers a query (test/pgbouncer.test.ts and bench/growth.ts).
 * No vitest here: the benchmark runs outside it.
 */
export async function startPgBouncer(dir: string, databaseUrl: string, poolSize: number): Promise<PgBouncer> {
  const direct = new URL(databaseUrl);
  const database = direct.pathname.slice(1);
  const port = await freePort();
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'userlist.txt'), '"postgres" ""\n');
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `${database} = host=${direct.hostname} port=${direct.port || 5432} dbname=${database} user=postgres`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'admin_users = postgres',
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 200',
      // node-postgres sends `options` (Pont's `-c jit=off`): PgBouncer refuses unknown startup parameters.
      'ignore_startup_parameters = options',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
    ].join('\n') + '\n',
  );
  // PgBouncer refuses to run as root (CI containers often are): it then runs as nobody, in a directory it can write.
  const asRoot = process.getuid?.() === 0;
  if (asRoot) chmodSync(dir, 0o777);
  const child = spawn(PGBOUNCER, [...(asRoot ? ['-u', 'nobody'] : []), join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  const exited = new Promise((r) => child.once('exit', r));
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGINT');
    await exited;
  };
  const url = Object.assign(new URL(databaseUrl), { port: String(port) }).toString();
  // Ready when it answers a query: the process starting is not enough (it listens a moment later).
  const started = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited: ${out}`);
    const c = new pg.Client({ connectionString: url });
    try {
      await c.connect();
      await c.query('SELECT 1');
      await c.end();
      return { child, url, stop };
    } catch (err) {
      await c.end().catch(() => undefined);
      if (Date.now() - started > 20_000) {
        await stop();
        throw new Error(`pgbouncer does not answer: ${(err as Error).message} ${out}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
