import { availableParallelism } from 'node:os';
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
const POOL_MIN = 16;
/** Resources per task: a bundle of a few hundred is spread over every worker. */
const SLICE = 32;
/** Idle workers end after this long (each holds the FHIR definitions, ~100 MB). */
const IDLE_MS = 30_000;

let pool: Piscina | undefined;

/**
 * Checks many resources at once (checkResource on each), on worker threads when there are enough of them
 * to validate (imports, bundles, Bridge batches), so that validation and indexing use every core. The
 * outcome of each, in order: its Checked, or the ApiError it failed with.
 */
export async function checkResources(resources: Resource[], base: string, validate: boolean): Promise<Array<Checked | ApiError>> {
  const outcomes: Outcome[] =
    resources.length < POOL_MIN || !validate
      ? checkSlice({ resources, base, validate })
      : (
          await Promise.all(
            Array.from({ length: Math.ceil(resources.length / SLICE) }, (_, i) =>
              workers().run({ resources: resources.slice(i * SLICE, (i + 1) * SLICE), base, validate }) as Promise<Outcome[]>,
            ),
          )
        ).flat();
  return outcomes.map((o) => ('checked' in o ? o.checked : new ApiError(o.error.status, o.error.code, o.error.message, o.error.options)));
}

function workers(): Piscina {
  return (pool ??= new Piscina({
    // Compiled (dist/), a thread loads this module itself; run from the sources (tsx, vitest), it loads
    // check-worker.mjs, which registers tsx in the thread first.
    ...(import.meta.url.endsWith('.js')
      ? { filename: import.meta.url, name: 'checkSlice' }
      : { filename: new URL('./check-worker.mjs', import.meta.url).href }),
    maxThreads: Math.max(1, availableParallelism()),
    minThreads: 0,
    idleTimeout: IDLE_MS,
  }));
}

/** Ends the worker threads now (they start again when needed), e.g. once a bulk load is over. */
export async function closeCheckWorkers(): Promise<void> {
  const running = pool;
  pool = undefined;
  await running?.destroy();
}
