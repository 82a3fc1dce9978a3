import { basename } from 'node:path';
import { isScalar, isSeq, type Node, type Pair, type Scalar } from 'yaml';
import { allResourceTypes } from '../fhir/definitions';
import { childElement, isPrimitive, jsonTypeOf, type FhirElement } from './fhir-types';
import { parsePath, PathSyntaxError, type Literal, type PathCondition } from './path';
import {
  CONNECT_TYPES,
  type CompiledCondition,
  type CompiledPath,
  type ConnectField,
  type ConnectType,
  type Conversion,
  type FieldRule,
  type FixedRule,
  type MapProgram,
  type ValueTable,
} from './runtime';
import { didYouMean } from './suggest';
import { codeSystemCodes, expandValueSet } from './terminology';
import { keyOf, YamlSource } from './yaml-source';

/** The keys of the map format, one list per level: anything else is reported as unknown. */
const TOP_KEYS = ['map', 'resource', 'description', 'uris', 'connect', 'fixed', 'fields'] as const;
const FIELD_KEYS = ['type', 'values', 'required', 'nullable', 'list', 'default', 'description'] as const;
const RULE_KEYS = ['fhir', 'values', 'otherwise', 'reference', 'narrative', 'description'] as const;

export const MAP_SUFFIX = '.map.yaml';

/** Connect types and the FHIR primitive types their values can be copied into unchanged. */
const COPY_COMPATIBLE: Record<ConnectType, string[]> = {
  string: ['string', 'markdown', 'code', 'uri', 'url', 'canonical', 'id', 'oid'],
  uuid: ['id', 'string'],
  date: ['date', 'dateTime'],
  'date-time': ['dateTime', 'instant'],
  boolean: ['boolean'],
  integer: ['integer', 'positiveInt', 'unsignedInt', 'decimal'],
  number: ['decimal'],
};

/** A path resolved against the FHIR definitions, with what the compiler needs to check values at its end. */
interface ResolvedPath {
  compiled: CompiledPath;
  leaf: FhirElement;
  /** Canonical text, to find two rules writing the same element. */
  key: string;
  /** The required binding and code system that apply to a code at the end of the path, when known. */
  codes: { valueSet?: string; system?: string };
}

const show = (v: unknown) => (typeof v === 'string' ? `\`${v}\`` : JSON.stringify(v));

/** Compiles one `*.map.yaml`; problems are reported on `source` (all of them, not only the first). */
export function compileMap(source: YamlSource): MapProgram | undefined {
  if (!source.ok) return undefined;
  const top = source.mapping(source.root, 'a map file', TOP_KEYS, ['map', 'resource', 'connect', 'fields']);
  if (!top) return undefined;
  const section = (key: string) => top.find((p) => keyOf(p) === key)?.value ?? undefined;
  const expectedName = basename(source.file).slice(0, -MAP_SUFFIX.length);

  const nameNode = section('map');
  const name = nameNode && source.text(nameNode, '`map`');
  if (name !== undefined && name !== expectedName) {
    source.problem(nameNode, `the map is named ${show(name)} but its file is ${expectedName}${MAP_SUFFIX}: the two must agree`);
  }

  const resourceNode = section('resource');
  let resourceType = resourceNode ? source.text(resourceNode, '`resource`') : undefined;
  if (resourceType !== undefined && !allResourceTypes().includes(resourceType)) {
    source.problem(resourceNode, `unknown FHIR resource type ${show(resourceType)}${didYouMean(resourceType, allResourceTypes())}`);
    resourceType = undefined;
  }

  const uris = readUris(source, section('uris'));
  const fields = readConnectFields(source, section('connect'));
  if (!resourceType || !fields) return undefined;

  const compiler = new RuleCompiler(source, resourceType, uris);
  const program: MapProgram = { name: expectedName, resourceType, fields: [], fixed: [] };
  const rulePairs = source.mapping(section('fields'), '`fields`') ?? [];
  for (const pair of rulePairs) {
    const field = fields.get(keyOf(pair));
    if (!field) {
      source.problem(pair.key, `${show(keyOf(pair))} is not a field declared under \`connect\`${didYouMean(keyOf(pair), fields.keys())}`);
      continue;
    }
    const rule = compiler.fieldRule(field.declared, pair);
    if (rule) program.fields.push(rule);
  }
  for (const [fieldName, { node }] of fields) {
    if (!rulePairs.some((p) => keyOf(p) === fieldName)) {
      source.problem(node, `Connect field ${show(fieldName)} is not mapped: give it a rule under \`fields\``);
    }
  }
  const fixedNode = section('fixed');
  for (const pair of (fixedNode && source.mapping(fixedNode, '`fixed`')) ?? []) {
    const rule = compiler.fixedRule(pair);
    if (rule) program.fixed.push(rule);
  }
  return source.ok ? program : undefined;
}

