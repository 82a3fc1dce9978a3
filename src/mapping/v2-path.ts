/**
 * The `v2:` section of a map (docs/hl7-v2.md "The v2 path"): a Connect field's value read from an HL7 v2
 * message by a path such as `PID-5.1`, `OBX-5`, `ZLB-2`. The message is parsed by @medplum/core's Hl7Message
 * (the encoding characters are the message's own); this module reads values out of it and un-escapes them.
 *
 *   expression  := alternative (' | ' alternative)*           the first that gives a value
 *   alternative := value (' where ' condition (' and ' condition)*)?  only when every condition holds
 *   condition   := 'not '? path (' = ' code(,code)*)?   one of the codes (no codes: has a value); with not, the opposite
 *   value       := path | fn '(' path (', ' path)* ')' | 'text'
 *   path        := SEG-F[.C[.S]]                               field F, component C (default 1), subcomponent S
 *   fn          := key | idkey | low | high | low_unit | high_unit | range_text | lines | date | instant | join | phone | decimals | number | comparator
 *
 * A condition on the same field as the value picks the repetition (`PID-5.1 where PID-5.7 = L`: the family name
 * of the legal name), and then the value is that repetition's, empty or not (the next alternative counts only when
 * no repetition meets the condition); otherwise values come from the field's first repetition. A list field (`list:
 * true`) takes a value of each repetition (evaluateV2Each).
 */
import type { Hl7Message, Hl7Segment } from '@medplum/core';

export interface V2Location {
  segment: string;
  field: number;
  component?: number;
  subcomponent?: number;
}

interface V2Condition {
  path: V2Location;
  codes?: string[];
  not?: boolean;
}

interface V2Alternative {
  fn?: V2Function;
  args: V2Location[];
  /** A constant (`'finished'`) instead of a value of the message. */
  literal?: string;
  /** Every condition must hold. No codes: the path has a value; `not`: the opposite (no value; none of the codes). */
  where?: V2Condition[];
}

export interface V2Expression {
  text: string;
  alternatives: V2Alternative[];
  /** The field an error about this value names in ERR-2 (`PID-3`): the first path's. */
  location: string;
  /** That field (its segment and number): the one whose repetitions a list field reads. */
  field: V2Location;
}

/**
 * An object list field's `v2:` entry (`telecom: { system: …, value: … }`): an object per repetition of one field
 * (PID-13), each of its fields an expression read in that repetition.
 */
export interface V2Objects {
  /** The field every expression reads (`PID-13`), for ERR-2. */
  location: string;
  field: V2Location;
  fields: ReadonlyMap<string, V2Expression>;
}

const FUNCTIONS = ['key', 'idkey', 'low', 'high', 'low_unit', 'high_unit', 'range_text', 'lines', 'date', 'instant', 'join', 'phone', 'decimals', 'number', 'comparator'] as const;
type V2Function = (typeof FUNCTIONS)[number];

const PATH = /^([A-Z][A-Z0-9]{2})-(\d{1,3})(?:\.(\d{1,3})(?:\.(\d{1,3}))?)?$/;

export class V2PathError extends Error {}

function parsePath(text: string): V2Location {
  const m = PATH.exec(text.trim());
  if (!m) throw new V2PathError(`\`${text.trim()}\` is not a v2 path: SEG-FIELD[.COMPONENT[.SUBCOMPONENT]], e.g. PID-5.1, OBX-5, ZLB-2`);
  const n = (s: string | undefined) => (s === undefined ? undefined : Number(s));
  if (Number(m[2]) < 1 || (m[3] !== undefined && Number(m[3]) < 1) || (m[4] !== undefined && Number(m[4]) < 1)) throw new V2PathError(`\`${text.trim()}\`: fields, components and subcomponents count from 1`);
  return { segment: m[1]!, field: Number(m[2]), component: n(m[3]), subcomponent: n(m[4]) };
}

export const locationText = (l: V2Location) => `${l.segment}-${l.field}${l.component ? `.${l.component}` : ''}${l.subcomponent ? `.${l.subcomponent}` : ''}`;

