import cluster from 'node:cluster';
import { describeEnvironment, loadConfig, startupFields, type Config } from './config';
import { createLogger } from './log';
import { startPont } from './server';
import { clusterScrape, listeningUrl, serveMetrics } from './metrics';

/** A worker that dies is started again after this long (longer each time it dies soon after starting). */
const RESTART_MS = 1000;

/**
 * `npm start` / `pont serve [--workers N]`: runs the service until SIGINT/SIGTERM. With N > 1 (PostgreSQL
 * only), N processes share the port through node's cluster: each is a whole Pont (HTTP, delivery worker,
 * audit materialiser) on the one database, as several machines behind a load balancer would be.
 */
export async function serve(args: string[] = []): Promise<void> {
  const config = loadConfig();
  const workers = workersOf(args);
  if (workers > 1 && !config.databaseUrl)
    throw new Error('--workers needs PostgreSQL (DATABASE_URL): the embedded database belongs to one process');
  if (workers > 1 && cluster.isPrimary) return supervise(config, workers);
  const pont = await startPont(config);
  if (cluster.isWorker) {
    // The supervisor prints the banner once every worker listens.
    process.send?.({ listening: pont.url, mappingsVersion: pont.services.mappings.version });
  } else announce(config, pont.url, 1, pont.services.mappings.version, pont.metricsUrl);
  // Ctrl-C reaches a worker twice (from the terminal and from the supervisor): the first signal starts the
  // graceful shutdown, and later ones must not cut it short.
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    if (cluster.isPrimary) console.log(`${signal}: shutting down`);
    await pont.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // SIGHUP reloads the maps (mappings/README.md, "On a running server"); without a handler it would end the process.
  process.on('SIGHUP', () => {
    if (!stopping) pont.reloadMappings('SIGHUP');
  });
}

function workersOf(args: string[]): number {
  const i = args.indexOf('--workers');
  const text = i >= 0 ? args[i + 1] : process.env.PONT_WORKERS || '1';
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new Error(`--workers must be a whole number from 1 to 64, got "${text}"`);
  return n;
}

/** The banner for people, and one log record for machines: mode, database, public URL, secrets' source. */
function announce(config: Config, url: string, workers: number, mappingsVersion: string, metricsUrl?: string): void {
  const fields = startupFields(config);
  console.log(`Pont is listening on ${url} (public URL ${config.publicUrl}; database: ${fields.database}${workers > 1 ? `; ${workers} worker processes` : ''})`);
  console.log(`  FHIR R4 base: ${config.publicUrl}/api/fhir/R4   OpenAPI: ${config.publicUrl}/api/openapi.json`);
  console.log(`  Mode: ${describeEnvironment(config)}`);
  console.log(`  Secrets: ${fields.secrets}`);
  console.log(`  Mappings: version ${mappingsVersion}; kill -HUP ${process.pid} reloads them`);
  if (config.environment === 'development')
    console.log(`  Demo data and credentials: curl -s -X POST ${config.publicUrl}/api/demo/reset   (docs/integrators.md "Demo")`);
  if (config.environment === 'sandbox')
    console.log(`  Demo data and credentials: POST ${config.publicUrl}/api/demo/reset with an operator client's token (docs/integrators.md "Demo")`);
  createLogger(config.logLevel).info('pont started', { ...fields, listening: url, workers, metrics: metricsUrl ? `${metricsUrl}/metrics` : null, mappings_version: mappingsVersion });
}

/** The primary process of `--workers N`: starts the workers, restarts any that dies, stops them all on a signal. */
async function supervise(config: Config, workers: number): Promise<void> {
  const log = createLogger(config.logLevel);
  // The workers accept from the one listening socket themselves (not round-robin through this process), unless
  // NODE_CLUSTER_SCHED_POLICY says otherwise: at shutdown a connection the kernel holds is accepted by a worker still
  // listening, where round-robin hands connections over one at a time and resets those still queued here once every
  // worker has stopped listening (docs/operators.md "Deployment": shutdown).
  if (!process.env.NODE_CLUSTER_SCHED_POLICY) cluster.schedulingPolicy = cluster.SCHED_NONE;
  // GET /metrics: every worker's metrics, aggregated here (the workers serve none themselves).
  const metricsServer = config.metrics ? await serveMetrics(config.metrics, clusterScrape()) : undefined;
  let stopping = false;
  let stopSignal: NodeJS.Signals | undefined;
  let listening = 0;
  // The live workers, counted here: cluster.workers drops a worker only once both its process has exited and its
  // IPC channel has closed, in either order, so on 'exit' it may still list one that is gone (and the supervisor,
  // waiting for an empty list, would never exit 0).
  const live = new Set<number>();
  let failed = false; // a worker whose shutdown failed: the supervisor says so in its exit code
  const exitWhenAllStopped = () => stopping && live.size === 0 && process.exit(failed ? 1 : 0);
  const fork = () => {
    if (stopping) return; // a restart timer that fires after the signal
    const started = Date.now();
    const worker = cluster.fork();
    live.add(worker.id);
    worker.on('message', (m: { listening?: string; mappingsVersion?: string }) => {
      if (m.listening && ++listening === workers) announce(config, m.listening, workers, m.mappingsVersion!, metricsServer && listeningUrl(metricsServer, config.metrics!.host));
    });
    worker.on('exit', (code, signal) => {
      live.delete(worker.id);
      if (stopping) {
        // A worker still starting has no handler yet, and the signal ends it: stopped as asked, not failed.
        failed ||= signal ? signal !== stopSignal : code !== 0;
        return void exitWhenAllStopped();
      }
      const quick = Date.now() - started < 10_000;
      log.warn('worker process ended; starting another', { worker_pid: worker.process.pid, exit: signal ?? code });
      setTimeout(fork, quick ? RESTART_MS * 5 : RESTART_MS);
    });
  };
  for (let i = 0; i < workers; i++) fork();
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    stopSignal = signal;
    console.log(`${signal}: shutting down ${workers} workers`);
    metricsServer?.close();
    for (const worker of Object.values(cluster.workers ?? {})) if (worker && live.has(worker.id)) worker.process.kill(signal);
    exitWhenAllStopped();
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
  // Every worker reloads its maps, each logging the outcome with its version and pid.
  process.on('SIGHUP', () => {
    if (stopping) return;
    log.info('SIGHUP: reloading the maps of every worker', { workers });
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGHUP');
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  serve(process.argv.slice(2)).catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
