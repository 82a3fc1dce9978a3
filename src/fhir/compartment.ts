import { toTypedValue } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { patientCompartmentParams } from './definitions';
import { indexedParams, referenceTarget } from './indexer';

/**
 * The patients whose compartment (R4 CompartmentDefinition "Patient") holds `resource`: a Patient is
 * in its own; a Condition in its subject's; an Organization in none. What the access rule and the
 * audit trail call "the patients this data is about".
 */
export function compartmentPatients(resource: Resource, localBase: string): string[] {
  if (resource.resourceType === 'Patient') return resource.id ? [resource.id] : [];
  const codes = patientCompartmentParams().get(resource.resourceType);
  if (!codes) return [];
  const ids = new Set<string>();
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
      const ref = (tv.value as { reference?: unknown } | undefined)?.reference;
      const target = typeof ref === 'string' ? referenceTarget(ref, localBase) : undefined;
      if (target?.[0] === 'Patient') ids.add(target[1]);
    }
  }
  return [...ids];
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
 * Every reference of `resource` to a resource on this server (`Type/id`, `Type/id/_history/n`, or an
 * absolute URL under `localBase`), wherever it is: not only where a SearchParameter looks. Contained
 * (`#id`), external and `urn:` references are not links; `unresolved` lists the `urn:uuid:` ones (meaningful
 * only inside the Bundle that defined them).
 */
export function linksOf(resource: Resource, localBase: string): { links: Link[]; unresolved: Link[] } {
  const links: Link[] = [];
  const unresolved: Link[] = [];
  // The audit trail records what was accessed, including what was deleted since: it holds nothing up.
  if (resource.resourceType === 'AuditEvent') return { links, unresolved };
  const visit = (value: unknown, path: string): void => {
    if (Array.isArray(value)) {
      for (const v of value) visit(v, path);
    } else if (value !== null && typeof value === 'object') {
      for (const [key, v] of Object.entries(value)) {
        if (key === 'reference' && typeof v === 'string') {
          if (v.startsWith('urn:uuid:')) unresolved.push({ targetType: '', targetId: v, path });
          const target = referenceTarget(v, localBase);
          if (target && target[0] !== '') links.push({ targetType: target[0], targetId: target[1], path });
        } else if (key !== 'contained') {
          visit(v, `${path}.${key}`);
        }
      }
    }
  };
  visit(resource, resource.resourceType);
  return { links, unresolved };
}
