import { randomUUID } from 'node:crypto';
import type { Bundle, CodeableConcept, Coding, OperationOutcomeIssue, Parameters, ParametersParameter, Resource, TerminologyCapabilities, ValueSet, ValueSetExpansionContains } from '@medplum/fhirtypes';
import { bindingIssue, boundValues, outsideBindings } from './bindings';
import { terminologyCapabilities } from './capabilities';
import { currentFirst } from './current';
import { givenExpansion } from './expand';
import { TerminologyLookup } from './lookup';
import { readResource, searchResources, type TerminologyType } from './resources';
import type { ReadTerminology, TerminologyQuestions } from '../../mapping/runtime';
import { ApiError, badRequest, ErrorCode, notFound } from '../../core/errors';
import { sqlState, type Database, type Queryable } from '../../db/database';
import { and, Sql, sql } from '../../db/sql';
import { escapeLike, normalizeString } from '../normalize';
import { bool, coding, concept, int, one, parameters, resource, type OpInput } from './params';

/** The operations, their parameters (R4 OperationDefinitions), and what each answers. */
export const OPERATIONS = {
  'CodeSystem/$lookup': ['code', 'system', 'version', 'coding', 'date', 'displayLanguage', 'property'],
  'CodeSystem/$validate-code': ['url', 'code', 'version', 'display', 'coding', 'codeableConcept', 'date', 'abstract', 'displayLanguage', 'system'],
  'CodeSystem/$subsumes': ['codeA', 'codeB', 'system', 'version', 'codingA', 'codingB'],
  'ValueSet/$expand': ['url', 'valueSet', 'valueSetVersion', 'filter', 'date', 'offset', 'count', 'activeOnly', 'includeDesignations', 'includeDefinition', 'excludeNested', 'excludeNotForUI', 'excludePostCoordinated', 'displayLanguage'],
  'ValueSet/$validate-code': ['url', 'valueSet', 'valueSetVersion', 'code', 'system', 'systemVersion', 'display', 'coding', 'codeableConcept', 'date', 'abstract', 'displayLanguage'],
  'ConceptMap/$translate': ['url', 'conceptMapVersion', 'code', 'system', 'version', 'source', 'coding', 'codeableConcept', 'target', 'targetsystem', 'reverse'],
} as const;
export type OperationName = keyof typeof OPERATIONS;

/** Codes of an $expand page: default and most. */
export const EXPAND_DEFAULT_COUNT = 1000;
export const EXPAND_MAX_COUNT = 1000;
/** Longest $expand filter text. */
export const MAX_FILTER_CHARS = 200;
/** Children listed by $lookup (a root of a large code system has many). */
const MAX_CHILDREN = 1000;

interface CodeSystemRow {
  id: string;
  url: string;
  version: string;
  content: string;
  name: string | null;
}
interface ConceptRow {
  cid: string;
  code: string;
  display: string | null;
  definition: string | null;
  active: boolean;
  properties: Array<Record<string, unknown>> | null;
  designations: Array<{ language?: string; use?: Coding; value: string }> | null;
}

/**
 * The concept of code system row `cs` (with its `resource`) whose code is `code`: that code, or, in a code system whose
 * `caseSensitive` is false, a code differing from it in case (looked for only when the code is not there as given).
 */
const CONCEPT_OF = (cs: string, code: string) => `SELECT * FROM term_concepts WHERE cs = ${cs}.id AND code = ${code}
  UNION ALL SELECT * FROM (SELECT * FROM term_concepts WHERE ${code}::text IS NOT NULL AND ${cs}.resource->>'caseSensitive' = 'false' AND cs = ${cs}.id AND lower(code) = lower(${code}) ORDER BY code LIMIT 1) i
  LIMIT 1`;

/** The code system version whose concept gives a value set code's display: the expansion's, else the current one. */
const CS_OF_CODE = new Sql([`s.version IS NOT DISTINCT FROM v.version DESC, ${currentFirst('s')}`], []);

const versioned = (url: string, version: string | undefined) => (version ? `${url}|${version}` : url);

/**
 * The terminology operations (docs/fhir.md "Terminology") over what `pont terminology load` loaded: every answer is
 * read from the database at the time of the request (no cache), so a load is seen by every process at once.
 */
export class TerminologyService {
  /**
   * `db` a Database: each operation of several statements reads one snapshot of it (see run). `readerLookup`: what the
   * maps read of the loaded terminology (displays, memberOf()), the process's cache (FhirService.terminology).
   */
  constructor(
    private readonly db: Queryable | Database,
    private readonly readerLookup?: TerminologyLookup,
    /**
     * timeoutMs: the longest an operation or search may run in the database, all its statements together (each is
     * given what is left as its transaction's statement_timeout, SET LOCAL: no other work of the connection is
     * bounded). A value set given in a request may filter a large code system with a regex PostgreSQL needs hours
     * for, and $validate-code reads it once per coding; cut, it is a 422 too-costly.
     */
    private readonly options: { timeoutMs?: number } = {},
  ) {}

