import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
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
