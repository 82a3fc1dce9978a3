import { toTypedValue } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { patientCompartmentParams } from '../core/fhir-definitions';
import { indexedParams, referenceTarget } from './indexer';
import { HEALTH_ID_SYSTEM } from '../healthid/healthid';
import { UNPLACED_PATIENT } from '../policy/index';

/**
 * The patients whose compartment (R4 CompartmentDefinition "Patient") holds `resource`: a Patient is
 * in its own; a Condition in its subject's; an Organization in none. What the access rule and the
 * audit trail call "the patients this data is about".
 */
export function compartmentPatients(resource: Resource, localBase: string): string[] {
  return compartmentOf(resource, localBase).patients;
}

/**
 * The compartment of `resource`, and whether one of its compartment references names its target outside this
 * server (by identifier only, or a URL or URN that is not ours): the patient such data is about cannot be placed.
 */
function compartmentOf(resource: Resource, localBase: string): { patients: string[]; foreign?: string } {
  if (resource.resourceType === 'Patient') return { patients: resource.id ? [resource.id] : [] };
  const codes = patientCompartmentParams().get(resource.resourceType);
  if (!codes) return { patients: [] };
  const ids = new Set<string>();
  let foreign: string | undefined;
  const typed = toTypedValue(resource);
  const params = indexedParams(resource.resourceType);
  for (const code of codes) {
    let values;
    try {
      values = params.get(code)?.evaluate(typed) ?? [];
    } catch {
      continue; // an expression that cannot evaluate on this resource names nobody
    }
    for (const tv of values) {
      const value = tv.value as { reference?: unknown; identifier?: unknown } | undefined;
      const ref = value?.reference;
      const target = typeof ref === 'string' ? referenceTarget(ref, localBase) : undefined;
      if (target?.[0] === 'Patient') ids.add(target[1]);
      else if (!foreign && value && typeof value === 'object' && namesForeignPatient(value as { reference?: unknown; identifier?: unknown; type?: unknown }, target, code))
        foreign = `${resource.resourceType}.${code} names ${typeof ref === 'string' ? `"${ref.slice(0, 100)}"` : value.identifier !== undefined ? 'a target by identifier only' : 'a patient by name only (display)'}, which is not a resource of this server: refer to the Patient here (Patient/{id}); a Health ID resolves to it through the Connect routes`;
    }
  }
  return { patients: [...ids], foreign };
}

/**
 * A compartment reference that names a patient Pont cannot place: a reference to a Patient that is not a resource
 * of this server, or a `subject`/`patient` (or a reference typed Patient) given by identifier only, or by name only
 * (`display`: a result stored so would be in no patient's record).
 */
function namesForeignPatient(value: { reference?: unknown; identifier?: unknown; type?: unknown; display?: unknown }, target: [string, string] | undefined, code: string): boolean {
  const ref = value.reference;
  if (typeof ref === 'string') return !target && !ref.startsWith('#') ? /(^|[/:])Patient[/:]/.test(ref) || value.type === 'Patient' : target?.[0] === '' && /\/Patient\/[^/]+$/.test(ref);
  const aPatient = value.type === 'Patient' || ((code === 'subject' || code === 'patient') && value.type === undefined);
  return (value.identifier !== undefined && (aPatient || code === 'subject' || code === 'patient')) || (typeof value.display === 'string' && aPatient);
}

/** The patients of several resources, each once. */
export function patientsOf(resources: Resource[], localBase: string): string[] {
  const ids = new Set<string>();
  for (const r of resources) for (const id of compartmentPatients(r, localBase)) ids.add(id);
  return [...ids];
}

/** A local reference found in a resource: where it is and what it names. */
export interface Link {
  targetType: string;
  targetId: string;
  /** Element path in the referring resource, e.g. `Condition.subject`. */
  path: string;
}

/**
 * A conditional reference (`Patient?identifier=http://hospital.example|123`): a search, which only a transaction
 * resolves, to the one resource it matches (src/fhir/bundle.ts; FHIR http.html "Transactions").
 */
export const CONDITIONAL_REFERENCE = /^([A-Z][A-Za-z]*)\?(.+)$/;

/**
 * Every reference of `resource` to a resource on this server (`Type/id`, `Type/id/_history/n`, or an
 * absolute URL under `localBase`), wherever it is: not only where a SearchParameter looks. Contained
 * (`#id`), external and `urn:` references are not links, nor are contained resources' references; `unresolved` lists
 * the `urn:uuid:` ones (meaningful only inside the Bundle that defined them: a stored Bundle's entries may name each
 * other by their fullUrls) and the conditional ones (only a transaction resolves them), contained resources' too.
 */
