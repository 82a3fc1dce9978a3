import { readFileSync } from 'node:fs';
import { isMap, isScalar, LineCounter, parseDocument, type Node, type Pair, type Scalar, type YAMLMap } from 'yaml';
import { MappingError } from './errors';
import { didYouMean } from './suggest';

/**
 * One YAML file being read for the engine: its nodes and a place to report problems at their line and column.
 * Problems are collected, not thrown, so that one run names every mistake in a file.
 */
export class YamlSource {
  readonly problems: MappingError[] = [];
  readonly root: Node | null = null;
  private readonly lines = new LineCounter();
  private fileText = '';

  constructor(readonly file: string) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      this.problemAt(0, `cannot read the file: ${(err as Error).message}`);
      return;
    }
    this.fileText = text;
    const doc = parseDocument(text, { lineCounter: this.lines, prettyErrors: false, uniqueKeys: true });
    for (const error of doc.errors) {
      if (error.code === 'DUPLICATE_KEY') {
        // The parser says only "Map keys must be unique": name the key, and where it was first given.
        const key = /^(?:"[^"]*"|'[^']*'|[^:#\n]*?)(?=\s*:)/.exec(text.slice(error.pos[0]))?.[0].trim() ?? '';
        const indent = text.lastIndexOf('\n', error.pos[0] - 1) + 1;
        const spaces = text.slice(indent, error.pos[0]);
        const earlier = /^[ -]*$/.test(spaces) ? text.slice(0, indent).lastIndexOf(`\n${spaces.replace(/-/g, ' ')}${key}:`) : -1;
        const first = earlier >= 0 ? ` (first given on line ${this.lines.linePos(earlier + 1).line})` : '';
        this.problemAt(error.pos[0], `duplicate key \`${key}\`${first}: a key may be given once in a mapping`);
      } else this.problemAt(error.pos[0], `malformed YAML: ${error.message}`);
    }
    if (!doc.errors.length) this.root = doc.contents as Node | null;
  }

  get ok(): boolean {
    return this.problems.length === 0;
  }

  problemAt(offset: number, problem: string): void {
    const { line, col } = this.lines.linePos(offset);
    this.problems.push(new MappingError(this.file, line, col, problem));
  }

  lineOf(node: Node | Pair | null | undefined): number {
    return this.lines.linePos(startOf(node)).line;
  }

  /** [line, column] of a node, as problems give them. */
  position(node: Node | Pair | null | undefined): [number, number] {
    const { line, col } = this.lines.linePos(startOf(node));
    return [line, col];
  }

  problem(node: Node | Pair | null | undefined, problem: string): void {
    this.problemAt(startOf(node), problem);
  }

  /** Offset of character `at` of a scalar's text in the file (inside quotes for quoted scalars). */
  offsetInScalar(node: Scalar, at: number): number {
    const start = node.range?.[0] ?? 0;
    if (node.type === 'BLOCK_FOLDED' || node.type === 'BLOCK_LITERAL') {
      // `>-` / `|` text starts on the line after its header; each line break of the file is one character of the text.
      let offset = this.fileText.indexOf('\n', start) + 1;
      let remaining = at;
      for (const line of this.fileText.slice(offset, node.range?.[1]).split('\n')) {
        const indent = /^ */.exec(line)![0].length;
        if (remaining <= line.length - indent) return offset + indent + remaining;
        remaining -= line.length - indent + 1;
        offset += line.length + 1;
      }
      return start;
    }
    const quoted = node.type === 'QUOTE_DOUBLE' || node.type === 'QUOTE_SINGLE';
    return start + (quoted ? 1 : 0) + at;
  }

  /**
   * The pairs of a YAML mapping, after reporting keys that are not in `allowed` (with a suggestion)
   * and missing `required` ones. Undefined (reported) when the node is not a mapping.
   */
  mapping(node: Node | null | undefined, what: string, allowed?: readonly string[], required: readonly string[] = []): Pair<Scalar, Node | null>[] | undefined {
    if (!isMap(node)) {
      this.problem(node, `${what} must be a mapping of \`key: value\` lines`);
      return undefined;
    }
    const pairs = (node as YAMLMap).items as Pair<Scalar, Node | null>[];
    for (const pair of pairs) {
      if (!isScalar(pair.key)) {
        this.problem(pair.key as Node, `${what}: keys must be plain names`);
        continue;
      }
      const key = String(pair.key.value);
      if (allowed && !allowed.includes(key)) {
        this.problem(pair.key, `unknown key \`${key}\` in ${what}${didYouMean(key, allowed)}; allowed: ${allowed.join(', ')}`);
      }
    }
    const present = new Set(pairs.map((p) => (isScalar(p.key) ? String(p.key.value) : '')));
    for (const key of required) if (!present.has(key)) this.problem(node, `${what} is missing \`${key}:\``);
    return pairs;
  }

  /** A scalar's value as text: plain numbers and booleans keep their source spelling (a code `1234` is text). */
  text(node: Node | null | undefined, what: string): string | undefined {
    if (isScalar(node) && node.value !== null && typeof node.value !== 'object') return node.source ?? String(node.value);
    this.problem(node, `${what} must be a single value (text)`);
    return undefined;
  }
}

export function startOf(node: Node | Pair | null | undefined): number {
  if (!node) return 0;
  if ('range' in node && node.range) return node.range[0];
  if ('key' in node) return startOf(node.key as Node);
  return 0;
}

export const keyOf = (pair: Pair<Scalar, unknown>): string => String(pair.key.value);
