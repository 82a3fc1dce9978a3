/**
 * A map's `v2:` section at work: the Connect values of one HL7 v2 message (or one OBX of it), each converted from
 * v2's data type to its declared Connect type. What is then written is the map's ordinary `toFhir`.
 */
import { MAX_RESOURCE_ARRAY } from '../core/limits';
import { isFhirDate } from '../core/fhir-dates';
import type { ConnectField, ConnectType, MapProgram } from './runtime';
import { evaluateAt, evaluateV2, evaluateV2Each, filledRepetitions, repetitionCount, UNREADABLE, type V2Scope } from './v2-path';

export interface V2Problem {
  /** The Connect field. */
  field: string;
  /** The v2 field it is read from (`PID-7`), for ERR-2. */
  location: string;
  message: string;
}

export function readV2(program: MapProgram, scope: V2Scope): { connect: Record<string, unknown>; problems: V2Problem[] } {
  const connect: Record<string, unknown> = {};
  const problems: V2Problem[] = [];
  const declared = new Map(program.fields.map((f) => [f.field.name, f.field]));
  const offset = senderOffset(scope);
  /** A value read from the message as its Connect field's type; undefined (and a problem said) when it does not fit. */
  const convert = (field: ConnectField, name: string, location: string, given: string): unknown => {
    // A NUL written as an escape (\X00\): Pont stores none, so the message is refused naming the field.
    // \Xhh\ bytes that are no text in the message's character set (`\XC3\` alone in UTF-8): unescapeV2's UNREADABLE.
    if (given.includes(UNREADABLE)) return void problems.push({ field: name, location, message: `${location} holds an escape \\Xhh\\ of bytes that are no text in the message's character set (MSH-18): send the character itself, or all of its bytes` });
    if (given.includes('\u0000')) return void problems.push({ field: name, location, message: `${location} holds a NUL character (0x00), which Pont does not store` });
    // Spaces around a value are a sender's padding (fixed-width systems), and a value of spaces alone is no value:
    // FHIR refuses a string of whitespace, which would lose a message acknowledged AA.
    const text = given.trim();
    if (!text) return undefined;
    const value = fromV2Text(text, field.type, offset);
    if (value === undefined) {
      const digits = V2_NUMBER.test(text) ? significantDigits(text) : 0;
      const why = digits > EXACT_DIGITS ? `has ${digits} significant digits, more than a number keeps exactly (${EXACT_DIGITS}): send it as ST` : `is not a ${field.type}`;
      problems.push({ field: name, location, message: `${location} \`${text}\` ${why}` });
    }
    return value;
  };
  for (const [name, entry] of program.v2 ?? []) {
    const field = declared.get(name)!;
    // A field read as a list (or objects) longer than a resource's array may be: refused before it is built (100,000
    // repetitions of OBX-8 took a second of the agent's, which serves every connection, to build 10 MB of FHIR).
    const reps = field.list ? repetitionCount(scope, entry.field) : 0;
    if (reps > MAX_RESOURCE_ARRAY) {
      problems.push({ field: name, location: entry.location, message: `${entry.location} has ${reps} repetitions; Pont keeps at most ${MAX_RESOURCE_ARRAY} in one list` });
      continue;
    }
    if ('fields' in entry) {
      // An object per repetition of the field (each PID-13 a ContactPoint), unless it lacks a field the object
      // requires (a phone repetition without its number): there is nothing to write of it.
      const objects: Array<Record<string, unknown>> = [];
      for (const r of filledRepetitions(scope, entry.field)) {
        const object: Record<string, unknown> = {};
        for (const sub of field.fields ?? []) {
          const expression = entry.fields.get(sub.name);
          const text = expression && evaluateAt(expression, scope, entry.field, r);
          if (text === undefined) continue;
          const value = convert(sub, name, entry.location, text);
          if (value !== undefined) object[sub.name] = value;
        }
        if ((field.fields ?? []).every((sub) => !sub.required || object[sub.name] !== undefined)) objects.push(object);
      }
      connect[name] = objects;
      continue;
    }
    // A list field: a value of each repetition of the v2 field, [] when none.
    const texts = field.list ? evaluateV2Each(entry, scope) : [evaluateV2(entry, scope)].filter((t) => t !== undefined);
    const values = texts.map((text) => convert(field, name, entry.location, text)).filter((v) => v !== undefined);
    if (field.list) connect[name] = values;
    else if (values.length) connect[name] = values[0];
  }
  return { connect, problems };
}

