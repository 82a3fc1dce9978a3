/**
 * The path language of the maps: the part of FHIRPath that can be written as well as read, plus fallbacks and a
 * few functions for reading FHIR written by other systems (mappings/README.md "Paths").
 *
 *   expression = path ("|" path)*                    first alternative that gives a value (read); writing uses
 *                                                    the first alternative that can be written
 *   path       = ["%" let "."] step ("." step)* ["." finish]
 *   step       = name ["[" index "]"] (".where(" condition (" and " condition)* ")" | ".first()")* [".resolve()"]
 *   finish     = "join(" 'text' ")" | "toDate()" | "toText()" | "exists()"   (conversions of the values at the end)
 *              | "firstWord()" | "lastWord()"        (a text's first word; its last, when it has two or more)
 *              | "countryCode()"                      (a country as its ISO 3166 code, from the code or its name)
 *              | "memberOf(" (%alias | 'url') ")"    (whether the code, Coding or concept is in a loaded value set)
 *   condition  = (name | outside) ("." name)* (op literal | ".empty()" | ".exists()")
 *   op         = "=" | "<" | "<=" | ">" | ">="        (the comparisons compare numbers: an element without a
 *                                                    value is an open limit, met whatever it is compared with;
 *                                                    one with a value needs the value it is compared with)
 *   outside    = "%resource" | "%patient"            (the resource being read; the patient it is about, when the
 *                                                    reader knows it: the records route does)
 *   literal    = 'text' | %alias | outside.name("." name)* | true | false | number | "%age_years"
 *                                                    (the patient's age at the resource's date, in years: compared
 *                                                    with an age quantity's value in its unit of time)
 *
 * e.g. `identifier.where(system=%health-id).value`, `code.text | code.coding.first().display`,
 * `referenceRange.where(low.unit = %resource.valueQuantity.unit)`,
 * `referenceRange.where(appliesTo.coding.code = '248152002' and %patient.gender = 'female')`,
 * `referenceRange.where(age.exists() and age.low.value <= %age_years and age.high.value > %age_years)`. Offsets are kept so that problems point at the
 * exact column in the map file.
 */

import { closest } from './suggest';

export interface PathName {
  name: string;
  /** Offset of the name in the expression text. */
  at: number;
}

export type Literal = string | number | boolean;

/** What a condition may read besides the element it filters: the resource being read, or the patient it is about. */
export type Outside = 'resource' | 'patient';
export const OUTSIDE: readonly Outside[] = ['resource', 'patient'];

/** `%age_years`: the patient's age in years at the resource's date (runtime.ts patientAge). */
export const AGE_YEARS = 'age_years';

/** A comparison of numbers in where(); `=` (any literal) is the condition's default. */
export type Comparison = '<' | '<=' | '>' | '>=';

export interface PathCondition {
  path: PathName[];
  /** Set when the left side was `%resource.a.b` or `%patient.a.b` instead of an element of the filtered item. */
  of?: Outside;
  value: Literal;
  /** Set when the literal was `%alias`: resolved against the map's `uris` by the compiler. */
  alias?: string;
  /** Set when the literal was `%resource.a.b` or `%patient.a.b`: the value of that element (`valueIn` says whose). */
  valuePath?: PathName[];
  valueIn?: Outside;
  valueAt: number;
  /** `element.empty()`: the element has no value (a name whose period has no end: the name in use). */
  empty?: boolean;
  /** `element.exists()`: the element has a value. */
  exists?: boolean;
  /** `<`, `<=`, `>`, `>=`: a comparison of numbers (absent: `=`). */
  op?: Comparison;
  /** The literal was `%age_years`. */
  ageYears?: boolean;
}

export interface PathStep extends PathName {
  index?: number;
  where: PathCondition[];
  /** `.first()`: only the first element (after `where`). */
  first: boolean;
  /** `.resolve()`: the resource a Reference points to, when the resource contains it (`#id`). */
  resolve?: boolean;
}

export type PathFinish =
  | { kind: 'join'; separator: string; at: number }
  | { kind: 'toDate' | 'toText' | 'exists' | 'firstWord' | 'lastWord' | 'countryCode'; at: number }
  /** `memberOf(%alias)` or `memberOf('url')`: the value set's canonical URL (an alias the compiler resolves against `uris`). */
  | { kind: 'memberOf'; valueSet: string; alias?: boolean; valueAt: number; at: number };

export interface ParsedPath {
  /** `%name.` at the start: the path continues from the map's `let` of that name. */
  from?: PathName;
  steps: PathStep[];
  finish?: PathFinish;
  /** Offset of the alternative in the expression text. */
  at: number;
}

export class PathSyntaxError extends Error {
  constructor(
    readonly at: number,
    message: string,
  ) {
    super(message);
  }
}

