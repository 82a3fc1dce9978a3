import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import ipaddr from 'ipaddr.js';
import {
  DEFAULT_RETRY_DELAYS,
  parseDuration,
  parseRateLimits,
  parseRetryDelays,
  parseTrustProxy,
  type BulkExportSettings,
  type MetricsEndpoint,
  type ProxyTrust,
  type RateLimitTable,
  type RetentionConfig,
} from './core/settings';
import { LOG_LEVELS, type LogLevel } from './log';
import { parseRetention, type Retention } from './core/period';

const environments = ['development', 'sandbox', 'production'] as const;
export type Environment = (typeof environments)[number];

const schema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().default('127.0.0.1'),
  /** The address integrators use; issuer of tokens and base of every absolute URL we publish. */
  PONT_PUBLIC_URL: z.url().optional(),
  /** Default: production when NODE_ENV=production (the Docker image), else development (`npm start`). */
  PONT_ENV: z.enum(environments).optional(),
  NODE_ENV: z.string().optional(),
  /** A development server listens on loopback only unless this is true (its secrets are public). */
  PONT_ALLOW_DEV_ON_NETWORK: z.enum(['true', 'false']).default('false'),
  /** postgres://… for a PostgreSQL server; unset for the embedded database. */
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  /** The LISTEN connection's own URL, straight to PostgreSQL, when DATABASE_URL goes through PgBouncer in transaction mode. */
  DATABASE_LISTEN_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  /** A read replica for the lag-tolerant readers (docs/operators.md "Read replicas"); PostgreSQL only. */
  DATABASE_READ_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  /** Named prepared statements on PostgreSQL; false behind a pooler that cannot keep them (PgBouncer < 1.21 in transaction mode). */
  PONT_PREPARED_STATEMENTS: z.enum(['true', 'false']).default('true'),
  PONT_DATA_DIR: z.string().default('./data'),
  /** Largest request body accepted, in bytes. */
  PONT_MAX_BODY_BYTES: z.coerce.number().int().positive().default(16 * 1024 * 1024),
  LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  /** Directory of the mapping files (*.map.yaml); default: the repository's mappings/. */
  PONT_MAPPINGS_DIR: z.string().min(1).optional(),
  /** Development only: reload the maps when a file of the mappings directory changes (as SIGHUP does). */
  PONT_MAPPINGS_WATCH: z.enum(['true', 'false']).default('false'),
  /** Webhooks (docs/integrators.md "Webhooks"): delays before attempts 2..7, e.g. `1m,5m,15m,1h,6h,24h`. */
  PONT_WEBHOOK_RETRY_DELAYS: z.string().default(DEFAULT_RETRY_DELAYS).transform((text, ctx) => {
    const delays = parseRetryDelays(text);
    if (typeof delays === 'string') ctx.addIssue({ code: 'custom', message: delays });
    return delays as number[];
  }),
  PONT_WEBHOOK_POLL_INTERVAL: z.string().default('250ms').transform(positiveDuration),
  PONT_WEBHOOK_TIMEOUT: z.string().default('10s').transform(positiveDuration),
  PONT_WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(16),
  /** 32 bytes, base64: encrypts webhook secrets at rest. Required in sandbox and production. */
  PONT_WEBHOOK_SECRET_KEY: z
    .string()
    .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be 32 bytes, base64-encoded')
    .optional(),
  PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: z.enum(['true', 'false']).optional(),
  /** Behind reverse proxies: how many hops, or which addresses, to trust in X-Forwarded-For (src/http/client-address.ts). */
  PONT_TRUST_PROXY: z.string().default('false').transform((text, ctx) => {
    const trust = parseTrustProxy(text);
    if (typeof trust === 'string') ctx.addIssue({ code: 'custom', message: trust });
    return trust as ProxyTrust;
  }),
  /** How long a stopping process waits for requests in flight before closing anyway. */
  PONT_SHUTDOWN_GRACE: z.string().default('10s').transform(positiveDuration),
  /** A portal session ends after this long without a request, and this long after sign-in whatever happens (docs/integrators.md "Developer portal"). */
  PONT_PORTAL_SESSION_IDLE: z.string().default('30m').transform(positiveDuration),
  PONT_PORTAL_SESSION_MAX: z.string().default('12h').transform(positiveDuration),
  /** How often Bridge Agents sync and send heartbeats (told in the heartbeat answer). */
  PONT_BRIDGE_SYNC_INTERVAL: z.string().default('5m').transform(positiveDuration),
  /** How long an Idempotency-Key is remembered. */
  PONT_IDEMPOTENCY_TTL: z.string().default('24h').transform(positiveDuration),
  /** 32 bytes, base64: keys the patient match keys (HMAC). Required in sandbox and production. */
  PONT_MATCH_KEY_SECRET: z
    .string()
    .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be 32 bytes, base64-encoded')
    .optional(),
  /** Retention (docs/operators.md "Retention"): `never` (the default) or a period such as 90d, 8w, 18mo, 10y (src/retention/). */
  PONT_RETENTION_AUDIT: z.string().default('never').transform(retention),
  PONT_RETENTION_EVENTS: z.string().default('never').transform(retention),
  PONT_RETENTION_WEBHOOK_DELIVERIES: z.string().default('never').transform(retention),
  PONT_RETENTION_RESOURCE_VERSIONS: z.string().default('never').transform(retention),
  /** How long AuditEvents brought back by `pont audit restore` stay. */
  PONT_AUDIT_RESTORE_HOLD: z.string().default('30d').transform(retention),
  /** How long after start the first retention pass runs (then hourly). */
  PONT_RETENTION_START_DELAY: z.string().default('30s').transform(positiveDuration),
  /** The longest a terminology operation or search may run in the database, all its statements (a given value set's filters can cost hours). */
  PONT_TERMINOLOGY_TIMEOUT: z.string().default('30s').transform(positiveDuration),
  /** Where months of the audit trail are archived before they are dropped (required with PONT_RETENTION_AUDIT). */
  AUDIT_ARCHIVE_DIR: z.string().min(1).optional(),
  /** Rate limits over the defaults: `group=requests/seconds,...` (docs/integrators.md "Rate limits"). */
  /** Operators' metrics (docs/operators.md "Metrics and logs"): GET /metrics on this port of its own; unset: not served. */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  METRICS_HOST: z.string().default('127.0.0.1'),
  /** Bearer token the metrics port requires; required when METRICS_HOST is not a loopback address. */
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  PONT_RATE_LIMITS: z
    .string()
    .default('')
    .transform((spec, ctx) => {
      const table = parseRateLimits(spec);
      if (typeof table === 'string') ctx.addIssue({ code: 'custom', message: table });
      return table as RateLimitTable;
    }),
  /** Bulk Data export (docs/fhir.md "Bulk Data export"): how long a finished export's files stay. */
  PONT_BULK_EXPORT_TTL: z.string().default('24h').transform(positiveDuration),
  /**
   * Export tasks (one resource type each) one process writes at once; 0: this process writes none (others do).
   * 1: an export keeps one database statement busy per process, whatever its size, so that other clients' reads keep
   * a core of a small machine (docs/benchmarks.md "Bulk export").
   */
  PONT_BULK_EXPORT_CONCURRENCY: z.coerce.number().int().min(0).max(16).default(1),
  /** The most resources in one exported file. */
  PONT_BULK_EXPORT_FILE_RESOURCES: z.coerce.number().int().min(1).max(100_000).default(10_000),
  /** Default: `bulk-exports` in PONT_DATA_DIR (with DATABASE_URL too: the database holds no export files). */
  PONT_BULK_EXPORT_DIR: z.string().min(1).optional(),
});

