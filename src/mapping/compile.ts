import { basename } from 'node:path';
import { getDataType } from '@medplum/core';
import { isScalar, isSeq, type Node, type Pair, type Scalar, type YAMLMap } from 'yaml';
import { allResourceTypes } from '../core/fhir-definitions';
import { childElement, isPrimitive, jsonTypeOf, type FhirElement } from './fhir-types';
import { parseExpression, PathSyntaxError, type Literal, type Outside, type ParsedPath, type PathCondition, type PathName } from './path';
import {
  ANY,
  CONNECT_TYPES,
  type CompiledAlternative,
  type CompiledCondition,
  type CompiledExpression,
  type CompiledPath,
  type CompiledStep,
  type ConnectField,
  type ConnectType,
  type Conversion,
  type FieldRule,
  type FixedRule,
  type MapProgram,
  type ValueTable,
} from './runtime';
import { inOneShape } from './one-shape';
import { readRecordSection } from './record';
import { didYouMean } from './suggest';
import { codeSystemCodes, expandValueSet } from './terminology';
import { parseV2Expression, parseV2Objects, V2PathError, type V2Expression, type V2Objects } from './v2-path';
import { keyOf, YamlSource } from './yaml-source';

/** toText(), and join() of elements that are not text (components, quantities): read as text, never written. */
const readsAsText = (finish: ParsedPath['finish'], leafType: string) =>
  finish?.kind === 'toText' || (finish?.kind === 'join' && !(isPrimitive(leafType) && jsonTypeOf(leafType) === 'string'));
/** The finishes that read a Connect string out of a FHIR string: a word of it, or the country it names. */
const readsOutOfText = (finish: ParsedPath['finish']) => finish?.kind === 'firstWord' || finish?.kind === 'lastWord' || finish?.kind === 'countryCode';
/**
 * Whether an exists() path is written (a boolean's `true` writes the element, its where() met; `false` nothing): when
 * its last element is narrowed by where() conditions that writing can meet (`=` a value, or `%resource.element`), so
 * that what is written says something (`performer.where(reference = %resource.subject.reference)`, the patient as a
 * performer). Any other exists() (`asNeededCodeableConcept.exists()`) is read only, as before.
 */
const writesExisting = (path: CompiledPath): boolean => {
  const last = path[path.length - 1];
  if (!last || last.resolve || !last.where.length) return false;
  return path.every((step) => !step.resolve && step.where.every((c) => !c.op && !c.exists && !c.empty && !c.age && !c.of && (!c.valueFrom || c.valueIn === 'resource')));
};
/** A finish that reads what cannot be written back: text of elements, exists(), memberOf(), or readsOutOfText. */
const readOnlyFinish = (finish: ParsedPath['finish'], leafType: string) =>
  readsAsText(finish, leafType) || finish?.kind === 'exists' || finish?.kind === 'memberOf' || readsOutOfText(finish);
/** The FHIR types memberOf() asks about: a code, a Coding, a concept's codings (FHIRPath's memberOf), a string as a code. */
const CODED_TYPES = ['code', 'Coding', 'CodeableConcept', 'string'];

/** The resource type of `%patient` in a condition (`%resource` is the map's own). */
const OUTSIDE_TYPE: Partial<Record<Outside, string>> = { patient: 'Patient' };
/** The FHIR types whose `value` is a quantity's: what `%age_years` compares with (an age range's limits are SimpleQuantity). */
const QUANTITY_TYPES = ['Quantity', 'SimpleQuantity', 'Age', 'Duration', 'Count', 'Distance'];

/** The keys of the map format, one list per level: anything else is reported as unknown. */
const TOP_KEYS = ['map', 'resource', 'record', 'description', 'uris', 'let', 'connect', 'v2', 'fixed', 'defaults', 'fields'] as const;
const FIELD_KEYS = ['type', 'values', 'required', 'nullable', 'list', 'default', 'fields', 'description'] as const;
const RULE_KEYS = ['fhir', 'values', 'read', 'otherwise', 'also', 'reference', 'narrative', 'write', 'fields', 'description'] as const;
/** What a rule of an object field may not have: its fields' rules have them. */
const NOT_FOR_OBJECTS = ['values', 'read', 'otherwise', 'also', 'reference', 'narrative'] as const;

export const MAP_SUFFIX = '.map.yaml';

/** Connect types and the FHIR primitive types their values can be copied into unchanged. */
const COPY_COMPATIBLE: Record<ConnectType, string[]> = {
  string: ['string', 'markdown', 'code', 'uri', 'url', 'canonical', 'id', 'oid', 'time'],
  id: ['id', 'string'],
  date: ['date', 'dateTime'],
  // Into a FHIR date (a birthDate) only a date, month or year alone: the runtime refuses a value with a time there.
  'date-time': ['dateTime', 'instant', 'date'],
  boolean: ['boolean'],
  integer: ['integer', 'positiveInt', 'unsignedInt', 'decimal'],
  number: ['decimal'],
  object: [],
};

/** What reading may also copy from (a fallback alternative, never written): wider than COPY_COMPATIBLE. */
const READ_COMPATIBLE: Record<ConnectType, string[]> = {
  ...COPY_COMPATIBLE,
  string: [...COPY_COMPATIBLE.string, 'uuid'],
  'date-time': ['dateTime', 'instant', 'date'],
  integer: ['integer', 'positiveInt', 'unsignedInt'],
  number: ['decimal', 'integer', 'positiveInt', 'unsignedInt'],
};

/** A path resolved against the FHIR definitions, with what the compiler needs to check values at its end. */
/** How a rule writes an element it shares with another: through a value table, or copied unchanged. */
type Share = 'table' | 'copy';

interface ResolvedPath {
  compiled: CompiledPath;
  leaf: FhirElement;
  /** Canonical text, to find two rules writing the same element. */
  key: string;
  /** The required binding and code system that apply to a code at the end of the path, when known. */
  codes: { valueSet?: string; system?: string };
  /** Every element along the path (a `let` spelt out), with its conditions. */
  elements: Array<FhirElement & { conditions: CompiledCondition[] }>;
}

