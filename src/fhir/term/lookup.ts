import type { Resource } from '@medplum/fhirtypes';
import { ApiError, ErrorCode } from '../../core/errors';
import type { Database, Queryable } from '../../db/database';
import { NotifiedCache, setBounded } from '../../db/notified-cache';
import type { ReadTerminology, TerminologyQuestions } from '../../mapping/runtime';
import { bindingIssue, boundValues, outsideBindings } from './bindings';
import { currentFirst } from './current';

/**
 * What the maps read of the loaded terminology (docs/fhir.md "Terminology", "Used by the maps"): the display the
 * current version of a loaded code system gives a code, and whether a code is in the current expansion of a loaded
 * value set (memberOf()). The rules are written here once: `$validate`'s binding check and the writes' refusal of a
 * code outside a loaded value set of a required binding (refusals) ask membership here too.
 *
 * - The current version of a code system or value set is the one src/fhir/term/current.ts names (the one `:below` and `:in` search).
 * - A code is in a value set when its stored expansion holds the code from the coding's system; a bare code (a `code`
 *   element, no system) is in it from any of its systems. A value set that is not loaded, or whose current version
 *   cannot be expanded, answers nothing (undefined): not judged.
 *
 * Records are a hot path (a page maps some 200 resources): a page's questions are answered in one statement, and the
 * answers kept per process in a cache that a trigger's NOTIFY empties on every change of a code system or value set
 * (migration 037, on every path: the load command, SQL by hand), so a reload is seen by every process as it commits.
 * While the listening connection is down nothing is cached.
 */

/** The channel migration 037's triggers announce changes on: `loaded`, and `cs:<url>` or `vs:<url>`. */
export const TERMINOLOGY_CHANNEL = 'pont_terminology_changes';
/**
 * Code systems and value sets whose answers a process keeps (only loaded ones are asked about, and the maps name few
 * value sets); the oldest go first. With MAX_CACHED_CODES, at most a million answers, some 100 MB at worst.
 */
const MAX_CACHED_SETS = 100;
/** Longest url whose answers are kept: a notification's payload holds 1,900 characters of it (4 bytes each at most, under its 8,000 bytes) (migration 037). */
const MAX_CACHED_URL = 1900;
/** Answers kept per code system or value set; the oldest go first. */
const MAX_CACHED_CODES = 10_000;

/** The urls that have an active version: a code of any other system, a value set of any other url, asks nothing. */
interface Loaded {
  kind: 'loaded';
  systems: ReadonlySet<string>;
  valueSets: ReadonlySet<string>;
}
/** A code system's displays by code (null: no such concept, or no display). */
type Displays = Map<string, string | null>;
/** A value set's answers by `system|code` (`|code`: a bare code); null: loaded, but its current version cannot be expanded. */
type Members = Map<string, boolean> | null;
type Entry = Loaded | Displays | Members;

const codingKey = (system: string | undefined, code: string) => `${system ?? ''}|${code}`;

/**
 * The rule of membership in SQL: the questions are the arrays $first…$first+3 (value set url, its version or null,
 * the coding's system or null, the code), numbered `x.i` from 1; `v` is the value set's current version (of
 * that version when one is asked), `v.unexpandable` null when it is expanded.
 */
const membershipFrom = (first: number) => `FROM unnest($${first}::text[], $${first + 1}::text[], $${first + 2}::text[], $${first + 3}::text[]) WITH ORDINALITY AS x(url, version, system, code, i)
  JOIN LATERAL (SELECT id, unexpandable FROM term_value_sets v WHERE v.url = x.url AND v.state = 'active' AND (x.version IS NULL OR v.version = x.version)
                ORDER BY ${currentFirst('v')} LIMIT 1) v ON true`;
/** Is the question's code in `v`'s stored expansion: from the coding's system, or from any for a bare code. */
const IS_MEMBER = `v.unexpandable IS NULL AND CASE WHEN x.system IS NULL
  THEN EXISTS (SELECT 1 FROM term_value_set_codes c WHERE c.vs = v.id AND c.code = x.code)
  ELSE EXISTS (SELECT 1 FROM term_value_set_codes c WHERE c.vs = v.id AND c.system = x.system AND c.code = x.code) END`;
/** The parameters of membershipFrom for these questions. */
const membershipParams = (asked: Array<{ valueSet: string; system?: string; code: string }>) => [
  asked.map((m) => m.valueSet.split('|')[0]),
  asked.map((m) => m.valueSet.split('|')[1] ?? null),
  asked.map((m) => m.system ?? null),
  asked.map((m) => m.code),
];