function readUris(source: YamlSource, node: Node | undefined): Map<string, string> {
  const uris = new Map<string, string>();
  for (const pair of (node && source.mapping(node, '`uris`')) ?? []) {
    const alias = keyOf(pair);
    if (!/^[A-Za-z][A-Za-z0-9_-]*$/.test(alias)) source.problem(pair.key, `${show(alias)}: a uris name is letters, digits, - and _`);
    const uri = source.text(pair.value, `uri ${show(alias)}`);
    if (uri !== undefined) uris.set(alias, uri);
  }
  return uris;
}

/** The `connect:` section: the Connect shape's fields, their types and allowed values. */
function readConnectFields(source: YamlSource, node: Node | undefined): Map<string, { declared: ConnectField & { valueNodes: Node[] }; node: Node }> | undefined {
  const pairs = node && source.mapping(node, '`connect`');
  if (!pairs) return undefined;
  const fields = new Map<string, { declared: ConnectField & { valueNodes: Node[] }; node: Node }>();
  for (const pair of pairs) {
    const name = keyOf(pair);
    const declared: ConnectField & { valueNodes: Node[] } = { name, type: 'string', required: false, nullable: false, list: false, valueNodes: [] };
    // `name: type` is the short form of `name: { type: … }`.
    const entries: Array<[string, Node | null]> = isScalar(pair.value)
      ? [['type', pair.value]]
      : (source.mapping(pair.value, `Connect field ${show(name)}`, FIELD_KEYS, ['type']) ?? []).map((e) => [keyOf(e), e.value]);
    for (const [key, value] of entries) {
      if (key === 'type') {
        const type = source.text(value, 'a Connect type');
        if (type !== undefined && !CONNECT_TYPES.includes(type as ConnectType)) {
          source.problem(value, `unknown Connect type ${show(type)}${didYouMean(type, CONNECT_TYPES)}; types: ${CONNECT_TYPES.join(', ')}`);
        } else if (type) declared.type = type as ConnectType;
      } else if (key === 'required' || key === 'nullable' || key === 'list') {
        if (!isScalar(value) || typeof value.value !== 'boolean') source.problem(value, `\`${key}\` is true or false`);
        else declared[key] = value.value;
      } else if (key === 'default') {
        if (!isScalar(value) || value.value === null) source.problem(value, '`default` is one value: what reading FHIR gives when FHIR has nothing');
        else declared.default = value.value as Literal;
      } else if (key === 'values') {
        if (!isSeq(value) || !value.items.length) {
          source.problem(value, '`values` is a list of the allowed values, e.g. [active, resolved]');
          continue;
        }
        declared.values = [];
        for (const item of value.items as Node[]) {
          declared.values.push(isScalar(item) ? (item.value as Literal) : '');
          declared.valueNodes.push(item);
        }
      }
    }
    for (const [i, value] of (declared.values ?? []).entries()) {
      const wanted = declared.type === 'boolean' ? 'boolean' : ['integer', 'number'].includes(declared.type) ? 'number' : 'string';
      if (typeof value !== wanted) source.problem(declared.valueNodes[i], `${show(value)} is not a ${declared.type} value`);
    }
    fields.set(name, { declared, node: pair.key });
  }
  return fields;
}

class RuleCompiler {
  /** Canonical target path -> where it was first mapped, to refuse two rules writing one element. */
  private readonly targets = new Map<string, number>();

  constructor(
    private readonly source: YamlSource,
    private readonly resourceType: string,
    private readonly uris: Map<string, string>,
  ) {}