/** One alternative of an expression, resolved: its whole path, and whether writing can follow it. */
interface ResolvedAlternative {
  compiled: CompiledAlternative;
  path: ResolvedPath;
  finish?: ParsedPath['finish'];
  /** Offset in the expression, for problems about it. */
  at: number;
  writable: boolean;
}

/** An expression (`a | b`): what writing uses (the ResolvedPath part) and every alternative reading tries. */
interface ResolvedExpression extends ResolvedPath {
  expression: CompiledExpression;
  alternatives: ResolvedAlternative[];
  /** Reports a problem at an offset of the expression's text. */
  at: (offset: number, problem: string) => undefined;
}

const show = (v: unknown) => (typeof v === 'string' ? `\`${v}\`` : JSON.stringify(v));

/**
 * The first step of `steps` through a repeating element that nothing narrows to one: no position, where() or first()
 * of its own, and no where() further on among its own elements (`category.coding.where(system=…)`,
 * `extension.valueCoding.where(…)`; in `contact.telecom.where(…)` the where() narrows the telecoms, not the contacts).
 * A concept's codings (the same concept in other code systems) are not counted.
 */
function firstUnsaid(steps: CompiledPath): CompiledStep | undefined {
  const repeats = (step: CompiledStep) => step.isArray && step.json !== 'coding';
  return steps.find((step, i) => {
    if (!repeats(step) || step.index !== undefined || step.first || step.where.length) return false;
    for (const later of steps.slice(i + 1)) {
      if (repeats(later)) return true;
      if (later.where.length) return false;
    }
    return true;
  });
}

/** Does the path end in a Reference's `reference` (`performer.reference`, `diagnosis.condition.reference`)? */
function endsInReference({ elements }: ResolvedPath): boolean {
  const [owner, leaf] = elements.slice(-2);
  return leaf?.json === 'reference' && owner?.type === 'Reference';
}

/** Does the path end in the texts of a repeating CodeableConcept, none chosen (`category.text`, `bodySite.text`)? */
function conceptTexts({ elements, compiled }: ResolvedPath): boolean {
  const [owner, leaf] = elements.slice(-2);
  const step = compiled.at(-2);
  return leaf?.json === 'text' && owner?.type === 'CodeableConcept' && owner.isArray && step?.index === undefined && !step?.where.length && !step?.first;
}

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
  const letNode = section('let');
  for (const pair of (letNode && source.mapping(letNode, '`let`')) ?? []) compiler.defineLet(pair);
  const program: MapProgram = { name: expectedName, resourceType, fields: [], fixed: [] };
  const recordNode = section('record');
  if (recordNode) program.record = readRecordSection(source, recordNode, resourceType, fields);
  program.fields = compiler.rules(fields, source.mapping(section('fields'), '`fields`') ?? [], 'under `connect`');
  const v2Node = section('v2');
  if (v2Node) program.v2 = readV2Section(source, v2Node, fields);
  const fixedNode = section('fixed');
  for (const pair of (fixedNode && source.mapping(fixedNode, '`fixed`')) ?? []) {
    const rule = compiler.fixedRule(pair);
    if (rule) program.fixed.push(rule);
  }
  // A default shares its element with the field that may write it (a report's own category): it claims nothing.
  const defaultsNode = section('defaults');
  for (const pair of (defaultsNode && source.mapping(defaultsNode, '`defaults`')) ?? []) {
    const rule = compiler.fixedRule(pair, false);
    if (rule) (program.defaults ??= []).push(rule);
  }
  if (source.ok) requireFhirRequired(source, program, fields, top.find((p) => keyOf(p) === 'fields')?.key ?? source.root);
  return source.ok ? inOneShape(program) : undefined;
}

/**
 * FHIR refuses a resource without its required elements (Composition.date, Encounter.class): each must be
 * written by a required Connect field, a fixed value or a default, or the map could emit invalid FHIR.
 */
function requireFhirRequired(source: YamlSource, program: MapProgram, fields: FieldMap, at: Node | Pair | null): void {
  const writes = (path: CompiledPath, element: string) => path[0]?.json === element || (element.endsWith('[x]') && path[0]?.json.startsWith(element.slice(0, -3)));
  for (const [element, definition] of Object.entries(getDataType(program.resourceType).elements)) {
    if ((definition.min ?? 0) < 1 || element === 'resourceType') continue;
    if ([...program.fixed, ...(program.defaults ?? [])].some((f) => writes(f.target, element))) continue;
    const rules = program.fields.filter((r) => r.targets.some((t) => writes(t.write, element)));
    if (rules.some((r) => r.field.required)) continue;
    const name = `${program.resourceType}.${element}`;
    if (rules.length) {
      for (const r of rules) source.problem(fields.get(r.field.name)?.node, `FHIR requires ${name}, which ${show(r.field.name)} writes: make it \`required: true\` (a record read back may still lack it)`);
    } else source.problem(at, `FHIR requires ${name}: map a required Connect field, a \`fixed\` value or a \`defaults\` value to it`);
  }
}

/**
 * The `v2:` section: a declared Connect field -> the v2 path it is read from (src/mapping/v2-path.ts); an object list
 * field -> its fields' paths, which read one field, an object of each repetition.
 */
