/**
 * Several Pont processes on one PostgreSQL: each (event, subscription) is delivered once, and a
 * process killed mid-delivery loses nothing. Real child processes of `node bin/pont.js serve`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import type { Database } from '../src/db/database';
import { openPostgres } from '../src/db/postgres';
import { onEventsRecorded, recordEvent } from '../src/events/outbox';
import { queueDeliveries } from '../src/webhooks/deliveries';
import { createSubscription } from '../src/webhooks/subscriptions';
import { backend, createScratchDatabase } from './harness';
import { eventually } from './eventually';
import { startPontProcess, startReceiver, stopPontProcess as stopProcess, type PontProcess, type Receiver } from './webhooks-support';

const ORG = 'org-processes';
const EVENTS = 60;

const PROCESS_ENV = {
  PONT_WEBHOOK_POLL_INTERVAL: '50ms',
  PONT_WEBHOOK_RETRY_DELAYS: '100ms,100ms,100ms,100ms,100ms,100ms',
  // The kill test holds requests unanswered: they must not time out before the kill. Lease: 2 × 5 s + 5 s.
  PONT_WEBHOOK_TIMEOUT: '5s',
};
const startProcess = (databaseUrl: string) => startPontProcess(databaseUrl, PROCESS_ENV);

describe.skipIf(backend !== 'postgres')('two Pont processes on one PostgreSQL (PostgreSQL only: PGlite is an in-process database that a second process cannot open)', () => {
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
  let db: Database;
  const processes: PontProcess[] = [];
  const receivers: Receiver[] = [];
  const secretKey = loadConfig({}).webhooks.secretKey; // the development key, as the children use

  beforeAll(async () => {
    // This process records the events itself, without a Pont in it: it registers the fan-out as composition does.
    onEventsRecorded(queueDeliveries);
    scratch = await createScratchDatabase({ migrated: true });
    // Migrated already (the template), as after a first start. The processes start one after the other all the same:
    // two first starts racing on a fresh database trip over `CREATE TABLE IF NOT EXISTS schema_migrations` in
    // src/db/migrate.ts (reported, not ours to change).
    processes.push(await startProcess(scratch.url));
    processes.push(await startProcess(scratch.url));
    db = await openPostgres(scratch.url, 4);
  });
  afterAll(async () => {
    await Promise.all(processes.map((p) => stopProcess(p, 'SIGKILL')));
    await Promise.all(receivers.map((r) => r.close()));
    await db?.close();
    await scratch?.drop();
  });

  async function subscribedReceiver(reply?: Parameters<typeof startReceiver>[0]) {
    const receiver = await startReceiver(reply);
    receivers.push(receiver);
    const subscription = await createSubscription(db, secretKey, { organizationId: ORG }, {
      callback_url: receiver.url,
      subscribed_events: ['patient.created'],
    });
    receiver.secret = subscription.webhook_secret;
    return { receiver, subscription };
  }

  async function recordEvents(n: number): Promise<string[]> {
    const ids = await Promise.all(
      Array.from({ length: n }, () =>
        db.transaction(async (tx) => (await recordEvent(tx, { type: 'patient.created', organizationId: ORG, environment: 'development', data: {} })).id),
      ),
    );
    return ids;
  }

  /** Waits until none of the subscription's deliveries is pending any more. */
  function settled(subscriptionId: string) {
    return eventually(async () => {
      const { rows } = await db.query<{ status: string; n: string }>(
        'SELECT status, count(*) AS n FROM webhook_deliveries WHERE subscription_id = $1 GROUP BY status',
        [subscriptionId],
      );
      if (rows.some((r) => r.status === 'pending')) throw new Error('deliveries still pending');
      return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
    });
  }

  it('delivers each event once per subscription while both processes claim work', async () => {
    const first = await subscribedReceiver();
    const second = await subscribedReceiver();
    const ids = await recordEvents(EVENTS);
    for (const { receiver, subscription } of [first, second]) {
      await receiver.waitFor(EVENTS);
      expect(await settled(subscription.id)).toEqual({ delivered: EVENTS });
      expect(receiver.received.every((r) => r.signatureValid)).toBe(true);
      expect(receiver.received.map((r) => r.body.id).sort()).toEqual([...ids].sort()); // each exactly once
      const attempts = await db.query<{ n: string }>(
        `SELECT count(*) AS n FROM webhook_delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
         WHERE d.subscription_id = $1`,
        [subscription.id],
      );
      expect(Number(attempts.rows[0]!.n)).toBe(EVENTS);
    }
  });

  it('retries what a process killed mid-delivery was sending, losing nothing', async () => {
    // One process left, so it claims every delivery; the receiver holds them unanswered.
    await stopProcess(processes.shift()!, 'SIGTERM');
    let holding = true;
    const { receiver, subscription } = await subscribedReceiver(() => (holding ? 'hang' : 200));
    const ids = await recordEvents(5);
    await receiver.waitFor(5);
    await stopProcess(processes.shift()!, 'SIGKILL'); // mid-delivery: five requests in flight, nothing recorded
    holding = false;
    // Their leases run out (2 × 5 s + 5 s from the claim) without the test waiting for it: the claim's end moved to now.
    const leased = await db.query(`UPDATE webhook_deliveries SET next_attempt_at = now() WHERE subscription_id = $1 AND status = 'pending' AND lease_token IS NOT NULL`, [subscription.id]);
    expect(leased.rowCount).toBe(5);

    processes.push(await startProcess(scratch.url));
    expect(await settled(subscription.id)).toEqual({ delivered: 5 });
    const answered = receiver.received.slice(5);
    expect(answered.map((r) => r.body.id).sort()).toEqual([...ids].sort());
    expect(answered.every((r) => r.signatureValid)).toBe(true);
    const attempts = await db.query<{ attempt: number; status_code: number }>(
      `SELECT a.attempt, a.status_code FROM webhook_delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
       WHERE d.subscription_id = $1`,
      [subscription.id],
    );
    // The killed process recorded nothing; the survivor made attempt 1 of each.
    expect(attempts.rows).toEqual(Array.from({ length: 5 }, () => ({ attempt: 1, status_code: 200 })));
  });
});
