/**
 * Checks a value against a schema of the published OpenAPI document (the subset its Connect shapes use: $ref,
 * anyOf, type, enum, pattern, properties, required, items), listing every problem: a record must fit the shape
 * integrators were given.
 */
type Schema = Record<string, any>;

export function schemaProblems(schema: Schema, value: unknown, doc: Schema, at = ''): string[] {
  if (schema.$ref) return schemaProblems(doc.components.schemas[String(schema.$ref).split('/').pop()!], value, doc, at);
  if (schema.anyOf) {
    const each = (schema.anyOf as Schema[]).map((s) => schemaProblems(s, value, doc, at));
    return each.some((p) => !p.length) ? [] : each.flat();
  }
  const types: string[] = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  const typeOf = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
  const fits = (t: string) => t === typeOf || (t === 'integer' && Number.isInteger(value)) || (t === 'number' && typeOf === 'number');
  if (types.length && !types.some(fits)) return [`${at || 'value'}: ${JSON.stringify(value)} is not ${types.join(' or ')}`];
  if (schema.enum && !schema.enum.includes(value)) return [`${at || 'value'}: ${JSON.stringify(value)} is not one of ${schema.enum.join(', ')}`];
  if (schema.pattern && typeof value === 'string' && !new RegExp(schema.pattern).test(value)) return [`${at}: ${JSON.stringify(value)} does not match ${schema.pattern}`];
  const problems: string[] = [];
  if (typeOf === 'object' && schema.properties) {
    const object = value as Record<string, unknown>;
    for (const key of schema.required ?? []) if (!(key in object)) problems.push(`${at}.${key}: missing`);
    for (const [key, v] of Object.entries(object)) {
      if (schema.properties[key]) problems.push(...schemaProblems(schema.properties[key], v, doc, `${at}.${key}`));
      else if (schema.additionalProperties === false) problems.push(`${at}.${key}: not in the shape`);
    }
  }
  if (typeOf === 'array' && schema.items) (value as unknown[]).forEach((v, i) => problems.push(...schemaProblems(schema.items, v, doc, `${at}[${i}]`)));
  return problems;
}
