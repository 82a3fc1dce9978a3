/**
 * The path from a committed domain change to a verified delivery: outbox, fan-out, signing,
 * retry schedule, exhaustion and replay, against a real HTTP receiver on a real database.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LISTENER_APPLICATION_NAME } from '../src/db/pg-listener';
import { recordEvent, type NewEvent } from '../src/events/outbox';
import { eventDeliveries, replayEvent, type DeliveryView } from '../src/webhooks/deliveries';
import { createSubscription, setFullPayload } from '../src/webhooks/subscriptions';
import { eventually } from './eventually';
import { backend, startTestServer, type TestServer } from './harness';
import { startReceiver, type Receiver, type Reply } from './webhooks-support';

const RETRY_DELAYS_MS = [200, 300, 400, 500, 600, 700];

let pont: TestServer;
const receivers: Receiver[] = [];

beforeAll(async () => {
  pont = await startTestServer({
    PONT_WEBHOOK_RETRY_DELAYS: RETRY_DELAYS_MS.map((ms) => `${ms}ms`).join(','),
    PONT_WEBHOOK_POLL_INTERVAL: '50ms',
    // Long enough that a receiver on a loaded machine answers in time (at 1 s, 1 run in 5 saw a first attempt time out).
    PONT_WEBHOOK_TIMEOUT: '3s',
  });
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await pont?.close();
});

let orgCounter = 0;
const newOrg = () => `org-${process.pid}-${++orgCounter}`;

/** A receiver with a subscription of `organizationId` pointing at it. */
async function subscribe(organizationId: string, events: NewEvent['type'][], reply?: (r: any) => Reply) {
  const receiver = await startReceiver(reply);
  receivers.push(receiver);
  const subscription = await createSubscription(pont.services.db, pont.config.webhooks.secretKey, { organizationId }, {
    callback_url: receiver.url,
    subscribed_events: events,
    description: 'test',
  });
  receiver.secret = subscription.webhook_secret;
  return { receiver, subscription };
}

function record(organizationId: string, type: NewEvent['type'] = 'patient.created', data: Record<string, unknown> = {}) {
  return pont.services.db.transaction((tx) =>
    recordEvent(tx, { type, organizationId, facilityId: 'fac-1', environment: 'development', requestId: 'req-1', data }),
  );
}

/** Resolves once the event's deliveries all leave `pending` (polling the real rows, no fixed sleeps). */
function settled(organizationId: string, eventId: string) {
  return eventually(async () => {
    const found = await eventDeliveries(pont.services.db, organizationId, eventId);
    if (!found || found.deliveries.some((d) => d.status === 'pending')) throw new Error(`deliveries of ${eventId} still pending`);
    return found;
  });
}

/** The event's first delivery once `ready` holds for it (polling the real rows). */
function firstDeliveryOnce(organizationId: string, eventId: string, ready: (d: DeliveryView) => boolean) {
  return eventually(async () => {
    const delivery = (await eventDeliveries(pont.services.db, organizationId, eventId))?.deliveries[0];
    if (!delivery || !ready(delivery)) throw new Error(`the delivery of ${eventId} is not there yet`);
    return delivery;
  });
}

describe('event outbox', () => {
  it('writes the event with the change and leaves nothing when the change rolls back', async () => {
    const org = newOrg();
    await subscribe(org, ['patient.created']);
    let rolledBackId = '';
    await expect(
      pont.services.db.transaction(async (tx) => {
        rolledBackId = (await recordEvent(tx, { type: 'patient.created', organizationId: org, environment: 'development', data: {} })).id;
        throw new Error('the change fails');
      }),
    ).rejects.toThrow('the change fails');
    expect(rolledBackId).toMatch(/^evt_[0-9a-f]{32}$/);
    const events = await pont.services.db.query('SELECT 1 FROM events WHERE id = $1', [rolledBackId]);
    const deliveries = await pont.services.db.query('SELECT 1 FROM webhook_deliveries WHERE event_id = $1', [rolledBackId]);
    expect(events.rowCount + deliveries.rowCount).toBe(0);

    const committed = await record(org);
    const stored = await pont.services.db.query<{ type: string; meta: any }>('SELECT type, meta FROM events WHERE id = $1', [committed.id]);
    expect(stored.rows[0]).toEqual({
      type: 'patient.created',
      meta: { organization_id: org, facility_id: 'fac-1', environment: 'development', request_id: 'req-1' },
    });
  });

  it('refuses an event type outside the closed list of 22', async () => {
    await expect(
      pont.services.db.transaction((tx) => recordEvent(tx, { type: 'patient.deleted' as never, environment: 'development', data: {} })),
    ).rejects.toThrow(/Unknown event type/);
  });
});