const V2_NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)$/;
/** The significant digits a double keeps whatever they are (DBL_DIG): a result with more would be stored as another. */
const EXACT_DIGITS = 15;
/** A v2 NM's significant digits: its digits without sign, point, leading zeros and the zeros that end them. */
const significantDigits = (text: string) => text.replace(/^[+-]/, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '').length;

/**
 * The sender's offset from UTC (`-0500`), as the message's own time gives it (MSH-7): v2 reads a time written without
 * an offset as the sender's local time. Undefined when MSH-7 gives none.
 */
function senderOffset(scope: V2Scope): string | undefined {
  const sent = scope.message.getSegment('MSH')?.getField(7)?.get(0) ?? '';
  return /^\s*\d{4,14}(?:\.\d{1,4})?([+-](?:0\d|1[0-4])[0-5]\d)\s*$/.exec(sent)?.[1];
}

/**
 * A v2 value as the Connect type wants it (DTM `20240115083000+0100` -> ISO 8601); undefined when it does not fit.
 * `offset`: the sender's (`-0500`), for a time written without one (else it is read as UTC).
 */
export function fromV2Text(text: string, type: ConnectType, offset?: string): unknown {
  switch (type) {
    case 'string':
      return text;
    case 'id':
      return text.replace(/[^A-Za-z0-9.-]+/g, '-').slice(0, 64);
    case 'number':
    case 'integer': {
      // v2 NM: an optional sign, digits and an optional decimal point (not JavaScript's 0x10, 1e3 or Infinity).
      if (!V2_NUMBER.test(text.trim()) || significantDigits(text.trim()) > EXACT_DIGITS) return undefined;
      const n = Number(text.trim());
      return Number.isFinite(n) && (type === 'number' || Number.isInteger(n)) ? n : undefined;
    }
    case 'boolean':
      return text === 'Y' ? true : text === 'N' ? false : undefined;
    case 'date':
      return v2Date(text)?.slice(0, 10);
    case 'date-time':
      return v2Date(text, offset);
    default:
      return undefined;
  }
}

/**
 * v2 DT/DTM (`YYYY[MM[DD[HH[MM[SS[.S+]]]]]][+/-ZZZZ]`) as FHIR dateTime. A time without an offset is in the sender's
 * (`senderOffset`, MSH-7's), else read as UTC (docs/hl7-v2.md).
 */
function v2Date(text: string, senderOffset?: string): string | undefined {
  const m = /^(\d{4})(\d{2})?(\d{2})?(?:(\d{2})(\d{2})?(\d{2})?(\.\d{1,4})?)?([+-]\d{4})?$/.exec(text.trim());
  // Year 0000 is no FHIR date (years run from 0001).
  if (!m || m[1] === '0000' || (m[2] && !/^(0[1-9]|1[0-2])$/.test(m[2]))) return undefined;
  const [, y, mo, d, h, mi, s, frac, tz] = m;
  if (!mo) return y;
  if (!d) return `${y}-${mo}`;
  const date = `${y}-${mo}-${d}`;
  // A day the month does not have (20240230) is no date.
  if (!isFhirDate(date)) return undefined;
  if (!h) return date;
  const zone = tz ?? senderOffset;
  const offset = zone ? `${zone.slice(0, 3)}:${zone.slice(3)}` : 'Z';
  return `${date}T${h}:${mi ?? '00'}:${s ?? '00'}${frac ?? ''}${offset}`;
}