export class TerminologyLookup {
  private readonly cache = new NotifiedCache<Entry>(MAX_CACHED_SETS);
  private listening?: Promise<void>;

  /** `db`: the database whose notifications empty the cache (the lookups themselves run on the caller's Queryable). */
  constructor(private readonly db: Database) {}

  /** Starts listening, once, off the request path: until it is ready nothing is cached. */
  private listen(): void {
    this.listening ??= this.cache.listen(this.db, TERMINOLOGY_CHANNEL).catch(() => undefined);
  }

  async close(): Promise<void> {
    await this.cache.close();
  }

  /**
   * The answers to a page's questions (TerminologyQuestions: its codings without a display, its memberOf() codes),
   * read on `q` (the request's transaction) in at most two statements, none when the cache has them or no code
   * system or value set they name is loaded. Undefined when nothing was asked.
   */
  async answers(q: Queryable, asked: TerminologyQuestions): Promise<ReadTerminology | undefined> {
    if (!asked.codings.length && !asked.members.length) return undefined;
    this.listen();
    const since = this.cache.since();
    const loaded = await this.loaded(q, since);
    const displays = new Map<string, string | null>();
    const members = new Map<string, boolean>();
    /** Value sets (as asked, `url` or `url|version`) loaded but not expandable: memberOf() answers nothing. */
    const unanswerable = new Set<string>();

    const askDisplays: Array<{ system: string; code: string }> = [];
    for (const { system, code } of asked.codings) {
      const key = codingKey(system, code);
      if (!loaded.systems.has(system) || displays.has(key)) continue;
      const cached = (this.cache.get(`cs:${system}`) as Displays | undefined)?.get(key);
      if (cached !== undefined) displays.set(key, cached);
      else {
        displays.set(key, null);
        askDisplays.push({ system, code });
      }
    }
    const askMembers: Array<{ valueSet: string; system?: string; code: string }> = [];
    for (const m of asked.members) {
      const [url, version] = m.valueSet.split('|');
      const key = `${m.valueSet}\u0000${codingKey(m.system, m.code)}`;
      if (!loaded.valueSets.has(url!) || members.has(key)) continue;
      const entry = version === undefined ? (this.cache.get(`vs:${url}`) as Members | undefined) : undefined;
      if (entry === null) unanswerable.add(m.valueSet);
      const cached = entry?.get(codingKey(m.system, m.code));
      if (entry === null || cached !== undefined) members.set(key, cached ?? false);
      else {
        members.set(key, false);
        askMembers.push(m);
      }
    }

    if (askDisplays.length || askMembers.length) {
      const { rows } = await q.query<{ kind: 'd' | 'm' | 'x'; i: number; display: string | null; member: boolean | null }>(
        `SELECT 'd' AS kind, x.i::int, c.display, NULL::boolean AS member
           FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(system, code, i)
           JOIN LATERAL (SELECT id FROM term_code_systems s WHERE s.url = x.system AND s.state = 'active' ORDER BY ${currentFirst('s')} LIMIT 1) s ON true
           JOIN term_concepts c ON c.cs = s.id AND c.code = x.code
         UNION ALL
         SELECT CASE WHEN v.unexpandable IS NULL THEN 'm' ELSE 'x' END, x.i::int, NULL, ${IS_MEMBER}
         ${membershipFrom(3)}`,
        [askDisplays.map((c) => c.system), askDisplays.map((c) => c.code), ...membershipParams(askMembers)],
      );
      const notLoaded = new Set(askMembers.map((m) => m.valueSet));
      for (const r of rows) {
        if (r.kind === 'd') {
          const c = askDisplays[r.i - 1]!;
          displays.set(codingKey(c.system, c.code), r.display);
          continue;
        }
        const m = askMembers[r.i - 1]!;
        notLoaded.delete(m.valueSet);
        if (r.kind === 'x') unanswerable.add(m.valueSet);
        else members.set(`${m.valueSet}\u0000${codingKey(m.system, m.code)}`, r.member === true);
      }
      // A value set the list named but that is gone by now (a reload between the statements): not judged.
      for (const vs of notLoaded) unanswerable.add(vs);
      this.remember(since, askDisplays, displays, askMembers, members, unanswerable);
    }

    return {
      display: (system, code) => displays.get(codingKey(system, code)) ?? undefined,
      memberOf: (valueSet, system, code) => {
        if (!loaded.valueSets.has(valueSet.split('|')[0]!) || unanswerable.has(valueSet)) return undefined;
        return members.get(`${valueSet}\u0000${codingKey(system, code)}`);
      },
    };
  }

