import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isMap, isScalar } from 'yaml';
import { generatedReadmeBlocks } from './record-docs';
import { recordFields, recordTypes } from './record-types';
import { MappingError } from './errors';
import type { CompiledMap, MappingSet } from './types';
import { CODE_MAPS, CODE_RECORD_TYPES } from './uses';
import type { YamlSource } from './yaml-source';

type Position = [line: number, column: number];

/** A compiled map as the checks see it: its file, and where its `connect:` key and each field under it are written. */
export interface CheckedMap {
  map: CompiledMap;
  file: string;
  connect: { at: Position; fields: Map<string, Position> };
}

/** Where a top-level section of a map that compiled (`connect`, `v2`) is written, and each field under it. */
export function sectionPositions(source: YamlSource, section: string): CheckedMap['connect'] {
  const found = isMap(source.root) ? source.root.items.find((p) => isScalar(p.key) && p.key.value === section) : undefined;
  const fields = isMap(found?.value) ? found.value.items : [];
  return { at: source.position(found), fields: new Map(fields.map((f) => [String(isScalar(f.key) ? f.key.value : ''), source.position(f)])) };
}

/** Files generated from the maps (`npm run docs`), which `pont mappings check` compares with them. */
export interface GeneratedDocs {
  /** The documentation files that may hold the tables (README.md, docs/*.md): each table is checked where it is. */
  docs: readonly string[];
  clientTypes: string;
}

/**
 * What `pont mappings check` adds to the maps' own checks, so that it fails for everything that would fail at
 * start, at run time or in CI: maps the code asks for by name, the fields it writes or reads (reported at the
 * map's `connect:`), the record types it reads.
 */
export function checkProject(dir: string, maps: Map<string, CheckedMap>, shownDir: string): MappingError[] {
  const problems: MappingError[] = [];
  const at = (file: string, [line, column]: Position, problem: string) => problems.push(new MappingError(file, line, column, problem));
  const top: Position = [1, 1];
  for (const [name, use] of Object.entries(CODE_MAPS)) {
    const found = maps.get(name);
    if (!found) {
      // A map that exists but does not compile has its own problems reported.
      if (existsSync(join(dir, `${name}.map.yaml`))) continue;
      at(join(shownDir, `${name}.map.yaml`), top, `the code asks for the map \`${name}\` (src/mapping/uses.ts), and there is no ${name}.map.yaml: a renamed map must keep its name, or the code changes with it`);
      continue;
    }
    const writes: readonly string[] = 'writes' in use ? use.writes : [];
    for (const field of writes) {
      if (!found.map.fields.includes(field)) at(found.file, found.connect.at, `the code writes the Connect field \`${field}\` into this map (src/mapping/uses.ts), which does not declare it: the pushed value would be lost`);
    }
    for (const field of 'reads' in use ? use.reads : []) {
      if (!found.map.fields.includes(field)) at(found.file, found.connect.at, `the code reads the Connect field \`${field}\` of this map (src/mapping/uses.ts), which does not declare it: it would always be null`);
    }
    for (const field of found.map.declared) {
      if (writes.length && field.required && !writes.includes(field.name)) {
        at(found.file, found.connect.fields.get(field.name) ?? found.connect.at, `\`${field.name}\` is required, and the code that writes this map never gives it (src/mapping/uses.ts): every push would fail`);
      }
    }
  }
  const set: MappingSet = { get: (n) => maps.get(n)!.map, names: () => [...maps.keys()] };
  const types = recordTypes(set);
  for (const [type, map] of Object.entries(CODE_RECORD_TYPES)) {
    // A map that exists but does not compile has its own problems reported.
    if (types.has(type) || (!maps.has(map) && existsSync(join(dir, `${map}.map.yaml`)))) continue;
    at(maps.get(map)?.file ?? join(shownDir, `${map}.map.yaml`), top, `the code reads the record type \`${type}\` (src/mapping/uses.ts), and no map declares it: this map's \`record:\` section should (\`type: ${type}\`)`);
  }
  return problems;
}

/** The documentation tables and client types generated from `maps`, out of date with them: each with the command that regenerates them. */
export function checkGenerated(set: MappingSet, { docs, clientTypes }: GeneratedDocs): MappingError[] {
  const problems: MappingError[] = [];
  const types = recordTypes(set);
  for (const readme of docs.filter((file) => existsSync(file))) {
    const text = readFileSync(readme, 'utf8');
    for (const [block, body] of Object.entries(generatedReadmeBlocks(set))) {
      const m = new RegExp(`<!-- ${block}[^>]*-->\\n([\\s\\S]*?)<!-- /${block} -->`).exec(text);
      if (m && m[1]!.trim() !== body) {
        const line = text.slice(0, m.index).split('\n').length;
        problems.push(new MappingError(readme, line, 1, `the generated table \`${block}\` is out of date with the maps: run \`npm run docs\``));
      }
    }
  }
  if (existsSync(clientTypes)) {
    // The client types are generated from the OpenAPI document, whose record shapes are the maps': same fields.
    const text = readFileSync(clientTypes, 'utf8');
    for (const type of types.values()) {
      const { shape } = type;
      const fields = recordFields(set, type);
      const m = new RegExp(`^export type ${shape} = \\{\\n([\\s\\S]*?)\\n\\};`, 'm').exec(text);
      const declared = m ? [...m[1]!.matchAll(/^ {2}(\w+)\??:/gm)].map((f) => f[1]!) : [];
      const missing = fields.filter((f) => !declared.includes(f));
      const extra = declared.filter((f) => !fields.includes(f));
      if (missing.length || extra.length) {
        const line = m ? text.slice(0, m.index).split('\n').length : 1;
        const what = [missing.length ? `lacks ${missing.join(', ')}` : '', extra.length ? `still has ${extra.join(', ')}` : ''].filter(Boolean).join(' and ');
        problems.push(new MappingError(clientTypes, line, 1, `the client type \`${shape}\` ${what}: run \`npm run docs\``));
      }
    }
  }
  return problems;
}