/** Parses a `v2:` value; throws V2PathError saying what is wrong. */
export function parseV2Expression(text: string): V2Expression {
  const alternatives = text.split(' | ').map((alt): V2Alternative => {
    const [valueText, whereText] = alt.split(' where ');
    let where: V2Alternative['where'];
    if (whereText !== undefined) {
      where = whereText.split(' and ').map((condition): V2Condition => {
        const not = /^\s*not\s+(.*)$/.exec(condition);
        const [p, codes] = (not ? not[1]! : condition).split(' = ');
        return { path: parsePath(p!), codes: codes?.split(',').map((c) => c.trim()), ...(not ? { not: true } : {}) };
      });
    }
    const literal = /^\s*'([^']*)'\s*$/.exec(valueText!);
    if (literal) return { args: [], literal: literal[1], where };
    const call = /^\s*([a-z_]+)\((.*)\)\s*$/.exec(valueText!);
    if (call) {
      if (!(FUNCTIONS as readonly string[]).includes(call[1]!)) throw new V2PathError(`unknown function \`${call[1]}\`: the functions are ${FUNCTIONS.join(', ')}`);
      return { fn: call[1] as V2Function, args: call[2]!.split(',').map(parsePath), where };
    }
    return { args: [parsePath(valueText!)], where };
  });
  // A key names the field that holds the number (PID-3 of key(PID-3.4.1, PID-3.1) and of idkey(…, PID-3.1)).
  const alt = alternatives[0]!;
  const number = numberOf(alt);
  const first = number ? { ...number, component: undefined, subcomponent: undefined } : alt.args[0] ?? alt.where?.[0]?.path;
  if (!first) throw new V2PathError(`\`${text}\` reads nothing of the message: a constant needs a condition (\`'finished' where MSH-9.2 = A03\`)`);
  return { text, alternatives, location: locationText(first), field: { segment: first.segment, field: first.field } };
}

/**
 * The path of the number a key is made of: a key's last part; an idkey's fifth, after the four that may name its
 * authority (idkey(PID-3.4.1, PID-3.4.2, MSH-4.1, MSH-3.1, PID-3.1)). Undefined for anything but a key.
 */
function numberOf(alt: V2Alternative): V2Location | undefined {
  return alt.fn === 'key' ? alt.args.at(-1) : alt.fn === 'idkey' ? alt.args[4] : undefined;
}

/**
 * How an expression makes a key, the field it is made of aside: the field (`PID-3`), and the scheme, its alternatives
 * that make a key of that field (the first key's), each its function and arguments with conditions on the field itself,
 * the field written `KEY` (`idkey(KEY.4.1, KEY.4.2, MSH-4.1, MSH-3.1, KEY.1) where KEY.5 = MR`). Conditions on other
 * fields (an A40's `MSH-9.2 = A40`) say when a key is made, not how. Undefined when the expression makes no key.
 */
export function keyScheme(expression: V2Expression): { field: string; scheme: string } | undefined {
  const keys = expression.alternatives.flatMap((alt) => {
    const number = numberOf(alt);
    return number ? [{ alt, number }] : [];
  });
  const of = keys[0]?.number;
  if (!of) return undefined;
  const isKey = (l: V2Location) => l.segment === of.segment && l.field === of.field;
  const shown = (l: V2Location) => (isKey(l) ? `KEY${l.component ? `.${l.component}` : ''}${l.subcomponent ? `.${l.subcomponent}` : ''}` : locationText(l));
  const scheme = keys
    .filter(({ number }) => isKey(number))
    .map(({ alt }) => {
      const conditions = (alt.where ?? []).filter((c) => isKey(c.path)).map((c) => `${c.not ? 'not ' : ''}${shown(c.path)}${c.codes ? ` = ${c.codes.join(',')}` : ''}`);
      return `${alt.fn}(${alt.args.map(shown).join(', ')})${conditions.length ? ` where ${conditions.join(' and ')}` : ''}`;
    })
    .join(' | ');
  return { field: `${of.segment}-${of.field}`, scheme };
}

/** An object list field's entry: its fields' expressions, which must all read one field (its repetitions). */
export function parseV2Objects(fields: ReadonlyMap<string, V2Expression>): V2Objects {
  const [first, ...rest] = [...fields.values()];
  if (!first) throw new V2PathError('an object of a v2 map reads at least one field: `field: PATH`');
  const other = rest.find((e) => e.field.segment !== first.field.segment || e.field.field !== first.field.field);
  if (other) throw new V2PathError(`an object is made of each repetition of one field: \`${other.text}\` reads ${locationText(other.field)}, \`${first.text}\` ${locationText(first.field)}`);
  return { location: locationText(first.field), field: first.field, fields };
}

