import type { Database, Queryable } from '../db/database';
import type { EventType } from '../events/types';
import { entitledOrganizations, type EventAudience } from './entitlement';

/** Delivery workers LISTEN on this channel; a NOTIFY sent inside a transaction arrives when it commits. */
export const DELIVERY_CHANNEL = 'pont_webhook_deliveries';

const NEW_DELIVERY_ID = `'whdlv_' || replace(gen_random_uuid()::text, '-', '')`;

async function wakeWorkersOnCommit(tx: Queryable): Promise<void> {
  await tx.query('SELECT pg_notify($1, $2)', [DELIVERY_CHANNEL, '']);
}

/**
 * Fan-out, in the transaction that records the event: one delivery, due now, per active
 * subscription that is entitled to the event and subscribed to its type; the workers are woken
 * when the transaction commits. One statement, as it runs inside every recording transaction.
 * Returns how many deliveries it queued.
 */
export async function queueDeliveries(tx: Queryable, event: EventAudience & { id: string; type: EventType }): Promise<number> {
  const organizations = await entitledOrganizations(tx, event);
  if (!organizations.length) return 0;
  const { rows } = await tx.query<{ queued: string }>(
    `WITH queued AS (
       INSERT INTO webhook_deliveries (id, event_id, subscription_id, status, next_attempt_at)
       SELECT ${NEW_DELIVERY_ID}, $1, s.id, 'pending', now()
       FROM webhook_subscriptions s
       WHERE s.deleted_at IS NULL AND s.organization_id = ANY($2) AND $3 = ANY(s.subscribed_events)
       RETURNING 1
     ), woken AS (
       SELECT pg_notify($4, '') FROM (SELECT 1 FROM queued LIMIT 1) any_queued
     )
     SELECT (SELECT count(*) FROM queued) AS queued, (SELECT count(*) FROM woken) AS woken`,
    [event.id, organizations, event.type, DELIVERY_CHANNEL],
  );
  return Number(rows[0]!.queued);
}

interface EventRow {
  id: string;
  type: EventType;
  created_at: Date | string;
  organization_id: string | null;
  patient_id: string | null;
}

/**
 * The event, if `organizationId` is entitled to it (null: the operator, who sees every event);
 * otherwise undefined (callers answer 404 either way).
 */
async function findEntitledEvent(q: Queryable, organizationId: string | null, eventId: string): Promise<EventRow | undefined> {
  const { rows } = await q.query<EventRow>(
    'SELECT id, type, created_at, organization_id, patient_id FROM events WHERE id = $1',
    [eventId],
  );
  const event = rows[0];
  if (!event || organizationId === null) return event;
  const entitled = await entitledOrganizations(q, { organizationId: event.organization_id, patientId: event.patient_id });
  return entitled.includes(organizationId) ? event : undefined;
}

export type ReplayResult =
  | { outcome: 'not-found' }
  | { outcome: 'no-subscription'; type: EventType }
  | { outcome: 'queued'; deliveries: Array<{ id: string; subscription_id: string; round: number }> };

/**
 * Replay: the event again, same id, to each of the organisation's active subscriptions to its
 * type, as a new round of attempts starting now (also after `exhausted` or `delivered`). A
 * subscription created after the event gets its first delivery of it here.
 */
export async function replayEvent(db: Database, organizationId: string, eventId: string): Promise<ReplayResult> {
  return db.transaction(async (tx) => {
    const event = await findEntitledEvent(tx, organizationId, eventId);
    if (!event) return { outcome: 'not-found' } as const;
    const { rows } = await tx.query<{ id: string; subscription_id: string; round: number }>(
      `INSERT INTO webhook_deliveries (id, event_id, subscription_id, status, next_attempt_at)
       SELECT ${NEW_DELIVERY_ID}, $1, s.id, 'pending', now()
       FROM webhook_subscriptions s
       WHERE s.deleted_at IS NULL AND s.organization_id = $2 AND $3 = ANY(s.subscribed_events)
       ON CONFLICT (event_id, subscription_id) DO UPDATE
         SET status = 'pending', round = webhook_deliveries.round + 1, attempts = 0,
             next_attempt_at = now(), lease_token = NULL, updated_at = now()
       RETURNING id, subscription_id, round`,
      [event.id, organizationId, event.type],
    );
    if (!rows.length) return { outcome: 'no-subscription', type: event.type } as const;
    await wakeWorkersOnCommit(tx);
    return { outcome: 'queued', deliveries: rows } as const;
  });
}

export interface AttemptView {
  round: number;
  attempt: number;
  started_at: string;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  succeeded: boolean;
}

export interface DeliveryView {
  id: string;
  subscription_id: string;
  callback_url: string;
  status: 'pending' | 'delivered' | 'exhausted' | 'cancelled';
  round: number;
  /** Attempts finished in the current round (at most 7). */
  attempts_made: number;
  /** Pending: when the next attempt is due (while one is in flight, the latest time it is retried). */
  next_attempt_at: string | null;
  attempts: AttemptView[];
}

const iso = (value: Date | string | null) => (value === null ? null : new Date(value).toISOString());

/**
 * An event's deliveries to the organisation's subscriptions (null: the operator, all of them), each
 * with every attempt made; undefined when the organisation is not entitled to the event.
 */
export async function eventDeliveries(
  q: Queryable,
  organizationId: string | null,
  eventId: string,
): Promise<{ event_id: string; type: EventType; created_at: string; deliveries: DeliveryView[] } | undefined> {
  const event = await findEntitledEvent(q, organizationId, eventId);
  if (!event) return undefined;
  const deliveries = await q.query<{
    id: string;
    subscription_id: string;
    callback_url: string;
    status: DeliveryView['status'];
    round: number;
    attempts: number;
    next_attempt_at: Date | null;
  }>(
    `SELECT d.id, d.subscription_id, s.callback_url, d.status, d.round, d.attempts, d.next_attempt_at
     FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
     WHERE d.event_id = $1 AND ($2::text IS NULL OR s.organization_id = $2)
     ORDER BY d.created_at, d.id`,
    [event.id, organizationId],
  );
  const attempts = await q.query<AttemptView & { delivery_id: string; started_at: Date }>(
    `SELECT delivery_id, round, attempt, started_at, duration_ms, status_code, error, succeeded
     FROM webhook_delivery_attempts WHERE delivery_id = ANY($1) ORDER BY id`,
    [deliveries.rows.map((d) => d.id)],
  );
  return {
    event_id: event.id,
    type: event.type,
    created_at: iso(event.created_at)!,
    deliveries: deliveries.rows.map((d) => ({
      id: d.id,
      subscription_id: d.subscription_id,
      callback_url: d.callback_url,
      status: d.status,
      round: d.round,
      attempts_made: d.attempts,
      next_attempt_at: d.status === 'pending' ? iso(d.next_attempt_at) : null,
      attempts: attempts.rows
        .filter((a) => a.delivery_id === d.id)
        .map(({ delivery_id: _, started_at, ...a }) => ({ ...a, started_at: iso(started_at)! })),
    })),
  };
}
