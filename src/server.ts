import type { Server } from 'node:http';
import { createApp, verifiedRoutes } from './app';
import { ConfigError, type Config } from './config';
import { listenProblem } from './core/listen';
import { openMigratedDatabase } from './db/open';
import { shareDatabase } from './db/pglite-share';
import { checkListening } from './db/listen-check';
import { subscriptionSockets } from './subscriptions/websocket';
import { loadFhirDefinitions } from './core/fhir-definitions';
import { createLogger, type Logger } from './log';
import { createServices, loadServiceMappings, type Composition } from './services';
import { backfill } from './fhir/store/backfill';
import client from 'prom-client';
import cluster from 'node:cluster';
import { collectProcessMetrics, listeningUrl, serveMetrics, serverScrape } from './metrics';
import { databaseMetrics } from './db/metrics';
import { watch, type FSWatcher } from 'node:fs';
import { MappingHolder, mappingsVersion, type ReloadOutcome } from './mapping/holder';
import { gracefulStop } from './http/graceful';
import { buildOpenApi } from './http/openapi';
import { answerClientErrors } from './http/client-errors';
import { FHIR_BASE_PATH } from './fhir/service';

export interface RunningPont {
  /** Base URL the server listens on (http://host:port). */
  url: string;
  server: Server;
  /** The composition: route modules get it as `Services` (no database handle); tests and benchmarks use `db` too. */
  services: Composition;
  /** Where GET /metrics is served (METRICS_PORT), when it is, by this process (not a `--workers` process). */
  metricsUrl?: string;
  /**
   * Compiles the maps again and runs their examples (what SIGHUP and the development file watch do): they replace
   * the running maps only if all pass; else the running maps stay. Either way one log line says so, with the version.
   */
  reloadMappings(trigger: string): ReloadOutcome;
  close(): Promise<void>;
}

/** An editor's save is several file events: the watch reloads once they have been quiet this long. */
const WATCH_SETTLE_MS = 200;

