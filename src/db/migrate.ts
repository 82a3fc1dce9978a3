import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Database } from './database';

const migrationsDir = fileURLToPath(new URL('./migrations/', import.meta.url));

/** Advisory lock key held while migrating (any constant shared by every Pont process). */
const MIGRATION_LOCK = 727274;

export interface Migration {
  version: string;
  sql: string;
}

/** Files `NNN_name.sql`, applied in name order. */
export function listMigrations(): Migration[] {
  return readdirSync(migrationsDir)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: f.replace(/\.sql$/, ''), sql: readFileSync(migrationsDir + f, 'utf8') }));
}

/**
 * Applies every migration not yet applied, each in its own transaction. An advisory lock makes
 * concurrent starts of several processes on one PostgreSQL safe: one migrates, the others wait.
 * Returns the versions it applied.
 */
export async function migrate(db: Database): Promise<string[]> {
  // Under the lock too: two processes creating the table at once would collide in the catalog.
  await db.transaction(async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    await tx.query('CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
  });
  const applied: string[] = [];
  // Those already applied are skipped without a transaction each (a start on a migrated database: one statement).
  const { rows } = await db.query<{ version: string }>('SELECT version FROM schema_migrations');
  const before = new Set(rows.map((r) => r.version));
  for (const m of listMigrations()) {
    if (before.has(m.version)) continue;
    const done = await db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
      const { rowCount } = await tx.query('SELECT 1 FROM schema_migrations WHERE version = $1', [m.version]);
      if (rowCount > 0) return false;
      await tx.exec(m.sql);
      await tx.query('INSERT INTO schema_migrations (version) VALUES ($1)', [m.version]);
      return true;
    });
    if (done) applied.push(m.version);
  }
  return applied;
}
