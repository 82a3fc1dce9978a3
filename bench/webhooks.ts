/**
 * `npm run bench:webhooks`: how fast committed events reach a local receiver.
 *
 * For each setup (embedded PGlite in this process; one and two `pont serve` processes on one
 * PostgreSQL database) with two subscriptions to the event type:
 * - burst: BENCH_EVENTS events committed as fast as 8 concurrent transactions allow; events/s from
 *   the first commit to each event's first attempt, deliveries/s to the receivers, and
 *   commit-to-delivery latency (which here is mostly queueing);
 * - steady: BENCH_RATE events/s for BENCH_SECONDS; commit-to-delivery latency p50/p95 of a system
 *   that keeps up.
 * Every delivery's signature is verified by the receiver; duplicates are counted.
 * BENCH_SETUPS picks setups (default `pglite,postgres1,postgres2`).
 */
import { loadConfig } from '../src/config';
import type { Database } from '../src/db/database';
import { openPostgres } from '../src/db/postgres';
import { recordEvent } from '../src/events/outbox';
import { startPont } from '../src/server';
import { createSubscription } from '../src/webhooks/subscriptions';
import { createScratchDatabase } from '../test/harness';
import { startPontProcess, startReceiver, stopPontProcess, type PontProcess, type Receiver } from '../test/webhooks-support';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 1000);
const RATE = Number(process.env.BENCH_RATE ?? 50);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const SUBSCRIPTIONS = 2;
const COMMITTERS = 8;
const ORG = 'org-bench';

interface Setup {
  label: string;
  /** Where the benchmark commits events (the same database the Pont processes use). */
  db: Database;
  stop(): Promise<void>;
}

async function pgliteSetup(): Promise<Setup> {
  const config = loadConfig({ PORT: '0', LOG_LEVEL: 'error' });
  config.dataDir = undefined; // in memory
  const pont = await startPont(config);
  return { label: '1 process, embedded PGlite (in this process)', db: pont.services.db, stop: () => pont.close() };
}

async function postgresSetup(processes: number): Promise<Setup> {
  const scratch = await createScratchDatabase();
  const children: PontProcess[] = [];
  for (let i = 0; i < processes; i++) children.push(await startPontProcess(scratch.url)); // one by one: first start migrates
  const db = await openPostgres(scratch.url, COMMITTERS + 2);
  return {
    label: `${processes} process${processes > 1 ? 'es' : ''}, PostgreSQL`,
    db,
    async stop() {
      await Promise.all(children.map((c) => stopPontProcess(c, 'SIGTERM')));
      await db.close();
      await scratch.drop();
    },
  };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

async function commit(db: Database): Promise<{ id: string; committedAt: number }> {
  const event = await db.transaction((tx) =>
    recordEvent(tx, { type: 'patient.created', organizationId: ORG, environment: 'development', data: { patient_id: 'bench' } }),
  );
  return { id: event.id, committedAt: Date.now() };
}

/** Waits until every receiver holds `total` deliveries. */
const allReceived = (receivers: Receiver[], total: number) => Promise.all(receivers.map((r) => r.waitFor(total)));

function latencies(receivers: Receiver[], from: number, committedAt: Map<string, number>): number[] {
  return receivers
    .flatMap((r) => r.received.slice(from))
    .map((got) => got.at - committedAt.get(got.body.id)!)
    .sort((a, b) => a - b);
}

async function run(setup: Setup) {
  const secretKey = loadConfig({}).webhooks.secretKey;
  const receivers: Receiver[] = [];
  for (let i = 0; i < SUBSCRIPTIONS; i++) {
    const receiver = await startReceiver();
    const subscription = await createSubscription(setup.db, secretKey, { organizationId: ORG }, {
      callback_url: receiver.url,
      subscribed_events: ['patient.created'],
    });
    receiver.secret = subscription.webhook_secret;
    receivers.push(receiver);
  }
  const committedAt = new Map<string, number>();

  // Burst.
  const started = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: COMMITTERS }, async () => {
      while (next++ < EVENTS) {
        const { id, committedAt: at } = await commit(setup.db);
        committedAt.set(id, at);
      }
    }),
  );
  const committedIn = Date.now() - started;
  await allReceived(receivers, EVENTS);
  const firstAttempt = new Map<string, number>();
  for (const got of receivers.flatMap((r) => r.received)) {
    firstAttempt.set(got.body.id, Math.min(firstAttempt.get(got.body.id) ?? Infinity, got.at));
  }
  const lastFirstAttempt = Math.max(...firstAttempt.values());
  const lastDelivery = Math.max(...receivers.flatMap((r) => r.received.map((g) => g.at)));
  const burst = latencies(receivers, 0, committedAt);

  // Steady rate.
  const steadyFrom = EVENTS;
  const steadyEvents = RATE * SECONDS;
  const steadyStart = Date.now() + 200;
  for (let i = 0; i < steadyEvents; i++) {
    const due = steadyStart + (i * 1000) / RATE;
    void (async () => {
      await new Promise((r) => setTimeout(r, Math.max(0, due - Date.now())));
      const { id, committedAt: at } = await commit(setup.db);
      committedAt.set(id, at);
    })();
  }
  await allReceived(receivers, steadyFrom + steadyEvents);
  const steady = latencies(receivers, steadyFrom, committedAt);

  const all = receivers.flatMap((r) => r.received);
  const perReceiverUnique = receivers.reduce((n, r) => n + new Set(r.received.map((g) => g.body.id)).size, 0);
  await Promise.all(receivers.map((r) => r.close()));
  return {
    setup: setup.label,
    'commits/s': Math.round(EVENTS / (committedIn / 1000)),
    'events/s to 1st attempt': Math.round(EVENTS / ((lastFirstAttempt - started) / 1000)),
    'deliveries/s': Math.round((EVENTS * SUBSCRIPTIONS) / ((lastDelivery - started) / 1000)),
    'burst p50/p95 ms': `${percentile(burst, 50)} / ${percentile(burst, 95)}`,
    [`steady ${RATE}/s p50/p95 ms`]: `${percentile(steady, 50)} / ${percentile(steady, 95)}`,
    'bad signatures': all.filter((g) => !g.signatureValid).length,
    duplicates: all.length - perReceiverUnique,
  };
}

const setups: Record<string, () => Promise<Setup>> = {
  pglite: pgliteSetup,
  postgres1: () => postgresSetup(1),
  postgres2: () => postgresSetup(2),
};
const chosen = (process.env.BENCH_SETUPS ?? Object.keys(setups).join(',')).split(',');
const rows = [];
for (const name of chosen) {
  const makeSetup = setups[name];
  if (!makeSetup) throw new Error(`BENCH_SETUPS: unknown setup ${name} (known: ${Object.keys(setups).join(', ')})`);
  const setup = await makeSetup();
  try {
    rows.push(await run(setup));
  } finally {
    await setup.stop();
  }
}
console.log(`\n${EVENTS} events burst + ${RATE}/s for ${SECONDS} s, ${SUBSCRIPTIONS} subscriptions each, local receivers verifying signatures\n`);
console.table(rows);
process.exit(0);