  fieldRule(field: ConnectField & { valueNodes: Node[] }, pair: Pair<Scalar, Node | null>): FieldRule | undefined {
    const { source } = this;
    const where = `the rule of ${show(field.name)}`;
    // `field: path` is the short form of `field: { fhir: path }`.
    const entries = isScalar(pair.value) ? undefined : source.mapping(pair.value, where, RULE_KEYS, ['fhir']);
    if (!isScalar(pair.value) && !entries) return undefined;
    const entry = (key: string) => (entries ? entries.find((e) => keyOf(e) === key)?.value : key === 'fhir' ? pair.value : undefined) ?? undefined;

    const fhirNode = entry('fhir');
    if (!fhirNode) return undefined; // reported as missing
    const pathNodes = isSeq(fhirNode) ? (fhirNode.items as Node[]) : [fhirNode];
    if (!pathNodes.length) {
      source.problem(fhirNode, '`fhir` lists no FHIR element');
      return undefined;
    }
    const targets = pathNodes.map((node) => this.path(node));
    if (targets.some((t) => !t)) return undefined;
    const resolved = targets as ResolvedPath[];

    let conversion: Conversion = { kind: 'copy' };
    const referenceNode = entry('reference');
    const narrativeNode = entry('narrative');
    const valuesNode = entry('values');
    if (referenceNode) {
      const type = source.text(referenceNode, '`reference`');
      if (type === undefined) return undefined;
      if (!allResourceTypes().includes(type)) {
        source.problem(referenceNode, `unknown FHIR resource type ${show(type)}${didYouMean(type, allResourceTypes())}`);
        return undefined;
      }
      conversion = { kind: 'reference', resourceType: type };
    } else if (narrativeNode) {
      if (!isScalar(narrativeNode) || narrativeNode.value !== true) {
        source.problem(narrativeNode, '`narrative` is `true` (text <-> XHTML narrative) or left out');
        return undefined;
      }
      conversion = { kind: 'narrative' };
    }
    if (conversion.kind !== 'copy' && (valuesNode || resolved.length > 1)) {
      source.problem(referenceNode ?? narrativeNode, `\`${conversion.kind}\` works on one FHIR element, without a value table`);
      return undefined;
    }
    if (resolved.length > 1 && !valuesNode) {
      source.problem(fhirNode, `${field.name} goes to ${resolved.length} FHIR elements: give a value table (\`values\`) that says what each receives`);
      return undefined;
    }
    if (field.list && (resolved.length > 1 || !resolved[0]!.compiled.some((step) => step.isArray && step.index === undefined))) {
      source.problem(fhirNode, `${field.name} is a list: map it to one FHIR path through a repeating element without a position (e.g. \`provision.class\`), one element per value`);
      return undefined;
    }

    let ok = resolved.every((target, i) => this.checkLeaf(field, target, conversion, !!valuesNode, pathNodes[i]));
    let table: ValueTable | undefined;
    if (valuesNode) {
      table = this.valueTable(field, resolved, valuesNode, entry('otherwise'), pair.key);
      ok &&= !!table;
    } else if (entry('otherwise')) {
      source.problem(entry('otherwise'), '`otherwise` belongs to a value table (`values`)');
      ok = false;
    } else if (field.values && conversion.kind === 'copy') {
      // Copied unchanged: the declared Connect values themselves must be valid FHIR codes.
      field.values.forEach((value, i) => (ok = this.checkValue(value, resolved[0], field.valueNodes[i]) && ok));
    }
    resolved.forEach((target, i) => this.claim(target, pathNodes[i]));
    return ok ? { field, targets: resolved.map((t) => t.compiled), conversion, table } : undefined;
  }

  fixedRule(pair: Pair<Scalar, Node | null>): FixedRule | undefined {
    const target = this.path(pair.key);
    if (!target) return undefined;
    if (!isPrimitive(target.leaf.type)) {
      this.source.problem(pair.key, `${target.leaf.json} is a FHIR ${target.leaf.type}: a fixed value goes into one of its primitive elements`);
      return undefined;
    }
    const value = this.literal(pair.value, target);
    this.claim(target, pair.key);
    return value !== undefined && this.checkValue(value, target, pair.value!) ? { target: target.compiled, value } : undefined;
  }