function retention(text: string, ctx: z.RefinementCtx): Retention {
  const parsed = parseRetention(text);
  if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: parsed });
  return typeof parsed === 'string' ? undefined : parsed;
}

function positiveDuration(text: string, ctx: z.RefinementCtx): number {
  const ms = parseDuration(text);
  if (!ms) ctx.addIssue({ code: 'custom', message: 'must be a positive duration such as 250ms or 10s' });
  return ms ?? 0;
}

export interface WebhookConfig {
  /** Milliseconds before attempts 2..7 (attempt 1 is immediate). */
  retryDelaysMs: number[];
  pollIntervalMs: number;
  /** A delivery succeeds only with a 2xx within this time. */
  timeoutMs: number;
  /** Deliveries one process has in flight at once. */
  concurrency: number;
  secretKey: Buffer;
  /** http:// callbacks to loopback addresses (never in production). */
  allowHttpLoopback: boolean;
}

/** Used only in development when PONT_WEBHOOK_SECRET_KEY is unset: public, so it protects nothing. */
const DEVELOPMENT_WEBHOOK_KEY = createHash('sha256').update('pont development webhook secret key').digest();

type Env = z.infer<typeof schema> & { PONT_ENV: Environment };

function webhookConfig(e: Env): WebhookConfig {
  return {
    retryDelaysMs: e.PONT_WEBHOOK_RETRY_DELAYS,
    pollIntervalMs: e.PONT_WEBHOOK_POLL_INTERVAL,
    timeoutMs: e.PONT_WEBHOOK_TIMEOUT,
    concurrency: e.PONT_WEBHOOK_CONCURRENCY,
    secretKey: e.PONT_WEBHOOK_SECRET_KEY ? Buffer.from(e.PONT_WEBHOOK_SECRET_KEY, 'base64') : DEVELOPMENT_WEBHOOK_KEY,
    allowHttpLoopback: (e.PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK ?? String(e.PONT_ENV === 'development')) === 'true',
  };
}

