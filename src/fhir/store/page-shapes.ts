import { isDeepStrictEqual } from 'node:util';
import type { QueryParams } from '../search/parse';
import type { PagesStatement } from './search';

/**
 * The statements of searchPages kept by shape. Connect records and the SDK summary ask the same searches for every
 * patient (the maps' sources, from the same offsets, under the same caller's policy): only the patient differs. Parsing
 * some thirty searches, building their SQL and rendering it took about a millisecond a request (and the ~100 kB text
 * was hashed again to find its prepared statement). So a shape's statement — the caller's policy inputs, the searches
 * with MARKER in place of the patient's id — is built once, and each request binds its own patient's id where the
 * marker's values had it.
 *
 * A shape is kept only when that is exactly what building it again would give: on its first use it is built twice, for
 * the patient and for the marker, and kept only when the two are the same text and the same values once the marker is
 * replaced by the patient's id (a value derived from the id, such as a hash of it, would differ: such a shape is never
 * kept, and is built every time). Searches whose SQL reads the clock when built (`ap` dates, whose margin is a share of
 * their distance from now) or that name an instant a request chose (`_lastUpdated`: records `since`) are not kept, nor
 * later pages (offsets other than 0), which would each be a shape of their own.
 */

/** What stands for the patient's id in a kept statement: a FHIR id (so the searches parse) that no data has. */
export const MARKER = 'pont-patient-of-this-request-0c6f3e2a9b7d41d8';

/** Shapes kept at most per process (a records statement is ~100 kB of text): the least recently used go first. */
const MAX_SHAPES = 64;

export interface PatientSearch {
  type: string;
  query: QueryParams;
  offset: number;
  /** Searches (of the same type, filters only) whose matches this one leaves out: another record type's. */
  except?: QueryParams[];
}

export class PageShapes {
  /** Key -> the marker's statement, or null: the shape is built every time. Map order is use order (LRU). */
  private readonly kept = new Map<string, PagesStatement | null>();

  constructor(private readonly max = MAX_SHAPES) {}

  /**
   * The statement of `searches` (every one naming `patientId`) under the policy `policyKey` names (every input of
   * the caller's policy), built by `build` or bound from the shape's kept statement.
   */
  statement(policyKey: string, patientId: string, searches: PatientSearch[], build: (searches: PatientSearch[]) => PagesStatement): PagesStatement {
    // Later pages (a cursor's offsets) are one type's few searches, each offset a shape of its own: built every time.
    if (patientId === MARKER || searches.some((s) => s.offset !== 0 || readsClock(s))) return build(searches);
    const marked = searches.map((s) => ({ ...s, query: replaced(s, patientId, MARKER) }));
    const key = `${policyKey}\n${JSON.stringify(marked)}`;
    const kept = this.kept.get(key);
    if (kept !== undefined) {
      this.kept.delete(key);
      this.kept.set(key, kept);
      return kept === null ? build(searches) : bound(kept, patientId);
    }
    const real = build(searches);
    const template = builtOrNot(() => build(marked));
    const same = !!template && template.text === real.text && isDeepStrictEqual(bound(template, patientId).values, real.values);
    this.kept.set(key, same ? template : null);
    if (this.kept.size > this.max) this.kept.delete(this.kept.keys().next().value!);
    return real;
  }
}

/**
 * The search's query naming `to` where it names the patient `id`: a reference to them (`patient=Patient/id`), and a
 * Patient's own `_id`. Nothing else (`_count=1` is no patient, whatever their id).
 */
function replaced({ type, query }: PatientSearch, id: string, to: string): QueryParams {
  const one = (k: string, v: string) => (v === `Patient/${id}` ? `Patient/${to}` : type === 'Patient' && k === '_id' && v === id ? to : v);
  const out: QueryParams = {};
  for (const [k, v] of Object.entries(query)) out[k] = v === undefined ? v : Array.isArray(v) ? v.map((x) => one(k, x)) : one(k, v);
  return out;
}

/** The marker's statement, or undefined when the marker makes searches that do not build (then nothing is kept). */
function builtOrNot(build: () => PagesStatement): PagesStatement | undefined {
  try {
    return build();
  } catch {
    return undefined;
  }
}

/** Does building the search's SQL read the clock, or name an instant of this request? */
function readsClock({ query }: PatientSearch): boolean {
  return Object.entries(query).some(([k, v]) => k.startsWith('_lastUpdated') || (Array.isArray(v) ? v : [v]).some((x) => typeof x === 'string' && /(^|,)ap/.test(x)));
}

/** The kept statement with the patient's id where the marker is. */
function bound(template: PagesStatement, patientId: string): PagesStatement {
  return { ...template, values: template.values.map((v) => bind(v, patientId)) };
}

function bind(value: unknown, patientId: string): unknown {
  if (typeof value === 'string') return value.includes(MARKER) ? value.replaceAll(MARKER, patientId) : value;
  if (Array.isArray(value)) return value.map((v) => bind(v, patientId));
  return value;
}
