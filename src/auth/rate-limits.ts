import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import type { Database } from '../db/database';
import { ApiError, ErrorCode } from '../http/errors';

export interface RateLimit {
  points: number;
  seconds: number;
}
/**
 * Per route group (a route's `group`, else its first tag; matched without regard to case), plus
 * `default` for every other group. Keys are lower case.
 */
export type RateLimitTable = Record<string, RateLimit>;

/**
 * Defaults, per client (or agent) and group, in requests per window. `token` counts token requests
 * per client; `failed-auth` counts failed secret checks per source address, since each costs an
 * Argon2id hash and could otherwise be used to load the CPU.
 */
export const DEFAULT_RATE_LIMITS: RateLimitTable = {
  default: { points: 600, seconds: 60 },
  fhir: { points: 6000, seconds: 60 }, // FHIR clients page through searches: 100 requests/s
  token: { points: 60, seconds: 60 },
  'failed-auth': { points: 100, seconds: 60 },
};

const ENTRY = /^\s*([^=,/\s][^=,/]*?)\s*=\s*(\d{1,9})\s*\/\s*(\d{1,7})\s*$/;

/**
 * Parses `PONT_RATE_LIMITS`, e.g. `default=600/60,FHIR=1200/60,token=60/60`
 * (group=requests/seconds), over the defaults. Returns an error message for a bad spec.
 */
export function parseRateLimits(spec: string): RateLimitTable | string {
  const table: RateLimitTable = { ...DEFAULT_RATE_LIMITS };
  for (const part of spec.split(',').filter((p) => p.trim())) {
    const m = ENTRY.exec(part);
    if (!m || Number(m[2]) < 1 || Number(m[3]) < 1) return `"${part.trim()}" is not group=requests/seconds (both at least 1)`;
    table[m[1]!.toLowerCase()] = { points: Number(m[2]), seconds: Number(m[3]) };
  }
  return table;
}

/**
 * Rate limits with counters in the database (rate-limiter-flexible's PostgreSQL store, table
 * `rate_limits`), so every Pont process on one database shares them. Keys over their limit are also
 * blocked in process memory until their window ends, so a flood costs no database writes.
 * If the database fails, an in-memory limiter of the same size stands in.
 */
export class RateLimits {
  private readonly limiters = new Map<string, RateLimiterPostgres>();

  constructor(
    private readonly db: Database,
    private readonly table: RateLimitTable,
  ) {}

  limitOf(group: string): RateLimit {
    return this.table[group.toLowerCase()] ?? this.table.default!;
  }

  private limiter(group: string): RateLimiterPostgres {
    group = group.toLowerCase();
    let limiter = this.limiters.get(group);
    if (!limiter) {
      const { points, seconds } = this.limitOf(group);
      limiter = new RateLimiterPostgres({
        storeClient: { query: (q: { text: string; values?: unknown[] }) => this.db.query(q.text, q.values) },
        storeType: 'client',
        tableName: 'rate_limits',
        tableCreated: true, // by migration 003
        keyPrefix: group,
        points,
        duration: seconds,
        inMemoryBlockOnConsumed: points + 1,
        insuranceLimiter: new RateLimiterMemory({ keyPrefix: group, points, duration: seconds }),
      });
      this.limiters.set(group, limiter);
    }
    return limiter;
  }

  /** Counts one request of `key` in `group`; throws 429 when the limit is exceeded. */
  async consume(group: string, key: string): Promise<void> {
    try {
      await this.limiter(group).consume(key);
    } catch (err) {
      if (err instanceof RateLimiterRes) throw this.tooMany(group, err);
      throw err;
    }
  }

  /** Throws 429 when `key` has used up `group` already, without counting this request. */
  async assertNotExhausted(group: string, key: string): Promise<void> {
    const res = await this.limiter(group).get(key);
    if (res && res.consumedPoints >= this.limitOf(group).points) throw this.tooMany(group, res);
  }

  /** Counts one failure of `key` in `group`; never throws for the limit (the request fails anyway). */
  async penalize(group: string, key: string): Promise<void> {
    await this.limiter(group)
      .consume(key)
      .catch((err) => {
        if (!(err instanceof RateLimiterRes)) throw err;
      });
  }

  private tooMany(group: string, res: RateLimiterRes): ApiError {
    const retryAfter = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
    const { points, seconds } = this.limitOf(group);
    return new ApiError(
      429,
      ErrorCode.rateLimited,
      `Rate limit of ${points} requests per ${seconds} s reached for ${group}; retry in ${retryAfter} s`,
      { extra: { retry_after: retryAfter }, headers: { 'Retry-After': String(retryAfter) } },
    );
  }
}
