import type { Queryable } from '../db/database';
import type { EventType } from '../events/types';
import { validationFailed } from '../core/errors';
import { entitledOrganizations, entitledOrganizationsOfEach, type EventAudience } from './entitlement';

/** Delivery workers LISTEN on this channel (Database.listen); a NOTIFY sent inside a transaction arrives when it commits. */
export const DELIVERY_CHANNEL = 'pont_webhook_deliveries';

const NEW_DELIVERY_ID = `'whdlv_' || replace(gen_random_uuid()::text, '-', '')`;

async function wakeWorkersOnCommit(tx: Queryable): Promise<void> {
  await tx.query('SELECT pg_notify($1, $2)', [DELIVERY_CHANNEL, '']);
}

/**
 * A test event (the portal's "send test event": `data.test` true with the subscription's id) goes to that one
 * subscription only, at first and at every replay: never to the organisation's other receivers of its type.
 */
export function testEventTarget(data: Record<string, unknown>): string | null {
  return data.test === true && typeof data.subscription_id === 'string' ? data.subscription_id : null;
}

/**
 * Fan-out, in the transaction that records the events: one delivery, due now, per active
 * subscription that is entitled to an event and subscribed to its type; the workers are woken
 * when the transaction commits. One statement for all the events of a change (or an import batch).
 * Returns how many deliveries it queued.
 */
export async function queueDeliveries(tx: Queryable, events: Array<EventAudience & { id: string; type: EventType; createdAt: string }>): Promise<number> {
  const pairs: Array<[string, string, string, string | null, string]> = [];
  const entitled = await entitledOrganizationsOfEach(tx, events);
  events.forEach((event, i) => {
    for (const org of entitled[i]!) pairs.push([event.id, event.type, org, testEventTarget(event.data ?? {}), event.createdAt]);
  });
  if (!pairs.length) return 0;
  const { rows } = await tx.query<{ queued: string }>(
    `WITH queued AS (
       INSERT INTO webhook_deliveries (id, event_id, event_created_at, subscription_id, status, next_attempt_at)
       SELECT ${NEW_DELIVERY_ID}, e.id, e.created_at, s.id, 'pending', now()
       FROM unnest($1::text[], $2::text[], $3::text[], $5::text[], $6::timestamptz[]) AS e(id, type, org, only_subscription, created_at)
       JOIN webhook_subscriptions s ON s.organization_id = e.org AND e.type = ANY(s.subscribed_events) AND s.deleted_at IS NULL
         AND (e.only_subscription IS NULL OR s.id = e.only_subscription)
       RETURNING 1
     ), woken AS (
       SELECT pg_notify($4, '') FROM (SELECT 1 FROM queued LIMIT 1) any_queued
     )
     SELECT (SELECT count(*) FROM queued) AS queued, (SELECT count(*) FROM woken) AS woken`,
    [pairs.map((p) => p[0]), pairs.map((p) => p[1]), pairs.map((p) => p[2]), DELIVERY_CHANNEL, pairs.map((p) => p[3]), pairs.map((p) => p[4])],
  );
  return Number(rows[0]!.queued);
}

interface StoredEventRef {
  id: string;
  type: EventType;
  created_at: Date | string;
  organization_id: string | null;
  patient_id: string | null;
  data: Record<string, unknown>;
}

/**
 * The event, if `organizationId` is entitled to it (null: the operator, who sees every event);
 * otherwise undefined (callers answer 404 either way).
 */
async function findEntitledEvent(q: Queryable, organizationId: string | null, eventId: string): Promise<StoredEventRef | undefined> {
  const { rows } = await q.query<StoredEventRef>(
    'SELECT id, type, created_at, organization_id, patient_id, data FROM events WHERE id = $1',
    [eventId],
  );
  const event = rows[0];
  if (!event || organizationId === null) return event;
  const entitled = await entitledOrganizations(q, { type: event.type, organizationId: event.organization_id, patientId: event.patient_id, data: event.data });
  return entitled.includes(organizationId) ? event : undefined;
}

export type ReplayResult =
  | { outcome: 'not-found' }
  | { outcome: 'no-subscription'; type: EventType }
  | { outcome: 'queued'; deliveries: Array<{ id: string; subscription_id: string; round: number }> };

/**
 * Replay: the event again, same id, to each of the organisation's active subscriptions to its
 * type, as a new round of attempts starting now (also after `exhausted` or `delivered`). A
 * subscription created after the event gets its first delivery of it here. Run it in a transaction.
 */
export async function replayEvent(tx: Queryable, organizationId: string, eventId: string): Promise<ReplayResult> {
  const event = await findEntitledEvent(tx, organizationId, eventId);
  if (!event) return { outcome: 'not-found' } as const;
  const { rows } = await tx.query<{ id: string; subscription_id: string; round: number }>(
    `INSERT INTO webhook_deliveries (id, event_id, event_created_at, subscription_id, status, next_attempt_at)
     SELECT ${NEW_DELIVERY_ID}, e.id, e.created_at, s.id, 'pending', now()
     FROM webhook_subscriptions s, events e -- the event's exact created_at (to the microsecond), which a Date would round
     WHERE e.id = $1 AND s.deleted_at IS NULL AND s.organization_id = $2 AND $3 = ANY(s.subscribed_events) AND ($4::text IS NULL OR s.id = $4)
     ON CONFLICT (event_id, subscription_id) DO UPDATE
       SET status = 'pending', round = webhook_deliveries.round + 1, attempts = 0,
           next_attempt_at = now(), lease_token = NULL, updated_at = now()
     RETURNING id, subscription_id, round`,
    [event.id, organizationId, event.type, testEventTarget(event.data)],
  );
  if (!rows.length) return { outcome: 'no-subscription', type: event.type } as const;
  await wakeWorkersOnCommit(tx);
  return { outcome: 'queued', deliveries: rows } as const;
}

