import { cpSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { checkMappings, defaultMappingsDir, loadCheckedMappings, loadMappings } from '../src/mapping/index';
import { CODE_MAPS } from '../src/mapping/uses';
import { fhirResourceProblem } from '../src/fhir/validate';

/** Issue 26 item 6: `pont mappings check` fails for what would fail at start, at run time or in CI. */
describe('pont mappings check is the whole truth', () => {
  const repo = join(import.meta.dirname, '..');
  const scratch: string[] = [];
  beforeAll(() => loadFhirDefinitions());
  afterAll(() => scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
  const copy = () => {
    const dir = mkdtempSync(join(tmpdir(), 'pont-uses-'));
    scratch.push(dir);
    cpSync(defaultMappingsDir, dir, { recursive: true });
    return dir;
  };
  const problems = (dir: string) => checkMappings(dir).problems.map((p) => p.message.replace(dir, 'D'));
  const edit = (file: string, from: string, to: string) => {
    const text = readFileSync(file, 'utf8');
    expect(text).toContain(from);
    writeFileSync(file, text.replace(from, to));
  };
  /** The line (1-based) of the first line of `file` that starts with `start`. */
  const lineOf = (file: string, start: string) => readFileSync(file, 'utf8').split('\n').findIndex((l) => l.startsWith(start)) + 1;

  it("src/mapping/uses.ts names every map the code asks for by name", () => {
    const files = (dir: string): string[] => readdirSync(dir).flatMap((n) => (statSync(join(dir, n)).isDirectory() ? files(join(dir, n)) : n.endsWith('.ts') && !n.endsWith('.test.ts') ? [join(dir, n)] : []));
    const asked = new Set<string>(); // by the service's code: the unit tests beside it ask for maps of their own
    for (const file of files(join(repo, 'src'))) {
      for (const m of readFileSync(file, 'utf8').matchAll(/(?:mappings\.get|this\.toFhir)\('([a-z-]+)'\)?/g)) asked.add(m[1]!);
    }
    // Exactly: maps read only as record types are found by their `record:` section, never by name.
    expect([...asked].sort()).toEqual(Object.keys(CODE_MAPS).sort());
  });

  it('a renamed map: the code asks for it by name', () => {
    const dir = copy();
    renameSync(join(dir, 'cdss-alert.map.yaml'), join(dir, 'cds-alert.map.yaml'));
    renameSync(join(dir, 'cdss-alert.examples.yaml'), join(dir, 'cds-alert.examples.yaml'));
    edit(join(dir, 'cds-alert.map.yaml'), 'map: cdss-alert', 'map: cds-alert');
    expect(() => loadMappings(dir)).not.toThrow(); // it compiles ...
    expect(problems(dir)).toEqual([
      // ... but the pushes and the records route would fail
      'D/cdss-alert.map.yaml:1:1: the code asks for the map `cdss-alert` (src/mapping/uses.ts), and there is no cdss-alert.map.yaml: a renamed map must keep its name, or the code changes with it',
    ]);
  });

  it('a field the code writes, renamed; a required field the code never writes', () => {
    const dir = copy();
    const map = join(dir, 'visit.map.yaml');
    edit(map, '  note:        { type: string, nullable: true }', '  clinical_note: { type: string, nullable: true }');
    edit(map, '  note: extension', '  clinical_note: extension');
    for (const f of ['visit.examples.yaml']) writeFileSync(join(dir, f), readFileSync(join(dir, f), 'utf8').replaceAll('    note:', '    clinical_note:'));
    const lab = join(dir, 'lab-result.map.yaml');
    edit(lab, '  issued_at:      { type: date-time, nullable: true }', '  issued_at:      { type: date-time, nullable: true }\n  analyser:       { type: string, required: true }');
    edit(lab, '  issued_at: issued', '  issued_at: issued\n  analyser: device.display');
    const found = problems(dir).filter((p) => !p.includes('examples.yaml'));
    // At the map's `connect:` (where the field was renamed), and at the required field's declaration.
    expect(found).toEqual([
      `${join('D', 'visit.map.yaml')}:${lineOf(map, 'connect:')}:1: the code writes the Connect field \`note\` into this map (src/mapping/uses.ts), which does not declare it: the pushed value would be lost`,
      `${join('D', 'lab-result.map.yaml')}:${lineOf(lab, '  analyser:')}:3: \`analyser\` is required, and the code that writes this map never gives it (src/mapping/uses.ts): every push would fail`,
    ]);
  });

  it('a field the code reads by name, renamed: it would always be null', () => {
    const dir = copy();
    for (const f of ['patient-summary.map.yaml', 'patient-summary.examples.yaml']) writeFileSync(join(dir, f), readFileSync(join(dir, f), 'utf8').replaceAll('  blood_group:', '  abo_rh:'));
    expect(() => loadMappings(dir)).not.toThrow();
    expect(problems(dir)).toEqual([
      `${join('D', 'patient-summary.map.yaml')}:${lineOf(join(dir, 'patient-summary.map.yaml'), 'connect:')}:1: the code reads the Connect field \`blood_group\` of this map (src/mapping/uses.ts), which does not declare it: it would always be null`,
    ]);
  });

  it("an example whose FHIR the store would refuse, though @medplum/core's validator takes it: a `#id` naming nothing contained, a reference to a type the element does not allow", () => {
    const dir = copy();
    const orders = join(dir, 'order.examples.yaml');
    for (let i = 0; i < 2; i++) edit(orders, 'Specimen/serum', '"#serum"');
    const events = join(dir, 'adverse-event.examples.yaml');
    for (let i = 0; i < 2; i++) edit(events, 'MedicationStatement/ms1', 'MedicationRequest/ms1');
    edit(events, '- resourceType: MedicationStatement\n      id: ms1\n      status: active\n', '- resourceType: MedicationRequest\n      id: ms1\n      status: active\n      intent: order\n');
    expect(checkMappings(dir).problems.filter((p) => /not valid FHIR/.test(p.message))).toEqual([]);
    // The service and `pont mappings check` check examples as the store checks a write (src/cli.ts, src/services.ts).
    const found = checkMappings(dir, { fhirProblem: fhirResourceProblem }).problems.map((p) => p.message.replace(dir, 'D'));
    expect(found).toEqual([
      expect.stringMatching(/^D\/adverse-event\.examples\.yaml:\d+:\d+: the example's fhir is not valid FHIR R4: AdverseEvent\.suspectEntity\[0\]\.instance may refer to .*, not MedicationRequest/),
      expect.stringMatching(/^D\/order\.examples\.yaml:\d+:\d+: the example's fhir is not valid FHIR R4: #serum names no contained resource \(ref-1\)/),
    ]);
  });

  it('documentation tables and client types out of date with the maps, naming the command that regenerates them; only when every map compiles', () => {
    const dir = copy();
    // The record shapes' tables are in docs/record-shapes.md; README.md holds none of them (checked all the same).
    const shapes = join(dir, 'record-shapes.md');
    const generated = { docs: [join(dir, 'README.md'), shapes], clientTypes: join(dir, 'types.ts') };
    writeFileSync(generated.docs[0]!, readFileSync(join(repo, 'README.md'), 'utf8'));
    writeFileSync(shapes, readFileSync(join(repo, 'docs/record-shapes.md'), 'utf8'));
    writeFileSync(generated.clientTypes, readFileSync(join(repo, 'clients/typescript/src/types.ts'), 'utf8'));
    const docsProblems = () => checkMappings(dir, {}, generated).problems.map((p) => p.problem);
    expect(docsProblems()).toEqual([]);
    edit(shapes, '| `comparator` |', '| `comparater` |');
    edit(generated.clientTypes, '  comparator: "<"', '  comparater: "<"');
    expect(docsProblems()).toEqual([
      'the generated table `record-shapes` is out of date with the maps: run `npm run docs`',
      expect.stringMatching(/^the client type `\w+` lacks comparator and still has comparater: run `npm run docs`$/), // the first shape with a comparator
    ]);
    // A map that does not compile is missing from the maps, so the docs look out of date; `npm run docs` cannot
    // regenerate them from it either: the map's own problem is the one to fix.
    edit(shapes, '| `comparater` |', '| `comparator` |');
    edit(join(dir, 'visit.map.yaml'), 'resource: Encounter', 'resource: Encountr');
    const found = docsProblems();
    expect(found).toContainEqual(expect.stringMatching(/Encountr/));
    expect(found.filter((p) => p.includes('npm run docs'))).toEqual([]);
  });

  it('a map without examples, in no file or in one that lists none, is refused: by the check and at start alike', () => {
    const none = '`diagnosis` has no examples: add `- connect: … fhir: …` pairs to diagnosis.examples.yaml, which pin the map down';
    for (const [examples, file] of [['[]\n', 'diagnosis.examples.yaml'], ['# to do\n', 'diagnosis.examples.yaml'], [undefined, 'diagnosis.map.yaml']] as const) {
      const dir = copy();
      if (examples === undefined) rmSync(join(dir, 'diagnosis.examples.yaml'));
      else writeFileSync(join(dir, 'diagnosis.examples.yaml'), examples);
      expect(problems(dir), String(examples)).toEqual([`${join('D', file)}:1:1: ${none}`]);
      expect(() => loadCheckedMappings(dir)).toThrow(`${join(dir, file)}:1:1: ${none}`);
    }
  });
});
