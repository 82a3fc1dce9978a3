/**
 * vitest globalSetup of the postgres project: the scratch databases of this run (test/harness.ts) are named with a
 * prefix of the run's own and dropped here, together, when the run ends, instead of one by one as each test server
 * closes. A `DROP DATABASE` waits for a checkpoint of the whole cluster, which under the other test files' writes
 * took up to 30 s, and its checkpoint's writes slowed those files in turn; at the end of the run, alone, they are
 * dropped several at once (dropAll). Leftovers of runs that did not reach their end (killed) are dropped when the next starts.
 */
import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import type { TestProject } from 'vitest/node';
import { withAdmin } from './postgres-admin';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The name prefix of this run's scratch databases, dropped at its end (createScratchDatabase). */
    scratchDatabasePrefix: string;
  }
}

// The machine and the process: a server several machines test on keeps each one's leftovers to it.
const machine = createHash('sha256').update(hostname()).digest('hex').slice(0, 6);
const runPrefix = `pont_test_${machine}_r${process.pid}_`;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const names = await databaseNames();
  await dropAll(names.filter((name) => !runIsAlive(name)));
  project.provide('scratchDatabasePrefix', runPrefix);
  return async () => dropAll((await databaseNames()).filter((name) => name.startsWith(runPrefix)));
}

/** The scratch databases of this machine's runs: `pont_test_<machine>_r<pid>_…`. */
async function databaseNames(): Promise<string[]> {
  return withAdmin(async (admin) => {
    const { rows } = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE starts_with(datname, $1)', [`pont_test_${machine}_r`]);
    return rows.map((row) => row.datname);
  });
}

/** Whether the process of this machine that made it still exists. */
function runIsAlive(name: string): boolean {
  const pid = Number(/_r(\d+)_[0-9a-f]+$/.exec(name)?.[1]);
  if (!pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Several at once: each `DROP DATABASE` waits for a checkpoint, and drops waiting together share one. One after the
 * other, ~100 drops took 5-6 minutes at the end of a run on the 2-core machine (1.9-3.3 s each); together, seconds.
 */
const DROPS_AT_ONCE = 16;

async function dropAll(names: string[]): Promise<void> {
  const left = [...names];
  await Promise.all(
    Array.from({ length: Math.min(DROPS_AT_ONCE, left.length) }, () =>
      withAdmin(async (admin) => {
        for (let name = left.pop(); name !== undefined; name = left.pop()) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      }),
    ),
  );
}
