import { createHash } from 'node:crypto';
import pg from 'pg';
import { retryContention, type Database, type Queryable, type QueryResult } from './database';
import { dbWaits, since } from '../metrics';
import { PgListener } from './pg-listener';

/**
 * node-postgres defaults are the shared contract: int8 and numeric as strings, timestamptz as Date.
 * Behind PgBouncer in transaction mode (docs/operators.md "PgBouncer"): `listenUrl` takes the LISTEN connection straight to
 * PostgreSQL (a LISTEN lives in a session), and `prepare: false` sends every statement unnamed, for a PgBouncer
 * that cannot keep named statements (before 1.21, or max_prepared_statements = 0).
 */
export async function openPostgres(connectionString: string, maxConnections = 10, options: { listenUrl?: string; prepare?: boolean; readOnly?: boolean } = {}): Promise<Database> {
  // JIT compilation pays off for long analytical queries; for Pont's short ones it only adds tens of
  // milliseconds whenever an estimate crosses jit_above_cost (a population search's count, say).
  // A read pool's sessions are read-only: a write sent there by mistake fails, even on a server that would take it.
  const settings = `-c jit=off${options.readOnly ? ' -c default_transaction_read_only=on' : ''}`;
  const pool = new pg.Pool({ connectionString, max: maxConnections, options: settings });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  await pool.query('SELECT 1').catch(async (err) => {
    await pool.end().catch(() => undefined);
    throw err;
  });

  const statements = new PreparedStatements();
  const prepare = options.prepare ?? true;
  const run = async <T>(q: pg.Pool | pg.PoolClient, sql: string, params?: readonly unknown[]): Promise<QueryResult<T>> => {
    const name = params && prepare ? statements.nameOf(sql) : undefined;
    const result = await q.query(name ? { name, text: sql, values: params as unknown[] } : { text: sql, values: params as unknown[] | undefined });
    return { rows: result.rows as T[], rowCount: result.rowCount ?? 0 };
  };

  /** A connection from the pool, the wait measured (what pool.query does, less the measuring). */
  const connect = async () => {
    const asked = performance.now();
    const client = await pool.connect();
    dbWaits.observe(since(asked));
    return client;
  };
  /** One statement on a connection of its own; on an error the connection is dropped, as pool.query does. */
  const runAlone = async <T>(sql: string, params?: readonly unknown[]): Promise<QueryResult<T>> => {
    const client = await connect();
    try {
      const result = await run<T>(client, sql, params);
      client.release();
      return result;
    } catch (err) {
      client.release(err as Error);
      throw err;
    }
  };

  const listener = new PgListener(options.listenUrl ?? connectionString);

  return {
    backend: 'postgres',
    listen: (channel, handlers) => listener.listen(channel, handlers),
    listenersCaughtUp: () => listener.caughtUp(),
    query: runAlone,
    exec: async (sql) => void (await pool.query(sql)),
    transaction: (fn) => retryContention(() => transactionOnce(fn)),
    close: async () => {
      await listener.close();
      await pool.end();
    },
    connections: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
  };

  async function transactionOnce<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await connect();
    // A connection lost mid-transaction makes its query fail; the 'error' event must not crash the process.
    let lost: Error | undefined;
    const onError = (err: Error) => (lost = err);
    client.on('error', onError);
    const tx: Queryable = {
      query: (sql, params) => run(client, sql, params),
      exec: async (sql) => void (await client.query(sql)),
    };
    let broken = false;
    try {
      await client.query('BEGIN');
      const result = await fn(tx);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true; // connection is unusable: drop it rather than return it to the pool
      }
      throw err;
    } finally {
      client.removeListener('error', onError);
      client.release(broken || lost !== undefined);
    }
  }
}

/** A statement text run this often is prepared (pgjdbc's prepareThreshold has the same default). */
const PREPARE_AFTER = 5;
/** Distinct statements prepared per process at most (each connection keeps those it has used, with their plans). */
const MAX_PREPARED = 256;
/** Statement texts counted at most before the counts start again (dynamic SQL must not grow memory). */
const MAX_COUNTED = 10_000;

/**
 * Which statements run as named prepared statements: those with parameters seen PREPARE_AFTER times, up to
 * MAX_PREPARED. PostgreSQL then parses each once per connection and, where its plan cache finds a generic plan
 * as good as the custom ones, plans it once too: the hot statements (read by id, the search shapes, the audit
 * insert) are repeated texts with new parameters.
 */
class PreparedStatements {
  private readonly names = new Map<string, string>();
  private readonly seen = new Map<string, number>();

  nameOf(sql: string): string | undefined {
    const known = this.names.get(sql);
    if (known || this.names.size >= MAX_PREPARED) return known;
    const count = (this.seen.get(sql) ?? 0) + 1;
    if (count < PREPARE_AFTER) {
      if (this.seen.size >= MAX_COUNTED) this.seen.clear();
      this.seen.set(sql, count);
      return undefined;
    }
    this.seen.delete(sql);
    const name = `pont_${createHash('sha256').update(sql).digest('base64url').slice(0, 22)}`;
    this.names.set(sql, name);
    return name;
  }
}

