import {
  AndAtom,
  ArithemticOperatorAtom,
  AsAtom,
  ConcatAtom,
  ContainsAtom,
  DotAtom,
  EmptySetAtom,
  EqualsAtom,
  EquivalentAtom,
  evalFhirPathTyped,
  FhirPathAtom,
  FunctionAtom,
  ImpliesAtom,
  InAtom,
  IndexerAtom,
  IsAtom,
  LiteralAtom,
  NotEqualsAtom,
  NotEquivalentAtom,
  OrAtom,
  parseFhirPath,
  SymbolAtom,
  UnaryOperatorAtom,
  XorAtom,
  toJsBoolean,
  toTypedValue,
  tryGetDataType,
  type Atom,
} from '@medplum/core';
import type { Parameters, ParametersParameter, Resource } from '@medplum/fhirtypes';
import { applyPatch, Pointer, type Operation } from 'rfc6902';
import { ApiError, ErrorCode, badRequest } from '../core/errors';
import { decodeUtf8, parseJsonText } from '../core/body-text';

/**
 * FHIR PATCH (R4 http.html#patch): a JSON Patch (RFC 6902, applied with `rfc6902`) or a FHIRPath Patch (a
 * Parameters resource of `operation`s; @medplum/core 4.5.2 has a FHIRPath evaluator but no FHIRPath Patch, so the
 * operations are applied here). Pure functions of the resource: the repository reads, applies, and writes the
 * result as an update (src/fhir/repository.ts `patched`).
 *
 * Answers: a malformed patch document 400; a patch that is well-formed but cannot be applied to this resource (a
 * failing `test`, a path that is not there, an index out of range) 422, as the FHIR specification and RFC 5789
 * §2.2 put it; a patch that would change `id`, `resourceType` or `meta` 400 (those are the server's).
 */
export type Patch = { kind: 'json-patch'; operations: Operation[] } | { kind: 'fhirpath-patch'; operations: FhirPathOperation[] };

export const JSON_PATCH = 'application/json-patch+json';

/** The most operations one patch may hold (far beyond real patches; a bound on the work one request makes). */
export const MAX_PATCH_OPERATIONS = 1000;
/** How much one JSON Patch may copy in all (the body limit bounds what the other operations add). */
const MAX_COPIED_CHARACTERS = 16 * 1024 * 1024;
/** How many items one FHIRPath Patch may test with `where(…)` in all (1000 operations over lists of 10,000 would be 10^7). */
const MAX_EVALUATIONS = 100_000;
/** The longest JSON Pointer or FHIRPath path accepted. */
const MAX_PATH_LENGTH = 1000;
/** The most steps (`/` segments, `.` steps) one path may take: as deep as a resource may nest. */
const MAX_PATH_STEPS = 64;
/** Keys that are never FHIR elements and would reach JavaScript's object machinery. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

const JSON_PATCH_OPS = new Set(['add', 'remove', 'replace', 'move', 'copy', 'test']);
const FHIRPATH_OPS = new Set(['add', 'insert', 'delete', 'replace', 'move']);

/** The patch a request body holds, by its media type: a JSON array as JSON Patch, a Parameters resource as FHIRPath Patch. */
export function parsePatch(mediaType: string, body: unknown): Patch {
  if (mediaType === JSON_PATCH) return { kind: 'json-patch', operations: jsonPatchOperations(body) };
  if (Array.isArray(body)) throw badRequest(`A JSON Patch is sent as ${JSON_PATCH}`);
  const parameters = body as Parameters | undefined;
  if (!parameters || typeof parameters !== 'object' || parameters.resourceType !== 'Parameters')
    throw badRequest(`PATCH takes a JSON Patch (${JSON_PATCH}, an array of operations) or a FHIRPath Patch (application/fhir+json, a Parameters resource)`);
  return { kind: 'fhirpath-patch', operations: fhirPathOperations(parameters) };
}

/** A transaction entry's patch: a Binary holding a JSON Patch (base64), or a Parameters resource (FHIRPath Patch). */
export function patchOfEntry(resource: Resource | undefined): Patch {
  if (resource?.resourceType === 'Binary') {
    if (resource.contentType !== JSON_PATCH) throw badRequest(`A PATCH entry's Binary must have contentType ${JSON_PATCH}`);
    if (typeof resource.data !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(resource.data)) throw badRequest("A PATCH entry's Binary needs base64 data");
    return parsePatch(JSON_PATCH, parseJsonText(decodeUtf8(Buffer.from(resource.data, 'base64'))));
  }
  if (resource?.resourceType === 'Parameters') return parsePatch('application/fhir+json', resource);
  throw badRequest('A PATCH entry holds a Binary (a JSON Patch) or a Parameters resource (a FHIRPath Patch)');
}

