import type { Bundle, CodeSystemConcept, Resource } from '@medplum/fhirtypes';
import { badRequest, notFound } from '../../core/errors';
import type { Queryable } from '../../db/database';
import { and, Sql, sql } from '../../db/sql';
import { escapeLike } from '../normalize';
import { present } from '../present';
import { currentFirst, versionKey } from './current';
import { MAX_PARAM_CHARS } from './params';

/**
 * The loaded CodeSystem, ValueSet and ConceptMap resources themselves, read (`GET CodeSystem/{id}`) and searched
 * (`GET CodeSystem?url=…`) with `terminology:read` (docs/fhir.md "Terminology", "Reading the loaded resources"). A
 * url answers with its current version (current.ts) unless `version` is searched for. A code system's concepts come
 * with a read when it has at most MAX_CONCEPTS_IN_READ of them, flat, its hierarchy as `parent` properties; a larger
 * one, and every code system in a search, comes without them, tagged SUBSETTED, `count` saying how many it has:
 * its concepts are for $lookup, $expand and $validate-code, never one answer of 300,000.
 */
export const TERMINOLOGY_TYPES = ['CodeSystem', 'ValueSet', 'ConceptMap'] as const;
export type TerminologyType = (typeof TERMINOLOGY_TYPES)[number];
export const isTerminologyType = (type: string): type is TerminologyType => (TERMINOLOGY_TYPES as readonly string[]).includes(type);

/** Concepts a read of a code system returns at most (a larger one comes without them). */
export const MAX_CONCEPTS_IN_READ = 1000;
const DEFAULT_COUNT = 20;
const MAX_COUNT = 1000;
const TABLES: Record<TerminologyType, string> = { CodeSystem: 'term_code_systems', ValueSet: 'term_value_sets', ConceptMap: 'term_concept_maps' };
/** R4's tag of a resource returned in part (meta.tag): http://hl7.org/fhir/R4/search.html#summary. */
const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED', display: 'Resource encoded in summary mode' };
/** Search parameters, and how each matches (a comma gives alternatives). */
const SEARCH_PARAMS: Record<string, (v: string[]) => Sql> = {
  url: (v) => sql`t.url = ANY(${v}::text[])`,
  version: (v) => sql`t.version = ANY(${v}::text[])`,
  _id: (v) => sql`t.resource_id = ANY(${v}::text[])`,
  status: (v) => sql`t.resource->>'status' = ANY(${v}::text[])`,
  // string: starts with, case ignored.
  name: (v) => sql`lower(t.resource->>'name') LIKE ANY(${v.map((x) => `${escapeLike(x.toLowerCase())}%`)}::text[])`,
  title: (v) => sql`lower(t.resource->>'title') LIKE ANY(${v.map((x) => `${escapeLike(x.toLowerCase())}%`)}::text[])`,
};
const CONTROL = new Set(['_count', '_offset', '_summary', '_elements', '_format', '_pretty', '_total']);

interface Row {
  row: string;
  resource: Resource & { meta?: Resource['meta'] };
  loaded_at: Date;
  concept_count: number | null;
}

const columns = (type: TerminologyType) => new Sql([`t.id::text AS row, t.resource, t.loaded_at, ${type === 'CodeSystem' ? 't.concept_count' : 'NULL::int AS concept_count'}`], []);
const currentOnly = (type: TerminologyType) =>
  new Sql([`t.id = (SELECT x.id FROM ${TABLES[type]} x WHERE x.url = t.url AND x.state = 'active' ORDER BY ${currentFirst('x')} LIMIT 1)`], []);

function shaped(type: TerminologyType, r: Row): Resource {
  const meta = { ...(r.resource.meta ?? {}), lastUpdated: new Date(r.loaded_at).toISOString() };
  if (type !== 'CodeSystem') return { ...r.resource, meta };
  const { concept: _none, ...cs } = r.resource as Resource & { concept?: unknown };
  const count = r.concept_count ?? 0;
  return { ...cs, meta: count ? { ...meta, tag: [...(meta.tag ?? []), SUBSETTED] } : meta, count } as Resource;
}

