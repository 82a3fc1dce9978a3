/** A JSON object as parsed: not null, not an array (a FHIR resource or element, a Connect record). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
