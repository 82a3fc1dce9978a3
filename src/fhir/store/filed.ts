import type { Resource } from '@medplum/fhirtypes';

/**
 * The patients each resource read from the store is filed under (`fhir_resources.patients`, what the access rule
 * judges), kept beside the object read: its compartment, and also the patients of what it refers to (a result that
 * names only its specimen is the specimen's patient's data). The audit trail names them; a resource not read from a
 * row (built, or copied by _elements) has none here.
 */
const filed = new WeakMap<object, readonly string[]>();

/** `resource`, noted as filed under `patients` (a row's `patients`; null: not yet filed). */
export function withFiledPatients<T extends Resource | null>(resource: T, patients: readonly string[] | null | undefined): T {
  if (resource && patients) filed.set(resource, patients);
  return resource;
}

/** The patients `resource` was filed under when it was read, if it was read from a row. */
export function filedPatients(resource: Resource): readonly string[] | undefined {
  return filed.get(resource);
}