  /**
   * The loaded terminology's answers to what reading a page of records asks (its codings without a display, its
   * memberOf() codes), read on `q`, the request's transaction: see TerminologyLookup.answers.
   */
  async forReading(q: Queryable, asked: TerminologyQuestions): Promise<ReadTerminology | undefined> {
    return this.readerLookup?.answers(q, asked);
  }

  /** The code system (its current version unless one is named: current.ts), as resolve finds it. */
  private async codeSystem(url: string | undefined, version: string | undefined, id: string | undefined): Promise<CodeSystemRow> {
    return (await this.resolve(url, version, id, undefined)).cs;
  }

  /**
   * The code system (its current version unless one is named: current.ts) and one of its concepts (none asked: `code`
   * undefined), in one statement (the operations' hot path): the concept's parents and children too when `edges`.
   */
  private async resolve(
    url: string | undefined,
    version: string | undefined,
    id: string | undefined,
    code: string | undefined,
    edges = false,
  ): Promise<{ cs: CodeSystemRow; concept?: ConceptRow & { parents: string[] | null; children: string[] | null } }> {
    if (url === undefined && id === undefined) throw badRequest('Name the code system: system (or the coding\'s system), or CodeSystem/{id}/…');
    const r = await this.db.query<CodeSystemRow & { cs_id: string; cid: string | null } & Omit<ConceptRow, 'cid'> & { parents: string[] | null; children: string[] | null }>(
      `SELECT s.id::text AS cs_id, s.url, s.version, s.content, coalesce(s.resource->>'name', s.resource->>'title') AS name,
              c.cid::text AS cid, c.code, c.display, c.definition, c.active, c.properties, c.designations${
                edges
                  ? `, (SELECT array_agg(p.code ORDER BY p.code) FROM term_edges e JOIN term_concepts p ON p.cid = e.parent WHERE e.child = c.cid) AS parents,
              (SELECT array_agg(x.code ORDER BY x.code) FROM (SELECT ch.code FROM term_edges e JOIN term_concepts ch ON ch.cid = e.child
                WHERE e.parent = c.cid ORDER BY ch.code LIMIT ${MAX_CHILDREN}) x) AS children`
                  : ''
              }
       FROM (SELECT id, url, version, content, resource FROM term_code_systems
             WHERE state = 'active' AND ($1::text IS NULL OR url = $1) AND ($2::text IS NULL OR resource_id = $2) AND ($3::text IS NULL OR version = $3)
             ORDER BY ${currentFirst('term_code_systems')} LIMIT 1) s
       LEFT JOIN LATERAL (${CONCEPT_OF('s', '$4')}) c ON true`,
      [url ?? null, id ?? null, version ?? null, code ?? null],
    );
    const row = r.rows[0];
    if (!row) {
      if (id !== undefined && url === undefined) throw notFound(`No CodeSystem ${id} is loaded`);
      throw notFound(`Code system ${versioned(url ?? `CodeSystem/${id}`, version)} is not loaded`);
    }
    const cs = { id: row.cs_id, url: row.url, version: row.version, content: row.content, name: row.name };
    if (row.cid === null) return { cs };
    const { cid, code: c, display, definition, active, properties, designations, parents, children } = row;
    return { cs, concept: { cid, code: c, display, definition, active, properties, designations, parents: parents ?? null, children: children ?? null } };
  }

  private async concept(cs: CodeSystemRow, code: string): Promise<ConceptRow | undefined> {
    const r = await this.db.query<ConceptRow>(
      `SELECT c.cid::text, c.code, c.display, c.definition, c.active, c.properties, c.designations
       FROM (SELECT id, resource FROM term_code_systems WHERE id = $1) s, LATERAL (${CONCEPT_OF('s', '$2')}) c`,
      [cs.id, code],
    );
    return r.rows[0];
  }

  /** The code and system an operation names: `code` + `system`, or a Coding (`coding`). */
  private static target(input: OpInput, codeName = 'code', systemName = 'system', codingName = 'coding'): { code: string; system?: string; version?: string; display?: string } {
    const c = coding(input, codingName);
    const code = one(input, codeName);
    if (c && code !== undefined) throw badRequest(`Give ${codeName} or ${codingName}, not both`);
    if (c) {
      if (typeof c.code !== 'string') throw badRequest(`${codingName} has no code`);
      return { code: c.code, system: c.system, version: c.version, display: c.display };
    }
    if (code === undefined) throw badRequest(`Give ${codeName} (with ${systemName}) or ${codingName}`);
    return { code, system: one(input, systemName) };
  }