export interface AttemptView {
  round: number;
  attempt: number;
  started_at: string;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  succeeded: boolean;
  /** The first 1 KB of the receiver's answer (null: no answer, or made before it was kept). */
  response_excerpt: string | null;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'exhausted' | 'cancelled';

export interface DeliveryView {
  id: string;
  /** The event; for a FHIR Subscription notification (fhirNotifications), `Subscription/<id>#<event number or kind>`. */
  event_id: string;
  /** The event's type; for a FHIR Subscription notification, `fhir-subscription.<handshake|heartbeat|event-notification>`. */
  event_type: EventType | `fhir-subscription.${string}`;
  subscription_id: string;
  callback_url: string;
  status: DeliveryStatus;
  round: number;
  /** Attempts finished in the current round (at most 7). */
  attempts_made: number;
  /** Pending: when the next attempt is due (while one is in flight, the latest time it is retried). */
  next_attempt_at: string | null;
  attempts: AttemptView[];
}

const iso = (value: Date | string | null) => (value === null ? null : new Date(value).toISOString());

export interface DeliveryFilter {
  /** null: the operator, every organisation. */
  organizationId: string | null;
  eventId?: string;
  status?: DeliveryStatus;
  subscriptionId?: string;
  /** Opaque position from a previous page's `next_cursor`. */
  cursor?: string;
  limit: number;
  /** Also the rest-hook notifications of FHIR Subscriptions (src/subscriptions), with their attempts (the portal shows them). */
  fhirNotifications?: boolean;
}

/** Page position: the last row's creation time in microseconds and id (newest first). */
const encodeCursor = (createdUs: string, id: string) => Buffer.from(`${createdUs}:${id}`).toString('base64url');
function decodeCursor(cursor: string): [string, string] | undefined {
  const match = /^(\d{1,20}):(whdlv_[0-9a-f]{32})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  return match ? [match[1]!, match[2]!] : undefined;
}

/**
 * Deliveries matching `filter`, newest first, each with every attempt made, and the next page's
 * cursor. With `status: 'exhausted'` this is what an integrator may want to replay.
 */
export async function listDeliveries(q: Queryable, filter: DeliveryFilter): Promise<{ deliveries: DeliveryView[]; next_cursor: string | null }> {
  const after = filter.cursor === undefined ? undefined : decodeCursor(filter.cursor);
  if (filter.cursor !== undefined && !after) {
    throw validationFailed('cursor: not a cursor this service issued (use next_cursor from a previous page)');
  }
  const { rows } = await q.query<
    Pick<DeliveryView, 'id' | 'event_id' | 'event_type' | 'subscription_id' | 'callback_url' | 'status' | 'round'> & {
      attempts: number;
      next_attempt_at: Date | null;
      created_us: string;
    }
  >(
    `SELECT d.id,
            coalesce(d.event_id, 'Subscription/' || d.fhir_subscription_id || '#' || coalesce(d.event_number::text, d.notification_type)) AS event_id,
            coalesce(e.type, 'fhir-subscription.' || d.notification_type) AS event_type,
            d.subscription_id, s.callback_url, d.status, d.round, d.attempts,
            d.next_attempt_at, (extract(epoch FROM d.created_at) * 1000000)::bigint AS created_us
     FROM webhook_deliveries d
     JOIN webhook_subscriptions s ON s.id = d.subscription_id
     LEFT JOIN events e ON e.id = d.event_id AND e.created_at = d.event_created_at
     WHERE (e.id IS NOT NULL OR ($8::boolean AND d.fhir_subscription_id IS NOT NULL))
       AND ($1::text IS NULL OR s.organization_id = $1)
       AND ($2::text IS NULL OR d.event_id = $2)
       AND ($3::text IS NULL OR d.status = $3)
       AND ($4::text IS NULL OR d.subscription_id = $4)
       AND ($5::bigint IS NULL OR ((extract(epoch FROM d.created_at) * 1000000)::bigint, d.id) < ($5::bigint, $6::text))
     ORDER BY d.created_at DESC, d.id DESC
     LIMIT $7`,
    [filter.organizationId, filter.eventId ?? null, filter.status ?? null, filter.subscriptionId ?? null, after?.[0] ?? null, after?.[1] ?? null, filter.limit + 1, filter.fhirNotifications === true],
  );
  const page = rows.slice(0, filter.limit);
  const attempts = await q.query<AttemptView & { delivery_id: string; started_at: Date }>(
    `SELECT delivery_id, round, attempt, started_at, duration_ms, status_code, error, succeeded, response_excerpt
     FROM webhook_delivery_attempts WHERE delivery_id = ANY($1) ORDER BY id`,
    [page.map((d) => d.id)],
  );
  const last = page.at(-1);
  return {
    deliveries: page.map((d) => ({
      id: d.id,
      event_id: d.event_id,
      event_type: d.event_type,
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
    next_cursor: rows.length > filter.limit && last ? encodeCursor(last.created_us, last.id) : null,
  };
}

/** Deliveries of one event, at most this many (one per subscription, so a page is the whole list in practice). */
const DELIVERIES_PER_EVENT = 1000;

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
  const { deliveries } = await listDeliveries(q, { organizationId, eventId: event.id, limit: DELIVERIES_PER_EVENT });
  return { event_id: event.id, type: event.type, created_at: iso(event.created_at)!, deliveries };
}
