import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { LoadRequest, LoadResult, LoadSpec } from './load';

export type { LoadRequest, LoadResult, LoadSpec };

const loadScript = fileURLToPath(new URL('./load.ts', import.meta.url));

/**
 * Runs bench/load.ts in a child process (autocannon): the load generator does not share the server's event loop.
 * `onTick` is called every 200 ms while it runs (e.g. to sample the server's memory). Any error or unexpected
 * status fails the run, unless `countErrors` (a memory benchmark: the errors are reported with the figures).
 */
export async function load(spec: LoadSpec, onTick?: () => void, countErrors = false): Promise<LoadResult> {
  const child = spawn(process.execPath, ['--import', 'tsx', loadScript], { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdin.end(JSON.stringify(spec));
  const sampler = onTick && setInterval(onTick, 200);
  let out = '';
  child.stdout.on('data', (chunk) => (out += chunk));
  const code = await new Promise<number | null>((resolveExit) => child.on('close', resolveExit));
  clearInterval(sampler);
  if (code !== 0) throw new Error(`load generator failed (exit ${code})`);
  const result = JSON.parse(out) as LoadResult;
  if (!countErrors && (result.errors || Object.keys(result.unexpected).length))
    throw new Error(`${spec.requests?.[0]?.path ?? spec.paths[0]}: ${result.errors} errors, unexpected statuses ${JSON.stringify(result.unexpected)}`);
  return result;
}