  /** CodeSystem/$lookup: the concept's display, definition, designations and properties, its parents and children. */
  async lookup(input: OpInput, id?: string): Promise<Parameters> {
    const t = TerminologyService.target(input);
    const { cs, concept: c } = await this.resolve(t.system, one(input, 'version') ?? t.version, id, t.code, true);
    if (!c) throw notFound(`${t.code} is not a code of ${versioned(cs.url, cs.version)}`);
    const wanted = new Set((input.get('property') ?? []).map(String));
    const want = (p: string) => !wanted.size || wanted.has(p);
    const property = (code: string, value: Record<string, unknown>): ParametersParameter => ({
      name: 'property',
      part: [{ name: 'code', valueCode: code }, { name: 'value', ...value }],
    });
    const out: Array<ParametersParameter | undefined> = [
      { name: 'name', valueString: cs.name ?? cs.url },
      cs.version ? { name: 'version', valueString: cs.version } : undefined,
      { name: 'display', valueString: c.display ?? c.code },
      c.definition && want('definition') ? { name: 'definition', valueString: c.definition } : undefined,
    ];
    if (want('designation'))
      for (const d of c.designations ?? [])
        out.push({
          name: 'designation',
          part: ([
            d.language ? { name: 'language', valueCode: d.language } : undefined,
            d.use ? { name: 'use', valueCoding: d.use } : undefined,
            { name: 'value', valueString: d.value },
          ] as Array<ParametersParameter | undefined>).filter((p): p is ParametersParameter => p !== undefined),
        });
    if (want('inactive')) out.push(property('inactive', { valueBoolean: !c.active }));
    if (want('parent')) for (const code of c.parents ?? []) out.push(property('parent', { valueCode: code }));
    if (want('child')) for (const code of c.children ?? []) out.push(property('child', { valueCode: code }));
    for (const p of c.properties ?? []) {
      const code = String(p.code);
      if (!want(code)) continue;
      const value = Object.fromEntries(Object.entries(p).filter(([k]) => k.startsWith('value')));
      out.push(property(code, value));
    }
    return parameters(out);
  }

  /** CodeSystem/$validate-code: is the code in the code system (and the display one of its displays)? */
  async validateCodeInSystem(input: OpInput, id?: string): Promise<Parameters> {
    const codings = TerminologyService.codings(input);
    const url = one(input, 'url') ?? one(input, 'system');
    const results = [];
    for (const c of codings) {
      if (url !== undefined && c.system !== undefined && c.system !== url) {
        results.push({ result: false, message: `The coding's system ${c.system} is not ${url}` });
        continue;
      }
      let resolved;
      try {
        resolved = await this.resolve(url ?? c.system, one(input, 'version') ?? c.version, id, c.code!);
      } catch (err) {
        // A CodeableConcept's coding of a system not loaded is one invalid coding: another may be valid.
        if (codings.length > 1 && err instanceof ApiError && err.status === 404) {
          results.push({ result: false, message: err.message });
          continue;
        }
        throw err;
      }
      results.push(TerminologyService.checkConcept(resolved.cs, c.code!, resolved.concept, one(input, 'display') ?? c.display));
    }
    return TerminologyService.validation(results);
  }

  private static checkConcept(cs: CodeSystemRow, code: string, c: ConceptRow | undefined, display: string | undefined): { result: boolean; message?: string; display?: string } {
    if (!c) return { result: false, message: `Unknown code "${code}" in code system ${versioned(cs.url, cs.version)}` };
    const shown = c.display ?? undefined;
    if (display !== undefined && display !== shown && !(c.designations ?? []).some((d) => d.value === display))
      return { result: false, display: shown, message: `"${display}" is not a display of ${code} in ${cs.url} (its display is "${shown ?? code}")` };
    return { result: true, display: shown, message: c.active ? undefined : `${code} is inactive in ${cs.url}` };
  }

  /** The codings to validate: code (+ system), coding, or every coding of codeableConcept. */
  private static codings(input: OpInput): Coding[] {
    const cc: CodeableConcept | undefined = concept(input, 'codeableConcept');
    if (cc) {
      if (input.has('code') || input.has('coding')) throw badRequest('Give code, coding or codeableConcept: one of them');
      const list = (cc.coding ?? []).filter((c) => typeof c.code === 'string');
      if (!list.length) throw badRequest('codeableConcept has no coding with a code');
      return list;
    }
    const t = TerminologyService.target(input);
    return [{ code: t.code, system: t.system, version: t.version, display: t.display }];
  }

