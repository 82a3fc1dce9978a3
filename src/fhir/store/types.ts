import { ApiError, ErrorCode } from '../../http/errors';
import { isResourceType } from '../definitions';

export const ID_PATTERN = /^[A-Za-z0-9\-.]{1,64}$/;

/** `W/"3"` or `3` -> `3`. */
export function versionTag(ifMatch: string): string {
  return ifMatch.replace(/^W\//, '').replace(/"/g, '').trim();
}

export function checkType(resourceType: string): void {
  if (typeof resourceType !== 'string' || !isResourceType(resourceType))
    throw new ApiError(404, ErrorCode.notFound, `Unknown resource type "${resourceType}"`);
}

/**
 * The access rule as SQL: a condition on the `fhir_resources` row aliased `alias`, with its values
 * bound through `q`; undefined when the caller may see every row (src/fhir/access.ts builds it).
 */
/**
 * The access rule as a SQL condition on the resource rows of `alias`. `resourceType`: every row is of that type
 * (a search's own rows, a read), which lets the rule name the type's data class as a constant.
 */
export type RowFilter = (alias: string, q: { add(value: unknown): string }, resourceType?: string) => string | undefined;
