/**
 * Generates src/types.ts, the TypeScript types of the shapes the client sends and receives, from the OpenAPI
 * document the server publishes (components.schemas; openApiDocument builds it from the same routes and maps without
 * starting a service): the types are the server's, never written twice.
 * `npm run clients:types` in the repository root (it also runs the Python and PHP clients' generators on the same
 * document); test/types.test.ts and the Python and PHP tests fail when a file is out of date.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../../src/config';
import { openApiDocument } from '../../../src/server';

type Schema = Record<string, any>;

const name = (ref: string) => ref.replace('#/components/schemas/', '');
const key = (k: string) => (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(k) ? k : JSON.stringify(k));

function typeOf(s: Schema | boolean | undefined, indent = ''): string {
  if (s === undefined || s === true) return 'unknown';
  if (s === false) return 'never';
  if (s.$ref) return name(s.$ref);
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v: unknown) => JSON.stringify(v)).join(' | ');
  if (s.anyOf || s.oneOf) return [...new Set((s.anyOf ?? s.oneOf).map((x: Schema) => typeOf(x, indent)))].join(' | ');
  if (s.allOf) return s.allOf.map((x: Schema) => typeOf(x, indent)).join(' & ');
  const types: string[] = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
  if (!types.length) return s.properties ? objectType(s, indent) : 'unknown';
  return types
    .map((t) => {
      switch (t) {
        case 'string':
          return 'string';
        case 'number':
        case 'integer':
          return 'number';
        case 'boolean':
          return 'boolean';
        case 'null':
          return 'null';
        case 'array':
          return `Array<${typeOf(s.items, indent)}>`;
        case 'object':
          return objectType(s, indent);
        default:
          return 'unknown';
      }
    })
    .join(' | ');
}

function objectType(s: Schema, indent: string): string {
  const props = Object.entries<Schema>(s.properties ?? {});
  const extra = s.additionalProperties && s.additionalProperties !== false ? [`${indent}  [key: string]: ${typeOf(s.additionalProperties, indent + '  ')};`] : [];
  if (!props.length && !extra.length) return s.additionalProperties === false ? 'Record<string, never>' : 'Record<string, unknown>';
  const required = new Set<string>(s.required ?? []);
  const lines = props.map(([k, v]) => {
    const doc = v.description ? `${indent}  /** ${String(v.description).replace(/\*\//g, '* /').replace(/\n/g, ' ')} */\n` : '';
    return `${doc}${indent}  ${key(k)}${required.has(k) ? '' : '?'}: ${typeOf(v, indent + '  ')};`;
  });
  return `{\n${[...lines, ...extra].join('\n')}\n${indent}}`;
}

/** The Python and PHP clients' types, from the same document, by their own generators (run from the repository root). */
function generateOtherLanguages(doc: unknown): void {
  const file = fileURLToPath(new URL('../../../tmp/openapi.json', import.meta.url));
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(doc));
  execFileSync('python3', ['clients/python/scripts/generate_types.py', file], { stdio: 'inherit' });
  execFileSync('php', ['clients/php/scripts/generate-types.php', file], { stdio: 'inherit' });
  console.log('wrote clients/python/pont/types.py and clients/php/src/Types.php');
}

function main() {
  const config = loadConfig({ LOG_LEVEL: 'error' });
  const doc = openApiDocument(config, config.mappingsDir) as { components: { schemas: Record<string, Schema> } };
  const schemas = Object.entries(doc.components.schemas).sort(([a], [b]) => (a < b ? -1 : 1));
  const out = [
    '// Generated from the OpenAPI document Pont publishes (GET /api/openapi.json) by scripts/generate-types.ts.',
    '// Do not edit: run `npm run clients:types` in the repository root.',
    '',
    ...schemas.map(([n, s]) => `${s.description ? `/** ${String(s.description).replace(/\*\//g, '* /').replace(/\n/g, ' ')} */\n` : ''}export type ${n} = ${typeOf(s)};\n`),
  ].join('\n');
  const target = process.argv[2] ?? fileURLToPath(new URL('../src/types.ts', import.meta.url));
  writeFileSync(target, out);
  console.log(`wrote ${schemas.length} types to ${target}`);
  if (process.argv[2] === undefined) generateOtherLanguages(doc);
}

main();
