import { existsSync, mkdirSync } from 'node:fs';
import { connectSharedDatabase, holderOf, lockDataDir } from './pglite-share';
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
  if (!config.dataDir) return openPglite();
  mkdirSync(config.dataDir, { recursive: true });
  const release = lockDataDir(config.dataDir);
  try {
    const db = await openPglite(config.dataDir);
    return { ...db, close: async () => { await db.close(); release(); } };
  } catch (err) {
    release();
    throw err;
  }
}

/**
 * For operator commands: the configured database, or, when a running Pont holds the embedded
 * database, that process's database through its socket (`shared` then says so).
 */
export async function openDatabaseForCommand(config: DatabaseConfig): Promise<{ db: Database; shared: boolean }> {
  if (!config.databaseUrl && config.dataDir && existsSync(config.dataDir) && holderOf(config.dataDir)) {
    return { db: await connectSharedDatabase(config.dataDir), shared: true };
  }
  return { db: await openDatabase(config), shared: false };
}
