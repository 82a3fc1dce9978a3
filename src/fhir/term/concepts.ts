import type { CodeSystem, CodeSystemConcept, CodeSystemConceptDesignation, CodeSystemConceptProperty } from '@medplum/fhirtypes';
import { badRequest } from '../../core/errors';

/**
 * One concept of a code system as every loader gives it (FHIR JSON, LOINC CSV, SNOMED CT RF2): its hierarchy as the
 * codes of its parents (and, from FHIR's `child` property, of its children).
 */
export interface ConceptInput {
  code: string;
  display?: string;
  definition?: string;
  active: boolean;
  parents: string[];
  children?: string[];
  properties?: CodeSystemConceptProperty[];
  designations?: CodeSystemConceptDesignation[];
}

/** The R4 concept properties (http://hl7.org/fhir/concept-properties) that say a concept is not active. */
export function isActive(properties: readonly CodeSystemConceptProperty[] | undefined): boolean {
  for (const p of properties ?? []) {
    if (p.code === 'inactive' && p.valueBoolean === true) return false;
    if (p.code === 'status' && (p.valueCode === 'retired' || p.valueCode === 'inactive')) return false;
  }
  return true;
}

export const MAX_CODE_LENGTH = 256;
const CODE = /^[^\s]+( [^\s]+)*$/; // FHIR `code`: no leading, trailing or double whitespace

/** A code as FHIR defines it, short enough to index; a clear message otherwise. */
export function checkCode(code: unknown, where: string): string {
  if (typeof code !== 'string' || !code || code.length > MAX_CODE_LENGTH || !CODE.test(code))
    throw badRequest(`${where}: "${String(code).slice(0, 80)}" is not a code (1-${MAX_CODE_LENGTH} characters, no leading, trailing or repeated spaces)`);
  return code;
}

/** The concepts of a CodeSystem resource, nesting and the parent/child properties as its hierarchy. */
export function* conceptsOf(cs: CodeSystem): Generator<ConceptInput> {
  function* walk(concepts: readonly CodeSystemConcept[] | undefined, parent: string | undefined, depth: number): Generator<ConceptInput> {
    if (concepts === undefined) return;
    if (!Array.isArray(concepts)) throw badRequest(`CodeSystem ${cs.url}: concept must be an array`);
    if (depth > 200) throw badRequest(`CodeSystem ${cs.url}: concepts nested more than 200 deep`);
    for (const c of concepts) {
      if (!c || typeof c !== 'object') throw badRequest(`CodeSystem ${cs.url}: a concept must be an object`);
      const code = checkCode(c.code, `CodeSystem ${cs.url}`);
      const properties = Array.isArray(c.property) ? c.property : undefined;
      const parents = parent === undefined ? [] : [parent];
      const children: string[] = [];
      const kept: CodeSystemConceptProperty[] = [];
      for (const p of properties ?? []) {
        if (p.code === 'parent' || p.code === 'subsumedBy') parents.push(checkCode(p.valueCode ?? p.valueCoding?.code, `CodeSystem ${cs.url} ${code} parent`));
        else if (p.code === 'child') children.push(checkCode(p.valueCode ?? p.valueCoding?.code, `CodeSystem ${cs.url} ${code} child`));
        else if (p.code !== 'inactive') kept.push(p); // the concept's `active` holds it; $lookup gives it once
      }
      if (c.display !== undefined && typeof c.display !== 'string') throw badRequest(`CodeSystem ${cs.url} ${code}: display must be a string`);
      yield {
        code,
        display: c.display,
        definition: typeof c.definition === 'string' ? c.definition : undefined,
        active: isActive(properties),
        parents,
        children,
        properties: kept.length ? kept : undefined,
        designations: Array.isArray(c.designation) && c.designation.length ? c.designation : undefined,
      };
      yield* walk(c.concept, code, depth + 1);
    }
  }
  yield* walk(cs.concept, undefined, 0);
}
