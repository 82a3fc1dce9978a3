/**
 * One HL7 v2 message -> the FHIR resources the maps make of it (mappings/v2-*.map.yaml), or the reason it is
 * refused, naming the v2 field for the ACK's ERR segment. What a message type gives is here (which maps, for
 * which segments); what each field becomes is in the maps, which informaticists edit.
 */
import { Hl7Message, Hl7Segment } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { ApiError } from '../core/errors';
import { MAX_RESOURCE_STRING } from '../core/limits';
import { validateFhirResource } from '../fhir/validate';
import { MappingValueError, type CompiledMap, type MappingSet } from '../mapping/index';
import { unescapeV2, v2Charset, type V2Scope } from '../mapping/v2-path';

/** OBX-2 types whose OBX-5 is one value (NM, SN, a code, a date): a repetition is refused, never dropped. */
const ONE_VALUE_TYPES = ['NM', 'SN', 'CE', 'CWE', 'DT', 'TS', 'DTM'];

/** HL7 table 0357 (message error condition codes) as the ERR segment carries them. */
export const ErrorCondition = {
  segmentSequence: ['100', 'Segment sequence error'],
  requiredFieldMissing: ['101', 'Required field missing'],
  dataType: ['102', 'Data type error'],
  tableValue: ['103', 'Table value not found'],
  duplicateKey: ['205', 'Duplicate key identifier'],
  unsupportedMessageType: ['200', 'Unsupported message type'],
  unsupportedEvent: ['201', 'Unsupported event code'],
  unsupportedVersion: ['203', 'Unsupported version id'],
  internal: ['207', 'Application internal error'],
} as const;

export interface V2Error {
  /** `PID-3`: segment and field (and component) the error is about. */
  location: string;
  /** Which of the message's segments of that name (1: the first; ERR-2's ERL.2), when not the first. */
  sequence?: number;
  condition: (typeof ErrorCondition)[keyof typeof ErrorCondition];
  text: string;
}

export type Translation =
  | { ok: true; controlId: string; type: string; resources: Array<Record<string, unknown>> }
  | { ok: false; ack: 'AE' | 'AR'; error: V2Error };

/** The most resources one Bridge sync batch may hold (Pont's MAX_BATCH_RESOURCES). */
export const MAX_BATCH_RESOURCES = 1000;
/**
 * The most bytes of FHIR (as JSON) one batch carries: a quarter of Pont's default request body limit
 * (PONT_MAX_BODY_BYTES, 16 MiB), so that a batch is never refused whole for its size (413); a message whose own FHIR
 * is larger is refused at once (AR).
 */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/**
 * What Pont would refuse of a message however often it is sent (more resources or bytes of FHIR than a batch holds, a
 * string over 1 MiB): refused at once (AR), so that the sender learns it, instead of an AA for what never reaches Pont.
 * `length`: the message's, in characters; a message no longer than 1 MiB has no longer value (un-escaping never
 * lengthens one), and its resources are not walked (~15 µs of every message's translation).
 */
export function beyondPont(resources: Array<Record<string, unknown>>, length = Infinity): { location: string; text: string } | undefined {
  if (resources.length > MAX_BATCH_RESOURCES) return { location: 'OBX', text: `the message gives more than ${MAX_BATCH_RESOURCES} resources, the most Pont takes at once: send it in parts` };
  // Whatever the message's length: its repetitions may multiply (5,000 flags an OBX, each an interpretation).
  const bytes = Buffer.byteLength(JSON.stringify(resources));
  if (bytes > MAX_BATCH_BYTES) return { location: 'OBX-5', text: `the message gives ${bytes} bytes of FHIR; the agent sends Pont at most ${MAX_BATCH_BYTES} at once: send it in parts` };
  if (length <= MAX_RESOURCE_STRING) return undefined;
  // An attachment's `data` (an ED's PDF) may be longer, as Pont takes it (its body limit bounds it).
  const tooLong = (value: unknown): boolean =>
    typeof value === 'string' ? value.length > MAX_RESOURCE_STRING : Array.isArray(value) ? value.some(tooLong) : !!value && typeof value === 'object' && Object.entries(value).some(([k, v]) => k !== 'data' && tooLong(v));
  const long = resources.find(tooLong);
  if (long) return { location: long.resourceType === 'Observation' ? 'OBX-5' : 'MSH', text: `a value of the ${long.resourceType as string} is over ${MAX_RESOURCE_STRING} characters, the most Pont keeps in one` };
  return undefined;
}

