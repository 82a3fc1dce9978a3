/**
 * The mapping engine: translates Connect shapes to FHIR resources and back, from the `*.map.yaml` files that
 * clinical informaticists edit (format: mappings/README.md). Maps are compiled once; every problem is reported
 * as `file:line:column: what is wrong`.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadFhirDefinitions } from '../core/fhir-definitions';
import { DATE, DATE_TIME, isFhirDate, isFhirDateTime, NOT_A_CALENDAR_DAY } from '../core/fhir-dates';
import { compileMap, MAP_SUFFIX } from './compile';
import { readV2 } from './v2';
import { MappingError } from './errors';
import { EXAMPLES_SUFFIX, runExamples } from './examples';
import { checkGenerated, checkProject, sectionPositions, type CheckedMap, type GeneratedDocs } from './project';
import { checkV2Keys, type V2MapSource } from './v2-keys';
import { checkRecordTypes } from './record';
import { codeDisplay } from './terminology';
import { z } from 'zod';
import { FHIR_ID, referencesToResolve, runFromFhir, readsPatient, runReadFhir, runToFhir, terminologyAsked, writtenPart, type ConnectField, type MapProgram } from './runtime';
import type { Resource } from '@medplum/fhirtypes';
import type { CompiledMap, MappingSet } from './types';
import { YamlSource } from './yaml-source';

export { MappingError, MappingValueError } from './errors';

export type { CompiledMap, MappingSet } from './types';
export type { ReadContext, ReadTerminology, TerminologyQuestions } from './runtime';
export { codingsWithoutDisplay, storedReference, textOf, ucumTimeCode } from './runtime';

/** The repository's `mappings/` directory. */
export const defaultMappingsDir = fileURLToPath(new URL('../../mappings/', import.meta.url));

/** File names as people type them: relative to the working directory when inside it. */
function displayPath(file: string): string {
  const rel = relative(process.cwd(), file);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : file;
}

function compiledMap(program: MapProgram): CompiledMap {
  return {
    name: program.name,
    resourceType: program.resourceType,
    record: program.record,
    fields: program.fields.map((f) => f.field.name),
    declared: program.fields.map((f) => f.field),
    shape: () => connectShape(program.fields.map((f) => f.field)),
    toFhir: (connect, context) => runToFhir(program, connect, context),
    fromFhir: (resource, context) => runFromFhir(program, resource, context),
    readsPatient: readsPatient(program),
    readFhir: (resource, context, only) => runReadFhir(program, resource, context, only),
    writtenPart: (field, value) => writtenPart(program, field, value),
    referencesOf: (resource, context) => referencesToResolve(program, resource, context),
    terminologyOf: (resource, context, into) => terminologyAsked(program, resource, context, into),
    v2: program.v2,
    fromV2: (scope) => readV2(program, scope),
  };
}

/**
 * A FHIR resource id, as every Connect, SDK, Bridge and mobile shape carries it: published once, as the `FhirId`
 * component of the OpenAPI document (the client libraries' `FhirId` type).
 */
export const FhirId = z
  .string()
  .regex(FHIR_ID)
  .meta({
    id: 'FhirId',
    format: 'fhir-id',
    description: 'A FHIR resource id: 1-64 of A-Z a-z 0-9 - and . (ids Pont generates are UUIDs; a resource another system wrote keeps its own id, e.g. 123)',
  });

function connectShape(fields: readonly ConnectField[], top = true): z.ZodObject {
  const scalar = (f: ConnectField): z.ZodType => {
    // An object: its own fields, as nullable as these (FHIR written elsewhere may lack any of them).
    if (f.fields) return connectShape(f.fields, false);
    if (f.values) return z.enum(f.values.map(String) as [string, ...string[]]);
    switch (f.type) {
      case 'id':
        return FhirId;
      case 'date':
        return z.string().regex(DATE).refine(isFhirDate, NOT_A_CALENDAR_DAY).describe('FHIR date: YYYY-MM-DD, or the month or year alone when that is all the source recorded');
      case 'date-time':
        return z.string().regex(DATE_TIME).refine(isFhirDateTime, NOT_A_CALENDAR_DAY).describe('FHIR dateTime: to the second with a zone, or the date, month or year alone when that is all the source recorded');
      case 'boolean':
        return z.boolean();
      case 'integer':
        return z.number().int();
      case 'number':
        return z.number();
      default:
        return z.string();
    }
  };
  return z.object(
    Object.fromEntries(
      fields.map((f) => {
        const one = f.list ? z.array(scalar(f)) : scalar(f);
        return [f.name, top && f.name === 'id' ? one : one.nullable()];
      }),
    ),
  );
}

