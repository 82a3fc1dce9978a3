import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { fetch } from 'undici';
import { checkedAddress, DestinationRefused, PinnedAgents } from './destination';
import type { Config } from '../config';
import { retryContention, type Database } from '../db/database';
import { envelopeFromRow, type EventRow } from '../events/outbox';
import type { Logger } from '../log';
import type { BackgroundWorker } from '../jobs';
import { DELIVERY_CHANNEL } from './deliveries';
import { entitledOrganizations } from './entitlement';
import { deliveredEnvelope } from './payload';
import { afterAttempt, type AttemptOutcome } from './schedule';
import { decryptSecret } from './secrets';
import { webhookDeliveries } from '../metrics';
import { SIGNATURE_HEADER, signatureHeader } from './signature';

interface ClaimedDelivery {
  id: string;
  round: number;
  /** Attempts finished before this one, in this round. */
  attempts: number;
  lease_token: string;
  subscription_id: string;
  callback_url: string;
  secret_encrypted: string;
  /** The secret a rotation replaced, while its overlap lasts: deliveries are signed with both. */
  previous_secret_encrypted: string | null;
  full_payload: boolean;
  /** The subscription's organisation, and who the event concerns: entitlement is checked again at delivery. */
  subscriber_org: string;
  event_org: string | null;
  patient_id: string | null;
  /** The outbox event it carries; null for a FHIR Subscription notification (src/subscriptions), which names its own. */
  event: EventRow | null;
  fhir_subscription_id: string | null;
  notification_type: 'handshake' | 'heartbeat' | 'event-notification' | null;
  event_number: string | null;
  /** How many events the notification carries from event_number on (the subscription's maxCount); null: one. */
  event_count: number | null;
  /** The FHIR Subscription's own timeout (backport-timeout), in seconds; null: PONT_WEBHOOK_TIMEOUT. */
  fhir_timeout_seconds: number | null;
}

/** What builds and follows up FHIR Subscription notifications (src/subscriptions/service.ts), given at composition. */
export interface NotificationBodies {
  /** The body to POST; undefined when the subscription is gone (the delivery is cancelled). */
  notificationBody(subscriptionId: string, type: 'handshake' | 'heartbeat' | 'event-notification', eventNumber: number | null, eventCount?: number): Promise<string | undefined>;
  delivered(subscriptionId: string, type: string, succeeded: boolean, exhausted: boolean): Promise<void>;
}

interface AttemptResult {
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  succeeded: boolean;
  /** The first RESPONSE_EXCERPT_BYTES of the receiver's answer (shown in the developer portal). */
  responseExcerpt?: string | null;
}

/** A lease lasts twice the attempt's timeout and this: a live worker always finishes (or times out) its attempt before it ends. */
const LEASE_MARGIN_MS = 5000;

/** How much of a receiver's answer is kept with the attempt. */
const RESPONSE_EXCERPT_BYTES = 1024;

/** Reads at most RESPONSE_EXCERPT_BYTES of an answer's body, then lets the rest go (never the whole of a huge answer). */
async function excerptOf(body: ReadableStream<Uint8Array> | null): Promise<string | null> {
  if (!body) return null;
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = body.getReader();
  try {
    while (size < RESPONSE_EXCERPT_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } catch {
    // an answer cut off mid-body: keep what arrived
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, RESPONSE_EXCERPT_BYTES)).replace(/\uFFFD$/, '');
}

/**
 * Claims up to `limit` due deliveries. `FOR UPDATE SKIP LOCKED` lets any number of processes
 * claim side by side without waiting on or taking each other's rows; the claim is a lease:
 * `next_attempt_at` moves to the lease's end, so if this process dies mid-attempt the delivery
 * becomes due again by itself and another process makes the attempt. The lease is long enough
 * for the attempt's timeout: `timeoutMs`, or a FHIR Subscription's own (backport-timeout).
 */
