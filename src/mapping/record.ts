import { getSearchParameters } from '@medplum/core';
import { isSeq, type Node } from 'yaml';
import { DATA_CLASSES, dataClassOf } from '../core/data-classes';
import { MappingError } from './errors';
import type { ConnectField } from './runtime';
import { didYouMean } from './suggest';
import { keyOf, type YamlSource } from './yaml-source';
import type { RecordDeclaration } from './record-declaration';

export type { RecordDeclaration } from './record-declaration';

const RECORD_KEYS = ['type', 'shape', 'class', 'search', 'except', 'date', 'tag', 'description'] as const;
const TYPE_NAME = /^[a-z][a-z0-9_]{0,39}$/;
const show = (v: string) => `\`${v}\``;

/** Compiles the `record:` section; problems are reported on `source`. */
export function readRecordSection(source: YamlSource, node: Node, resourceType: string, fields: Map<string, { declared: ConnectField }>): RecordDeclaration | undefined {
  const pairs = source.mapping(node, '`record`', RECORD_KEYS, ['type', 'class', 'date']);
  if (!pairs) return undefined;
  const value = (key: string) => pairs.find((p) => keyOf(p) === key)?.value ?? undefined;
  const before = source.problems.length;

  const typeNode = value('type');
  const type = typeNode && source.text(typeNode, '`type`');
  if (type !== undefined && (!TYPE_NAME.test(type) || type === 'all')) {
    source.problem(typeNode, `record type ${show(type)}: lower-case letters, digits and _ (as in \`lab_results\`), and not \`all\``);
  }
  const shapeNode = value('shape');
  const shape = shapeNode && source.text(shapeNode, '`shape`');
  if (shape !== undefined && !/^[A-Z][A-Za-z0-9]{0,39}$/.test(shape)) source.problem(shapeNode, `shape ${show(shape)}: a name in CamelCase, as in \`LabResult\``);

  const classNode = value('class');
  const dataClass = classNode && source.text(classNode, '`class`');
  const policyClass = dataClassOf(resourceType);
  if (dataClass !== undefined && !(DATA_CLASSES as readonly string[]).includes(dataClass)) {
    source.problem(classNode, `unknown data class ${show(dataClass)}${didYouMean(dataClass, DATA_CLASSES)}; classes: ${DATA_CLASSES.join(', ')}`);
  } else if (dataClass !== undefined && dataClass !== policyClass) {
    source.problem(classNode, `${resourceType} is in the class ${show(policyClass)} (the access policy, src/core/scopes.ts): consent to that class is what covers these records`);
  }

  const params = getSearchParameters(resourceType) ?? {};
  const patientParam = params.patient ? 'patient' : params.subject ? 'subject' : undefined;
  if (!patientParam) source.problem(node, `${resourceType} has no search parameter \`patient\` or \`subject\`: its records cannot be found by the patient`);
  // One query, or a list of them: the resources any of them selects (lab results by their category, or by the
  // laboratory report that lists them). Each is a source of its own, merged by date: write them so none overlap.
  const searchNode = value('search');
  const queryNodes = searchNode && isSeq(searchNode) ? (searchNode.items as Node[]) : searchNode ? [searchNode] : [];
  if (searchNode && isSeq(searchNode) && !queryNodes.length) source.problem(searchNode, '`search` lists no query: leave it out to read every resource of the type');
  const queries = (queryNodes.length ? queryNodes : [undefined]).map((queryNode) => {
    const query: Record<string, string> = {};
    for (const pair of (queryNode && source.mapping(queryNode, '`search`')) ?? []) {
      const name = keyOf(pair);
      const code = name.split(':')[0]!;
      if (name.startsWith('_has:')) {
        // `_has:DiagnosticReport:result:category`: selected by what refers to them (the store checks the rest).
        if (name.split(':').length < 4) source.problem(pair.key, `${show(name)}: _has is _has:ResourceType:referenceParameter:searchParameter`);
      } else if (code === 'patient' || code === 'subject' || code.startsWith('_')) source.problem(pair.key, `${show(code)} is set by the records route (the patient, the order, the page): select by what the resources are`);
      else if (!params[code]) source.problem(pair.key, `${resourceType} has no search parameter ${show(code)}${didYouMean(code, Object.keys(params))}`);
      const items = isSeq(pair.value) ? (pair.value.items as Node[]) : [pair.value];
      const values = items.map((item) => source.text(item, `the value of ${show(name)}`));
      if (values.every((v) => v !== undefined)) query[name] = values.join(',');
    }
    return query;
  });

  // Record types whose selection this map's does not read (checkRecordTypes: they exist, read this resource type, and
  // none excepts back): what another type's search selects is that type's record, not this one's as well.
  const exceptNode = value('except');
  const exceptNodes = exceptNode && isSeq(exceptNode) ? (exceptNode.items as Node[]) : exceptNode ? [exceptNode] : [];
  const except = exceptNodes.flatMap((n) => {
    const name = source.text(n, 'a record type under `except`');
    if (name !== undefined && !TYPE_NAME.test(name)) source.problem(n, `${show(name)} is no record type's name (lower-case letters, digits and _, as in \`lab_results\`)`);
    if (name === undefined) return [];
    const [line, column] = source.position(n);
    return [{ type: name, at: { file: source.file, line, column } }];
  });

  let dateParam: string | undefined;
  let dateField: string | undefined;
  const datePairs = source.mapping(value('date'), '`date`', ['search', 'field'], ['search', 'field']) ?? [];
  for (const pair of datePairs) {
    const text = source.text(pair.value, `\`date.${keyOf(pair)}\``);
    if (text === undefined) continue;
    if (keyOf(pair) === 'search') {
      if (params[text]?.type !== 'date') {
        const dates = Object.keys(params).filter((p) => params[p]!.type === 'date');
        source.problem(pair.value, `${resourceType} has no date search parameter ${show(text)}${didYouMean(text, dates)}; its date parameters: ${dates.join(', ')}`);
      } else dateParam = text;
    } else {
      const field = fields.get(text)?.declared;
      if (!field) source.problem(pair.value, `${show(text)} is not a field declared under \`connect\`${didYouMean(text, fields.keys())}`);
      else if (field.type !== 'date' && field.type !== 'date-time') source.problem(pair.value, `${show(text)} is a ${field.type}: records are ordered by a date or date-time field`);
      else dateField = text;
    }
  }

  let tag: Record<string, string> | undefined;
  const tagNode = value('tag');
  for (const pair of (tagNode && source.mapping(tagNode, '`tag`')) ?? []) {
    if (fields.has(keyOf(pair))) source.problem(pair.key, `${show(keyOf(pair))} is a Connect field of this map: a tag adds a field of its own`);
    const text = source.text(pair.value, `tag ${show(keyOf(pair))}`);
    if (text !== undefined) (tag ??= {})[keyOf(pair)] = text;
  }

  if (source.problems.length > before || !type || !dataClass || !patientParam || !dateParam || !dateField) return undefined;
  const [line, column] = source.position(typeNode);
  return {
    type, shape, dataClass, queries, patientParam, dateParam, dateField, tag,
    ...(except.length ? { except } : {}),
    at: { file: source.file, line, column },
  };
}

