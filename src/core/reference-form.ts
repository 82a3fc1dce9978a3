import { clipped } from './errors';
import { isResourceType } from './fhir-definitions';

/**
 * Why `reference` (a Reference.reference) has no form R4 gives one (references.html): a relative `Type/id` or
 * `Type/id/_history/vid` of an R4 resource type and FHIR ids; an absolute `http(s)://` URL or a URN (`urn:uuid:`,
 * `urn:oid:`), without white space or control characters; `#id` of a contained resource or `#` of the container
 * (whether it names one is ref-1's, src/fhir/validate.ts); or a conditional `Type?name=value&…` (a transaction
 * resolves it; anywhere else the store refuses it as unresolved, src/fhir/repository.ts checkReferences). Text of any
 * other form named nothing anyone could resolve, and was stored on every door; another scheme (`javascript:`,
 * `data:`, `MRN:12345`) is no reference either.
 */
export function referenceFormProblem(reference: string): string | undefined {
  const type = (RELATIVE_FORM.exec(reference) ?? CONDITIONAL_FORM.exec(reference))?.[1];
  if (type !== undefined) return isResourceType(type) ? undefined : `${type} is not a resource type of FHIR R4`;
  if (ABSOLUTE_FORM.test(reference) || CONTAINED_FORM.test(reference)) return undefined;
  return `${shown(reference)} is not a reference: name a resource as Type/id (an id of 1-64 letters, digits, '-' or '.'), by an http(s) URL or a URN, or as #id of a contained resource; words for a reader go in display`;
}

/**
 * The resource type a reference names by its form, when it says one: a relative reference's, or an http(s) URL's that
 * ends as a RESTful one does (`…/Patient/123`, `…/Patient/123/_history/2`), whichever server it is on.
 */
export function referencedType(reference: string): string | undefined {
  const type = RELATIVE_FORM.exec(reference)?.[1] ?? (ABSOLUTE_FORM.test(reference) ? RESTFUL_URL_END.exec(reference)?.[1] : undefined);
  return type !== undefined && isResourceType(type) ? type : undefined;
}

const shown = (text: string) => `"${clipped(text)}"`;

const RELATIVE_FORM = /^([A-Za-z]+)\/[A-Za-z0-9\-.]{1,64}(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;
/** `Type?name=value&…`: a search's parameters (a name, `=`, a value of any characters but `&` and control ones). */
const CONDITIONAL_FORM = /^([A-Za-z]+)\?[A-Za-z_][A-Za-z0-9_\-.:]*=[^&\u0000-\u001f\u007f]*(?:&[A-Za-z_][A-Za-z0-9_\-.:]*=[^&\u0000-\u001f\u007f]*)*$/;
const CONTAINED_FORM = /^#[A-Za-z0-9\-.]{0,64}$/;
/** An http(s) URL with a host (`https://…/Patient/1`, `http://[::1]:8080/…`) or a URN (RFC 8141: `urn:uuid:…`, `urn:oid:…`). */
const ABSOLUTE_FORM = /^(?:https?:\/\/[^\s\u0000-\u001f\u007f/?#]+(?:[/?#][^\s\u0000-\u001f\u007f]*)?|urn:[A-Za-z0-9][A-Za-z0-9-]{0,31}:[^\s\u0000-\u001f\u007f]+)$/;
const RESTFUL_URL_END = /\/([A-Z][A-Za-z]+)\/[A-Za-z0-9\-.]{1,64}(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;