/** Applies the patch to a copy of `current`; returns the patched copy. */
export function applyResourcePatch<T extends Resource>(current: T, patch: Patch): T {
  const copy = structuredClone(current);
  const result = patch.kind === 'json-patch' ? applyJsonPatch(copy, patch.operations) : applyFhirPathPatch(copy, patch.operations);
  const fixed = (r: Resource) => JSON.stringify([r.resourceType, r.id, r.meta ?? null]);
  if (!result || typeof result !== 'object' || Array.isArray(result) || fixed(result as Resource) !== fixed(current))
    throw badRequest('A patch may not change resourceType, id or meta: the server keeps them');
  return result as T;
}

// ------------------------------------------------------------------ JSON Patch

function jsonPatchOperations(body: unknown): Operation[] {
  if (!Array.isArray(body)) throw badRequest('A JSON Patch is an array of operations');
  if (body.length === 0) throw badRequest('A JSON Patch needs at least one operation');
  if (body.length > MAX_PATCH_OPERATIONS) throw badRequest(`A patch may hold at most ${MAX_PATCH_OPERATIONS} operations`);
  body.forEach((op: unknown, i) => {
    const where = `operation ${i}`;
    if (!op || typeof op !== 'object' || Array.isArray(op)) throw badRequest(`${where}: an operation is an object`);
    const { op: name, path, from } = op as Record<string, unknown>;
    if (typeof name !== 'string' || !JSON_PATCH_OPS.has(name)) throw badRequest(`${where}: op must be one of ${[...JSON_PATCH_OPS].join(', ')}`);
    checkPointer(path, `${where}: path`);
    if (name === 'move' || name === 'copy') checkPointer(from, `${where}: from`);
    if ((name === 'add' || name === 'replace' || name === 'test') && !('value' in op)) throw badRequest(`${where}: ${name} needs a value`);
    checkKeys((op as { value?: unknown }).value, `${where}: value`);
  });
  return body as Operation[];
}

function checkPointer(pointer: unknown, where: string): void {
  if (typeof pointer !== 'string' || (pointer !== '' && !pointer.startsWith('/'))) throw badRequest(`${where} must be a JSON Pointer (/a/0/b)`);
  if (pointer.length > MAX_PATH_LENGTH) throw badRequest(`${where} is longer than ${MAX_PATH_LENGTH} characters`);
  const tokens = pointer.split('/').slice(1);
  if (tokens.length > MAX_PATH_STEPS) throw badRequest(`${where} has more than ${MAX_PATH_STEPS} steps`);
  const bad = tokens.map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~')).find((t) => FORBIDDEN_KEYS.has(t));
  if (bad) throw badRequest(`${where}: "${bad}" is not a FHIR element`);
}

/**
 * No `__proto__`, `constructor` or `prototype` key anywhere in a value: copying it would turn the key into the copy's
 * prototype and drop it without a word (an explicit stack: the body reader bounds the depth).
 */
function checkKeys(value: unknown, where: string): void {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (!v || typeof v !== 'object') continue;
    for (const [k, item] of Object.entries(v)) {
      if (FORBIDDEN_KEYS.has(k)) throw badRequest(`${where}: "${k}" is not a FHIR element`);
      stack.push(item);
    }
  }
}

function applyJsonPatch(resource: Resource, operations: Operation[]): unknown {
  // One operation at a time, on the copy (dropped on any failure): rfc6902 would go on after a failed one.
  const holder = { resource };
  let copied = 0;
  for (const [i, op] of operations.entries()) {
    const where = `operation ${i} (${op.op} ${op.path})`;
    if (op.op === 'copy') {
      // `copy` is the one operation whose output outgrows its input (each can double the resource): bounded.
      copied += JSON.stringify(Pointer.fromJSON(`/resource${op.from}`).get(holder) ?? null).length;
      if (copied > MAX_COPIED_CHARACTERS) throw badRequest(`${where}: the patch copies more than ${MAX_COPIED_CHARACTERS} characters`);
    }
    const err = applyPatch(holder, [prefixed(op)])[0];
    if (err) throw err.name === 'InvalidOperationError' ? badRequest(`${where}: ${describe(err)}`) : unprocessable(`${where}: ${describe(err)}`);
  }
  return holder.resource;
}

