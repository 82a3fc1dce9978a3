import type { Logger } from './log';

/** A job that runs beside the HTTP server in every process (e.g. the webhook delivery worker). */
export interface BackgroundWorker {
  name: string;
  start(): void;
  stop(): Promise<void>;
}

/**
 * A job that runs `run` every `everyMs`, the first time after `firstAfterMs` (default `everyMs`), logging its
 * failures; stop() waits for a run in progress.
 */
export function periodicJob(name: string, everyMs: number, run: () => Promise<unknown>, log: Logger, firstAfterMs = everyMs): BackgroundWorker {
  let first: NodeJS.Timeout | undefined;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> = Promise.resolve();
  const once = () => {
    running = run().catch((err) => log.error(`${name} failed`, { error: String(err) }));
  };
  return {
    name,
    start() {
      first = setTimeout(() => {
        once();
        timer = setInterval(once, everyMs);
        timer.unref();
      }, firstAfterMs);
      first.unref();
    },
    async stop() {
      clearTimeout(first);
      clearInterval(timer);
      await running;
    },
  };
}