  /** One answer for several codings (a CodeableConcept): valid when one of them is. */
  private static validation(results: Array<{ result: boolean; message?: string; display?: string }>): Parameters {
    const good = results.find((r) => r.result);
    const chosen = good ?? results[0]!;
    const messages = good ? (good.message ? [good.message] : []) : results.map((r) => r.message).filter(Boolean);
    return parameters([
      { name: 'result', valueBoolean: !!good },
      messages.length ? { name: 'message', valueString: messages.join('; ') } : undefined,
      chosen.display ? { name: 'display', valueString: chosen.display } : undefined,
    ]);
  }

  /** CodeSystem/$subsumes: equivalent, subsumes, subsumed-by or not-subsumed, from the closure. */
  async subsumes(input: OpInput, id?: string): Promise<Parameters> {
    const a = TerminologyService.target(input, 'codeA', 'system', 'codingA');
    const b = TerminologyService.target(input, 'codeB', 'system', 'codingB');
    if (a.system && b.system && a.system !== b.system) throw badRequest(`codingA and codingB are of different systems (${a.system}, ${b.system})`);
    const cs = await this.codeSystem(a.system ?? b.system ?? one(input, 'system'), one(input, 'version') ?? a.version ?? b.version, id);
    const [ca, cb] = [await this.concept(cs, a.code), await this.concept(cs, b.code)];
    for (const [c, code] of [[ca, a.code], [cb, b.code]] as const) if (!c) throw badRequest(`${code} is not a code of ${versioned(cs.url, cs.version)}`);
    let outcome = 'not-subsumed';
    if (ca!.cid === cb!.cid) outcome = 'equivalent';
    else {
      const r = await this.db.query<{ ancestor: string }>(
        'SELECT ancestor::text FROM term_closure WHERE (ancestor = $1 AND descendant = $2) OR (ancestor = $2 AND descendant = $1)',
        [ca!.cid, cb!.cid],
      );
      if (r.rows[0]) outcome = r.rows[0].ancestor === ca!.cid ? 'subsumes' : 'subsumed-by';
    }
    return parameters([{ name: 'outcome', valueCode: outcome }]);
  }

  private async valueSet(url: string | undefined, version: string | undefined, id: string | undefined) {
    if (url === undefined && id === undefined) throw badRequest('Name the value set: url (of a loaded ValueSet), or ValueSet/{id}/…');
    const r = await this.db.query<{ id: string; url: string; version: string; resource: ValueSet; unexpandable: string | null; code_count: number }>(
      `SELECT id::text, url, version, resource, unexpandable, code_count FROM term_value_sets
       WHERE state = 'active' AND ($1::text IS NULL OR url = $1) AND ($2::text IS NULL OR resource_id = $2) AND ($3::text IS NULL OR version = $3)
       ORDER BY ${currentFirst('term_value_sets')} LIMIT 1`,
      [url ?? null, id ?? null, version ?? null],
    );
    const vs = r.rows[0];
    if (!vs) throw notFound(url !== undefined ? `Value set ${versioned(url, version)} is not loaded` : `No ValueSet ${id} is loaded`);
    if (vs.unexpandable) throw new ApiError(422, ErrorCode.validationFailed, `Value set ${vs.url} cannot be expanded: ${vs.unexpandable}`);
    return vs;
  }

  /**
   * The value set an operation names: the loaded one (`url`, `valueSetVersion`, or the instance), or the one given in
   * the request (`valueSet`, POST), evaluated against the loaded code systems and kept nowhere. `codes` is its
   * expansion as rows (ord, system, version, code, display, display_norm, inactive); `total` their number when known.
   */
  private async valueSetOf(input: OpInput, id: string | undefined): Promise<{ url: string | undefined; resource: ValueSet; codes: Sql; total?: number; stored?: string }> {
    const given = resource(input, 'valueSet');
    if (given !== undefined) {
      if (id !== undefined || input.has('url') || input.has('valueSetVersion'))
        throw badRequest('Give the value set once: valueSet (the resource), url, or ValueSet/{id}/…');
      const codes = await givenExpansion(this.db, given);
      const vs = given as ValueSet;
      return { url: typeof vs.url === 'string' ? vs.url : undefined, resource: vs, codes };
    }
    const [urlPart, urlVersion] = (one(input, 'url') ?? '').split('|');
    const vs = await this.valueSet(urlPart || undefined, one(input, 'valueSetVersion') ?? urlVersion, id);
    return {
      url: vs.url,
      resource: vs.resource,
      codes: sql`SELECT ord, system, version, code, display, display_norm, inactive FROM term_value_set_codes WHERE vs = ${vs.id}`,
      total: vs.code_count,
      stored: vs.id,
    };
  }

