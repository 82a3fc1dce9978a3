import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { README_BLOCKS_DRAWN_BY_TESTS, readmeBlocks, readmeBlocksFromCode } from '../scripts/readme-blocks';

/** README.md's generated blocks: each has a generator (scripts/readme-blocks.ts) and is what it writes now. */

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const blocks = readmeBlocks(readme);
let fromCode: Record<string, string>;
beforeAll(() => {
  loadFhirDefinitions();
  fromCode = readmeBlocksFromCode();
}, 120_000);

describe('README generated blocks', () => {
  it('every block marked generated has a generator, and every generator a block', () => {
    const generated = blocks.filter((b) => /generated/i.test(b.comment)).map((b) => b.name);
    const known = [...Object.keys(fromCode), ...Object.keys(README_BLOCKS_DRAWN_BY_TESTS)];
    expect(generated.filter((name) => !known.includes(name)), 'README blocks marked generated with no generator in scripts/readme-blocks.ts').toEqual([]);
    expect(known.filter((name) => !generated.includes(name)), 'generators in scripts/readme-blocks.ts with no README block marked generated').toEqual([]);
    // Every opening marker that names a block has its closing one (an unclosed block would be neither checked nor written).
    const opened = [...readme.matchAll(/<!-- ([a-z][a-z0-9-]*)\b[^>]*generated[^>]*-->/gi)].map((m) => m[1]);
    expect(opened).toEqual(generated);
  });

  it('each block is what `npm run docs` writes now', () => {
    for (const { name, body } of blocks.filter((b) => b.name in fromCode))
      expect(body.trim(), `README block \`${name}\` is stale: run \`npm run docs\``).toBe(fromCode[name]);
  });
});
