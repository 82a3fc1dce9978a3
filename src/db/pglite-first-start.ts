import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * A new data directory is initialised and migrated in a child process. PGlite's initdb runs a second PGlite
 * instance and initdb's own WebAssembly module (~430 MB, which the garbage collector returns whenever it gets to
 * it), and the migrations grow the WebAssembly memory of the instance that runs them, which never shrinks. A worker
 * thread returned its WebAssembly memory but left ~200 MB in the process's malloc arenas; a process's memory all
 * goes back to the system as it ends. The serving instance then opens an initialised, migrated directory.
 * Returns the migrations applied (none when the directory was initialised already: a restart opens it directly).
 */
export async function initialiseDataDir(dataDir: string): Promise<string[]> {
  if (existsSync(join(dataDir, 'PG_VERSION'))) return [];
  // Compiled (dist/), the child runs the compiled module; from the sources, the .mjs that registers tsx first.
  const entry = fileURLToPath(new URL(import.meta.url.endsWith('.js') ? './pglite-first-start-process.js' : './pglite-first-start-process.mjs', import.meta.url));
  const child = fork(entry, [dataDir], { execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise<string[]>((resolve, reject) => {
    let outcome: { applied?: string[]; error?: string } = {};
    child.once('message', (message: typeof outcome) => (outcome = message));
    child.once('error', reject);
    child.once('exit', (code) =>
      outcome.applied ? resolve(outcome.applied) : reject(new Error(`Initialising the embedded database in ${dataDir} failed: ${outcome.error ?? `exit ${code}`}`)),
    );
  });
}
