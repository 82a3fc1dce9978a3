import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodeSystem, CodeSystemConcept } from '@medplum/fhirtypes';
import { hashKey } from '../src/core/hash';
import { TerminologyLoader } from '../src/fhir/term/load';
import { conceptsOf } from '../src/fhir/term/concepts';
import { loadResource, resourcesOf } from '../src/fhir/term/files';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

// Token search through the loaded terminology (:below, :above, :in, :not-in), in SQL on both databases: each search's
// answer compared with an evaluation of the same rule here, from the fixture's own hierarchy, over every Observation
// the store holds.

const CS = 'http://example.org/fhir/CodeSystem/findings';
const OTHER = 'http://example.org/other-system';
const VS = 'http://example.org/fhir/ValueSet';
const BASE = '/api/fhir/R4';
const fixture = JSON.parse(readFileSync('test/terminology/example-codesystem.json', 'utf8'));
const codeSystem = fixture.entry[0].resource as CodeSystem;

/** Each code's ancestors (itself included), from the fixture, not from the store. */
const ancestors = new Map<string, Set<string>>();
{
  const parents = new Map<string, string[]>();
  for (const c of conceptsOf(codeSystem)) parents.set(c.code, c.parents);
  const up = (code: string): Set<string> => {
    const known = ancestors.get(code);
    if (known) return known;
    const set = new Set([code]);
    for (const p of parents.get(code) ?? []) up(p).forEach((a) => set.add(a));
    ancestors.set(code, set);
    return set;
  };
  for (const code of parents.keys()) up(code);
}
const allCodes = [...ancestors.keys()];

let pont: TestServer;
let client: TestClient;
/** Every Observation written: its id and its codings. */
const written: Array<{ id: string; codings: Array<{ system?: string; code: string }> }> = [];

beforeAll(async () => {
  pont = await startTestServer();
  const loader = new TerminologyLoader(pont.services.db);
  for await (const r of resourcesOf('test/terminology/example-codesystem.json')) await loadResource(loader, r);
  client = await createTestClient(pont, ['fhir:read', 'fhir:write', 'terminology:read'], { organizationId: 'org-term-search', allPatients: true });
  const codings = [
    ...allCodes.map((code) => [{ system: CS, code }]),
    [{ system: OTHER, code: 'pneumonia' }], // the same code in another system
    [{ code: 'pneumonia' }], // no system
    [{ system: CS, code: 'cough' }, { system: CS, code: 'viral-pneumonia' }], // two codings
  ];
  for (const coding of codings) {
    const { status, body } = await pont.json(`${BASE}/Observation`, {
      method: 'POST',
      headers: { ...client.headers, 'content-type': 'application/fhir+json' },
      json: { resourceType: 'Observation', status: 'final', code: { coding } },
    });
    expect(status, JSON.stringify(body)).toBe(201);
    written.push({ id: body.id, codings: coding });
  }
});
afterAll(async () => pont?.close());

async function ids(query: string): Promise<string[]> {
  const { status, body } = await pont.json(`${BASE}/Observation?${query}&_count=1000`, { headers: client.headers });
  expect(status, JSON.stringify(body)).toBe(200);
  return (body.entry ?? []).filter((e: any) => e.resource.resourceType === 'Observation').map((e: any) => e.resource.id).sort();
}
const expected = (match: (c: { system?: string; code: string }) => boolean, negate = false) =>
  written.filter((o) => o.codings.some(match) !== negate).map((o) => o.id).sort();
/** The fixture's value sets, evaluated here: infections is-a infection; diseases-below descendent-of disease but lung-disease. */
const inValueSet: Record<string, (code: string) => boolean> = {
  infections: (code) => ancestors.get(code)!.has('infection'),
  'diseases-below': (code) => code !== 'disease' && code !== 'lung-disease' && ancestors.get(code)!.has('disease'),
  symptoms: (code) => code === 'fever' || code === 'cough',
  both: (code) => code === 'fever' || code === 'cough' || ancestors.get(code)!.has('infection'),
};

