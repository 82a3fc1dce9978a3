import { PGlite, types } from '@electric-sql/pglite';
import type { Database, Queryable, QueryResult } from './database';

/**
 * PGlite is one connection. A transaction holds it exclusively: every other query waits on the
 * same lock until the transaction ends, so nothing from another request can slip into it.
 */
export async function openPglite(dataDir?: string): Promise<Database> {
  const db = await PGlite.create(dataDir, {
    // Match node-postgres: int8 and numeric come back as strings (no silent precision loss).
    parsers: {
      [types.INT8]: (v: string) => v,
      [types.NUMERIC]: (v: string) => v,
    },
  });
  let lock: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(fn: () => Promise<T>): Promise<T> => {
    const result = lock.then(fn, fn);
    lock = result.catch(() => undefined);
    return result;
  };
  const run = async <T>(sql: string, params?: readonly unknown[]): Promise<QueryResult<T>> => {
    const result = await db.query<T>(sql, params as unknown[] | undefined);
    // affectedRows is 0 for a SELECT; node-postgres reports the rows returned there.
    return { rows: result.rows, rowCount: result.affectedRows || result.rows.length };
  };

  return {
    backend: 'pglite',
    query: (sql, params) => exclusive(() => run(sql, params)),
    exec: (sql) => exclusive(async () => void (await db.exec(sql))),
    transaction: (fn) =>
      exclusive(async () => {
        const tx: Queryable = { query: (sql, params) => run(sql, params), exec: async (sql) => void (await db.exec(sql)) };
        await db.exec('BEGIN');
        try {
          const result = await fn(tx);
          await db.exec('COMMIT');
          return result;
        } catch (err) {
          await db.exec('ROLLBACK');
          throw err;
        }
      }),
    close: () => exclusive(() => db.close()),
  };
}
