import cluster from 'node:cluster';
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import client from 'prom-client';
import type { MetricsEndpoint } from './core/settings';
import { ConfigError } from './config';
import { listenProblem } from './core/listen';

/**
 * Operators' metrics in Prometheus text format (prom-client), served by `serveMetrics` on a port of their own
 * (METRICS_PORT), never on the integrators' port. What a process counts lives in prom-client's global registry
 * (the counters and histograms below, and the default process metrics: memory, CPU, event-loop delay, GC); what
 * a running server reads from its database at each scrape (queues, lag, pool) is in its own registry
 * (`databaseMetrics`, src/db/metrics.ts). Labels are route templates, groups and outcomes: never a path, an id or a Health ID.
 */

/** The default process metrics (memory, CPU, handles, event-loop delay, GC), once per process. */
export function collectProcessMetrics(): void {
  // Asked of the registry, not a flag of this module: tests load the module afresh, prom-client stays.
  if (!client.register.getSingleMetric('process_cpu_user_seconds_total')) client.collectDefaultMetrics();
}

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A metric of the global registry, created once per process (tests import modules more than once). */
function once<T>(name: string, make: () => T): T {
  return (client.register.getSingleMetric(name) as T | undefined) ?? make();
}

export const httpRequests = once(
  'pont_http_request_duration_seconds',
  () =>
    new client.Histogram({
      name: 'pont_http_request_duration_seconds',
      help: 'HTTP requests by method, route template and status: latency (the _count series is the request count)',
      labelNames: ['method', 'route', 'status'] as const,
      buckets: SECONDS,
    }),
);

export const dbStatements = once(
  'pont_db_statement_duration_seconds',
  () => new client.Histogram({ name: 'pont_db_statement_duration_seconds', help: 'SQL statements: time from call to result, waiting for a connection included', buckets: SECONDS }),
);

export const dbWaits = once(
  'pont_db_connection_wait_seconds',
  () =>
    new client.Histogram({
      name: 'pont_db_connection_wait_seconds',
      help: 'Time a statement or transaction waited for a connection (PostgreSQL: the pool; PGlite: its one connection)',
      buckets: SECONDS,
    }),
);

export const replicaFallbacks = once(
  'pont_db_replica_fallbacks_total',
  () => new client.Counter({ name: 'pont_db_replica_fallbacks_total', help: 'Statements for the read replica (DATABASE_READ_URL) answered by the primary because the replica could not answer' }),
);

export const webhookDeliveries = once(
  'pont_webhook_delivery_attempts_total',
  () =>
    new client.Counter({
      name: 'pont_webhook_delivery_attempts_total',
      help: 'Webhook delivery attempts by outcome: delivered, failed (retried later), exhausted (no retry left), cancelled (consent gone)',
      labelNames: ['outcome'] as const,
    }),
);

export const importedResources = once(
  'pont_import_resources_total',
  () => new client.Counter({ name: 'pont_import_resources_total', help: 'Resources written by imports run in this process (pont import)' }),
);

export const importedFiles = once(
  'pont_import_files_total',
  () => new client.Counter({ name: 'pont_import_files_total', help: 'Files read by imports run in this process, by outcome (loaded, skipped, failed)', labelNames: ['outcome'] as const }),
);

export const bridgeBatches = once(
  'pont_bridge_sync_batches_total',
  () => new client.Counter({ name: 'pont_bridge_sync_batches_total', help: 'Bridge sync batches received: written, or replayed (a batch id sent again)', labelNames: ['outcome'] as const }),
);

export const bridgeItems = once(
  'pont_bridge_sync_items_total',
  () => new client.Counter({ name: 'pont_bridge_sync_items_total', help: 'Resources of Bridge sync batches written, by status (created, updated, unchanged, failed)', labelNames: ['status'] as const }),
);

export const rateLimitRefusals = once(
  'pont_rate_limit_refusals_total',
  () => new client.Counter({ name: 'pont_rate_limit_refusals_total', help: 'Requests refused with 429 by rate-limit group', labelNames: ['group'] as const }),
);

export const accessRefusals = once(
  'pont_access_refusals_total',
  () =>
    new client.Counter({
      name: 'pont_access_refusals_total',
      help: 'Accesses the access policy refused (no consent, not the owner), by channel and action (C create, R read, U update, D delete, E operation)',
      labelNames: ['channel', 'action'] as const,
    }),
);

/** Seconds since `started` (a performance.now() reading). */
export const since = (started: number) => (performance.now() - started) / 1000;

export type { MetricsEndpoint } from './core/settings';

const digest = (text: string) => createHash('sha256').update(text).digest();

/** Does the Authorization header carry the token? Constant time: both sides hashed to 32 bytes first. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const given = /^Bearer (.+)$/i.exec(header ?? '')?.[1] ?? '';
  return timingSafeEqual(digest(given), digest(token));
}

/** `http://host:port` of a listening server (an IPv6 host in brackets). */
export function listeningUrl(server: Server, host: string): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${(server.address() as AddressInfo).port}`;
}

/**
 * `GET /metrics` on the operators' port: Prometheus text from `scrape`; 401 without the token (when one is set),
 * 404 for any other path, 405 for another method; errors in the documented Error shape.
 */
export async function serveMetrics(endpoint: MetricsEndpoint, scrape: () => Promise<string>): Promise<Server> {
  const error = (code: string, message: string) => JSON.stringify({ status: 'error', error_code: code, message });
  const server = createServer((req, res) => {
    const answer = (status: number, body: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
      res.end(body);
    };
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics') return answer(404, error('NOT_FOUND', 'Only GET /metrics is served on this port'));
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(405, error('METHOD_NOT_ALLOWED', 'GET /metrics only'), { allow: 'GET, HEAD' });
    if (endpoint.token !== undefined && !bearerMatches(req.headers.authorization, endpoint.token))
      return answer(401, error('UNAUTHENTICATED', 'The metrics token (METRICS_TOKEN) is required: Authorization: Bearer <token>'), { 'www-authenticate': 'Bearer' });
    scrape().then(
      (text) => answer(200, req.method === 'HEAD' ? '' : text, { 'content-type': client.register.contentType }),
      () => answer(503, error('SERVICE_UNAVAILABLE', 'Metrics could not be collected; retry shortly')),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => {
      const problem = listenProblem(err, { port: 'METRICS_PORT', host: 'METRICS_HOST' }, endpoint.host, endpoint.port);
      reject(problem ? new ConfigError([problem]) : err);
    });
    server.listen(endpoint.port, endpoint.host, () => resolve());
  });
  return server;
}

/**
 * The scrape of one server: the process's metrics and its database's. In a `--workers` process it answers the
 * supervisor instead, which serves them all aggregated (clusterScrape).
 */
export function serverScrape(registries: client.Registry[]): () => Promise<string> {
  if (cluster.isWorker) {
    client.AggregatorRegistry.setRegistries(registries);
    new client.AggregatorRegistry(); // starts answering the supervisor's requests
  }
  return () => client.Registry.merge(registries).metrics();
}

/**
 * The supervisor's scrape with `--workers N`: every worker's metrics, aggregated by prom-client's
 * AggregatorRegistry (counters and histograms summed over the processes; the database's gauges: their max).
 */
export function clusterScrape(): () => Promise<string> {
  const aggregator = new client.AggregatorRegistry();
  return () => aggregator.clusterMetrics();
}
