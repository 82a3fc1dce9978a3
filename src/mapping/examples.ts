import { Hl7Message, normalizeErrorString, OperationOutcomeError, validateResource } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { issuesText } from '../core/errors';
import { isJsonObject } from '../core/json';
import { vacuousInvariant } from '../core/vacuous-invariant';
import { isMap, isScalar, isSeq, type Node } from 'yaml';
import type { ReadTerminology } from './runtime';
import type { CompiledMap } from './types';
import { keyOf, type YamlSource } from './yaml-source';

const EXAMPLE_KEYS = ['name', 'description', 'v2', 'connect', 'fhir', 'referenced', 'patient', 'value_sets', 'only'] as const;
export const EXAMPLES_SUFFIX = '.examples.yaml';

type Difference = { path: Array<string | number>; actual: unknown; expected: unknown };

/** Every place where two JSON values differ, as paths (`code.coding[0].system`) with both sides. */
function differences(actual: unknown, expected: unknown, path: Array<string | number> = []): Difference[] {
  if (Array.isArray(actual) && Array.isArray(expected)) {
    return Array.from({ length: Math.max(actual.length, expected.length) }, (_, i) => differences(actual[i], expected[i], [...path, i])).flat();
  }
  if (isJsonObject(actual) && isJsonObject(expected)) {
    return [...new Set([...Object.keys(expected), ...Object.keys(actual)])].flatMap((key) => differences(actual[key], expected[key], [...path, key]));
  }
  return Object.is(actual, expected) ? [] : [{ path, actual, expected }];
}

const pathText = (path: Array<string | number>) => path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i ? `.${p}` : p)).join('');
const show = (v: unknown) => (v === undefined ? 'nothing' : JSON.stringify(v));

/** The YAML node at a JSON path, or the deepest one that exists: where a difference is reported. */
function nodeAt(node: Node, path: Array<string | number>): Node {
  let current = node;
  for (const part of path) {
    let next: unknown;
    if (typeof part === 'number' && isSeq(current)) next = current.items[part];
    else if (isMap(current)) next = current.items.find((p) => isScalar(p.key) && String(p.key.value) === String(part))?.value;
    if (!next) break;
    current = next as Node;
  }
  return current;
}

/**
 * Why `resource` is not valid R4 to @medplum/core's validator (its issues, where they are), or undefined when it is:
 * the invariants the validator misjudges where their element is absent hold (src/core/vacuous-invariant.ts).
 */
export function r4Problem(resource: Resource): string | undefined {
  try {
    validateResource(resource);
    return undefined;
  } catch (err) {
    if (!(err instanceof OperationOutcomeError)) return normalizeErrorString(err);
    const issues = (err.outcome.issue ?? []).filter((i) => !vacuousInvariant(i, resource));
    if (!issues.some((i) => i.severity === 'error' || i.severity === 'fatal')) return undefined;
    return issuesText(issues);
  }
}

/**
 * Runs every `{connect, fhir}` pair of an examples file both ways through the map, and checks that the `fhir`
 * side is valid FHIR R4 (to `fhirProblem`: the service and `pont mappings check` give the store's own validation).
 * Problems go to `source`, at the example (or the exact value) that is wrong.
 */