  /** ValueSet/$expand: a page of the expansion (filter text, activeOnly, offset and count). */
  async expand(input: OpInput, id?: string): Promise<ValueSet> {
    const offset = int(input, 'offset', 1_000_000_000) ?? 0;
    const count = int(input, 'count', EXPAND_MAX_COUNT) ?? EXPAND_DEFAULT_COUNT;
    const activeOnly = bool(input, 'activeOnly') ?? false;
    const filter = one(input, 'filter');
    if (filter !== undefined && filter.length > MAX_FILTER_CHARS) throw badRequest(`filter is at most ${MAX_FILTER_CHARS} characters`);
    const vs = await this.valueSetOf(input, id);
    const words = filter === undefined ? [] : normalizeString(filter).split(/\s+/).filter(Boolean).slice(0, 10);
    const conds: Sql[] = [];
    if (activeOnly) conds.push(sql`NOT e.inactive`);
    for (const w of words) conds.push(sql`(e.display_norm LIKE ${`${escapeLike(w)}%`} OR e.display_norm LIKE ${`% ${escapeLike(w)}%`} OR lower(e.code) = ${w})`);
    const query = async <R extends object>(statement: Sql) => {
      const { text, values } = statement.render();
      return (await this.db.query<R>(text, values)).rows;
    };
    type Code = { system: string; version: string | null; code: string; display: string | null; inactive: boolean };
    const narrowed = conds.length > 0;
    let total = vs.total;
    let rows: Code[];
    if (vs.stored === undefined) {
      // A value set given in the request: expanded once, its total and page read from that one evaluation.
      const answer = await query<{ n: number } & { [K in keyof Code]: Code[K] | null }>(
        sql`WITH e AS MATERIALIZED (SELECT * FROM (${vs.codes}) e WHERE ${and(...conds)})
            SELECT t.n, p.system, p.version, p.code, p.display, p.inactive FROM (SELECT count(*)::int AS n FROM e) t
            LEFT JOIN LATERAL (SELECT * FROM e ORDER BY e.ord LIMIT ${count} OFFSET ${offset}) p ON true`,
      );
      total = answer[0]!.n;
      rows = answer.filter((r) => r.code !== null) as Code[];
    } else {
      if (narrowed) total = (await query<{ n: number }>(sql`SELECT count(*)::int AS n FROM (${vs.codes}) e WHERE ${and(...conds)}`))[0]!.n;
      // A loaded expansion unnarrowed has ord 1..total: the page starts by key, so a far page costs what the first does.
      const page = narrowed ? sql`WHERE ${and(...conds)} ORDER BY e.ord LIMIT ${count} OFFSET ${offset}` : sql`WHERE e.ord > ${offset} ORDER BY e.ord LIMIT ${count}`;
      rows = count === 0 ? [] : await query<Code>(sql`SELECT e.system, e.version, e.code, e.display, e.inactive FROM (${vs.codes}) e ${page}`);
    }
    const contains: ValueSetExpansionContains[] = rows.map((r) => ({
      system: r.system,
      ...(r.version ? { version: r.version } : {}),
      code: r.code,
      ...(r.display ? { display: r.display } : {}),
      ...(r.inactive ? { inactive: true } : {}),
    }));
    const { compose: _c, expansion: _e, ...rest } = vs.resource;
    return {
      ...rest,
      resourceType: 'ValueSet',
      expansion: {
        identifier: `urn:uuid:${randomUUID()}`,
        timestamp: new Date().toISOString(),
        total,
        offset,
        parameter: [
          { name: 'offset', valueInteger: offset },
          { name: 'count', valueInteger: count },
          ...(filter !== undefined ? [{ name: 'filter', valueString: filter }] : []),
          ...(activeOnly ? [{ name: 'activeOnly', valueBoolean: true }] : []),
        ],
        ...(contains.length ? { contains } : {}),
      },
    };
  }