  /** Does the end of the path fit the Connect type and the conversion? */
  private checkLeaf(field: ConnectField, target: ResolvedPath, conversion: Conversion, hasTable: boolean, node: Node): boolean {
    const { leaf } = target;
    const problem = (text: string) => (this.source.problem(node, text), false);
    if (conversion.kind === 'reference') {
      if (leaf.type !== 'Reference') return problem(`\`reference\` needs a FHIR Reference; ${leaf.json} is a ${leaf.type}`);
      const allowed = leaf.definition.type.find((t) => t.code === 'Reference')?.targetProfile?.map((p) => p.split('/').pop()!) ?? [];
      if (allowed.length && !allowed.includes('Resource') && !allowed.includes(conversion.resourceType)) {
        return problem(`${leaf.json} cannot refer to a ${conversion.resourceType}; it refers to ${allowed.join(', ')}`);
      }
      if (field.type !== 'uuid' && field.type !== 'string') return problem(`a reference holds an id: ${field.name} is a ${field.type}`);
      return true;
    }
    if (conversion.kind === 'narrative') {
      if (leaf.type !== 'Narrative') return problem(`\`narrative\` needs a FHIR Narrative (e.g. text); ${leaf.json} is a ${leaf.type}`);
      return field.type === 'string' || problem(`a narrative holds text: ${field.name} is a ${field.type}`);
    }
    if (leaf.type === 'CodeableConcept' || leaf.type === 'Coding') {
      const coding = leaf.type === 'Coding' ? leaf.json : `${leaf.json}.coding`;
      return problem(`${leaf.json} is a FHIR ${leaf.type}: map to \`${coding}.where(system='…').code\` (or its text)`);
    }
    if (leaf.type === 'Reference') return problem(`${leaf.json} is a FHIR Reference: add \`reference: <ResourceType>\``);
    if (!isPrimitive(leaf.type)) return problem(`${leaf.json} is a FHIR ${leaf.type}: map to one of its primitive elements`);
    if (!hasTable && !COPY_COMPATIBLE[field.type].includes(leaf.type)) {
      return problem(`a Connect ${field.type} cannot be copied into ${leaf.json}, a FHIR ${leaf.type}: use a value table or another element`);
    }
    return true;
  }

  private valueTable(field: ConnectField & { valueNodes: Node[] }, targets: ResolvedPath[], node: Node, otherwiseNode: Node | undefined, fieldKey: Node): ValueTable | undefined {
    const { source } = this;
    if (!field.values) {
      source.problem(node, `a value table needs the allowed values of ${show(field.name)}: add \`values: [...]\` to it under \`connect\``);
      return undefined;
    }
    const rows = source.mapping(node, `the value table of ${show(field.name)}`);
    if (!rows) return undefined;
    const table: ValueTable = { toFhir: new Map(), fromFhir: new Map() };
    const rowOf = new Map<string, Literal>();
    let ok = true;
    for (const row of rows) {
      const connectValue = row.key.value as Literal;
      if (!field.values.includes(connectValue)) {
        const known = field.values.map(String);
        source.problem(row.key, `${show(connectValue)} is not a declared value of ${show(field.name)} (${known.join(', ')})${didYouMean(String(connectValue), known)}`);
        ok = false;
        continue;
      }
      const cellNodes = targets.length > 1 && isSeq(row.value) ? (row.value.items as Node[]) : [row.value as Node];
      if (cellNodes.length !== targets.length) {
        source.problem(row.value, `${show(connectValue)} needs ${targets.length} values, one per FHIR element of \`fhir\` (~ for none)`);
        ok = false;
        continue;
      }
      const cells = cellNodes.map((cell, i) => (isScalar(cell) && cell.value === null ? null : this.literal(cell, targets[i])));
      if (cells.some((c) => c === undefined) || !cells.every((c, i) => c === null || this.checkValue(c!, targets[i], cellNodes[i]))) {
        ok = false;
        continue;
      }
      if (cells.every((c) => c === null)) {
        source.problem(row.value, `${show(connectValue)} must give FHIR a value, or reading it back cannot find it`);
        ok = false;
        continue;
      }
      // Reading FHIR back inverts the table: two Connect values with the same FHIR values could not be told apart.
      const key = JSON.stringify(cells);
      const clash = rowOf.get(key);
      if (clash !== undefined) {
        source.problem(row.value, `does not round-trip: ${show(connectValue)} and ${show(clash)} both give FHIR ${cells.map((c) => show(c)).join(' + ')}, so reading FHIR back cannot tell them apart`);
        ok = false;
        continue;
      }
      rowOf.set(key, connectValue);
      table.toFhir.set(connectValue, cells as Array<Literal | null>);
      table.fromFhir.set(key, connectValue);
    }
    for (const value of field.values) {
      if (ok && !table.toFhir.has(value)) {
        const at = field.valueNodes[field.values.indexOf(value)] ?? fieldKey;
        source.problem(at, `unmapped value: ${show(value)} of ${show(field.name)} has no row in its value table`);
        ok = false;
      }
    }
    if (otherwiseNode) {
      const otherwise = isScalar(otherwiseNode) ? (otherwiseNode.value as Literal | null) : undefined;
      if (otherwise === undefined || (otherwise !== null && !field.values.includes(otherwise))) {
        source.problem(otherwiseNode, `\`otherwise\` is one of the declared values of ${show(field.name)} (${field.values.join(', ')}) or ~`);
        ok = false;
      } else table.otherwise = { value: otherwise };
    }
    return ok ? table : undefined;
  }