export function runExamples(map: CompiledMap, source: YamlSource, fhirProblem: (resource: Resource) => string | undefined = r4Problem): number {
  // An empty file (or comments only) lists no examples: not malformed; the loader says that a map needs some.
  if (!source.ok || source.root === null) return 0;
  if (!isSeq(source.root)) {
    source.problem(source.root, 'an examples file is a list of `- connect: … fhir: …` entries');
    return 0;
  }
  let run = 0;
  for (const item of source.root.items as Node[]) {
    const pairs = source.mapping(item, 'an example', EXAMPLE_KEYS, ['connect', 'fhir']);
    const connectNode = pairs?.find((p) => keyOf(p) === 'connect')?.value;
    const fhirNode = pairs?.find((p) => keyOf(p) === 'fhir')?.value;
    if (!connectNode || !fhirNode) continue;
    run++;
    const connect = connectNode.toJSON() as Record<string, unknown>;
    const fhir = fhirNode.toJSON() as Resource;
    // `referenced`: the stored resources the example's references point to, for the fields read through resolve().
    const referencedNode = pairs?.find((p) => keyOf(p) === 'referenced')?.value;
    const referenced = referencedNode ? (referencedNode.toJSON() as Resource[]) : [];
    if (referencedNode && (!Array.isArray(referenced) || referenced.some((r) => typeof r?.resourceType !== 'string' || typeof r.id !== 'string'))) {
      source.problem(referencedNode, '`referenced` is a list of FHIR resources, each with its resourceType and id');
      continue;
    }
    const resolved = new Map(referenced.map((r) => [`${r.resourceType}/${r.id}`, r]));
    // `patient`: the Patient the reader knows (as the records route does), for %patient and %age_years.
    const patientNode = pairs?.find((p) => keyOf(p) === 'patient')?.value;
    const patient = patientNode ? (patientNode.toJSON() as Resource) : undefined;
    if (patientNode && patient?.resourceType !== 'Patient') {
      source.problem(patientNode, '`patient` is a FHIR Patient (resourceType: Patient), the one the resource is about');
      continue;
    }

    // `value_sets`: the value sets the example reads as loaded (url: [system|code, …]), for memberOf(); any other is not loaded.
    const valueSetsNode = pairs?.find((p) => keyOf(p) === 'value_sets')?.value;
    const terminology = valueSetsNode ? exampleValueSets(valueSetsNode.toJSON()) : undefined;
    if (valueSetsNode && !terminology) {
      source.problem(valueSetsNode, '`value_sets` maps each value set\'s canonical URL to the list of its codes, each `system|code`');
      continue;
    }

    const others = [...referenced.map((r, i) => [r, (referencedNode as { items: Node[] }).items[i]!, 'referenced resource'] as const), ...(patient ? [[patient, patientNode!, 'patient'] as const] : [])];
    for (const [resource, node, what] of [[fhir, fhirNode, 'fhir'], ...others] as const) {
      const problem = fhirProblem(resource);
      if (problem) source.problem(node, `the example's ${what} is not valid FHIR R4: ${problem}`);
    }
    // `only: read`: FHIR as another system wrote it (what read-only fields read), checked one way, FHIR -> Connect.
    const onlyNode = pairs?.find((p) => keyOf(p) === 'only')?.value;
    if (onlyNode && !(isScalar(onlyNode) && onlyNode.value === 'read')) source.problem(onlyNode, '`only` is `read` (the example is checked FHIR -> Connect only) or left out');
    // Written knowing the referenced resources too, as a push does (a reason that names the Condition referenced is not written again).
    if (!onlyNode) compare(source, `toFhir(connect)`, fhirNode, () => map.toFhir(connect, { resolved }), fhir);
    compare(source, `fromFhir(fhir)`, connectNode, () => map.fromFhir(fhir, { resolved, ...(patient ? { patient } : {}), ...(terminology ? { terminology } : {}) }), connect);
    // `v2`: an HL7 v2 message (a segment a line) whose values the map's `v2:` section reads must be the example's connect.
    const v2Node = pairs?.find((p) => keyOf(p) === 'v2')?.value;
    if (v2Node) {
      const text = source.text(v2Node, '`v2`');
      if (!map.v2) source.problem(v2Node, 'this map has no `v2:` section: an example with a v2 message needs one');
      else if (text !== undefined) {
        const expected = Object.fromEntries([...map.v2.keys()].filter((f) => connect[f] !== null && connect[f] !== undefined).map((f) => [f, connect[f]]));
        compare(source, 'the v2 message', connectNode, () => {
          const { connect: read, problems } = map.fromV2({ message: Hl7Message.parse(text.trim().replace(/\n/g, '\r')) });
          if (problems.length) throw new Error(problems.map((p) => p.message).join('; '));
          return read;
        }, expected);
      }
    }
  }
  return run;
}

/**
 * An example's `value_sets` as the loaded terminology a reader knows: memberOf() of a listed value set answers from
 * its codes (a bare code is in it from any system, as in src/fhir/term/lookup.ts); any other value set is not loaded.
 * Displays are not loaded: a coding without one reads as without the loaded code systems. Undefined when malformed.
 */
export function exampleValueSets(json: unknown): ReadTerminology | undefined {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return undefined;
  const sets = new Map<string, { codings: Set<string>; codes: Set<string> }>();
  for (const [url, codes] of Object.entries(json)) {
    if (!Array.isArray(codes) || !codes.every((c) => typeof c === 'string' && /^[^|]+\|[^|]+$/.test(c))) return undefined;
    sets.set(url, { codings: new Set(codes), codes: new Set(codes.map((c: string) => c.split('|')[1]!)) });
  }
  return {
    display: () => undefined,
    memberOf: (valueSet, system, code) => {
      const set = sets.get(valueSet);
      if (!set) return undefined;
      return system === undefined ? set.codes.has(code) : set.codings.has(`${system}|${code}`);
    },
  };
}

function compare(source: YamlSource, what: string, expectedNode: Node, produce: () => unknown, expected: unknown): void {
  let actual: unknown;
  try {
    actual = produce();
  } catch (err) {
    source.problem(expectedNode, `${what} fails: ${(err as Error).message}`);
    return;
  }
  // Every difference, each at its own value: one run of the check shows all that is wrong.
  for (const difference of differences(actual, expected)) {
    const where = difference.path.length ? ` at ${pathText(difference.path)}` : '';
    source.problem(
      nodeAt(expectedNode, difference.path),
      `does not round-trip: ${what} gives ${show(difference.actual)}${where}, the example has ${show(difference.expected)}`,
    );
  }
}
