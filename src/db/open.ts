import { chmodSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
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
  ownerOnly(config.dataDir);
  const release = lockDataDir(config.dataDir);
  try {
    restrict(config.dataDir); // a data directory of an older install
    const db = await openPglite(config.dataDir);
    restrict(config.dataDir); // the files a first start's initdb made (PGlite writes them world-readable)
    return { ...db, close: async () => { await db.close(); release(); } };
  } catch (err) {
    release();
    throw err;
  }
}

/**
 * The embedded database's files hold every record and the signing keys (in the WAL): only the service's user may
 * read them. The directory is made 0700 and (restrict, at open) every file in it 0600, which also fixes the data
 * directory of an older install; the process's umask becomes 077, so the files PostgreSQL creates later are the
 * owner's only too. The umask stays: a Pont process writes nothing that others should read. (Worker threads may
 * not set it: there the directory's 0700 still keeps everyone else out.)
 */
function ownerOnly(dataDir: string): void {
  try {
    process.umask(0o077);
  } catch {
    /* a worker thread */
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
}

/** chmod 0700 for `dir` and the directories under it, 0600 for its files (symbolic links are left alone). */
function restrict(dir: string): void {
  chmodSync(dir, 0o700);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) restrict(path);
    else if (!entry.isSymbolicLink()) chmodSync(path, 0o600);
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