/** v2.3 to v2.8 (and their dot releases). */
export const SUPPORTED_VERSION = /^2\.(3|3\.1|4|5|5\.1|6|7|7\.1|8|8\.1|8\.2)$/;

/** The maps translate reads: the agent starts only with all of them (an older copy of mappings/ may lack one). */
export const V2_MAPS = ['v2-patient', 'v2-merged-patient', 'v2-encounter', 'v2-report', 'v2-observation', 'v2-specimen'] as const;

/** A v2 segment's name: three capital letters or digits, the first a letter (PID, OBX, ZLB). */
const SEGMENT_NAME = /^[A-Z][A-Z0-9]{2}$/;

/**
 * ADT events by what they say of the patient and the visit (v2 table 0003). The demographics are the admissions', the
 * registrations' and the updates' (their PID written whole); the visit's own events (a transfer, a discharge, a change
 * of class, a cancellation) name their patient and change nothing of them, as a result does. The person's events (A28
 * add, A31 update) have a PV1 because v2 requires one, of no visit: the patient alone.
 */
const DEMOGRAPHICS = ['A01', 'A04', 'A05', 'A08', 'A28', 'A31'];
// Not A13 (cancel discharge): its PV1 may carry the visit number alone (v2 asks only what is pertinent to the
// event), and the agent writes an Encounter whole, so it would empty the visit it reopens; it is AR until Pont takes
// an update of some elements from an agent.
const VISIT_EVENTS = ['A02', 'A03', 'A06', 'A07', 'A11'];
const PERSON_EVENTS = ['A28', 'A31'];
/** Events that begin a visit: one without a visit number (PV1-19) is a visit of its own message. */
const BEGINS_VISIT = ['A01', 'A04', 'A05'];

/** The message types the agent handles, and what their events are. */
const HANDLED: Record<string, readonly string[]> = { ADT: [...DEMOGRAPHICS, ...VISIT_EVENTS, 'A40'].sort(), ORU: ['R01'] };

const refuse = (ack: 'AE' | 'AR', location: string, condition: V2Error['condition'], text: string, sequence?: number): Translation => ({
  ok: false,
  ack,
  error: { location, condition, text, ...(sequence && sequence > 1 ? { sequence } : {}) },
});

/** The message's type and control id, read before anything else (the ACK needs them even for a refused message). */
export function header(message: Hl7Message): { type: string; event: string; controlId: string; version: string } {
  const msh = message.getSegment('MSH');
  return {
    type: msh?.getField(9)?.getComponent(1) ?? '',
    event: msh?.getField(9)?.getComponent(2) ?? '',
    controlId: msh?.getField(10)?.toString() ?? '',
    version: msh?.getField(12)?.getComponent(1) ?? '',
  };
}

/**
 * What makes a message itself for the queue (its idempotency key): the sending application and facility (MSH-3,
 * MSH-4) with the control id (MSH-10), which HL7 makes unique only within its sender: a laboratory's MSG001 and
 * the admission system's MSG001 are two messages; the same one resent is one.
 */
export function messageKey(message: Hl7Message): string {
  const msh = message.getSegment('MSH');
  return [msh?.getField(3)?.toString() ?? '', msh?.getField(4)?.toString() ?? '', header(message).controlId].join('|');
}

/**
 * Where the first NUL character of a message is (`PID-5`), if it has one: Pont stores no NUL (PostgreSQL's text
 * cannot hold it) and refuses a request that carries one, so such a message is refused at once (AE), not queued.
 */
export function nulAt(text: string): string | undefined {
  const at = text.indexOf('\u0000');
  return at < 0 ? undefined : fieldAt(text, at);
}

/** The field (`PID-5`) of the character at `at` in a message's text. */
export function fieldAt(text: string, at: number): string {
  const segment = text.slice(0, at).split(/[\r\n]/).at(-1)!;
  const separator = text[3] ?? '|';
  const fields = segment.split(separator).length - 1;
  const name = segment.slice(0, 3);
  return `${name}-${name === 'MSH' ? fields + 1 : fields}`;
}

