import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Condition } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHRONIC_VS, chronicMapsDir } from '../../test/chronic-map';
import { loadFhirDefinitions } from '../core/fhir-definitions';
import { exampleValueSets } from './examples';
import { checkMappings, loadMappings, MappingError, type MappingSet } from './index';
import { parseExpression } from './path';
import { codesOf, codingDisplay, membership, textOf, type ReadTerminology } from './runtime';

// Issue 46 (4), the maps read the loaded terminology: memberOf() and the displays of codings without one. The rules
// here, on a terminology given in memory; the database's answers in test/terminology-maps.test.ts.

const SCT = 'http://snomed.info/sct';
const LOINC = 'http://loinc.org';
const V2_0074 = 'http://terminology.hl7.org/CodeSystem/v2-0074';

/** A loaded SNOMED CT fragment, a LOINC code and the chronic value set (diabetes, asthma). */
const loaded: ReadTerminology = {
  display: (system, code) =>
    (
      { [`${SCT}|44054006`]: 'Diabetes mellitus type 2', [`${SCT}|195967001`]: 'Asthma', [`${LOINC}|718-7`]: 'Hemoglobin [Mass/volume] in Blood', [`${V2_0074}|HM`]: 'Haematology (loaded)' } as Record<string, string>
    )[`${system}|${code}`],
  memberOf: (valueSet, system, code) => (valueSet === CHRONIC_VS ? (system === undefined || system === SCT) && ['44054006', '195967001'].includes(code) : undefined),
};

describe('memberOf() in the path language', () => {
  it('takes a uris name or a quoted canonical URL, and ends the path', () => {
    expect(parseExpression('code.memberOf(%chronic)')[0]!.finish).toMatchObject({ kind: 'memberOf', valueSet: 'chronic', alias: true });
    expect(parseExpression("code.memberOf('http://example.org/vs|2')")[0]!.finish).toMatchObject({ kind: 'memberOf', valueSet: 'http://example.org/vs|2' });
    expect(() => parseExpression('code.memberOf(chronic)')).toThrow(/memberOf\(\) takes a value set/);
    expect(() => parseExpression('code.memberOf(%chronic).text')).toThrow(/ends a path/);
    expect(() => parseExpression('code.memberof(%chronic)')).toThrow(/did you mean 'memberOf'/);
  });
});

describe('membership: the codes of a value, any of them in the value set', () => {
  it('a code, a Coding, a CodeableConcept (any of its codings)', () => {
    expect(codesOf('active')).toEqual([{ code: 'active' }]);
    expect(codesOf({ system: SCT, code: '1' })).toEqual([{ system: SCT, code: '1' }]);
    expect(codesOf({ coding: [{ system: SCT, code: '1' }, { code: '2' }, { display: 'no code' }], text: 't' })).toEqual([{ system: SCT, code: '1' }, { code: '2' }]);
    expect(codesOf({ text: 'text only' })).toEqual([]);
    const diabetes = { coding: [{ system: 'http://hl7.org/fhir/sid/icd-10', code: 'E11.9' }, { system: SCT, code: '44054006' }] };
    expect(membership(loaded, CHRONIC_VS, [diabetes])).toBe(true);
    expect(membership(loaded, CHRONIC_VS, [{ coding: [{ system: SCT, code: '10509002' }] }])).toBe(false);
    // The same code from another system is not the concept.
    expect(membership(loaded, CHRONIC_VS, [{ system: 'http://example.org/local', code: '44054006' }])).toBe(false);
    expect(membership(loaded, CHRONIC_VS, ['195967001'])).toBe(true);
  });
  it('nothing (null) without a code, with a value set not loaded, or without the terminology (writing, examples)', () => {
    expect(membership(loaded, CHRONIC_VS, [])).toBeUndefined();
    expect(membership(loaded, CHRONIC_VS, [{ text: 'text only' }])).toBeUndefined();
    expect(membership(loaded, 'https://example.org/fhir/ValueSet/not-loaded', [{ system: SCT, code: '44054006' }])).toBeUndefined();
    expect(membership(undefined, CHRONIC_VS, [{ system: SCT, code: '44054006' }])).toBeUndefined();
  });
});

