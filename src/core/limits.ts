/**
 * Nesting bounds of JSON input, in one place: the body reader (src/core/body-text.ts) refuses deeper bodies before
 * parsing them, so no later walk over a body (validation, indexing, hashing) can exhaust the stack.
 */

/**
 * How deep one FHIR resource may nest arrays and objects: far beyond real resources (each level of a Questionnaire's
 * nested items adds two, a contained resource or an extension one or two). The same bound as MAX_DEPTH in
 * src/fhir/validate.ts, which refuses deeper resources.
 */
export const MAX_RESOURCE_DEPTH = 64;

/** How deep a request body may nest: a resource and its envelopes (a Bundle entry adds 3 levels, a Bridge batch 2). */
export const MAX_BODY_DEPTH = MAX_RESOURCE_DEPTH + 8;

/**
 * The most items one array of a resource may hold: far above real resources, so that no input dimension is unbounded
 * (src/fhir/validate.ts refuses a longer one; the Bridge agent refuses the v2 field that would make one).
 */
export const MAX_RESOURCE_ARRAY = 10_000;

/**
 * The longest string a resource may hold: FHIR's strings SHALL be under 1 MB. An attachment's `data` (base64Binary)
 * may be longer (the body limit bounds it): src/fhir/validate.ts checks it apart, and the Bridge agent lets it through.
 */
export const MAX_RESOURCE_STRING = 1_048_576;