/**
 * What no single map can check: each record type has one map naming its shape, shape names are unique, and the
 * other maps of a type fit it (same tags; a date field of the shape, by which the merged list is ordered).
 */
export function checkRecordTypes(maps: Iterable<{ name: string; resourceType: string; fields: string[]; declared: readonly ConnectField[]; record?: RecordDeclaration }>): MappingError[] {
  const problems: MappingError[] = [];
  const at = (d: RecordDeclaration, problem: string) => problems.push(new MappingError(d.at.file, d.at.line, d.at.column, problem));
  const byType = new Map<string, Array<{ name: string; resourceType: string; fields: string[]; declared: readonly ConnectField[]; record: RecordDeclaration }>>();
  for (const m of maps) if (m.record) byType.set(m.record.type, [...(byType.get(m.record.type) ?? []), { ...m, record: m.record }]);
  const shapes = new Map<string, string>();
  for (const [type, declared] of byType) {
    const primary = declared.filter((m) => m.record.shape);
    if (primary.length !== 1) {
      for (const m of primary.length ? primary.slice(1) : declared)
        at(m.record, primary.length ? `record type ${show(type)} has its shape from the map ${show(primary[0]!.name)}: give \`shape\` in one map of a type` : `record type ${show(type)}: no map of it gives its \`shape\` (the name of its fields in the OpenAPI document)`);
      continue;
    }
    const main = primary[0]!;
    const shape = main.record.shape!;
    if (shapes.has(shape)) at(main.record, `the shape ${show(shape)} is already the record type ${show(shapes.get(shape)!)}'s`);
    shapes.set(shape, type);
    const tags = (m: { record: RecordDeclaration }) => Object.keys(m.record.tag ?? {}).sort().join(', ');
    for (const m of declared) {
      if (m === main) continue;
      if (m.record.dataClass !== main.record.dataClass) at(m.record, `record type ${show(type)} is in the class ${show(main.record.dataClass)} (map ${show(main.name)}): every map of a type must be`);
      if (!main.fields.includes(m.record.dateField)) at(m.record, `${show(m.record.dateField)} is not a field of the shape ${show(shape)} (map ${show(main.name)}): records of several maps are ordered by a field of the shape`);
      if (tags(m) !== tags(main)) at(m.record, `the maps of record type ${show(type)} must give the same \`tag\` names (map ${show(main.name)}: ${tags(main) || 'none'})`);
      // Its records are published in the shape: a value the shape does not allow would break it (422 on write-back, a client's enum).
      for (const field of m.declared) {
        const allowed = main.declared.find((f) => f.name === field.name)?.values;
        const outside = allowed && (field.values ?? []).filter((v) => !allowed.includes(v));
        if (outside?.length)
          at(m.record, `${show(field.name)} may be ${outside.map((v) => show(String(v))).join(', ')}, which the shape ${show(shape)} (map ${show(main.name)}) does not allow: read them as its values (\`read\`) or add them there`);
      }
    }
  }
  problems.push(...checkExcepts(byType));
  return problems;
}

