import type { Resource } from '@medplum/fhirtypes';
import type { z } from 'zod';
import type { RecordDeclaration } from './record-declaration';
import type { ConnectField, ReadContext, TerminologyQuestions, WriteContext } from './runtime';
import type { V2Problem } from './v2';
import type { V2Expression, V2Objects, V2Scope } from './v2-path';

// What a compiled map offers (src/mapping/index.ts builds them): apart, so that the checks the loader runs
// (examples.ts, project.ts) and the modules that are handed maps need not import the loader.

export interface CompiledMap {
  /** e.g. `patient-profile`: the file name without `.map.yaml`. */
  name: string;
  /** e.g. `Patient`. */
  resourceType: string;
  /** The Connect record type it reads (its `record:` section), if any. */
  record?: RecordDeclaration;
  /** The Connect fields, in the map's order. */
  fields: string[];
  /** Their declarations (type, values, nullability), for documentation. */
  declared: readonly ConnectField[];
  /**
   * The Connect shape as read from stored FHIR (readFhir), as a zod schema for the OpenAPI document: the
   * declared types and values; every field but `id` may be null (data written elsewhere may lack it).
   */
  shape(): z.ZodObject;
  /**
   * Connect shape -> FHIR resource (not yet stored). Throws MappingValueError for a value the map cannot take.
   * `context.resolved`: the stored resources the record's references point to (`referencesOf` of a first writing),
   * so that a value a fallback reads through them (a reason that is the name of the Condition referenced) is not
   * written again beside them.
   */
  toFhir(connect: Record<string, unknown>, context?: WriteContext): Resource;
  /** FHIR resource -> Connect shape: every mapped field, nullable ones as null when FHIR has nothing. */
  fromFhir(resource: Resource, context?: ReadContext): Record<string, unknown>;
  /**
   * The same, for data written elsewhere: a field whose FHIR value the map cannot express reads as null and is
   * named in `unread`, instead of failing the whole resource. `context.patient`: the Patient the resource is about,
   * for paths that look at it (`%patient.gender`), when the reader has it; `context.resolved`: the resources its
   * references point to (`referencesOf`), as far as the reader may read them. `only`: read just these fields (the
   * others are absent), for a reader that needs a few.
   */
  readFhir(resource: Resource, context?: ReadContext, only?: ReadonlySet<string>): { connect: Record<string, unknown>; unread: string[] };
  /** What writing puts into FHIR of a field's value (its objects' read-only fields left out); undefined when not written. */
  writtenPart(field: string, value: unknown): unknown;
  /** The stored resources (`Type/id`) this resource's `resolve()` paths follow: resolve them, then readFhir. */
  referencesOf(resource: Resource, context?: Pick<ReadContext, 'patient' | 'localBase'>): string[];
  /**
   * What reading this resource asks of the loaded terminology (its codings without a display, the codes its memberOf()
   * paths reach), added to `into`: answer them (src/fhir/term/lookup.ts), then readFhir with `context.terminology`.
   */
  terminologyOf(resource: Resource, context?: ReadContext, into?: TerminologyQuestions): TerminologyQuestions;
  /** Its `v2:` section (Connect field -> v2 path), when it reads HL7 v2 messages. */
  v2?: ReadonlyMap<string, V2Expression | V2Objects>;
  /**
   * The Connect values its `v2:` section reads from a message (then `toFhir`); `problems` name the v2 field
   * (`PID-7`) of each value that does not fit its Connect type, for the ACK's ERR segment.
   */
  fromV2(scope: V2Scope): { connect: Record<string, unknown>; problems: V2Problem[] };
  /** Whether reading looks at the patient the resource is about (`%patient.…`): give it to readFhir, else those conditions fail. */
  readsPatient: boolean;
}

export interface MappingSet {
  /** The map of that name; throws when there is none. */
  get(name: string): CompiledMap;
  names(): string[];
}
