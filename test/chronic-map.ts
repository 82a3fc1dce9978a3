import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultMappingsDir } from '../src/mapping/index';

/**
 * What an informaticist writes to mark a diagnosis chronic from a value set they load (issue 46, "used by the maps"):
 * a read-only Connect boolean `chronic`, `code.memberOf(%chronic)`, the value set's canonical URL under `uris`. Not
 * loaded, it reads null; the examples say so (they list no `value_sets`).
 */
export const CHRONIC_VS = 'https://example.org/fhir/ValueSet/chronic-conditions';
export const CHRONIC_EDITS: Array<[file: string, from: string, to: string]> = [
  ['diagnosis.map.yaml', '  sct: http://snomed.info/sct\n', `  sct: http://snomed.info/sct\n  chronic: ${CHRONIC_VS}\n`],
  ['diagnosis.map.yaml', '  snomed_display: { type: string, nullable: true }\n', '  snomed_display: { type: string, nullable: true }\n  chronic:        { type: boolean, nullable: true }\n'],
  [
    'diagnosis.map.yaml',
    '  snomed_display: code.coding.where(system=%sct).display\n',
    '  snomed_display: code.coding.where(system=%sct).display\n  chronic:\n    fhir: code.memberOf(%chronic)\n    write: false\n',
  ],
];

/** The diagnosis examples with the new field: no value set loaded, so null. */
export function withChronicExamples(text: string): string {
  return text.replace(/^( {4}snomed_display: .*\n)/gm, '$1    chronic: null\n');
}

/** A copy of mappings/ with the chronic marker (CHRONIC_EDITS, the examples' `chronic: null`), in a new directory under `parent`. */
export function chronicMapsDir(parent: string): string {
  const dir = mkdtempSync(join(parent, 'pont-maps-chronic-'));
  cpSync(defaultMappingsDir, dir, { recursive: true });
  for (const [file, from, to] of CHRONIC_EDITS) {
    const text = readFileSync(join(dir, file), 'utf8');
    if (text.split(from).length !== 2) throw new Error(`${file}: ${JSON.stringify(from)} is not there exactly once`);
    writeFileSync(join(dir, file), text.replace(from, to));
  }
  const examples = join(dir, 'diagnosis.examples.yaml');
  writeFileSync(examples, withChronicExamples(readFileSync(examples, 'utf8')));
  return dir;
}
