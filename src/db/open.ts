import { chmodSync, existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { configProblem, errorCode } from '../config';
import { makeDirectorySync } from '../core/directories';
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
    reader = instrumented(await reached('DATABASE_READ_URL', config.databaseReadUrl, (url) => openPostgres(url, undefined, { prepare: config.preparedStatements, readOnly: true })));
  } catch (err) {
    await db.close();
    throw err;
  }
  return { db: { ...db, reader: replicaOrPrimary(reader, db), close: async () => void (await Promise.all([db.close(), reader.close()])) }, applied: backend.applied };
}

async function openBackend(config: DatabaseConfig, initialise: boolean): Promise<{ db: Database; applied: string[] }> {
  if (config.databaseUrl) {
    const db = await reached('DATABASE_URL', config.databaseUrl, (url) => openPostgres(url, undefined, { listenUrl: config.databaseListenUrl, prepare: config.preparedStatements }));
    return { db, applied: [] };
  }
  if (!config.dataDir) return { db: await openPglite(undefined, config.embeddedImage), applied: [] };
  const release = dataDirectory(config.dataDir);
  try {
    const applied = initialise ? await initialiseDataDir(config.dataDir) : [];
    const db = await openPglite(config.dataDir);
    restrict(config.dataDir); // the files a first start's initdb made (PGlite writes them world-readable)
    return { db: { ...db, close: async () => { await db.close(); release(); } }, applied };
  } catch (err) {
    release();
    throw err;
  }
}

/** Why a PostgreSQL server could not be used, in words, by the error's code (a socket's, or the server's SQLSTATE). */
const UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: 'nothing listens there',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name does not resolve (yet)',
  ETIMEDOUT: 'no answer',
  EHOSTUNREACH: 'the host cannot be reached',
  ENETUNREACH: 'the network cannot be reached',
  ECONNRESET: 'the connection was cut',
  '28P01': 'the password was refused',
  '28000': 'the server refuses this user (pg_hba.conf, or no such role)',
  '3D000': 'the database does not exist',
};

/** `open(url)`; a server that cannot be reached or refuses us is `variable`'s problem, named with its host, port and database (never the password). */
async function reached<T>(variable: 'DATABASE_URL' | 'DATABASE_READ_URL', url: string, open: (url: string) => Promise<T>): Promise<T> {
  try {
    return await open(url);
  } catch (err) {
    const code = (err as { code?: string }).code;
    const why = code === undefined ? undefined : UNREACHABLE[code];
    if (!code || !why) throw err;
    const { hostname, port, pathname } = new URL(url);
    const where = `${hostname || 'localhost'}:${port || 5432}${pathname || '/'}`;
    const fix =
      code === '3D000'
        ? `create it (createdb ${pathname.slice(1)}), or set ${variable} to a database that exists`
        : code.startsWith('28')
          ? `set the user and password PostgreSQL knows in ${variable} (postgres://USER:PASSWORD@HOST:PORT/DATABASE)`
          : `start PostgreSQL there, or set ${variable} to where it listens (postgres://USER:PASSWORD@HOST:PORT/DATABASE)`;
    throw configProblem(variable, `cannot use the PostgreSQL server at ${where}: ${why} (${code})`, fix);
  }
}

/** Makes (ownerOnly), takes (lockDataDir) and restricts the data directory; what stops it is PONT_DATA_DIR's problem. */
function dataDirectory(dataDir: string): () => void {
  const fix = "set a directory this user may create and write, e.g. ./data or /var/lib/pont (or unset it for ./data)";
  try {
    ownerOnly(dataDir);
  } catch (err) {
    throw configProblem('PONT_DATA_DIR', `cannot make the directory ${resolve(dataDir)} (${errorCode(err)})`, fix);
  }
  let release: (() => void) | undefined;
  try {
    release = lockDataDir(dataDir);
    restrict(dataDir); // a data directory of an older install
    return release;
  } catch (err) {
    release?.();
    if (!(err as NodeJS.ErrnoException).code) throw err; // in use by another process: said so
    throw configProblem('PONT_DATA_DIR', `cannot write in ${resolve(dataDir)} (${errorCode(err)})`, fix);
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
  makeDirectorySync(dataDir, 0o700);
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
