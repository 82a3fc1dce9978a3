/**
 * The element paths of a map: the part of FHIRPath that can be written as well as read.
 *
 *   path      = step ("." step)*
 *   step      = name ["[" index "]"] (".where(" condition (" and " condition)* ")")*
 *   condition = name ("." name)* "=" literal
 *   literal   = 'text' | %alias | true | false | number
 *
 * e.g. `identifier.where(system=%health-id).value`, `name.where(use='official').given[0]`, `code.coding[1].code`.
 * Offsets are kept so that problems point at the exact column in the map file.
 */

export interface PathName {
  name: string;
  /** Offset of the name in the path text. */
  at: number;
}

export type Literal = string | number | boolean;

export interface PathCondition {
  path: PathName[];
  value: Literal;
  /** Set when the literal was `%alias`: resolved against the map's `uris` by the compiler. */
  alias?: string;
  valueAt: number;
}

export interface PathStep extends PathName {
  index?: number;
  where: PathCondition[];
}

export class PathSyntaxError extends Error {
  constructor(
    readonly at: number,
    message: string,
  ) {
    super(message);
  }
}

const NAME = /[A-Za-z][A-Za-z0-9_]*/y;
const ALIAS = /[A-Za-z][A-Za-z0-9_-]*/y;
const NUMBER = /-?\d+(\.\d+)?/y;

export function parsePath(text: string): PathStep[] {
  let pos = 0;
  const fail = (message: string): never => {
    throw new PathSyntaxError(pos, message);
  };
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
    return n ? { name: n, at } : fail(`expected ${what} at "${text.slice(pos, pos + 12) || 'the end'}"`);
  };

  const literal = (): Pick<PathCondition, 'value' | 'alias' | 'valueAt'> => {
    const valueAt = pos;
    if (text[pos] === "'") {
      const end = text.indexOf("'", pos + 1);
      if (end < 0) fail('unterminated quoted text');
      const value = text.slice(pos + 1, end);
      pos = end + 1;
      return { value, valueAt };
    }
    if (text[pos] === '%') {
      pos++;
      const alias = match(ALIAS) ?? fail('expected a uris name after %');
      return { value: '', alias, valueAt };
    }
    const word = match(/true|false/y);
    if (word) return { value: word === 'true', valueAt };
    const number = match(NUMBER);
    if (number) return { value: Number(number), valueAt };
    return fail(`expected a value ('text', %name, true, false or a number) at "${text.slice(pos, pos + 12) || 'the end'}"`);
  };

  const condition = (): PathCondition => {
    const path = [name('an element name')];
    while (text[pos] === '.') {
      pos++;
      path.push(name('an element name'));
    }
    skipSpaces();
    if (text[pos] !== '=') fail('expected "=" in where(): only `element = value` conditions are supported');
    pos++;
    skipSpaces();
    return { path, ...literal() };
  };

  const steps: PathStep[] = [];
  for (;;) {
    const step: PathStep = { ...name('an element name'), where: [] };
    if (text[pos] === '[') {
      pos++;
      const digits = match(/\d+/y) ?? fail('expected a number inside [ ]');
      step.index = Number(digits);
      if (text[pos] !== ']') fail('expected "]"');
      pos++;
    }
    while (text.startsWith('.where(', pos)) {
      pos += '.where('.length;
      for (;;) {
        skipSpaces();
        step.where.push(condition());
        skipSpaces();
        if (!text.startsWith('and ', pos)) break;
        pos += 4;
      }
      if (text[pos] !== ')') fail('expected ")" to close where(');
      pos++;
    }
    steps.push(step);
    if (pos === text.length) return steps;
    if (text[pos] === '[') fail('put the [index] before .where(…)');
    if (text[pos] !== '.') fail(`unexpected "${text[pos]}"`);
    pos++;
  }
}
