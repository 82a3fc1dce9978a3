import type { Resource } from '@medplum/fhirtypes';
import { mandatoryElementsOf, summaryElementsOf } from '../core/fhir-definitions';

const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED' };

/** Keeps `keep` top-level elements (plus id, meta and the mandatory ones) and marks the copy SUBSETTED. */
function subset(resource: Resource, keep: (name: string) => boolean): Resource {
  const mandatory = mandatoryElementsOf(resource.resourceType);
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(resource)) {
    const name = key.replace(/^_/, '');
    // A choice element (value[x]) is named by its stem: valueQuantity is kept for "value".
    const stem = /^([a-z][a-zA-Z]*?)[A-Z]/.exec(name)?.[1] ?? name;
    const wanted = (n: string) => mandatory.has(n) || keep(n);
    if (key === 'resourceType' || key === 'id' || key === 'meta' || wanted(name) || wanted(stem)) out[key] = value;
  }
  out.meta = { ...resource.meta, tag: [...(resource.meta?.tag ?? []), SUBSETTED] };
  return out as unknown as Resource;
}

/** Applies `_elements` / `_summary` to a resource returned by a search or read. */
export function present(resource: Resource, options: { elements?: string[]; summary?: string }): Resource {
  if (options.elements?.length) {
    const wanted = new Set(options.elements);
    return subset(resource, (name) => wanted.has(name));
  }
  switch (options.summary) {
    case 'true': {
      const summary = summaryElementsOf(resource.resourceType);
      return subset(resource, (name) => summary.has(name));
    }
    case 'text':
      return subset(resource, (name) => name === 'text');
    case 'data':
      return subset(resource, (name) => name !== 'text');
    default:
      return resource;
  }
}
