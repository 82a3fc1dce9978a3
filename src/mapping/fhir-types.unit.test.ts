import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { getDataType } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { loadFhirDefinitions } from '../core/fhir-definitions';
import { inFhirOrder, isPrimitive } from './fhir-types';

const capitalise = (s: string) => s[0]!.toUpperCase() + s.slice(1);

/** The order as it was worked out before (walking the type's every element for each object): the oracle. */
function walkedOrder(value: unknown, typeName: string): unknown {
  if (Array.isArray(value)) return value.map((v) => walkedOrder(v, typeName));
  if (!value || typeof value !== 'object' || isPrimitive(typeName)) return value;
  const source = value as Record<string, unknown>;
  const ordered: Record<string, unknown> = {};
  if ('resourceType' in source) ordered.resourceType = source.resourceType;
  for (const [key, definition] of Object.entries(getDataType(typeName).elements)) {
    if (key.endsWith('[x]')) {
      for (const t of definition.type) {
        const json = key.slice(0, -3) + capitalise(t.code);
        if (json in source) ordered[json] = walkedOrder(source[json], t.code);
      }
    } else if (key in source) ordered[key] = walkedOrder(source[key], definition.type[0]!.code);
    if (`_${key}` in source) ordered[`_${key}`] = walkedOrder(source[`_${key}`], 'Element');
  }
  for (const key of Object.keys(source)) if (!(key in ordered)) ordered[key] = source[key];
  return ordered;
}

/** Every object's keys, depth first: what "the same order" means for JSON text. */
const keyPaths = (value: unknown): string[] =>
  Array.isArray(value) ? value.flatMap(keyPaths) : value && typeof value === 'object' ? Object.entries(value).flatMap(([k, v]) => [k, ...keyPaths(v)]) : [];

/** Resources other writers wrote (test corpora), with their keys reversed: nothing is in FHIR order to begin with. */
function corpus(): Resource[] {
  const root = new URL('../../test/', import.meta.url);
  const bundle = JSON.parse(readFileSync(new URL('corpus/other-writers/northbrook-ehr.bundle.json', root), 'utf8')) as { entry: Array<{ resource: Resource }> };
  const ndjson = readFileSync(new URL('corpus/other-writers/savanna-lab-network.ndjson', root), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Resource);
  const list = JSON.parse(readFileSync(new URL('other-writers-clinical.json', root), 'utf8')) as Resource[];
  const reversed = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(reversed) : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reversed(x)])) : v;
  return [...bundle.entry.map((e) => e.resource), ...ndjson, ...list].map((r) => reversed(r) as Resource);
}

describe('inFhirOrder', () => {
  beforeAll(() => loadFhirDefinitions());

  it('orders every resource of other writers as walking the definitions does: resourceType first, then definition order, _x after x, unknown keys last', () => {
    const resources = corpus();
    expect(resources.length).toBeGreaterThan(50);
    for (const r of resources) expect(keyPaths(inFhirOrder(r, r.resourceType)), `${r.resourceType}/${r.id}`).toEqual(keyPaths(walkedOrder(r, r.resourceType)));
  });

  it('keeps choice types, primitive extensions and keys FHIR does not define where FHIR JSON puts them', () => {
    const o = { zz: 1, _valueString: { id: 'x' }, valueString: 'a', _status: { extension: [] }, status: 'final', code: { text: 't', coding: [{ display: 'd', code: 'c' }] }, resourceType: 'Observation' };
    expect(keyPaths(inFhirOrder(o, 'Observation'))).toEqual(['resourceType', 'status', '_status', 'extension', 'code', 'coding', 'code', 'display', 'text', 'valueString', 'zz', '_valueString', 'id']);
  });
});
