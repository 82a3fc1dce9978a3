/** Custom plans at least this many times and no generic one: PostgreSQL plans the statement at every execution. */
export const PLANNED_ANEW_AFTER = 10;

/**
 * The prepared statements of Pont's pool that PostgreSQL keeps planning anew (pg_prepared_statements, per connection):
 * a statement whose generic plan is priced above its custom ones pays its planning at every execution, which can
 * cost more than running it (the webhook fan-out's 1.5 ms, the audit row of a write's 0.2 ms, stop 63). Searches may
 * rightly stay custom (their values decide the plan); the hot fixed shapes should not.
 */
export async function plannedAnew(db: { query<R>(text: string, values?: unknown[]): Promise<{ rows: R[] }> }): Promise<Array<{ statement: string; custom: number }>> {
  // Every connection of the pool at once (each holds its own prepared statements): the sleep keeps each one busy.
  const answers = await Promise.all(
    Array.from({ length: 20 }, () =>
      db.query<{ pid: number; statement: string; generic_plans: string; custom_plans: string }>(
        'SELECT pg_backend_pid() AS pid, p.statement, p.generic_plans, p.custom_plans FROM pg_prepared_statements p, (SELECT pg_sleep(0.05)) s',
      ),
    ),
  );
  const worst = new Map<string, number>();
  for (const { rows } of answers)
    for (const r of rows) if (Number(r.generic_plans) === 0 && Number(r.custom_plans) >= PLANNED_ANEW_AFTER) worst.set(r.statement, Math.max(worst.get(r.statement) ?? 0, Number(r.custom_plans)));
  return [...worst].sort((a, b) => b[1] - a[1]).map(([statement, custom]) => ({ statement: statement.replace(/\s+/g, ' '), custom }));
}
