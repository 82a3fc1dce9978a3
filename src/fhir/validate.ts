import { OperationOutcomeError, validateResource } from '@medplum/core';
import type { OperationOutcomeIssue, Resource } from '@medplum/fhirtypes';
import { ApiError, ErrorCode, badRequest } from '../http/errors';
import { isResourceType } from './definitions';
import { checkRequiredBindings } from './terminology';

/** Validates against the R4 base definitions; an invalid resource is a 400 with every issue found. */
export function validateFhirResource(resource: Resource): void {
  if (!resource || typeof resource !== 'object' || Array.isArray(resource)) throw badRequest('Body must be a FHIR resource (a JSON object)');
  if (typeof resource.resourceType !== 'string' || !isResourceType(resource.resourceType))
    throw badRequest(`Unknown resourceType "${String(resource.resourceType)}"`);
  let issues: OperationOutcomeIssue[] = jsonShapeIssues(resource);
  try {
    if (!issues.length) issues = validateResource(resource);
  } catch (err) {
    if (err instanceof OperationOutcomeError) issues = err.outcome.issue ?? [];
    else throw badRequest(`Invalid resource: ${(err as Error).message}`);
  }
  const errors = issues.filter((i) => i.severity === 'error' || i.severity === 'fatal');
  if (!errors.length) errors.push(...checkRequiredBindings(resource));
  if (errors.length) {
    const first = errors[0];
    const where = first.expression?.[0] ? ` at ${first.expression[0]}` : '';
    throw new ApiError(400, ErrorCode.validationFailed, `Invalid ${resource.resourceType}: ${first.details?.text ?? first.diagnostics}${where}`, {
      issues: errors,
    });
  }
}

/** Deeper than any real resource (contained resources and extensions included). */
const MAX_DEPTH = 64;

/**
 * FHIR JSON rules the structural validator of @medplum/core lets through: no empty strings, arrays or
 * objects, no arrays of arrays; and a depth bound, so a hostile body cannot exhaust the stack.
 */
function jsonShapeIssues(resource: Resource): OperationOutcomeIssue[] {
  const issues: OperationOutcomeIssue[] = [];
  const issue = (text: string, path: string) => issues.push({ severity: 'error', code: 'structure', details: { text }, expression: [path] });
  const visit = (value: unknown, path: string, depth: number, inArray: boolean): void => {
    if (issues.length) return;
    if (depth > MAX_DEPTH) return void issue(`Nested more than ${MAX_DEPTH} levels deep`, path);
    if (value === '') return void issue('An empty string (leave the element out instead)', path);
    if (Array.isArray(value)) {
      if (inArray) return void issue('An array inside an array', path);
      if (value.length === 0) return void issue('An empty array (leave the element out instead)', path);
      value.forEach((v, i) => visit(v, `${path}[${i}]`, depth + 1, true));
    } else if (value !== null && typeof value === 'object') {
      const entries = Object.entries(value);
      if (entries.length === 0) return void issue('An empty object (leave the element out instead)', path);
      for (const [k, v] of entries) visit(v, `${path}.${k}`, depth + 1, false);
    }
  };
  visit(resource, resource.resourceType, 0, false);
  return issues;
}
