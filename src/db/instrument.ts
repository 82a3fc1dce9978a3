import { dbStatements, since } from '../metrics';
import type { Database, Queryable } from './database';

/** `query` timed into the statement-latency histogram (src/metrics.ts), on the database and in its transactions. */
function timed(q: Queryable): Queryable['query'] {
  return async (sql, params) => {
    const started = performance.now();
    try {
      return await q.query(sql, params);
    } finally {
      dbStatements.observe(since(started));
    }
  };
}

/** The database with every statement measured: what openDatabase returns, whichever the backend. */
export function instrumented(db: Database): Database {
  return { ...db, query: timed(db), transaction: (fn) => db.transaction((tx) => fn({ ...tx, query: timed(tx) })) };
}