describe('token search through the loaded terminology', () => {
  it('computes the search index hash in SQL as the indexer does', async () => {
    for (const [t, p, s, c] of [['Observation', 'code', CS, 'pneumonia'], ['Condition', 'code', 'http://snomed.info/sct', 'é ü 漢字']] as const) {
      const { rows } = await pont.services.db.query<{ h: string }>('SELECT pont_token_hash($1, $2, $3, $4)::text AS h', [t, p, s, c]);
      expect(rows[0]!.h).toBe(hashKey(t, p, s, c));
    }
  });

  it(':below finds the concept and its descendants (both parents of a polyhierarchy), in its system only', async () => {
    for (const code of allCodes) {
      const below = (c: { system?: string; code: string }) => c.system === CS && ancestors.get(c.code)!.has(code);
      expect(await ids(`code:below=${encodeURIComponent(`${CS}|${code}`)}`), code).toEqual(expected(below));
    }
    // Without a system: in every loaded code system that has the code (not the other system, not a coding without one).
    expect(await ids('code:below=infection')).toEqual(expected((c) => c.system === CS && ancestors.get(c.code)!.has('infection')));
    // Comma is OR.
    expect(await ids(`code:below=${encodeURIComponent(`${CS}|symptom,${CS}|pneumonia`)}`)).toEqual(
      expected((c) => c.system === CS && (ancestors.get(c.code)!.has('symptom') || ancestors.get(c.code)!.has('pneumonia'))),
    );
  });

  it(':above finds the concept and its ancestors', async () => {
    for (const code of ['lung-pneumonia-link', 'viral-pneumonia', 'finding']) {
      expect(await ids(`code:above=${encodeURIComponent(`${CS}|${code}`)}`), code).toEqual(expected((c) => c.system === CS && ancestors.get(code)!.has(c.code)));
    }
  });

  it(':in and :not-in follow the value sets, and compose with other parameters', async () => {
    for (const [name, member] of Object.entries(inValueSet)) {
      const url = encodeURIComponent(`${VS}/${name}`);
      const isIn = (c: { system?: string; code: string }) => c.system === CS && member(c.code);
      expect(await ids(`code:in=${url}`), name).toEqual(expected(isIn));
      expect(await ids(`code:not-in=${url}`), name).toEqual(expected(isIn, true));
    }
    const both = await ids(`code:in=${encodeURIComponent(`${VS}/symptoms`)}&code:below=${encodeURIComponent(`${CS}|finding`)}`);
    expect(both).toEqual(expected((c) => c.system === CS && inValueSet.symptoms!(c.code)));
  });

  it('refuses an unknown code system or value set, and values that are not codes or urls, with 400s', async () => {
    for (const query of [
      'code:below=http://nowhere.example|x',
      'code:in=http://nowhere.example/vs',
      'code:not-in=http://nowhere.example/vs',
      'code:in=not-a-url',
      `code:below=${encodeURIComponent(`${CS}|`)}`,
      'code:below=|x',
      'code:whatever=x',
    ]) {
      const { status, body } = await pont.json(`${BASE}/Observation?${query}`, { headers: client.headers });
      expect(status, query).toBe(400);
      expect(body.resourceType).toBe('OperationOutcome');
    }
    // An unknown code of a loaded system: nothing below it.
    expect(await ids(`code:below=${encodeURIComponent(`${CS}|nope`)}`)).toEqual([]);
  });

  it('needs terminology:read for :below, :above, :in and :not-in (403 otherwise, the loaded systems not told); other searches not', async () => {
    const plain = await createTestClient(pont, ['fhir:read'], { organizationId: 'org-term-search', allPatients: true });
    for (const query of [
      `code:below=${encodeURIComponent(`${CS}|infection`)}`,
      `code:above=${encodeURIComponent(`${CS}|cough`)}`,
      `code:in=${encodeURIComponent(`${VS}/both`)}`,
      `code:not-in=${encodeURIComponent(`${VS}/both`)}`,
      'code:below=http://nowhere.example|x', // not "is not loaded": that would tell what is
      `subject:Patient.gender:in=${encodeURIComponent(`${VS}/both`)}`, // through a chain too
    ]) {
      const { status, body } = await pont.json(`${BASE}/Observation?${query}`, { headers: plain.headers });
      expect(status, query).toBe(403);
      expect(body.resourceType).toBe('OperationOutcome');
      expect(JSON.stringify(body), query).toMatch(/terminology:read/);
    }
    const { status, body } = await pont.json(`${BASE}/Observation?code=${encodeURIComponent(`${CS}|cough`)}`, { headers: plain.headers });
    expect(status).toBe(200);
    expect(body.entry.length).toBeGreaterThan(0);
    // The same through Bulk export's _typeFilter: refused at kick-off, no job.
    const typeFilter = encodeURIComponent(`Observation?code:below=${encodeURIComponent(`${CS}|infection`)}`);
    const kickOff = await pont.json(`${BASE}/$export?_typeFilter=${typeFilter}`, { headers: { ...plain.headers, prefer: 'respond-async' } });
    expect(kickOff.status).toBe(403);
    expect(JSON.stringify(kickOff.body)).toMatch(/terminology:read/);
  });

  it('follows a reload of the code system at once', async () => {
    const moved: CodeSystem = { ...codeSystem, concept: JSON.parse(JSON.stringify(codeSystem.concept)) };
    // cough moves from symptom to infection.
    const finding = moved.concept![0]!;
    const symptom = finding.concept!.find((c) => c.code === 'symptom')!;
    symptom.concept = symptom.concept!.filter((c) => c.code !== 'cough');
    const infection = finding.concept!.find((c) => c.code === 'disease')!.concept!.find((c) => c.code === 'infection')!;
    infection.concept = [...(infection.concept as CodeSystemConcept[]), { code: 'cough', display: 'Cough' }];
    await new TerminologyLoader(pont.services.db).loadCodeSystem(moved, conceptsOf(moved));
    const coughIds = written.filter((o) => o.codings.some((c) => c.system === CS && c.code === 'cough')).map((o) => o.id);
    const infections = await ids(`code:below=${encodeURIComponent(`${CS}|infection`)}`);
    for (const id of coughIds) expect(infections).toContain(id);
    expect(await ids(`code:in=${encodeURIComponent(`${VS}/infections`)}`)).toEqual(expect.arrayContaining(coughIds)); // expanded again with the code system
  });
});
