import type { TerminologyCapabilities, TerminologyCapabilitiesCodeSystemVersion } from '@medplum/fhirtypes';
import type { Queryable } from '../../db/database';
import { currentFirst, versionKey } from './current';
import { FILTER_OPS } from './expand';
import { statementHeader } from '../statement-header';

/** Filters on what every concept has (expand.ts filterSql); a code system's own properties take the rest. */
const CONCEPT_FILTERS = [
  { code: 'concept', op: [...FILTER_OPS].filter((op) => op !== 'exists') },
  { code: 'parent', op: ['=', 'in', 'not-in'] },
  { code: 'child', op: ['=', 'in', 'not-in'] },
  { code: 'display', op: ['=', 'in', 'not-in', 'regex'] },
  { code: 'inactive', op: ['=', 'in', 'not-in'] },
];
const PROPERTY_OPS = ['=', 'in', 'not-in', 'regex', 'exists'];
/** The $expand parameters that change an expansion (service.ts OPERATIONS takes others, accepted and ignored). */
const EXPANSION_PARAMETERS = ['url', 'valueSet', 'valueSetVersion', 'filter', 'offset', 'count', 'activeOnly'];

/**
 * `GET metadata?mode=terminology` (R4 TerminologyCapabilities): the loaded code systems and each of their versions
 * (the current one, src/fhir/term/current.ts, `isDefault`), the filters each takes, the expansion parameters, and
 * what $validate-code and $translate can do. Read from the database at each request: a load shows at once.
 */
export async function terminologyCapabilities(db: Queryable, fhirBase: string): Promise<TerminologyCapabilities> {
  const { rows } = await db.query<{ url: string; version: string; current: boolean; properties: string[] | null }>(
    `SELECT s.url, s.version,
            s.id = (SELECT x.id FROM term_code_systems x WHERE x.url = s.url AND x.state = 'active' ORDER BY ${currentFirst('x')} LIMIT 1) AS current,
            (SELECT array_agg(DISTINCT p->>'code') FROM jsonb_array_elements(CASE WHEN jsonb_typeof(s.resource->'property') = 'array' THEN s.resource->'property' ELSE '[]' END) p
              WHERE jsonb_typeof(p->'code') = 'string' AND p->>'code' NOT IN ('parent', 'child', 'inactive')) AS properties
     FROM term_code_systems s WHERE s.state = 'active'
     ORDER BY s.url, ${versionKey('s.version')} DESC NULLS LAST, s.id DESC`,
  );
  const systems = new Map<string, TerminologyCapabilitiesCodeSystemVersion[]>();
  for (const r of rows) {
    const versions = systems.get(r.url) ?? systems.set(r.url, []).get(r.url)!;
    versions.push({
      ...(r.version ? { code: r.version } : {}),
      isDefault: r.current,
      filter: [...CONCEPT_FILTERS, ...(r.properties ?? []).sort().map((code) => ({ code, op: PROPERTY_OPS }))],
      property: ['parent', 'child', 'inactive', ...(r.properties ?? [])],
    });
  }
  return {
    resourceType: 'TerminologyCapabilities',
    ...statementHeader(),
    implementation: { description: 'Pont FHIR R4 terminology (docs/fhir.md "Terminology")', url: fhirBase },
    // The `date` parameter of the operations is not honoured.
    lockedDate: false,
    // FHIR JSON has no empty arrays: none loaded, no codeSystem.
    ...(systems.size ? { codeSystem: [...systems].map(([uri, version]) => ({ uri, version, subsumption: true })) } : {}),
    expansion: {
      hierarchical: false,
      paging: true,
      incomplete: false,
      parameter: EXPANSION_PARAMETERS.map((name) => ({ name })),
      textFilter: 'Words, each the start of a word of the display (case and accents ignored), or the whole code; at most 200 characters.',
    },
    validateCode: { translations: false },
    translation: { needsMap: false },
    // No `closure`: $closure is not supported.
  };
}