/** config -> database -> migrations -> services -> app -> HTTP server + background workers. */
export async function startPont(config: Config): Promise<RunningPont> {
  const log = createLogger(config.logLevel);
  loadFhirDefinitions();
  // Before the database: a bad map stops the start with its file:line:column, without booting or migrating anything.
  const mappings = loadServiceMappings(config);
  const { db, applied } = await openMigratedDatabase(config);
  let metricsServer: Server | undefined;
  try {
    if (applied.length) log.info('migrations applied', { versions: applied });
    await checkListening(db);
    const services = await createServices(config, db, log, mappings);
    const upgraded = await backfill(db, services.fhir, log);
    if (upgraded) log.info('data brought up to the current schema', { rows: upgraded });
    const app = createApp(services);
    collectProcessMetrics();
    const scrape = serverScrape([client.register, databaseMetrics(db)]);
    // With --workers, the supervisor serves the metrics of every process (src/main.ts).
    metricsServer = config.metrics && !cluster.isWorker ? await serveMetrics(config.metrics, scrape) : undefined;
    let graceful: ReturnType<typeof gracefulStop> | undefined;
    const server = await new Promise<Server>((resolve, reject) => {
      const s = app.listen(config.port, config.host, () => resolve(s));
      graceful = gracefulStop(s);
      s.once('error', (err) => {
        const problem = listenProblem(err, { port: 'PORT', host: 'HOST' }, config.host, config.port);
        reject(problem ? new ConfigError([problem]) : err);
      });
    });
    answerClientErrors(server, FHIR_BASE_PATH);
    server.requestTimeout = 120_000;
    // Longer than the usual load-balancer idle timeout (60 s), so the proxy closes idle connections first.
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 66_000;
    // FHIR Subscriptions' websocket channel, in every process (src/subscriptions/websocket.ts).
    const sockets = subscriptionSockets(server, services.subscriptions, db, log);
    for (const worker of services.workers) worker.start();
    const reloadMappings = (trigger: string): ReloadOutcome => {
      const outcome = services.mappings.reload();
      if (outcome.ok) services.log.info('mappings reloaded', { version: outcome.version, previous: outcome.previous, trigger });
      // The subscription topics beside the maps are read again with them; a mistake there keeps the running topics.
      if (outcome.ok)
        try {
          services.subscriptions.reloadTopics(services.mappings.dir);
        } catch (err) {
          services.log.error('subscription topics reload refused; the running topics stay', { trigger, error: (err as Error).message });
        }
      else services.log.error('mappings reload refused; the running maps stay', { version: outcome.version, trigger, error: outcome.error.message });
      return outcome;
    };
    const watcher = config.mappingsWatch ? watchMappings(services.mappings.dir, () => services.mappings.version, reloadMappings, log) : undefined;
    // Operator commands reach the embedded database through this process while it runs.
    const unshare = db.backend === 'pglite' && config.dataDir ? await shareDatabase(db, config.dataDir) : undefined;
    const url = listeningUrl(server, config.host);
    // PORT=0 (tests, benchmarks) picks a free port: the derived public URL follows it.
    if (config.publicUrl.endsWith(':0')) config.publicUrl = url;
    return {
      url,
      server,
      services,
      metricsUrl: metricsServer && listeningUrl(metricsServer, config.metrics!.host),
      reloadMappings,
      async close() {
        watcher?.close();
        await sockets.close();
        // Graceful (src/http/graceful.ts): no new connections; requests in flight, and those already on their way on
        // open connections, answered (with Connection: close) within PONT_SHUTDOWN_GRACE; then whatever is left is cut.
        await graceful!.stop(config.shutdownGraceMs);
        metricsServer?.close();
        metricsServer?.closeAllConnections();
        await Promise.all(services.workers.map((w) => w.stop()));
        await unshare?.();
        await services.access.close();
        await services.fhir.readLimits.close();
        await services.fhir.terminology.close();
        await db.close();
      },
    };
  } catch (err) {
    metricsServer?.close();
    await db.close();
    throw err;
  }
}

/**
 * `pont mappings check`'s share of the start, for maps that pass its other checks: the maps of `dir` in a
 * MappingHolder, as createServices holds them, and the routes built on them and verified as createApp does. No
 * database: building the routes takes only the configuration and the maps (their handlers use the rest).
 */
export function verifyMappings(config: Config, dir: string): void {
  routesWithoutDatabase(config, dir);
}

/**
 * The OpenAPI document the service publishes at /api/openapi.json, built from the same routes and maps without a
 * database or a listener: what the client libraries' type generators read (seconds, where starting a service on a
 * fresh embedded database took 15 to 40).
 */
export function openApiDocument(config: Config, dir?: string): unknown {
  return buildOpenApi(routesWithoutDatabase(config, dir), config.publicUrl);
}

function routesWithoutDatabase(config: Config, dir: string | undefined) {
  return verifiedRoutes({ config, mappings: new MappingHolder(dir) } as Composition);
}

/** PONT_MAPPINGS_WATCH (development): reloads the maps once a change to their files has settled, if their content changed. */
function watchMappings(dir: string, running: () => string, reload: (trigger: string) => void, log: Logger): { close(): void } {
  let timer: NodeJS.Timeout | undefined;
  const settled = () => {
    let changed = true;
    try {
      changed = mappingsVersion(dir) !== running();
    } catch {
      // A file went away while being read (an editor's temporary file): the reload says what is wrong, if anything.
    }
    if (changed) reload('file watch');
  };
  const watcher: FSWatcher = watch(dir, () => {
    clearTimeout(timer);
    timer = setTimeout(settled, WATCH_SETTLE_MS);
  });
  watcher.on('error', (err) => log.error('mappings watch stopped; reload with SIGHUP', { error: String(err) }));
  return {
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}
