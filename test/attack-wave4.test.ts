import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend, createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { TerminologyLoader } from '../src/fhir/term/load';
import { loadResource, resourcesOf } from '../src/fhir/term/files';

// Attack wave 4: the surfaces of the day's changes (terminology reads and searches, value sets given in a request,
// $translate's unmapped and reverse, metadata?mode=terminology) as an outsider holding a token of some organisation
// would attack them. Each `it` names what it tries.

const BASE = '/api/fhir/R4';
const CS = 'http://example.org/fhir/CodeSystem/findings';
/** A code system whose displays are long enough for a regex with back-references to be costly on each. */
const SLOW = 'http://example.org/attack/long-displays';

let pont: TestServer;
let reader: TestClient;
let loader: TerminologyLoader;

beforeAll(async () => {
  // A short bound, so the test needs no large code system to reach it.
  pont = await startTestServer({ PONT_TERMINOLOGY_STATEMENT_TIMEOUT: '2s' });
  loader = new TerminologyLoader(pont.services.db);
  for await (const r of resourcesOf('test/terminology/example-codesystem.json')) await loadResource(loader, r);
  await loadResource(loader, {
    resourceType: 'CodeSystem',
    url: SLOW,
    version: '1',
    status: 'active',
    content: 'complete',
    concept: Array.from({ length: 12 }, (_, k) => ({ code: `c${k}`, display: `${'Structure of left lower leg x'.repeat(2)}${k}` })),
  } as any);
  reader = await createTestClient(pont, ['terminology:read'], { organizationId: 'org-wave4' });
}, 60_000);
afterAll(async () => pont?.close());

const post = (path: string, body: unknown, client = reader) =>
  pont.json(`${BASE}/${path}`, { method: 'POST', headers: { ...client.headers, 'content-type': 'application/fhir+json' }, json: body });
const parameters = (parameter: unknown[]) => ({ resourceType: 'Parameters', parameter });
const expect4xx = (res: { status: number; body: any }, what: string) => {
  expect(res.status, `${what}: ${JSON.stringify(res.body).slice(0, 300)}`).toBeGreaterThanOrEqual(400);
  expect(res.status, `${what}: ${JSON.stringify(res.body).slice(0, 300)}`).toBeLessThan(500);
  expect(res.body?.resourceType, what).toBe('OperationOutcome');
};

// PGlite runs in this process and has no statement_timeout timer: the bound is PostgreSQL's.
describe.skipIf(backend === 'pglite')('a value set given in the request, costly to evaluate', () => {
  // Six back-referenced groups: PostgreSQL's regex engine tries every split of a display (O(n^6): 3-4 s for each
  // display of 59 characters here, hours over a large code system). Without a bound the request holds a connection
  // and a core until PostgreSQL is done, whether or not the client is still there.
  const evil = '(.*)(.*)(.*)(.*)(.*)(.*)\\6\\5\\4\\3\\2\\1';
  const given = { resourceType: 'ValueSet', status: 'draft', compose: { include: [{ system: SLOW, filter: [{ property: 'display', op: 'regex', value: evil }] }] } };

  it('$expand is cut at the statement bound: a 4xx OperationOutcome (too-costly) in seconds, not minutes', async () => {
    const started = Date.now();
    const res = await post('ValueSet/$expand', parameters([{ name: 'valueSet', resource: given }]));
    const took = Date.now() - started;
    expect4xx(res, 'costly $expand');
    expect(res.status).toBe(422);
    expect(res.body.issue[0].code).toBe('too-costly');
    expect(took).toBeLessThan(15_000);
  }, 90_000);

  it('$validate-code likewise, and the service answers the next request at once', async () => {
    const started = Date.now();
    const res = await post('ValueSet/$validate-code', parameters([{ name: 'valueSet', resource: given }, { name: 'code', valueCode: 'nope' }, { name: 'system', valueUri: SLOW }]));
    expect4xx(res, 'costly $validate-code');
    expect(res.body.issue[0].code).toBe('too-costly');
    expect(Date.now() - started).toBeLessThan(15_000);
    const ok = await post('ValueSet/$expand', parameters([{ name: 'valueSet', resource: { ...given, compose: { include: [{ system: CS, filter: [{ property: 'concept', op: 'is-a', value: 'disease' }] }] } } }]));
    expect(ok.status, JSON.stringify(ok.body).slice(0, 300)).toBe(200);
    expect(ok.body.expansion.total).toBe(7);
  }, 90_000);
});