/** Where values are read: the segments the value is about (this OBX, its OBR), else the message's first of that name. */
export interface V2Scope {
  message: Hl7Message;
  current?: ReadonlyMap<string, Hl7Segment>;
}

const segmentOf = (scope: V2Scope, name: string) => scope.current?.get(name) ?? scope.message.getSegment(name);

/** The text of one repetition's component (un-escaped); '' when absent. */
function readAt(scope: V2Scope, l: V2Location, repetition = 0): string {
  const segment = segmentOf(scope, l.segment);
  if (!segment) return '';
  const field = segment.getField(l.field);
  if (!field) return '';
  const raw = l.subcomponent ? field.get((l.component ?? 1) - 1, l.subcomponent - 1, repetition) : field.get((l.component ?? 1) - 1, undefined, repetition);
  // `""` is HL7's explicit null ("delete what you hold"): no value, never the text `""`. A message that replaces
  // what Pont holds (an A08) then leaves the element out, which is the deletion it asks for.
  if (raw === '""') return '';
  return unescapeV2(raw ?? '', scope.message);
}

function repetitions(scope: V2Scope, l: V2Location): number {
  return Math.max(1, repetitionCount(scope, l));
}

/** How many repetitions the field has (empty ones too), 0 when absent. */
export function repetitionCount(scope: V2Scope, l: V2Location): number {
  return segmentOf(scope, l.segment)?.getField(l.field)?.components.length ?? 0;
}

/** The value of an expression, as text; undefined when no alternative gives one. */
export function evaluateV2(expression: V2Expression, scope: V2Scope): string | undefined {
  for (const alt of expression.alternatives) {
    // The repetitions searched are those of the field the value is read from (a key's, its number's): a condition on
    // it picks the repetition (the MR of PID-3), read in it with every path of that field; other fields in their first.
    const first = numberOf(alt) ?? alt.args[0];
    const sameField = first && alt.where && alt.where[0]!.path.segment === first.segment && alt.where[0]!.path.field === first.field;
    const reps = sameField ? repetitions(scope, first) : 1;
    for (let r = 0; r < reps; r++) {
      const at = (l: V2Location) => readAt(scope, l, sameField && l.segment === first.segment && l.field === first.field ? r : 0);
      if (alt.where && !holds(alt.where, at)) continue;
      const value = alt.literal ?? (alt.fn === 'lines' ? lines(scope, alt.args) : apply(alt.fn, alt.args.map(at)));
      if (value !== undefined && value !== '') return value;
      // The repetition the condition picked is the one meant (the legal name): an empty component of it is empty,
      // not one of another repetition's (a nickname's given name in the legal name).
      if (sameField) return undefined;
    }
  }
  return undefined;
}

/**
 * The values of a list field (`flags: OBX-8`, `emails: PID-13.4 where PID-13.3 = Internet,X.400`): the expression
 * read in each repetition of the field it names (its location, `OBX-8`), in order, a value per repetition that gives
 * one. Every path of that field (a condition on it too) is read in that repetition; a path of another field in its
 * first.
 */
export function evaluateV2Each(expression: V2Expression, scope: V2Scope): string[] {
  const out: string[] = [];
  for (let r = 0; r < repetitions(scope, expression.field); r++) {
    const value = evaluateAt(expression, scope, expression.field, r);
    if (value !== undefined) out.push(value);
  }
  return out;
}

/** The repetitions of a field that hold something (`~~` gives none), by their index. */
export function filledRepetitions(scope: V2Scope, field: V2Location): number[] {
  const f = segmentOf(scope, field.segment)?.getField(field.field);
  const out: number[] = [];
  for (let r = 0; r < (f?.components.length ?? 0); r++) if (f!.components[r]!.some((c) => c !== '' && c !== '""')) out.push(r);
  return out;
}

