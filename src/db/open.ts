import { chmodSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { connectSharedDatabase, holderOf, lockDataDir } from './pglite-share';
import type { Database, ReadDatabase } from './database';
import { openPglite } from './pglite';
import { migrate } from './migrate';
import { initialiseDataDir } from './pglite-first-start';
import { openPostgres } from './postgres';
import { instrumented } from './instrument';
import { replicaOrPrimary } from './replica';

export interface DatabaseConfig {
  /** postgres://… selects a PostgreSQL server; absent selects embedded PGlite. */
  databaseUrl?: string;
  /** Where PGlite keeps its files; absent means in memory (tests). */
  dataDir?: string;
  /**
   * In memory only: the database starts as this image of a data directory (`embeddedImage`, src/db/pglite.ts) instead
   * of an empty one. The tests start their servers from one migrated image: seconds each instead of initdb and every
   * migration in WebAssembly.
   */
  embeddedImage?: Blob;
  /** PostgreSQL: the LISTEN connection's URL when it must bypass a transaction-mode pooler (default databaseUrl). */
  databaseListenUrl?: string;
  /** PostgreSQL: run hot statements as named prepared statements (default true). */
  preparedStatements?: boolean;
  /** PostgreSQL: a read replica for the lag-tolerant readers (docs/operators.md "Read replicas"); absent: they read the primary. */
  databaseReadUrl?: string;
}

export async function openDatabase(config: DatabaseConfig): Promise<Database> {
  return (await open(config, false)).db;
}

/** Opens the configured database with every migration applied (what a start and `pont migrate` do): the versions applied now. */
export async function openMigratedDatabase(config: DatabaseConfig): Promise<{ db: Database; applied: string[] }> {
  const { db, applied } = await open(config, true);
  try {
    return { db, applied: [...applied, ...(await migrate(db))] };
  } catch (err) {
    await db.close();
    throw err;
  }
}

/** `initialise`: a new embedded data directory is initialised and migrated first, in a thread (pglite-first-start.ts). */
async function open(config: DatabaseConfig, initialise: boolean): Promise<{ db: Database; applied: string[] }> {
  // loadConfig refuses this already; a caller building its own DatabaseConfig gets the same answer.
  if (config.databaseReadUrl && !config.databaseUrl) throw new Error('DATABASE_READ_URL needs PostgreSQL (DATABASE_URL): the embedded database has no replica');
  const backend = await openBackend(config, initialise);
  const db = instrumented(backend.db);
  if (!config.databaseReadUrl) return { db, applied: backend.applied };
  let reader: ReadDatabase;
  try {
    reader = instrumented(await openPostgres(config.databaseReadUrl, undefined, { prepare: config.preparedStatements, readOnly: true }));
  } catch (err) {
    await db.close();
    throw err;
  }
  return { db: { ...db, reader: replicaOrPrimary(reader, db), close: async () => void (await Promise.all([db.close(), reader.close()])) }, applied: backend.applied };
}

async function openBackend(config: DatabaseConfig, initialise: boolean): Promise<{ db: Database; applied: string[] }> {
  if (config.databaseUrl) return { db: await openPostgres(config.databaseUrl, undefined, { listenUrl: config.databaseListenUrl, prepare: config.preparedStatements }), applied: [] };
  if (!config.dataDir) return { db: await openPglite(undefined, config.embeddedImage), applied: [] };
  ownerOnly(config.dataDir);
  const release = lockDataDir(config.dataDir);
  try {
    restrict(config.dataDir); // a data directory of an older install
    const applied = initialise ? await initialiseDataDir(config.dataDir) : [];
    const db = await openPglite(config.dataDir);
    restrict(config.dataDir); // the files a first start's initdb made (PGlite writes them world-readable)
    return { db: { ...db, close: async () => { await db.close(); release(); } }, applied };
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
 * For operator commands: the configured database with every migration applied, or, when a running Pont holds the
 * embedded database, that process's database through its socket (it has migrated it).
 */
export async function openDatabaseForCommand(config: DatabaseConfig): Promise<Database> {
  if (!config.databaseUrl && config.dataDir && existsSync(config.dataDir) && holderOf(config.dataDir)) return connectSharedDatabase(config.dataDir);
  return (await openMigratedDatabase(config)).db;
}
