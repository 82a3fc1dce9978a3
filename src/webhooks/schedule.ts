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

/**
 * The retry delays -> milliseconds, or an error message. Six durations (before attempts 2..7), or
 * the whole table of section 8 with its leading 0 (attempt 1 is always immediate).
 */
export function parseRetryDelays(text: string): number[] | string {
  const delays = text.split(',').map((part) => ({ part: part.trim(), ms: parseDuration(part) }));
  const bad = delays.find((d) => d.ms === undefined);
  if (bad) return `"${bad.part}" is not a duration (use e.g. 0, 250ms, 30s, 5m, 1h)`;
  if (delays.length === MAX_ATTEMPTS) {
    if (delays[0]!.ms !== 0) return 'attempt 1 is always immediate: list 6 delays (before attempts 2..7), or 7 starting with 0';
    delays.shift();
  }
  if (delays.length !== MAX_ATTEMPTS - 1) {
    return `must list ${MAX_ATTEMPTS - 1} delays (before attempts 2..${MAX_ATTEMPTS}), got ${delays.length}`;
  }
  return delays.map((d) => d.ms!);
}

export type AttemptOutcome = { status: 'delivered' } | { status: 'exhausted' } | { status: 'pending'; delayMs: number };

/** What follows attempt `attempt` (1-based) of a round: done, retry after the schedule's delay, or give up. */
export function afterAttempt(attempt: number, succeeded: boolean, retryDelaysMs: readonly number[]): AttemptOutcome {
  if (succeeded) return { status: 'delivered' };
  if (attempt >= MAX_ATTEMPTS) return { status: 'exhausted' };
  return { status: 'pending', delayMs: retryDelaysMs[attempt - 1]! };
}
