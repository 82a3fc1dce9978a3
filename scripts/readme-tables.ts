// `npm run docs:readme` (part of `npm run docs`): rewrites README.md's blocks generated from code tables (scopes,
// consent types, event rules, record types and shapes: scripts/readme-blocks.ts). test/readme-blocks.unit.test.ts
// and `pont mappings check` fail when they are out of date.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { withGeneratedBlocks } from '../src/mapping/record-docs';
import { readmeBlocksFromCode } from './readme-blocks';

const readme = fileURLToPath(new URL('../README.md', import.meta.url));
loadFhirDefinitions();
const before = readFileSync(readme, 'utf8');
const after = withGeneratedBlocks(before, readmeBlocksFromCode());
writeFileSync(readme, after);
console.log(after === before ? 'README.md: generated tables already up to date' : 'README.md: generated tables rewritten');
