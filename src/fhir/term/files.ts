import { createReadStream, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Bundle, CodeSystem, ConceptMap, Resource, ValueSet } from '@medplum/fhirtypes';
import { badRequest } from '../../core/errors';
import { conceptsOf } from './concepts';
import type { Loaded, TerminologyLoader } from './load';

export type TermResource = CodeSystem | ValueSet | ConceptMap;
const TYPES = new Set(['CodeSystem', 'ValueSet', 'ConceptMap']);

function asTermResource(value: unknown, where: string): TermResource[] {
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw badRequest(`${where}: not a FHIR resource (a JSON object)`);
  const r = value as Resource;
  if (r.resourceType === 'Bundle') {
    const entries = (r as Bundle).entry;
    if (entries !== undefined && !Array.isArray(entries)) throw badRequest(`${where}: Bundle.entry must be an array`);
    return (entries ?? []).flatMap((e, i) => asTermResource(e?.resource, `${where} entry ${i}`));
  }
  if (!TYPES.has(r.resourceType)) throw badRequest(`${where}: a ${String(r.resourceType).slice(0, 40)} is not terminology (CodeSystem, ValueSet, ConceptMap or a Bundle of them)`);
  return [r as TermResource];
}

/** The resources of a .json file (one resource, or a Bundle of them) or an .ndjson file (one a line, read as it streams). */
export async function* resourcesOf(file: string): AsyncGenerator<TermResource> {
  if (/\.ndjson$/i.test(file)) {
    const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
    let n = 0;
    for await (const line of lines) {
      n++;
      if (!line.trim()) continue;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch (err) {
        throw badRequest(`${file}:${n}: not JSON (${(err as Error).message})`);
      }
      yield* asTermResource(value, `${file}:${n}`);
    }
    return;
  }
  if (!/\.json$/i.test(file)) throw badRequest(`${file}: terminology files are .json (a resource or a Bundle) or .ndjson (one resource a line)`);
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw badRequest(`${file}: not JSON (${(err as Error).message})`);
  }
  yield* asTermResource(value, file);
}

/** Loads one resource. */
export function loadResource(loader: TerminologyLoader, r: TermResource): Promise<Loaded> {
  switch (r.resourceType) {
    case 'CodeSystem':
      return loader.loadCodeSystem(r, conceptsOf(r));
    case 'ValueSet':
      return loader.loadValueSet(r);
    case 'ConceptMap':
      return loader.loadConceptMap(r);
  }
}
