import client from 'prom-client';
import type { Database } from './database';

/**
 * What a running server reads from its database at each scrape, in a registry of its own: the webhook outbox,
 * the audit materialiser's backlog, the FHIR Subscriptions fan-out's queue, and the connections. Two indexed queries
 * (partial indexes on the pending rows) and one of the fan-out's queue (a table emptied as it is numbered). In a cluster every process reports the same database: these are aggregated with `max`, the
 * connections with `sum`.
 */
export function databaseMetrics(db: Database): client.Registry {
  const registry = new client.Registry();
  // The gauges of one scrape are collected together (prom-client reads them at once): one reading shared by all.
  let reading: Promise<Backlogs> | undefined;
  const read = () =>
    (reading ??= Promise.all([
      backlog(db, `SELECT count(*) AS n, extract(epoch FROM now() - min(created_at))::float8 AS age FROM webhook_deliveries WHERE status = 'pending'`),
      backlog(db, 'SELECT count(*) AS n, extract(epoch FROM now() - min(recorded))::float8 AS age FROM audit_log WHERE NOT materialized'),
      backlog(db, 'SELECT count(*) AS n, extract(epoch FROM now() - min(created_at))::float8 AS age FROM fhir_subscription_changes'),
    ])
      .then(([outbox, audit, fanout]) => ({ outbox, audit, fanout }))
      .finally(() => (reading = undefined)));
  const fromDatabase = (name: string, help: string, pick: (r: Backlogs) => number) =>
    new client.Gauge({
      name,
      help,
      registers: [registry],
      aggregator: 'max',
      async collect() {
        this.set(pick(await read()));
      },
    });
  fromDatabase('pont_webhook_outbox_pending', 'Webhook deliveries waiting (pending)', (r) => r.outbox.count);
  fromDatabase('pont_webhook_outbox_oldest_pending_age_seconds', 'Age of the oldest pending webhook delivery (0: none)', (r) => r.outbox.ageSeconds);
  fromDatabase('pont_audit_unmaterialised_rows', 'Audit rows not yet turned into AuditEvents', (r) => r.audit.count);
  fromDatabase('pont_audit_materialiser_lag_seconds', 'Age of the oldest audit row not yet turned into an AuditEvent (0: none)', (r) => r.audit.ageSeconds);
  fromDatabase('pont_fhir_subscription_fanout_queued', 'Changes queued for the FHIR Subscriptions fan-out, not yet numbered (set-aside ones included)', (r) => r.fanout.count);
  fromDatabase('pont_fhir_subscription_fanout_lag_seconds', 'Age of the oldest change the FHIR Subscriptions fan-out has not numbered (0: none)', (r) => r.fanout.ageSeconds);
  new client.Gauge({
    name: 'pont_db_connections',
    help: 'Database connections of this process by pool (primary; replica: DATABASE_READ_URL) and state: total, idle, and waiting (statements queued for one)',
    labelNames: ['pool', 'state'] as const,
    registers: [registry],
    collect() {
      for (const [pool, of] of [['primary', db], ['replica', db.reader]] as const) {
        const c = of?.connections?.();
        if (!c) continue;
        for (const [state, n] of Object.entries(c)) this.set({ pool, state }, n);
      }
    },
  });
  return registry;
}

interface Backlog {
  count: number;
  ageSeconds: number;
}

interface Backlogs {
  outbox: Backlog;
  audit: Backlog;
  fanout: Backlog;
}

async function backlog(db: Database, sql: string): Promise<Backlog> {
  const row = (await db.query<{ n: string; age: number | null }>(sql)).rows[0]!;
  return { count: Number(row.n), ageSeconds: Math.max(0, row.age ?? 0) };
}