/** `text`: the message as received (its length for beyondPont, its NULs for nulAt). */
export function translate(message: Hl7Message, maps: MappingSet, text?: string): Translation {
  const { type, event, controlId, version } = header(message);
  // Before anything is read of the message: a NUL anywhere is what is wrong with it, wherever it is (MSH-12 too).
  const nul = text === undefined ? undefined : nulAt(text);
  if (nul) return refuse('AE', nul, ErrorCondition.dataType, `${nul} holds a NUL character (0x00), which Pont does not store: send the message without it`);
  if (!SUPPORTED_VERSION.test(version)) return refuse('AR', 'MSH-12', ErrorCondition.unsupportedVersion, `HL7 version ${JSON.stringify(version)} is not supported: 2.3 to 2.8`);
  if (!Object.hasOwn(HANDLED, type)) return refuse('AR', 'MSH-9', ErrorCondition.unsupportedMessageType, `message type ${JSON.stringify(type)} is not handled (${Object.entries(HANDLED).map(([t, e]) => `${t}^${e.join('/')}`).join(', ')})`);
  if (!HANDLED[type]!.includes(event)) return refuse('AR', 'MSH-9.2', ErrorCondition.unsupportedEvent, `${type}^${event} is not handled (${type}^${HANDLED[type]!.join('/')})`);
  if (!v2Charset(message)) return refuse('AR', 'MSH-18', ErrorCondition.internal, `character set ${JSON.stringify(message.getSegment('MSH')?.getField(18)?.toString())} is not read (UTF-8, ASCII, 8859/1, 8859/15): its text would be stored wrong`);
  if (!controlId) return refuse('AE', 'MSH-10', ErrorCondition.requiredFieldMissing, 'MSH-10 (message control id) is empty: it is what makes a resend change nothing');
  // A name that is no v2 segment's (`pid`, in lower case) would be passed over, and what follows it read as the
  // segment before's: a result filed under the patient of the PID before.
  const misnamed = message.segments.find((s) => !SEGMENT_NAME.test(s.name));
  if (misnamed) return refuse('AE', misnamed.name.slice(0, 20) || '?', ErrorCondition.segmentSequence, `${JSON.stringify(misnamed.name.slice(0, 20))} is no segment name (three capital letters or digits, PID, OBX, ZLB): the message cannot be read whole`);
  if (!message.getSegment('PID')) return refuse('AE', 'PID', ErrorCondition.segmentSequence, `${type}^${event} without a PID segment`);
  try {
    const resources = type === 'ORU' ? results(message, maps) : admission(message, event, maps);
    const beyond = beyondPont(resources, text?.length);
    if (beyond) return refuse('AR', beyond.location, ErrorCondition.internal, beyond.text);
    // What Pont's validation would refuse (a period that ends before it starts, a range upside down) is refused here,
    // naming the segment it came from: acknowledged AA, it would reach Pont and be refused there, and be lost.
    for (const resource of resources) {
      try {
        validateFhirResource(resource as unknown as Resource);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        const from = ORIGIN.get(resource);
        return refuse('AE', from?.segment ?? 'MSH', ErrorCondition.dataType, `${err.message}: Pont would refuse it; correct ${from?.segment ?? 'the message'} and send it again`, from?.sequence);
      }
    }
    return { ok: true, controlId, type: `${type}^${event}`, resources };
  } catch (err) {
    if (err instanceof FieldError) return refuse('AE', err.location, err.condition, err.message, err.sequence);
    throw err;
  }
}

class FieldError extends Error {
  constructor(
    readonly location: string,
    readonly condition: V2Error['condition'],
    message: string,
    /** Which segment of that name (ERR-2's ERL.2): set where the segments are walked (results). */
    public sequence?: number,
  ) {
    super(message);
  }
}

/** `fn`, a FieldError it throws said of the `sequence`th segment of its name (the 2nd OBX, not the first). */
function inSegment<T>(sequence: number, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof FieldError && err.sequence === undefined) err.sequence = sequence;
    throw err;
  }
}