describe('the display of a coding without one', () => {
  it('the loaded code system first, then the FHIR and HL7 code systems Pont ships, else none', () => {
    expect(codingDisplay(loaded, V2_0074, 'HM')).toBe('Haematology (loaded)');
    expect(codingDisplay(undefined, V2_0074, 'HM')).toBe('Hematology');
    expect(codingDisplay(loaded, LOINC, '718-7')).toBe('Hemoglobin [Mass/volume] in Blood');
    expect(codingDisplay(undefined, LOINC, '718-7')).toBeUndefined();
  });
  it('toText(): a coding of its own display keeps it; without, the loaded display, else its code', () => {
    expect(textOf({ coding: [{ system: LOINC, code: '718-7' }] }, loaded)).toBe('Hemoglobin [Mass/volume] in Blood');
    expect(textOf({ coding: [{ system: LOINC, code: '718-7' }] })).toBe('718-7');
    expect(textOf({ coding: [{ system: LOINC, code: '718-7', display: 'Hb' }] }, loaded)).toBe('Hb');
    expect(textOf({ code: { coding: [{ system: SCT, code: '195967001' }] }, status: 'active' }, loaded)).toBe('Asthma (active)');
  });
});

describe('a map with memberOf() (the chronic marker of test/chronic-map.ts)', () => {
  let dir: string;
  let maps: MappingSet;
  const scratch: string[] = [];
  beforeAll(() => {
    loadFhirDefinitions();
    dir = chronicMapsDir(tmpdir());
    scratch.push(dir);
    maps = loadMappings(dir);
  });
  /** What `pont mappings check` says of the directory. */
  const check = () => checkMappings(dir).problems.map((p) => p.problem);

  it('pont mappings check: the examples read chronic as null (they list no value_sets: none is loaded)', () => {
    expect(check()).toEqual([]);
  });
  afterAll(() => scratch.forEach((d) => rmSync(d, { recursive: true, force: true })));

  const condition = (coding: Array<{ system: string; code: string; display?: string }>, text?: string): Condition => ({
    resourceType: 'Condition',
    id: 'c1',
    subject: { reference: 'Patient/p1' },
    encounter: { reference: 'Encounter/e1' },
    code: { coding, ...(text ? { text } : {}) },
  });

  it('reads true, false, or null when the value set is not loaded (or the reader knows no terminology)', () => {
    const map = maps.get('diagnosis');
    expect(map.readFhir(condition([{ system: SCT, code: '44054006' }], 'Diabetes'), { terminology: loaded }).connect.chronic).toBe(true);
    expect(map.readFhir(condition([{ system: SCT, code: '10509002' }], 'Acute bronchitis'), { terminology: loaded }).connect.chronic).toBe(false);
    const none: ReadTerminology = { display: () => undefined, memberOf: () => undefined };
    expect(map.readFhir(condition([{ system: SCT, code: '44054006' }], 'Diabetes'), { terminology: none }).connect.chronic).toBeNull();
    expect(map.readFhir(condition([{ system: SCT, code: '44054006' }], 'Diabetes')).connect.chronic).toBeNull();
    // Never written: a value given for it is ignored.
    expect(map.toFhir({ ...map.readFhir(condition([{ system: SCT, code: '44054006' }], 'Diabetes')).connect, code_system: 'SNOMED', status: 'active', chronic: true })).not.toHaveProperty('chronic');
  });

  it('the question it asks: the codes memberOf() reaches, and every coding without a display', () => {
    const map = maps.get('diagnosis');
    const asked = map.terminologyOf(condition([{ system: SCT, code: '44054006' }, { system: LOINC, code: 'x', display: 'has one' }]));
    expect(asked.members).toEqual([
      { valueSet: CHRONIC_VS, system: SCT, code: '44054006' },
      { valueSet: CHRONIC_VS, system: LOINC, code: 'x' },
    ]);
    expect(asked.codings).toEqual([{ system: SCT, code: '44054006' }]);
  });

  it("a coding's display without one reads as the loaded code system's (the name, the SNOMED display, each coding's)", () => {
    const map = maps.get('diagnosis');
    const read = map.readFhir(condition([{ system: SCT, code: '195967001' }]), { terminology: loaded }).connect;
    expect(read).toMatchObject({ display_name: 'Asthma', snomed_display: 'Asthma', codings: [{ system: SCT, code: '195967001', display: 'Asthma' }] });
    // Without the terminology (the examples, a write read back): the code, as before.
    expect(maps.get('diagnosis').readFhir(condition([{ system: SCT, code: '195967001' }])).connect).toMatchObject({ display_name: '195967001', snomed_display: null });
  });

  it('an example may list value_sets (loaded for it): its memberOf() answers from them', () => {
    const file = join(dir, 'diagnosis.examples.yaml');
    const text = readFileSync(file, 'utf8');
    // The first example (ICD-10 B50.9 with SNOMED CT 62676009, malaria) with the chronic value set loaded: false.
    const loadedFor = (codes: string[]) => text.replace(/^( {2}connect:\n)/m, `  value_sets:\n    ${CHRONIC_VS}: [${codes.map((c) => `"${c}"`).join(', ')}]\n$1`);
    writeFileSync(file, loadedFor([`${SCT}|44054006`]).replace(/^( {4}chronic: )null$/m, '$1false'));
    expect(check()).toEqual([]);
    writeFileSync(file, loadedFor([`${SCT}|62676009`]).replace(/^( {4}chronic: )null$/m, '$1true'));
    expect(check()).toEqual([]);
    // Loaded, and the example still says null: the check names the difference.
    writeFileSync(file, loadedFor([`${SCT}|62676009`]));
    expect(check()).toEqual(['does not round-trip: fromFhir(fhir) gives true at chronic, the example has null']);
    writeFileSync(file, text.replace(/^( {2}connect:\n)/m, '  value_sets: [oops]\n$1'));
    expect(check()).toEqual(["`value_sets` maps each value set's canonical URL to the list of its codes, each `system|code`"]);
    writeFileSync(file, text);
    expect(exampleValueSets({ [CHRONIC_VS]: ['no-system'] })).toBeUndefined();
  });

  it('problems: an unknown uris name, a field that is not a boolean, an element that is not coded, a field written', () => {
    const file = join(dir, 'diagnosis.map.yaml');
    const text = readFileSync(file, 'utf8');
    const problem = (from: string, to: string): string => {
      writeFileSync(file, text.replace(from, to));
      try {
        loadMappings(dir);
      } catch (err) {
        expect(err).toBeInstanceOf(MappingError);
        return (err as MappingError).problem;
      } finally {
        writeFileSync(file, text);
      }
      throw new Error('loaded');
    };
    expect(problem('code.memberOf(%chronic)', 'code.memberOf(%chronik)')).toBe("unknown uris name %chronik (did you mean `chronic`?): declare the value set's canonical URL under `uris`");
    expect(problem('  chronic:        { type: boolean, nullable: true }', '  chronic:        { type: string, nullable: true }')).toBe('memberOf() reads true or false: chronic is a string, not a boolean');
    expect(problem('code.memberOf(%chronic)', 'recordedDate.memberOf(%chronic)')).toBe('memberOf() asks whether a code is in a value set: recordedDate is a FHIR dateTime, not a code, Coding or CodeableConcept');
    expect(problem('    fhir: code.memberOf(%chronic)\n    write: false\n', '    fhir: code.memberOf(%chronic)\n')).toMatch(/^writing needs one alternative of `code.memberOf\(%chronic\)`/);
  });
});
