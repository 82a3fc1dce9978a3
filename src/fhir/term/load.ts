import type { CodeSystem, CodeSystemConceptDesignation, ConceptMap, ValueSet } from '@medplum/fhirtypes';
import { badRequest } from '../../core/errors';
import { isContention, sqlState, SqlState, type Database, type Queryable } from '../../db/database';
import { normalizeString } from '../normalize';
import { checkCode, type ConceptInput } from './concepts';
import { checkCompose, expandInto, dependenciesOf } from './expand';

/** Concepts written per statement while a load streams them. */
const BATCH = 2000;
/** Hierarchy levels processed per statement when the closure is built. */
const CLOSURE_CHUNK = 20_000;
/** A 'loading' version older than this is from a load that died: the next load removes it. */
const STALE_LOAD = "interval '6 hours'";
/**
 * Deepest hierarchy loaded: levels below its top concepts (SNOMED CT has about 30). The closure holds a row per
 * concept and ancestor, so a deeper one (a hostile chain of 3,000 concepts: 4.5 million rows) is refused.
 */
export const MAX_HIERARCHY_DEPTH = 64;

export interface Loaded {
  resourceType: 'CodeSystem' | 'ValueSet' | 'ConceptMap';
  url: string;
  version: string;
  id: string;
  /** Concepts of a code system, codes of a value set's expansion, elements of a concept map. */
  count: number;
  /** A version it replaced. */
  replaced: boolean;
  /** A value set that cannot be expanded yet, and why. */
  unexpandable?: string;
  /** Value sets expanded again because this load changed what they draw on. */
  reexpanded?: string[];
  /** Loaded and served, but a step after the switch failed (the clean-up of the version it replaced). */
  warning?: string;
}

/** Displays, designations and is-a edges given apart from the concepts (RF2's description and relationship files). */
export interface ConceptWriter {
  /** `display` replaces the concept's display; `fallback` is its display only while it has none. */
  describe(batch: Array<{ code: string; display?: string; fallback?: string; designation: CodeSystemConceptDesignation }>): Promise<void>;
  edges(parents: string[], children: string[]): Promise<void>;
}

const FHIR_ID = /^[A-Za-z0-9\-.]{1,64}$/;