/** Used only in development when PONT_MATCH_KEY_SECRET is unset: public, so it protects nothing. */
const DEVELOPMENT_MATCH_KEY_SECRET = createHash('sha256').update('pont development match key secret').digest();

export interface Config {
  port: number;
  host: string;
  publicUrl: string;
  environment: Environment;
  databaseUrl?: string;
  /** Where the LISTEN connection goes (DATABASE_LISTEN_URL); absent: databaseUrl. */
  databaseListenUrl?: string;
  /** A read replica for the lag-tolerant readers (DATABASE_READ_URL); absent: they read the primary. */
  databaseReadUrl?: string;
  /** Named prepared statements on PostgreSQL (PONT_PREPARED_STATEMENTS). */
  preparedStatements: boolean;
  /** Absent: PGlite in memory (tests only). */
  dataDir?: string;
  /** In memory: the image of a data directory it starts from (DatabaseConfig, src/db/open.ts; tests only). */
  embeddedImage?: Blob;
  maxBodyBytes: number;
  logLevel: LogLevel;
  webhooks: WebhookConfig;
  /** Requests per window, per client (or agent) and route group. */
  rateLimits: RateLimitTable;
  /** Mapping files directory; absent: the repository's mappings/. */
  mappingsDir?: string;
  /** Reload the maps when their files change (PONT_MAPPINGS_WATCH; development only). */
  mappingsWatch: boolean;
  /** Keys the patient match keys (src/healthid/matching.ts). */
  matchKeySecret: Buffer;
  /** How long an Idempotency-Key is remembered, in ms. */
  idempotencyTtlMs: number;
  bridgeSyncIntervalMs: number;
  /** Which X-Forwarded-For entries to believe for the caller's address. */
  trustProxy: ProxyTrust;
  shutdownGraceMs: number;
  /** How long after start the first retention pass runs (ms; then hourly). */
  retentionStartDelayMs: number;
  /** The longest a terminology operation or search may run in the database, all its statements (ms; PostgreSQL statement_timeout). */
  terminologyTimeoutMs: number;
  /** Portal sessions: how long idle, and how long after sign-in at most (ms). */
  portalSessions: { idleMs: number; absoluteMs: number };
  /** Where GET /metrics is served (src/metrics.ts); undefined: nowhere. */
  metrics?: MetricsEndpoint;
  bulkExport: BulkExportSettings;
  /** How long each kind of row is kept, and where the audit trail is archived (src/retention/). */
  retention: RetentionConfig;
}

/** Rate-limit group of POST /api/demo/reset, counted per source address: each reset rewrites the demo organisation. */
export const DEMO_RESET_GROUP = 'demo-reset';
const DEMO_RESET_LIMIT = { points: 5, seconds: 60 };

/** 127.0.0.0/8, ::1 (also IPv4-mapped) and `localhost`: a development server listens only there by default. */
function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  return ipaddr.isValid(host) && ipaddr.process(host).range() === 'loopback';
}

