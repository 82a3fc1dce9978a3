import type { OperationOutcome, OperationOutcomeIssue, Parameters, Resource } from '@medplum/fhirtypes';
import { ApiError, badRequest, operationOutcome } from '../core/errors';
import type { FhirRepository } from './repository';
import { checkType } from './store/types';
import { validateFhirResource } from './validate';

/**
 * `$validate` (R4 Resource-validate): the store's own validator (src/fhir/validate.ts) on a resource, without
 * storing anything, answered as a 200 OperationOutcome (the issues, or one "no issues" information). `mode`:
 * - `create` (the default of `POST {type}/$validate`): the resource as a create would check it;
 * - `update` (the default of `POST {type}/{id}/$validate`): the resource as an update of `{id}` would: the stored
 *   resource is read like a read (404 when the caller may not see it or it never was, 410 when deleted), and
 *   one not the caller's to change is reported;
 * - `delete` (`{id}` only, no resource): whether the caller may delete `{id}`.
 */
export type ValidateMode = 'create' | 'update' | 'delete';
const MODES: ValidateMode[] = ['create', 'update', 'delete'];

export interface ValidateInput {
  mode: ValidateMode;
  resource?: Resource;
  /** Issues about the request itself (e.g. a profile, which is not checked), reported with the answer. */
  notes: OperationOutcomeIssue[];
}

/** The operation's input: the resource itself, or a Parameters of `resource`, `mode` and `profile`; `mode` also in the query. */
export function validateInput(type: string, body: unknown, queryMode: unknown, id: string | undefined): ValidateInput {
  checkType(type);
  if (body !== undefined && (!body || typeof body !== 'object' || Array.isArray(body))) throw badRequest('The body is a resource, or a Parameters resource with a "resource" parameter');
  const notes: OperationOutcomeIssue[] = [];
  let resource = body as Resource | undefined;
  let mode: unknown = queryMode;
  const parameters = (body as Parameters | undefined)?.parameter;
  const wrapped = resource?.resourceType === 'Parameters' && Array.isArray(parameters) && (type !== 'Parameters' || parameters.some((p) => p?.name === 'resource'));
  if (wrapped) {
    resource = undefined;
    for (const p of parameters!) {
      if (p?.name === 'resource' && p.resource && !resource) resource = p.resource;
      else if (p?.name === 'mode' && typeof p.valueCode === 'string' && mode === undefined) mode = p.valueCode;
      else if (p?.name === 'profile')
        notes.push({ severity: 'warning', code: 'not-supported', details: { text: `profile ${p.valueUri ?? p.valueCanonical ?? ''} was not checked: Pont validates against the R4 base definitions` } });
      else throw badRequest(`Unexpected parameter "${String(p?.name)}": $validate takes resource, mode and profile, each once`);
    }
  }
  mode ??= id === undefined ? 'create' : 'update';
  if (typeof mode !== 'string' || !MODES.includes(mode as ValidateMode)) throw badRequest(`mode must be one of ${MODES.join(', ')}`);
  if (id === undefined && mode !== 'create') throw badRequest(`mode ${mode} validates against a stored resource: POST {type}/{id}/$validate`);
  if (id !== undefined && mode === 'create') throw badRequest('mode create validates a new resource: POST {type}/$validate');
  if (mode !== 'delete') {
    if (!resource) throw badRequest(`mode ${mode} needs the resource to validate`);
    if (resource.resourceType !== type) throw badRequest(`The resource is a ${String(resource.resourceType)}, the url says ${type}`);
    if (id !== undefined && resource.id !== undefined && resource.id !== id) throw badRequest(`The resource's id "${resource.id}" is not the url's id "${id}"`);
  }
  return { mode: mode as ValidateMode, resource, notes };
}

/** Runs the operation through the caller's repository (reads under its read rule); stores nothing. */
export async function validateOperation(
  repo: FhirRepository,
  type: string,
  id: string | undefined,
  input: ValidateInput,
  /** Issues of the resource's bindings to the value sets loaded into Pont (src/fhir/term: TerminologyService.checkBindings). */
  checkBindings?: (resource: Resource) => Promise<OperationOutcomeIssue[]>,
): Promise<OperationOutcome> {
  const issues = [...input.notes];
  try {
    repo.checkWritable(type);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    issues.push({ severity: 'error', code: 'forbidden', details: { text: err.message } });
  }
  if (id !== undefined) {
    await repo.read(type, id); // 404 / 410 exactly as a read: a resource the caller may not see is not there
    if (!(await repo.mayChange(type, id)))
      issues.push({ severity: 'error', code: 'forbidden', details: { text: `Only the organisation that created ${type}/${id} may ${input.mode} it` } });
    const held = input.mode === 'delete' ? await repo.deleteConflict(type, id) : undefined;
    if (held) issues.push(...operationOutcome(held).issue);
  }
  if (input.resource) {
    try {
      validateFhirResource({ ...input.resource, ...(id !== undefined ? { id } : {}) });
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      issues.push(...operationOutcome(err).issue);
    }
    // Bindings only of a resource whose structure holds: its codings are where R4 puts them.
    if (checkBindings && !issues.some((i) => i.severity === 'error' || i.severity === 'fatal')) issues.push(...(await checkBindings(input.resource)));
  }
  if (!issues.some((i) => i.severity === 'error' || i.severity === 'fatal'))
    issues.unshift({ severity: 'information', code: 'informational', details: { text: 'No issues detected' } });
  return { resourceType: 'OperationOutcome', issue: issues };
}
