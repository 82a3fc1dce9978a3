import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { parse, stringify } from 'yaml';
import { defaultMappingsDir } from '../src/mapping/index';

/**
 * breakMap(file, from, to, mark?): a copy of mappings/ with `from` replaced by `to` in one map; returns where `to`
 * (or `mark` inside it) landed. Each copy's directory is pushed on `scratch`, for the caller to remove.
 */
export function mapBreaker(scratch: string[]) {
  return function breakMap(file: string, from: string, to: string, mark = to) {
    const dir = mkdtempSync(join(tmpdir(), 'pont-maps-'));
    scratch.push(dir);
    cpSync(defaultMappingsDir, dir, { recursive: true });
    const text = readFileSync(join(dir, file), 'utf8');
    expect(text.split(from)).toHaveLength(2); // `from` is there exactly once
    const broken = text.replace(from, to);
    writeFileSync(join(dir, file), broken);
    const offset = text.indexOf(from) + to.indexOf(mark);
    const before = broken.slice(0, offset).split('\n');
    return { dir, path: join(dir, file), line: before.length, column: before[before.length - 1]!.length + 1 };
  };
}

/**
 * editMaps(edits): a copy of mappings/ with each `[file, from, to]` applied (each `from` there exactly once), for a
 * service started on maps an informaticist changed (PONT_MAPPINGS_DIR). The directory is pushed on `scratch`.
 */
export function mapEditor(scratch: string[]) {
  return function editMaps(edits: Array<[file: string, from: string, to: string]>): string {
    const dir = mkdtempSync(join(tmpdir(), 'pont-maps-'));
    scratch.push(dir);
    cpSync(defaultMappingsDir, dir, { recursive: true });
    for (const [file, from, to] of edits) {
      const text = readFileSync(join(dir, file), 'utf8');
      expect(text.split(from), `${file}: ${from}`).toHaveLength(2);
      writeFileSync(join(dir, file), text.replace(from, to));
    }
    return dir;
  };
}

/**
 * Leaves out of a copy's examples file those whose FHIR names its `code` by a coding's display alone (no text). The
 * reload and shapes tests edit a map to read a code before its display, which reads those examples otherwise (an
 * informaticist making the edit would record them anew); without this, each shipped example of another writer's
 * coded-only concept broke those tests.
 */
export function dropCodedOnlyExamples(dir: string, file: string): void {
  const path = join(dir, file);
  const examples = parse(readFileSync(path, 'utf8')) as Array<{ fhir?: { code?: { text?: string; coding?: Array<{ display?: string }> } } }>;
  const codedOnly = (e: (typeof examples)[number]) => e.fhir?.code !== undefined && e.fhir.code.text === undefined && (e.fhir.code.coding ?? []).some((c) => c.display !== undefined);
  writeFileSync(path, stringify(examples.filter((e) => !codedOnly(e))));
}