/** One line for the start-up banner: the mode and what it implies. */
export function describeEnvironment(config: Config): string {
  switch (config.environment) {
    case 'development':
      return `development: public development secrets, demo reset open to any caller (rate-limited), http:// loopback webhooks allowed, ${isLoopback(config.host) ? 'loopback only' : `exposed on ${config.host} (PONT_ALLOW_DEV_ON_NETWORK=true)`}; set PONT_ENV=production for real data`;
    case 'sandbox':
      return 'sandbox: own secrets, demo reset for operator clients only, no http:// webhooks unless allowed';
    case 'production':
      return 'production: own secrets, no demo reset, HTTPS webhook callbacks only';
  }
}

/** Where the database is, for the start-up line: never DATABASE_URL itself (it may hold a password). */
export function describeDatabase(config: Pick<Config, 'databaseUrl' | 'dataDir' | 'databaseReadUrl'>): string {
  if (!config.databaseUrl) return config.dataDir ? `embedded PGlite at ${resolve(config.dataDir)}` : 'embedded PGlite in memory';
  const primary = `PostgreSQL ${serverOf(config.databaseUrl) ?? '(DATABASE_URL)'}`;
  return config.databaseReadUrl ? `${primary}, read replica ${serverOf(config.databaseReadUrl) ?? '(DATABASE_READ_URL)'}` : primary;
}

/** `at HOST:PORT/DATABASE` of a postgres:// URL (never its password); undefined when it does not parse. */
function serverOf(databaseUrl: string): string | undefined {
  try {
    const url = new URL(databaseUrl);
    const host = url.hostname || url.searchParams.get('host') || 'localhost';
    return `at ${host}:${url.port || 5432}/${decodeURIComponent(url.pathname.slice(1))}`;
  } catch {
    return undefined;
  }
}

/** Where the secrets come from: the environment, or the public development constants (which protect nothing). */
export function describeSecrets(config: Pick<Config, 'webhooks' | 'matchKeySecret'>): string {
  const defaults = [
    config.webhooks.secretKey.equals(DEVELOPMENT_WEBHOOK_KEY) && 'PONT_WEBHOOK_SECRET_KEY',
    config.matchKeySecret.equals(DEVELOPMENT_MATCH_KEY_SECRET) && 'PONT_MATCH_KEY_SECRET',
  ].filter(Boolean);
  if (!defaults.length) return 'environment';
  if (defaults.length === 2) return 'public development defaults (PONT_WEBHOOK_SECRET_KEY and PONT_MATCH_KEY_SECRET unset)';
  return `environment, except ${defaults[0]}: public development default`;
}

/** The start-up record: mode, database, public URL and where the secrets come from (never a secret). */
export function startupFields(config: Config): { mode: Environment; database: string; public_url: string; secrets: string } {
  return { mode: config.environment, database: describeDatabase(config), public_url: config.publicUrl, secrets: describeSecrets(config) };
}

export type ConfigVariable = keyof typeof schema.shape;
/** Every variable the configuration reads. */
export const CONFIG_VARIABLES = Object.keys(schema.shape) as ConfigVariable[];

const DURATION = 'set a positive duration such as 250ms, 10s, 5m, 1h or 7d';
const PERIOD = 'set never, or a period such as 90d, 8w, 18mo or 10y';
const SWITCH = 'set true or false (or unset it for the default)';
const POSTGRES = 'set postgres://USER:PASSWORD@HOST:5432/DATABASE';
const KEY = (name: string) => `set 32 random bytes, base64-encoded, the same in every process: ${name}=$(openssl rand -base64 32)`;

/**
 * How to put each variable right: every line of a ConfigError ends `; fix: …`. A Record of every variable, so a
 * variable added to the schema without its fix does not compile.
 */