describe('hostile inputs on the new parameters: a 4xx OperationOutcome, never a 5xx', () => {
  /** What did not answer a 4xx OperationOutcome: all of them, not the first. */
  const wrong: string[] = [];
  const check4xx = (res: { status: number; body: any }, what: string, outcome = true) => {
    if (res.status < 400 || res.status >= 500 || (outcome && res.body?.resourceType !== 'OperationOutcome')) wrong.push(`${what}: ${res.status} ${JSON.stringify(res.body ?? null).slice(0, 160)}`);
  };
  const none = () => {
    const found = wrong.splice(0);
    expect(found).toEqual([]);
  };
  const get = (path: string) => pont.json(`${BASE}/${path}`, { headers: reader.headers });
  const big = 'x'.repeat(1_000_000);
  const nested = (depth: number): any => (depth ? { contains: [nested(depth - 1)] } : { system: 'http://x', code: 'y' });

  it('$expand and $validate-code with a given valueSet of the wrong shapes', async () => {
    const vs = (extra: object) => ({ resourceType: 'ValueSet', status: 'draft', ...extra });
    const bodies: Array<[string, unknown]> = [
      ['valueSet a string', parameters([{ name: 'valueSet', valueString: 'x' }])],
      ['resource an array', parameters([{ name: 'valueSet', resource: [] }])],
      ['another resource type', parameters([{ name: 'valueSet', resource: { resourceType: 'Patient' } }])],
      ['compose an array', parameters([{ name: 'valueSet', resource: vs({ compose: [] }) }])],
      ['include a number', parameters([{ name: 'valueSet', resource: vs({ compose: { include: 7 } }) }])],
      ['include of numbers', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [1, 2] } }) }])],
      ['system a number', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: 5 }] } }) }])],
      // Not an array: ignored, these widened the value set to the whole code system (a code outside the filter "valid").
      ['filter an object', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: CS, filter: { property: 'concept', op: '=', value: 'finding' } }] } }) }])],
      ['concept an object', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: CS, concept: { code: 'finding' } }] } }) }])],
      ['valueSet a string', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: CS, valueSet: 'http://example.org/fhir/ValueSet/infections' }] } }) }])],
      ['exclude an object', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: CS, concept: [{ code: 'pneumonia' }] }], exclude: { system: CS } } }) }])],
      ['filter value a number', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: CS, filter: [{ property: 'concept', op: 'is-a', value: 1 }] }] } }) }])],
      ['filter value 1 MB', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: CS, filter: [{ property: 'display', op: 'regex', value: big }] }] } }) }])],
      ['concept codes of wrong types', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: CS, concept: [{ code: {} }] }] } }) }])],
      ['valueSet refs of wrong types', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ valueSet: [{}] }] } }) }])],
      ['a regex PostgreSQL refuses', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: CS, filter: [{ property: 'concept', op: 'regex', value: '(?<n>a)' }] }] } }) }])],
      ['1,000 includes', parameters([{ name: 'valueSet', resource: vs({ compose: { include: Array.from({ length: 1000 }, () => ({ system: CS })) } }) }])],
      ['an expansion nested 1,000 deep', parameters([{ name: 'valueSet', resource: vs({ expansion: nested(1000) }) }])],
      ['expansion.contains a string', parameters([{ name: 'valueSet', resource: vs({ expansion: { contains: 'x' } }) }])],
      ['count negative', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: CS }] } }) }, { name: 'count', valueInteger: -1 }])],
      ['offset a string', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: CS }] } }) }, { name: 'offset', valueString: 'many' }])],
      ['filter text 1 MB', parameters([{ name: 'valueSet', resource: vs({ compose: { include: [{ system: CS }] } }) }, { name: 'filter', valueString: big }])],
      ['parameter not an array', { resourceType: 'Parameters', parameter: { name: 'valueSet' } }],
    ];
    for (const [what, body] of bodies) {
      for (const op of ['ValueSet/$expand', 'ValueSet/$validate-code']) {
        // $validate-code is given a code to check, so that only the value set is at fault.
        const asked = op === 'ValueSet/$validate-code' && Array.isArray((body as any).parameter) ? { ...(body as any), parameter: [...(body as any).parameter, { name: 'code', valueCode: 'pneumonia' }, { name: 'system', valueUri: CS }] } : body;
        const res = await post(op, asked);
        // An expansion given as a string of contains is no code at all: an empty expansion is a fair answer.
        if (what === 'expansion.contains a string' && res.status === 200) continue;
        check4xx(res, `${op}: ${what}`);
      }
    }
    none();
  }, 120_000);

  it('$translate: reverse, url and codes of the wrong types or sizes', async () => {
    const bodies: Array<[string, unknown[]]> = [
      ['reverse a string', [{ name: 'code', valueCode: 'a' }, { name: 'system', valueUri: CS }, { name: 'reverse', valueString: 'maybe' }]],
      ['reverse twice', [{ name: 'code', valueCode: 'a' }, { name: 'system', valueUri: CS }, { name: 'reverse', valueBoolean: true }, { name: 'reverse', valueBoolean: false }]],
      ['code 1 MB', [{ name: 'code', valueCode: big }, { name: 'system', valueUri: CS }]],
      ['url 1 MB', [{ name: 'code', valueCode: 'a' }, { name: 'system', valueUri: CS }, { name: 'url', valueUri: big }]],
      ['coding a string', [{ name: 'coding', valueCoding: 'x' }]],
      ['codeableConcept of numbers', [{ name: 'codeableConcept', valueCodeableConcept: { coding: [1] } }]],
    ];
    for (const [what, parameter] of bodies) check4xx(await post('ConceptMap/$translate', parameters(parameter)), `$translate: ${what}`);
    for (const q of ['reverse=maybe', 'reverse=true&reverse=false', `code=a&system=${encodeURIComponent(CS)}&reverse=1`])
      check4xx(await get(`ConceptMap/$translate?${q}`), `GET $translate?${q}`);
    none();
  });

  it('searches of the loaded resources: _count, _offset, _elements, _summary extremes', async () => {
    for (const q of ['_count=-1', '_count=1e3', '_count=99999999999999999999', '_offset=-5', '_offset=1.5', '_count=1&_count=2', `_elements=${'a,'.repeat(50_000)}a`, '_elements=meta.tag', '_summary=maybe', `url=${'x'.repeat(5000)}`, `url=${',a'.repeat(200)}`, 'name:exact=x', 'unknown=1'])
      // A URL past Node's header limit is refused by the HTTP server itself (431, no body): a 4xx all the same.
      for (const type of ['CodeSystem', 'ValueSet', 'ConceptMap']) check4xx(await get(`${type}?${q}`), `${type}?${q}`, q.length < 8000);
    // The extremes that are allowed stay bounded.
    const far = await get('CodeSystem?_count=1000000&_offset=999999999');
    expect(far.status).toBe(200);
    expect(far.body.entry).toBeUndefined();
    check4xx(await get(`CodeSystem/${'x'.repeat(2000)}`), 'a 2000-character id');
    none();
  });

  it('metadata?mode=terminology with hostile modes', async () => {
    for (const q of ['mode=terminology&mode=full', 'mode=', 'mode=TERMINOLOGY', `mode=${'t'.repeat(100_000)}`])
      check4xx(await pont.json(`${BASE}/metadata?${q}`), `metadata?${q}`, q.length < 8000);
    none();
  });
});