async function claimDue(db: Database, limit: number, timeoutMs: number): Promise<ClaimedDelivery[]> {
  const leaseToken = randomBytes(12).toString('hex');
  const { rows } = await db.query<Omit<ClaimedDelivery, 'event'> & Omit<EventRow, 'id'> & { event_id: string | null }>(
    `WITH due AS (
       SELECT id FROM webhook_deliveries
       WHERE status = 'pending' AND next_attempt_at <= now()
       ORDER BY next_attempt_at
       LIMIT $1
       FOR UPDATE SKIP LOCKED
     ), claimed AS (
       UPDATE webhook_deliveries d
       SET lease_token = $2, updated_at = now(),
           next_attempt_at = now() + ((2 * greatest($3::float8, coalesce((SELECT fs.timeout_seconds * 1000 FROM fhir_subscriptions fs WHERE fs.id = d.fhir_subscription_id), 0)) + $4::float8)
                                      * interval '1 millisecond')
       FROM due WHERE d.id = due.id
       RETURNING d.*
     )
     SELECT d.id, d.round, d.attempts, d.lease_token, s.id AS subscription_id, s.callback_url,
            s.secret_encrypted, s.full_payload, s.organization_id AS subscriber_org,
            CASE WHEN s.previous_secret_expires_at > now() THEN s.previous_secret_encrypted END AS previous_secret_encrypted,
            e.organization_id AS event_org, e.patient_id,
            e.id AS event_id, e.type, e.version, e.created_at, e.data, e.meta,
            d.fhir_subscription_id, d.notification_type, d.event_number::text, d.event_count,
            (SELECT fs.timeout_seconds FROM fhir_subscriptions fs WHERE fs.id = d.fhir_subscription_id) AS fhir_timeout_seconds
     FROM claimed d
     JOIN webhook_subscriptions s ON s.id = d.subscription_id
     LEFT JOIN events e ON e.id = d.event_id AND e.created_at = d.event_created_at`,
    [limit, leaseToken, timeoutMs, LEASE_MARGIN_MS],
  );
  return rows.map(({ event_id, type, version, created_at, data, meta, ...delivery }) => ({
    ...delivery,
    event: event_id === null ? null : { id: event_id, type, version, created_at, data, meta },
  }));
}

interface FinishedAttempt {
  delivery: ClaimedDelivery;
  result: AttemptResult;
}

/**
 * Records finished attempts and moves each delivery on (delivered, retry later, or exhausted), all
 * in one statement: atomic without a transaction, and one commit for a whole batch. A delivery
 * moves only while this worker still holds its lease (a replay or unsubscribe in the meantime
 * wins), but the attempt itself is always recorded, since it was made. Returns each new status.
 */
async function finishAttempts(db: Database, finished: FinishedAttempt[], retryDelaysMs: number[]) {
  const rows = finished.map(({ delivery, result }) => {
    const attempt = delivery.attempts + 1;
    return { delivery, result, attempt, next: afterAttempt(attempt, result.succeeded, retryDelaysMs) };
  });
  const column = <T>(pick: (row: (typeof rows)[number]) => T) => rows.map(pick);
  // One statement (all or nothing): run again when it loses to a concurrent one (a deadlock was seen under load at
  // 200 notifications/s); unrecorded, the attempts would be made again once their lease ran out.
  await retryContention(() => db.query(
    `WITH finished AS (
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::float8[], $6::int[],
                            $7::timestamptz[], $8::int[], $9::int[], $10::text[], $11::boolean[], $12::text[])
         AS f (delivery_id, lease_token, status, attempt, delay_ms, round, started_at, duration_ms, status_code, error, succeeded, response_excerpt)
     ), moved AS (
       UPDATE webhook_deliveries d
       SET status = f.status, attempts = f.attempt,
           next_attempt_at = CASE WHEN f.status = 'pending' THEN now() + f.delay_ms * interval '1 millisecond' END,
           lease_token = NULL, updated_at = now()
       FROM finished f
       WHERE d.id = f.delivery_id AND d.lease_token = f.lease_token
     )
     INSERT INTO webhook_delivery_attempts (delivery_id, round, attempt, started_at, duration_ms, status_code, error, succeeded, response_excerpt)
     SELECT delivery_id, round, attempt, started_at, duration_ms, status_code, error, succeeded, response_excerpt FROM finished`,
    [
      column((r) => r.delivery.id),
      column((r) => r.delivery.lease_token),
      column((r) => r.next.status),
      column((r) => r.attempt),
      column((r) => (r.next.status === 'pending' ? r.next.delayMs : 0)),
      column((r) => r.delivery.round),
      column((r) => r.result.startedAt.toISOString()),
      column((r) => r.result.durationMs),
      column((r) => r.result.statusCode),
      column((r) => r.result.error),
      column((r) => r.result.succeeded),
      column((r) => r.result.responseExcerpt ?? null),
    ],
  ));
  return rows.map((r) => r.next.status);
}

