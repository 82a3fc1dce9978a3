import type { MappingSet } from '../mapping/index';
import { RECORD_TYPES, RECORD_TYPE_NAMES, type RecordSource } from './types';

/** The README's table of record types (kept in step by test/readme.test.ts). */
export function recordTypesTable(): string {
  const from = (s: RecordSource) => `${s.resourceType}${Object.entries(s.query).map(([k, v]) => ` ${k}=${v.split('|').pop()}`).join('')} (\`${s.map}.map.yaml\`)`;
  const rows = RECORD_TYPE_NAMES.map((name) => {
    const t = RECORD_TYPES[name];
    const sources: readonly RecordSource[] = t.sources;
    return `| \`${name}\` | ${t.shape} | ${sources.map(from).join('; ')} | \`${t.dataClass}\` |`;
  });
  return ['| `type` | Shape | From (newest first) | Consent class |', '|---|---|---|---|', ...rows].join('\n');
}

/** The README's tables of the record shapes: each field, its type and its values, from the mapping files. */
export function recordShapesTables(mappings: MappingSet): string {
  const shapes: Array<[string, string, readonly RecordSource[]]> = RECORD_TYPE_NAMES.map((name) => [RECORD_TYPES[name].shape, RECORD_TYPES[name].sources[0].map, RECORD_TYPES[name].sources]);
  shapes.push(['Visit', 'visit', []]);
  const codes = (values: readonly unknown[]) => values.map((v) => `\`${v}\``).join(' ');
  return shapes
    .map(([shape, map, sources]) => {
      const rows = mappings.get(map).declared.map((f) => `| \`${f.name}\` | ${f.list ? `${f.type}[]` : f.type} | ${f.values ? codes(f.values) : ''} |`);
      const tags = [...new Set(sources.flatMap((s) => Object.keys(s.tag ?? {})))];
      for (const tag of tags) rows.push(`| \`${tag}\` | string | ${codes(sources.map((s) => s.tag?.[tag]))} |`);
      return [`**${shape}** (\`mappings/${map}.map.yaml\`)`, '', '| Field | Type | Values |', '|---|---|---|', ...rows].join('\n');
    })
    .join('\n\n');
}