/** The map's FHIR for this scope; a value the map cannot take is a FieldError at the v2 field it came from. */
function apply(map: CompiledMap, scope: V2Scope): Record<string, unknown> {
  const { connect, problems } = map.fromV2(scope);
  if (problems.length) throw new FieldError(problems[0]!.location, ErrorCondition.dataType, problems[0]!.message);
  try {
    return map.toFhir(connect) as unknown as Record<string, unknown>;
  } catch (err) {
    if (!(err instanceof MappingValueError)) throw err;
    // An object's field (`interpretations[1].flag`) is read from its list's v2 field (OBX-8).
    const location = map.v2?.get(err.field.replace(/[[.].*$/, ''))?.location ?? err.field;
    const missing = /is required/.test(err.message);
    throw new FieldError(
      location,
      missing ? ErrorCondition.requiredFieldMissing : ErrorCondition.tableValue,
      missing ? `${location} is empty: ${map.name} needs it (${err.field})` : `${location}: ${err.message.replace(/^[^:]+: [^:]+: /, '')} (${map.name}'s ${err.field})`,
    );
  }
}

const reference = (resource: Record<string, unknown>) => `${resource.resourceType as string}/${resource.id as string}`;

/** The segment each resource of a translation was made of (the 2nd OBX: `{ segment: 'OBX', sequence: 2 }`), for ERR-2. */
const ORIGIN = new WeakMap<Record<string, unknown>, { segment: string; sequence?: number }>();
function madeOf<T extends Record<string, unknown>>(resource: T, segment: string, sequence?: number): T {
  ORIGIN.set(resource, { segment, ...(sequence && sequence > 1 ? { sequence } : {}) });
  return resource;
}

/**
 * ADT: the patient (PID; written whole by the events of DEMOGRAPHICS, else only if Pont has none), its visit (PV1) when
 * it has a visit number (PV1-19), an A40's merge (MRG). An event that begins a visit (A01, A04, A05) without one
 * (PV1-19 is optional in v2) is a visit of its own message (v2-encounter's key), which no later message names; any
 * other event without one changes the patient alone, and a person's event (A28, A31) never has a visit.
 */
function admission(message: Hl7Message, event: string, maps: MappingSet): Array<Record<string, unknown>> {
  const scope = { message };
  // The maps read the first PID (and MRG): a second (an A40 of several merges, which ADT_A39 allows, or two patients
  // in one admission) would be passed over under an AA. Refused, naming it, so that each is sent in a message of its own.
  for (const name of ['PID', 'MRG', 'PV1']) {
    if (message.getAllSegments(name).length > 1) {
      throw new FieldError(name, ErrorCondition.segmentSequence, `ADT^${event} gives a second ${name}, which the agent would pass over: send each ${event === 'A40' ? 'merge' : 'patient'} in a message of its own`, 2);
    }
  }
  // A discharge names its patient and changes nothing of them (created if Pont has no record yet), as a result does:
  // its PID is often thin, and the agent writes a Patient whole, so an empty PID-11 would empty the address (HL7 v2
  // means an empty field as "no change").
  const patient = apply(maps.get('v2-patient'), scope);
  // A merge's survivor is written whole: it carries the link to the record it replaces.
  const out = [madeOf(DEMOGRAPHICS.includes(event) || event === 'A40' ? patient : ifAbsent(patient), 'PID')];
  if (event === 'A40') {
    if (!message.getSegment('MRG')) throw new FieldError('MRG', ErrorCondition.segmentSequence, 'ADT^A40 without an MRG segment: which record is merged away?');
    const merged = apply(maps.get('v2-merged-patient'), scope);
    // A record merged into itself would replace itself and be replaced by itself.
    if (merged.id === patient.id) throw new FieldError('MRG-1', ErrorCondition.tableValue, 'MRG-1 names the record PID-3 names: a record is not merged into itself');
    out.push(madeOf(merged, 'MRG'));
    return out;
  }
  const pv1 = message.getSegment('PV1');
  if (pv1 && !PERSON_EVENTS.includes(event) && (pv1.getField(19)?.toString() || BEGINS_VISIT.includes(event))) out.push(madeOf(apply(maps.get('v2-encounter'), scope), 'PV1'));
  return out;
}

/**
 * The OBXs that give the same code (OBX-3) without a sub-id (OBX-4) under one OBR, as a narrative or a culture's
 * lines often come: each with its set id (OBX-1, else its place under the OBR), which tells them apart in the
 * Observation's id, so that none replaces another; a resend or correction of the same lines finds the same ones. An
 * OBX whose code comes once keeps the id the map gives it.
 */
function repeatedLines(message: Hl7Message): Map<Hl7Segment, string> {
  const groups: Hl7Segment[][] = [];
  for (const segment of message.segments) {
    // An SPM's facts (the OBXs after it) are a group of their own: their set ids start again under each specimen.
    if (segment.name === 'OBR' || segment.name === 'SPM') groups.push([]);
    else if (segment.name === 'OBX' && groups.length && !segment.getField(4)?.toString()) groups.at(-1)!.push(segment);
  }
  const out = new Map<Hl7Segment, string>();
  for (const group of groups) {
    const code = (obx: Hl7Segment) => obx.getField(3)?.getComponent(1) ?? '';
    const count = new Map<string, number>();
    for (const obx of group) count.set(code(obx), (count.get(code(obx)) ?? 0) + 1);
    group.forEach((obx, i) => {
      if (count.get(code(obx))! < 2) return;
      const setId = obx.getField(1)?.toString() ?? '';
      out.set(obx, /^[A-Za-z0-9.]{1,10}$/.test(setId) ? setId : String(i + 1));
    });
  }
  return out;
}

/**
 * The Bridge protocol's tag of a resource to create only if the facility has none of that id yet (docs/integrators.md
 * "Bridge Agent protocol"; Pont's side: IF_ABSENT_TAG of src/bridge/sync.ts). The agent speaks the protocol as any
 * agent would, over HTTP: test/hl7-agent.test.ts checks the two agree.
 */
const IF_ABSENT_TAG = { system: 'https://pont.health/fhir/CodeSystem/bridge-write', code: 'if-absent' };

function ifAbsent(resource: Record<string, unknown>): Record<string, unknown> {
  const meta = (resource.meta ?? {}) as { tag?: unknown[] };
  return { ...resource, meta: { ...meta, tag: [...(meta.tag ?? []), IF_ABSENT_TAG] } };
}

/**
 * The NTE segments that follow the segment at `at` (an OBX's notes, v2-to-FHIR's NTE[Observation.note]; an OBR's, its
 * report's conclusion; an SPM's, its specimen's note), past the PRT segments v2.7 puts between, as one NTE whose NTE-3
 * is their comments, a line each (a comment of `""` or of spaces is none): what the map reads as `NTE-3`. Empty when
 * none follows, so that the map never reads another segment's note (a segment the scope lacks is the message's first
 * of that name).
 */
function notesAfter(message: Hl7Message, at: number): Hl7Segment {
  const lines: string[] = [];
  const r = message.context.repetitionSeparator;
  for (let i = at + 1; ['NTE', 'PRT'].includes(message.segments[i]?.name ?? ''); i++) {
    const nte = message.segments[i]!;
    if (nte.name !== 'NTE') continue;
    for (const line of (nte.getField(3)?.toString() ?? '').split(r)) if (line.trim() && line.trim() !== '""') lines.push(line);
  }
  const e = message.context.escapeCharacter;
  return new Hl7Segment(['NTE', '', '', lines.join(`${e}.br${e}`)], message.context);
}

/** What tells the facts of one specimen of an OBR from another's: `S` and its set id (SPM-1), else its place. */
function specimenSuffix(spm: Hl7Segment, place: number): string {
  const setId = spm.getField(1)?.toString() ?? '';
  return `S${/^[A-Za-z0-9.]{1,10}$/.test(setId) ? setId : place}`;
}

/** The MIME type of an ED's data subtype (table 0291, and what vendors write). */
const ED_TYPES: Record<string, string> = { PDF: 'application/pdf', JPEG: 'image/jpeg', JPG: 'image/jpeg', PNG: 'image/png', GIF: 'image/gif', TIFF: 'image/tiff', TIF: 'image/tiff', RTF: 'application/rtf', HTML: 'text/html', XML: 'application/xml', TEXT: 'text/plain', PLAIN: 'text/plain', OCTET_STREAM: 'application/octet-stream' };

/**
 * An OBX of type ED (`^AP^PDF^Base64^JVBERi0…`: source, type of data, subtype, encoding, data) as an Attachment: its
 * data in base64 (Base64 as given, Hex converted, A as its text), its MIME type from the subtype (else the type TEXT's
 * text/plain), its title the test's name. An ED without data, or of another encoding, is AE naming OBX-5.
 */
function presentedForm(segment: Hl7Segment, message: Hl7Message, sequence: number): Record<string, unknown> {
  const field = segment.getField(5);
  const [type, subtype, encoding, data] = [2, 3, 4, 5].map((c) => (field?.getComponent(c) ?? '').trim());
  const base64 = /^base64$/i.test(encoding!) ? data!.replace(/\s+/g, '')
    : /^hex$/i.test(encoding!) && /^([0-9A-Fa-f]{2})+$/.test(data!) ? Buffer.from(data!, 'hex').toString('base64')
    : /^a$/i.test(encoding!) ? Buffer.from(unescapeV2(data!, message), 'utf8').toString('base64')
    : undefined;
  if (!base64 || !/^[A-Za-z0-9+/]+={0,2}$/.test(base64)) {
    throw new FieldError('OBX-5', ErrorCondition.dataType, `OBX-5: an ED needs its data (ED-5) in an encoding the agent reads (ED-4 Base64, Hex or A), got ${JSON.stringify(encoding)}${base64 === '' ? ' and no data' : ''}`, sequence);
  }
  const contentType = ED_TYPES[subtype!.toUpperCase()] ?? (type!.toUpperCase() === 'TEXT' ? 'text/plain' : 'application/octet-stream');
  const title = unescapeV2(segment.getField(3)?.getComponent(2) || segment.getField(3)?.getComponent(1) || '', message).trim();
  // No map reads the title (it is the test's name, read here): its NUL (`\X00\`, or unreadable bytes) is named here,
  // not left for Pont to refuse as the report's.
  if (title.includes('\u0000')) throw new FieldError('OBX-3', ErrorCondition.dataType, 'OBX-3: the test\'s name holds a NUL character (0x00) or escaped bytes that are no text, which Pont does not store', sequence);
  return { contentType, data: base64, ...(title ? { title } : {}) };
}

/** The `name` segment of the group the segment at `at` begins (a PID's PV1): before the next PID, ORC or OBR. */
function groupSegment(message: Hl7Message, at: number, name: string): Hl7Segment | undefined {
  for (let i = at + 1; i < message.segments.length && !['PID', 'ORC', 'OBR'].includes(message.segments[i]!.name); i++) if (message.segments[i]!.name === name) return message.segments[i];
  return undefined;
}

/**
 * ORU^R01: for each patient (a PATIENT_RESULT group: its PID, and its PV1 with a visit number), then for each OBR that
 * follows, its specimens (SPM), its report and the Observation of each OBX that follows it; a later PID is the patient
 * of what follows it, never the first's. The report names its specimens, and each result names its OBR's specimen
 * when there is one only (an Observation names at most one: of two, none rather than a guess). The OBXs after an SPM
 * (the v2.5 SPECIMEN group's) are facts of that specimen: each names it as its focus, and is none of the report's
 * results. The patient and the visit are created if Pont has no record of them yet, never updated: an ORU's PID and
 * PV1 name whom and which visit the results are about, often with little more than an identifier, and a result is no
 * admission (an A08 replaces the demographics). Without the visit, the results' reference to it would name nothing and
 * Pont would refuse the message it had acknowledged.
 */
function results(message: Hl7Message, maps: MappingSet): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  /**
   * What this message gives already, by reference: a patient named twice, a specimen under two OBRs, is written once;
   * one id given twice with other content (one visit number for two patients, two results whose keys fold together)
   * is AE 205 at the second, which Pont would otherwise write over the first, or refuse whole.
   */
  const written = new Map<string, Record<string, unknown>>();
  const add = (resource: Record<string, unknown>, segment: string, sequence?: number) => {
    madeOf(resource, segment, sequence);
    const ref = reference(resource);
    const before = written.get(ref);
    if (!before) {
      written.set(ref, resource);
      out.push(resource);
    } else if (JSON.stringify(before) !== JSON.stringify(resource)) {
      throw new FieldError(segment, ErrorCondition.duplicateKey, `${segment} gives ${ref} a second time, other than the first (a key two of the message's ${resource.resourceType as string}s share): give each its own`, sequence);
    }
  };
  const lineOf = repeatedLines(message);
  /** The segments every map reads in this patient's group: its PID and its PV1 (an empty one when it has none). */
  let group: Map<string, Hl7Segment> | undefined;
  let obr: Hl7Segment | undefined;
  /** The OBR's ORC (the segment before it), else an empty one: ORC-3 may carry the filler order number instead of OBR-3. */
  let orc: Hl7Segment | undefined;
  let report: Record<string, unknown> | undefined;
  const flush = () => {
    if (report) out.push(report);
    report = undefined;
  };
  const seen = { PID: 0, OBR: 0, OBX: 0, SPM: 0 };
  /** Each SPM's Specimen, and what tells its facts' ids from another specimen's (its set id). */
  const specimens = new Map<Hl7Segment, { reference: string; suffix: string }>();
  /** The Observation's specimen: the one whose SPM it follows (a fact of it), else its OBR's only one. */
  let factOf: { reference: string; suffix: string } | undefined;
  let sole: { reference: string } | undefined;
  for (const [at, segment] of message.segments.entries()) {
    // More than a batch holds is refused whole (beyondPont): the rest is not worth translating.
    if (out.length > MAX_BATCH_RESOURCES) return out;
    if (segment.name === 'PID') {
      flush();
      obr = undefined;
      const sequence = ++seen.PID;
      const pv1 = groupSegment(message, at, 'PV1');
      group = new Map([['PID', segment], ['PV1', pv1 ?? new Hl7Segment(['PV1'], message.context)]]);
      const current = group;
      add(ifAbsent(inSegment(sequence, () => apply(maps.get('v2-patient'), { message, current }))), 'PID', sequence);
      if (pv1?.getField(19)?.toString()) add(ifAbsent(apply(maps.get('v2-encounter'), { message, current })), 'PV1', sequence);
    } else if (segment.name === 'OBR') {
      flush();
      obr = segment;
      const sequence = ++seen.OBR;
      if (!group) throw new FieldError('OBR', ErrorCondition.segmentSequence, 'an OBR before its patient (PID)', sequence);
      orc = message.segments[at - 1]?.name === 'ORC' ? message.segments[at - 1]! : new Hl7Segment(['ORC'], message.context);
      const inOrder = new Map([...group, ['ORC', orc], ['OBR', segment]]);
      report = madeOf({ ...inSegment(sequence, () => apply(maps.get('v2-report'), { message, current: new Map([...inOrder, ['NTE', notesAfter(message, at)]]) })), result: [] }, 'OBR', sequence);
      // One report of each filler order number: a second would replace the first in Pont, with its results.
      if (written.has(reference(report))) {
        throw new FieldError('OBR-3', ErrorCondition.duplicateKey, `OBR-3 ${JSON.stringify(segment.getField(3)?.toString() ?? '')} is the filler order number of an earlier OBR of this message (or of its ORC-3), and one report would replace the other: give each order its own (or key the v2-report and v2-observation maps by OBR-4 too)`, sequence);
      }
      written.set(reference(report), report);
      // The OBR's specimens come after its results: read first, so that its results can name them. One specimen
      // under two OBRs (the same accession number) is one Specimen.
      const named = new Set<string>();
      for (let i = at + 1; i < message.segments.length && !['OBR', 'PID'].includes(message.segments[i]!.name); i++) {
        const spm = message.segments[i]!;
        if (spm.name !== 'SPM') continue;
        const current = new Map([...inOrder, ['SPM', spm], ['NTE', notesAfter(message, i)]]);
        const specimen = inSegment(++seen.SPM, () => apply(maps.get('v2-specimen'), { message, current }));
        specimens.set(spm, { reference: reference(specimen), suffix: specimenSuffix(spm, named.size + 1) });
        add(specimen, 'SPM', seen.SPM);
        named.add(reference(specimen));
      }
      if (named.size) report.specimen = [...named].map((r) => ({ reference: r }));
      sole = named.size === 1 ? { reference: [...named][0]! } : undefined;
      factOf = undefined;
    } else if (segment.name === 'SPM') {
      factOf = specimens.get(segment);
      if (!factOf) throw new FieldError('SPM', ErrorCondition.segmentSequence, 'an SPM before any OBR: a specimen is of an order', seen.SPM + 1);
    } else if (segment.name === 'OBX') {
      const sequence = ++seen.OBX;
      if (!obr || !report || !group) throw new FieldError('OBX', ErrorCondition.segmentSequence, 'an OBX before any OBR', sequence);
      // An SN whose form FHIR has no value for is refused rather than stored as a number that says another result:
      // a comparator FHIR lacks (`<>^5`, not equal), a separator or suffix other than a range's `-` and a ratio's `:` or `/` (`^2^+`), two numbers with a
      // comparator (`>^10^-^20`), or a range or ratio without its second number. The forms FHIR has are the map's.
      // The value's type is OBX-2's first component (the map's): `SN^Structured` is an SN too.
      const valueType = segment.getField(2)?.getComponent(1) ?? '';
      // An encapsulated document (ED: a PDF of the report, an image) is a form of the report, as R4 keeps one
      // (DiagnosticReport.presentedForm), not a result: an Observation has no value of its kind.
      if (valueType === 'ED') {
        ((report.presentedForm ??= []) as unknown[]).push(presentedForm(segment, message, sequence));
        continue;
      }
      // A number, a code or a date is one value: a second repetition (`5~6`, two organisms) would be dropped. (A text's
      // repetitions are its lines.)
      if (ONE_VALUE_TYPES.includes(valueType) && (segment.getField(5)?.toString() ?? '').includes(message.context.repetitionSeparator)) {
        throw new FieldError('OBX-5', ErrorCondition.dataType, `OBX-5 ${JSON.stringify(segment.getField(5)!.toString())}: a result of type ${valueType} is one value, not several: send each in an OBX of its own`, sequence);
      }
      if (valueType === 'SN') {
        const sn = segment.getField(5);
        const [comparator, first, separator, second] = [1, 2, 3, 4].map((c) => sn?.getComponent(c) ?? '');
        const given = [comparator, first, separator, second].some(Boolean);
        const problem = !['', '=', '<', '>', '<=', '>='].includes(comparator) ? `the comparator ${JSON.stringify(comparator)} is none FHIR has (<, <=, >=, >; = or none for the number itself)`
          : given && !first ? 'the number (SN-2) is missing'
          : !separator && second ? `a second number (${JSON.stringify(second)}) without a separator (SN-3: - for a range, : or / for a ratio)`
          : !separator ? undefined
          : !['-', ':', '/'].includes(separator) ? `the separator or suffix ${JSON.stringify(separator)} is not mapped (a range ^10^-^20, a ratio ^1^:^128)`
          : comparator && comparator !== '=' ? `a comparator beside two numbers (${JSON.stringify(comparator)}) says no range or ratio FHIR has`
          : !second ? `a ${separator === '-' ? 'range' : 'ratio'} without its second number`
          : separator !== '-' && Number(second) === 0 ? 'a ratio whose denominator is 0 says no value'
          : separator === '-' && Number(first) > Number(second) ? `a range from ${first} down to ${second} (FHIR's low is never above its high)`
          : undefined;
        if (problem) throw new FieldError('OBX-5', ErrorCondition.dataType, `OBX-5 ${JSON.stringify(sn!.toString())}: ${problem}; send it as ST`, sequence);
      }
      const current = new Map([...group, ['ORC', orc!], ['OBR', obr], ['OBX', segment], ['NTE', notesAfter(message, at)]]);
      const observation = inSegment(sequence, () => apply(maps.get('v2-observation'), { message, current }));
      // A number sent empty (`""`, or nothing) with its unit: no value, not a Quantity of a unit alone.
      const quantity = observation.valueQuantity as { value?: number } | undefined;
      if (quantity && quantity.value === undefined) delete observation.valueQuantity;
      // A value given that the maps wrote nothing of (an OBX-2 they do not read: ED, RP, a type with a subcomponent)
      // would be lost under an AA: refused, naming the type, so that the sender sends it as one they read.
      const given = (segment.getField(5)?.toString() ?? '').trim();
      if (given && given !== '""' && !Object.keys(observation).some((k) => k.startsWith('value'))) {
        throw new FieldError('OBX-2', ErrorCondition.tableValue, `OBX-2 ${JSON.stringify(segment.getField(2)?.toString() ?? '')}: the maps read no value of this type, so OBX-5 would be lost: send it as a type they read (NM, SN, ST, TX, FT, CE, CWE, DT, TS, DTM)`, sequence);
      }
      /** The id told apart from another's by `part`, within the 64 characters of an id (else the FieldError of `location`). */
      const suffix = (part: string, location: string, text: string) => {
        observation.id = `${observation.id as string}-${part}`;
        if ((observation.id as string).length > 64) throw new FieldError(location, ErrorCondition.requiredFieldMissing, text, sequence);
      };
      const line = lineOf.get(segment);
      if (line) suffix(line, 'OBX-4', `OBX-3 ${JSON.stringify(segment.getField(3)?.toString())} is given more than once under this OBR: give each its sub-id (OBX-4)`);
      if (factOf) {
        // A fact of a specimen: its id says whose (facts of two specimens may give the same code and set id).
        suffix(factOf.suffix, 'SPM-1', `the id of a fact of specimen ${factOf.suffix} is over 64 characters: shorten OBR-3 or OBX-3`);
        observation.specimen = { reference: factOf.reference };
        observation.focus = [{ reference: factOf.reference }];
      } else {
        if (sole) observation.specimen = sole;
        (report.result as unknown[]).push({ reference: reference(observation) });
      }
      add(observation, 'OBX', sequence);
    }
  }
  if (!seen.OBR) throw new FieldError('OBR', ErrorCondition.segmentSequence, 'ORU^R01 without an OBR segment');
  flush();
  for (const r of out) if (Array.isArray(r.result) && !r.result.length) delete r.result;
  return out;
}