/** The functions of the language, with what they take: the "did you mean" of an unknown one comes from here. */
export const FUNCTIONS = { where: 'condition', first: 'nothing', resolve: 'nothing', join: 'separator', toDate: 'nothing', toText: 'nothing', exists: 'nothing', memberOf: 'value set', firstWord: 'nothing', lastWord: 'nothing', countryCode: 'nothing' } as const;

const NAME = /[A-Za-z_][A-Za-z0-9_]*/y; // `_value`: a primitive's id and extensions in FHIR JSON
const ALIAS = /[A-Za-z][A-Za-z0-9_-]*/y;
const NUMBER = /-?\d+(\.\d+)?/y;

/** Parses an expression: one path, or alternatives separated by `|`. */
export function parseExpression(text: string): ParsedPath[] {
  let pos = 0;
  const fail = (message: string, at = pos): never => {
    throw new PathSyntaxError(at, message);
  };
  const rest = () => `"${text.slice(pos, pos + 12) || 'the end'}"`;
  const match = (re: RegExp): string | undefined => {
    re.lastIndex = pos;
    const m = re.exec(text);
    if (!m) return undefined;
    pos += m[0].length;
    return m[0];
  };
  const skipSpaces = () => {
    while (text[pos] === ' ') pos++;
  };
  const name = (what: string): PathName => {
    const at = pos;
    const n = match(NAME);
    return n ? { name: n, at } : fail(`expected ${what} at ${rest()}`);
  };
  // FHIRPath's escapes: \' \\ \n \t \r (a separator of blank lines is '\n\n').
  const ESCAPES: Record<string, string> = { "'": "'", '\\': '\\', n: '\n', t: '\t', r: '\r', '"': '"', '`': '`', '/': '/' };
  const quoted = (): string => {
    if (text[pos] !== "'") fail(`expected 'text' at ${rest()}`);
    let value = '';
    for (pos++; text[pos] !== "'"; pos++) {
      if (pos >= text.length) fail('unterminated quoted text');
      if (text[pos] !== '\\') value += text[pos];
      else value += ESCAPES[text[++pos]!] ?? fail(`unknown escape \\${text[pos] ?? ''} in quoted text (\\' \\\\ \\n \\t \\r)`);
    }
    pos++;
    return value;
  };
  const dotted = (): PathName[] => {
    const path = [name('an element name')];
    while (text[pos] === '.') {
      pos++;
      path.push(name('an element name'));
    }
    return path;
  };

  /** `%resource.` or `%patient.` at pos (after the %): which, with pos after the dot. */
  const outside = (): Outside | undefined => {
    const of = OUTSIDE.find((o) => text.startsWith(`${o}.`, pos));
    if (of) pos += of.length + 1;
    return of;
  };

  /** `%age_years` at pos (the %): pos after it. */
  const ageYears = (): boolean => {
    if (!text.startsWith(`%${AGE_YEARS}`, pos) || /[A-Za-z0-9_.-]/.test(text[pos + AGE_YEARS.length + 1] ?? '')) return false;
    pos += AGE_YEARS.length + 1;
    return true;
  };

  const literal = (): Pick<PathCondition, 'value' | 'alias' | 'valuePath' | 'valueIn' | 'valueAt' | 'ageYears'> => {
    const valueAt = pos;
    if (text[pos] === "'") return { value: quoted(), valueAt };
    if (ageYears()) return { value: 0, ageYears: true, valueAt };
    if (text[pos] === '%') {
      pos++;
      const of = outside();
      if (of) return { value: '', valuePath: dotted(), valueIn: of, valueAt };
      const alias = match(ALIAS) ?? fail('expected a uris name (or resource.…, patient.…) after %');
      return { value: '', alias, valueAt };
    }
    const word = match(/true|false/y);
    if (word) return { value: word === 'true', valueAt };
    const number = match(NUMBER);
    if (number) return { value: Number(number), valueAt };
    return fail(`expected a value ('text', %name, %resource.element, %age_years, true, false or a number) at ${rest()}`);
  };

  const condition = (): PathCondition => {
    let of: Outside | undefined;
    if (ageYears()) fail('%age_years goes on the right of a comparison: `age.low.value <= %age_years`', pos - AGE_YEARS.length - 1);
    if (text[pos] === '%') {
      pos++;
      of = outside() ?? fail('expected %resource.… or %patient.… on the left of "="');
    }
    const path = dotted();
    // `period.end.empty()`: the element has no value; `age.exists()`: it has one.
    const last = path[path.length - 1]!.name;
    if (path.length > 1 && (last === 'empty' || last === 'exists') && text.startsWith('()', pos)) {
      const { at } = path.pop()!;
      pos += 2;
      return { path, ...(of ? { of } : {}), value: '', valueAt: at, ...(last === 'empty' ? { empty: true } : { exists: true }) };
    }
    skipSpaces();
    const op = match(/<=|>=|<|>|=/y) ?? fail('expected "=", "<", "<=", ">", ">=", .empty() or .exists() in where(): `element = value`, `element <= value` or `element.empty()`');
    skipSpaces();
    return { path, ...(of ? { of } : {}), ...(op === '=' ? {} : { op: op as Comparison }), ...literal() };
  };

  /** `.name(` at pos: a function call. Returns the name (pos after the parenthesis), or undefined. */
  const functionCall = (): PathName | undefined => {
    const m = /\.([A-Za-z][A-Za-z0-9_]*)\(/y;
    m.lastIndex = pos;
    const found = m.exec(text);
    if (!found) return undefined;
    const at = pos + 1;
    const fn = found[1]!;
    if (!(fn in FUNCTIONS)) {
      const guess = closest(fn, Object.keys(FUNCTIONS));
      fail(`unknown function '${fn}'${guess ? `, did you mean '${guess}'` : ''}; functions: ${Object.keys(FUNCTIONS).map((f) => `${f}()`).join(', ')}`, at);
    }
    pos += found[0].length;
    return { name: fn, at };
  };
  const close = (fn: string) => {
    skipSpaces();
    if (text[pos] !== ')') fail(`expected ")" to close ${fn}(`);
    pos++;
  };

  /** join(), toDate(), toText(), exists(), firstWord(), lastWord(), countryCode() and memberOf() convert the values at the end: nothing may follow them. */
  const finish = (parsed: ParsedPath, fn: PathName): ParsedPath => {
    if (fn.name === 'join') {
      skipSpaces();
      parsed.finish = { kind: 'join', separator: quoted(), at: fn.at };
    } else if (fn.name === 'memberOf') {
      skipSpaces();
      const valueAt = pos;
      if (text[pos] === "'") parsed.finish = { kind: 'memberOf', valueSet: quoted(), valueAt, at: fn.at };
      else if (text[pos] === '%') {
        pos++;
        const alias = match(ALIAS) ?? fail('expected a uris name after % (the value set\'s canonical URL)');
        parsed.finish = { kind: 'memberOf', valueSet: alias, alias: true, valueAt, at: fn.at };
      } else fail(`memberOf() takes a value set: %name (one of \`uris\`) or its canonical URL in quotes, at ${rest()}`);
    } else if (fn.name === 'toDate' || fn.name === 'toText' || fn.name === 'exists' || fn.name === 'firstWord' || fn.name === 'lastWord' || fn.name === 'countryCode') parsed.finish = { kind: fn.name, at: fn.at };
    else fail(`${fn.name}() goes after an element name`, fn.at);
    close(fn.name);
    skipSpaces();
    if (pos < text.length && text[pos] !== '|') fail(`${fn.name}() ends a path: nothing may follow it`);
    return parsed;
  };

  const path = (): ParsedPath => {
    skipSpaces();
    const parsed: ParsedPath = { steps: [], at: pos };
    if (text[pos] === '%') {
      pos++;
      parsed.from = name('the name of a `let` after %');
      if (pos === text.length || text[pos] === ' ' || text[pos] === '|') return parsed;
      if (text[pos] !== '.') fail(`unexpected "${text[pos]}"`);
      // `%range.toText()`: the let's element itself, converted.
      const fn = functionCall();
      if (fn) return finish(parsed, fn);
      pos++;
    }
    for (;;) {
      const step: PathStep = { ...name('an element name'), where: [], first: false };
      if (text[pos] === '[') {
        pos++;
        const digits = match(/\d+/y) ?? fail('expected a number inside [ ]');
        step.index = Number(digits);
        if (text[pos] !== ']') fail('expected "]"');
        pos++;
      }
      parsed.steps.push(step);
      for (;;) {
        const fn = functionCall();
        if (!fn) break;
        if (fn.name === 'where') {
          if (step.first || step.resolve) fail(`where() goes before ${step.first ? 'first' : 'resolve'}()`, fn.at);
          for (;;) {
            skipSpaces();
            step.where.push(condition());
            skipSpaces();
            if (!text.startsWith('and ', pos)) break;
            pos += 4;
          }
          close('where');
        } else if (fn.name === 'first') {
          if (step.resolve) fail('first() goes before resolve()', fn.at);
          close('first');
          step.first = true;
        } else if (fn.name === 'resolve') {
          close('resolve');
          step.resolve = true;
        } else return finish(parsed, fn);
      }
      skipSpaces();
      if (pos === text.length || text[pos] === '|') return parsed;
      if (text[pos] === '[') fail('put the [index] before .where(…)');
      if (text[pos] !== '.') fail(`unexpected "${text[pos]}"`);
      pos++;
    }
  };

  const alternatives = [path()];
  while (text[pos] === '|') {
    pos++;
    alternatives.push(path());
  }
  return alternatives;
}

/** One path without alternatives (e.g. a `fixed` key). */
export function parsePath(text: string): ParsedPath {
  const [only, second] = parseExpression(text);
  if (second) throw new PathSyntaxError(second.at - 1, 'a single path is needed here: `|` (a fallback) only reads');
  return only!;
}
