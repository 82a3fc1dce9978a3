import type { ConnectField } from './runtime';
import type { MappingSet } from './types';
import { recordTypes, tagNames, type RecordSource } from './record-types';

/** The table of record types of docs/integrators.md (kept in step by test/readme-blocks.unit.test.ts). */
export function recordTypesTable(mappings: MappingSet): string {
  // A code alone (`laboratory`), or its system's last part for any code of it (`observation-category\|`, escaped in a cell).
  const value = (one: string) => (one.endsWith('|') ? `${one.slice(0, -1).split('/').pop()}\\|` : one.split('|').pop());
  const query = (q: Record<string, string>) => Object.entries(q).map(([k, v]) => ` ${k}=${v.split(',').map(value).join(',')}`).join('');
  const types = recordTypes(mappings);
  const exceptOf = (s: RecordSource) => {
    const names = [...types.values()].filter((t) => t.sources.some((o) => s.except?.includes(o.query))).map((t) => `\`${t.name}\``);
    return names.length ? ` but what ${names.join(' and ')} select` : '';
  };
  const from = (s: RecordSource) => `${s.resourceType}${query(s.query)}${exceptOf(s)} (\`${s.map}.map.yaml\`)`;
  const rows = [...types.values()].map((t) => `| \`${t.name}\` | ${t.shape} | ${t.sources.map(from).join('; ')} | \`${t.dataClass}\` |`);
  return ['| `type` | Shape | From (newest first) | Consent class |', '|---|---|---|---|', ...rows].join('\n');
}

/** The tables of the record shapes (docs/record-shapes.md): each field, its type and its values, from the mapping files. */
export function recordShapesTables(mappings: MappingSet): string {
  const codes = (values: readonly unknown[]) => values.map((v) => `\`${v}\``).join(' ');
  // An id is published as the OpenAPI document's FhirId (src/mapping/index.ts), and named so here.
  const typeName = (f: { type: string; list: boolean }) => `${f.type === 'id' ? 'FhirId' : f.type}${f.list ? '[]' : ''}`;
  return [...recordTypes(mappings).values()]
    .map((type) => {
      const { shape, sources } = type;
      const map = sources[0]!.map;
      // An object's fields follow it, each named from it: `codings[].system`.
      const rowsOf = (fields: readonly ConnectField[], prefix = ''): string[] =>
        fields.flatMap((f) => [
          `| \`${prefix}${f.name}\` | ${typeName(f)} | ${f.values ? codes(f.values) : ''} |`,
          ...rowsOf(f.fields ?? [], `${prefix}${f.name}${f.list ? '[]' : ''}.`),
        ]);
      const rows = rowsOf(mappings.get(map).declared);
      for (const tag of tagNames(type)) rows.push(`| \`${tag}\` | string | ${codes(sources.map((s) => s.tag?.[tag]))} |`);
      return [`**${shape}** (\`mappings/${map}.map.yaml\`)`, '', '| Field | Type | Values |', '|---|---|---|', ...rows].join('\n');
    })
    .join('\n\n');
}

/** The documentation blocks generated from the record types and the maps, by marker name. */
export function generatedReadmeBlocks(mappings: MappingSet): Record<string, string> {
  return { 'record-types': recordTypesTable(mappings), 'record-shapes': recordShapesTables(mappings) };
}

/** A documentation text with each generated block (`<!-- name … -->` … `<!-- /name -->`) replaced by `blocks[name]`. */
export function withGeneratedBlocks(readme: string, blocks: Record<string, string>): string {
  let out = readme;
  for (const [name, body] of Object.entries(blocks)) {
    out = out.replace(new RegExp(`(<!-- ${name}[^>]*-->\\n)[\\s\\S]*?(<!-- /${name} -->)`), (_, open: string, close: string) => `${open}${body}\n${close}`);
  }
  return out;
}