/** The FHIR id a loaded resource answers to: its own, else one made from its url (`CodeSystem/{id}/$lookup`). */
function resourceIdOf(resource: { id?: string; url?: string }): string {
  if (typeof resource.id === 'string' && FHIR_ID.test(resource.id)) return resource.id;
  const tail = (resource.url ?? '').replace(/[|#?].*$/, '').split('/').filter(Boolean).pop() ?? '';
  const id = tail.replace(/[^A-Za-z0-9\-.]/g, '-').slice(0, 64);
  return id || 'unnamed';
}

function checkHeader(resource: { url?: unknown; version?: unknown }, type: string): { url: string; version: string } {
  const { url, version } = resource;
  if (typeof url !== 'string' || !/^[a-z][a-z0-9+.-]*:\S+$/i.test(url) || url.length > 1024) throw badRequest(`A ${type} needs a url (an absolute URI), got ${JSON.stringify(url)?.slice(0, 80)}`);
  if (url.includes('|')) throw badRequest(`${type} url ${url}: a url holds no "|" (give the version in version)`);
  if (version !== undefined && (typeof version !== 'string' || version.length > 200)) throw badRequest(`${type} ${url}: version must be a string`);
  return { url, version: (version as string | undefined) ?? '' };
}

/** The table of each kind of loaded resource. */
const TABLES = { CodeSystem: 'term_code_systems', ValueSet: 'term_value_sets', ConceptMap: 'term_concept_maps' } as const;

/**
 * Loads terminology into the store (`pont terminology load`, src/fhir/term/cli.ts). Every load writes a new version
 * in state 'loading' and switches it to 'active' in one transaction; the version it replaces (same url and version)
 * is retired in that transaction and its rows removed after.
 */
export class TerminologyLoader {
  constructor(private readonly db: Database) {}

  /** Removes what earlier loads left: retired versions, and loads that died half-way. */
  async cleanUp(): Promise<void> {
    const gone = await this.db.query<{ id: string }>(
      `SELECT id FROM term_code_systems WHERE state = 'retired' OR (state = 'loading' AND loaded_at < now() - ${STALE_LOAD})`,
    );
    for (const { id } of gone.rows) await this.dropCodeSystem(id);
    for (const table of ['term_value_sets', 'term_concept_maps'])
      await this.db.query(`DELETE FROM ${table} WHERE state = 'retired' OR (state = 'loading' AND loaded_at < now() - ${STALE_LOAD})`);
  }

  private async dropCodeSystem(id: string): Promise<void> {
    await this.db.query('DELETE FROM term_closure WHERE descendant IN (SELECT cid FROM term_concepts WHERE cs = $1)', [id]);
    await this.db.query('DELETE FROM term_edges WHERE child IN (SELECT cid FROM term_concepts WHERE cs = $1)', [id]);
    await this.db.query('DELETE FROM term_code_systems WHERE id = $1', [id]);
  }

  /** The id must name one resource of its type: a second url with the same id is refused. */
  private async checkIdFree(q: Queryable, type: keyof typeof TABLES, id: string, url: string): Promise<void> {
    const other = await q.query<{ url: string }>(`SELECT url FROM ${TABLES[type]} WHERE resource_id = $1 AND state = 'active' AND url <> $2 LIMIT 1`, [id, url]);
    if (other.rows[0]) throw badRequest(`${type} id "${id}" is already that of ${other.rows[0].url}: give ${url} an id of its own`);
  }

  /**
   * One code system: `header` (the CodeSystem, its concepts left out or not) and its concepts, read as they stream.
   * A hierarchy with a cycle, a parent that is not a code of the system or a code given twice is refused and
   * nothing of it is kept.
   */
  async loadCodeSystem(
    header: CodeSystem,
    concepts: Iterable<ConceptInput> | AsyncIterable<ConceptInput>,
    more?: (writer: ConceptWriter) => Promise<void>,
  ): Promise<Loaded> {
    const { url, version } = checkHeader(header, 'CodeSystem');
    const id = resourceIdOf(header);
    await this.checkIdFree(this.db, 'CodeSystem', id, url);
    const { concept: _omitted, ...resource } = header;
    const content = typeof header.content === 'string' ? header.content : 'complete';
    const row = await this.db.query<{ id: string }>(
      `INSERT INTO term_code_systems (url, version, resource_id, state, content, resource) VALUES ($1, $2, $3, 'loading', $4, $5) RETURNING id`,
      [url, version, id, content, JSON.stringify({ ...resource, id })],
    );
    const cs = row.rows[0]!.id;
    let switched = false;
    try {
      const count = await this.writeConcepts(cs, url, concepts);
      // The planner must know the tables this load grows (the descriptions' and edges' joins on (cs, code)).
      await this.db.exec('ANALYZE term_concepts, term_edge_load');
      if (more) await more(this.writer(cs));
      await this.buildHierarchy(cs, url);
      await this.db.exec('ANALYZE term_concepts, term_closure');
      const { replaced, reexpanded } = await this.db.transaction(async (tx) => {
        await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`term:${url}`]);
        const old = await tx.query(`UPDATE term_code_systems SET state = 'retired' WHERE url = $1 AND version = $2 AND state = 'active' RETURNING id`, [url, version]);
        await tx.query(`UPDATE term_code_systems SET state = 'active', concept_count = $2 WHERE id = $1`, [cs, count]);
        const reexpanded = await this.reexpandDependents(tx, [url]);
        return { replaced: old.rowCount > 0, reexpanded };
      });
      switched = true;
      let warning: string | undefined;
      try {
        await this.cleanUp();
        // The visibility map of what the load wrote, so its indexes answer alone (closure to codes), and fresh statistics.
        await this.db.exec('VACUUM ANALYZE term_concepts, term_closure, term_edges');
      } catch (err) {
        // The new version is active and the one it replaced retired: a failure here is reported, never undone (the
        // next load's clean-up removes what is left).
        warning = `loaded, but the clean-up after it failed (the next load retries it): ${err instanceof Error ? err.message : String(err)}`;
      }
      return { resourceType: 'CodeSystem', url, version, id, count, replaced, reexpanded, ...(warning && { warning }) };
    } catch (err) {
      // Only a version that never became active is dropped: once switched, it is what is served.
      if (!switched) await this.dropCodeSystem(cs);
      throw err;
    }
  }

  private async writeConcepts(cs: string, url: string, concepts: Iterable<ConceptInput> | AsyncIterable<ConceptInput>): Promise<number> {
    let batch: ConceptInput[] = [];
    let count = 0;
    const flush = async () => {
      if (!batch.length) return;
      const b = batch;
      batch = [];
      try {
        await this.db.query(
          `INSERT INTO term_concepts (cs, code, display, display_norm, definition, active, properties, designations)
           SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::jsonb[], $8::jsonb[])`,
          [
            cs,
            b.map((c) => c.code),
            b.map((c) => c.display ?? null),
            b.map((c) => (c.display ? normalizeString(c.display) : null)),
            b.map((c) => c.definition ?? null),
            b.map((c) => c.active),
            b.map((c) => (c.properties ? JSON.stringify(c.properties) : null)),
            b.map((c) => (c.designations ? JSON.stringify(c.designations) : null)),
          ],
        );
      } catch (err) {
        if (sqlState(err) !== SqlState.uniqueViolation) throw err;
        const seen = new Set<string>();
        const twice = b.find((c) => (seen.has(c.code) ? true : (seen.add(c.code), false)))?.code;
        throw badRequest(`CodeSystem ${url}: code ${twice ?? '(one of ' + b.slice(0, 3).map((c) => c.code).join(', ') + '…)'} is given twice`);
      }
      const parents: string[] = [];
      const children: string[] = [];
      for (const c of b) {
        for (const p of c.parents) (parents.push(p), children.push(c.code));
        for (const ch of c.children ?? []) (parents.push(c.code), children.push(ch));
      }
      if (parents.length)
        await this.db.query('INSERT INTO term_edge_load (cs, parent_code, child_code) SELECT $1, * FROM unnest($2::text[], $3::text[])', [cs, parents, children]);
    };
    for await (const c of concepts) {
      checkCode(c.code, `CodeSystem ${url}`);
      batch.push(c);
      count++;
      if (batch.length >= BATCH) await flush();
    }
    await flush();
    return count;
  }

  /** What a release format with its displays and hierarchy in files of their own (RF2) adds once the concepts are written. */
  private writer(cs: string): ConceptWriter {
    return {
      describe: async (batch) => {
        if (!batch.length) return;
        await this.db.query(
          `UPDATE term_concepts c SET display = coalesce(d.display, c.display, d.fallback),
             display_norm = coalesce(d.norm, c.display_norm, d.fallback_norm),
             designations = coalesce(c.designations, '[]'::jsonb) || d.des
           FROM (SELECT code, max(display) AS display, max(norm) AS norm, max(fallback) AS fallback, max(fallback_norm) AS fallback_norm, jsonb_agg(des) AS des
                 FROM unnest($2::text[], $3::text[], $4::text[], $5::jsonb[], $6::text[], $7::text[]) AS x(code, display, norm, des, fallback, fallback_norm) GROUP BY code) d
           WHERE c.cs = $1 AND c.code = d.code`,
          [
            cs,
            batch.map((b) => b.code),
            batch.map((b) => b.display ?? null),
            batch.map((b) => (b.display ? normalizeString(b.display) : null)),
            batch.map((b) => JSON.stringify(b.designation)),
            batch.map((b) => b.fallback ?? null),
            batch.map((b) => (b.fallback ? normalizeString(b.fallback) : null)),
          ],
        );
      },
      edges: async (parents, children) => {
        if (parents.length)
          await this.db.query('INSERT INTO term_edge_load (cs, parent_code, child_code) SELECT $1, * FROM unnest($2::text[], $3::text[])', [cs, parents, children]);
      },
    };
  }

  /** Resolves the loaded edges to concepts, refuses unknown codes and cycles, and builds the closure level by level. */
  private async buildHierarchy(cs: string, url: string): Promise<void> {
    const unknown = await this.db.query<{ parent_code: string; child_code: string }>(
      `SELECT l.parent_code, l.child_code FROM term_edge_load l
       WHERE l.cs = $1 AND (NOT EXISTS (SELECT 1 FROM term_concepts p WHERE p.cs = $1 AND p.code = l.parent_code)
                         OR NOT EXISTS (SELECT 1 FROM term_concepts c WHERE c.cs = $1 AND c.code = l.child_code)) LIMIT 3`,
      [cs],
    );
    if (unknown.rows.length)
      throw badRequest(`CodeSystem ${url}: the hierarchy names codes that are not in it: ${unknown.rows.map((r) => `${r.parent_code} above ${r.child_code}`).join('; ')}`);
    await this.db.query(
      `INSERT INTO term_edges (parent, child)
       SELECT DISTINCT p.cid, c.cid FROM term_edge_load l
       JOIN term_concepts p ON p.cs = $1 AND p.code = l.parent_code JOIN term_concepts c ON c.cs = $1 AND c.code = l.child_code
       WHERE l.cs = $1 ON CONFLICT DO NOTHING`,
      [cs],
    );
    await this.db.query('DELETE FROM term_edge_load WHERE cs = $1', [cs]);

    // Levels (Kahn): a concept's level is one more than its deepest parent's. What is left has a cycle.
    const edges = await this.db.query<{ parent: string; child: string }>(
      'SELECT e.parent::text, e.child::text FROM term_edges e JOIN term_concepts c ON c.cid = e.child WHERE c.cs = $1',
      [cs],
    );
    const childrenOf = new Map<number, number[]>();
    const pending = new Map<number, number>(); // child -> parents not yet placed
    for (const { parent, child } of edges.rows) {
      const p = Number(parent);
      const c = Number(child);
      if (p === c) throw badRequest(`CodeSystem ${url}: the hierarchy has a cycle: ${await this.codes([c])} is its own parent`);
      (childrenOf.get(p) ?? childrenOf.set(p, []).get(p)!).push(c);
      pending.set(c, (pending.get(c) ?? 0) + 1);
    }
    let level = [...childrenOf.keys()].filter((p) => !pending.has(p));
    const levels: number[][] = [];
    while (level.length) {
      const next: number[] = [];
      for (const p of level)
        for (const c of childrenOf.get(p) ?? []) {
          const left = pending.get(c)! - 1;
          if (left === 0) (pending.delete(c), next.push(c));
          else pending.set(c, left);
        }
      if (next.length) levels.push(next);
      if (levels.length > MAX_HIERARCHY_DEPTH)
        throw badRequest(`CodeSystem ${url}: the hierarchy is deeper than ${MAX_HIERARCHY_DEPTH} levels, the most Pont loads (${await this.codes([next[0]!])} is ${levels.length} levels below the top)`);
      level = next;
    }
    if (pending.size) throw badRequest(`CodeSystem ${url}: the hierarchy has a cycle: ${await this.cycle(pending, edges.rows)}`);

    await this.db.query('INSERT INTO term_closure (ancestor, descendant) SELECT cid, cid FROM term_concepts WHERE cs = $1', [cs]);
    // Statistics of the tables this load grew, before and as each level is added: without them the planner takes the
    // closure for small and merges all of it with each chunk (a minute a chunk at 300,000 concepts), instead of
    // probing its index for the chunk's parents.
    await this.db.exec('ANALYZE term_edges');
    await this.db.exec('ANALYZE term_closure');
    for (const nodes of levels) {
      for (let i = 0; i < nodes.length; i += CLOSURE_CHUNK)
        await this.db.query(
          `INSERT INTO term_closure (ancestor, descendant)
           SELECT DISTINCT c.ancestor, e.child FROM term_edges e JOIN term_closure c ON c.descendant = e.parent
           WHERE e.child = ANY($1::bigint[]) ON CONFLICT DO NOTHING`,
          [nodes.slice(i, i + CLOSURE_CHUNK)],
        );
      if (nodes.length >= CLOSURE_CHUNK) await this.db.exec('ANALYZE term_closure');
    }
  }

  private async codes(cids: number[]): Promise<string> {
    const r = await this.db.query<{ cid: string; code: string }>('SELECT cid::text, code FROM term_concepts WHERE cid = ANY($1::bigint[])', [cids]);
    const code = new Map(r.rows.map((x) => [Number(x.cid), x.code]));
    return cids.map((c) => code.get(c)).join(' -> ');
  }

  /** One cycle among the concepts Kahn's algorithm could not place, as codes: a -> b -> … -> a (parent to child). */
  private async cycle(left: Map<number, number>, edges: Array<{ parent: string; child: string }>): Promise<string> {
    const parentOf = new Map<number, number>();
    for (const { parent, child } of edges) if (left.has(Number(child)) && left.has(Number(parent))) parentOf.set(Number(child), Number(parent));
    let at = parentOf.keys().next().value as number;
    const seen = new Map<number, number>();
    const path: number[] = [];
    while (!seen.has(at)) {
      seen.set(at, path.length);
      path.push(at);
      at = parentOf.get(at)!;
    }
    const loop = path.slice(seen.get(at)!).reverse();
    return this.codes([...loop, loop[0]!]);
  }

  /** One value set: expanded now against the active code systems (or marked unexpandable, saying why). */
  async loadValueSet(vs: ValueSet): Promise<Loaded> {
    const { url, version } = checkHeader(vs, 'ValueSet');
    const id = resourceIdOf(vs);
    const depends = dependenciesOf(vs);
    return this.db.transaction(async (tx) => {
      await checkCompose(tx, vs);
      await this.checkIdFree(tx, 'ValueSet', id, url);
      await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`term:${url}`]);
      const old = await tx.query(`UPDATE term_value_sets SET state = 'retired' WHERE url = $1 AND version = $2 AND state = 'active' RETURNING id`, [url, version]);
      const row = await tx.query<{ id: string }>(
        `INSERT INTO term_value_sets (url, version, resource_id, state, resource, depends) VALUES ($1, $2, $3, 'active', $4, $5) RETURNING id`,
        [url, version, id, JSON.stringify({ ...vs, id }), depends],
      );
      const { count, unexpandable } = await expandInto(tx, row.rows[0]!.id, vs);
      const reexpanded = await this.reexpandDependents(tx, [url]);
      await tx.query(`DELETE FROM term_value_sets WHERE state = 'retired' AND url = $1`, [url]);
      return { resourceType: 'ValueSet' as const, url, version, id, count, replaced: old.rowCount > 0, unexpandable, reexpanded };
    });
  }

  /** The value sets that draw on `urls` (and on those, and so on) expanded again: what they hold follows what is loaded. */
  private async reexpandDependents(tx: Queryable, urls: string[]): Promise<string[]> {
    const done = new Set<string>();
    let frontier = urls;
    for (let round = 0; frontier.length && round < 20; round++) {
      const dependents = await tx.query<{ id: string; url: string; resource: ValueSet }>(
        `SELECT id, url, resource FROM term_value_sets WHERE state = 'active' AND depends && $1::text[] ORDER BY id`,
        [frontier],
      );
      const next: string[] = [];
      for (const d of dependents.rows) {
        if (done.has(d.id)) continue;
        done.add(d.id);
        // One value set that cannot be expanded again (one stored before its filters were checked at load) is marked
        // so, alone: it never fails the load that changed what it draws on.
        await tx.query('SAVEPOINT reexpand');
        try {
          await expandInto(tx, d.id, d.resource);
          await tx.query('RELEASE SAVEPOINT reexpand');
        } catch (err) {
          // Losing to a concurrent transaction says nothing of the value set: the whole transaction is run again.
          if (isContention(err)) throw err;
          await tx.query('ROLLBACK TO SAVEPOINT reexpand');
          const why = `its expansion failed: ${err instanceof Error ? err.message : String(err)}`.slice(0, 1000);
          await tx.query('DELETE FROM term_value_set_codes WHERE vs = $1', [d.id]);
          await tx.query('UPDATE term_value_sets SET unexpandable = $2, code_count = 0 WHERE id = $1', [d.id, why]);
        }
        next.push(d.url);
      }
      frontier = next;
    }
    const names = await tx.query<{ url: string }>('SELECT url FROM term_value_sets WHERE id = ANY($1::bigint[]) ORDER BY url', [[...done]]);
    return names.rows.map((r) => r.url);
  }

  /** One concept map: its elements flattened to (source, target, equivalence) rows for $translate. */
  async loadConceptMap(cm: ConceptMap): Promise<Loaded> {
    const { url, version } = checkHeader(cm, 'ConceptMap');
    const id = resourceIdOf(cm);
    const rows: Array<[string, string, string | null, string | null, string | null, string, string | null]> = [];
    for (const group of Array.isArray(cm.group) ? cm.group : []) {
      if (typeof group.source !== 'string') throw badRequest(`ConceptMap ${url}: each group needs a source (the code system mapped from)`);
      for (const element of Array.isArray(group.element) ? group.element : []) {
        const code = checkCode(element.code, `ConceptMap ${url}`);
        const targets = Array.isArray(element.target) ? element.target : [];
        for (const t of targets) {
          const equivalence = typeof t.equivalence === 'string' ? t.equivalence : 'equivalent';
          const targetCode = t.code === undefined ? null : checkCode(t.code, `ConceptMap ${url} ${code}`);
          if (!targetCode && equivalence !== 'unmatched') throw badRequest(`ConceptMap ${url}: ${code} has a target without a code (only "unmatched" targets may)`);
          rows.push([group.source, code, targetCode ? (group.target ?? null) : null, targetCode, t.display ?? null, equivalence, t.comment ?? null]);
        }
      }
      // What $translate answers for a code the group does not list (R4 group.unmapped): a row of its own, source code
      // '' (never a code), equivalence `unmapped:{mode}`, the fixed code and display or the other map's url (comment).
      const unmapped = group.unmapped as { mode?: unknown; code?: unknown; display?: unknown; url?: unknown } | undefined;
      if (unmapped !== undefined) {
        const mode = unmapped?.mode;
        if (mode !== 'provided' && mode !== 'fixed' && mode !== 'other-map') throw badRequest(`ConceptMap ${url}: group.unmapped.mode is provided, fixed or other-map`);
        const fixed = mode === 'fixed' ? checkCode(unmapped.code, `ConceptMap ${url} unmapped`) : null;
        const display = mode === 'fixed' && typeof unmapped.display === 'string' ? unmapped.display : null;
        if (mode === 'other-map' && (typeof unmapped.url !== 'string' || !unmapped.url || unmapped.url.length > 1024)) throw badRequest(`ConceptMap ${url}: group.unmapped of mode other-map names the other map (url)`);
        rows.push([group.source, '', group.target ?? null, fixed, display, `unmapped:${mode}`, mode === 'other-map' ? (unmapped.url as string) : null]);
      }
    }
    return this.db.transaction(async (tx) => {
      await this.checkIdFree(tx, 'ConceptMap', id, url);
      await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`term:${url}`]);
      const old = await tx.query(`UPDATE term_concept_maps SET state = 'retired' WHERE url = $1 AND version = $2 AND state = 'active' RETURNING id`, [url, version]);
      const row = await tx.query<{ id: string }>(
        `INSERT INTO term_concept_maps (url, version, resource_id, state, resource) VALUES ($1, $2, $3, 'active', $4) RETURNING id`,
        [url, version, id, JSON.stringify({ ...cm, id })],
      );
      const col = (i: number) => rows.map((r) => r[i]);
      if (rows.length)
        await tx.query(
          `INSERT INTO term_concept_map_elements (cm, ord, source_system, source_code, target_system, target_code, target_display, equivalence, comment)
           SELECT $1, n, s, c, ts, tc, td, e, cm FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[]) WITH ORDINALITY AS x(s, c, ts, tc, td, e, cm, n)`,
          [row.rows[0]!.id, col(0), col(1), col(2), col(3), col(4), col(5), col(6)],
        );
      await tx.query(`DELETE FROM term_concept_maps WHERE state = 'retired' AND url = $1`, [url]);
      return { resourceType: 'ConceptMap' as const, url, version, id, count: rows.filter((r) => r[1] !== '').length, replaced: old.rowCount > 0 };
    });
  }
}