/** Each pointer under `/resource` of a holder: a patch replacing the whole document (`""`) is then an ordinary change. */
function prefixed(op: Operation): Operation {
  const out = { ...op, path: `/resource${op.path}` } as Operation;
  if ('from' in op) (out as { from: string }).from = `/resource${op.from}`;
  return out;
}

function describe(err: Error): string {
  if (err.name === 'TestError') return 'the test failed: the value there is not the one given';
  if (err.name === 'MissingError') return 'nothing is at that path';
  return err.message.replace(/\/resource/g, '');
}

function unprocessable(message: string): ApiError {
  return new ApiError(422, ErrorCode.validationFailed, `The patch cannot be applied: ${message}`);
}

// ------------------------------------------------------------------ FHIRPath Patch

interface FhirPathOperation {
  type: 'add' | 'insert' | 'delete' | 'replace' | 'move';
  path: string;
  name?: string;
  value?: { json: unknown; type?: string };
  index?: number;
  source?: number;
  destination?: number;
}

/** The Parameters' operations: 400 on any malformed one, before anything is applied. */
function fhirPathOperations(parameters: Parameters): FhirPathOperation[] {
  const list = parameters.parameter;
  if (!Array.isArray(list) || list.length === 0) throw badRequest('A FHIRPath Patch needs at least one operation parameter');
  if (list.length > MAX_PATCH_OPERATIONS) throw badRequest(`A patch may hold at most ${MAX_PATCH_OPERATIONS} operations`);
  return list.map((p, i) => fhirPathOperation(p, i));
}

function fhirPathOperation(parameter: ParametersParameter, i: number): FhirPathOperation {
  const where = `operation ${i}`;
  if (!parameter || typeof parameter !== 'object' || parameter.name !== 'operation' || !Array.isArray(parameter.part))
    throw badRequest(`${where}: each parameter is named "operation" and has parts`);
  const parts = new Map<string, ParametersParameter>();
  for (const part of parameter.part) {
    if (!part || typeof part.name !== 'string') throw badRequest(`${where}: each part has a name`);
    if (parts.has(part.name)) throw badRequest(`${where}: part "${part.name}" is given twice`);
    parts.set(part.name, part);
  }
  const type = parts.get('type')?.valueCode;
  if (typeof type !== 'string' || !FHIRPATH_OPS.has(type)) throw badRequest(`${where}: type must be one of ${[...FHIRPATH_OPS].join(', ')}`);
  const path = parts.get('path')?.valueString;
  if (typeof path !== 'string' || !path) throw badRequest(`${where}: path (valueString) is required`);
  if (path.length > MAX_PATH_LENGTH) throw badRequest(`${where}: path is longer than ${MAX_PATH_LENGTH} characters`);
  const integer = (name: string) => {
    const v = parts.get(name)?.valueInteger;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw badRequest(`${where}: ${name} (a valueInteger of 0 or more) is required for ${type}`);
    return v;
  };
  const op: FhirPathOperation = { type: type as FhirPathOperation['type'], path };
  if (type === 'add') {
    const name = parts.get('name')?.valueString;
    if (typeof name !== 'string' || !/^[A-Za-z][A-Za-z0-9]*$/.test(name) || FORBIDDEN_KEYS.has(name)) throw badRequest(`${where}: name (the element to add) is required`);
    op.name = name;
  }
  if (type === 'add' || type === 'insert' || type === 'replace') {
    const value = parts.get('value');
    if (!value) throw badRequest(`${where}: value is required for ${type}`);
    op.value = valueOf(value, `${where}: value`);
  }
  if (type === 'insert') op.index = integer('index');
  if (type === 'move') {
    op.source = integer('source');
    op.destination = integer('destination');
  }
  return op;
}