/**
 * Batches attempts finished close together into one `finishAttempts` call: whatever finished while
 * the previous batch was being written goes in the next, so a quiet worker writes at once and a busy
 * one writes fewer, larger batches.
 */
function attemptRecorder(db: Database, retryDelaysMs: number[]) {
  let waiting: Array<FinishedAttempt & { settle: (status: Promise<AttemptOutcome['status']>) => void }> = [];
  let writing: Promise<void> | undefined;
  const writeNext = () => {
    if (writing || !waiting.length) return;
    const batch = waiting;
    waiting = [];
    const written = finishAttempts(db, batch, retryDelaysMs);
    batch.forEach((item, i) => item.settle(written.then((statuses) => statuses[i]!)));
    writing = written
      .catch(() => undefined) // each waiter gets the failure through `settle`
      .then(() => {
        writing = undefined;
        writeNext();
      });
  };
  return (finished: FinishedAttempt) =>
    new Promise<AttemptOutcome['status']>((resolve) => {
      waiting.push({ ...finished, settle: resolve });
      writeNext();
    });
}

/**
 * Still entitled? A patient event queued because the subscriber held the patient's consent is not
 * delivered once that consent is revoked or expired ("stop data access immediately").
 */
async function stillEntitled(db: Database, delivery: ClaimedDelivery & { event: EventRow }): Promise<boolean> {
  if (!delivery.patient_id || delivery.subscriber_org === delivery.event_org) return true;
  const orgs = await entitledOrganizations(db, { type: delivery.event.type, organizationId: delivery.event_org, patientId: delivery.patient_id, data: delivery.event.data });
  return orgs.includes(delivery.subscriber_org);
}

