import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { commands } from '../src/cli';

/**
 * The documentation a new user walks (README.md, docs/, mappings/README.md, the client libraries' READMEs): every
 * relative link and #anchor resolves, the README stays short, each guide has a table of contents that lists its
 * sections, and the commands of its shell blocks name commands, options and scripts that exist. The shell blocks a
 * reader pastes whole are run as written by test/readme.test.ts; the generated tables are checked by
 * test/readme-blocks.unit.test.ts.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const markdownUnder = (dir: string): string[] =>
  readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return markdownUnder(path);
    return name.endsWith('.md') ? [path] : [];
  });
const clientReadmes = readdirSync(join(root, 'clients'))
  .map((dir) => `clients/${dir}/README.md`)
  .filter((file) => existsSync(join(root, file)));
const guides = [...markdownUnder('docs'), 'mappings/README.md'];
const files = ['README.md', ...guides, ...clientReadmes];
const text = (file: string) => readFileSync(join(root, file), 'utf8');

/** The text outside fenced code blocks, line numbers kept (fenced lines blanked). */
function prose(markdown: string): string {
  let fenced = false;
  return markdown
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line;
    })
    .join('\n');
}

/** The fenced blocks of a language, with the line each starts on. */
function fencedBlocks(markdown: string, languages: string[]): Array<{ line: number; body: string }> {
  const blocks: Array<{ line: number; body: string }> = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^\s*```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    while (++i < lines.length && !/^\s*```\s*$/.test(lines[i]!)) body.push(lines[i]!);
    if (languages.includes(open[1]!)) blocks.push({ line: start + 1, body: body.join('\n') });
  }
  return blocks;
}

/** The anchor GitHub gives a heading (github-slugger): lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  const words = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link's text
    .replace(/<[^>]+>/g, '')
    .replace(/`/g, '');
  return words
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a file's headings, numbered as GitHub numbers repeated ones. */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const m of prose(text(file)).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    found.add(n ? `${base}-${n}` : base);
  }
  return found;
}

/** The Markdown links and images of a file's prose (not in code), with their line. */
function links(file: string): Array<{ line: number; target: string }> {
  const out: Array<{ line: number; target: string }> = [];
  prose(text(file))
    .split('\n')
    .forEach((line, i) => {
      const outsideCode = line.replace(/`[^`]*`/g, '');
      for (const m of outsideCode.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) out.push({ line: i + 1, target: m[1]! });
    });
  return out;
}

describe('the documentation', () => {
  it('README.md is at most 250 lines', () => {
    expect(text('README.md').split('\n').length).toBeLessThanOrEqual(250);
  });

  it('every relative link names a file that exists, and every #anchor a heading of it', () => {
    const broken: string[] = [];
    for (const file of files) {
      for (const { line, target } of links(file)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:…: not ours to check
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const resolved = path ? relative(root, join(root, dirname(file), decodeURIComponent(path))) : file;
        const where = `${file}:${line}: ${target}`;
        if (!existsSync(join(root, resolved))) broken.push(`${where} (no such file)`);
        else if (anchor !== undefined) {
          if (!resolved.endsWith('.md')) broken.push(`${where} (an anchor in a file that is not Markdown)`);
          else if (!anchors(resolved).has(anchor)) broken.push(`${where} (no heading makes #${anchor} in ${resolved})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('each guide opens with a table of contents that lists its sections, in order', () => {
    for (const file of guides) {
      const body = prose(text(file));
      const sections = [...body.matchAll(/^## (.+)$/gm)].map((m) => m[1]!).filter((h) => h !== 'Contents');
      const contents = /^## Contents\n\n((?:- .*\n)+)/m.exec(body);
      expect(contents, `${file} has no "## Contents" list`).not.toBeNull();
      const listed = [...contents![1]!.matchAll(/^- \[[^\]]*\]\(#([^)]+)\)/gm)].map((m) => m[1]);
      expect(listed, `${file}: the contents list its ## sections`).toEqual(sections.map(slug));
    }
  });

  it('the commands of the shell blocks exist as written: `node bin/pont.js` commands and options, `npm run` scripts', () => {
    const scripts = Object.keys(JSON.parse(text('package.json')).scripts as Record<string, string>);
    const problems: string[] = [];
    for (const file of files.filter((f) => !f.startsWith('clients/'))) {
      for (const block of fencedBlocks(text(file), ['sh', 'bash', 'shell'])) {
        // Commands, without comments and with continued lines joined.
        const script = block.body.replace(/\\\n/g, ' ');
        for (const [n, line] of script.split('\n').entries()) {
          const code = line.replace(/(^|\s)#.*$/, '');
          const at = `${file}:${block.line + n + 1}`;
          if (/^\s*(?:\S+=\S+\s+)*pont\s/.test(code)) problems.push(`${at}: a bare \`pont\` is not on the PATH of a checkout: write \`node bin/pont.js\``);
          for (const m of code.matchAll(/\bnpm run(?: -s)? ([\w:.-]+)/g)) if (!scripts.includes(m[1]!)) problems.push(`${at}: no npm script \`${m[1]}\``);
          for (const m of code.matchAll(/node bin\/pont\.js ((?:[a-z][\w-]*)(?: [a-z][\w-]*)?)([^|;&)]*)/g)) {
            const words = m[1]!.split(' ');
            const spec = commands.find((c) => c.name === m[1]) ?? commands.find((c) => c.name === words[0]);
            if (!spec) {
              problems.push(`${at}: no command \`${m[1]}\``);
              continue;
            }
            const options = Object.keys(spec.options ?? {});
            for (const o of m[2]!.matchAll(/(?:^|\s)--([a-z][\w-]*)/g))
              if (o[1] !== 'help' && !options.includes(o[1]!)) problems.push(`${at}: \`${spec.name}\` has no option --${o[1]}`);
          }
        }
      }
    }
    expect(problems).toEqual([]);
  });
});