/** The expression read in repetition `r` of `field` (its other fields' paths in their first); undefined when empty. */
export function evaluateAt(expression: V2Expression, scope: V2Scope, field: V2Location, r: number): string | undefined {
  const at = (l: V2Location) => readAt(scope, l, l.segment === field.segment && l.field === field.field ? r : 0);
  for (const alt of expression.alternatives) {
    if (alt.where && !holds(alt.where, at)) continue;
    const value = alt.literal ?? apply(alt.fn === 'lines' ? undefined : alt.fn, alt.args.map(at));
    if (value !== undefined && value !== '') return value;
  }
  return undefined;
}

/** Whether every condition holds, each path read by `read`. */
function holds(conditions: V2Condition[], read: (l: V2Location) => string): boolean {
  return conditions.every((c) => {
    const value = read(c.path);
    const meets = c.codes ? c.codes.includes(value) : value !== '';
    return c.not ? !meets : meets;
  });
}

/**
 * Every repetition of each path, a line each (`lines(OBX-5)`: a TX or FT value's repetitions are its lines;
 * `lines(SPM-14, NTE-3)`: a description, then comments); the blank lines at its end left out.
 */
function lines(scope: V2Scope, paths: V2Location[]): string {
  const out = paths.flatMap((l) => Array.from({ length: repetitions(scope, l) }, (_, r) => readAt(scope, l, r)));
  while (out.length && out.at(-1) === '') out.pop();
  return out.join('\n');
}

/**
 * `70-99`, `>60`, `<5`, `3.5 - 5.0`: the low and high limits; undefined when the text is not a range. `withUnit`: a
 * unit after it (`3.5-5.0 mmol/L`, one word) is allowed, and given; the text is then not a bare range, and is kept
 * (range_text).
 */
export function parseRange(text: string, withUnit = false): { low?: number; high?: number; unit?: string } | undefined {
  const t = text.trim();
  const [between, above, below] = withUnit ? RANGE_WITH_UNIT : RANGE;
  let m = between.exec(t);
  if (m) return { low: Number(m[1]), high: Number(m[2]), unit: m[3] || undefined };
  m = above.exec(t);
  if (m) return { low: Number(m[2]), unit: m[3] || undefined };
  m = below.exec(t);
  if (m) return { high: Number(m[2]), unit: m[3] || undefined };
  return undefined;
}

/** parseRange's forms (`70-99`, `>60`, `<5`), without and with a unit after them: compiled once (five reads an OBX-7). */
function rangeForms(withUnit: boolean): [RegExp, RegExp, RegExp] {
  const num = '([-+]?\\d+(?:\\.\\d+)?)';
  // A unit begins with a letter (mmol/L), µ or % (never `:` or `/`: `<1:40` is a titre, no range up to 1).
  const unit = withUnit ? '(?:\\s*([A-Za-z%µμ°\\[]\\S*))?' : '()';
  return [new RegExp(`^${num}\\s*-\\s*${num}${unit}$`), new RegExp(`^(>=?)\\s*${num}${unit}$`), new RegExp(`^(<=?)\\s*${num}${unit}$`)];
}
const RANGE = rangeForms(false);
const RANGE_WITH_UNIT = rangeForms(true);

