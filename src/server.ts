import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from './app';
import type { Config } from './config';
import { openDatabase } from './db/open';
import { shareDatabase } from './db/pglite-share';
import { migrate } from './db/migrate';
import { loadFhirDefinitions } from './fhir/definitions';
import { createLogger } from './log';
import { createServices, type Composition } from './services';
import { backfill } from './fhir/store/backfill';

export interface RunningPont {
  /** Base URL the server listens on (http://host:port). */
  url: string;
  server: Server;
  /** The composition: route modules get it as `Services` (no database handle); tests and benchmarks use `db` too. */
  services: Composition;
  close(): Promise<void>;
}

/** config -> database -> migrations -> services -> app -> HTTP server + background workers. */
export async function startPont(config: Config): Promise<RunningPont> {
  const log = createLogger(config.logLevel);
  loadFhirDefinitions();
  const db = await openDatabase(config);
  try {
    const applied = await migrate(db);
    if (applied.length) log.info('migrations applied', { versions: applied });
    const services = await createServices(config, db, log);
    const upgraded = await backfill(db, services.fhir);
    if (upgraded) log.info('data brought up to the current schema', { rows: upgraded });
    const app = createApp(services);
    const server = await new Promise<Server>((resolve, reject) => {
      const s = app.listen(config.port, config.host, () => resolve(s));
      s.once('error', reject);
    });
    server.requestTimeout = 120_000;
    // Longer than the usual load-balancer idle timeout (60 s), so the proxy closes idle connections first.
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 66_000;
    for (const worker of services.workers) worker.start();
    // Operator commands reach the embedded database through this process while it runs.
    const unshare = db.backend === 'pglite' && config.dataDir ? await shareDatabase(db, config.dataDir) : undefined;
    const { port } = server.address() as AddressInfo;
    const host = config.host.includes(':') ? `[${config.host}]` : config.host;
    const url = `http://${host}:${port}`;
    // PORT=0 (tests, benchmarks) picks a free port: the derived public URL follows it.
    if (config.publicUrl.endsWith(':0')) config.publicUrl = url;
    return {
      url,
      server,
      services,
      async close() {
        // Graceful: no new connections, idle keep-alive ones closed now, requests in flight given
        // PONT_SHUTDOWN_GRACE to finish; then whatever is left is cut.
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, config.shutdownGraceMs)));
        await Promise.race([closed, deadline]);
        clearTimeout(timer);
        server.closeAllConnections();
        await Promise.all(services.workers.map((w) => w.stop()));
        await unshare?.();
        await services.access.close();
        await db.close();
      },
    };
  } catch (err) {
    await db.close();
    throw err;
  }
}
