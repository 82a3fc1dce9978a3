/**
 * The database every test server starts from, migrated once per set of migrations: the name of the PostgreSQL template
 * (test/harness.ts) and the embedded database's image. Outside vitest too: the client libraries' conformance server
 * (clients/conformance/server.mjs) starts from the image.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listMigrations, migrate } from '../src/db/migrate';
import { embeddedImage, openPglite } from '../src/db/pglite';

/** The template of this set of migrations: named by their hash, so that a changed or added migration makes a new one. */
export function migratedTemplateName(): string {
  const hash = createHash('sha256');
  for (const m of listMigrations()) hash.update(m.version).update('\0').update(m.sql).update('\0');
  return `pont_template_${hash.digest('hex').slice(0, 16)}`;
}

/**
 * The embedded database with every migration applied, as an image every in-memory test server starts from: made once
 * per set of migrations (initdb and the migrations in WebAssembly take 5 to 50 s on a busy 2-core machine; loading the
 * image, 2 to 4 s) and kept in the system's temporary directory (written under a name of its own, then renamed).
 */
export async function migratedEmbeddedImage(): Promise<Blob> {
  const file = join(tmpdir(), `${migratedTemplateName()}.pglite.tar`);
  if (existsSync(file)) return new Blob([readFileSync(file)]);
  const db = await openPglite();
  try {
    await migrate(db);
    const image = await embeddedImage(db);
    const building = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
    writeFileSync(building, Buffer.from(await image.arrayBuffer()));
    renameSync(building, file);
    // Images of other sets of migrations (older checkouts' runs) go.
    for (const name of readdirSync(tmpdir())) if (/^pont_template_[0-9a-f]{16}\.pglite\.tar$/.test(name) && join(tmpdir(), name) !== file) rmSync(join(tmpdir(), name), { force: true });
    return image;
  } finally {
    await db.close();
  }
}
