import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commands } from '../src/cli';
import { files, guides, root, shellBlocks, text } from './doc-blocks';
import { LOCAL_CODE_EDITS } from './local-code-table';

/**
 * The documentation a new user walks (README.md, docs/, mappings/README.md, the client libraries' READMEs): every
 * relative link and #anchor resolves, the README stays short, each guide has a table of contents that lists its
 * sections, and the commands of its shell blocks name commands, options and scripts that exist. The shell blocks a
 * reader pastes are run as written by test/doc-blocks.test.ts; the generated tables are checked by
 * test/readme-blocks.unit.test.ts.
 */

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
      for (const block of shellBlocks(file)) {
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

  it('a shell block a test does not run says why, and names the file that runs its commands instead', () => {
    const problems: string[] = [];
    for (const file of files)
      for (const { line, notRun } of shellBlocks(file)) {
        // The client libraries' READMEs hold installs only, each run by its library's own tests.
        if (notRun === undefined && file.startsWith('clients/')) problems.push(`${file}:${line}: says no \`<!-- not run: … -->\` (the docs' test runs only the guides' blocks)`);
        if (notRun === undefined) continue;
        const named = [...notRun.matchAll(/(?:^|\s|\()((?:clients\/\w+\/)?(?:test|tests|bench|scripts|\.ci)\/[\w./-]+\w)/g)].map((m) => m[1]!);
        if (!named.length) problems.push(`${file}:${line}: "not run: ${notRun}" names no test/, bench/, scripts/, .ci/ or a client's test file that runs it`);
        for (const path of named) if (!existsSync(join(root, path))) problems.push(`${file}:${line}: ${path} does not exist`);
      }
    expect(problems).toEqual([]);
  });

  it('a file of the code that points to a section of the docs (`docs/fhir.md "Terminology"`) names a heading of it', () => {
    const code = (dir: string): string[] =>
      readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
        const path = join(dir, e.name);
        if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'vendor' ? [] : code(path);
        return /\.(ts|mjs|py|php)$/.test(e.name) ? [path] : [];
      });
    // A section: a heading, or a paragraph that opens with its name in bold (`**Adding an event type**:`).
    const sections = (file: string) => [...prose(text(file)).matchAll(/^(?:#{1,6}\s+(.+?)\s*|\*\*(.+?)\*\*.*)$/gm)].map((m) => (m[1] ?? m[2]!).replace(/`/g, ''));
    // Named as written or by its first words: "Record types" is `### Record types (\`record:\`)`.
    const names = (section: string, heading: string) => heading === section || heading.startsWith(`${section}:`) || heading.startsWith(`${section} (`);
    const problems: string[] = [];
    for (const file of ['src', 'test', 'bench', 'scripts', 'clients'].flatMap(code))
      for (const m of text(file).matchAll(/((?:docs\/[a-z0-9-]+|mappings\/README|README)\.md) "([^"]+)"/g)) {
        const [, doc, written] = m as unknown as [string, string, string];
        // A name a comment wrapped: its words, without the comment's leading `*`, `//` or `#`.
        const section = written.replace(/\s*\n\s*(?:\*|\/\/|#)?\s*/g, ' ');
        if (!existsSync(join(root, doc)) || !sections(doc).some((heading) => names(section, heading))) problems.push(`${file}: ${doc} "${section}" is no section of ${doc}`);
      }
    expect(problems).toEqual([]);
  });

  it('no table is cut in two by a blank line (the rows after it would show as text)', () => {
    const cut: string[] = [];
    for (const file of files) {
      const lines = prose(text(file)).split('\n');
      for (let i = 1; i + 2 < lines.length; i++) {
        const tableGoesOn = lines[i - 1]!.startsWith('|') && lines[i]!.trim() === '' && lines[i + 1]!.startsWith('|') && !/^\|[\s|:-]+\|\s*$/.test(lines[i + 2]!);
        if (tableGoesOn) cut.push(`${file}:${i + 1}`);
      }
    }
    expect(cut).toEqual([]);
  });

  it("mappings/README.md's local-code table is the one the tests add (test/local-code-table.ts), and the shipped lab map has none, as it says", () => {
    const readme = text('mappings/README.md');
    expect(readme).toMatch(/The shipped `lab-result.map.yaml` has no such table/);
    expect(text('mappings/lab-result.map.yaml')).not.toMatch(/local_code|local-lab/);
    // The rule as written, without comments and blank lines: the README's yaml block and the tests' edit.
    const rule = (yaml: string) =>
      /^ {2}local_code:\n(?: {4}.*\n)+/m
        .exec(`${yaml}\n`)![0]
        .split('\n')
        .map((line) => line.replace(/\s+#.*$/, '').trimEnd())
        .filter(Boolean);
    const block = /### A local-code table[\s\S]*?```yaml\n([\s\S]*?)```/.exec(readme)![1]!;
    const edit = LOCAL_CODE_EDITS.map(([, to]) => to).find((to) => to.includes('  local_code:\n'))!;
    expect(rule(block)).toEqual(rule(edit.replace(/^ {2}#.*\n/gm, '')));
  });
});
