import type { OperationOutcomeIssue, Resource } from '@medplum/fhirtypes';
import { isJsonObject } from './json';

/**
 * An invariant of the form `x is T implies …` that @medplum/core 4.5 judges unmet where `x` is absent: FHIRPath's
 * `{} is T` is empty, not false, and the validator counts an empty answer as a failure. Such an invariant holds where
 * there is no `x` (of any choice type): RiskAssessment's ras-2 (`probability is decimal implies (probability as
 * decimal) <= 100`) refused every prediction without a probability, the specification's own RiskAssessment/prognosis.
 */
export function vacuousInvariant(issue: OperationOutcomeIssue, resource: Resource): boolean {
  if (issue.code !== 'invariant' || !issue.diagnostics) return false;
  let fhirpath: unknown;
  try {
    fhirpath = (JSON.parse(issue.diagnostics) as { fhirpath?: unknown }).fhirpath;
  } catch {
    return false;
  }
  const tested = typeof fhirpath === 'string' ? /^([a-z][A-Za-z]*) is [A-Za-z]+ implies /.exec(fhirpath)?.[1] : undefined;
  const at = tested && elementAt(resource, issue.expression?.[0]);
  return !!at && !Object.keys(at).some((key) => key === tested || (key.startsWith(tested) && /^[A-Z]/.test(key.slice(tested.length))));
}

/** The object an issue's expression (`RiskAssessment.prediction[0]`) names in the resource, if it is one. */
function elementAt(resource: Resource, expression: string | undefined): Record<string, unknown> | undefined {
  if (!expression) return undefined;
  let at: unknown = resource;
  for (const step of expression.split('.').slice(1)) {
    const m = /^(\w+)(?:\[(\d+)\])?$/.exec(step);
    if (!m || !isJsonObject(at)) return undefined;
    at = at[m[1]!];
    if (m[2] !== undefined) at = Array.isArray(at) ? at[Number(m[2])] : undefined;
  }
  return isJsonObject(at) ? at : undefined;
}