export function linksOf(resource: Resource, localBase: string): { links: Link[]; unresolved: Link[] } {
  const links: Link[] = [];
  const unresolved: Link[] = [];
  // The audit trail records what was accessed, including what was deleted since: it holds nothing up.
  if (resource.resourceType === 'AuditEvent') return { links, unresolved };
  const fullUrls = resource.resourceType === 'Bundle' ? new Set((resource.entry ?? []).map((e) => e.fullUrl)) : undefined;
  const visit = (value: unknown, path: string, linking: boolean): void => {
    if (Array.isArray(value)) {
      for (const v of value) visit(v, path, linking);
    } else if (value !== null && typeof value === 'object') {
      for (const [key, v] of Object.entries(value)) {
        if (key === 'reference' && typeof v === 'string') {
          if ((v.startsWith('urn:uuid:') && !fullUrls?.has(v)) || CONDITIONAL_REFERENCE.test(v)) unresolved.push({ targetType: '', targetId: v, path });
          const target = linking ? referenceTarget(v, localBase) : undefined;
          if (target && target[0] !== '') links.push({ targetType: target[0], targetId: target[1], path });
        } else {
          visit(v, `${path}.${key}`, linking && key !== 'contained');
        }
      }
    }
  };
  visit(resource, resource.resourceType, true);
  return { links, unresolved };
}

/**
 * The patients the access policy files `resource` under (the `patients` column): its compartment's, plus every
 * Patient it refers to anywhere (Device.patient, Binary.securityContext, entries of a stored Bundle, contained
 * resources), so that no patient data is left outside every compartment. Data about a patient that Pont
 * cannot place (a contained Patient, a patient named by identifier only, a contained resource or Bundle entry
 * of patient data naming no patient, a Binary that names no Patient) also gets UNPLACED_PATIENT: only its
 * author and operators read it, and the repository refuses it from anyone else (422, `unplacedReason`).
 * The audit trail is not patient data of its own: its rows are the audited organisation's (src/policy).
 */
export function accessPatients(resource: Resource, localBase: string): string[] {
  if (resource.resourceType === 'AuditEvent') return [];
  const compartment = compartmentOf(resource, localBase);
  const ids = new Set(compartment.patients);
  const scan = scanForPatients(resource, localBase);
  // A Patient linking to another (Patient.link) concerns both: writing it needs a right on each.
  for (const id of scan.referenced) ids.add(id);
  if (resource.resourceType === 'Patient') return [...ids];
  if (compartment.foreign || scan.unplaced || (resource.resourceType === 'Binary' && !ids.size)) ids.add(UNPLACED_PATIENT);
  return [...ids];
}

/** Why Pont cannot place the patient data of `resource` (undefined: it can), for the 422 a non-operator gets. */
export function unplacedReason(resource: Resource, localBase: string): string | undefined {
  if (resource.resourceType === 'AuditEvent' || resource.resourceType === 'Patient') return undefined;
  const compartment = compartmentOf(resource, localBase);
  if (compartment.foreign) return compartment.foreign;
  const scan = scanForPatients(resource, localBase);
  if (scan.unplaced) return scan.unplaced;
  if (resource.resourceType === 'Binary' && !compartment.patients.length && !scan.referenced.size)
    return 'Binary.securityContext must refer to the Patient whose data the content is (Patient/{id})';
  return undefined;
}

/** Every local Patient reference in `resource` (contained resources and Bundle entries included), and the first unplaceable patient data. */
function scanForPatients(resource: Resource, localBase: string): { referenced: Set<string>; unplaced?: string } {
  const referenced = new Set<string>();
  let unplaced: string | undefined;
  const patientTypes = patientCompartmentParams();
  // Iterative (no recursion on hostile depth): a stack of [value, path, is the root].
  const stack: Array<[unknown, string, boolean]> = [[resource, resource.resourceType, true]];
  while (stack.length) {
    const [value, path, root] = stack.pop()!;
    if (Array.isArray(value)) {
      for (const v of value) stack.push([v, path, false]);
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    const object = value as Record<string, unknown>;
    if (!root && typeof object.resourceType === 'string' && !unplaced) {
      const type = object.resourceType;
      if (type === 'Patient') unplaced = `${path} holds a Patient resource: write the Patient itself and refer to it (Patient/{id})`;
      else if (patientTypes.has(type) && !compartmentPatients(object as unknown as Resource, localBase).length)
        unplaced = `${path} holds a ${type} that names no patient by reference (Patient/{id})`;
    }
    const identifier = object.identifier as { system?: unknown } | undefined;
    const local = typeof object.reference === 'string' && referenceTarget(object.reference, localBase)?.[0];
    if (!root && !unplaced && !local && identifier && !Array.isArray(identifier) && typeof identifier === 'object'
        && (String(identifier.system ?? '').replace(/\/+$/, '') === HEALTH_ID_SYSTEM || object.type === 'Patient'
            // a `subject` or `patient` by identifier (an MRN, say) names a patient unless it says it is something else
            || (/\.(subject|patient)$/.test(path) && (object.type === undefined || object.type === 'Patient'))))
      unplaced = `${path} names a patient by identifier only: refer to the Patient (Patient/{id}); a Health ID resolves to it through the Connect routes`;
    for (const [key, v] of Object.entries(object)) {
      if (key === 'reference' && typeof v === 'string') {
        const target = referenceTarget(v, localBase);
        if (target?.[0] === 'Patient') referenced.add(target[1]);
      } else if (v !== null && typeof v === 'object') stack.push([v, `${path}.${key}`, false]);
    }
  }
  return { referenced, unplaced };
}