interface CompiledDirectory {
  maps: Map<string, CheckedMap>;
  problems: MappingError[];
}

function compileDirectory(dir: string): CompiledDirectory {
  loadFhirDefinitions();
  const maps: CompiledDirectory['maps'] = new Map();
  const problems: MappingError[] = [];
  const shown = displayPath(resolve(dir));
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    problems.push(new MappingError(shown, 1, 1, 'no such mappings directory'));
    return { maps, problems };
  }
  const files = readdirSync(dir).sort();
  const v2Maps: V2MapSource[] = [];
  for (const name of files) {
    const file = displayPath(resolve(dir, name));
    if (name.endsWith(MAP_SUFFIX)) {
      const source = new YamlSource(file);
      const program = compileMap(source);
      problems.push(...source.problems);
      if (program) {
        maps.set(program.name, { map: compiledMap(program), file, connect: sectionPositions(source, 'connect') });
        if (program.v2) v2Maps.push({ file, program, v2: sectionPositions(source, 'v2').fields });
      }
    } else if (name.endsWith(EXAMPLES_SUFFIX)) {
      if (!files.includes(name.slice(0, -EXAMPLES_SUFFIX.length) + MAP_SUFFIX)) {
        problems.push(new MappingError(file, 1, 1, `examples without a map: expected ${name.slice(0, -EXAMPLES_SUFFIX.length)}${MAP_SUFFIX} beside it`));
      }
    } else if (/\.ya?ml$/.test(name)) {
      problems.push(new MappingError(file, 1, 1, `not a map (*${MAP_SUFFIX}) nor examples (*${EXAMPLES_SUFFIX}): rename it or move it away`));
    }
  }
  problems.push(...checkRecordTypes([...maps.values()].map((m) => m.map)));
  problems.push(...checkV2Keys(v2Maps));
  if (!problems.length && !maps.size) problems.push(new MappingError(shown, 1, 1, `no *${MAP_SUFFIX} files in this directory`));
  return { maps, problems };
}

/**
 * Compiles every `*.map.yaml` of `dir` (default: the repository's `mappings/`), anew at each call: a caller that
 * reads them often keeps the set. A bad map throws a MappingError naming the first problem's file, line and column;
 * its message lists every problem, one per line.
 */
export function loadMappings(dir: string = defaultMappingsDir): MappingSet {
  const { maps, problems } = compileDirectory(dir);
  if (problems.length) throw allProblems(problems);
  return mappingSet(maps);
}

/**
 * What the service loads, at start and on every reload (src/mapping/holder.ts): the maps once everything
 * `pont mappings check` checks passes, but the generated docs (a deployment's README is not the service's
 * business) and what the routes build from the maps (the holder's `verify`, once the routes are made): every map
 * compiles, its examples run both ways, and the code finds the maps and fields it uses. Throws like loadMappings.
 */
export function loadCheckedMappings(dir: string = defaultMappingsDir, checks: ServiceChecks = {}): MappingSet {
  const { maps, problems } = checkDirectory(dir, checks);
  if (problems.length) throw allProblems(problems);
  // The code systems' displays (toText() of a coding without one) load now, not during the first request that needs them.
  codeDisplay('', '');
  return mappingSet(maps);
}

/** One MappingError at the first problem, whose message lists every problem, one per line. */
function allProblems(problems: MappingError[]): MappingError {
  const [first] = problems;
  const error = new MappingError(first.file, first.line, first.column, first.problem);
  if (problems.length > 1) error.message += `\n${problems.slice(1).map((p) => p.message).join('\n')}`;
  return error;
}

function mappingSet(maps: CompiledDirectory['maps']): MappingSet {
  return {
    get(name) {
      const found = maps.get(name);
      if (!found) throw new Error(`No mapping named "${name}" (known: ${[...maps.keys()].join(', ')})`);
      return found.map;
    },
    names: () => [...maps.keys()],
  };
}

/**
 * What `pont mappings check` runs: what the service loads (loadCheckedMappings: every map compiles, its examples
 * run both ways with a valid R4 FHIR side, the code finds what it uses), then what the start builds from the maps
 * (`checks.verify`) and the docs generated from them (`generated`: by default, for the repository's own maps, its
 * documentation tables, README.md and docs/*.md, and client types). Never throws for a problem in the files.
 */