/**
 * Each `except` names another record type that reads the map's resource type, and no type excepts, through others,
 * one that excepts it: a resource both select would then be read by neither.
 */
function checkExcepts(byType: Map<string, Array<{ name: string; resourceType: string; record: RecordDeclaration }>>): MappingError[] {
  const problems: MappingError[] = [];
  const excepted = (type: string) => (byType.get(type) ?? []).flatMap((m) => (m.record.except ?? []).map((e) => e.type));
  for (const [type, declared] of byType)
    for (const m of declared)
      for (const e of m.record.except ?? []) {
        const problem = (text: string) => problems.push(new MappingError(e.at.file, e.at.line, e.at.column, text));
        const reads = byType.get(e.type);
        if (!reads) problem(`no map declares the record type ${show(e.type)}${didYouMean(e.type, byType.keys())}`);
        else if (e.type === type) problem(`a record type cannot except itself`);
        else if (!reads.some((other) => other.resourceType === m.resourceType)) problem(`the record type ${show(e.type)} reads no ${m.resourceType}: there is nothing of it to except`);
        else {
          // Depth-first through the types e.type excepts: reaching this type is a cycle.
          const seen = new Set<string>();
          const reaches = (from: string): boolean => from === type || (!seen.has(from) && (seen.add(from), excepted(from).some(reaches)));
          if (reaches(e.type)) problem(`${show(e.type)} excepts ${show(type)} (through the types it excepts): a resource both select would be read by neither`);
        }
      }
  return problems;
}
