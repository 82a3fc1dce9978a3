/** Attempts per delivery round (section 8). */
export const MAX_ATTEMPTS = 7;

/**
 * Delays before attempts 2..7 (section 8: 1 m, 5 m, 15 m, 1 h, 6 h, 24 h); attempt 1 is always
 * immediate, queued with the event in its transaction.
 */
export const DEFAULT_RETRY_DELAYS = '1m,5m,15m,1h,6h,24h';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `250ms`, `30s`, `5m`, `1h`, or a bare `0`, in milliseconds; undefined when malformed. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!match) return undefined;
  const [, amount, unit] = match;
  if (!unit && Number(amount) !== 0) return undefined; // a bare number is ambiguous unless it is 0
  return Math.round(Number(amount) * UNIT_MS[unit ?? 'ms']!);
}

/** A comma-separated list of the 6 retry delays -> milliseconds, or an error message. */
export function parseRetryDelays(text: string): number[] | string {
  const parts = text.split(',');
  if (parts.length !== MAX_ATTEMPTS - 1) {
    return `must list ${MAX_ATTEMPTS - 1} delays (before attempts 2..${MAX_ATTEMPTS}), got ${parts.length}`;
  }
  const delays = parts.map(parseDuration);
  const bad = parts.find((_, i) => delays[i] === undefined);
  if (bad !== undefined) return `"${bad.trim()}" is not a duration (use e.g. 0, 250ms, 30s, 5m, 1h)`;
  return delays as number[];
}

export type AttemptOutcome = { status: 'delivered' } | { status: 'exhausted' } | { status: 'pending'; delayMs: number };

/** What follows attempt `attempt` (1-based) of a round: done, retry after the schedule's delay, or give up. */
export function afterAttempt(attempt: number, succeeded: boolean, retryDelaysMs: readonly number[]): AttemptOutcome {
  if (succeeded) return { status: 'delivered' };
  if (attempt >= MAX_ATTEMPTS) return { status: 'exhausted' };
  return { status: 'pending', delayMs: retryDelaysMs[attempt - 1]! };
}