/** A value part: its one `value[x]` (the suffix names its type), or its own parts as an object (a complex value). */
function valueOf(part: ParametersParameter, where: string): { json: unknown; type?: string } {
  const keys = Object.keys(part).filter((k) => /^value[A-Z]/.test(k));
  if (keys.length > 1) throw badRequest(`${where} has more than one value[x]`);
  if (keys.length === 1) {
    const json = (part as unknown as Record<string, unknown>)[keys[0]!];
    checkKeys(json, where);
    return { json, type: keys[0]!.slice('value'.length) };
  }
  if (!Array.isArray(part.part) || !part.part.length) throw badRequest(`${where} needs a value[x] or parts`);
  const out: Record<string, unknown> = {};
  for (const child of part.part) {
    if (!child || typeof child.name !== 'string' || !/^[A-Za-z][A-Za-z0-9]*$/.test(child.name) || FORBIDDEN_KEYS.has(child.name))
      throw badRequest(`${where}: each part names an element`);
    const { json } = valueOf(child, `${where}.${child.name}`);
    // A repeated part name is a list (FHIRPath Patch: "one part for each value of a repeating element").
    out[child.name] = child.name in out ? ([] as unknown[]).concat(out[child.name], json) : json;
  }
  return { json: out };
}

/** Where an element sits: its parent object, its key, and its position when the key holds a list. */
interface Location {
  parent: Record<string, unknown>;
  key: string;
  /** The element's name in the path: `value` for the key `valueQuantity` of a choice element. */
  name: string;
  index?: number;
  /** The FHIR type of the element (from the definitions), when known. */
  type?: string;
}
/** The resource itself: the one node that has no parent. */
type Node = Location | { root: Resource; type: string };

/** A FHIRPath Patch operation that cannot be done: 400 (the path is not one a patch may use) or 422 (not on this resource). */
class PatchFailure extends Error {
  constructor(
    readonly status: 400 | 422,
    message: string,
  ) {
    super(message);
  }
}
const notApplicable = (message: string) => new PatchFailure(422, message);
const unsupported = (message: string) => new PatchFailure(400, message);

/** The resource being patched, and how many `where(…)` criteria the patch has evaluated so far. */
interface Target {
  resource: Resource;
  evaluations: number;
}

function applyFhirPathPatch(resource: Resource, operations: FhirPathOperation[]): Resource {
  const target: Target = { resource, evaluations: 0 };
  operations.forEach((op, i) => {
    try {
      applyOperation(target, op);
    } catch (err) {
      if (!(err instanceof PatchFailure)) throw err;
      const message = `operation ${i} (${op.type} ${op.path}): ${err.message}`;
      throw err.status === 422 ? unprocessable(message) : badRequest(message);
    }
  });
  return resource;
}

function applyOperation(target: Target, op: FhirPathOperation): void {
  const nodes = op.type === 'insert' || op.type === 'move' ? [] : locate(parsePath(op.path), target);
  const one = (what: string) => {
    if (nodes.length !== 1) throw notApplicable(`the path must name exactly one ${what}; it names ${nodes.length}`);
    return nodes[0]!;
  };
  switch (op.type) {
    case 'add': {
      const node = one('element');
      const container = valueAt(node);
      if (!container || typeof container !== 'object' || Array.isArray(container)) throw notApplicable('the path names no element that can hold another');
      const element = elementOf(node.type, op.name!);
      if (element?.choice && !op.value!.type) throw unsupported(`${op.name} is a choice element: give its value as value[x], which names the type`);
      const key = element?.choice ? `${op.name}${capitalised(op.value!.type!)}` : op.name!;
      const target = container as Record<string, unknown>;
      if (element?.isArray) target[key] = [...((Array.isArray(target[key]) ? target[key] : []) as unknown[]), op.value!.json];
      else target[key] = op.value!.json;
      return;
    }
    case 'insert': {
      const list = listAt(op.path, target);
      if (op.index! > list.values.length) throw notApplicable(`index ${op.index} is beyond the end of the list (${list.values.length} items)`);
      list.values.splice(op.index!, 0, op.value!.json);
      list.store();
      return;
    }
    case 'move': {
      const list = listAt(op.path, target);
      const n = list.values.length;
      if (op.source! >= n || op.destination! >= n) throw notApplicable(`source and destination must be under the list's length (${n})`);
      const [moved] = list.values.splice(op.source!, 1);
      list.values.splice(op.destination!, 0, moved);
      list.store();
      return;
    }
    case 'replace': {
      const node = one('element');
      if (!('parent' in node)) throw unsupported('the resource itself cannot be replaced');
      const type = op.value!.type;
      if (node.key !== node.name && type && node.index === undefined) {
        // A choice element takes the type of its new value (Observation.value: valueQuantity to valueString).
        delete node.parent[node.key];
        node.parent[`${node.name}${capitalised(type)}`] = op.value!.json;
      } else if (node.index === undefined) node.parent[node.key] = op.value!.json;
      else (node.parent[node.key] as unknown[])[node.index] = op.value!.json;
      return;
    }
    case 'delete': {
      // Deleting what is not there changes nothing (as in HAPI); several matches are ambiguous.
      if (nodes.length === 0) return;
      const node = one('element');
      if (!('parent' in node)) throw unsupported('the resource itself cannot be deleted');
      if (node.index === undefined) delete node.parent[node.key];
      else {
        const list = node.parent[node.key] as unknown[];
        list.splice(node.index, 1);
        if (!list.length) delete node.parent[node.key];
      }
    }
  }
}

