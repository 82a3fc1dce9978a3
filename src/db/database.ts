/**
 * One SQL interface over two backends: embedded PGlite (default) and a PostgreSQL server via `pg`.
 * Both speak the same PostgreSQL dialect, so there is one set of migrations and one set of queries.
 */

export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
}

/** Something that runs SQL: the database itself, or an open transaction. */
export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<T>>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

export interface Database extends Queryable {
  readonly backend: 'pglite' | 'postgres';
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Hears every NOTIFY on `channel`, from any process, until the returned function is called. On PostgreSQL
   * one connection of its own listens for the whole process and is opened again when it drops; PGlite hears
   * its own notifications as the notifying statement ends.
   */
  listen(channel: string, handlers: ListenHandlers): Promise<() => Promise<void>>;
  /**
   * Resolves once this process's listeners have heard every NOTIFY committed before the call: a change this
   * process just committed is then reflected in its own caches (other processes hear it as it arrives).
   */
  listenersCaughtUp(): Promise<void>;
  close(): Promise<void>;
  /** The connections of this process now (for the metrics): open, idle, and statements waiting for one. */
  connections?(): { total: number; idle: number; waiting: number };
  /**
   * The read replica's pool (DATABASE_READ_URL), for the lag-tolerant readers only (docs/operators.md "Read replicas");
   * absent: they read this database. Reach it through readerOf.
   */
  readonly reader?: ReadDatabase;
}

/**
 * What a lag-tolerant reader is given: single statements (no transaction, no LISTEN) whose answer may be a few
 * seconds old. Never for a check that must see a revocation, a consent change or the caller's own write at once.
 */
export type ReadDatabase = Pick<Database, 'backend' | 'query' | 'exec' | 'connections' | 'close'>;

/** Where the lag-tolerant readers read: the replica when one is configured, else the database itself. */
export function readerOf(db: Database): ReadDatabase {
  return db.reader ?? db;
}

/**
 * What a listener is told. A cache kept right by notifications trusts itself only between ready() and
 * lost(): while nobody listens, notifications are missed.
 */
export interface ListenHandlers {
  notify(payload: string): void;
  /** Listening now (at first, and again after a lost connection): every later NOTIFY arrives. */
  ready?(): void;
  /** The listening connection dropped: notifications may be missed until the next ready(). */
  lost?(): void;
}

/** Channel names are SQL identifiers Pont chooses; checked so they can be written into LISTEN. */
export function checkChannel(channel: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(channel)) throw new Error(`Invalid channel name ${channel}`);
  return channel;
}

/** SQLSTATE codes callers react to. */
export const SqlState = {
  uniqueViolation: '23505',
  serializationFailure: '40001',
  deadlockDetected: '40P01',
} as const;

export function sqlState(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

/** A transaction that lost to a concurrent one (serialization failure, deadlock): running it again may succeed. */
export const isContention = (err: unknown) => {
  const code = sqlState(err);
  return code === SqlState.serializationFailure || code === SqlState.deadlockDetected;
};

/** Times a transaction is run when it keeps losing to concurrent ones (isContention), the first run included. */
export const TRANSACTION_RUNS = 4;

/**
 * Runs `attempt` (one whole transaction) again when it fails with a serialization failure or a deadlock, up to
 * TRANSACTION_RUNS in all, after a short random pause that grows (so the transactions that collided do not collide
 * again); then the last error is thrown (the HTTP layer answers it 503 with Retry-After, never 500). The one place
 * for this: every Database's transaction() runs through it, so a transaction's function may run more than once and
 * must keep its effects in the transaction.
 */
export async function retryContention<T>(attempt: () => Promise<T>): Promise<T> {
  for (let run = 1; ; run++) {
    try {
      return await attempt();
    } catch (err) {
      if (run >= TRANSACTION_RUNS || !isContention(err)) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * 2 ** run));
    }
  }
}