  /** ValueSet/$validate-code: is the code (a coding of the concept) in the value set's expansion? */
  async validateCodeInValueSet(input: OpInput, id?: string): Promise<Parameters> {
    const codings = TerminologyService.codings(input);
    const vs = await this.valueSetOf(input, id);
    const name = vs.url ?? 'given';
    const display = one(input, 'display');
    const results = [];
    for (const c of codings) {
      // The code as given, else (only then) one differing in case of a code system whose caseSensitive is false.
      const system = c.system ?? null;
      const { text, values } = sql`SELECT * FROM (SELECT v.system, v.display, v.inactive, c.display AS cs_display, c.designations FROM (${vs.codes}) v
         LEFT JOIN term_code_systems s ON s.url = v.system AND s.state = 'active'
         LEFT JOIN term_concepts c ON c.cs = s.id AND c.code = v.code
         WHERE v.code = ${c.code} AND (${system}::text IS NULL OR v.system = ${system}) ORDER BY v.ord, ${CS_OF_CODE} LIMIT 1) exact
        UNION ALL
        SELECT * FROM (SELECT v.system, v.display, v.inactive, c.display AS cs_display, c.designations FROM (${vs.codes}) v
         JOIN term_code_systems s ON s.url = v.system AND s.state = 'active' AND s.resource->>'caseSensitive' = 'false'
         LEFT JOIN term_concepts c ON c.cs = s.id AND c.code = v.code
         WHERE lower(v.code) = lower(${c.code}) AND (${system}::text IS NULL OR v.system = ${system}) ORDER BY v.ord, ${CS_OF_CODE} LIMIT 1) insensitive
        LIMIT 1`.render();
      const r = await this.db.query<{ system: string; display: string | null; inactive: boolean; cs_display: string | null; designations: ConceptRow['designations'] }>(text, values);
      const hit = r.rows[0];
      const label = c.system ? `${c.system}#${c.code}` : c.code!;
      if (!hit) {
        results.push({ result: false, message: `${label} is not in value set ${name}` });
        continue;
      }
      const shown = hit.display ?? hit.cs_display ?? undefined;
      const asked = display ?? c.display;
      if (asked !== undefined && asked !== shown && asked !== hit.cs_display && !(hit.designations ?? []).some((d) => d.value === asked)) {
        results.push({ result: false, display: shown, message: `"${asked}" is not a display of ${label} (its display is "${shown ?? c.code}")` });
        continue;
      }
      results.push({ result: true, display: shown, message: hit.inactive ? `${label} is inactive` : undefined });
    }
    return TerminologyService.validation(results);
  }

  /**
   * ConceptMap/$translate: the targets of the loaded concept maps for a code, with what a group answers for a code it
   * does not list (`unmapped`: the code as provided, a fixed code, or another map's answer); `reverse` the sources
   * that map to the code, their equivalence turned round.
   */
  async translate(input: OpInput, id?: string): Promise<Parameters> {
    const reverse = bool(input, 'reverse') ?? false;
    const t = (() => {
      const cc = concept(input, 'codeableConcept');
      if (cc) {
        const first = (cc.coding ?? []).find((c) => typeof c.code === 'string');
        if (!first) throw badRequest('codeableConcept has no coding with a code');
        return { code: first.code!, system: first.system };
      }
      return TerminologyService.target(input);
    })();
    if (!t.system) throw badRequest('$translate needs the system of the code (system, or the coding\'s system)');
    if (!t.code) throw badRequest('$translate needs a code');
    const [url, urlVersion] = (one(input, 'url') ?? '').split('|');
    // R4: reverse "reverses the meaning of the source and target parameters".
    const [source, target] = reverse ? [one(input, 'target'), one(input, 'source')] : [one(input, 'source'), one(input, 'target')];
    const filters = {
      url: url || undefined,
      version: one(input, 'conceptMapVersion') ?? urlVersion,
      id,
      source,
      target,
      targetSystem: one(input, 'targetsystem'),
    };
    // A map reached both directly and through another's `other-map` gives its matches once.
    const seenMatch = new Set<string>();
    const matches = (await this.translations(t.code, t.system, filters, reverse, new Set())).filter((m) => {
      const key = JSON.stringify([m.url, m.equivalence, m.system, m.code]);
      return !seenMatch.has(key) && !!seenMatch.add(key);
    });
    if (id !== undefined && !matches.length) {
      const exists = await this.db.query(`SELECT 1 FROM term_concept_maps WHERE resource_id = $1 AND state = 'active'`, [id]);
      if (!exists.rowCount) throw notFound(`No ConceptMap ${id} is loaded`);
    }
    const result = matches.some((m) => m.equivalence !== 'unmatched' && m.equivalence !== 'disjoint');
    return parameters([
      { name: 'result', valueBoolean: result },
      result ? undefined : { name: 'message', valueString: `No mapping of ${t.system}#${t.code}${url ? ` in ${url}` : ''}${reverse ? ' (reverse)' : ''}` },
      ...matches.slice(0, 1000).map((m) => ({
        name: 'match',
        part: [
          { name: 'equivalence', valueCode: m.equivalence },
          ...(m.code ? [{ name: 'concept', valueCoding: { ...(m.system ? { system: m.system } : {}), code: m.code, ...(m.display ? { display: m.display } : {}) } }] : []),
          { name: 'source', valueUri: m.url },
          ...(m.comment ? [{ name: 'comment', valueString: m.comment }] : []),
        ],
      })),
    ]);
  }