function parsePath(path: string): Atom {
  if (path.split('.').length > MAX_PATH_STEPS + 1) throw unsupported(`the path has more than ${MAX_PATH_STEPS} steps`);
  try {
    return parseFhirPath(path);
  } catch (err) {
    throw unsupported(`the path is not FHIRPath: ${(err as Error).message.slice(0, 200)}`);
  }
}

/**
 * The elements a path names, as locations that can be changed: paths of element names, indexers (`[n]`) and the
 * filters `where(…)`, `first()`, `last()` (what FHIRPath Patch paths use). Anything else is a 400.
 */
function locate(atom: Atom, target: Target): Node[] {
  const resource = target.resource;
  if (atom instanceof FhirPathAtom) return locate(atom.child, target);
  if (atom instanceof SymbolAtom) {
    if (atom.name === resource.resourceType) return [{ root: resource, type: resource.resourceType }];
    return childrenOf({ root: resource, type: resource.resourceType }, atom.name);
  }
  if (atom instanceof DotAtom && atom.right instanceof SymbolAtom) {
    const name = atom.right.name;
    return locate(atom.left, target).flatMap((n) => childrenOf(n, name));
  }
  if (atom instanceof DotAtom && atom.right instanceof FunctionAtom) {
    const fn = atom.right;
    const nodes = locate(atom.left, target);
    if (fn.name === 'first' && !fn.args.length) return nodes.slice(0, 1);
    if (fn.name === 'last' && !fn.args.length) return nodes.slice(-1);
    if (fn.name === 'where' && fn.args.length === 1) {
      checkCriteria(fn.args[0]!);
      const criteria = new FhirPathAtom(fn.args[0]!.toString(), fn.args[0]!);
      return nodes.filter((n) => {
        if (++target.evaluations > MAX_EVALUATIONS) throw unsupported(`the patch evaluates where(…) more than ${MAX_EVALUATIONS} times`);
        try {
          return toJsBoolean(evalFhirPathTyped(criteria, [{ ...toTypedValue(valueAt(n)), ...(n.type ? { type: n.type } : {}) }]));
        } catch (err) {
          throw unsupported(`where(…) could not be evaluated: ${(err as Error).message.slice(0, 200)}`);
        }
      });
    }
    throw unsupported(`the function ${fn.name}() is not supported in a patch path (where, first, last are)`);
  }
  if (atom instanceof IndexerAtom) {
    const nodes = locate(atom.left, target);
    const index = Number(atom.expr.toString());
    if (!Number.isInteger(index) || index < 0) throw unsupported('an indexer must be a whole number');
    return nodes[index] ? [nodes[index]!] : [];
  }
  throw unsupported(`the path may use element names, [n], where(…), first() and last() only, not "${atom.toString().slice(0, 100)}"`);
}

/**
 * Functions a `where(…)` criterion may call: each does work bounded by the size of what it is given, so with element
 * names, literals, comparisons and boolean operators a criterion costs at most a few passes over the resource. Not
 * `select`, `repeat`, `descendants`, `aggregate`, `combine`, unions, `iif` or regular expressions: nested, they
 * multiply (six nested selects over a ten-item union are 10^6 items, a blocked event loop).
 */
const CRITERIA_FUNCTIONS = new Set(['exists', 'empty', 'not', 'first', 'last', 'count', 'where', 'startsWith', 'endsWith', 'contains', 'lower', 'upper', 'length', 'hasValue']);
/** The most nodes a criterion's expression may have (real criteria have a handful). */
const MAX_CRITERIA_NODES = 64;

