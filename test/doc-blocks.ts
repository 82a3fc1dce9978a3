import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The documentation a new user walks (README.md, docs/, mappings/README.md, the client libraries' READMEs) and its
 * fenced blocks: what test/docs-links.unit.test.ts checks and test/doc-blocks.test.ts runs.
 */

export const root = fileURLToPath(new URL('..', import.meta.url));
const markdownUnder = (dir: string): string[] =>
  readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return markdownUnder(path);
    return name.endsWith('.md') ? [path] : [];
  });
const clientReadmes = readdirSync(join(root, 'clients'))
  .map((dir) => `clients/${dir}/README.md`)
  .filter((file) => existsSync(join(root, file)));
/** The guides: each has a table of contents. */
export const guides = [...markdownUnder('docs'), 'mappings/README.md'];
export const files = ['README.md', ...guides, ...clientReadmes];
export const text = (file: string) => readFileSync(join(root, file), 'utf8');

export interface FencedBlock {
  /** The line of its opening fence (1-based). */
  line: number;
  body: string;
  /** Why the block is not run by test/doc-blocks.test.ts, from a `<!-- not run: … -->` on the line above its fence. */
  notRun?: string;
}

/** The fenced blocks of a language, with the line each starts on and the reason it is not run, if it says one. */
export function fencedBlocks(markdown: string, languages: string[]): FencedBlock[] {
  const blocks: FencedBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^\s*```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    while (++i < lines.length && !/^\s*```\s*$/.test(lines[i]!)) body.push(lines[i]!);
    const notRun = /^\s*<!-- not run: (.+?) -->\s*$/.exec(lines[start - 1] ?? '')?.[1];
    if (languages.includes(open[1]!)) blocks.push({ line: start + 1, body: body.join('\n'), ...(notRun && { notRun }) });
  }
  return blocks;
}

/** The shell blocks of a file: what a reader pastes into a terminal. */
export const shellBlocks = (file: string) => fencedBlocks(text(file), ['sh', 'bash', 'shell']);
