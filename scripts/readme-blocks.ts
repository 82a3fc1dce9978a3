/**
 * Every generated block of README.md (`<!-- name … -->` … `<!-- /name -->`) and what writes it: one list, so
 * `npm run docs` regenerates them all and test/readme-blocks.unit.test.ts fails, naming `npm run docs`, when one is
 * stale or a block is marked generated without a generator here.
 */
import { fhirScopeTable } from '../src/core/scopes';
import { smartScopeTable } from '../src/auth/smart-scopes';
import { CONSENT_TYPES } from '../src/core/data-classes';
import { eventRulesTable } from '../src/events/rules';
import { loadMappings } from '../src/mapping/index';
import { generatedReadmeBlocks } from '../src/mapping/record-docs';

/** The blocks written from code tables (`npm run docs:readme`), by marker name. Needs the FHIR definitions loaded. */
export function readmeBlocksFromCode(): Record<string, string> {
  const consentTypes = Object.entries(CONSENT_TYPES).map(([name, t]) => `| \`${name}\` | ${t.classes.map((c) => `\`${c}\``).join(' ')} | ${t.description} |`);
  return {
    'fhir-scope-table': fhirScopeTable(),
    'smart-scopes': smartScopeTable(),
    'consent-types': ['| `consent_type` | Classes | Covers |', '|---|---|---|', ...consentTypes].join('\n'),
    'event-rules': ['| Event | Resource | When |', '|---|---|---|', eventRulesTable()].join('\n'),
    ...generatedReadmeBlocks(loadMappings()), // record-types, record-shapes
  };
}

/**
 * Blocks drawn elsewhere, with the test that keeps each in step. The layer diagram is drawn from the import graph
 * that test/dependencies.test.ts measures; `npm run docs:layers` (in `npm run docs`) redraws it.
 */
export const README_BLOCKS_DRAWN_BY_TESTS: Record<string, string> = {
  'layer-diagram': 'test/dependencies.test.ts',
};

/** The README's blocks: name, opening comment and body, in order. */
export function readmeBlocks(readme: string): Array<{ name: string; comment: string; body: string }> {
  return [...readme.matchAll(/<!-- ([a-z][a-z0-9-]*)\b([^>]*)-->\n([\s\S]*?)<!-- \/\1 -->/g)].map((m) => ({ name: m[1]!, comment: m[2]!, body: m[3]! }));
}