function apply(fn: V2Function | undefined, values: string[]): string | undefined {
  switch (fn) {
    case undefined:
      return values[0];
    case 'key':
      return sourceKey(values);
    case 'idkey': {
      // A number's key with one authority, the first given of: its namespace, its OID, the sending facility, the
      // sending application. A number given with and without its OID is one, and a bare one is the sender's own.
      const [namespace, oid, facility, application, ...parts] = values;
      return parts[0] ? sourceKey([namespace || oid || facility || application || '', ...parts]) : undefined;
    }
    case 'low':
      return parseRange(values[0]!, true)?.low?.toString();
    case 'high':
      return parseRange(values[0]!, true)?.high?.toString();
    case 'low_unit':
    case 'high_unit': {
      // The unit of a limit the range gives (`>60 mL/min` has a low only).
      const range = parseRange(values[0]!, true);
      return range?.[fn === 'low_unit' ? 'low' : 'high'] === undefined ? undefined : range?.unit;
    }
    case 'range_text':
      return values[0] && !parseRange(values[0]) ? values[0] : undefined;
    case 'date':
      return v2DatePart(values[0]!);
    case 'instant':
      // A DTM that gives a time of day (to the hour at least): what a FHIR instant (a report's `issued`) can hold. A
      // date alone gives nothing, rather than a made-up midnight or a message refused for a field it may leave out.
      return /^\s*\d{10}/.test(values[0]!) ? values[0] : undefined;
    case 'decimals': {
      // The decimal places of a number written with trailing zeros (`1.10`: 2), which a JSON number drops (1.1): FHIR
      // keeps them in the quantity-precision extension. None for a number that shows its own (`1.1`, `182`, `5.`).
      const m = /^\s*[+-]?\d*\.(\d*0)\s*$/.exec(compared(values[0] ?? '').number);
      return m ? String(m[1]!.length) : undefined;
    }
    case 'number':
      // An NM written with a comparator (`<5`, `>=200`), as laboratories write a result beyond what the analyser
      // measures: its number. Any other text as given, for the field's type to refuse (`<>5`, `<` alone: no number).
      return compared(values[0] ?? '').number || values[0] || undefined;
    case 'comparator':
      return compared(values[0] ?? '').comparator;
    case 'join':
      // The parts given, as written, a space between (`join(PID-13.6, PID-13.7)`: area code and local number).
      return values.filter(Boolean).join(' ') || undefined;
    case 'phone': {
      // An XTN's number from its parts (`phone(PID-13.5, PID-13.6, PID-13.7, PID-13.8)`: country code, area code, local
      // number, extension), as the v2-to-FHIR guide writes ContactPoint.value: `+1 555 3334444 ext. 42`.
      const [country, area, local, extension] = values;
      if (!local) return undefined;
      return [country && `+${country.replace(/^\+/, '')}`, area, local, extension && `ext. ${extension}`].filter(Boolean).join(' ');
    }
  }
}

/**
 * A value and the comparator written before it (`<5`: `<` and `5`; `>= 200`: `>=` and `200`); `=` is none (`=5` is
 * 5). Without one, the text as it is. `<>` (not equal, which FHIR cannot say) leaves `>5` as the number, which is
 * none, so such a value is refused as one.
 */
function compared(text: string): { comparator?: string; number: string } {
  const m = /^\s*(<=|>=|<|>|=)\s*(.*?)\s*$/.exec(text);
  if (!m) return { number: text };
  return { comparator: m[1] === '=' ? undefined : m[1], number: m[2]! };
}

/**
 * The date of a v2 DT or DTM, to the precision given (`date(PID-7)`: `19800515083000+0100` -> `19800515`, `198005`
 * stays `198005`, `1980` stays `1980`): what a FHIR date (a birthDate) may hold. A value that is no v2 date is left
 * as it is, for the field's type to refuse naming it.
 */
function v2DatePart(text: string): string {
  const m = /^\s*(\d{4}(?:\d{2}(?:\d{2})?)?)(?:\d{2,}(?:\.\d{1,4})?)?(?:[+-]\d{4})?\s*$/.exec(text);
  return m && (m[1]!.length === 8 || text.trim().length === m[1]!.length) ? m[1]! : text;
}

/**
 * A facility system's id made of the parts that identify a thing (`key(PID-3.4.1, PID-3.4.2, PID-3.1)`: assigning
 * authority and number): what the Bridge API takes as a source id (1-64 of A-Z a-z 0-9 - .). Other characters
 * become `-` (an authority `GHH LAB` is `GHH-LAB`); but the number itself, the last part, is kept exact: since
 * `00 77`, `00/77` and `00-77` would read alike (and two patients become one), a number of other characters than
 * letters, digits, dots and single hyphens adds a digest of the parts as given, as does an authority with characters
 * outside ASCII (`ÅLESUND`, `ØLESUND`). Undefined when the number is empty: nothing identifies it.
 */
function sourceKey(parts: string[]): string | undefined {
  if (!parts[parts.length - 1]) return undefined;
  const given = parts.filter(Boolean);
  const joined = given.map((p) => p.replace(/[^A-Za-z0-9.]+/g, '-')).join('-');
  // An authority's letters outside ASCII would all read `-` (ÅLESUND and ØLESUND alike: two patients one): kept by the
  // digest too. Its spaces and punctuation read `-` as before (`GHH LAB` is `GHH-LAB`).
  const asGiven = /^[A-Za-z0-9.]+(?:-[A-Za-z0-9.]+)*$/.test(given.at(-1)!) && given.slice(0, -1).every((p) => /^[\x20-\x7e]*$/.test(p));
  if (asGiven && joined.length <= 64) return joined;
  // Too long for an id, or changed: a digest of it, the same for the same parts.
  return `${joined.slice(0, 46)}-${digest(asGiven ? joined : given.join('\u0000'))}`;
}

