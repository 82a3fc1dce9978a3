import type { Resource } from '@medplum/fhirtypes';
import { ApiError } from '../core/errors';
import { accessPatients, linksOf, type Link } from './compartment';
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

/** Resources checked between two turns of the event loop: ~3 ms, so that a large write lets other requests run. */
const SLICE = 32;

/**
 * Checks many resources (checkResource on each), on this thread, SLICE at a time with the event loop's other work
 * between slices (a 10,000-resource bundle is ~1 s of checks). The outcome of each, in order: its Checked, or the
 * ApiError it failed with.
 *
 * Worker threads did this until the validation became ten times cheaper (src/fhir/base-validity.ts): then copying
 * each resource to a thread and its index rows back cost as much as checking it, and an import ran as fast or faster
 * without them on two cores (docs/benchmarks.md, eighth round), each thread holding ~150 MB of definitions.
 */
export async function checkResources(resources: Resource[], base: string, validate: boolean): Promise<Array<Checked | ApiError>> {
  const outcomes: Array<Checked | ApiError> = [];
  for (let at = 0; at < resources.length; at += SLICE) {
    if (at) await new Promise((resolve) => setImmediate(resolve));
    for (const resource of resources.slice(at, at + SLICE)) {
      try {
        outcomes.push(checkResource(resource, base, validate));
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        outcomes.push(err);
      }
    }
  }
  return outcomes;
}