  /** Equivalences read the other way (reverse): the source is narrower than a target wider than it, … */
  private static readonly REVERSED: Record<string, string> = { wider: 'narrower', narrower: 'wider', subsumes: 'specializes', specializes: 'subsumes' };

  /**
   * The matches of one code in the maps `f` selects; `seen` the maps an `other-map` chain has visited (a map sending a
   * code to one that sends it back ends there).
   */
  private async translations(
    code: string,
    system: string,
    f: { url?: string; version?: string; id?: string; source?: string; target?: string; targetSystem?: string },
    reverse: boolean,
    seen: Set<string>,
  ): Promise<Array<{ url: string; equivalence: string; system: string | null; code: string | null; display: string | null; comment: string | null }>> {
    const maps = and(
      sql`m.state = 'active'`,
      f.url === undefined ? undefined : sql`m.url = ${f.url}`,
      f.version === undefined
        ? new Sql([`m.id = (SELECT x.id FROM term_concept_maps x WHERE x.url = m.url AND x.state = 'active' ORDER BY ${currentFirst('x')} LIMIT 1)`], [])
        : sql`m.version = ${f.version}`,
      f.id === undefined ? undefined : sql`m.resource_id = ${f.id}`,
      f.source === undefined ? undefined : sql`coalesce(m.resource->>'sourceUri', m.resource->>'sourceCanonical') = ${f.source}`,
      f.target === undefined ? undefined : sql`coalesce(m.resource->>'targetUri', m.resource->>'targetCanonical') = ${f.target}`,
    );
    const statement = reverse
      ? sql`SELECT m.url, e.source_system AS system, e.source_code AS code, NULL::text AS display, e.equivalence, e.comment
          FROM term_concept_map_elements e JOIN term_concept_maps m ON m.id = e.cm
          WHERE e.target_code = ${code} AND e.target_system = ${system} AND e.equivalence NOT LIKE 'unmapped:%' AND ${maps}
            ${f.targetSystem === undefined ? sql`` : sql`AND e.source_system = ${f.targetSystem}`}
          ORDER BY m.url, e.ord LIMIT 1000`
      : sql`SELECT m.url, e.target_system AS system, e.target_code AS code, e.target_display AS display, e.equivalence, e.comment
          FROM term_concept_map_elements e JOIN term_concept_maps m ON m.id = e.cm
          WHERE e.source_system = ${system} AND ${maps} ${f.targetSystem === undefined ? sql`` : sql`AND e.target_system = ${f.targetSystem}`}
            AND (e.source_code = ${code} OR (e.source_code = '' AND e.equivalence LIKE 'unmapped:%'
              AND NOT EXISTS (SELECT 1 FROM term_concept_map_elements x WHERE x.cm = e.cm AND x.source_code = ${code} AND x.source_system = ${system}
                              AND (x.target_system IS NULL OR x.target_system IS NOT DISTINCT FROM e.target_system))))
          ORDER BY m.url, e.ord LIMIT 1000`;
    const { text, values } = statement.render();
    const rows = (await this.db.query<{ url: string; system: string | null; code: string | null; display: string | null; equivalence: string; comment: string | null }>(text, values)).rows;
    const out = [];
    for (const r of rows) {
      if (reverse) out.push({ ...r, equivalence: TerminologyService.REVERSED[r.equivalence] ?? r.equivalence });
      else if (r.equivalence === 'unmapped:provided') out.push({ ...r, equivalence: 'equal', code, display: null, comment: null });
      else if (r.equivalence === 'unmapped:fixed') out.push({ ...r, equivalence: 'inexact', comment: null });
      else if (r.equivalence === 'unmapped:other-map') {
        seen.add(r.url);
        const other = r.comment!;
        if (seen.has(other.split('|')[0]!) || seen.size > 5) continue;
        const [otherUrl, otherVersion] = other.split('|');
        out.push(...(await this.translations(code, system, { url: otherUrl, version: otherVersion, targetSystem: f.targetSystem }, false, seen)));
      } else out.push(r);
    }
    return out;
  }

