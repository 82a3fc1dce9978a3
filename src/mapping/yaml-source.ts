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

  constructor(readonly file: string) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      this.problemAt(0, `cannot read the file: ${(err as Error).message}`);
      return;
    }
    const doc = parseDocument(text, { lineCounter: this.lines, prettyErrors: false, uniqueKeys: true });
    for (const error of doc.errors) this.problemAt(error.pos[0], `malformed YAML: ${error.message}`);
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

  problem(node: Node | Pair | null | undefined, problem: string): void {
    this.problemAt(startOf(node), problem);
  }

  /** Offset of character `at` of a scalar's text in the file (inside quotes for quoted scalars). */
  offsetInScalar(node: Scalar, at: number): number {
    const quoted = node.type === 'QUOTE_DOUBLE' || node.type === 'QUOTE_SINGLE';
    return (node.range?.[0] ?? 0) + (quoted ? 1 : 0) + at;
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