export function checkMappings(
  dir: string = defaultMappingsDir,
  checks: ServiceChecks = {},
  generated: GeneratedDocs | undefined = repositoryDocs(dir),
): { problems: MappingError[]; examplesRun: number; maps: string[] } {
  const { maps, problems, examplesRun } = checkDirectory(dir, checks);
  // Only maps the service loads can be built on.
  if (!problems.length && checks.verify) {
    try {
      checks.verify(dir);
    } catch (err) {
      problems.push(err instanceof MappingError ? err : new MappingError(displayPath(resolve(dir)), 1, 1, `the service would not start on these maps: ${(err as Error).message}`));
    }
  }
  // Only maps the service starts on: `npm run docs` regenerates from those (it starts the service), and a map that
  // does not compile would make the docs look out of date when the map is what to fix.
  if (!problems.length && generated) problems.push(...checkGenerated(mappingSet(maps), generated));
  return { problems, examplesRun, maps: [...maps.keys()] };
}

/** The docs generated from the repository's own maps (README.md and docs/*.md); none for another directory (a deployment's). */
function repositoryDocs(dir: string): GeneratedDocs | undefined {
  if (resolve(dir) !== resolve(defaultMappingsDir)) return undefined;
  const docsDir = resolve(dir, '..', 'docs');
  const docs = existsSync(docsDir) ? readdirSync(docsDir).filter((f) => f.endsWith('.md')).sort().map((f) => join(docsDir, f)) : [];
  return { docs: [resolve(dir, '..', 'README.md'), ...docs].map(displayPath), clientTypes: displayPath(resolve(dir, '..', 'clients/typescript/src/types.ts')) };
}

/** The values `map` declares for its Connect field `field`, as text; empty when the field's values are free. */
export function declaredValues(map: CompiledMap, field: string): string[] {
  return (map.declared.find((f) => f.name === field)?.values ?? []).map(String);
}

/**
 * What only the service's upper layers can check, given by them (src/services.ts, src/cli.ts): `searchProblem` says
 * why a record type's `search` would be refused by the store (a modifier its parameter does not take, a value it
 * cannot parse), so that the records route never answers 400 for a map's mistake. `verify` (`pont mappings check`
 * only: the start runs it itself, src/app.ts) builds on the maps of `dir` what the start builds from them before it
 * serves (the record schemas, the OpenAPI document), and throws what fails.
 */
export interface ServiceChecks {
  searchProblem?: (resourceType: string, query: Record<string, string>) => string | undefined;
  /**
   * Why an example's FHIR would not be stored (src/fhir/validate.ts: the reference types each element allows, `#id`
   * references to what is contained, required bindings), beside what @medplum/core's validator checks (r4Problem).
   */
  fhirProblem?: (resource: Resource) => string | undefined;
  verify?: (dir: string) => void;
}

/** What the service loads and the check checks alike: the maps, their examples, the code's uses of them. */
function checkDirectory(dir: string, checks: ServiceChecks): CompiledDirectory & { examplesRun: number } {
  const { maps, problems } = compileDirectory(dir);
  let examplesRun = 0;
  for (const [name, { map, file }] of maps) {
    const examplesFile = join(dir, name + EXAMPLES_SUFFIX);
    const source = existsSync(examplesFile) ? new YamlSource(displayPath(resolve(examplesFile))) : undefined;
    const run = source ? runExamples(map, source, checks.fhirProblem) : 0;
    problems.push(...(source?.problems ?? []));
    // The examples pin a map down (mappings/README.md): none, for want of the file or in an empty one, is refused.
    if (!run && !source?.problems.length) {
      problems.push(new MappingError(source?.file ?? file, 1, 1, `\`${name}\` has no examples: add \`- connect: … fhir: …\` pairs to ${name}${EXAMPLES_SUFFIX}, which pin the map down`));
    }
    examplesRun += run;
  }
  if (maps.size) problems.push(...checkProject(dir, maps, displayPath(resolve(dir))));
  for (const { map } of maps.values()) {
    const record = map.record;
    for (const query of record?.queries ?? []) {
      const problem = checks.searchProblem?.(map.resourceType, query);
      if (problem) problems.push(new MappingError(record!.at.file, record!.at.line, record!.at.column, `record type ${record!.type}: its \`search\` is refused by the store: ${problem}`));
    }
  }
  return { maps, problems, examplesRun };
}