async function cancelDelivery(db: Database, delivery: ClaimedDelivery): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries SET status = 'cancelled', lease_token = NULL, next_attempt_at = NULL, updated_at = now() WHERE id = $1 AND lease_token = $2`,
    [delivery.id, delivery.lease_token],
  );
}

/** Gives a claimed delivery back untouched (shutdown mid-attempt): due again now, for any process. */
async function releaseLease(db: Database, delivery: ClaimedDelivery): Promise<void> {
  await db.query(
    'UPDATE webhook_deliveries SET lease_token = NULL, next_attempt_at = now(), updated_at = now() WHERE id = $1 AND lease_token = $2',
    [delivery.id, delivery.lease_token],
  );
}

function describeFailure(err: unknown, timeoutMs: number): string {
  if (err instanceof Error && err.name === 'TimeoutError') return `no response within ${timeoutMs} ms`;
  const cause = err instanceof Error ? (err.cause as { code?: string; message?: string } | undefined) : undefined;
  const text = cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
  return text.slice(0, 500);
}

/** One HTTP POST of the signed body, to the address checked now (src/webhooks/destination.ts). Throws only when `stopping` aborts it. */
async function post(delivery: ClaimedDelivery, body: string, contentType: string, secretKey: Buffer, timeoutMs: number, allowLoopback: boolean, agents: PinnedAgents, stopping: AbortSignal): Promise<AttemptResult> {
  const startedAt = new Date();
  const started = performance.now();
  const done = (fields: Pick<AttemptResult, 'statusCode' | 'error' | 'succeeded' | 'responseExcerpt'>): AttemptResult => ({
    startedAt,
    durationMs: Math.round(performance.now() - started),
    ...fields,
  });
  let secrets: string[];
  try {
    secrets = [delivery.secret_encrypted, delivery.previous_secret_encrypted]
      .filter((stored): stored is string => stored !== null)
      .map((stored) => decryptSecret(secretKey, delivery.subscription_id, stored));
  } catch {
    return done({ statusCode: null, error: 'webhook secret could not be decrypted (was PONT_WEBHOOK_SECRET_KEY changed?)', succeeded: false });
  }
  // One signal for the deadline and the worker's stop, both held here until the attempt ends. Not
  // AbortSignal.any([stopping, AbortSignal.timeout(ms)]): on Node 20 the composite holds its sources weakly, a garbage
  // collection took the timeout with it, and an endpoint that never answered held the attempt until its lease ran out
  // and it was sent again (nodejs/node#57736).
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new DOMException(`no response within ${timeoutMs} ms`, 'TimeoutError')), timeoutMs);
  const stop = () => deadline.abort(stopping.reason);
  if (stopping.aborted) stop();
  else stopping.addEventListener('abort', stop, { once: true });
  try {
    const target = (await checkedAddress(delivery.callback_url, allowLoopback))!;
    const response = await fetch(delivery.callback_url, {
      dispatcher: agents.for(target.address, target.family),
      method: 'POST',
      body,
      redirect: 'manual', // a redirect is not a 2xx: following it could hand the payload to another host
      signal: deadline.signal,
      headers: {
        'content-type': contentType,
        'user-agent': 'Pont-Webhooks/1.0',
        [SIGNATURE_HEADER]: signatureHeader(secrets, body, Math.floor(Date.now() / 1000)),
        ...(delivery.event && { 'x-service-event-id': delivery.event.id }),
        'x-service-delivery-id': delivery.id,
        'x-service-delivery-attempt': String(delivery.attempts + 1),
      },
    });
    const responseExcerpt = await excerptOf(response.body); // the first 1 KB, then the socket is freed
    // The deadline holds even when a busy event loop ran the timeout late: an answer after it is a failure.
    if (performance.now() - started > timeoutMs) return done({ statusCode: response.status, error: `no response within ${timeoutMs} ms`, succeeded: false, responseExcerpt });
    const succeeded = response.status >= 200 && response.status < 300;
    return done({ statusCode: response.status, error: succeeded ? null : `HTTP ${response.status}`, succeeded, responseExcerpt });
  } catch (err) {
    if (stopping.aborted) throw err;
    if (err instanceof DestinationRefused) return done({ statusCode: null, error: `destination refused: ${err.message}`, succeeded: false });
    return done({ statusCode: null, error: describeFailure(err, timeoutMs), succeeded: false });
  } finally {
    clearTimeout(timer);
    stopping.removeEventListener('abort', stop);
  }
}

export interface DeliveryWorker extends BackgroundWorker {
  /** Look for due deliveries now rather than at the next poll. */
  wake(): void;
}

/**
 * The delivery worker, run in every Pont process. It polls, and also wakes when a transaction
 * queues deliveries (on PostgreSQL through NOTIFY, from any process; on PGlite directly), claims
 * due deliveries up to its concurrency, POSTs each and records the attempt.
 */
export function createDeliveryWorker(deps: { config: Config; db: Database; log: Logger; notifications?: NotificationBodies }): DeliveryWorker {
  const { db, log } = deps;
  const { retryDelaysMs, pollIntervalMs, timeoutMs, concurrency, secretKey } = deps.config.webhooks;
  const recordAttempt = attemptRecorder(db, retryDelaysMs);
  /** Connections to destinations, kept for the next deliveries there. */
  const agents = new PinnedAgents();
  const stopping = new AbortController();
  // Each attempt in flight listens for the stop: up to `concurrency` at once is no leak (Node warns past 10).
  setMaxListeners(concurrency + 1, stopping.signal);
  /** Requests in flight: what `concurrency` bounds. Recording the outcome, batched, needs no slot. */
  let posting = 0;
  /** Attempts not yet recorded, awaited on stop. */
  const jobs = new Set<Promise<void>>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let rerun = false;
  let listening: Promise<(() => Promise<void>) | undefined> | undefined;

  const attempt = async (delivery: ClaimedDelivery) => {
    let body: string | undefined;
    let contentType = 'application/json';
    if (delivery.fhir_subscription_id && delivery.notification_type) {
      // A FHIR Subscription notification: built (and the policy asked again) now, from what the subscription numbered.
      try {
        body = await deps.notifications?.notificationBody(
          delivery.fhir_subscription_id,
          delivery.notification_type,
          delivery.event_number === null ? null : Number(delivery.event_number),
          delivery.event_count ?? 1,
        );
      } catch (err) {
        // Not built (the database refused, e.g. a deadlock): due again at once rather than when the lease runs out.
        log.warn('FHIR notification not built; retried', { delivery_id: delivery.id, error: String(err) });
        await releaseLease(db, delivery).catch(() => undefined);
        return;
      }
      contentType = 'application/fhir+json';
    } else if (delivery.event) {
      if (!(await stillEntitled(db, { ...delivery, event: delivery.event }))) {
        await cancelDelivery(db, delivery);
        webhookDeliveries.inc({ outcome: 'cancelled' });
        log.info('webhook delivery cancelled: the subscriber no longer holds consent', { delivery_id: delivery.id, event_id: delivery.event.id });
        return;
      }
      body = JSON.stringify(deliveredEnvelope(envelopeFromRow(delivery.event), delivery.full_payload));
    }
    if (body === undefined) {
      await cancelDelivery(db, delivery); // its event or its subscription is gone
      webhookDeliveries.inc({ outcome: 'cancelled' });
      return;
    }
    let result: AttemptResult;
    posting++;
    try {
      // A FHIR Subscription's backport-timeout replaces the server's for its notifications.
      const deadline = delivery.fhir_timeout_seconds ? delivery.fhir_timeout_seconds * 1000 : timeoutMs;
      result = await post(delivery, body, contentType, secretKey, deadline, deps.config.webhooks.allowHttpLoopback, agents, stopping.signal);
    } catch {
      await releaseLease(db, delivery).catch(() => undefined); // if this fails too, the lease runs out
      return;
    } finally {
      posting--;
      wake(); // a slot is free
    }
    const status = await recordAttempt({ delivery, result });
    webhookDeliveries.inc({ outcome: result.succeeded ? 'delivered' : status === 'exhausted' ? 'exhausted' : 'failed' });
    if (delivery.fhir_subscription_id && delivery.notification_type)
      await deps.notifications?.delivered(delivery.fhir_subscription_id, delivery.notification_type, result.succeeded, status === 'exhausted');
    const fields = { delivery_id: delivery.id, event_id: delivery.event?.id ?? null, round: delivery.round, attempt: delivery.attempts + 1 };
    if (status === 'exhausted') log.warn('webhook delivery exhausted', fields);
    else log.debug('webhook attempt', { ...fields, status, status_code: result.statusCode, ms: result.durationMs });
  };

  const tick = () => {
    if (running) rerun = true;
    else
      running = claimAndStart().finally(() => {
        running = undefined;
        if (rerun) wake(); // asked for while the loop was ending
      });
  };

  const claimAndStart = async () => {
    try {
      do {
        rerun = false;
        const free = concurrency - posting;
        if (free <= 0 || stopping.signal.aborted) break;
        const claimed = await claimDue(db, free, timeoutMs);
        for (const delivery of claimed) {
          const job = attempt(delivery)
            .catch((err) => log.error('webhook attempt not recorded', { delivery_id: delivery.id, error: String(err) }))
            .finally(() => jobs.delete(job));
          jobs.add(job);
        }
        if (claimed.length === free) rerun = true; // there may be more due
      } while (rerun && !stopping.signal.aborted);
    } catch (err) {
      if (!stopping.signal.aborted) log.error('webhook claim failed', { error: String(err) });
    }
  };

  // The worker's own context: a wake-up comes from inside a committing transaction, whose async context
  // (e.g. PGlite's "in a transaction" mark) the loop must not inherit.
  const inWorkerContext = AsyncLocalStorage.snapshot();
  function wake() {
    if (!stopping.signal.aborted) inWorkerContext(() => setImmediate(tick));
  }

  return {
    name: 'webhook-delivery',
    wake,
    start() {
      timer = setInterval(tick, pollIntervalMs);
      timer.unref();
      // Woken by the NOTIFY of any process's queuing transaction as it commits (PGlite: this process's own).
      // Losing the listening connection only costs latency: polling still finds every due delivery.
      listening = db.listen(DELIVERY_CHANNEL, { notify: wake, ready: wake }).catch((err) => {
        log.error('webhook listener not started', { error: String(err) });
        return undefined;
      });
      wake();
    },
    /** Aborts attempts in flight and gives their deliveries back, so another process retries them at once. */
    async stop() {
      stopping.abort();
      clearInterval(timer);
      await running;
      await Promise.allSettled([...jobs]);
      await (await listening)?.();
      await agents.close();
    },
  };
}