  /**
   * The writes' check of bindings to loaded value sets (src/fhir/store/writes.ts): a resource with a coded element
   * bound `required` to a loaded value set none of whose codes is in its current expansion is refused, a 400 naming
   * the element, as an invalid resource is. Extensible bindings are `$validate`'s warnings only; a value set not
   * loaded (or not expandable) is not judged. Nothing to do, and no statement, while no value set is loaded.
   */
  async refusals(q: Queryable, resources: Resource[]): Promise<Array<ApiError | undefined>> {
    this.listen();
    const loaded = await this.loaded(q, this.cache.since());
    if (!loaded.valueSets.size) return resources.map(() => undefined);
    const bound = resources.map((r) => boundValues(r).filter((b) => b.strength === 'required' && b.codings.length && loaded.valueSets.has(b.valueSet)));
    const members = bound.flat().flatMap((b) => b.codings.map((c) => ({ valueSet: b.valueSet, ...c })));
    const answers = members.length ? await this.answers(q, { codings: [], members }) : undefined;
    return resources.map((resource, i) => {
      const outside = outsideBindings(bound[i]!, (vs, system, code) => answers?.memberOf(vs, system, code));
      if (!outside.length) return undefined;
      const issues = outside.slice(0, 20).map(bindingIssue);
      const [first] = issues;
      return new ApiError(400, ErrorCode.validationFailed, `Invalid ${resource.resourceType}: ${first!.details!.text!.slice(0, 500)} at ${first!.expression![0]!.slice(0, 300)}`, { issues });
    });
  }

  /** Which code systems and value sets have an active version: cached, one statement after each change. */
  private async loaded(q: Queryable, since: number): Promise<Loaded> {
    const cached = this.cache.get('loaded') as Loaded | undefined;
    if (cached) return cached;
    const { rows } = await q.query<{ kind: string; url: string }>(
      `SELECT DISTINCT 'cs' AS kind, url FROM term_code_systems WHERE state = 'active'
       UNION SELECT DISTINCT 'vs', url FROM term_value_sets WHERE state = 'active'`,
    );
    const loaded: Loaded = {
      kind: 'loaded',
      systems: new Set(rows.filter((r) => r.kind === 'cs').map((r) => r.url)),
      valueSets: new Set(rows.filter((r) => r.kind === 'vs').map((r) => r.url)),
    };
    this.cache.set('loaded', loaded, since);
    return loaded;
  }

  /** Keeps what a lookup that began at `since` read, unless a change was announced since (the cache's rule). */
  private remember(
    since: number,
    askDisplays: Array<{ system: string; code: string }>,
    displays: Map<string, string | null>,
    askMembers: Array<{ valueSet: string; system?: string; code: string }>,
    members: Map<string, boolean>,
    unanswerable: Set<string>,
  ): void {
    if (this.cache.since() !== since) return;
    const grown = new Map<string, Exclude<Entry, Loaded>>();
    const entry = <E extends Displays | Map<string, boolean>>(key: string): E => {
      let e = grown.get(key) as E | undefined;
      if (!e) grown.set(key, (e = ((this.cache.get(key) as E | undefined) ?? new Map()) as E));
      return e;
    };
    for (const { system, code } of askDisplays) setBounded(entry<Displays>(`cs:${system}`), codingKey(system, code), displays.get(codingKey(system, code)) ?? null, MAX_CACHED_CODES);
    for (const m of askMembers) {
      if (m.valueSet.includes('|')) continue; // a version asked for: not kept (changes are announced by url)
      if (unanswerable.has(m.valueSet)) grown.set(`vs:${m.valueSet}`, null);
      else setBounded(entry<Map<string, boolean>>(`vs:${m.valueSet}`), codingKey(m.system, m.code), members.get(`${m.valueSet}\u0000${codingKey(m.system, m.code)}`) ?? false, MAX_CACHED_CODES);
    }
    for (const [key, value] of grown) if (key.length <= MAX_CACHED_URL) this.cache.set(key, value, since);
  }

  /**
   * Membership of codes in value sets, for `$validate`'s binding check: one answer per question, in order; undefined
   * when the value set is not loaded or cannot be expanded (not judged). Read at the request, uncached.
   */
  static async members(q: Queryable, asked: Array<{ valueSet: string; system?: string; code: string }>): Promise<Array<boolean | undefined>> {
    if (!asked.length) return [];
    const { rows } = await q.query<{ i: number; member: boolean }>(
      `SELECT x.i::int, ${IS_MEMBER} AS member ${membershipFrom(1)} WHERE v.unexpandable IS NULL`,
      membershipParams(asked),
    );
    const out: Array<boolean | undefined> = asked.map(() => undefined);
    for (const r of rows) out[r.i - 1] = r.member;
    return out;
  }
}
