/** Custom plans at least this many times and no generic one: PostgreSQL plans the statement at every execution. */
export const PLANNED_ANEW_AFTER = 10;

/** What one connection's PostgreSQL session did with one prepared statement (pg_prepared_statements). */
export interface PreparedPlans {
  connection: number;
  statement: string;
  custom: number;
  generic: number;
}

type Db = { query<R>(text: string, values?: unknown[]): Promise<{ rows: R[] }> };

/** Every prepared statement of every connection of Pont's pool, with how often each was planned custom and generic. */
export async function preparedPlans(db: Db): Promise<PreparedPlans[]> {
  // Every connection of the pool at once (each holds its own prepared statements): the sleep keeps each one busy.
  const answers = await Promise.all(
    Array.from({ length: 20 }, () =>
      db.query<{ pid: number; statement: string; generic_plans: string; custom_plans: string }>(
        'SELECT pg_backend_pid() AS pid, p.statement, p.generic_plans, p.custom_plans FROM pg_prepared_statements p, (SELECT pg_sleep(0.05)) s',
      ),
    ),
  );
  const seen = new Map<string, PreparedPlans>();
  for (const { rows } of answers)
    for (const r of rows) seen.set(`${r.pid}\u0000${r.statement}`, { connection: r.pid, statement: r.statement.replace(/\s+/g, ' '), custom: Number(r.custom_plans), generic: Number(r.generic_plans) });
  return [...seen.values()];
}

/**
 * The prepared statements of Pont's pool that PostgreSQL keeps planning anew: a statement whose generic plan is priced
 * above its custom ones pays its planning at every execution, which can cost more than running it (the webhook
 * fan-out's 1.5 ms, the audit row of a write's 0.2 ms, stop 63). Searches may rightly stay custom (their values decide
 * the plan); the hot fixed shapes should not. Held by test/prepared-plans.test.ts for the write path.
 */
export async function plannedAnew(db: Db): Promise<Array<{ statement: string; custom: number }>> {
  const worst = new Map<string, number>();
  for (const p of await preparedPlans(db)) if (p.generic === 0 && p.custom >= PLANNED_ANEW_AFTER) worst.set(p.statement, Math.max(worst.get(p.statement) ?? 0, p.custom));
  return [...worst].sort((a, b) => b[1] - a[1]).map(([statement, custom]) => ({ statement, custom }));
}
