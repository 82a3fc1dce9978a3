/**
 * vitest globalSetup of the postgres project: the scratch databases of this run (test/harness.ts) are named with a
 * prefix of the run's own and dropped here, together, when the run ends, instead of one by one as each test server
 * closes. A `DROP DATABASE` waits for a checkpoint of the whole cluster, which under the other test files' writes
 * took up to 30 s, and its checkpoint's writes slowed those files in turn; at the end of the run, alone, each takes
 * a fraction of a second. Leftovers of runs that did not reach their end (killed) are dropped when the next starts.
 */
import type { TestProject } from 'vitest/node';
import { withAdmin } from './postgres-admin';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The name prefix of this run's scratch databases, dropped at its end (createScratchDatabase). */
    scratchDatabasePrefix: string;
  }
}

const runPrefix = `pont_test_r${process.pid}_`;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const names = await databaseNames();
  await dropAll(names.filter((name) => !runIsAlive(name)));
  project.provide('scratchDatabasePrefix', runPrefix);
  return async () => dropAll((await databaseNames()).filter((name) => name.startsWith(runPrefix)));
}

/** The scratch databases of runs that name their process: `pont_test_r<pid>_…`. */
async function databaseNames(): Promise<string[]> {
  return withAdmin(async (admin) => {
    const { rows } = await admin.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'pont\\_test\\_r%'");
    return rows.map((row) => row.datname);
  });
}

// Runs on this machine only (the default server is local): the process that made it still exists.
function runIsAlive(name: string): boolean {
  const pid = Number(/^pont_test_r(\d+)_/.exec(name)?.[1]);
  if (!pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function dropAll(names: string[]): Promise<void> {
  if (names.length === 0) return;
  await withAdmin(async (admin) => {
    for (const name of names) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });
}
