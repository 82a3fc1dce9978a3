import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What an informaticist writes to translate a lab's local test codes to LOINC (issue 26): a Connect field with a
 * value table into two elements, the lab's own coding and the LOINC coding, which `loinc_code` also writes.
 */
export const LOCAL_LAB = 'https://lab.example.org/CodeSystem/tests';
export const LOCAL_CODE_EDITS: Array<[from: string, to: string]> = [
  ['  loinc: http://loinc.org\n', `  loinc: http://loinc.org\n  local-lab: ${LOCAL_LAB}\n`],
  [
    '  loinc_code:     { type: string, nullable: true }\n',
    '  loinc_code:     { type: string, nullable: true }\n  local_code:     { type: string, values: [HB, GLU], nullable: true }\n',
  ],
  [
    '  loinc_code: code.coding.where(system=%loinc).code\n',
    `  loinc_code: code.coding.where(system=%loinc).code
  # The lab's own code, and the LOINC code it stands for.
  local_code:
    fhir: [code.coding.where(system=%local-lab).code, code.coding.where(system=%loinc).code]
    values:
      HB: [HB, 718-7]
      GLU: [GLU, 2345-7]
    read:                   # the lab's code without its LOINC code
      HB: [[HB, '*']]
      GLU: [[GLU, '*']]
    otherwise: ~
`,
  ],
];

/** The lab-result examples with the new field: none of them has a local code. */
export function withLocalCodeExamples(text: string): string {
  return text.replace(/^( {4}loinc_code: .*\n)/gm, '$1    local_code: null\n');
}

/** The local-code table added to the lab-result map of a copy of the maps in `dir`, and to its examples. */
export function addLocalCodeTable(dir: string): void {
  let lab = readFileSync(join(dir, 'lab-result.map.yaml'), 'utf8');
  for (const [from, to] of LOCAL_CODE_EDITS) lab = lab.replace(from, to);
  writeFileSync(join(dir, 'lab-result.map.yaml'), lab);
  writeFileSync(join(dir, 'lab-result.examples.yaml'), withLocalCodeExamples(readFileSync(join(dir, 'lab-result.examples.yaml'), 'utf8')));
}
