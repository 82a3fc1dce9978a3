import { mkdirSync } from 'node:fs';
import type { Database } from './database';
import { openPglite } from './pglite';
import { openPostgres } from './postgres';

export interface DatabaseConfig {
  /** postgres://… selects a PostgreSQL server; absent selects embedded PGlite. */
  databaseUrl?: string;
  /** Where PGlite keeps its files; absent means in memory (tests). */
  dataDir?: string;
}

export async function openDatabase(config: DatabaseConfig): Promise<Database> {
  if (config.databaseUrl) return openPostgres(config.databaseUrl);
  if (config.dataDir) mkdirSync(config.dataDir, { recursive: true });
  return openPglite(config.dataDir);
}