/** Refuses (400) a `where(…)` criterion outside the bounded subset above, before it is evaluated. */
function checkCriteria(criterion: Atom): void {
  let nodes = 0;
  const visit = (atom: Atom): void => {
    if (++nodes > MAX_CRITERIA_NODES) throw unsupported(`a where(…) criterion may have at most ${MAX_CRITERIA_NODES} terms`);
    if (atom instanceof FhirPathAtom) return visit(atom.child);
    if (atom instanceof SymbolAtom || atom instanceof LiteralAtom || atom instanceof EmptySetAtom) return;
    if (atom instanceof UnaryOperatorAtom) return visit(atom.child);
    if (atom instanceof IndexerAtom) return (visit(atom.left), visit(atom.expr));
    if (atom instanceof FunctionAtom) {
      if (!CRITERIA_FUNCTIONS.has(atom.name)) throw unsupported(`the function ${atom.name}() is not supported in a where(…) criterion (${[...CRITERIA_FUNCTIONS].join(', ')} are)`);
      return atom.args.forEach(visit);
    }
    const infix = [DotAtom, EqualsAtom, NotEqualsAtom, EquivalentAtom, NotEquivalentAtom, AndAtom, OrAtom, XorAtom, ImpliesAtom, ArithemticOperatorAtom, IsAtom, AsAtom, InAtom, ContainsAtom, ConcatAtom];
    if (infix.some((kind) => atom instanceof kind)) {
      const { left, right } = atom as DotAtom;
      return (visit(left), visit(right));
    }
    throw unsupported(`a where(…) criterion may use element names, literals, comparisons, and/or/not and ${[...CRITERIA_FUNCTIONS].join(', ')}, not "${atom.toString().slice(0, 100)}"`);
  };
  visit(criterion);
}

/** The element `name` of the value at `node`, one location per item of a list; a choice element (`value`) by its one key (`valueQuantity`). */
function childrenOf(node: Node, name: string): Location[] {
  if (FORBIDDEN_KEYS.has(name)) throw unsupported(`"${name}" is not a FHIR element`);
  const value = valueAt(node);
  if (!value || typeof value !== 'object' || Array.isArray(value)) return [];
  const obj = value as Record<string, unknown>;
  const element = elementOf(node.type, name);
  const key = Object.hasOwn(obj, name) ? name : element?.choice ? Object.keys(obj).find((k) => k.startsWith(name) && /^[A-Z]/.test(k.slice(name.length))) : undefined;
  if (key === undefined || !Object.hasOwn(obj, key)) return [];
  const type = element?.choice ? element.types.find((t) => t.toLowerCase() === key.slice(name.length).toLowerCase()) : element?.types[0];
  const v = obj[key];
  return Array.isArray(v) ? v.map((_, index) => ({ parent: obj, key, name, index, type })) : [{ parent: obj, key, name, type }];
}

function valueAt(node: Node): unknown {
  if ('root' in node) return node.root;
  const v = node.parent[node.key];
  return node.index === undefined ? v : (v as unknown[])[node.index];
}

/** The list a path names (`Patient.identifier`: the element `identifier` of one object); insert starts one that is absent. */
function listAt(path: string, target: Target): { values: unknown[]; store(): void } {
  const atom = parsePath(path);
  const last = atom instanceof FhirPathAtom ? atom.child : atom;
  if (!(last instanceof DotAtom && last.right instanceof SymbolAtom)) throw unsupported('the path must name a list by its element name (e.g. Patient.identifier)');
  const name = last.right.name;
  if (FORBIDDEN_KEYS.has(name)) throw unsupported(`"${name}" is not a FHIR element`);
  const parents = locate(last.left, target);
  const parent = parents.length === 1 ? valueAt(parents[0]!) : undefined;
  if (!parent || typeof parent !== 'object' || Array.isArray(parent)) throw notApplicable(`the path must name the list of exactly one element; it names ${parents.length}`);
  const obj = parent as Record<string, unknown>;
  const current = Object.hasOwn(obj, name) ? obj[name] : [];
  if (!Array.isArray(current)) throw notApplicable('the path names an element that is not a list');
  const values = [...current];
  return { values, store: () => void (values.length ? (obj[name] = values) : delete obj[name]) };
}

/** The definition of element `name` of FHIR type `type`: whether it repeats, whether it is a choice, its type. */
function elementOf(type: string | undefined, name: string): { isArray: boolean; choice: boolean; types: string[] } | undefined {
  const schema = type ? tryGetDataType(type) : undefined;
  if (!schema) return undefined;
  const element = schema.elements[name] ?? schema.elements[`${name}[x]`];
  return element && { isArray: !!element.isArray, choice: !schema.elements[name], types: element.type.map((t) => t.code) };
}

const capitalised = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