/** `GET {type}/{id}`: the current version of the loaded resource with this id. 404 when none is loaded. */
export async function readResource(db: Queryable, type: TerminologyType, id: string): Promise<Resource> {
  const { text, values } = sql`SELECT ${columns(type)} FROM ${new Sql([TABLES[type]], [])} t
    WHERE t.resource_id = ${id} AND t.state = 'active' ORDER BY ${new Sql([currentFirst('t')], [])} LIMIT 1`.render();
  const r = (await db.query<Row>(text, values)).rows[0];
  if (!r) throw notFound(`No ${type} ${id.slice(0, 64)} is loaded`);
  const resource = shaped(type, r);
  if (type !== 'CodeSystem' || !r.concept_count || r.concept_count > MAX_CONCEPTS_IN_READ) return resource;
  const concepts = await db.query<{ code: string; display: string | null; definition: string | null; active: boolean; properties: Array<Record<string, unknown>> | null; designations: CodeSystemConcept['designation'] | null; parents: string[] | null }>(
    `SELECT c.code, c.display, c.definition, c.active, c.properties, c.designations,
            (SELECT array_agg(p.code ORDER BY p.code) FROM term_edges e JOIN term_concepts p ON p.cid = e.parent WHERE e.child = c.cid) AS parents
     FROM term_concepts c WHERE c.cs = $1 ORDER BY c.cid LIMIT ${MAX_CONCEPTS_IN_READ}`,
    [r.row],
  );
  const concept: CodeSystemConcept[] = concepts.rows.map((c) => {
    const property = [
      ...(c.parents ?? []).map((p) => ({ code: 'parent', valueCode: p })),
      ...(c.active ? [] : [{ code: 'inactive', valueBoolean: true }]),
      ...((c.properties ?? []) as CodeSystemConcept['property'] & object),
    ];
    return {
      code: c.code,
      ...(c.display ? { display: c.display } : {}),
      ...(c.definition ? { definition: c.definition } : {}),
      ...(c.designations?.length ? { designation: c.designations } : {}),
      ...(property.length ? { property } : {}),
    };
  });
  const { tag: _t, ...meta } = resource.meta ?? {};
  return { ...resource, meta, concept } as Resource;
}

/** One value of a search parameter, checked: given once, at most MAX_PARAM_CHARS. */
function single(name: string, raw: string | string[] | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (Array.isArray(raw)) throw badRequest(`Parameter ${name} may be given once`);
  if (raw.length > MAX_PARAM_CHARS) throw badRequest(`Parameter ${name} is at most ${MAX_PARAM_CHARS} characters`);
  return raw;
}

function integer(name: string, raw: string | undefined, max: number): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d{1,9}$/.test(raw)) throw badRequest(`${name} is a non-negative integer`);
  return Math.min(Number(raw), max);
}

/** `GET {type}?…`: a searchset Bundle of the loaded resources matching, current versions unless `version` is asked. */
export async function searchResources(db: Queryable, type: TerminologyType, query: Record<string, string | string[] | undefined>, base: string): Promise<Bundle> {
  const conds: Sql[] = [sql`t.state = 'active'`];
  const self = new URLSearchParams();
  for (const [name, raw] of Object.entries(query)) {
    const value = single(name, raw);
    if (value === undefined) continue;
    if (CONTROL.has(name)) continue;
    const match = SEARCH_PARAMS[name];
    if (!match) throw badRequest(`Unknown search parameter "${name.slice(0, 60)}" for the loaded ${type} resources (they take ${Object.keys(SEARCH_PARAMS).join(', ')})`);
    const alternatives = value.split(',');
    if (alternatives.length > 100 || alternatives.some((v) => !v)) throw badRequest(`Parameter ${name}: 1-100 values, separated by commas`);
    conds.push(match(alternatives));
    self.append(name, value);
  }
  if (query.version === undefined) conds.push(currentOnly(type));
  const count = integer('_count', single('_count', query._count), MAX_COUNT) ?? DEFAULT_COUNT;
  const offset = integer('_offset', single('_offset', query._offset), 1_000_000) ?? 0;
  const summary = single('_summary', query._summary);
  if (summary !== undefined && !['true', 'false', 'text', 'data', 'count'].includes(summary)) throw badRequest('_summary must be true, false, text, data or count');
  const elements = single('_elements', query._elements)?.split(',').map((e) => e.trim());
  if (elements?.some((e) => !/^[A-Za-z][A-Za-z0-9]*(\[x\])?$/.test(e))) throw badRequest('_elements is a comma-separated list of element names');
  const table = new Sql([TABLES[type]], []);
  const where = and(...conds);
  const render = async <R extends object>(s: Sql) => {
    const { text, values } = s.render();
    return (await db.query<R>(text, values)).rows;
  };
  const total = (await render<{ n: number }>(sql`SELECT count(*)::int AS n FROM ${table} t WHERE ${where}`))[0]!.n;
  const rows = summary === 'count' || count === 0 ? [] : await render<Row>(
    sql`SELECT ${columns(type)} FROM ${table} t WHERE ${where}
        ORDER BY t.url, ${new Sql([`${versionKey('t.version')} DESC NULLS LAST, t.id DESC`], [])} LIMIT ${count} OFFSET ${offset}`,
  );
  const page = (at: number) => {
    const p = new URLSearchParams(self);
    p.set('_count', String(count));
    if (at) p.set('_offset', String(at));
    if (summary) p.set('_summary', summary);
    return `${base}/${type}?${p.toString()}`;
  };
  return {
    resourceType: 'Bundle',
    type: 'searchset',
    total,
    link: [
      { relation: 'self', url: page(offset) },
      ...(summary !== 'count' && count > 0 && offset + count < total ? [{ relation: 'next', url: page(offset + count) }] : []),
      ...(offset > 0 ? [{ relation: 'previous', url: page(Math.max(0, offset - count)) }] : []),
    ],
    ...(rows.length
      ? {
          entry: rows.map((r) => {
            const resource = shaped(type, r);
            return { fullUrl: `${base}/${type}/${resource.id}`, resource: present(resource, { elements, summary }), search: { mode: 'match' as const } };
          }),
        }
      : {}),
  };
}
