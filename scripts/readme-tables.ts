// `npm run docs:readme` (part of `npm run docs`): rewrites the documentation's blocks generated from code tables
// (scopes, consent types, event rules, what the FHIR API supports, record types and shapes: scripts/readme-blocks.ts),
// in whichever file holds each (README.md, docs/*.md, mappings/README.md). test/readme-blocks.unit.test.ts and
// `pont mappings check` fail when they are out of date.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { withGeneratedBlocks } from '../src/mapping/record-docs';
import { documentationFiles, readmeBlocksFromCode } from './readme-blocks';

const root = fileURLToPath(new URL('..', import.meta.url));
loadFhirDefinitions();
const blocks = readmeBlocksFromCode();
for (const file of documentationFiles(root)) {
  const path = join(root, file);
  const before = readFileSync(path, 'utf8');
  const after = withGeneratedBlocks(before, blocks);
  if (after !== before) writeFileSync(path, after);
  console.log(`${file}: generated tables ${after === before ? 'already up to date' : 'rewritten'}`);
}
