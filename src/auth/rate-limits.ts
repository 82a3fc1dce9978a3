import type { Queryable } from '../db/database';
import { ApiError, ErrorCode } from '../core/errors';
import { rateLimitRefusals } from '../metrics';
import type { RateLimit, RateLimitTable } from '../core/settings';

export { DEFAULT_RATE_LIMITS, parseRateLimits, type RateLimit, type RateLimitTable } from '../core/settings';

/** Most units of allowance a process takes from the shared counter at a time. */
const MAX_BATCH = 50;

/**
 * Units of allowance a process takes from the shared counter at a time for a limit of `points`: 1% of the
 * limit, at least 1 (small limits are counted exactly, one round trip a request), at most MAX_BATCH.
 */
export const batchOf = (points: number) => Math.max(1, Math.min(MAX_BATCH, Math.floor(points / 100)));

/** One key's fixed window in this process: what it may still admit without asking the database. */
interface Window {
  start: number;
  end: number;
  /** Units taken from the shared counter and not yet used. */
  allowance: number;
  /** The shared counter has reached the limit: once `allowance` is used, the window is closed. */
  exhausted: boolean;
  reserving?: Promise<void>;
}

/** How often windows that ended are forgotten (in memory and in the table). */
const SWEEP_MS = 60_000;

/**
 * Rate limits counted in memory, against counters in the database (table `rate_counters`) shared by every
 * Pont process. A process takes units of a key's allowance in batches (batchOf: 1% of the limit, at most 50)
 * with one atomic statement that never takes the counter past the limit, and admits requests from what it
 * holds without a round trip. So together the processes never admit more than the limit in a window; when a
 * client's requests are spread over N processes, it can be refused up to (N - 1) x batch requests early
 * (allowance other processes hold unused). Fixed windows of the limit's length, aligned on the epoch.
 */
export class RateLimits {
  private readonly windows = new Map<string, Window>();
  private readonly sweeper: NodeJS.Timeout;

  /**
   * @param now the clock (ms since the epoch) that places a request in its window; tests move it.
   */
  constructor(
    private readonly db: Queryable,
    private readonly table: RateLimitTable,
    public now: () => number = Date.now,
  ) {
    this.sweeper = setInterval(() => void this.sweep().catch(() => undefined), SWEEP_MS);
    this.sweeper.unref();
  }

  limitOf(group: string): RateLimit {
    return this.table[group.toLowerCase()] ?? this.table.default!;
  }

  /** Counts one request of `key` in `group`; throws 429 when the limit is exceeded. */
  async consume(group: string, key: string): Promise<void> {
    if (!(await this.take(group, key))) throw this.tooMany(group, key);
  }

  /** Throws 429 when `key` has used up `group` already, as far as this process knows, without counting this request. */
  assertNotExhausted(group: string, key: string): void {
    const w = this.windowOf(group, key);
    if (w.allowance === 0 && w.exhausted) throw this.tooMany(group, key);
  }

  /** Counts one failure of `key` in `group`; never throws for the limit (the request fails anyway). */
  async penalize(group: string, key: string): Promise<void> {
    await this.take(group, key);
  }

  /** Takes one unit of `key`'s allowance in `group`: false when its window's limit is used up. */
  private async take(group: string, key: string): Promise<boolean> {
    for (;;) {
      const w = this.windowOf(group, key);
      if (w.allowance > 0) {
        w.allowance--;
        return true;
      }
      if (w.exhausted) return false;
      await (w.reserving ??= this.reserve(group, key, w).finally(() => (w.reserving = undefined)));
    }
  }

  /** Takes a batch of allowance from the shared counter: as much as is left of the limit, at most a batch. */
  private async reserve(group: string, key: string, w: Window): Promise<void> {
    const { points } = this.limitOf(group);
    const { rows } = await this.db.query<{ count: number; granted: number }>(
      `INSERT INTO rate_counters AS c (key, window_start, expires_at, count, granted)
       VALUES ($1, $2, $3, LEAST($4::int, $5::int), LEAST($4::int, $5::int))
       ON CONFLICT (key, window_start) DO UPDATE SET count = LEAST(c.count + $4, $5), granted = LEAST(c.count + $4, $5) - c.count
       RETURNING count, granted`,
      [`${group.toLowerCase()}:${key}`, w.start, w.end, batchOf(points), points],
    );
    w.allowance += rows[0]!.granted;
    w.exhausted = rows[0]!.count >= points;
  }

  private windowOf(group: string, key: string): Window {
    const ms = this.limitOf(group).seconds * 1000;
    const now = this.now();
    const start = now - (now % ms);
    const id = `${group.toLowerCase()}\0${key}`;
    let w = this.windows.get(id);
    if (!w || w.start !== start) this.windows.set(id, (w = { start, end: start + ms, allowance: 0, exhausted: false }));
    return w;
  }

  private async sweep(): Promise<void> {
    const now = this.now();
    for (const [id, w] of this.windows) if (w.end <= now && !w.reserving) this.windows.delete(id);
    await this.db.query('DELETE FROM rate_counters WHERE expires_at <= $1', [now]);
  }

  close(): void {
    clearInterval(this.sweeper);
  }

  private tooMany(group: string, key: string): ApiError {
    rateLimitRefusals.inc({ group: group.toLowerCase() });
    const retryAfter = Math.max(1, Math.ceil((this.windowOf(group, key).end - this.now()) / 1000));
    const { points, seconds } = this.limitOf(group);
    return new ApiError(
      429,
      ErrorCode.rateLimited,
      `Rate limit of ${points} requests per ${seconds} s reached for ${group}; retry in ${retryAfter} s`,
      { extra: { retry_after: retryAfter }, headers: { 'Retry-After': String(retryAfter) } },
    );
  }
}
