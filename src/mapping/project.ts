import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generatedReadmeBlocks } from './record-docs';
import { recordTypes } from './record-types';
import { MappingError } from './errors';
import type { CompiledMap, MappingSet } from './types';
import { CODE_MAPS, CODE_RECORD_TYPES } from './uses';

/**
 * What `pont mappings check` adds to the maps' own checks, so that it fails for everything that would fail at
 * start, at run time or in CI: maps the code asks for by name, the fields it writes, the record types it reads,
 * and (for the repository's own maps) the README tables generated from them, with the command that
 * regenerates them.
 */
export function checkProject(
  dir: string,
  maps: Map<string, { map: CompiledMap; file: string }>,
  shownDir: string,
  generated?: { readme: string; clientTypes: string },
): MappingError[] {
  const problems: MappingError[] = [];
  const at = (file: string, problem: string) => problems.push(new MappingError(file, 1, 1, problem));
  for (const [name, use] of Object.entries(CODE_MAPS)) {
    const found = maps.get(name);
    if (!found) {
      // A map that exists but does not compile has its own problems reported.
      if (existsSync(join(dir, `${name}.map.yaml`))) continue;
      at(join(shownDir, `${name}.map.yaml`), `the code asks for the map \`${name}\` (src/mapping/uses.ts), and there is no ${name}.map.yaml: a renamed map must keep its name, or the code changes with it`);
      continue;
    }
    const writes: readonly string[] = 'writes' in use ? use.writes : [];
    for (const field of writes) {
      if (!found.map.fields.includes(field)) at(found.file, `the code writes the Connect field \`${field}\` into this map (src/mapping/uses.ts), which does not declare it: the pushed value would be lost`);
    }
    for (const field of 'reads' in use ? use.reads : []) {
      if (!found.map.fields.includes(field)) at(found.file, `the code reads the Connect field \`${field}\` of this map (src/mapping/uses.ts), which does not declare it: it would always be null`);
    }
    for (const field of found.map.declared) {
      if (writes.length && field.required && !writes.includes(field.name)) {
        at(found.file, `\`${field.name}\` is required, and the code that writes this map never gives it (src/mapping/uses.ts): every push would fail`);
      }
    }
  }
  const set: MappingSet = { get: (n) => maps.get(n)!.map, names: () => [...maps.keys()] };
  const types = recordTypes(set);
  for (const [type, map] of Object.entries(CODE_RECORD_TYPES)) {
    // A map that exists but does not compile has its own problems reported.
    if (types.has(type) || (!maps.has(map) && existsSync(join(dir, `${map}.map.yaml`)))) continue;
    at(maps.get(map)?.file ?? join(shownDir, `${map}.map.yaml`), `the code reads the record type \`${type}\` (src/mapping/uses.ts), and no map declares it: this map's \`record:\` section should (\`type: ${type}\`)`);
  }
  if (!generated || problems.length) return problems;
  const { readme, clientTypes } = generated;
  if (existsSync(readme)) {
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
    for (const { shape, sources } of types.values()) {
      const fields = [...new Set([...maps.get(sources[0]!.map)!.map.fields, ...sources.flatMap((s) => Object.keys(s.tag ?? {}))])];
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
