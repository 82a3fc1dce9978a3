import { tryGetDataType } from '@medplum/core';
import type { OperationOutcomeIssue, Resource } from '@medplum/fhirtypes';

/** A coded element of a resource bound (required or extensible) to a value set, with its codings. */
export interface BoundValue {
  path: string;
  valueSet: string;
  strength: 'required' | 'extensible';
  /** `code` elements: the code alone (no system). A CodeableConcept with text only has none. */
  codings: Array<{ system?: string; code: string }>;
}

const PRIMITIVE = /^[a-z]/;
const MAX_DEPTH = 32;

/**
 * Every element of `resource` (contained resources included) whose R4 definition binds it, required or extensible,
 * to a value set: what `$validate` checks against the value sets loaded into Pont (docs/fhir.md "Terminology").
 */
export function boundValues(resource: Resource): BoundValue[] {
  const out: BoundValue[] = [];
  walk(resource, resource.resourceType, resource.resourceType, out, 0);
  // `contained` as written, not as R4 says it must be: $validate is asked about resources that are not yet valid.
  const contained: unknown = (resource as { contained?: unknown }).contained;
  for (const c of Array.isArray(contained) ? contained : [])
    if (c && typeof c === 'object' && typeof (c as Resource).resourceType === 'string') walk(c, (c as Resource).resourceType, `${resource.resourceType}.contained`, out, 1);
  return out;
}

function walk(value: unknown, typeName: string, path: string, out: BoundValue[], depth: number): void {
  if (!value || typeof value !== 'object' || depth > MAX_DEPTH) return;
  const schema = tryGetDataType(typeName);
  for (const [name, element] of Object.entries(schema?.elements ?? {})) {
    if (name === 'extension' || name === 'modifierExtension' || name === 'contained') continue;
    const choice = name.endsWith('[x]');
    for (const { code } of element.type ?? []) {
      const key = choice ? name.slice(0, -3) + code[0]!.toUpperCase() + code.slice(1) : name;
      const v = (value as Record<string, unknown>)[key];
      if (v === undefined) continue;
      const items = Array.isArray(v) ? v : [v];
      const binding = element.binding;
      const strength = binding?.strength;
      const bound = (strength === 'required' || strength === 'extensible') && binding?.valueSet ? binding.valueSet.split('|')[0]! : undefined;
      items.forEach((item, i) => {
        const at = `${path}.${key}${Array.isArray(v) ? `[${i}]` : ''}`;
        if (bound && (code === 'code' || code === 'Coding' || code === 'CodeableConcept')) {
          const codings =
            code === 'code'
              ? typeof item === 'string' ? [{ code: item }] : []
              : (code === 'Coding' ? [item] : Array.isArray((item as { coding?: unknown })?.coding) ? (item as { coding: unknown[] }).coding : [])
                  .filter((c): c is { system?: unknown; code: string } => !!c && typeof c === 'object' && typeof (c as { code?: unknown }).code === 'string')
                  .map((c) => ({ ...(typeof c.system === 'string' ? { system: c.system } : {}), code: c.code }));
          out.push({ path: at, valueSet: bound, strength: strength as 'required' | 'extensible', codings });
        } else if (!PRIMITIVE.test(code) && code !== 'Resource') walk(item, code, at, out, depth + 1);
      });
    }
  }
}

/**
 * The bound elements none of whose codes is in their value set, among those it can judge: `memberOf` answers
 * undefined for a value set not loaded (or not expandable), which judges nothing. The one rule of `$validate`'s
 * binding check and of the writes' refusal (src/fhir/term/lookup.ts refusals).
 */
export function outsideBindings(bound: BoundValue[], memberOf: (valueSet: string, system: string | undefined, code: string) => boolean | undefined): BoundValue[] {
  return bound.filter((b) => {
    const member = b.codings.map((c) => memberOf(b.valueSet, c.system, c.code));
    return member.some((m) => m !== undefined) && !member.includes(true);
  });
}

/** The issue of a bound element none of whose codes is in its loaded value set: an error (required) or a warning (extensible). */
export function bindingIssue(b: BoundValue): OperationOutcomeIssue {
  const [first] = b.codings;
  const what = b.codings.length > 1 ? 'None of the codings is' : `${first!.system ? `${first!.system}#` : ''}${first!.code} is not`;
  return {
    severity: b.strength === 'required' ? 'error' : 'warning',
    code: 'code-invalid',
    details: { text: `${what} in the value set ${b.valueSet} (${b.strength} binding)` },
    expression: [b.path],
  };
}
