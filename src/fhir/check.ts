import { availableParallelism } from 'node:os';
import { isMainThread } from 'node:worker_threads';
import Piscina from 'piscina';
import type { Resource } from '@medplum/fhirtypes';
import { ApiError } from '../core/errors';
import { accessPatients, linksOf, type Link } from './compartment';
import { loadFhirDefinitions } from '../core/fhir-definitions';
import { indexResource, type IndexRows } from './indexer';
import { validateFhirResource } from './validate';

/** What storing a resource needs to know of it, computed from its content alone (see checkResource). */
export interface Checked {
  rows: IndexRows;
  links: Link[];
  /**
   * The patients whose data it is (what the consent rule filters on). The audit trail is not patient data
   * in that sense: it is the operators' (scope audit:read), and records of accesses to a patient are not
   * the patient's record.
   */
  patients: string[];
}

/**
 * The CPU-heavy part of a write, a pure function of the resource: validation against R4 (unless `validate`
 * is false: resources Pont builds itself), its search index rows, its local references and its patients.
 * Throws the ApiError of an invalid resource.
 */
export function checkResource(resource: Resource, base: string, validate: boolean): Checked {
  if (validate) validateFhirResource(resource);
  return {
    rows: indexResource(resource, base),
    links: linksOf(resource, base).links,
    patients: accessPatients(resource, base),
  };
}

/** A failure as it crosses from a worker thread: the ApiError's parts. */
interface SerializedError {
  status: number;
  code: string;
  message: string;
  options: ApiError['options'];
}
type Outcome = { checked: Checked } | { error: SerializedError };

/** The worker threads' task (see workers()): checkResource over a slice of resources. */
export function checkSlice(task: { resources: Resource[]; base: string; validate: boolean }): Outcome[] {
  loadFhirDefinitions();
  return task.resources.map((resource) => {
    try {
      return { checked: checkResource(resource, task.base, task.validate) };
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      return { error: { status: err.status, code: err.code, message: err.message, options: err.options } };
    }
  });
}

/**
 * Writes of fewer resources are checked on the calling thread: a round trip to a worker costs more than it saves.
 * So are resources not validated (the audit trail's): indexing alone is cheaper than the copies to a worker, and a
 * server under read load then starts no worker threads (each holds the FHIR definitions, ~150 MB).
 */
export const POOL_MIN = 16;
/**
 * Worker threads take seconds to come up (each loads the modules and the FHIR definitions, 2 to 3 s of CPU), in
 * which this thread checks thousands of resources (~3 per ms): until they are up, writes are checked here. They are
 * started (not waited for) for the writes that follow by a write of this many resources or more (a bulk load), or by
 * a second write of POOL_MIN or more within IDLE_MS of the first (a stream of Bridge batches or bundles); a single
 * one (a demo reset) starts none. An import starts them itself (startCheckWorkers).
 */
const WARM_MIN = 2_000;
/** Resources per task: a bundle of a few hundred is spread over every worker. */
const SLICE = 32;
/** Threads started at once (one per core at most); the pool adds more, to one per core, under load. */
const START_THREADS = 2;
/** The worker threads end after this long without a task (each holds the FHIR definitions, ~150 MB). */
const IDLE_MS = 30_000;

interface Workers {
  pool: Piscina;
  /** Every thread has checked a first task (its modules and definitions are loaded). */
  ready: boolean;
  /** Tasks sent and not yet answered. */
  running: number;
  idle?: NodeJS.Timeout;
}
let workers: Workers | undefined;

// A thread of the pool (the only threads Pont starts) loads the definitions as it starts, before it says it is ready.
if (!isMainThread) loadFhirDefinitions();

/**
 * Checks many resources at once (checkResource on each), on worker threads when there are enough of them
 * to validate and the threads are up (imports, bundles, Bridge batches), so that validation and indexing use every
 * core. While they are starting, a slice at a time is checked here, letting other requests run between slices, and
 * the slices left once they are up go to them. The outcome of each, in order: its Checked, or the ApiError it failed
 * with.
 */
