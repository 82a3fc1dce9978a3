/**
 * Every generated block of the documentation (`<!-- name … -->` … `<!-- /name -->` in README.md, docs/*.md and
 * mappings/README.md) and what writes it: one list, so `npm run docs` regenerates them all, wherever each lives, and
 * test/readme-blocks.unit.test.ts fails, naming `npm run docs`, when one is stale or a block is marked generated
 * without a generator here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { getSearchParameters } from '@medplum/core';
import { fhirScopeTable } from '../src/core/scopes';
import { smartScopeTable } from '../src/auth/smart-scopes';
import { CONSENT_TYPES } from '../src/core/data-classes';
import { allResourceTypes } from '../src/core/fhir-definitions';
import { eventRulesTable } from '../src/events/rules';
import { capabilityStatement } from '../src/fhir/capability';
import { searchProblem } from '../src/fhir/search/parse';
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
    'fhir-support': fhirSupportTable(),
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

/** A text's generated blocks: name, opening comment and body, in order. */
export function readmeBlocks(readme: string): Array<{ name: string; comment: string; body: string }> {
  return [...readme.matchAll(/<!-- ([a-z][a-z0-9-]*)\b([^>]*)-->\n([\s\S]*?)<!-- \/\1 -->/g)].map((m) => ({ name: m[1]!, comment: m[2]!, body: m[3]! }));
}

/** The documentation files that may hold generated blocks, relative to the repository: README.md, docs/*.md, mappings/README.md. */
export function documentationFiles(root: string): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs, 'mappings/README.md'];
}

/** Every generated block of the documentation, with the file (relative to `root`) that holds it. */
export function documentationBlocks(root: string): Array<{ file: string; name: string; comment: string; body: string }> {
  return documentationFiles(root).flatMap((file) => readmeBlocks(readFileSync(join(root, file), 'utf8')).map((b) => ({ file, ...b })));
}

// How the server answers what the CapabilityStatement does not declare (checked by hand against a running server;
// a gap the statement starts declaring without an entry here makes `npm run docs` fail, so that it is described).
const REFUSALS: Record<string, string> = {
  'conditional delete': '`DELETE {type}?criteria`: 405; in a `transaction` or `batch` entry: 400',
  'conditional delete in a bundle': 'a conditional delete in a `transaction` or `batch` entry: 400',
  'search-system': 'system-wide search, `GET /api/fhir/R4?…`: 405',
  'history-system': 'system-wide history, `GET /api/fhir/R4/_history`: 404',
  xml: 'XML: an `Accept` or `_format` asking for it, 406; an XML body, 415',
};
const TYPE_INTERACTIONS = ['read', 'vread', 'update', 'patch', 'delete', 'history-instance', 'history-type', 'create', 'search-type'];
const SYSTEM_INTERACTIONS = ['transaction', 'batch', 'search-system', 'history-system'];
// Search parameters of the specification that name no SearchParameter resource: each is listed when the parser refuses it.
const CONTROL_PARAMETERS = ['_text', '_content', '_filter', '_list', '_query', '_type', '_contained', '_containedType', '_offset'];

/**
 * What the FHIR API supports and what it refuses, from the CapabilityStatement (`GET metadata`) and the search parser:
 * the supported column is the statement's; the other lists what it does not declare, and the search parameters the
 * parser refuses (each checked, so the table cannot claim a refusal the server does not make).
 */
