import type { Retention } from './period';
import ipaddr from 'ipaddr.js';

// The parsed forms of Pont's settings: what src/config.ts reads from the environment and hands to the features
// (rate limits, proxy trust, webhook retry delays, the metrics endpoint, bulk export limits). Here, below both,
// so that the configuration imports no feature.

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
 * Which X-Forwarded-For entries to believe (PONT_TRUST_PROXY). Each proxy appends the address it received the
 * request from, so only the right-hand end of the header is written by proxies we run; everything to the left
 * of it is whatever the caller sent. The caller's address is found as Express's `trust proxy` and nginx's
 * `real_ip_recursive` find it: start at the socket, walk the header from the right, and stop at the first
 * address that is not a trusted proxy.
 * - `none`: the socket's address; the header is ignored.
 * - `hops`: that many proxies in front of Pont (the socket's peer is the first).
 * - `ranges`: the proxies are the addresses in these ranges, however many there are.
 */
export type ProxyTrust = { kind: 'none' } | { kind: 'hops'; hops: number } | { kind: 'ranges'; ranges: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> };

/** Names accepted in a list, as in Express's `trust proxy`. */
const NAMED_RANGES: Record<string, string[]> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/**
 * Parses PONT_TRUST_PROXY: `false` (or 0), a number of hops (`1`: one proxy in front), or a comma-separated list
 * of proxy addresses and CIDR ranges (`10.0.0.0/8,127.0.0.1`; also `loopback`, `linklocal`, `uniquelocal`).
 * `true`, the older form, means one hop: never the caller-controlled leftmost entry. Returns an error message.
 */
export function parseTrustProxy(text: string): ProxyTrust | string {
  const value = text.trim().toLowerCase();
  if (value === 'false' || value === '0') return { kind: 'none' };
  if (value === 'true') return { kind: 'hops', hops: 1 };
  if (/^\d+$/.test(value)) {
    const hops = Number(value);
    return hops <= 32 ? { kind: 'hops', hops } : 'must be false, a number of proxy hops (at most 32) or a list of proxy addresses/CIDR ranges';
  }
  const ranges: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> = [];
  for (const entry of value.split(',').map((p) => p.trim()).filter(Boolean)) {
    for (const cidr of NAMED_RANGES[entry] ?? [entry]) {
      try {
        ranges.push(cidr.includes('/') ? ipaddr.parseCIDR(cidr) : wholeAddress(cidr));
      } catch {
        return `"${entry}" is not an IP address or CIDR range (PONT_TRUST_PROXY: false, a number of hops, or a list such as 10.0.0.0/8,127.0.0.1)`;
      }
    }
  }
  return ranges.length ? { kind: 'ranges', ranges } : { kind: 'none' };
}

function wholeAddress(text: string): [ipaddr.IPv4 | ipaddr.IPv6, number] {
  const address = ipaddr.process(text);
  return [address, address.kind() === 'ipv4' ? 32 : 128];
}

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

/** Where the metrics are served and who may read them. */
export interface MetricsEndpoint {
  port: number;
  host: string;
  /** Bearer token required (compared in constant time); undefined: none (a loopback address only, see config). */
  token?: string;
}

/** docs/fhir.md "Bulk Data export": the limits a client is told about. */
export interface BulkExportSettings {
  /** How long a finished export's manifest and files stay (then 404, and the janitor removes them). */
  ttlMs: number;
  /** Resource types (of one export or several) one process writes at once (0: this process writes none; others do). */
  concurrency: number;
  /** The most resources in one file. */
  partResources: number;
  /** The most bytes in one file (one resource more than this may end it). */
  partBytes: number;
  /** How long a claim lasts without progress before another process takes the job over. */
  leaseMs: number;
  /** How often idle workers look for jobs (and for leases run out). */
  pollIntervalMs: number;
  /** Where the files are written (src/bulk/files.ts): one directory that every process serving the exports sees. */
  dir: string;
}

/** How long each kind of row is kept, and where the audit trail is archived (src/retention/). */
export interface RetentionConfig {
  /** audit_log and the AuditEvents made from it; a month is archived to `auditArchiveDir` before it is dropped. */
  audit: Retention;
  events: Retention;
  /** Finished webhook deliveries, and attempts. */
  webhookDeliveries: Retention;
  /** Earlier versions of FHIR resources (the current version is always kept). */
  resourceVersions: Retention;
  /** How long AuditEvents brought back by `pont audit restore` stay before they are dropped again. */
  auditRestoreHold: Retention;
  auditArchiveDir?: string;
}