  /**
   * `$validate`'s check of a resource's coded elements against the value sets loaded into Pont that their R4
   * definitions bind them to: outside a required binding is an error, outside an extensible one a warning. A binding
   * to a value set that is not loaded (or whose current version cannot be expanded) is not judged here: it is left
   * to the store's own check of the shipped ones. Membership is TerminologyLookup's rule (the maps' memberOf()).
   */
  async checkBindings(resource: Resource): Promise<OperationOutcomeIssue[]> {
    const bound = boundValues(resource).filter((b) => b.codings.length);
    if (!bound.length) return [];
    const asked = bound.flatMap((b) => b.codings.map((c) => ({ valueSet: b.valueSet, ...c })));
    const answers = await TerminologyLookup.members(this.db, asked);
    const key = (vs: string, system: string | undefined, code: string) => JSON.stringify([vs, system ?? null, code]);
    const answer = new Map(asked.map((a, k) => [key(a.valueSet, a.system, a.code), answers[k]]));
    return outsideBindings(bound, (vs, system, code) => answer.get(key(vs, system, code))).map(bindingIssue);
  }

  /** `GET CodeSystem/{id}` (ValueSet, ConceptMap) with terminology:read: the loaded resource (resources.ts). */
  read(type: TerminologyType, id: string): Promise<Resource> {
    return readResource(this.db, type, id);
  }

  /** `GET CodeSystem?…` (ValueSet, ConceptMap) with terminology:read: the loaded resources matching (resources.ts). */
  search(type: TerminologyType, query: Record<string, string | string[] | undefined>, base: string): Promise<Bundle> {
    return this.inSnapshot((tx) => searchResources(tx, type, query, base));
  }

  /** Several statements read one snapshot (see run). */
  private inSnapshot<T>(work: (q: Queryable) => Promise<T>): Promise<T> {
    if (!('transaction' in this.db)) return work(this.db);
    const db = this.db;
    const ms = this.options.timeoutMs;
    return bounded(
      () =>
        db.transaction(async (tx) => {
          await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
          return work(ms ? deadlined(tx, ms) : tx);
        }),
      ms,
    );
  }

  /** `GET metadata?mode=terminology`: the TerminologyCapabilities of what is loaded now (capabilities.ts). */
  capabilities(fhirBase: string): Promise<TerminologyCapabilities> {
    return terminologyCapabilities(this.db, fhirBase);
  }

  /**
   * Runs one named operation. Those of several statements (the version's id read in one, its rows in the next) run in
   * one REPEATABLE READ, read-only transaction: a reload that commits between them (and removes the version it
   * replaced) is not seen half, the answer is that of the old version or of the new one. $lookup is one statement.
   */
  async run(op: OperationName, input: OpInput, id?: string): Promise<Parameters | ValueSet> {
    if (op === 'CodeSystem/$lookup') return this.runIn(op, input, id);
    return this.inSnapshot((q) => (q === this.db ? this : new TerminologyService(q)).runIn(op, input, id));
  }

  private runIn(op: OperationName, input: OpInput, id?: string): Promise<Parameters | ValueSet> {
    switch (op) {
      case 'CodeSystem/$lookup':
        return this.lookup(input, id);
      case 'CodeSystem/$validate-code':
        return this.validateCodeInSystem(input, id);
      case 'CodeSystem/$subsumes':
        return this.subsumes(input, id);
      case 'ValueSet/$expand':
        return this.expand(input, id);
      case 'ValueSet/$validate-code':
        return this.validateCodeInValueSet(input, id);
      case 'ConceptMap/$translate':
        return this.translate(input, id);
    }
  }
}

/** SQLSTATE query_canceled: statement_timeout reached (or a cancel). */
const QUERY_CANCELED = '57014';

/**
 * `tx` (a transaction) whose statements all end within `ms` of now: each is given what is left as its
 * statement_timeout (SET LOCAL, this transaction's only), none starts once nothing is (query_canceled, as PostgreSQL
 * would say). A bound on each statement alone let a request of many statements (one per coding) run for as many.
 */
function deadlined(tx: Queryable, ms: number): Queryable {
  const end = Date.now() + ms;
  return {
    async query<T>(text: string, params?: readonly unknown[]) {
      const left = Math.floor(end - Date.now());
      if (left < 1) throw Object.assign(new Error('canceling statement due to the terminology timeout'), { code: QUERY_CANCELED });
      await tx.query(`SET LOCAL statement_timeout = ${left}`);
      return tx.query<T>(text, params);
    },
    exec: (script: string) => tx.exec(script),
  };
}

/** The work, cut at the bound, answered as a 422 too-costly (asking again would cost as much). */
async function bounded<T>(work: () => Promise<T>, ms: number | undefined): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (!ms || sqlState(err) !== QUERY_CANCELED) throw err;
    const message = `This request takes more than ${ms / 1000} s to answer (PONT_TERMINOLOGY_TIMEOUT): narrow it (fewer or simpler filters, a regex without back-references, fewer codings)`;
    throw new ApiError(422, ErrorCode.validationFailed, message, { issues: [{ severity: 'error', code: 'too-costly', diagnostics: message }] });
  }
}
