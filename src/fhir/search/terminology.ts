import { ApiError, badRequest, ErrorCode } from '../../core/errors';
import { TERMINOLOGY_SCOPE } from '../../core/scopes';
import type { Queryable } from '../../db/database';
import { sql, Sql } from '../../db/sql';
import type { Filter, ParsedSearch, TokenValue } from './parse';
import { currentFirst } from '../term/current';

/**
 * Token search through the loaded terminology (docs/fhir.md "Terminology"): the search index's `hash_sys_value` of
 * every coding below (or above) a concept, or in a value set, computed in SQL (`pont_token_hash`, migration 030) from
 * the closure or the stored expansion, so the index is probed through its hash index: never a list of codes built
 * per request.
 */

/** The current version of each code system (src/fhir/term/current.ts): `s` is term_code_systems. */
const newest = new Sql([`s.state = 'active' AND s.id = (SELECT x.id FROM term_code_systems x WHERE x.url = s.url AND x.state = 'active' ORDER BY ${currentFirst('x')} LIMIT 1)`], []);
/** The current version first (src/fhir/term/current.ts). */
const valueSetsCurrentFirst = new Sql([currentFirst('term_value_sets')], []);

/** `hash_sys_value IN (…)` for `:below` (the concept and its descendants) or `:above` (it and its ancestors). */
export function hierarchyCondition(resourceType: string, param: string, v: TokenValue, direction: 'below' | 'above'): Sql {
  const [from, to] = direction === 'below' ? [sql`ancestor`, sql`descendant`] : [sql`descendant`, sql`ancestor`];
  const system = v.system === undefined ? sql`` : sql` AND s.url = ${v.system}`;
  return sql`hash_sys_value IN (SELECT pont_token_hash(${resourceType}, ${param}, s.url, d.code)
    FROM term_code_systems s JOIN term_concepts a ON a.cs = s.id AND a.code = ${v.code!}
    JOIN term_closure cl ON cl.${from} = a.cid JOIN term_concepts d ON d.cid = cl.${to}
    WHERE ${newest}${system})`;
}

/** `hash_sys_value IN (…)` for `:in` / `:not-in`: the codings of the value set's stored expansion. */
export function valueSetCondition(resourceType: string, param: string, v: TokenValue): Sql {
  const [url, version] = v.valueSet!.split('|');
  return sql`hash_sys_value IN (SELECT pont_token_hash(${resourceType}, ${param}, c.system, c.code) FROM term_value_set_codes c
    WHERE c.vs = (SELECT id FROM term_value_sets WHERE url = ${url!} AND state = 'active'${version ? sql` AND version = ${version}` : sql``} ORDER BY ${valueSetsCurrentFirst} LIMIT 1))`;
}

/** What of the loaded terminology a search's filters use (chains and `_has` included). */
interface TerminologyUse {
  used: boolean;
  systems: Set<string>;
  valueSets: Set<string>;
}

function terminologyUse(filters: readonly Filter[], out: TerminologyUse = { used: false, systems: new Set(), valueSets: new Set() }): TerminologyUse {
  for (const f of filters) {
    if (f.kind === 'chain') terminologyUse(f.inner, out);
    else if (f.kind === 'has') terminologyUse([f.inner], out);
    else if (f.kind === 'token' && (f.modifier === 'below' || f.modifier === 'above')) {
      out.used = true;
      for (const v of f.values) if (v.system !== undefined) out.systems.add(v.system);
    } else if (f.kind === 'token' && (f.modifier === 'in' || f.modifier === 'not-in')) {
      out.used = true;
      for (const v of f.values) out.valueSets.add(v.valueSet!);
    }
  }
  return out;
}

/**
 * The terminology modifiers need `terminology:read` (`mayRead`): they probe the loaded hierarchy and value sets, as
 * the operations do. 403, before anything about what is loaded is told; part of checkSearchReach, so every door
 * that searches (FHIR search, Connect records, Bulk export's `_typeFilter`) refuses alike.
 */
export function checkTerminologyScope(search: ParsedSearch, mayRead: boolean): void {
  if (!mayRead && terminologyUse(search.filters).used)
    throw new ApiError(403, ErrorCode.forbidden, `:below, :above, :in and :not-in search the loaded terminology: they need the scope ${TERMINOLOGY_SCOPE}`, {
      extra: { required_scopes: [TERMINOLOGY_SCOPE] },
    });
}

/**
 * A search naming a code system or value set that is not loaded (or cannot be expanded) is a 400 saying so, rather
 * than an empty answer that would look like "no such resources". After checkTerminologyScope.
 */
export async function checkTerminologyLoaded(db: Queryable, search: ParsedSearch): Promise<void> {
  const wanted = terminologyUse(search.filters);
  if (!wanted.systems.size && !wanted.valueSets.size) return;
  const systems = [...wanted.systems];
  const valueSets = [...wanted.valueSets];
  const { rows } = await db.query<{ kind: string; name: string; unexpandable: string | null }>(
    `SELECT 'system' AS kind, u AS name, NULL AS unexpandable FROM unnest($1::text[]) u
       WHERE NOT EXISTS (SELECT 1 FROM term_code_systems WHERE url = u AND state = 'active')
     UNION ALL
     SELECT 'valueSet', v, (SELECT coalesce(unexpandable, '') FROM term_value_sets
       WHERE url = split_part(v, '|', 1) AND state = 'active' AND (strpos(v, '|') = 0 OR version = split_part(v, '|', 2)) ORDER BY ${currentFirst('term_value_sets')} LIMIT 1)
     FROM unnest($2::text[]) v`,
    [systems, valueSets],
  );
  for (const r of rows) {
    if (r.kind === 'system') throw badRequest(`Code system ${r.name} is not loaded: :below and :above search its loaded hierarchy (docs/fhir.md "Terminology")`);
    if (r.unexpandable === null) throw badRequest(`Value set ${r.name} is not loaded: :in and :not-in search its loaded expansion (docs/fhir.md "Terminology")`);
    if (r.unexpandable) throw badRequest(`Value set ${r.name} cannot be expanded: ${r.unexpandable}`);
  }
}
