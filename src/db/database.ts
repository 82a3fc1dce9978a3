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
  close(): Promise<void>;
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

/**
 * Runs `fn` inside a savepoint of `tx`, so a failure undoes only its own writes
 * (used by batch bundles and by retry-on-conflict inside a larger transaction).
 */
export async function withSavepoint<T>(tx: Queryable, fn: () => Promise<T>): Promise<T> {
  const name = `sp_${Math.random().toString(36).slice(2, 10)}`;
  await tx.query(`SAVEPOINT ${name}`);
  try {
    const result = await fn();
    await tx.query(`RELEASE SAVEPOINT ${name}`);
    return result;
  } catch (err) {
    await tx.query(`ROLLBACK TO SAVEPOINT ${name}`);
    throw err;
  }
}
