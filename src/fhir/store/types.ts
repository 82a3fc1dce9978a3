import { ApiError, ErrorCode } from '../../core/errors';
import { isResourceType } from '../../core/fhir-definitions';

export const ID_PATTERN = /^[A-Za-z0-9\-.]{1,64}$/;

/** `W/"3"` or `3` -> `3`. */
export function versionTag(ifMatch: string): string {
  return ifMatch.replace(/^W\//, '').replace(/"/g, '').trim();
}

export function checkType(resourceType: string): void {
  if (typeof resourceType !== 'string' || !isResourceType(resourceType))
    throw new ApiError(404, ErrorCode.notFound, `Unknown resource type "${resourceType}"`);
}

/** The access rule as SQL (src/policy builds it; the store applies it). */
export type { RowFilter } from '../../policy/index';
