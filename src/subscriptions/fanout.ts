import { AsyncLocalStorage } from 'node:async_hooks';
import type { Database } from '../db/database';
import type { BackgroundWorker } from '../jobs';
import type { Logger } from '../log';
import { CHANGES_CHANNEL, FANOUT_BATCH, numberQueuedChanges, setAsideOldestChange } from './service';

/** How often the queue is looked at without a wake-up (a NOTIFY lost with the listening connection, another process's turn ended). */
export const FANOUT_POLL_MS = 1000;

/** How soon a process that found another numbering looks again. */
const BUSY_RETRY_MS = 20;

export interface FanOutWorker extends BackgroundWorker {
  /** Number what is queued now rather than at the next poll. */
  wake(): void;
}

/**
 * The fan-out of FHIR Subscriptions (src/subscriptions/service.ts numberQueuedChanges), run in every Pont process:
 * woken by the NOTIFY of a write that queued changes (from any process; PGlite: its own), and polling. One process
 * numbers at a time (an advisory lock); the others find it busy and leave the queue to it, which goes on until the
 * queue is empty. A run is one transaction: killed mid-way, it numbered nothing, and the next run numbers it all.
 */
export function createFanOutWorker(db: Database, log: Logger, pollMs = FANOUT_POLL_MS): FanOutWorker {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let rerun = false;
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  let listening: Promise<(() => Promise<void>) | undefined> | undefined;

  /** Changes still to take one at a time after a run failed: the one that fails is found and set aside, the others go on. */
  let isolating = 0;
  const drainOnce = async () => {
    do {
      rerun = false;
      let run: Awaited<ReturnType<typeof numberQueuedChanges>>;
      try {
        run = await numberQueuedChanges(db, isolating ? 1 : FANOUT_BATCH);
      } catch (err) {
        if (stopped) return;
        if (!isolating) isolating = FANOUT_BATCH; // one of the batch failed it: which?
        else {
          const seq = await setAsideOldestChange(db, String(err));
          log.error('fhir subscription change not numbered; set aside and tried again later', { seq, error: String(err) });
          isolating--;
        }
        rerun = true;
        continue;
      }
      if (isolating && run.changes) isolating--;
      if (run.changes) rerun = true; // there may be more queued
      // Another process's turn: it may have looked at the queue before this process's change committed, so look again soon.
      else if (run.busy && !retry) retry = setTimeout(() => ((retry = undefined), wake()), BUSY_RETRY_MS).unref();
    } while (rerun && !stopped);
  };
  const tick = () => {
    if (running) rerun = true;
    else
      running = drainOnce()
        .catch((err) => {
          if (!stopped) log.error('fhir subscription fan-out failed', { error: String(err) });
        })
        .finally(() => {
          running = undefined;
          if (rerun) wake();
        });
  };
  // A wake-up comes from inside a committing transaction (PGlite), whose async context the loop must not inherit.
  const inWorkerContext = AsyncLocalStorage.snapshot();
  function wake() {
    if (!stopped) inWorkerContext(() => setImmediate(tick));
  }

  return {
    name: 'fhir-subscription-fanout',
    wake,
    start() {
      timer = setInterval(tick, pollMs);
      timer.unref();
      listening = db.listen(CHANGES_CHANNEL, { notify: wake, ready: wake }).catch((err) => {
        log.error('fhir subscription fan-out listener not started', { error: String(err) });
        return undefined;
      });
      wake();
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(retry);
      await running;
      await (await listening)?.();
    },
  };
}
