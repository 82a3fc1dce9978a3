import { getDataType, type InternalSchemaElement } from '@medplum/core';
import { closest } from './suggest';

/** One element of a FHIR type, as a map path uses it. */
export interface FhirElement {
  /** The JSON property: the element name, with a choice type resolved (`onset[x]` + dateTime = `onsetDateTime`). */
  json: string;
  /** Its type code: `string`, `code`, `CodeableConcept`, or a backbone type such as `CompositionSection`. */
  type: string;
  isArray: boolean;
  definition: InternalSchemaElement;
}

export const isPrimitive = (type: string): boolean => /^[a-z]/.test(type);

const capitalise = (s: string) => s[0].toUpperCase() + s.slice(1);

/** Element names a path may use on a type: choice elements are offered with each of their types. */
function elementNames(typeName: string): string[] {
  const names: string[] = [];
  for (const [key, definition] of Object.entries(getDataType(typeName).elements)) {
    if (key.endsWith('[x]')) for (const t of definition.type) names.push(key.slice(0, -3) + capitalise(t.code));
    else names.push(key);
  }
  return names;
}

/** The element `name` of `typeName`, or what is wrong with it (with a "did you mean"). */
export function childElement(typeName: string, name: string): FhirElement | { problem: string } {
  if (isPrimitive(typeName)) {
    return { problem: `\`${name}\`: the element before it is a FHIR ${typeName}, which has no elements` };
  }
  const elements = getDataType(typeName).elements;
  // `_value`: the id and extensions of the primitive `value` (FHIR JSON), e.g. FHIR's quantity-precision extension.
  const primitive = name.startsWith('_') ? elements[name.slice(1)] : undefined;
  if (primitive && isPrimitive(primitive.type[0].code) && !name.endsWith('[x]')) {
    return { json: name, type: 'Element', isArray: primitive.isArray ?? false, definition: primitive };
  }
  const direct = elements[name];
  if (direct && !name.endsWith('[x]')) {
    return { json: name, type: direct.type[0].code, isArray: direct.isArray ?? false, definition: direct };
  }
  for (const [key, definition] of Object.entries(elements)) {
    if (!key.endsWith('[x]')) continue;
    const prefix = key.slice(0, -3);
    if (name === prefix || name === key) {
      const choices = definition.type.map((t) => prefix + capitalise(t.code));
      return { problem: `\`${name}\` has several types: write one of ${choices.map((c) => `\`${c}\``).join(', ')}` };
    }
    if (name.startsWith(prefix)) {
      const type = definition.type.find((t) => prefix + capitalise(t.code) === name);
      if (type) return { json: name, type: type.code, isArray: definition.isArray ?? false, definition };
    }
  }
  const suggestion = closest(name, elementNames(typeName));
  return {
    problem: `unknown FHIR element \`${name}\` in ${typeName}${suggestion ? ` (did you mean \`${suggestion}\`?)` : ''}`,
  };
}

/** JSON value type of a FHIR primitive: what a fixed value or value-table cell must be. */
export function jsonTypeOf(fhirType: string): 'string' | 'number' | 'boolean' {
  if (fhirType === 'boolean') return 'boolean';
  if (['integer', 'decimal', 'positiveInt', 'unsignedInt', 'integer64'].includes(fhirType)) return 'number';
  return 'string';
}

/** A type's JSON properties in definition order (choices resolved, `_x` after `x`), each with its rank and type. */
const keyOrders = new Map<string, Map<string, { rank: number; type: string }>>();

function keyOrderOf(typeName: string): Map<string, { rank: number; type: string }> {
  let order = keyOrders.get(typeName);
  if (!order) {
    order = new Map();
    for (const [key, definition] of Object.entries(getDataType(typeName).elements)) {
      if (key.endsWith('[x]')) for (const t of definition.type) order.set(key.slice(0, -3) + capitalise(t.code), { rank: order.size, type: t.code });
      else order.set(key, { rank: order.size, type: definition.type[0].code });
      order.set(`_${key}`, { rank: order.size, type: 'Element' });
    }
    keyOrders.set(typeName, order);
  }
  return order;
}

/**
 * Reorders an object's keys the way FHIR JSON writes them (definition order, `resourceType` first, keys FHIR does
 * not define last, as they came): what the engine produces reads like any other FHIR resource. The order of each
 * type is worked out once; an object costs a lookup and a sort of its own keys.
 */
export function inFhirOrder(value: unknown, typeName: string): unknown {
  if (Array.isArray(value)) return value.map((v) => inFhirOrder(v, typeName));
  if (!value || typeof value !== 'object' || isPrimitive(typeName)) return value;
  const source = value as Record<string, unknown>;
  const order = keyOrderOf(typeName);
  const known: Array<[string, { rank: number; type: string }]> = [];
  const unknown: string[] = [];
  for (const key of Object.keys(source)) {
    if (key === 'resourceType') continue;
    const at = order.get(key);
    if (at) known.push([key, at]);
    else unknown.push(key);
  }
  known.sort((a, b) => a[1].rank - b[1].rank);
  const ordered: Record<string, unknown> = {};
  if ('resourceType' in source) ordered.resourceType = source.resourceType;
  for (const [key, at] of known) ordered[key] = inFhirOrder(source[key], at.type);
  for (const key of unknown) ordered[key] = source[key];
  return ordered;
}