const FIXES: Record<ConfigVariable, string> = {
  PORT: 'set a whole number from 0 to 65535 (0: any free port)',
  HOST: 'set the address to listen on, e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)',
  PONT_PUBLIC_URL: 'set the absolute URL integrators use, e.g. https://pont.example.org',
  PONT_ENV: 'set development, sandbox or production (or unset it: production when NODE_ENV=production, else development)',
  NODE_ENV: 'set production, or unset it',
  PONT_ALLOW_DEV_ON_NETWORK: SWITCH,
  DATABASE_URL: `${POSTGRES}, or unset it for the embedded database`,
  DATABASE_LISTEN_URL: `${POSTGRES} straight to PostgreSQL (not through PgBouncer), or unset it to LISTEN on DATABASE_URL`,
  DATABASE_READ_URL: `${POSTGRES} of a read replica, or unset it to read the primary`,
  PONT_PREPARED_STATEMENTS: 'set true, or false behind a pooler that cannot keep prepared statements (PgBouncer < 1.21 in transaction mode)',
  PONT_DATA_DIR: 'set the directory of the embedded database, e.g. ./data',
  PONT_MAX_BODY_BYTES: 'set a positive whole number of bytes, e.g. 16777216',
  LOG_LEVEL: `set one of ${LOG_LEVELS.join(', ')} (or unset it: info)`,
  PONT_MAPPINGS_DIR: 'set the directory of the mapping files (*.map.yaml), or unset it for the repository\'s mappings/',
  PONT_MAPPINGS_WATCH: SWITCH,
  PONT_WEBHOOK_RETRY_DELAYS: 'set 6 comma-separated durations, the delays before attempts 2 to 7, e.g. 1m,5m,15m,1h,6h,24h',
  PONT_WEBHOOK_POLL_INTERVAL: DURATION,
  PONT_WEBHOOK_TIMEOUT: DURATION,
  PONT_WEBHOOK_CONCURRENCY: 'set a whole number from 1 to 256',
  PONT_WEBHOOK_SECRET_KEY: KEY('PONT_WEBHOOK_SECRET_KEY'),
  PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: SWITCH,
  PONT_TRUST_PROXY: 'set false, a number of proxy hops (e.g. 1), or the proxies\' addresses and CIDR ranges, e.g. 10.0.0.0/8,127.0.0.1',
  PONT_SHUTDOWN_GRACE: DURATION,
  PONT_PORTAL_SESSION_IDLE: DURATION,
  PONT_PORTAL_SESSION_MAX: DURATION,
  PONT_BRIDGE_SYNC_INTERVAL: DURATION,
  PONT_IDEMPOTENCY_TTL: DURATION,
  PONT_MATCH_KEY_SECRET: KEY('PONT_MATCH_KEY_SECRET'),
  PONT_RETENTION_AUDIT: PERIOD,
  PONT_RETENTION_EVENTS: PERIOD,
  PONT_RETENTION_WEBHOOK_DELIVERIES: PERIOD,
  PONT_RETENTION_RESOURCE_VERSIONS: PERIOD,
  PONT_AUDIT_RESTORE_HOLD: 'set a period such as 30d or 8w',
  PONT_RETENTION_START_DELAY: DURATION,
  PONT_TERMINOLOGY_TIMEOUT: DURATION,
  AUDIT_ARCHIVE_DIR: 'set a directory on durable storage, e.g. /var/lib/pont/audit-archive',
  METRICS_PORT: 'set a whole number from 0 to 65535 for GET /metrics on a port of its own, or unset it to serve no metrics',
  METRICS_HOST: 'set the address the metrics port listens on, e.g. 127.0.0.1',
  METRICS_TOKEN: 'set a random token of at least 16 characters: METRICS_TOKEN=$(openssl rand -hex 32)',
  PONT_RATE_LIMITS: 'set comma-separated group=requests/seconds, both at least 1, e.g. default=600/60,token=60/60 (docs/integrators.md "Rate limits")',
  PONT_BULK_EXPORT_TTL: DURATION,
  PONT_BULK_EXPORT_CONCURRENCY: 'set a whole number from 0 to 16 (0: this process writes no export)',
  PONT_BULK_EXPORT_FILE_RESOURCES: 'set a whole number from 1 to 100000',
  PONT_BULK_EXPORT_DIR: 'set the directory of the export files, or unset it for bulk-exports in PONT_DATA_DIR',
};

/** Every problem of a configuration at once: `VARIABLE: problem; fix: how`, one per line. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${problems.map((p) => `  ${p}`).join('\n')}`);
  }
}

/**
 * A variable whose value is well formed but does not work on this machine, found when it is used (a directory that
 * cannot be made, a port in use, a database that does not answer): a ConfigError of one line, `fix` by default the
 * variable's own.
 */
