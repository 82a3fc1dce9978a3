import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { README_BLOCKS_DRAWN_BY_TESTS, documentationBlocks, documentationFiles, readmeBlocksFromCode } from '../scripts/readme-blocks';

/**
 * The documentation's generated blocks (README.md, docs/*.md, mappings/README.md): each has a generator
 * (scripts/readme-blocks.ts), appears once, and is what it writes now.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const blocks = documentationBlocks(root);
let fromCode: Record<string, string>;
beforeAll(() => {
  loadFhirDefinitions();
  fromCode = readmeBlocksFromCode();
}, 120_000);

describe('generated documentation blocks', () => {
  it('every block marked generated has a generator, and every generator one block, in whichever file', () => {
    const generated = blocks.filter((b) => /generated/i.test(b.comment)).map((b) => b.name);
    const known = [...Object.keys(fromCode), ...Object.keys(README_BLOCKS_DRAWN_BY_TESTS)];
    expect(generated.filter((name) => !known.includes(name)), 'blocks marked generated with no generator in scripts/readme-blocks.ts').toEqual([]);
    expect(known.filter((name) => !generated.includes(name)), 'generators in scripts/readme-blocks.ts with no block marked generated').toEqual([]);
    expect(generated.filter((name, i) => generated.indexOf(name) !== i), 'blocks generated in two places: one place for each').toEqual([]);
    // Every opening marker that names a block has its closing one (an unclosed block would be neither checked nor written).
    const opened = documentationFiles(root).flatMap((file) => [...readFileSync(join(root, file), 'utf8').matchAll(/<!-- ([a-z][a-z0-9-]*)\b[^>]*generated[^>]*-->/gi)].map((m) => m[1]));
    expect(opened).toEqual(generated);
  });

  it('each block is what `npm run docs` writes now', () => {
    for (const { file, name, body } of blocks.filter((b) => b.name in fromCode))
      expect(body.trim(), `${file}: block \`${name}\` is stale: run \`npm run docs\``).toBe(fromCode[name]);
  });
});
