import { loadConfig } from './config';
import { startPont } from './server';

/** `npm start` / `pont serve`: runs the service until SIGINT/SIGTERM. */
export async function serve(): Promise<void> {
  const config = loadConfig();
  const pont = await startPont(config);
  const backend = config.databaseUrl ? 'PostgreSQL' : `embedded PGlite in ${config.dataDir}`;
  console.log(`Pont is listening on ${pont.url} (public URL ${config.publicUrl}; database: ${backend})`);
  console.log(`  FHIR R4 base: ${config.publicUrl}/api/fhir/R4   OpenAPI: ${config.publicUrl}/api/openapi.json`);
  if (config.environment !== 'production')
    console.log(`  Demo data and credentials (${config.environment}): curl -s -X POST ${config.publicUrl}/api/demo/reset   (README "Demo")`);
  const stop = async (signal: string) => {
    console.log(`${signal}: shutting down`);
    await pont.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  serve().catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