  /** A YAML scalar as a value for the element at the path's end, typed for it (codes that look like numbers stay text). */
  private literal(node: Node | null | undefined, target: ResolvedPath): Literal | undefined {
    const wanted = jsonTypeOf(target.leaf.type);
    if (!isScalar(node) || node.value === null || typeof node.value === 'object') {
      this.source.problem(node, `expected a single ${wanted} value for ${target.leaf.json}`);
      return undefined;
    }
    if (wanted === 'string') return this.source.text(node, 'a value');
    if (typeof node.value !== wanted) {
      this.source.problem(node, `${target.leaf.json} is a FHIR ${target.leaf.type}: ${show(node.value)} is not a ${wanted}`);
      return undefined;
    }
    return node.value as Literal;
  }

  /** Is `value` a valid code where the path ends? Checked against required bindings and code systems we hold in full. */
  private checkValue(value: Literal, target: ResolvedPath, node: Node): boolean {
    const problem = codeProblem(value, target.codes);
    if (problem) this.source.problem(node, problem);
    return !problem;
  }

  private claim(target: ResolvedPath, node: Node): void {
    const first = this.targets.get(target.key);
    if (first === undefined) this.targets.set(target.key, this.source.lineOf(node));
    else this.source.problem(node, `does not round-trip: ${target.key} is already mapped on line ${first}; one FHIR element cannot hold two values`);
  }

  /** Parses a path and resolves every step against the FHIR definitions; problems point at the offending step. */
  private path(node: Node | null | undefined): ResolvedPath | undefined {
    const { source } = this;
    if (!isScalar(node) || typeof node.value !== 'string' || !node.value) {
      source.problem(node, 'expected a FHIR element path, e.g. code.text');
      return undefined;
    }
    const text = node.value;
    const at = (offset: number, problem: string) => (source.problemAt(source.offsetInScalar(node, offset), problem), undefined);
    let steps;
    try {
      steps = parsePath(text);
    } catch (err) {
      if (err instanceof PathSyntaxError) return at(err.at, `malformed path ${show(text)}: ${err.message}`);
      throw err;
    }
    // FHIRPath may start with the resource type (`Condition.code.text`): the same path.
    if (steps.length > 1 && steps[0].name === this.resourceType && steps[0].index === undefined && !steps[0].where.length) steps.shift();

    let type = this.resourceType;
    const compiled: CompiledPath = [];
    const elements: Array<FhirElement & { conditions: CompiledCondition[] }> = [];
    const keyParts: string[] = [];
    for (const step of steps) {
      const element = childElement(type, step.name);
      if ('problem' in element) return at(step.at, element.problem);
      if (step.index !== undefined && step.index > 0 && !element.isArray) {
        return at(step.at, `${step.name} holds one value, not a list: [${step.index}] cannot exist`);
      }
      const conditions: CompiledCondition[] = [];
      for (const condition of step.where) {
        if (isPrimitive(element.type)) return at(step.at, `where() filters elements with parts; ${step.name} is a FHIR ${element.type}`);
        const resolved = this.condition(element.type, condition, at);
        if (!resolved) return undefined;
        conditions.push(resolved);
      }
      compiled.push({ json: element.json, isArray: element.isArray, index: step.index, where: conditions });
      elements.push({ ...element, conditions });
      keyParts.push(
        element.json +
          (step.index !== undefined ? `[${step.index}]` : '') +
          conditions.map((c) => `.where(${c.steps.map((s) => s.json).join('.')}=${typeof c.value === 'string' ? `'${c.value}'` : c.value})`).join(''),
      );
      type = element.type;
    }
    const leaf = elements[elements.length - 1];
    return { compiled, leaf, key: keyParts.join('.'), codes: codeContext(elements) };
  }