describe('delivery', () => {
  it('POSTs the signed envelope once, with identifiers and the fields §6.2 publishes only by default, and records the attempt', async () => {
    const org = newOrg();
    const { receiver, subscription } = await subscribe(org, ['lab_result.released']);
    const event = await record(org, 'lab_result.released', {
      health_id: 'CM1234567890XX',
      lab_result_id: 'lab-1',
      test_name: 'Haemoglobin',
      flagged: true,
      facility_id: 'fac-1',
      result_value: '6.1 g/dL',
    });
    const [got] = await receiver.waitFor(1);
    expect(got!.signatureValid).toBe(true);
    expect(got!.headers['content-type']).toBe('application/json');
    expect(got!.headers['x-service-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(got!.body).toEqual({
      id: event.id,
      type: 'lab_result.released',
      version: '1.0',
      created_at: event.created_at,
      data: { health_id: 'CM1234567890XX', lab_result_id: 'lab-1', test_name: 'Haemoglobin', flagged: true, facility_id: 'fac-1' },
      meta: { organization_id: org, facility_id: 'fac-1', environment: 'development', request_id: 'req-1' },
    });

    const found = await settled(org, event.id);
    expect(found.deliveries).toHaveLength(1);
    expect(found.deliveries[0]).toMatchObject({ subscription_id: subscription.id, status: 'delivered', round: 1, attempts_made: 1 });
    expect(found.deliveries[0]!.attempts).toEqual([
      expect.objectContaining({ round: 1, attempt: 1, status_code: 200, error: null, succeeded: true }),
    ]);
  });

  it('keeps its connection to a destination for the next deliveries there (the address still checked at each)', async () => {
    const org = newOrg();
    const { receiver } = await subscribe(org, ['patient.created']);
    for (let i = 1; i <= 3; i++) {
      const event = await record(org);
      await settled(org, event.id);
      expect(receiver.received).toHaveLength(i);
    }
    expect(receiver.connections).toBe(1);
  });

  it('sends the full data once an operator enables full payloads for the subscription', async () => {
    const org = newOrg();
    const { receiver, subscription } = await subscribe(org, ['lab_result.released']);
    expect(await setFullPayload(pont.services.db, subscription.id, true)).toBe(true);
    const data = { health_id: 'CM1', lab_result_id: 'lab-2', test_name: 'Glucose', flagged: false, facility_id: 'fac-1' };
    await record(org, 'lab_result.released', data);
    const [got] = await receiver.waitFor(1);
    expect(got!.body.data).toEqual(data);
  });

  it('delivers only to subscriptions of the organisation that caused the event, and only subscribed types', async () => {
    const org = newOrg();
    const other = newOrg();
    const own = await subscribe(org, ['patient.created']);
    const foreign = await subscribe(other, ['patient.created']);
    const otherType = await subscribe(org, ['consent.granted']);
    const event = await record(org);
    await own.receiver.waitFor(1);
    await settled(org, event.id);
    const queued = await pont.services.db.query<{ subscription_id: string }>(
      'SELECT subscription_id FROM webhook_deliveries WHERE event_id = $1',
      [event.id],
    );
    expect(queued.rows.map((r) => r.subscription_id)).toEqual([own.subscription.id]);
    expect(foreign.receiver.received).toHaveLength(0);
    expect(otherType.receiver.received).toHaveLength(0);
    expect(await eventDeliveries(pont.services.db, other, event.id)).toBeUndefined();
  });

  it('stores the secret encrypted, never in clear', async () => {
    const { subscription } = await subscribe(newOrg(), ['patient.created']);
    const { rows } = await pont.services.db.query<{ secret_encrypted: string }>(
      'SELECT secret_encrypted FROM webhook_subscriptions WHERE id = $1',
      [subscription.id],
    );
    expect(subscription.webhook_secret).toMatch(/^whsec_[A-Za-z0-9_-]{43,}$/);
    expect(rows[0]!.secret_encrypted).toMatch(/^v1:/);
    expect(rows[0]!.secret_encrypted).not.toContain(subscription.webhook_secret.slice(6));
  });

  it('follows the retry schedule, ends exhausted after 7 attempts, and a replay delivers again', async () => {
    const org = newOrg();
    let failing = true;
    const { receiver } = await subscribe(org, ['patient.created'], () => (failing ? 500 : 200));
    const event = await record(org);
    const attempts = await receiver.waitFor(7);
    const exhausted = await settled(org, event.id);
    expect(exhausted.deliveries[0]).toMatchObject({ status: 'exhausted', attempts_made: 7 });
    expect(exhausted.deliveries[0]!.attempts.map((a) => [a.attempt, a.status_code, a.succeeded])).toEqual(
      [1, 2, 3, 4, 5, 6, 7].map((n) => [n, 500, false]),
    );
    // Each retry waits at least its configured delay after the previous attempt failed.
    for (let n = 1; n < 7; n++) {
      expect(attempts[n]!.at - attempts[n - 1]!.at).toBeGreaterThanOrEqual(RETRY_DELAYS_MS[n - 1]! - 5);
    }
    expect(attempts.every((a) => a.signatureValid && a.body.id === event.id)).toBe(true);
    expect(receiver.received).toHaveLength(7); // nothing after exhaustion

    failing = false;
    const replay = await replayEvent(pont.services.db, org, event.id);
    expect(replay).toMatchObject({ outcome: 'queued', deliveries: [{ round: 2 }] });
    const [, , , , , , , again] = await receiver.waitFor(8);
    expect(again!.signatureValid).toBe(true);
    expect(again!.body.id).toBe(event.id);
    // Signed at sending time, not at the event's creation: a replay days later still verifies.
    const signedAt = Number(/^t=(\d+),/.exec(again!.headers['x-service-signature'] as string)![1]);
    expect(Math.abs(signedAt - again!.at / 1000)).toBeLessThan(2);
    const delivered = await settled(org, event.id);
    expect(delivered.deliveries[0]).toMatchObject({ status: 'delivered', round: 2, attempts_made: 1 });
    expect(delivered.deliveries[0]!.attempts).toHaveLength(8);
  });

  it('counts no answer within the timeout as a failed attempt, however often the heap is collected meanwhile', async () => {
    const org = newOrg();
    const { receiver } = await subscribe(org, ['patient.created'], (r) => (r.headers['x-service-delivery-attempt'] === '1' ? 'hang' : 204));
    // A busy process collects garbage all the time. On Node 20 a deadline made of AbortSignal.any() over
    // AbortSignal.timeout() was collected with it and never fired: the hung attempt was sent again at the lease's end.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const collecting = setInterval(gc, 50);
    const event = await record(org);
    await receiver.waitFor(2).finally(() => clearInterval(collecting));
    const found = await settled(org, event.id);
    expect(found.deliveries[0]!.status).toBe('delivered');
    expect(found.deliveries[0]!.attempts.map((a) => [a.attempt, a.status_code, a.error])).toEqual([
      [1, null, 'no response within 3000 ms'],
      [2, 204, null],
    ]);
    // The hung attempt was given up at its deadline, not sent again when its lease ran out.
    expect(receiver.received.map((r) => r.headers['x-service-delivery-attempt'])).toEqual(['1', '2']);
  });

  it('holds as many attempts in flight as its concurrency allows without a warning of a leak', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    try {
      const org = newOrg();
      // Twelve endpoints that leave their first attempt unanswered: twelve attempts at once, each listening for the stop.
      const subscribed = await Promise.all(Array.from({ length: 12 }, () => subscribe(org, ['patient.created'], (r) => (r.headers['x-service-delivery-attempt'] === '1' ? 'hang' : 204))));
      const event = await record(org);
      await Promise.all(subscribed.map(({ receiver }) => receiver.waitFor(2)));
      expect((await settled(org, event.id)).deliveries.map((d) => d.status)).toEqual(Array(12).fill('delivered'));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.includes('MaxListenersExceeded'))).toEqual([]);
  });

  it('records a refused connection as a failed attempt and keeps retrying', async () => {
    const org = newOrg();
    const { receiver } = await subscribe(org, ['patient.created']);
    await receiver.close(); // nobody listens there any more
    const event = await record(org);
    const delivery = await firstDeliveryOnce(org, event.id, (d) => d.attempts.length >= 2);
    expect(delivery.attempts[0]).toMatchObject({ status_code: null, error: 'ECONNREFUSED', succeeded: false });
    expect(delivery.status).toBe('pending');
  });

  it('refuses at delivery a destination that resolves to a private address (checked again at every attempt)', async () => {
    const org = newOrg();
    // Stored directly: the subscription route would have refused it (what a DNS change after subscribing looks like).
    await createSubscription(pont.services.db, pont.config.webhooks.secretKey, { organizationId: org }, { callback_url: 'https://10.9.8.7/hooks', subscribed_events: ['patient.created'], description: 'rebound' });
    const event = await record(org);
    const [first] = (await firstDeliveryOnce(org, event.id, (d) => d.attempts.length > 0)).attempts;
    expect(first).toMatchObject({ status_code: null, succeeded: false });
    expect(first!.error).toMatch(/^destination refused: 10\.9\.8\.7 resolves to a private/);
  });

  it('records an undecryptable secret as a failed attempt and sends nothing unsigned', async () => {
    const org = newOrg();
    const { receiver, subscription } = await subscribe(org, ['patient.created']);
    // What a changed PONT_WEBHOOK_SECRET_KEY looks like: the stored secret no longer decrypts.
    await pont.services.db.query(
      `UPDATE webhook_subscriptions SET secret_encrypted = 'v1:' || encode(decode(repeat(md5(random()::text), 2), 'hex'), 'base64') WHERE id = $1`,
      [subscription.id],
    );
    const event = await record(org);
    const [first] = (await firstDeliveryOnce(org, event.id, (d) => d.attempts.length > 0)).attempts;
    expect(first).toMatchObject({ status_code: null, succeeded: false, error: expect.stringContaining('could not be decrypted') });
    expect(receiver.received).toHaveLength(0);
  });

  it('replay: unknown events and events of another organisation are not found', async () => {
    const org = newOrg();
    await subscribe(org, ['patient.created']);
    const event = await record(org);
    expect(await replayEvent(pont.services.db, newOrg(), event.id)).toEqual({ outcome: 'not-found' });
    expect(await replayEvent(pont.services.db, org, 'evt_nope')).toEqual({ outcome: 'not-found' });
    const noSubscriber = await record(org, 'appointment.cancelled');
    expect(await replayEvent(pont.services.db, org, noSubscriber.id)).toEqual({ outcome: 'no-subscription', type: 'appointment.cancelled' });
  });

  it.skipIf(backend !== 'postgres')('listens again after losing its LISTEN connection (PostgreSQL only: PGlite has no separate connection)', async () => {
    const listeners = async () =>
      (
        await pont.services.db.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
          [LISTENER_APPLICATION_NAME],
        )
      ).rows.map((r) => r.pid);
    const before = await eventually(async () => {
      const pids = await listeners();
      expect(pids).not.toEqual([]);
      return pids;
    });
    await pont.services.db.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [before]);
    await eventually(async () => {
      const now = await listeners();
      expect(now).not.toEqual([]);
      expect(now.filter((pid) => before.includes(pid))).toEqual([]);
    });
    // And it still delivers.
    const org = newOrg();
    const { receiver } = await subscribe(org, ['patient.created']);
    await record(org);
    expect((await receiver.waitFor(1))[0]!.signatureValid).toBe(true);
  });
});
