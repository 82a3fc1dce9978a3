import { AsyncLocalStorage } from 'node:async_hooks';
import { PGlite, types } from '@electric-sql/pglite';
import { checkChannel, retryContention, type Database, type Queryable, type QueryResult } from './database';
import { dbWaits, since } from '../metrics';

/**
 * PGlite is one connection. A transaction holds it exclusively: every other query waits on the
 * same lock until the transaction ends, so nothing from another request can slip into it.
 */
/**
 * PostgreSQL's settings inside PGlite. Its memory is the process's: one WebAssembly.Memory that grows and never
 * shrinks. PostgreSQL touches its whole shared buffer pool at start (128 MB by default); 16 MB keeps the hot index
 * pages, and the pages it does not hold come from the system's file cache, outside the process (docs/operators.md "Deployment").
 */
export const PGLITE_SETTINGS = { shared_buffers: '16MB' } as const;

/** The PGlite under each Database openPglite made (for embeddedImage). */
const engines = new WeakMap<Database, PGlite>();

/** An image of the data directory of a Database openPglite made, which `openPglite(undefined, image)` starts from. */
export async function embeddedImage(db: Database): Promise<Blob> {
  const engine = engines.get(db);
  if (!engine) throw new Error('embeddedImage: not a database openPglite made');
  return engine.dumpDataDir('none');
}

/** `image`: start from that image of a data directory (embeddedImage), not an empty one. */
export async function openPglite(dataDir?: string, image?: Blob): Promise<Database> {
  const db = await PGlite.create(dataDir, {
    ...(image && { loadDataDir: image }),
    startParams: [...PGlite.defaultStartParams, ...Object.entries(PGLITE_SETTINGS).flatMap(([name, value]) => ['-c', `${name}=${value}`])],
    // Match node-postgres: int8 and numeric come back as strings (no silent precision loss).
    parsers: {
      [types.INT8]: (v: string) => v,
      [types.NUMERIC]: (v: string) => v,
    },
  });
  let lock: Promise<unknown> = Promise.resolve();
  // Code running inside a transaction that uses the database itself (not the transaction) would wait for
  // the transaction to end, forever: refuse it at once, so the mistake is a failed request, not a hang.
  const inTransaction = new AsyncLocalStorage<true>();
  /** Statements and transactions queued for the connection, and whether one holds it (for the metrics). */
  let waiting = 0;
  let busy = false;
  const exclusive = <T>(fn: () => Promise<T>): Promise<T> => {
    if (inTransaction.getStore()) return Promise.reject(new Error('The database was used directly inside a transaction: use the transaction (it would wait for itself on PGlite)'));
    const queued = performance.now();
    waiting++;
    const held = () => {
      waiting--;
      busy = true;
      dbWaits.observe(since(queued));
      return fn().finally(() => (busy = false));
    };
    const result = lock.then(held, held);
    lock = result.catch(() => undefined);
    return result;
  };
  const run = async <T>(sql: string, params?: readonly unknown[]): Promise<QueryResult<T>> => {
    const result = await db.query<T>(sql, params as unknown[] | undefined);
    // affectedRows is 0 for a SELECT; node-postgres reports the rows returned there.
    return { rows: result.rows, rowCount: result.affectedRows || result.rows.length };
  };

  const database: Database = {
    backend: 'pglite',
    query: (sql, params) => exclusive(() => run(sql, params)),
    exec: (sql) => exclusive(async () => void (await db.exec(sql))),
    transaction: (fn) =>
      retryContention(() =>
        exclusive(async () => {
          const tx: Queryable = { query: (sql, params) => run(sql, params), exec: async (sql) => void (await db.exec(sql)) };
          await db.exec('BEGIN');
          try {
            const result = await inTransaction.run(true, () => fn(tx));
            await db.exec('COMMIT');
            return result;
          } catch (err) {
            await db.exec('ROLLBACK');
            throw err;
          }
        }),
      ),
    // PGlite calls back as the notifying statement (or its transaction's COMMIT) ends: nothing can be missed.
    listen: async (channel, handlers) => {
      const unlisten = await exclusive(() => db.listen(checkChannel(channel), handlers.notify));
      handlers.ready?.();
      return () => exclusive(() => unlisten());
    },
    listenersCaughtUp: async () => undefined,
    close: () => exclusive(() => db.close()),
    connections: () => ({ total: 1, idle: busy ? 0 : 1, waiting }),
  };
  engines.set(database, db);
  return database;
}
