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
