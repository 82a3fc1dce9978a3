import { isResourceType } from './fhir-definitions';

/**
 * Why `reference` (a Reference.reference) has no form R4 gives one (references.html): a relative `Type/id` or
 * `Type/id/_history/vid` of an R4 resource type and FHIR ids, an absolute URL or URN (no white space), `#id` of a
 * contained resource or `#` of the container (whether it names one is ref-1's, src/fhir/validate.ts), or a
 * conditional `Type?criteria` (a transaction resolves it; anywhere else it is refused as unresolved). Text of any
 * other form named nothing anyone could resolve, and was stored on every door.
 */
export function referenceFormProblem(reference: string): string | undefined {
  const type = (RELATIVE_FORM.exec(reference) ?? CONDITIONAL_FORM.exec(reference))?.[1];
  if (type !== undefined) return isResourceType(type) ? undefined : `${type} is not a resource type of FHIR R4`;
  if (ABSOLUTE_FORM.test(reference) || CONTAINED_FORM.test(reference)) return undefined;
  const shown = reference.length > 100 ? `${reference.slice(0, 100)}… (${reference.length} characters)` : reference;
  return `"${shown}" is not a reference: name a resource as Type/id (an id of 1-64 letters, digits, '-' or '.'), by an absolute URL or URN, or as #id of a contained resource; words for a reader go in display`;
}
const RELATIVE_FORM = /^([A-Za-z]+)\/[A-Za-z0-9\-.]{1,64}(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;
const CONDITIONAL_FORM = /^([A-Za-z]+)\?.+$/;
const CONTAINED_FORM = /^#[A-Za-z0-9\-.]{0,64}$/;
/** A scheme (RFC 3986) and no white space: `https://…/Patient/1`, `urn:uuid:…`, `urn:oid:…`. */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.\-]*:\S+$/;
