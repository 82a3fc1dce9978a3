import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateResource } from '@medplum/core';
import type { Observation, Patient, Resource } from '@medplum/fhirtypes';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CODE_EDITS, LOCAL_LAB } from '../../test/local-code-table';
import { loadFhirDefinitions } from '../core/fhir-definitions';
import { checkMappings, defaultMappingsDir, loadMappings, MappingError, MappingValueError, type MappingSet } from './index';
import { r4Problem } from './examples';
import { mapBreaker } from '../../test/break-map';

type Example = { name: string; connect: Record<string, unknown>; fhir: Resource; only?: 'read'; referenced?: Resource[]; patient?: Resource };

// The engine touches no database: map compilation, its problems and the run time, in the unit tier. Starting the
// service on a bad map and `pont mappings check` stay in test/mapping.test.ts.
describe('mapping engine', () => {
  let mappings: MappingSet;
  const scratch: string[] = [];

  beforeAll(() => {
    loadFhirDefinitions();
    mappings = loadMappings();
  });
  afterAll(() => scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  const breakMap = mapBreaker(scratch);

  /** loadMappings must refuse the directory; its MappingError names the first problem. */
  function loadError(dir: string): MappingError {
    try {
      loadMappings(dir);
    } catch (err) {
      expect(err).toBeInstanceOf(MappingError);
      return err as MappingError;
    }
    throw new Error('loadMappings accepted a broken map');
  }

  describe('examples run both ways', () => {
    const files = readdirSync(defaultMappingsDir).filter((f) => f.endsWith('.examples.yaml'));
    it('every map has examples', () => {
      expect(mappings.names().sort()).toEqual([
        'adverse-event', 'allergy-record', 'appointment', 'assessment', 'blood-unit', 'body-structure', 'care-plan', 'care-team', 'cdss-alert', 'clinical-impression', 'clinical-note', 'communication', 'communication-request', 'consent', 'device', 'device-request', 'device-use', 'diagnosis', 'diagnostic-report', 'dispense', 'document', 'episode-of-care', 'family-history', 'flag', 'goal', 'imaging-study', 'immunization', 'immunization-evaluation', 'immunization-recommendation', 'lab-report', 'lab-result', 'media', 'medication-administration', 'medication-statement', 'nutrition-order', 'observation', 'order', 'patient-demographics', 'patient-profile', 'patient-summary', 'payment', 'pharmacy-stock', 'prescription', 'procedure', 'risk-assessment', 'specimen', 'task', 'v2-encounter', 'v2-merged-patient', 'v2-observation', 'v2-patient', 'v2-report', 'v2-specimen', 'vision-prescription', 'visit', 'vital',
      ]);
      expect(files.map((f) => f.replace('.examples.yaml', '')).sort()).toEqual(mappings.names().sort());
    });

    for (const file of files) {
      const name = file.replace('.examples.yaml', '');
      const examples = parse(readFileSync(join(defaultMappingsDir, file), 'utf8')) as Example[];
      describe(name, () => {
        for (const example of examples) {
          it(example.name, () => {
            const map = mappings.get(name);
            expect(map.resourceType).toBe(example.fhir.resourceType);
            // `only: read`: FHIR another system wrote, read one way; `referenced`: the resources its references name;
            // `patient`: the Patient the reader knows (%patient, %age_years).
            // Written knowing the referenced resources too, as a push does (a reason that is the Condition's name is not written again).
            const resolved = new Map((example.referenced ?? []).map((r) => [`${r.resourceType}/${r.id}`, r]));
            if (example.only !== 'read') expect(map.toFhir(example.connect, { resolved })).toEqual(example.fhir);
            expect(map.fromFhir(example.fhir, { resolved, ...(example.patient ? { patient: example.patient as Patient } : {}) })).toEqual(example.connect);
            expect(r4Problem(example.fhir)).toBeUndefined();
          });
        }
      });
    }

    it('the worked example of mappings/README.md compiles and does what the README shows', () => {
      const readme = readFileSync(join(defaultMappingsDir, 'README.md'), 'utf8');
      const [map] = [...readme.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]);
      const [connect, fhir] = [...readme.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]));
      const dir = mkdtempSync(join(tmpdir(), 'pont-maps-'));
      scratch.push(dir);
      writeFileSync(join(dir, 'diagnosis.map.yaml'), map);
      const diagnosis = loadMappings(dir).get('diagnosis');
      expect(diagnosis.toFhir(connect)).toEqual(fhir);
      expect(diagnosis.fromFhir(fhir)).toEqual(connect);
    });

    it('checkMappings runs them all and finds nothing wrong', () => {
      const total = files.reduce((n, f) => n + (parse(readFileSync(join(defaultMappingsDir, f), 'utf8')) as unknown[]).length, 0);
      const result = checkMappings();
      expect(result.problems.map((p) => p.message)).toEqual([]);
      expect(result.examplesRun).toBe(total);
      expect(total).toBeGreaterThanOrEqual(12);
    });
  });

  describe('a broken map names its file, line, column and problem', () => {
    it('unknown FHIR element, with a suggestion from the real element names', () => {
      const at = breakMap('diagnosis.map.yaml', 'display_name: code.text', 'display_name: code.txt', 'txt');
      const error = loadError(at.dir);
      expect([error.file, error.line, error.column]).toEqual([at.path, at.line, at.column]);
      expect(error.problem).toBe('unknown FHIR element `txt` in CodeableConcept (did you mean `text`?)');
      expect(error.message).toBe(`${at.path}:${at.line}:${at.column}: ${error.problem}`);
    });

    it('unknown element inside where(), and a choice type written without its type', () => {
      let at = breakMap('patient-profile.map.yaml', "telecom.where(system='phone')", "telecom.where(sytem='phone')", 'sytem');
      let error = loadError(at.dir);
      expect([error.file, error.line, error.column]).toEqual([at.path, at.line, at.column]);
      expect(error.problem).toBe('unknown FHIR element `sytem` in ContactPoint (did you mean `system`?)');

      at = breakMap('patient-profile.map.yaml', 'url=%blood-group).valueCode', 'url=%blood-group).value', 'value');
      error = loadError(at.dir);
      expect([error.line, error.column]).toEqual([at.line, at.column]);
      expect(error.problem).toMatch(/^`value` has several types: write one of .*`valueCode`/);
    });

    it('a let given as read and write: the write path is one plain path of the type its read reaches, nothing else', () => {
      let at = breakMap('lab-result.map.yaml', '    write: referenceRange.first()', '    write: referenceRange.first() | referenceRange[1]', 'referenceRange.first()');
      expect(loadError(at.dir).problem).toBe('a let is written at one path, without `|` or a function');
      at = breakMap('lab-result.map.yaml', '    write: referenceRange.first()', '    write: interpretation.first()', 'interpretation');
      expect(loadError(at.dir).problem).toBe('writes a FHIR CodeableConcept, where its `read` reaches ObservationReferenceRange');
      at = breakMap('lab-result.map.yaml', '    write: referenceRange.first()', '    written: referenceRange.first()', 'written');
      expect(loadError(at.dir).problem).toMatch(/written/);
    });

    it('unknown uris name, and a path that is not a path', () => {
      let at = breakMap('diagnosis.map.yaml', 'snomed_code: code.coding.where(system=%sct)', 'snomed_code: code.coding.where(system=%sctt)', '%sctt');
      expect(loadError(at.dir)).toMatchObject({ line: at.line, column: at.column, problem: 'unknown uris name %sctt (did you mean `sct`?): declare it under `uris`' });

      at = breakMap('diagnosis.map.yaml', 'display_name: code.text', 'display_name: code..text', '.text');
      expect(loadError(at.dir)).toMatchObject({ line: at.line, column: at.column, problem: 'malformed path `code..text | code.coding.display | code.coding.code`: expected an element name at ".text | code"' });
    });

    it('unknown resource type', () => {
      const at = breakMap('allergy-record.map.yaml', 'resource: AllergyIntolerance', 'resource: AllergyIntolerence', 'AllergyIntolerence');
      const error = loadError(at.dir);
      expect([error.file, error.line, error.column]).toEqual([at.path, at.line, at.column]);
      expect(error.problem).toBe('unknown FHIR resource type `AllergyIntolerence` (did you mean `AllergyIntolerance`?)');
    });

    it('a value-table value that is not among the Connect field’s declared values', () => {
      const at = breakMap('diagnosis.map.yaml', 'ruled_out:        [~, refuted]', 'ruledout:        [~, refuted]');
      const error = loadError(at.dir);
      expect([error.file, error.line, error.column]).toEqual([at.path, at.line, at.column]);
      expect(error.problem).toBe(
        '`ruledout` is not a declared value of `status` (active, recurrence, relapse, inactive, remission, resolved, provisional, differential, unconfirmed, confirmed, ruled_out, entered_in_error) (did you mean `ruled_out`?)',
      );
    });

    it('a declared Connect value without a row in the value table (unmapped enum value)', () => {
      const dir = breakMap('diagnosis.map.yaml', '      resolved:         [resolved, confirmed]\n', '').dir;
      const declared = breakMap('diagnosis.map.yaml', 'remission, resolved, provisional', 'remission, resolved, provisional', 'resolved');
      const error = loadError(dir);
      expect([error.line, error.column]).toEqual([declared.line, declared.column]);
      expect(error.problem).toBe('unmapped value: `resolved` of `status` has no row in its value table');
    });

    it('a FHIR code that is not valid where it goes (required binding, known code system)', () => {
      let at = breakMap('patient-profile.map.yaml', '      other: other', '      other: diverse', 'diverse');
      let error = loadError(at.dir);
      expect([error.file, error.line, error.column]).toEqual([at.path, at.line, at.column]);
      expect(error.problem).toBe(
        '`diverse` is not a code of the required ValueSet http://hl7.org/fhir/ValueSet/administrative-gender; codes: male, female, other, unknown',
      );

      at = breakMap('diagnosis.map.yaml', 'resolved:         [resolved, confirmed]', 'resolved:         [resolvd, confirmed]', 'resolvd');
      error = loadError(at.dir);
      expect([error.line, error.column]).toEqual([at.line, at.column]);
      expect(error.problem).toMatch(/^`resolvd` is not a code of the required ValueSet http:\/\/hl7.org\/fhir\/ValueSet\/condition-clinical \(did you mean `resolved`\?\)/);

      // A new Connect value needs its row, and the row's FHIR code must be valid.
      at = breakMap('patient-profile.map.yaml', 'values: [male, female, other]', 'values: [male, female, other, x]', 'x');
      expect(loadError(at.dir)).toMatchObject({ line: at.line, column: at.column, problem: 'unmapped value: `x` of `sex` has no row in its value table' });
      writeFileSync(at.path, readFileSync(at.path, 'utf8').replace('      other: other\n', '      other: other\n      x: y\n'));
      error = loadError(at.dir);
      const row = readFileSync(at.path, 'utf8').split('\n').indexOf('      x: y') + 1;
      expect([error.line, error.column]).toEqual([row, 10]);
      expect(error.problem).toMatch(/^`y` is not a code of the required ValueSet http:\/\/hl7.org\/fhir\/ValueSet\/administrative-gender/);
    });

    it('a value table that is not one-to-one does not round-trip', () => {
      const at = breakMap('clinical-note.map.yaml', '      amended: amended', '      amended: final', 'final');
      const error = loadError(at.dir);
      expect([error.file, error.line, error.column]).toEqual([at.path, at.line, at.column]);
      expect(error.problem).toBe('does not round-trip: `amended` and `signed` both give FHIR `final`, so reading FHIR back cannot tell them apart');
    });

    it('two fields written to one FHIR element do not round-trip', () => {
      const at = breakMap('diagnosis.map.yaml', 'snomed_display: code.coding.where(system=%sct).display', 'snomed_display: code.coding.where(system=%sct).code', 'code.coding');
      const first = breakMap('diagnosis.map.yaml', 'snomed_code: code.coding', 'snomed_code: code.coding');
      const error = loadError(at.dir);
      expect([error.line, error.column]).toEqual([at.line, at.column]);
      expect(error.problem).toBe(`does not round-trip: code.coding.where(system='http://snomed.info/sct').code is already mapped on line ${first.line}; one FHIR element cannot hold two values`);
    });

    it('a local-code table may write the LOINC coding that loinc_code writes: the two must agree', () => {
      const dir = mkdtempSync(join(tmpdir(), 'pont-maps-'));
      scratch.push(dir);
      cpSync(defaultMappingsDir, dir, { recursive: true });
      const file = join(dir, 'lab-result.map.yaml');
      let text = readFileSync(file, 'utf8');
      for (const [from, to] of LOCAL_CODE_EDITS) {
        expect(text.split(from)).toHaveLength(2);
        text = text.replace(from, to);
      }
      writeFileSync(file, text);
      const lab = loadMappings(dir).get('lab-result');
      const result = { id: '0b0a3c57-0d55-4b2e-9a39-6f3f2b9a1c03', patient_id: '5d9f1a2e-8c4b-4f6e-9d3a-2b7c1e0f4a11', test_name: 'Hb', status: 'final', value_numeric: 13.5, unit: 'g/dL' };
      const coded = lab.toFhir({ ...result, local_code: 'HB' }) as Observation;
      expect(coded.code.coding).toEqual([
        { system: LOCAL_LAB, code: 'HB' },
        { system: 'http://loinc.org', code: '718-7' },
      ]);
      expect(lab.fromFhir(coded)).toMatchObject({ local_code: 'HB', loinc_code: '718-7' });
      const both = lab.toFhir({ ...result, local_code: 'HB', loinc_code: '718-7' }) as Observation;
      expect(both.code.coding).toHaveLength(2);
      // The same record, but for `codings`, which lists the codings in the order they were written.
      expect(lab.fromFhir(both)).toEqual({ ...lab.fromFhir(coded), codings: [{ system: 'http://loinc.org', code: '718-7', display: null }, { system: LOCAL_LAB, code: 'HB', display: null }] });
      expect(() => lab.toFhir({ ...result, local_code: 'HB', loinc_code: '2345-7' })).toThrow(/local_code: "718-7" contradicts "2345-7"/);
      // As the lab's system writes it (its code only: loinc_code is the table's), and as others do (LOINC only: no local code).
      expect(lab.fromFhir({ ...coded, code: { coding: [{ system: LOCAL_LAB, code: 'GLU' }] } })).toMatchObject({ local_code: 'GLU', loinc_code: '2345-7' });
      expect(lab.fromFhir({ ...coded, code: { coding: [{ system: 'http://loinc.org', code: '2345-7' }] } })).toMatchObject({ local_code: null, loinc_code: '2345-7' });
    });

    it('malformed YAML', () => {
      const at = breakMap('diagnosis.map.yaml', 'display_name: code.text', 'display_name: "code.text');
      const error = loadError(at.dir);
      expect(error.file).toBe(at.path);
      expect(error.problem).toMatch(/^malformed YAML: /);
      expect(error.line).toBeGreaterThanOrEqual(at.line);
    });

    it('unknown keys of the map format', () => {
      let at = breakMap('clinical-note.map.yaml', '    reference: Encounter', '    refrence: Encounter', 'refrence');
      let error = loadError(at.dir);
      expect([error.file, error.line, error.column]).toEqual([at.path, at.line, at.column]);
      expect(error.problem).toBe(
        'unknown key `refrence` in the rule of `visit_id` (did you mean `reference`?); allowed: fhir, values, read, otherwise, also, reference, narrative, write, fields, description',
      );

      at = breakMap('allergy-record.map.yaml', '\nfields:', '\nfeilds:', 'feilds');
      error = loadError(at.dir);
      expect([error.line, error.column]).toEqual([at.line, at.column]);
      expect(error.problem).toMatch(/^unknown key `feilds` in a map file \(did you mean `fields`\?\)/);

      at = breakMap('allergy-record.map.yaml', 'created_at:  { type: date-time, nullable: true }', 'created_at:  { type: datetime, nullable: true }', 'datetime');
      error = loadError(at.dir);
      expect([error.line, error.column]).toEqual([at.line, at.column]);
      expect(error.problem).toMatch(/^unknown Connect type `datetime` \(did you mean `date-time`\?\)/);
    });

    it('a Connect field left unmapped, and a rule for a field that is not declared', () => {
      let at = breakMap('allergy-record.map.yaml', '  created_at: recordedDate\n', '');
      const declared = breakMap('allergy-record.map.yaml', '  created_at:  {', '  created_at:  {', 'created_at');
      expect(loadError(at.dir)).toMatchObject({ line: declared.line, column: declared.column, problem: 'Connect field `created_at` is not mapped: give it a rule under `fields`' });

      at = breakMap('allergy-record.map.yaml', '  created_at: recordedDate', '  created: recordedDate', 'created');
      expect(loadError(at.dir)).toMatchObject({ line: at.line, column: at.column, problem: '`created` is not a field declared under `connect` (did you mean `created_at`?)' });
    });

    it('a reference to a resource type the element cannot point to', () => {
      const at = breakMap('diagnosis.map.yaml', '    fhir: subject\n    reference: Patient', '    fhir: subject\n    reference: Practitioner', 'subject');
      expect(loadError(at.dir)).toMatchObject({ line: at.line, column: at.column, problem: 'subject cannot refer to a Practitioner; it refers to Patient, Group' });
    });

    it('a field of one value read through a repeating element must say which, or read them all', () => {
      const refused = "category is one value, and `category` repeats: the path reads the first it finds. Say which, right after it (`category[0]`, `category.first()`, `category.where(…)`) or read them all (`….join('; ')`, a list field)";
      let at = breakMap('flag.map.yaml', "  category_code: category[0].coding[0].code", '  category_code: category.coding[0].code', 'category.coding');
      expect(loadError(at.dir)).toMatchObject({ line: at.line, column: at.column, problem: refused.replaceAll('category is', 'category_code is') });
      at = breakMap('flag.map.yaml', "  category: category.join('; ') | category.text.join('; ')", "  category: category.join('; ') | category.text", 'category.text');
      expect(loadError(at.dir)).toMatchObject({ line: at.line, column: at.column, problem: refused });
      // Through a let: its path is the start of the field's.
      at = breakMap('flag.map.yaml', "  category: category.join('; ') | category.text.join('; ')", "  category: '%cat.text'", '%cat.text');
      const withLet = readFileSync(at.path, 'utf8').replace('\nconnect:', '\nlet:\n  cat: category\n\nconnect:');
      writeFileSync(at.path, withLet);
      expect(loadError(at.dir).problem).toBe(refused);
      // A where() further on narrows the element only when it is on that element's own (a concept's coding, a value):
      // the phones of every contact are not the first contact's.
      expect(loadError(breakMap('patient-profile.map.yaml', "  phone_number: telecom.where(system='phone').value", "  phone_number: contact.telecom.where(system='phone').value").dir).problem).toMatch(/`contact` repeats/);
      expect(loadError(breakMap('flag.map.yaml', "  category: category.join('; ') | category.text.join('; ')", '  category: extension.valueString').dir).problem).toMatch(/`extension` repeats/);
      // Said: a position, where(), first(); a concept's codings and a reference field are not counted.
      for (const said of ['category[0].text', "category.where(text='x').text", 'category.first().text', "category.join('; ') | category[0].text", 'code.coding.display', "category.coding.where(system='urn:x').code", "extension.where(url='urn:x').valueString"]) {
        expect(() => loadMappings(breakMap('flag.map.yaml', "  category: category.join('; ') | category.text.join('; ')", `  category: ${said}`).dir)).not.toThrow();
      }
    });

    it('every problem of a file is reported, not only the first', () => {
      let dir = breakMap('clinical-note.map.yaml', '      amended: amended', '      amended: final').dir;
      writeFileSync(join(dir, 'diagnosis.map.yaml'), readFileSync(join(dir, 'diagnosis.map.yaml'), 'utf8').replace('code.text', 'code.txt'));
      const { problems } = checkMappings(dir);
      expect(problems.map((p) => p.problem)).toEqual([
        expect.stringMatching(/^does not round-trip: `amended` and `signed`/),
        expect.stringMatching(/^unknown FHIR element `txt`/),
      ]);
      dir = mkdtempSync(join(tmpdir(), 'pont-maps-'));
      scratch.push(dir);
      expect(checkMappings(dir).problems[0].problem).toBe('no *.map.yaml files in this directory');
    });

    it('an example that does not round-trip is reported at the differing value', () => {
      const at = breakMap('allergy-record.examples.yaml', '    criticality: high\n    code:\n      text: Penicillin', '    criticality: low\n    code:\n      text: Penicillin', 'low');
      const { problems, examplesRun } = checkMappings(at.dir);
      expect(examplesRun).toBeGreaterThan(0);
      expect(problems.map((p) => [p.file, p.line, p.column])).toContainEqual([at.path, at.line, at.column]);
      expect(problems.map((p) => p.problem)).toContain('does not round-trip: toFhir(connect) gives "high" at criticality, the example has "low"');
    });

  });

  describe('run time', () => {
    const diagnosis = () => mappings.get('diagnosis');
    const example = (file: string, i = 0) => (parse(readFileSync(join(defaultMappingsDir, file), 'utf8')) as Example[])[i];

    // How long compiling takes is a start-up figure (docs/benchmarks.md), not an assertion here.
    it('compiles every map of the directory, each under its file name', () => {
      const files = readdirSync(defaultMappingsDir).filter((f) => f.endsWith('.map.yaml')).map((f) => f.replace(/\.map\.yaml$/, ''));
      expect(loadMappings().names().sort()).toEqual(files.sort());
    });

    it('refuses Connect values it cannot translate, naming the field', () => {
      const { connect } = example('diagnosis.examples.yaml');
      expect(() => diagnosis().toFhir({ ...connect, status: 'chronic' })).toThrow(new MappingValueError('diagnosis', 'status', '"chronic" is not one of "active", "recurrence", "relapse", "inactive", "remission", "resolved", "provisional", "differential", "unconfirmed", "confirmed", "ruled_out", "entered_in_error"'));
      // Ids are FHIR ids: another system's `123` is one, a space or a 65th character is not.
      expect((diagnosis().toFhir({ ...connect, id: '1', patient_id: '123' }) as any).subject).toEqual({ reference: 'Patient/123' });
      expect(() => diagnosis().toFhir({ ...connect, patient_id: 'not an id' })).toThrow(/patient_id: "not an id" is not a valid id/);
      expect(() => diagnosis().toFhir({ ...connect, patient_id: 'a'.repeat(65) })).toThrow(/patient_id: .* is not a valid id/);
      expect(() => diagnosis().toFhir({ ...connect, created_at: '2024-03-12T09:30' })).toThrow(/created_at: .* is not a valid date-time/);
      // Two fields reaching one element must agree: SNOMED CT as the main code and a different SNOMED CT equivalent.
      expect(() => diagnosis().toFhir({ ...connect, codings: [], code_system: 'SNOMED', code: '1', snomed_code: '2' })).toThrow(/snomed_code: "2" contradicts "1"/);
      // And with the codings they were read with (mappings/README.md "Object fields"): the first coding is ICD-10.
      expect(() => diagnosis().toFhir({ ...connect, code_system: 'SNOMED', code: '1' })).toThrow(/code_system: "http:\/\/snomed.info\/sct" contradicts "http:\/\/hl7.org\/fhir\/sid\/icd-10"/);
      expect(() => diagnosis().toFhir({ ...connect, display_name: undefined })).toThrow(/display_name: is required/);
      expect(() => mappings.get('patient-profile').toFhir({ health_id: 'CM100000000006', sex: 'F' })).toThrow(MappingValueError);
      expect(() => diagnosis().fromFhir({ resourceType: 'Patient' })).toThrow(/expected a Condition/);
    });

    it('a start and an end of one choice element are one Period: a 24-hour collection written back stays a period', () => {
      // Issue 38: a lab result read from effectivePeriod (effective_at, effective_end) was refused on write-back
      // (effectiveDateTime beside effectivePeriod: "Only one effective[x]").
      const { connect } = example('lab-result.examples.yaml');
      const written = mappings.get('lab-result').toFhir({ ...connect, effective_at: '2026-03-01T08:00:00Z', effective_end: '2026-03-02T08:00:00Z' }) as Record<string, any>;
      expect(written.effectiveDateTime).toBeUndefined();
      expect(written.effectivePeriod).toEqual({ start: '2026-03-01T08:00:00Z', end: '2026-03-02T08:00:00Z' });
      expect(() => validateResource(written as any)).not.toThrow();
      expect(mappings.get('lab-result').fromFhir(written as any)).toMatchObject({ effective_at: '2026-03-01T08:00:00Z', effective_end: '2026-03-02T08:00:00Z' });
    });

    it('ignores fields it does not map, and leaves out what Connect leaves out', () => {
      const patient = mappings.get('patient-profile').toFhir({ health_id: 'CM100000000006', first_name: 'Jean', purpose: 'triage' });
      expect(patient).toEqual({
        resourceType: 'Patient',
        identifier: [{ system: 'https://pont.health/fhir/sid/health-id', value: 'CM100000000006' }],
        name: [{ use: 'official', given: ['Jean'] }],
      });
    });

    it('reads FHIR written elsewhere: other identifiers and names, absolute references, markup, unlisted codes', () => {
      const profile = mappings.get('patient-profile').fromFhir({
        resourceType: 'Patient',
        identifier: [{ system: 'urn:oid:1.2.3', value: 'MRN-1' }, { system: 'https://pont.health/fhir/sid/health-id', value: 'CM100000000006' }],
        name: [{ use: 'nickname', given: ['Jojo'] }, { use: 'official', family: 'Mballa', given: ['Jean', 'Paul'] }],
        gender: 'unknown',
        telecom: [{ system: 'email', value: 'j@example.org' }],
      });
      expect(profile).toEqual({
        health_id: 'CM100000000006',
        first_name: 'Jean',
        last_name: 'Mballa',
        date_of_birth: null,
        sex: null, // `unknown` has no Connect value: the map says `otherwise: ~`
        phone_number: null,
        country_code: null,
        blood_group: null,
      });

      const condition = { ...example('diagnosis.examples.yaml').fhir } as Record<string, any>;
      condition.subject = { reference: 'https://fhir.example.org/R4/Patient/5d9f1a2e-8c4b-4f6e-9d3a-2b7c1e0f4a11/_history/3' };
      condition.code = { text: 'Malaria', coding: [{ system: 'http://id.who.int/icd/release/11/mms', code: '1F40' }] };
      // An absolute reference is ours only under this server's own base; another server's Patient/5d9f… is not ours.
      expect(diagnosis().fromFhir(condition as Resource).patient_id).toBeUndefined();
      expect(diagnosis().fromFhir(condition as Resource, { localBase: 'https://fhir.example.org/R4' })).toMatchObject({
        patient_id: '5d9f1a2e-8c4b-4f6e-9d3a-2b7c1e0f4a11',
        code_system: 'other', // `otherwise: other`
        code: '1F40',
        snomed_code: null,
      });
      condition.clinicalStatus = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'remission' }] };
      condition.verificationStatus = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-ver-status', code: 'hearsay' }] };
      expect(diagnosis().fromFhir(condition as Resource)).toMatchObject({ status: 'remission' }); // a `read` row: [remission, '*']
      condition.clinicalStatus = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'dormant' }] };
      expect(() => diagnosis().fromFhir(condition as Resource)).toThrow(/status: the map has no value for FHIR "dormant" \+ "hearsay"/);

      const note = { ...example('clinical-note.examples.yaml').fhir } as Record<string, any>;
      note.section = [
        {
          code: { coding: [{ system: 'http://loinc.org', code: '18776-5' }] },
          text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml"><p>Rest &amp; fluids<br/>Review in <b>2</b> days</p></div>' },
        },
      ];
      expect(mappings.get('clinical-note').fromFhir(note as Resource)).toMatchObject({
        history_of_present_illness: null,
        treatment_plan: 'Rest & fluids\nReview in 2 days',
      });
    });
  });

  describe('`defaults`: written where the fields wrote nothing', () => {
    const V2_0074 = 'http://terminology.hl7.org/CodeSystem/v2-0074';
    const report = (categories?: unknown) =>
      mappings.get('lab-report').toFhir({ id: 'r1', patient_id: 'p1', test_name: 'Blood culture', status: 'final', result_ids: [], ...(categories === undefined ? {} : { categories }) }) as { category?: unknown };
    it("a report's section is the record's own (MB), else LAB; a category of another system keeps LAB beside it", () => {
      expect(report([{ system: V2_0074, code: 'MB', display: null }]).category).toEqual([{ coding: [{ system: V2_0074, code: 'MB' }] }]);
      expect(report().category).toEqual([{ coding: [{ system: V2_0074, code: 'LAB' }] }]);
      expect(report([]).category).toEqual([{ coding: [{ system: V2_0074, code: 'LAB' }] }]);
      expect(report([{ system: 'http://loinc.org', code: 'LP7839-6', display: null }]).category).toEqual([
        { coding: [{ system: 'http://loinc.org', code: 'LP7839-6' }, { system: V2_0074, code: 'LAB' }] },
      ]);
    });
    it('a default writes an element FHIR requires, as a fixed value does; without either the map is refused', () => {
      const withDefault = breakMap('clinical-note.map.yaml', '\nfixed:\n', '\ndefaults:\n');
      const [example] = (parse(readFileSync(join(withDefault.dir, 'clinical-note.examples.yaml'), 'utf8')) as Example[]).filter((e) => e.only !== 'read');
      const note = loadMappings(withDefault.dir).get('clinical-note').toFhir(example!.connect) as { title?: string };
      expect(note.title).toBe('Clinical note');
      const without = breakMap('clinical-note.map.yaml', '  title: Clinical note\n', '');
      expect(loadError(without.dir).message).toMatch(/FHIR requires Composition\.title/);
    });
  });
});