export function fhirSupportTable(): string {
  const statement = capabilityStatement('http://localhost/fhir');
  const rest = statement.rest![0]!;
  const resources = rest.resource ?? [];
  const codes = (list: Array<{ code?: string }> | undefined) => (list ?? []).map((i) => i.code!);
  const all = new Set(resources.flatMap((r) => codes(r.interaction)));
  const readOnly = resources.filter((r) => !codes(r.interaction).includes('create')).map((r) => r.type);
  const missingType = TYPE_INTERACTIONS.filter((i) => !all.has(i));
  const system = codes(rest.interaction);
  const missing = [...missingType, ...SYSTEM_INTERACTIONS.filter((i) => !system.includes(i))];
  const conditionalDelete = resources.some((r) => r.conditionalDelete === 'single' || r.conditionalDelete === 'multiple');
  missing.push(conditionalDelete ? 'conditional delete in a bundle' : 'conditional delete');
  if (!(statement.format ?? []).some((f) => /xml/.test(f))) missing.push('xml');
  const undescribed = missing.filter((m) => !(m in REFUSALS));
  if (undescribed.length) throw new Error(`scripts/readme-blocks.ts: say how the server answers ${undescribed.join(', ')} (REFUSALS)`);
  const conditional = [
    resources.some((r) => r.conditionalCreate) && 'create (`If-None-Exist`)',
    resources.some((r) => r.conditionalUpdate) && 'update (`PUT {type}?criteria`)',
    resources.some((r) => r.conditionalRead === 'full-support') && 'read (`If-None-Match`, `If-Modified-Since`)',
    conditionalDelete && `delete (\`DELETE {type}?criteria\`: ${resources.some((r) => r.conditionalDelete === 'multiple') ? 'every match' : 'the one match; several: 412'})`,
  ].filter(Boolean);
  const operations = new Map<string, Set<string>>();
  for (const op of rest.operation ?? []) operations.set(op.name!, new Set(['the system']));
  for (const r of resources) for (const op of r.operation ?? []) (operations.get(op.name!) ?? operations.set(op.name!, new Set()).get(op.name!)!).add(r.type!);
  const typeCount = resources.length;
  const operationText = [...operations]
    .map(([name, on]) => `\`$${name}\` (${on.size >= typeCount ? 'every type' : [...on].join(', ')})`)
    .join(', ');

  // Search: the parameters the statement lists are those the store indexes; the others of the definitions are refused.
  const refusedTypes = new Map<string, string[]>();
  for (const type of allResourceTypes()) {
    const listed = new Set((resources.find((r) => r.type === type)?.searchParam ?? []).map((p) => p.name));
    for (const [code, sp] of Object.entries(getSearchParameters(type) ?? {})) {
      if (listed.has(code) || (sp.type !== 'composite' && sp.type !== 'special')) continue;
      if (!/not supported/.test(searchProblem(type, { [code]: 'x' }) ?? '')) throw new Error(`${type}?${code} (${sp.type}) is not in the CapabilityStatement, and the search parser does not refuse it`);
      const examples = refusedTypes.get(sp.type) ?? refusedTypes.set(sp.type, []).get(sp.type)!;
      examples.push(`${type}?${code}`);
    }
  }
  const refusedControls = CONTROL_PARAMETERS.filter((p) => /not supported/.test(searchProblem('Observation', { [p]: 'x' }) ?? ''));
  const example = (type: string) => {
    const list = refusedTypes.get(type) ?? [];
    return `${list.length} ${type}, e.g. \`${list.find((e) => e.startsWith('Observation?')) ?? list[0]}\``;
  };

  const rows = [
    '| | Supported: what `GET metadata` declares | Not supported |',
    '|---|---|---|',
    `| Interactions | ${TYPE_INTERACTIONS.filter((i) => all.has(i)).map((i) => `\`${i}\``).join(' ')} on every type (${readOnly.join(' and ')}: no \`create\`, \`update\`, \`patch\` or \`delete\`); ${system.map((i) => `\`${i}\``).join(' ')} | ${[...missingType, ...SYSTEM_INTERACTIONS.filter((i) => !system.includes(i))].map((m) => REFUSALS[m]).join('; ') || 'none'} |`,
    `| Conditional interactions | ${conditional.join(', ')} | ${REFUSALS[missing.find((m) => m.startsWith('conditional delete'))!]} |`,
    `| Operations | ${operationText} | any other: 404 (405 to a POST) |`,
    `| Formats | ${(statement.format ?? []).map((f) => `\`${f}\``).join(', ')} | ${missing.includes('xml') ? REFUSALS.xml : 'none'} |`,
    `| Search parameters | those each type lists in \`searchParam\`, with \`_id\` and \`_lastUpdated\` | ${refusedControls.map((p) => `\`${p}\``).join(', ')}; composite and special parameters (${[...refusedTypes.keys()].sort().map(example).join('; ')}): 400 |`,
  ];
  return rows.join('\n');
}