export function configProblem(name: ConfigVariable, problem: string, fix: string = FIXES[name]): ConfigError {
  return new ConfigError([`${name}: ${problem}; fix: ${fix}`]);
}

/** PONT_MAPPINGS_DIR, when set: a directory, or its ConfigError (unset: the repository's mappings/, undefined here). */
export function mappingsDirectory(config: Pick<Config, 'mappingsDir'>): string | undefined {
  const dir = config.mappingsDir;
  if (dir === undefined) return undefined;
  let problem: string | undefined;
  try {
    if (!statSync(dir).isDirectory()) problem = 'is a file, not a directory';
  } catch (err) {
    problem = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist (ENOENT)' : `cannot be read (${errorCode(err)})`;
  }
  if (problem) throw configProblem('PONT_MAPPINGS_DIR', `${resolve(dir)} ${problem}`);
  return dir;
}

/** `ENOENT`, or the error's message when it has no code. */
export const errorCode = (err: unknown): string => (err as NodeJS.ErrnoException)?.code ?? (err instanceof Error ? err.message : String(err));

/**
 * Reads and validates the environment once. Every bad or missing variable is reported in one error (ConfigError),
 * each with what is wrong and how to fix it, so one failed start shows them all.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable (VAR= in a compose file or a shell) means unset.
  const given = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')) as Record<string, string>;
  const problems: string[] = [];
  // Each line ends with its fix: FIXES has one for every variable, a rule between variables gives its own.
  const problem = (name: ConfigVariable, message: string, fix: string = FIXES[name]) => problems.push(`${name}: ${message}; fix: ${fix}`);
  // Each variable on its own, so that one bad value does not hide the others, nor the rules below.
  const values: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(schema.shape) as Array<[ConfigVariable, z.ZodType]>) {
    const parsed = field.safeParse(given[name]);
    if (parsed.success) values[name] = parsed.data;
    else for (const issue of parsed.error.issues) problem(name, issue.message);
  }
  const v = values as Partial<z.infer<typeof schema>>;
  if (v.DATABASE_READ_URL !== undefined && given.DATABASE_URL === undefined) {
    problem('DATABASE_READ_URL', 'a read replica needs PostgreSQL: the embedded database has none', 'set DATABASE_URL to the primary PostgreSQL too, or unset DATABASE_READ_URL');
  }
  // Unknown when PONT_ENV itself is bad: the rules that depend on it wait for a good value.
  const environment = given.PONT_ENV === undefined ? (v.NODE_ENV === 'production' ? 'production' : 'development') : v.PONT_ENV;
  if (environment === 'development' && v.HOST !== undefined && !isLoopback(v.HOST) && v.PONT_ALLOW_DEV_ON_NETWORK === 'false') {
    problem(
      'HOST',
      `${v.HOST} is not a loopback address, and PONT_ENV=development uses public development secrets and an open demo reset`,
      'set PONT_ENV=production (or sandbox) with its secrets, or HOST=127.0.0.1, or PONT_ALLOW_DEV_ON_NETWORK=true to expose a development server anyway',
    );
  }
  if (environment && environment !== 'development') {
    for (const name of ['PONT_WEBHOOK_SECRET_KEY', 'PONT_MATCH_KEY_SECRET'] as const) {
      if (given[name] === undefined) problem(name, `required when PONT_ENV=${environment}`);
    }
  }
  if (environment === 'production' && v.PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK === 'true') {
    problem('PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK', 'http:// callbacks are never allowed in production', 'unset it (or set false)');
  }
  if (environment && environment !== 'development' && v.PONT_MAPPINGS_WATCH === 'true') {
    problem('PONT_MAPPINGS_WATCH', `only in development, not with PONT_ENV=${environment}`, 'unset it, and reload edited maps with SIGHUP (mappings/README.md "Checking and reloading maps")');
  }
  if (v.METRICS_PORT !== undefined && v.METRICS_HOST !== undefined && !isLoopback(v.METRICS_HOST) && v.METRICS_TOKEN === undefined && given.METRICS_TOKEN === undefined) {
    problem('METRICS_TOKEN', `required when METRICS_HOST (${v.METRICS_HOST}) is not a loopback address`, 'set a random token: METRICS_TOKEN=$(openssl rand -hex 32), and give it to the Prometheus scrape job (authorization credentials)');
  }
  if (v.PONT_RETENTION_AUDIT && !v.AUDIT_ARCHIVE_DIR) {
    problem('AUDIT_ARCHIVE_DIR', 'required when PONT_RETENTION_AUDIT is set: a month of the audit trail is archived there before it is dropped', 'set a directory on durable storage, e.g. /var/lib/pont/audit-archive');
  }
  if (problems.length) throw new ConfigError(problems);
  const e: Env = { ...(v as z.infer<typeof schema>), PONT_ENV: environment! };
  const webhooks = webhookConfig(e);
  return {
    port: e.PORT,
    host: e.HOST,
    publicUrl: (e.PONT_PUBLIC_URL ?? `http://${e.HOST === '0.0.0.0' ? 'localhost' : e.HOST}:${e.PORT}`).replace(/\/$/, ''),
    environment: e.PONT_ENV,
    databaseUrl: e.DATABASE_URL,
    databaseListenUrl: e.DATABASE_LISTEN_URL,
    databaseReadUrl: e.DATABASE_READ_URL,
    preparedStatements: e.PONT_PREPARED_STATEMENTS === 'true',
    dataDir: e.DATABASE_URL ? undefined : e.PONT_DATA_DIR,
    maxBodyBytes: e.PONT_MAX_BODY_BYTES,
    logLevel: e.LOG_LEVEL,
    // The demo reset's own limit, unless PONT_RATE_LIMITS sets it.
    rateLimits: { [DEMO_RESET_GROUP]: DEMO_RESET_LIMIT, ...e.PONT_RATE_LIMITS },
    mappingsDir: e.PONT_MAPPINGS_DIR,
    mappingsWatch: e.PONT_MAPPINGS_WATCH === 'true',
    webhooks,
    matchKeySecret: e.PONT_MATCH_KEY_SECRET ? Buffer.from(e.PONT_MATCH_KEY_SECRET, 'base64') : DEVELOPMENT_MATCH_KEY_SECRET,
    idempotencyTtlMs: e.PONT_IDEMPOTENCY_TTL,
    bridgeSyncIntervalMs: e.PONT_BRIDGE_SYNC_INTERVAL,
    trustProxy: e.PONT_TRUST_PROXY,
    shutdownGraceMs: e.PONT_SHUTDOWN_GRACE,
    retentionStartDelayMs: e.PONT_RETENTION_START_DELAY,
    terminologyTimeoutMs: e.PONT_TERMINOLOGY_TIMEOUT,
    portalSessions: { idleMs: e.PONT_PORTAL_SESSION_IDLE, absoluteMs: e.PONT_PORTAL_SESSION_MAX },
    metrics: e.METRICS_PORT === undefined ? undefined : { port: e.METRICS_PORT, host: e.METRICS_HOST, token: e.METRICS_TOKEN },
    bulkExport: {
      ttlMs: e.PONT_BULK_EXPORT_TTL,
      concurrency: e.PONT_BULK_EXPORT_CONCURRENCY,
      partResources: e.PONT_BULK_EXPORT_FILE_RESOURCES,
      partBytes: 8 * 1024 * 1024,
      leaseMs: 60_000,
      pollIntervalMs: 1000,
      dir: resolve(e.PONT_BULK_EXPORT_DIR ?? join(e.PONT_DATA_DIR, 'bulk-exports')),
    },
    retention: {
      audit: e.PONT_RETENTION_AUDIT,
      events: e.PONT_RETENTION_EVENTS,
      webhookDeliveries: e.PONT_RETENTION_WEBHOOK_DELIVERIES,
      resourceVersions: e.PONT_RETENTION_RESOURCE_VERSIONS,
      auditRestoreHold: e.PONT_AUDIT_RESTORE_HOLD,
      auditArchiveDir: e.AUDIT_ARCHIVE_DIR === undefined ? undefined : resolve(e.AUDIT_ARCHIVE_DIR),
    },
  };
}
