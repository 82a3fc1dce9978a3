import { MAX_ATTEMPTS } from '../core/settings';

export { DEFAULT_RETRY_DELAYS, MAX_ATTEMPTS, parseDuration, parseRetryDelays } from '../core/settings';

export type AttemptOutcome = { status: 'delivered' } | { status: 'exhausted' } | { status: 'pending'; delayMs: number };

/** What follows attempt `attempt` (1-based) of a round: done, retry after the schedule's delay, or give up. */
export function afterAttempt(attempt: number, succeeded: boolean, retryDelaysMs: readonly number[]): AttemptOutcome {
  if (succeeded) return { status: 'delivered' };
  if (attempt >= MAX_ATTEMPTS) return { status: 'exhausted' };
  return { status: 'pending', delayMs: retryDelaysMs[attempt - 1]! };
}
