import { evalFhirPathTyped, getSearchParameterDetails, toTypedValue } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { allResourceTypes, loadFhirDefinitions } from '../src/core/fhir-definitions';
import { indexedParams } from '../src/fhir/indexer';

/**
 * The indexer skips a search parameter whose expression starts from top-level elements a resource does not
 * have (most of a type's parameters, for most resources). That is right only if such an expression can find
 * nothing without them: checked here for every indexed parameter of every R4 resource type, by evaluating it in
 * full on a resource that has none of its elements.
 */
describe('search index shortcut', () => {
  it('a parameter skipped for lack of its root elements finds nothing when evaluated in full', () => {
    loadFhirDefinitions();
    let skippable = 0;
    const wrong: string[] = [];
    for (const type of allResourceTypes()) {
      const bare = toTypedValue({ resourceType: type, id: 'x' } as Resource);
      for (const param of indexedParams(type).values()) {
        if (!param.roots) continue;
        skippable++;
        const full = evalFhirPathTyped(getSearchParameterDetails(type, param.definition).parsedExpression, [bare], { '%resource': bare });
        if (full.length) wrong.push(`${type}.${param.code}: ${param.definition.expression}`);
        expect(param.evaluate(bare)).toEqual([]);
      }
    }
    expect(wrong).toEqual([]);
    // Most parameters are plain paths; the rest are always evaluated.
    expect(skippable).toBeGreaterThan(1000);
  }, 60_000); // every search parameter of every type evaluated in full: seconds of CPU, more on a loaded machine
});