function readV2Section(source: YamlSource, node: Node, fields: FieldMap): MapProgram['v2'] {
  const v2 = new Map<string, V2Expression | V2Objects>();
  const expression = (value: Node | null, what: string): V2Expression | undefined => {
    const text = source.text(value, what);
    if (text === undefined) return undefined;
    try {
      return parseV2Expression(text);
    } catch (err) {
      if (!(err instanceof V2PathError)) throw err;
      source.problem(value, err.message);
      return undefined;
    }
  };
  for (const pair of source.mapping(node, '`v2`') ?? []) {
    const name = keyOf(pair);
    const known = fields.get(name);
    const declared = known?.declared;
    if (!declared) {
      source.problem(pair.key, `${show(name)} is not a field declared under \`connect\`${didYouMean(name, fields.keys())}: declare it there too`);
      continue;
    }
    if (declared.type !== 'object') {
      const read = expression(pair.value as Node | null, `the v2 path of ${show(name)}`);
      if (read) v2.set(name, read);
      continue;
    }
    if (!declared.list || isScalar(pair.value)) {
      source.problem(pair.value ?? pair.key, `${show(name)} is ${declared.list ? 'a list of objects: give the v2 path of each of its fields (`field: PATH`), read in each repetition' : 'an object: a v2 map fills a list of objects (`list: true`), one of each repetition of a field'}`);
      continue;
    }
    const subs = new Map<string, V2Expression>();
    for (const sub of source.mapping(pair.value, `the v2 paths of ${show(name)}`) ?? []) {
      const subName = keyOf(sub);
      if (!known.fields?.has(subName)) source.problem(sub.key, `${show(subName)} is not a field of ${show(name)}${didYouMean(subName, known.fields?.keys() ?? [])}`);
      else {
        const read = expression(sub.value as Node | null, `the v2 path of ${show(`${name}.${subName}`)}`);
        if (read) subs.set(subName, read);
      }
    }
    try {
      v2.set(name, parseV2Objects(subs));
    } catch (err) {
      if (!(err instanceof V2PathError)) throw err;
      source.problem(pair.value, err.message);
    }
  }
  return v2;
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

type Declared = ConnectField & { valueNodes: Node[] };
/** Connect fields by name: each declaration, where it is written, and an object's own fields. */
type FieldMap = Map<string, { declared: Declared; node: Node; fields?: FieldMap }>;

/** The `connect:` section (or an object's `fields:`): the Connect shape's fields, their types and allowed values. */
function readConnectFields(source: YamlSource, node: Node | undefined, what = '`connect`'): FieldMap | undefined {
  const pairs = node && source.mapping(node, what);
  if (!pairs) return undefined;
  const fields: FieldMap = new Map();
  for (const pair of pairs) {
    const name = keyOf(pair);
    const declared: Declared = { name, type: 'string', required: false, nullable: false, list: false, valueNodes: [] };
    let fieldsNode: Node | null | undefined;
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
      } else if (key === 'fields') {
        fieldsNode = value;
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
    // `type: object`: an object with its own fields, declared like these (`fields:`).
    let sub: FieldMap | undefined;
    const keyNode = (key: string) => (isScalar(pair.value) ? undefined : (pair.value as YAMLMap).items.find((p) => isScalar(p.key) && p.key.value === key)?.key as Node | undefined);
    if (declared.type === 'object') {
      for (const key of ['values', 'default'] as const) {
        if (keyNode(key)) source.problem(keyNode(key), `\`${key}\` does not apply to an object: give it to the object's fields`);
      }
      if (fieldsNode === undefined) source.problem(pair.key, `${show(name)} is an object: declare its fields under \`fields:\` (like these)`);
      else if ((sub = readConnectFields(source, fieldsNode ?? undefined, `the fields of ${show(name)}`))) declared.fields = [...sub.values()].map((f) => f.declared);
    } else if (fieldsNode !== undefined) {
      source.problem(keyNode('fields'), `\`fields\` declares the fields of an object: ${show(name)} is a ${declared.type} (\`type: object\` for an object)`);
    }
    fields.set(name, { declared, node: pair.key, ...(sub ? { fields: sub } : {}) });
  }
  return fields;
}

class RuleCompiler {
  /** The FHIR elements written so far: the line of the first rule, and whether another may share it (claim). */
  private readonly targets = new Map<string, { line: number; share?: Share }>();
  /** The map's `let`s, by name. */
  private readonly lets = new Map<string, ResolvedExpression>();

  /**
   * `resourceType`: where paths start, the resource or, for an object's fields, the element's type (`Coding`);
   * `rootType`: the resource's (`%resource`); `readOnly`: the rules of a read-only object, never written.
   */
  constructor(
    private readonly source: YamlSource,
    private readonly resourceType: string,
    private readonly uris: Map<string, string>,
    private readonly rootType = resourceType,
    private readonly readOnly = false,
  ) {}

  /** One rule per declared field (`pairs`: the `fields:` entries); every field needs one, and no rule is for an undeclared field. */
  rules(fields: FieldMap, pairs: Array<Pair<Scalar, Node | null>>, declaredWhere: string): FieldRule[] {
    const rules: FieldRule[] = [];
    for (const pair of pairs) {
      const field = fields.get(keyOf(pair));
      if (!field) {
        this.source.problem(pair.key, `${show(keyOf(pair))} is not a field declared ${declaredWhere}${didYouMean(keyOf(pair), fields.keys())}`);
        continue;
      }
      const rule = this.fieldRule(field.declared, pair, field.fields);
      if (rule) rules.push(rule);
    }
    for (const [fieldName, { node }] of fields) {
      if (!pairs.some((p) => keyOf(p) === fieldName)) {
        this.source.problem(node, `Connect field ${show(fieldName)} is not mapped: give it a rule under \`fields\``);
      }
    }
    return rules;
  }

  fieldRule(field: Declared, pair: Pair<Scalar, Node | null>, subFields?: FieldMap): FieldRule | undefined {
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
    // `write: false`: read only (what FHIR says in a way the Connect value cannot give back, e.g. components as text).
    const writeNode = entry('write');
    if (writeNode && (!isScalar(writeNode) || writeNode.value !== false)) {
      source.problem(writeNode, '`write` is `false` (the field is read only) or left out');
      return undefined;
    }
    const readOnly = !!writeNode || this.readOnly;
    if (readOnly && field.required) {
      source.problem(writeNode ?? pair.key, `${show(field.name)} is required, so it is written: it cannot be read only${writeNode ? '' : ' (its object is `write: false`)'}`);
      return undefined;
    }
    if (field.type === 'object' || entry('fields')) return this.objectRule(field, pair, entry, readOnly, subFields);
    const targets = pathNodes.map((node) => this.expression(node, readOnly));
    if (targets.some((t) => !t)) return undefined;
    const resolved = targets as ResolvedExpression[];

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
    // Several paths without a value table: each receives the value (an age's unit, into both its limits); reading
    // takes the first that has one. A list goes to one path.
    if (resolved.length > 1 && !valuesNode && field.list) {
      source.problem(fhirNode, `${field.name} goes to ${resolved.length} FHIR elements: give a value table (\`values\`) that says what each receives`);
      return undefined;
    }
    if (field.list && (resolved.length > 1 || !resolved[0]!.compiled.some((step) => step.isArray && step.index === undefined && !step.first))) {
      source.problem(fhirNode, `${field.name} is a list: map it to one FHIR path through a repeating element without a position (e.g. \`provision.class\`), one element per value`);
      return undefined;
    }

    let ok = resolved.every((target) => target.alternatives.every((alternative) => this.checkLeaf(field, alternative, target, conversion, !!valuesNode)));
    let table: ValueTable | undefined;
    if (valuesNode) {
      table = this.valueTable(field, resolved, valuesNode, entry('otherwise'), pair.key);
      ok &&= !!table;
      if (table && entry('read')) ok = this.readRows(field, resolved, entry('read')!, table) && ok;
    } else if (entry('otherwise') ?? entry('read')) {
      source.problem(entry('otherwise') ?? entry('read'), `\`${entry('otherwise') ? 'otherwise' : 'read'}\` belongs to a value table (\`values\`)`);
      ok = false;
    } else if (field.values && conversion.kind === 'copy') {
      // Copied unchanged: the declared Connect values themselves must be valid FHIR codes.
      field.values.forEach((value, i) => (ok = this.checkValue(value, resolved[0], field.valueNodes[i]) && ok));
    }
    resolved.forEach((target, i) => {
      const share = conversion.kind === 'copy' && !field.list && isPrimitive(target.leaf.type) ? (valuesNode ? 'table' : 'copy') : undefined;
      if (!readOnly) this.claim(target, pathNodes[i]!, share);
    });
    const also: FixedRule[] = [];
    const alsoNode = entry('also');
    if (alsoNode && field.list) {
      source.problem(alsoNode, '`also` writes constants with one value; a list field has several');
      ok = false;
    }
    const alsoPairs = (!field.list && alsoNode && source.mapping(alsoNode, `\`also\` of ${show(field.name)}`)) || [];
    for (const alsoPair of alsoPairs) {
      const rule = this.fixedRule(alsoPair);
      if (rule) also.push(rule);
      else ok = false;
    }
    return ok ? { field, targets: resolved.map((t) => t.expression), conversion, table, also, ...(readOnly ? { readOnly } : {}) } : undefined;
  }

  /**
   * `type: object`: one FHIR element with parts (a Coding, a component) per object, or a list of them (one per
   * element of a repeating element); its fields' rules are compiled from that element's type, with every check of
   * the top level.
   */
  private objectRule(field: Declared, pair: Pair<Scalar, Node | null>, entry: (key: string) => Node | undefined, readOnly: boolean, subFields?: FieldMap): FieldRule | undefined {
    const { source } = this;
    const fieldsNode = entry('fields');
    if (field.type !== 'object') {
      source.problem(fieldsNode, `\`fields\` maps the fields of an object: ${show(field.name)} is a ${field.type} (declare it \`type: object\`, with its \`fields\`, under \`connect\`)`);
      return undefined;
    }
    if (!fieldsNode) {
      source.problem(pair.key, `${show(field.name)} is an object: give the rules of its fields under \`fields:\`, paths from its element`);
      return undefined;
    }
    let ok = true;
    for (const key of NOT_FOR_OBJECTS) {
      const node = entry(key);
      if (node) (source.problem(node, `\`${key}\` does not apply to an object field: give it to the rules of its fields`), (ok = false));
    }
    const fhirNode = entry('fhir')!;
    if (isSeq(fhirNode)) {
      source.problem(fhirNode, `an object field maps one FHIR element: \`fhir\` is one path (e.g. \`code.coding\`)`);
      return undefined;
    }
    const target = this.expression(fhirNode, readOnly);
    if (!ok || !target) return undefined;
    for (const alternative of target.alternatives) {
      if (alternative.finish) return target.at(alternative.finish.at, `an object is read from the elements themselves: no ${alternative.finish.kind}()`);
      if (isPrimitive(alternative.path.leaf.type)) return target.at(alternative.at, `${alternative.path.leaf.json} is a FHIR ${alternative.path.leaf.type}: an object maps an element with parts (e.g. a Coding)`);
      if (alternative.path.leaf.type !== target.leaf.type) return target.at(alternative.at, `the alternatives of an object field must reach one FHIR type; ${target.leaf.type} and ${alternative.path.leaf.type} differ`);
    }
    const last = target.compiled[target.compiled.length - 1]!;
    if (field.list && !(last.isArray && last.index === undefined && !last.first && !last.resolve)) {
      source.problem(fhirNode, `${field.name} is a list of objects: its path ends in a repeating element without a position (e.g. \`code.coding\`), one object per element`);
      return undefined;
    }
    if (!readOnly) this.claim(target, fhirNode);
    const before = source.problems.length;
    const compiler = new RuleCompiler(source, target.leaf.type, this.uris, this.rootType, readOnly);
    const program: MapProgram = { name: basename(source.file).slice(0, -MAP_SUFFIX.length), resourceType: target.leaf.type, fields: [], fixed: [] };
    program.fields = compiler.rules(subFields ?? new Map(), source.mapping(fieldsNode, `the rules of the fields of ${show(field.name)}`) ?? [], `in the fields of ${show(field.name)}`);
    // What FHIR requires of the element (a component's code) is written by a required field of the object.
    if (!readOnly && source.problems.length === before) requireFhirRequired(source, program, subFields ?? new Map(), fieldsNode);
    if (source.problems.length !== before) return undefined;
    return { field, targets: [target.expression], conversion: { kind: 'copy' }, also: [], object: program, ...(readOnly ? { readOnly } : {}) };
  }

  /** `let: name: expression`: a part of the resource chosen once (e.g. the applicable reference range), used as `%name`. */
  defineLet(pair: Pair<Scalar, Node | null>): void {
    const name = keyOf(pair);
    if (!/^[A-Za-z][A-Za-z0-9_]*$/.test(name)) this.source.problem(pair.key, `${show(name)}: a let name is letters, digits and _`);
    else if (name === 'resource' || name === 'patient' || name === 'age_years' || this.uris.has(name)) this.source.problem(pair.key, `${show(name)} is already a name (%resource, %patient, %age_years, or one of \`uris\`): choose another`);
    const resolved = isScalar(pair.value) ? this.expression(pair.value) : this.readAndWrite(pair.value);
    if (!resolved) return;
    const types = new Set(resolved.alternatives.map((a) => a.path.leaf.type));
    if (types.size > 1) {
      this.source.problem(pair.value, `the alternatives of a let must reach one FHIR type; these reach ${[...types].join(', ')}`);
      return;
    }
    if (isPrimitive(resolved.leaf.type)) {
      this.source.problem(pair.value, `a let names an element with parts (e.g. a reference range); ${resolved.leaf.json} is a FHIR ${resolved.leaf.type}`);
      return;
    }
    this.lets.set(name, resolved);
  }

  /**
   * A let given as `{ read: EXPR, write: PATH }`: read by EXPR's alternatives alone, written at PATH. For a choice whose
   * every plain alternative would also be read (`referenceRange.first()`, the only path writing can take, would read a
   * range in another unit when no range in the value's is given).
   */
  private readAndWrite(node: Node | null): ResolvedExpression | undefined {
    const pairs = this.source.mapping(node, 'a let: an expression, or `read:` and `write:`', ['read', 'write'], ['read', 'write']);
    const part = (key: string) => pairs?.find((p) => keyOf(p) === key)?.value;
    if (!pairs) return undefined;
    const read = this.expression(part('read'), true);
    const write = this.expression(part('write'));
    if (!read || !write) return undefined;
    if (write.alternatives.length > 1 || write.alternatives[0]!.finish) return write.at(0, 'a let is written at one path, without `|` or a function');
    if (write.leaf.type !== read.leaf.type) return write.at(0, `writes a FHIR ${write.leaf.type}, where its \`read\` reaches ${read.leaf.type}`);
    const { compiled, leaf, key, codes, elements } = write;
    return { compiled, leaf, key, codes, elements, expression: { ...read.expression, write: write.expression.write, writeType: write.expression.writeType, writesReference: write.expression.writesReference }, alternatives: read.alternatives, at: read.at };
  }

  /** A `fixed` (or `also`) value, which claims its element; a `defaults` value (`claims` false) shares it. */
  fixedRule(pair: Pair<Scalar, Node | null>, claims = true): FixedRule | undefined {
    const target = this.expression(pair.key);
    if (!target) return undefined;
    if (target.alternatives.length > 1 || target.alternatives[0]!.finish) {
      target.at(target.alternatives[0]!.finish?.at ?? target.alternatives[1]!.at, 'a fixed value is written: one path, without `|`, join(), toDate(), toText() or exists()');
      return undefined;
    }
    if (!isPrimitive(target.leaf.type)) {
      this.source.problem(pair.key, `${target.leaf.json} is a FHIR ${target.leaf.type}: a fixed value goes into one of its primitive elements`);
      return undefined;
    }
    const value = this.literal(pair.value, target);
    if (claims) this.claim(target, pair.key);
    return value !== undefined && this.checkValue(value, target, pair.value!) ? { target: target.compiled, value } : undefined;
  }

  /** Does the end of one alternative fit the Connect type and the conversion? Fallbacks (never written) may read more types. */
  private checkLeaf(field: ConnectField, alternative: ResolvedAlternative, target: ResolvedExpression, conversion: Conversion, hasTable: boolean): boolean {
    const { leaf } = alternative.path;
    const problem = (text: string) => (target.at(alternative.at, text), false);
    if (alternative.finish?.kind === 'memberOf') {
      // Whether a code is in a loaded value set: for a Connect boolean, never written.
      if (!CODED_TYPES.includes(leaf.type)) return target.at(alternative.finish.at, `memberOf() asks whether a code is in a value set: ${leaf.json} is a FHIR ${leaf.type}, not a code, Coding or CodeableConcept`) ?? false;
      if (field.type === 'boolean' && !hasTable && conversion.kind === 'copy') return true;
      return target.at(alternative.finish.at, `memberOf() reads true or false: ${field.name} is a ${field.type}${hasTable ? ' with a value table' : ''}, not a boolean`) ?? false;
    }
    if (alternative.finish?.kind === 'exists') {
      // Whether the element is there (asNeededCodeableConcept means as needed): for a Connect boolean, never written.
      if (field.type === 'boolean' && !hasTable && conversion.kind === 'copy') return true;
      return target.at(alternative.finish.at, `exists() reads whether an element is there: ${field.name} is a ${field.type}${hasTable ? ' with a value table' : ''}, not a boolean`) ?? false;
    }
    // One value read through a repeating element that the path does not narrow is the first the path finds: the
    // rest are lost, and a field beside it (a code, its words) may read another element's (a care plan's category
    // in words from its second category, its code from its first). A reference field takes the first of its type.
    // A let's own path counts as the start of the path (`let: { cat: category }` then `%cat.text`).
    const unsaid =
      field.list || conversion.kind === 'reference' || alternative.finish?.kind === 'join'
        ? undefined
        : (alternative.compiled.from?.alternatives ?? [{ steps: [] }]).map((start) => firstUnsaid([...start.steps, ...alternative.compiled.steps])).find((step) => step !== undefined);
    if (unsaid) {
      return problem(
        `${field.name} is one value, and \`${unsaid.json}\` repeats: the path reads the first it finds. Say which, right after it (\`${unsaid.json}[0]\`, \`${unsaid.json}.first()\`, \`${unsaid.json}.where(…)\`) or read them all (\`….join('; ')\`, a list field)`,
      );
    }
    if (readsAsText(alternative.finish, leaf.type)) {
      // Any element reads as text (a Range as "1–3 mg/L", components joined): for a Connect string, never written.
      if (field.type === 'string' && !hasTable && conversion.kind === 'copy') return true;
      return target.at(alternative.finish!.at, `${alternative.finish!.kind}() reads elements as text: ${field.name} is a ${field.type}${hasTable ? ' with a value table' : ''}`) ?? false;
    }
    if (conversion.kind === 'reference') {
      if (leaf.type !== 'Reference') return problem(`\`reference\` needs a FHIR Reference; ${leaf.json} is a ${leaf.type}`);
      const allowed = leaf.definition.type.find((t) => t.code === 'Reference')?.targetProfile?.map((p) => p.split('/').pop()!) ?? [];
      if (allowed.length && !allowed.includes('Resource') && !allowed.includes(conversion.resourceType)) {
        return problem(`${leaf.json} cannot refer to a ${conversion.resourceType}; it refers to ${allowed.join(', ')}`);
      }
      if (field.type !== 'id' && field.type !== 'string') return problem(`a reference holds an id: ${field.name} is a ${field.type}`);
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
    const finish = alternative.finish;
    if (finish?.kind === 'join' && (field.type !== 'string' || jsonTypeOf(leaf.type) !== 'string' || hasTable)) {
      return target.at(finish.at, `join() makes text of text: ${field.name} is a ${field.type}${hasTable ? ' with a value table' : ''}, ${leaf.json} a FHIR ${leaf.type}`) ?? false;
    }
    if (finish && readsOutOfText(finish)) {
      if (field.type !== 'string' || jsonTypeOf(leaf.type) !== 'string' || hasTable) {
        const what = finish.kind === 'countryCode' ? 'a country code of a text' : 'a word of a text';
        return target.at(finish.at, `${finish.kind}() reads ${what} into a Connect string: ${field.name} is a ${field.type}${hasTable ? ' with a value table' : ''}, ${leaf.json} a FHIR ${leaf.type}`) ?? false;
      }
      return true;
    }
    if (finish?.kind === 'toDate') {
      if (!['date', 'dateTime', 'instant'].includes(leaf.type) || field.type !== 'date') {
        return target.at(finish.at, `toDate() reads the date of a FHIR date, dateTime or instant into a Connect date: ${field.name} is a ${field.type}, ${leaf.json} a FHIR ${leaf.type}`) ?? false;
      }
      return true;
    }
    const compatible = alternative.writable && alternative.path === target.alternatives.find((a) => a.writable)?.path ? COPY_COMPATIBLE : READ_COMPATIBLE;
    if (!hasTable && !compatible[field.type].includes(leaf.type)) {
      return problem(`a Connect ${field.type} cannot be copied into ${leaf.json}, a FHIR ${leaf.type}: use a value table or another element`);
    }
    return true;
  }

  private valueTable(field: ConnectField & { valueNodes: Node[] }, targets: ResolvedExpression[], node: Node, otherwiseNode: Node | undefined, fieldKey: Node): ValueTable | undefined {
    const { source } = this;
    if (!field.values) {
      source.problem(node, `a value table needs the allowed values of ${show(field.name)}: add \`values: [...]\` to it under \`connect\``);
      return undefined;
    }
    const rows = source.mapping(node, `the value table of ${show(field.name)}`);
    if (!rows) return undefined;
    const table: ValueTable = { toFhir: new Map(), fromFhir: new Map(), readRows: [] };
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

  /**
   * `read:` rows of a value table, for FHIR written elsewhere: `connect value: [fhir value, …]`, each item the FHIR
   * value (one target) or the list of one value per target (`'*'` anything, `~` nothing). Never written.
   */
  private readRows(field: ConnectField, targets: ResolvedExpression[], node: Node, table: ValueTable): boolean {
    const { source } = this;
    const rows = source.mapping(node, `the \`read\` rows of ${show(field.name)}`);
    if (!rows) return false;
    let ok = true;
    for (const row of rows) {
      const connectValue = row.key.value as Literal;
      if (!field.values!.includes(connectValue)) {
        const known = field.values!.map(String);
        source.problem(row.key, `${show(connectValue)} is not a declared value of ${show(field.name)} (${known.join(', ')})${didYouMean(String(connectValue), known)}`);
        ok = false;
        continue;
      }
      if (!isSeq(row.value) || !row.value.items.length) {
        source.problem(row.value ?? row.key, `${show(connectValue)}: a list of the FHIR values that read as it`);
        ok = false;
        continue;
      }
      for (const item of row.value.items as Node[]) {
        const cellNodes = targets.length > 1 && isSeq(item) ? (item.items as Node[]) : [item];
        if (cellNodes.length !== targets.length) {
          source.problem(item, `needs ${targets.length} values, one per FHIR element of \`fhir\` ('*' for any, ~ for none)`);
          ok = false;
          continue;
        }
        const cells = cellNodes.map((cell, i) => {
          if (isScalar(cell) && cell.value === null) return null;
          if (isScalar(cell) && cell.value === ANY) return ANY;
          const value = this.literal(cell, targets[i]);
          // Read only: a value any alternative may hold (US Core's birth sex `F` where gender would say female).
          const fits = value !== undefined && targets[i]!.alternatives.some((a) => !codeProblem(value, a.path.codes));
          return value !== undefined && (fits || this.checkValue(value, targets[i], cell)) ? value : undefined;
        });
        if (cells.some((c) => c === undefined)) ok = false;
        else table.readRows.push({ cells: cells as Array<Literal | null>, value: connectValue });
      }
    }
    return ok;
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

  /**
   * One rule per FHIR element, but for a value table that writes an element another field copies (a lab's local
   * code table writing the LOINC coding that `loinc_code` writes): the two must then agree on every value written
   * (runToFhir refuses a contradiction), and each reads the element on its own. Two plain copies stay refused.
   */
  private claim(target: ResolvedPath, node: Node, share?: Share): void {
    const first = this.targets.get(target.key);
    if (first === undefined) this.targets.set(target.key, { line: this.source.lineOf(node), share });
    else if (share && first.share && (share === 'table' || first.share === 'table')) return;
    else this.source.problem(node, `does not round-trip: ${target.key} is already mapped on line ${first.line}; one FHIR element cannot hold two values`);
  }

  /** Parses an expression (`a | b`) and resolves every alternative against the FHIR definitions; problems point at the offending step. */
  private expression(node: Node | null | undefined, readOnly = false): ResolvedExpression | undefined {
    const { source } = this;
    if (!isScalar(node) || typeof node.value !== 'string' || !node.value) {
      source.problem(node, 'expected a FHIR element path, e.g. code.text');
      return undefined;
    }
    const text = node.value;
    const at = (offset: number, problem: string) => (source.problemAt(source.offsetInScalar(node, offset), problem), undefined);
    let parsed: ParsedPath[];
    try {
      parsed = parseExpression(text);
    } catch (err) {
      if (err instanceof PathSyntaxError) return at(err.at, `malformed path ${show(text)}: ${err.message}`);
      throw err;
    }
    const alternatives: ResolvedAlternative[] = [];
    for (const alternative of parsed) {
      const resolved = this.alternative(alternative, at);
      if (!resolved) return undefined;
      alternatives.push(resolved);
    }
    const written = alternatives.find((a) => a.writable) ?? (readOnly ? alternatives[0] : undefined);
    if (!written) return at(0, `writing needs one alternative of ${show(text)} without %resource or resolve(): add one (e.g. \`| referenceRange.first()\`)`);
    const writeEach = written.finish?.kind === 'join' && conceptTexts(written.path) ? written.finish.separator : undefined;
    const writeExists = written.writable && written.finish?.kind === 'exists';
    return {
      ...written.path,
      expression: { alternatives: alternatives.map((a) => a.compiled), write: written.path.compiled, writeType: written.path.leaf.type, writesReference: endsInReference(written.path), ...(writeEach ? { writeEach } : {}), ...(writeExists ? { writeExists } : {}) },
      alternatives,
      at,
    };
  }

  /** One alternative: from the resource or a `let`, each step checked against the FHIR definitions. */
  private alternative(parsed: ParsedPath, at: (offset: number, problem: string) => undefined): ResolvedAlternative | undefined {
    const steps = [...parsed.steps];
    let type = this.resourceType;
    let base: ResolvedExpression | undefined;
    if (parsed.from) {
      base = this.lets.get(parsed.from.name);
      if (!base) return at(parsed.from.at, `unknown let %${parsed.from.name}${didYouMean(parsed.from.name, this.lets.keys())}: declare it under \`let\` (before its use)`);
      type = base.leaf.type;
    } else if (steps.length > 1 && steps[0].name === this.resourceType && steps[0].index === undefined && !steps[0].where.length && !steps[0].first) {
      // FHIRPath may start with the resource type (`Condition.code.text`): the same path.
      steps.shift();
    }
    const compiled: CompiledPath = [];
    const elements: ResolvedPath['elements'] = [...(base?.elements ?? [])];
    const keyParts: string[] = base ? [base.key] : [];
    let readsResource = false;
    // `%resource.element` as the value of an `=` condition: read, and written by an exists() path (below) as the value
    // the resource holds there when written (performer.where(reference = %resource.subject.reference): the patient).
    let copiesResource = false;
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
        // What depends on the resource, the patient or a comparison is read, never written (but see copiesResource).
        const copies = !!resolved.valueFrom && resolved.valueIn === 'resource' && !resolved.of && !resolved.op && !resolved.exists && !resolved.empty && !resolved.age;
        copiesResource ||= copies;
        readsResource ||= !copies && !!(resolved.valueFrom || resolved.of || resolved.op || resolved.exists || resolved.age);
        conditions.push(resolved);
      }
      // A Coding's display: one without reads as its code system's (runtime codingDisplay), for a reader that knows the terminology.
      const codingDisplay = type === 'Coding' && element.json === 'display';
      compiled.push({
        json: element.json,
        isArray: element.isArray,
        index: step.index,
        where: conditions,
        ...(step.first ? { first: true } : {}),
        ...(step.resolve ? { resolve: true } : {}),
        ...(codingDisplay ? { codingDisplay } : {}),
      });
      elements.push({ ...element, conditions });
      keyParts.push(
        element.json +
          (step.index !== undefined ? `[${step.index}]` : '') +
          conditions.map((c) => `.where(${c.steps.map((s) => s.json).join('.')}${c.empty ? '.empty()' : c.exists ? '.exists()' : `${c.op ?? '='}${c.age ? '%age_years' : typeof c.value === 'string' ? `'${c.value}'` : c.value}`})`).join(''),
      );
      type = element.type;
      if (step.resolve) {
        if (element.type !== 'Reference') return at(step.at, `resolve() follows a Reference; ${step.name} is a FHIR ${element.type}`);
        readsResource = true; // what another resource holds is read, never written
        const rest = steps.slice(steps.indexOf(step) + 1);
        // Read as text (`performer.resolve().join(', ')`: each resource's name), any type will do; a path that goes
        // on needs a type that has it: the first of the reference's types whose elements the rest of the path names.
        if (rest.length) {
          const targets = element.definition.type.find((t) => t.code === 'Reference')?.targetProfile?.map((p) => p.split('/').pop()!) ?? [];
          const fits = (t: string) => rest.reduce<string | undefined>((on, s) => { const e = on && childElement(on, s.name); return e && !("problem" in e) ? e.type : undefined; }, t) !== undefined;
          const target = targets.find((t) => t !== 'Resource' && fits(t));
          if (!target) return at(rest[0]!.at, `resolve() of ${step.name} leads to ${targets.join(', ') || 'any resource'}: none has ${rest.map((r) => r.name).join('.')}`);
          type = target;
        }
      }
    }
    const leaf = elements[elements.length - 1];
    if (!leaf) return at(parsed.at, 'a path needs at least one element');
    const path: ResolvedPath = { compiled: [...(base?.compiled ?? []), ...compiled], leaf, key: keyParts.join('.'), codes: codeContext(elements), elements };
    let finish: CompiledAlternative['finish'];
    if (parsed.finish?.kind === 'join') finish = { kind: 'join', separator: parsed.finish.separator };
    else if (parsed.finish?.kind === 'memberOf') {
      // `memberOf(%alias)`: the value set's canonical URL from `uris`; `memberOf('url')` as written (a version after `|` kept).
      const valueSet = parsed.finish.alias ? this.uris.get(parsed.finish.valueSet) : parsed.finish.valueSet;
      if (valueSet === undefined) return at(parsed.finish.valueAt, `unknown uris name %${parsed.finish.valueSet}${didYouMean(parsed.finish.valueSet, this.uris.keys())}: declare the value set's canonical URL under \`uris\``);
      if (!valueSet) return at(parsed.finish.valueAt, 'memberOf() needs the canonical URL of a value set');
      finish = { kind: 'memberOf', valueSet };
    } else if (parsed.finish) finish = { kind: parsed.finish.kind };
    return {
      compiled: { ...(base ? { from: base.expression } : {}), steps: compiled, ...(finish ? { finish } : {}) },
      path,
      finish: parsed.finish,
      at: parsed.at,
      writable: !readsResource && (parsed.finish?.kind === 'exists' ? writesExisting(compiled) : !copiesResource && !readOnlyFinish(parsed.finish, leaf.type)),
    };
  }

  private condition(type: string, condition: PathCondition, at: (offset: number, problem: string) => undefined): CompiledCondition | undefined {
    // The left side: an element of the filtered item, or of the resource or patient (`%patient.gender = 'female'`).
    const left = this.elementPath(condition.of ? OUTSIDE_TYPE[condition.of] ?? this.rootType : type, condition.path, at);
    if (!left) return undefined;
    const [steps, element] = left;
    const side = condition.of ? { of: condition.of } : {};
    if (condition.empty) return { steps, ...side, value: '', empty: true };
    if (condition.exists) return { steps, ...side, value: '', exists: true };
    if (!isPrimitive(element.type)) return at(condition.path[0].at, `a where() condition compares a primitive element; ${element.json} is a FHIR ${element.type}`);
    const named = condition.path.map((p) => p.name).join('.');
    if (condition.ageYears) {
      // `age.low.value <= %age_years`: the value of a quantity (an age), compared in years.
      if (!condition.op || jsonTypeOf(element.type) !== 'number') {
        return at(condition.valueAt, `%age_years is a number of years: compare it with <, <=, > or >= to the value of an age (e.g. age.low.value <= %age_years)`);
      }
      const holder = condition.path.length > 1 ? this.elementPath(condition.of ? OUTSIDE_TYPE[condition.of] ?? this.rootType : type, condition.path.slice(0, -1), at)?.[1].type : condition.of ? undefined : type;
      if (element.json !== 'value' || !holder || !QUANTITY_TYPES.includes(holder)) {
        return at(condition.valueAt, `%age_years compares with the value of an age (e.g. age.low.value): ${named} is not the value of a quantity`);
      }
      return { steps, ...side, value: 0, op: condition.op, age: true };
    }
    if (condition.op && jsonTypeOf(element.type) !== 'number') return at(condition.path[0].at, `${named} is a FHIR ${element.type}: ${condition.op} compares numbers`);
    if (condition.valuePath) {
      // `%resource.a.b`, `%patient.a.b`: compared with that element of the resource being read, or of its patient.
      const right = this.elementPath(OUTSIDE_TYPE[condition.valueIn!] ?? this.rootType, condition.valuePath, at);
      if (!right) return undefined;
      const [valueFrom, from] = right;
      if (jsonTypeOf(from.type) !== jsonTypeOf(element.type) || !isPrimitive(from.type)) {
        return at(condition.valueAt, `${element.json} is a FHIR ${element.type}: %${condition.valueIn}.${condition.valuePath.map((p) => p.name).join('.')} (a ${from.type}) does not fit`);
      }
      return { steps, ...side, value: '', valueFrom, valueIn: condition.valueIn, ...(condition.op ? { op: condition.op } : {}) };
    }
    let value = condition.value;
    if (condition.alias !== undefined) {
      const uri = this.uris.get(condition.alias);
      if (uri === undefined) return at(condition.valueAt, `unknown uris name %${condition.alias}${didYouMean(condition.alias, this.uris.keys())}: declare it under \`uris\``);
      value = uri;
    }
    if (condition.op && typeof value !== 'number') return at(condition.valueAt, `${named} is a FHIR ${element.type}: ${condition.op} compares numbers, ${show(value)} is not one`);
    if (condition.op) return { steps, ...side, value, op: condition.op };
    if (typeof value !== jsonTypeOf(element.type)) return at(condition.valueAt, `${element.json} is a FHIR ${element.type}: ${show(value)} does not fit`);
    const problem = codeProblem(value, codeContext([{ ...element, conditions: [] }]));
    if (problem) return at(condition.valueAt, problem);
    return { steps, ...side, value };
  }

  /** A dotted path of plain elements from `type` (a condition's side), checked against the FHIR definitions. */
  private elementPath(type: string, path: PathName[], at: (offset: number, problem: string) => undefined): [CompiledPath, FhirElement] | undefined {
    const steps: CompiledPath = [];
    let element: FhirElement | undefined;
    for (const part of path) {
      const found = childElement(element?.type ?? type, part.name);
      if ('problem' in found) return at(part.at, found.problem);
      element = found;
      steps.push({ json: found.json, isArray: found.isArray, where: [] });
    }
    return [steps, element!];
  }
}

/**
 * Which codes are valid at the end of a path: the required binding of the coded element it ends in
 * (`gender`, or `clinicalStatus` for `clinicalStatus.coding.code`) and the system a `where(system=…)` names.
 */
function codeContext(elements: ResolvedPath['elements']): ResolvedPath['codes'] {
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