function digest(text: string): string {
  let h1 = 0x811c9dc5, h2 = 0x01000193;
  for (const c of text) { h1 = Math.imul(h1 ^ c.charCodeAt(0), 16777619) >>> 0; h2 = Math.imul(h2 ^ c.charCodeAt(0), 2246822519) >>> 0; }
  return `${h1.toString(16).padStart(8, '0')}${h2.toString(16).padStart(8, '0')}`;
}

/**
 * What an escape `\\Xhh\\` of bytes that are no text in the message's character set becomes (a partial UTF-8
 * character, `\\XC3\\`): NUL and U+FFFD, which the v2 reader refuses naming the field (a decoder's U+FFFD alone would
 * be stored in the letter's place under an AA; a genuine U+FFFD sent as UTF-8 is a character like any other).
 */
export const UNREADABLE = '\u0000\uFFFD';

/** HL7 v2 escape sequences (2.7 "Use of escape sequences in text fields") in the message's own escape character. */
export function unescapeV2(text: string, message: Hl7Message): string {
  const c = message.context;
  const e = c.escapeCharacter;
  if (!e || !text.includes(e)) return text;
  const re = new RegExp(`${escapeRegExp(e)}([^${escapeRegExp(e)}]*)${escapeRegExp(e)}`, 'g');
  return text.replace(re, (_, seq: string) => {
    switch (seq) {
      case 'F': return c.fieldSeparator;
      case 'S': return c.componentSeparator;
      case 'T': return c.subcomponentSeparator;
      case 'R': return c.repetitionSeparator;
      case 'E': return e;
      case '.br': return '\n';
      case 'H': case 'N': return ''; // highlighting on/off: no meaning in FHIR text
    }
    if (/^X([0-9A-Fa-f]{2})+$/.test(seq)) {
      try {
        return new TextDecoder(v2Charset(message) ?? 'utf-8', { fatal: true }).decode(Buffer.from(seq.slice(1), 'hex'));
      } catch {
        return UNREADABLE;
      }
    }
    // FT's formatting (v2 2.7.6): `.sp n` ends the line and skips n lines (1 without n), `.sk n` skips n spaces, `.ce`
    // ends the line (the next centred); indents and fill modes (`.in`, `.ti`, `.fi`, `.nf`) have no meaning in FHIR
    // text. A count is at most 10: `\.sp99999999\` is no reason to write a megabyte of blank lines.
    const format = /^\.(sp|sk)\s*\+?(\d*)$/.exec(seq);
    if (format) {
      const count = Math.min(10, Number(format[2] || 1));
      return format[1] === 'sp' ? '\n'.repeat(count + 1) : ' '.repeat(count);
    }
    if (seq === '.ce') return '\n';
    return ''; // an unknown sequence is dropped, not shown as escape characters
  });
}

/**
 * The character set MSH-18 names, as a TextDecoder label (`\\Xhh\\` bytes and the message's own are read in it): none,
 * `ASCII` or `UNICODE UTF-8` is UTF-8; `8859/1` Latin-1; `8859/15` Latin-9 (Latin-1 with €, Š, Œ…). Undefined for
 * any other (`8859/5`, `UNICODE`, `ISO IR87`…), which the agent refuses rather than read wrong.
 */
export function v2Charset(message: Hl7Message | string): 'utf-8' | 'iso-8859-1' | 'iso-8859-15' | undefined {
  const named = (typeof message === 'string' ? message : message.getSegment('MSH')?.getField(18)?.toString() ?? '').trim().toUpperCase();
  return V2_CHARSETS.get(named);
}
const V2_CHARSETS = new Map<string, 'utf-8' | 'iso-8859-1' | 'iso-8859-15'>([['', 'utf-8'], ['ASCII', 'utf-8'], ['UNICODE UTF-8', 'utf-8'], ['8859/1', 'iso-8859-1'], ['8859/15', 'iso-8859-15']]);

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
