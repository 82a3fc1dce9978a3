import { loadConfig } from '../config';
import type { Database } from './database';
import { openDatabaseForCommand } from './open';

/**
 * Opens the configured database with migrations applied, runs `fn`, closes it. With the embedded
 * database held by a running service, it works through that service (which has migrated it).
 */
export async function withDatabase<T>(fn: (db: Database) => Promise<T>): Promise<T> {
  const db = await openDatabaseForCommand(loadConfig());
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}