  private condition(type: string, condition: PathCondition, at: (offset: number, problem: string) => undefined): CompiledCondition | undefined {
    const steps: CompiledCondition['steps'] = [];
    let element: FhirElement | undefined;
    for (const part of condition.path) {
      const found = childElement(element?.type ?? type, part.name);
      if ('problem' in found) return at(part.at, found.problem);
      element = found;
      steps.push({ json: found.json, isArray: found.isArray });
    }
    if (!isPrimitive(element!.type)) return at(condition.path[0].at, `a where() condition compares a primitive element; ${element!.json} is a FHIR ${element!.type}`);
    let value = condition.value;
    if (condition.alias !== undefined) {
      const uri = this.uris.get(condition.alias);
      if (uri === undefined) return at(condition.valueAt, `unknown uris name %${condition.alias}${didYouMean(condition.alias, this.uris.keys())}: declare it under \`uris\``);
      value = uri;
    }
    if (typeof value !== jsonTypeOf(element!.type)) return at(condition.valueAt, `${element!.json} is a FHIR ${element!.type}: ${show(value)} does not fit`);
    const problem = codeProblem(value, codeContext([{ ...element!, conditions: [] }]));
    if (problem) return at(condition.valueAt, problem);
    return { steps, value };
  }
}

/**
 * Which codes are valid at the end of a path: the required binding of the coded element it ends in
 * (`gender`, or `clinicalStatus` for `clinicalStatus.coding.code`) and the system a `where(system=…)` names.
 */
function codeContext(elements: Array<FhirElement & { conditions: CompiledCondition[] }>): ResolvedPath['codes'] {
  const n = elements.length;
  const leaf = elements[n - 1];
  const bindingOf = (e: FhirElement | undefined) => (e?.definition.binding?.strength === 'required' ? e.definition.binding.valueSet : undefined);
  if (leaf.type !== 'code') return {};
  if (leaf.json !== 'code' || elements[n - 2]?.type !== 'Coding') return { valueSet: bindingOf(leaf) };
  const coding = elements[n - 2];
  const system = coding.conditions.find((c) => c.steps.length === 1 && c.steps[0].json === 'system')?.value as string | undefined;
  const codeable = coding.json === 'coding' && elements[n - 3]?.type === 'CodeableConcept' ? elements[n - 3] : undefined;
  return { valueSet: bindingOf(codeable ?? coding), system };
}

function codeProblem(value: Literal, { valueSet, system }: ResolvedPath['codes']): string | undefined {
  if (typeof value !== 'string') return undefined;
  const explain = (codes: Iterable<string>, where: string) => {
    const list = [...codes];
    return `${show(value)} is not a code of ${where}${didYouMean(value, list)}${list.length <= 12 ? `; codes: ${list.join(', ')}` : ''}`;
  };
  const expansion = valueSet ? expandValueSet(valueSet) : undefined;
  if (expansion) {
    const vs = valueSet!.split('|')[0];
    if (system && !expansion.has(system)) return `the required ValueSet ${vs} has no codes from ${system}`;
    const codes = system ? expansion.get(system)! : new Set([...expansion.values()].flatMap((s) => [...s]));
    return codes.has(value) ? undefined : explain(codes, `the required ValueSet ${vs}`);
  }
  const codes = system ? codeSystemCodes(system) : undefined;
  return codes && !codes.has(value) ? explain(codes, system!) : undefined;
}
