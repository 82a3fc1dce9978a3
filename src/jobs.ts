import type { Logger } from './log';

/** A job that runs beside the HTTP server in every process (e.g. the webhook delivery worker). */
export interface BackgroundWorker {
  name: string;
  start(): void;
  stop(): Promise<void>;
}

/** A job that runs `run` every `everyMs` (first after `everyMs`), logging its failures; stop() waits for a run in progress. */
export function periodicJob(name: string, everyMs: number, run: () => Promise<unknown>, log: Logger): BackgroundWorker {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> = Promise.resolve();
  return {
    name,
    start() {
      timer = setInterval(() => {
        running = run().catch((err) => log.error(`${name} failed`, { error: String(err) }));
      }, everyMs);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
