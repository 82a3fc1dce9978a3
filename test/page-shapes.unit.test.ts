import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ClientPrincipal } from '../src/core/principal';
import { parseSearch } from '../src/fhir/search/parse';
import { MARKER, PageShapes, type PatientSearch } from '../src/fhir/store/page-shapes';
import { pagesStatement, type PagesStatement } from '../src/fhir/store/search';
import { loadMappings } from '../src/mapping/index';
import { recordTypes, type RecordSource } from '../src/mapping/record-types';
import { accessPolicyFor } from '../src/policy/index';

// The statements of Connect records kept by shape (src/fhir/store/page-shapes.ts): a kept statement bound to a patient
// must be exactly what building it for that patient gives, under that caller's policy and no other's. No database:
// the statements are compared as rendered.

const BASE = 'https://pont.example/api/fhir/R4';
const client = (organizationId: string): ClientPrincipal => ({ kind: 'client', clientId: `client-of-${organizationId}`, organizationId, scopes: ['fhir:read', 'patients:read', 'labs:read', 'prescriptions:read', 'patient:diagnostics:read'] });

/** Every source of every record type of the shipped maps, for one patient, as the records route asks them (and the Patient by _id). */
let sources: RecordSource[] | undefined;
function recordsSearches(patientId: string): PatientSearch[] {
  sources ??= [...recordTypes(loadMappings()).values()].flatMap((t) => t.sources);
  return [
    ...sources.map((s) => ({ type: s.resourceType, query: { ...s.query, [s.patientParam]: `Patient/${patientId}`, _sort: `-${s.dateParam}`, _count: '100', _total: 'none' }, offset: 0 })),
    { type: 'Patient', query: { _id: patientId, _sort: '_id', _count: '1', _total: 'none' }, offset: 0 },
  ];
}

function builder(organizationId: string, built: { count: number } = { count: 0 }) {
  const access = accessPolicyFor(client(organizationId), 'connect');
  return (searches: PatientSearch[]): PagesStatement => {
    built.count++;
    return pagesStatement(searches.map(({ type, query, offset }) => ({ search: parseSearch(type, query, BASE), offset })), access);
  };
}

describe('statements kept by shape', () => {
  // Ids as other writers give them: a UUID, a number, one letter, a word that is also a code, a prefix of another.
  const patients = [randomUUID(), '123', '1', 'laboratory', '12', 'Patient'];

  it('bind each patient exactly as building its statement does, built once per shape', () => {
    const shapes = new PageShapes();
    const built = { count: 0 };
    const build = builder('org-a', built);
    for (const round of [1, 2])
      for (const id of patients) {
        const fresh = builder('org-a')(recordsSearches(id));
        const kept = shapes.statement('org-a', id, recordsSearches(id), build);
        expect(kept.text).toBe(fresh.text);
        expect(kept.values).toEqual(fresh.values);
        expect(kept.counts).toEqual(fresh.counts);
        expect(kept.values).toContain(id);
        expect(JSON.stringify(kept.values)).not.toContain(MARKER);
        if (round === 2) expect(built.count).toBe(2); // the first patient's two builds, then bound for every one
      }
  });

  it("never give one caller's statement to another: the policy's inputs are the key", () => {
    const shapes = new PageShapes();
    const id = randomUUID();
    shapes.statement('org-a', id, recordsSearches(id), builder('org-a'));
    const other = shapes.statement('org-b', id, recordsSearches(id), builder('org-b'));
    expect(other.values).toContain('org-b');
    expect(other.values).not.toContain('org-a');
  });

  it('build every time a shape whose values are more than the id (a hash of it), and searches that read the clock', () => {
    const shapes = new PageShapes();
    const built = { count: 0 };
    const hashed = (searches: PatientSearch[]): PagesStatement => {
      built.count++;
      const id = String(searches[0]!.query._id);
      return { text: 'SELECT $1', values: [[...id].reverse().join('')], counts: [1] };
    };
    const patientSearch = (id: string): PatientSearch[] => [{ type: 'Patient', query: { _id: id }, offset: 0 }];
    expect(shapes.statement('k', 'abc', patientSearch('abc'), hashed).values).toEqual(['cba']);
    expect(shapes.statement('k', 'xyz', patientSearch('xyz'), hashed).values).toEqual(['zyx']);
    expect(built.count).toBe(3); // twice for the first (found not to bind), once for the second

    const dated = (id: string, q: Record<string, string>): PatientSearch[] => [{ type: 'Observation', query: { patient: `Patient/${id}`, _sort: '-date', _count: '10', _total: 'none', ...q }, offset: 0 }];
    for (const q of [{ _lastUpdated: 'gt2026-01-01T00:00:00Z' }, { date: 'ap2026-01-01' }, { date: 'ge2020-01-01,ap2026-01-01' }] as Array<Record<string, string>>) {
      const counted = { count: 0 };
      const build = builder('org-a', counted);
      for (const id of ['1', '2', '1']) shapes.statement('org-a', id, dated(id, q), build);
      expect(counted.count).toBe(3);
    }
  });

  it('build later pages (a cursor) every time: each offset would be a shape of its own', () => {
    const shapes = new PageShapes();
    const built = { count: 0 };
    const build = builder('org-a', built);
    for (const offset of [100, 100]) shapes.statement('org-a', 'p', [{ type: 'Condition', query: { patient: 'Patient/p', _sort: '-recorded-date', _count: '100', _total: 'none' }, offset }], build);
    expect(built.count).toBe(2);
  });

  it('keep at most the most recently used shapes', () => {
    const shapes = new PageShapes(2);
    const built = { count: 0 };
    const build = builder('org-a', built);
    const search = (id: string, count: string): PatientSearch[] => [{ type: 'Condition', query: { patient: `Patient/${id}`, _sort: '-recorded-date', _count: count, _total: 'none' }, offset: 0 }];
    for (const count of ['1', '2', '3']) shapes.statement('org-a', 'p', search('p', count), build);
    expect(built.count).toBe(6);
    shapes.statement('org-a', 'q', search('q', '3'), build); // kept
    shapes.statement('org-a', 'q', search('q', '1'), build); // the least recently used: gone
    expect(built.count).toBe(8);
  });
});
