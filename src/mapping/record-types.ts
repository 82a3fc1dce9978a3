import type { CompiledMap, MappingSet } from './types';

/**
 * Connect record types (records retrieval `type=`) and where each comes from: FHIR searches (one or more),
 * each read through a mapping file. The maps declare them (their `record:` section, mappings/README.md): the
 * records route, the summary, the OpenAPI document, the documentation tables and the client types follow from the maps.
 */
export interface RecordSource {
  resourceType: string;
  /** FHIR search parameters that select the type's resources (the patient is added, as `patientParam`). */
  query: Record<string, string>;
  patientParam: 'patient' | 'subject';
  /** The search parameter that dates them (newest first), and the record field it fills. */
  dateParam: string;
  dateField: string;
  map: string;
  /** Searches whose matches this source does not read (each a source of a record type its map excepts). */
  except?: Array<Record<string, string>>;
  /** Constant fields of the records from this source (which source a merged type's record came from). */
  tag?: Record<string, string>;
}

export interface RecordType {
  name: string;
  /** The consent data class (docs/integrators.md "Consent") that covers it. */
  dataClass: string;
  /** Where the records come from; with several, the shape is the first map's fields (plus tags) and lists merge by date. */
  sources: RecordSource[];
  /** The shape's name in the OpenAPI document and the documentation. */
  shape: string;
}

/** The record types of a set of compiled maps, by its first map: maps are immutable, a reload compiles new ones. */
const typesOfMaps = new WeakMap<CompiledMap, { maps: CompiledMap[]; types: ReadonlyMap<string, RecordType> }>();

/**
 * The record types the maps declare, by name (sorted); each type's map naming its shape is its first source. Worked
 * out once per version of the maps (every records request asks): not to be changed by the caller.
 */
export function recordTypes(mappings: MappingSet): ReadonlyMap<string, RecordType> {
  const maps = mappings.names().map((n) => mappings.get(n));
  const known = maps.length ? typesOfMaps.get(maps[0]!) : undefined;
  if (known && known.maps.length === maps.length && known.maps.every((m, i) => m === maps[i])) return known.types;
  const types = declaredTypes([...maps]);
  if (maps.length) typesOfMaps.set(maps[0]!, { maps, types });
  return types;
}

function declaredTypes(maps: CompiledMap[]): Map<string, RecordType> {
  const types = new Map<string, RecordType>();
  // The map giving the shape first: its fields are the type's.
  maps.sort((a, b) => Number(!a.record?.shape) - Number(!b.record?.shape) || (a.name < b.name ? -1 : 1));
  for (const map of maps) {
    const declared = map.record;
    if (!declared) continue;
    const sources: RecordSource[] = declared.queries.map((query) => ({ resourceType: map.resourceType, query, patientParam: declared.patientParam, dateParam: declared.dateParam, dateField: declared.dateField, map: map.name, ...(declared.tag ? { tag: declared.tag } : {}) }));
    const type = types.get(declared.type);
    if (type) type.sources.push(...sources);
    else types.set(declared.type, { name: declared.type, dataClass: declared.dataClass, shape: declared.shape ?? declared.type, sources });
  }
  // What a map excepts, once every type's sources are known: the queries of the excepted types' sources of its resource.
  for (const map of maps) {
    const excepted = map.record?.except?.flatMap((e) => types.get(e.type)?.sources.filter((s) => s.resourceType === map.resourceType) ?? []);
    if (!excepted?.length) continue;
    for (const source of types.get(map.record!.type)!.sources) if (source.map === map.name) source.except = excepted.map((s) => s.query);
  }
  return new Map([...types].sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** The names of the tags a type's sources add to their records (which source a merged record came from). */
export function tagNames({ sources }: RecordType): string[] {
  return [...new Set(sources.flatMap((s) => Object.keys(s.tag ?? {})))];
}

/** The fields of a type's records: its shape map's fields, then its sources' tags. */
export function recordFields(mappings: MappingSet, type: RecordType): string[] {
  return [...new Set([...mappings.get(type.sources[0]!.map).fields, ...tagNames(type)])];
}

/** The record type of that name; throws when no map declares it (`pont mappings check` names those the code uses). */
export function recordType(mappings: MappingSet, name: string): RecordType {
  const type = recordTypes(mappings).get(name);
  if (!type) throw new Error(`No map declares the record type "${name}"`);
  return type;
}