export async function checkResources(resources: Resource[], base: string, validate: boolean): Promise<Array<Checked | ApiError>> {
  let outcomes: Outcome[];
  if (resources.length < POOL_MIN || !validate) outcomes = checkSlice({ resources, base, validate });
  else {
    startForStream(resources.length);
    const slices: Array<Outcome[] | Promise<Outcome[]>> = [];
    for (let at = 0; at < resources.length; at += SLICE) {
      const task = { resources: resources.slice(at, at + SLICE), base, validate };
      if (workers?.ready) slices.push(run(workers, task));
      else {
        slices.push(checkSlice(task));
        if (at + SLICE < resources.length) await new Promise((resolve) => setImmediate(resolve));
      }
    }
    outcomes = (await Promise.all(slices)).flat();
  }
  return outcomes.map((o) => ('checked' in o ? o.checked : new ApiError(o.error.status, o.error.code, o.error.message, o.error.options)));
}

/** When the last write of POOL_MIN resources or more came, and when a start of the threads last failed (performance.now()). */
let lastLargeWrite = -Infinity;
let lastFailedStart = -Infinity;
/** Tasks the threads have checked (empty start-up tasks aside): the tests read it. */
let tasksOnThreads = 0;

/** Starts the worker threads, when they are not running, for a bulk load or a stream of writes (not waited for). */
function startForStream(size: number): void {
  const now = performance.now();
  // A start that failed (threads that cannot load) is not tried again before IDLE_MS: writes stay on this thread.
  if (!workers && now - lastFailedStart >= IDLE_MS && (size >= WARM_MIN || now - lastLargeWrite < IDLE_MS)) startCheckWorkers().catch(() => undefined);
  lastLargeWrite = now;
}

/**
 * Starts the worker threads, if they are not running, and resolves once every one is up (an import waits for them:
 * it is all writes of hundreds of resources). They end after IDLE_MS without a task.
 */
export async function startCheckWorkers(): Promise<void> {
  if (workers?.ready) return;
  const cores = Math.max(1, availableParallelism());
  // Two threads up at once; more, to one per core, only under load (each holds ~150 MB): a few writes on a 64-core
  // host then start two, not sixty-four.
  const threads = Math.min(cores, START_THREADS);
  const starting = (workers ??= {
    pool: new Piscina({
      // Compiled (dist/), a thread loads this module itself; run from the sources (tsx, vitest), it loads
      // check-worker.mjs, which registers tsx in the thread first.
      ...(import.meta.url.endsWith('.js')
        ? { filename: import.meta.url, name: 'checkSlice' }
        : { filename: new URL('./check-worker.mjs', import.meta.url).href }),
      // The first ones kept until this module's own idle timer ends the pool (a thread ended alone would start again,
      // cold, under the next task); those started under load end after IDLE_MS idle.
      minThreads: threads,
      maxThreads: cores,
      idleTimeout: IDLE_MS,
    }),
    ready: false,
    running: 0,
  });
  // One empty task per thread: the pool gives each to a thread of its own (the least busy), and a thread answers it
  // once its modules and definitions are loaded (below).
  try {
    await Promise.all(Array.from({ length: threads }, () => run(starting, { resources: [], base: '', validate: false })));
  } catch (err) {
    // Writes go on being checked on the calling thread; a start is tried again after IDLE_MS.
    if (workers === starting) await closeCheckWorkers();
    lastFailedStart = performance.now();
    throw err;
  }
  if (workers === starting) starting.ready = true;
}

/** A task on the threads; the pool ends IDLE_MS after its last task. */
async function run(target: Workers, task: { resources: Resource[]; base: string; validate: boolean }): Promise<Outcome[]> {
  clearTimeout(target.idle);
  target.running++;
  if (task.resources.length) tasksOnThreads++;
  try {
    return (await target.pool.run(task)) as Outcome[];
  } finally {
    if (--target.running === 0) {
      target.idle = setTimeout(() => {
        if (workers === target) workers = undefined;
        target.pool.destroy().catch(() => undefined);
      }, IDLE_MS).unref();
    }
  }
}

/** Whether the worker threads are running, and up; how many tasks they have checked in this process. */
export function checkWorkersState(): { state: 'stopped' | 'starting' | 'ready'; tasks: number } {
  return { state: !workers ? 'stopped' : workers.ready ? 'ready' : 'starting', tasks: tasksOnThreads };
}

/**
 * Ends the worker threads now (they start again when needed); the next write is a first. Tasks on them fail: for the
 * tests and the end of a process, not while it serves.
 */
export async function closeCheckWorkers(): Promise<void> {
  const running = workers;
  workers = undefined;
  lastLargeWrite = -Infinity;
  clearTimeout(running?.idle);
  await running?.pool.destroy();
}
