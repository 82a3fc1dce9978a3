import { MappingError } from './errors';
import type { MapProgram } from './runtime';
import { keyScheme } from './v2-path';

type Position = [line: number, column: number];

/** A v2 map as checkV2Keys reads it: its file, its program, where each field of its `v2:` section is written. */
export interface V2MapSource {
  file: string;
  program: MapProgram;
  v2: ReadonlyMap<string, Position>;
}

/**
 * What no single v2 map can check: a resource type's key is made one way. A map's `id` (a Patient's, of PID-3) and every
 * reference to that type a v2 map makes (a result's `patient_id`, an A40's `survivor_id`), of whatever field (PID-3,
 * MRG-1), must make it alike (keyScheme): else a result is filed under another id than its patient's admission gave
 * (a second Patient, created as absent) or a merge names a record no admission made. The maps repeat the key, so that
 * each reads whole; this keeps an informaticist's edit of one from splitting a patient in two.
 */
export function checkV2Keys(maps: Iterable<V2MapSource>): MappingError[] {
  const uses: Array<{ type: string; isId: boolean; file: string; at: Position; what: string; field: string; scheme: string }> = [];
  for (const { file, program, v2 } of maps) {
    for (const [name, expression] of program.v2 ?? []) {
      if (!('alternatives' in expression)) continue; // a list of objects: no key
      const type = name === 'id' ? program.resourceType : referenceType(program, name);
      const key = type && keyScheme(expression);
      if (key) uses.push({ type: type!, isId: name === 'id', file, at: v2.get(name) ?? [1, 1], what: `${program.name}'s \`${name}\``, ...key });
    }
  }
  // The way most of a type's keys are made is the model (an informaticist edits one map at a time): each other is refused.
  const problems: MappingError[] = [];
  for (const type of new Set(uses.map((u) => u.type))) {
    const ofType = uses.filter((u) => u.type === type);
    const count = (scheme: string) => ofType.filter((u) => u.scheme === scheme).length;
    const model = ofType.reduce((best, u) => (count(u.scheme) > count(best.scheme) || (count(u.scheme) === count(best.scheme) && u.isId && !best.isId) ? u : best));
    for (const use of ofType.filter((u) => u.scheme !== model.scheme))
      problems.push(
        new MappingError(use.file, use.at[0], use.at[1], `${use.what} makes a ${type}'s key of ${use.field} otherwise than ${model.what} makes it of ${model.field} (and ${count(model.scheme) - 1} more): \`${use.scheme}\` against \`${model.scheme}\`, KEY standing for the field. One ${type} would have two ids: make every key of a ${type} alike`),
      );
  }
  return problems;
}

/** The resource type a Connect field of the map refers to (`reference: Patient`), if it is a reference. */
function referenceType(program: MapProgram, field: string): string | undefined {
  const conversion = program.fields.find((rule) => rule.field.name === field)?.conversion;
  return conversion?.kind === 'reference' ? conversion.resourceType : undefined;
}
