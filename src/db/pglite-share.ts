import { chmodSync, closeSync, existsSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Database, Queryable, QueryResult } from './database';

/**
 * PGlite is one process's database: a second process opening the same data directory would
 * corrupt it. The process that opens it holds a lock file; while it runs, it shares the database
 * with operator commands (`pont clients create`, `pont keys rotate`, `pont import`…) over a Unix
 * socket in the data directory, so those work against a running service as they do on PostgreSQL.
 */
export const lockFile = (dataDir: string) => resolve(dataDir, 'pont.pid');
export const socketFile = (dataDir: string) => resolve(dataDir, 'pont.sock');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The pid holding `dataDir`, if a live process does. */
export function holderOf(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(lockFile(dataDir), 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Takes the data directory for this process; returns the release function. */
export function lockDataDir(dataDir: string): () => void {
  const file = lockFile(dataDir);
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw err;
      const holder = holderOf(dataDir);
      if (holder) throw new Error(`The embedded database in ${dataDir} is in use by process ${holder}`);
      rmSync(file, { force: true }); // left by a process that died: take it over
    }
  }
  const release = () => {
    if (holderOf(dataDir) === undefined) rmSync(file, { force: true });
    process.removeListener('exit', release);
  };
  process.on('exit', release);
  return release;
}

interface Request {
  id: number;
  op: 'query' | 'exec' | 'begin' | 'commit' | 'rollback';
  sql?: string;
  params?: unknown[];
}

// Dates and byte arrays survive the JSON round trip.
const encode = (value: unknown) =>
  JSON.stringify(value, function (key, v) {
    const raw = this[key];
    if (raw instanceof Date) return { $date: raw.toISOString() };
    if (raw instanceof Uint8Array) return { $bytes: Buffer.from(raw).toString('base64') };
    return v;
  });
const decode = (text: string) =>
  JSON.parse(text, (_key, v) => {
    if (v && typeof v === 'object' && '$date' in v) return new Date(v.$date);
    if (v && typeof v === 'object' && '$bytes' in v) return Buffer.from(v.$bytes, 'base64');
    return v;
  });

/** Serves `db` to operator commands on the data directory's socket (owner-only). */
export async function shareDatabase(db: Database, dataDir: string): Promise<() => Promise<void>> {
  const path = socketFile(dataDir);
  rmSync(path, { force: true });
  const server: Server = createServer((socket: Socket) => {
    let tx: Queryable | undefined;
    let finish: ((commit: boolean) => void) | undefined;
    const reply = (id: number, body: Record<string, unknown>) => socket.write(encode({ id, ...body }) + '\n');
    const lines = createInterface({ input: socket });
    // One request at a time per connection, in order.
    let chain = Promise.resolve();
    lines.on('line', (line) => {
      chain = chain.then(async () => {
        const req = decode(line) as Request;
        try {
          if (req.op === 'begin') {
            await new Promise<void>((started) => {
              void db
                .transaction(
                  (t) =>
                    new Promise<void>((resolveTx, rejectTx) => {
                      tx = t;
                      finish = (commit) => (commit ? resolveTx() : rejectTx(new Error('rollback')));
                      started();
                    }),
                )
                .catch(() => undefined);
            });
            reply(req.id, { ok: true });
          } else if (req.op === 'commit' || req.op === 'rollback') {
            finish?.(req.op === 'commit');
            tx = finish = undefined;
            await db.query('SELECT 1'); // returns once the transaction has ended
            reply(req.id, { ok: true });
          } else {
            const target = tx ?? db;
            if (req.op === 'exec') {
              await target.exec(req.sql!);
              reply(req.id, { ok: true });
            } else {
              const result = await target.query(req.sql!, req.params);
              reply(req.id, { ok: true, rows: result.rows, rowCount: result.rowCount });
            }
          }
        } catch (err) {
          const e = err as { message?: string; code?: string };
          reply(req.id, { ok: false, error: { message: e.message ?? String(err), code: e.code } });
        }
      });
    });
    socket.on('close', () => finish?.(false)); // a command that died mid-transaction: roll it back
    socket.on('error', () => undefined);
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(path, () => ok());
  });
  chmodSync(path, 0o600); // only the service's own user may use it
  return () =>
    new Promise<void>((done) => {
      server.close(() => done());
      rmSync(path, { force: true });
    });
}

/** The database of the process holding `dataDir`, through its socket. */
export async function connectSharedDatabase(dataDir: string): Promise<Database> {
  const path = socketFile(dataDir);
  if (!existsSync(path)) throw new Error(`The embedded database in ${dataDir} is in use by process ${holderOf(dataDir)}, which does not share it`);
  const socket = createConnection(path);
  await new Promise<void>((ok, fail) => {
    socket.once('connect', ok);
    socket.once('error', fail);
  });
  const pending = new Map<number, { ok: (v: any) => void; fail: (e: unknown) => void }>();
  let nextId = 1;
  createInterface({ input: socket }).on('line', (line) => {
    const msg = decode(line) as { id: number; ok: boolean; error?: { message: string; code?: string } };
    const waiter = pending.get(msg.id);
    pending.delete(msg.id);
    if (!waiter) return;
    if (msg.ok) waiter.ok(msg);
    else waiter.fail(Object.assign(new Error(msg.error!.message), { code: msg.error!.code }));
  });
  socket.on('close', () => {
    for (const w of pending.values()) w.fail(new Error('The Pont service closed the database connection'));
    pending.clear();
  });
  const send = (req: Omit<Request, 'id'>): Promise<any> =>
    new Promise((ok, fail) => {
      const id = nextId++;
      pending.set(id, { ok, fail });
      socket.write(encode({ id, ...req }) + '\n');
    });
  const query = async <T>(sql: string, params?: readonly unknown[]): Promise<QueryResult<T>> => {
    const { rows, rowCount } = await send({ op: 'query', sql, params: params as unknown[] | undefined });
    return { rows, rowCount };
  };
  const exec = async (sql: string) => void (await send({ op: 'exec', sql }));
  let inTransaction = false;
  return {
    backend: 'pglite',
    query,
    exec,
    async transaction(fn) {
      if (inTransaction) throw new Error('Nested transactions are not supported');
      inTransaction = true;
      await send({ op: 'begin' });
      try {
        const result = await fn({ query, exec });
        await send({ op: 'commit' });
        return result;
      } catch (err) {
        await send({ op: 'rollback' });
        throw err;
      } finally {
        inTransaction = false;
      }
    },
    // An operator command keeps no cache to invalidate: it never reports ready.
    listen: async () => async () => undefined,
    // The serving process's PGlite told its listeners as the statement ended.
    listenersCaughtUp: async () => undefined,
    close: async () => void socket.end(),
  };
}
