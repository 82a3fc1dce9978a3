import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgent } from '../src/auth/agents';
import { SCOPES } from '../src/core/scopes';
import { checkJsonDepth, decodeUtf8, parseJsonText } from '../src/core/body-text';
import { ApiError } from '../src/http/errors';
import { MAX_BODY_DEPTH } from '../src/core/limits';
import { createTestClient, startTestServer, type TestServer } from './harness';
import { eventually } from './eventually';

/**
 * Hostile inputs of the security review (issue 20): bodies nested deeper than any stack, invalid UTF-8, a
 * Patient.identifier of the wrong type, forged cursors. Each is a 4xx in the documented shape, never a 500,
 * and nothing is written. Every answer under /api/ says Cache-Control: no-store.
 */
let pont: TestServer;
let bearer: Record<string, string>;
let healthId: string;

const FHIR = '/api/fhir/R4';
const HEALTH_ID_SYSTEM = 'https://pont.health/fhir/sid/health-id';
const unix = () => Math.floor(Date.now() / 1000);

beforeAll(async () => {
  pont = await startTestServer({ PONT_RATE_LIMITS: 'default=999999/60,fhir=999999/60,token=999999/60,introspect=999999/60' });
  const client = await createTestClient(pont, [...SCOPES], { organizationId: 'org-hostile-input', facilityId: 'fac-hostile-input', allPatients: true });
  bearer = client.headers;
  const resolved = await pont.json('/api/v1/connect/patients/resolve', {
    method: 'POST',
    headers: bearer,
    json: { first_name: 'Hostile', last_name: 'Input', date_of_birth: '1970-01-01' },
  });
  expect(resolved.status).toBeLessThan(300);
  healthId = resolved.body.health_id;
}, 120_000);
afterAll(async () => {
  await pont?.close();
});

async function agentHeaders(): Promise<Record<string, string>> {
  const agent = await createAgent(pont.services.db, { organizationId: 'org-hostile-input', facilityId: 'fac-hostile-input' });
  return { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(unix()) };
}

/** A refusal in the documented shape: an OperationOutcome on FHIR routes, the Error shape elsewhere. */
function expectRefusal(res: { status: number; body: any; headers: Headers }, path: string, status = 400) {
  expect(res.status, JSON.stringify(res.body)?.slice(0, 300)).toBe(status);
  if (path.startsWith(FHIR)) {
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(res.body.issue[0].severity).toBe('error');
  } else {
    expect(res.body.status).toBe('error');
    expect(typeof res.body.error_code).toBe('string');
  }
}

const count = async (sql: string, params: unknown[] = []) => Number((await pont.services.db.query<{ n: string }>(sql, params)).rows[0]!.n);
const written = async () => ({
  // The audit trail records refused requests too, in its own time: it is not what a refusal may not write.
  resources: await count(`SELECT count(*) AS n FROM fhir_resources WHERE resource_type <> 'AuditEvent'`),
  types: (await pont.services.db.query<{ t: string }>(`SELECT DISTINCT resource_type AS t FROM fhir_resources WHERE resource_type <> 'AuditEvent' ORDER BY 1`)).rows.map((r) => r.t),
  healthIds: await count('SELECT count(*) AS n FROM health_ids'),
});

describe('JSON nested deeper than the limit', () => {
  const N = 100_000;
  const DEEP_ARRAY = '['.repeat(N) + ']'.repeat(N);
  const DEEP_OBJECT = '{"a":'.repeat(N) + '"\\ud800"' + '}'.repeat(N);

  it('is found by one pass over the text, strings and escapes included', () => {
    expect(() => checkJsonDepth('['.repeat(MAX_BODY_DEPTH) + ']'.repeat(MAX_BODY_DEPTH))).not.toThrow();
    expect(() => checkJsonDepth('['.repeat(MAX_BODY_DEPTH + 1) + ']'.repeat(MAX_BODY_DEPTH + 1))).toThrow(/nested more than/);
    expect(() => checkJsonDepth(DEEP_OBJECT)).toThrow(/nested more than/);
    // Brackets inside strings are text, and an escaped quote does not end the string.
    expect(() => checkJsonDepth(JSON.stringify({ a: '['.repeat(N), b: '\\"{{{{', c: '"[[[' }))).not.toThrow();
    expect(() => checkJsonDepth(`["\\\\", ${'['.repeat(MAX_BODY_DEPTH)}${']'.repeat(MAX_BODY_DEPTH)}]`)).toThrow(/nested more than/);
    // Siblings do not add up: depth is nesting, not the number of containers.
    expect(() => checkJsonDepth(`[${Array.from({ length: 1000 }, () => '[[]]').join(',')}]`)).not.toThrow();
  });

  it('is a 400 on every kind of route, before anything is parsed or written', async () => {
    const agent = await agentHeaders();
    const routes: Array<{ path: string; headers: Record<string, string>; type?: string }> = [
      { path: '/api/v1/connect/auth/token', headers: {} },
      { path: '/api/v1/connect/auth/introspect', headers: bearer },
      { path: '/api/v1/connect/patients/resolve', headers: bearer },
      { path: '/api/v1/bridge/heartbeat', headers: agent },
      { path: '/api/v1/bridge/sync', headers: agent },
      { path: '/api/v1/connect/webhooks/subscriptions', headers: bearer },
      { path: `${FHIR}/Condition`, headers: bearer, type: 'application/fhir+json' },
      { path: FHIR, headers: bearer, type: 'application/fhir+json' },
      { path: `${FHIR}/Patient/deep`, headers: bearer, type: 'application/fhir+json' },
    ];
    const before = await written();
    for (const { path, headers, type } of routes)
      for (const body of [DEEP_ARRAY, DEEP_OBJECT]) {
        const res = await pont.json(path, { method: path.endsWith('/deep') ? 'PUT' : 'POST', headers: { ...headers, 'content-type': type ?? 'application/json' }, body });
        expectRefusal(res, path);
        const message = path.startsWith(FHIR) ? res.body.issue[0].diagnostics ?? res.body.issue[0].details?.text : res.body.message;
        expect(message, path).toMatch(/nested more than/);
        if (path.endsWith('/token')) expect(res.body.error).toBe('invalid_request');
      }
    expect(await written()).toEqual(before);
  });

  it('the body reader: lone surrogate escapes at any depth and invalid UTF-8 are 400s, pairs and valid text pass', () => {
    const status = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        return (err as ApiError).status;
      }
      return undefined;
    };
    expect(status(() => parseJsonText('{"a":"\\ud800"}'))).toBe(400);
    expect(status(() => parseJsonText('{"\\udc00":1}'))).toBe(400);
    expect(status(() => parseJsonText('['.repeat(MAX_BODY_DEPTH - 1) + '"\\udfff"' + ']'.repeat(MAX_BODY_DEPTH - 1)))).toBe(400);
    expect(parseJsonText('{"a":"\\ud83d\\ude00"}')).toEqual({ a: '😀' });
    // A wide array is not deep: checked without spreading it onto the stack.
    expect(status(() => parseJsonText(`[${'"\\ud800",'.repeat(200_000)}1]`))).toBe(400);
    expect(decodeUtf8(Buffer.from('{"a":"Ngoé 😀"}'))).toBe('{"a":"Ngoé 😀"}');
    expect(status(() => decodeUtf8(Buffer.from([0x22, 0xc3, 0x28, 0x22])))).toBe(400);
    expect(status(() => decodeUtf8(Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22])))).toBe(400); // an encoded surrogate
  });

  it('leaves real resources alone: a Questionnaire nested 20 items deep, in a transaction', async () => {
    let item: Record<string, unknown> = { linkId: 'leaf', text: 'Leaf', type: 'string' };
    for (let i = 0; i < 20; i++) item = { linkId: `g${i}`, text: `Group ${i}`, type: 'group', item: [item] };
    const questionnaire = { resourceType: 'Questionnaire', status: 'active', item: [item] };
    const bundle = { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: questionnaire, request: { method: 'POST', url: 'Questionnaire' } }] };
    const res = await pont.json(FHIR, { method: 'POST', headers: { ...bearer, 'content-type': 'application/fhir+json' }, body: JSON.stringify(bundle) });
    expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(200);
    expect(res.body.entry[0].response.status).toMatch(/^201/);
  });

  it('at the limit is parsed, and answered by validation (not the depth rule)', async () => {
    const atLimit = '['.repeat(MAX_BODY_DEPTH) + ']'.repeat(MAX_BODY_DEPTH);
    const res = await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: { ...bearer, 'content-type': 'application/json' }, body: atLimit });
    expect(res.status).toBe(422);
  });
});

describe('invalid UTF-8 in a body', () => {
  const bytes = (before: string, after: string) => Buffer.concat([Buffer.from(before), Buffer.from([0xc3, 0x28]), Buffer.from(after)]);

  it('is a 400 on FHIR, Connect and the token endpoint (JSON and form), and nothing is stored', async () => {
    const before = await written();
    const patient = await pont.json(`${FHIR}/Patient`, {
      method: 'POST',
      headers: { ...bearer, 'content-type': 'application/fhir+json' },
      body: bytes('{"resourceType":"Patient","name":[{"family":"Utf8', '"}]}'),
    });
    expectRefusal(patient, `${FHIR}/Patient`);
    expect(patient.body.issue[0].diagnostics ?? patient.body.issue[0].details?.text).toMatch(/UTF-8/);
    const resolve = await pont.json('/api/v1/connect/patients/resolve', {
      method: 'POST',
      headers: { ...bearer, 'content-type': 'application/json' },
      body: bytes('{"first_name":"Utf8', '","last_name":"Bad","date_of_birth":"1980-01-01"}'),
    });
    expectRefusal(resolve, '/api/v1/connect/patients/resolve');
    expect(resolve.body.message).toMatch(/UTF-8/);
    const form = await pont.json('/api/v1/connect/auth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: bytes('grant_type=client_credentials&client_id=x', '&client_secret=y'),
    });
    expectRefusal(form, '/api/v1/connect/auth/token');
    expect(form.body.error).toBe('invalid_request');
    // Percent-encoded invalid UTF-8 in a form is refused too (URLSearchParams would make it U+FFFD).
    const encoded = await pont.json('/api/v1/connect/auth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&client_id=x%C3%28&client_secret=y',
    });
    expectRefusal(encoded, '/api/v1/connect/auth/token');
    expect(encoded.body.error).toBe('invalid_request');
    expect(await written()).toEqual(before);
  });

  it('valid UTF-8 (accents, emoji) is stored as sent', async () => {
    const res = await pont.json(`${FHIR}/Patient`, {
      method: 'POST',
      headers: { ...bearer, 'content-type': 'application/fhir+json' },
      body: Buffer.from(JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Ngoé 😀' }] })),
    });
    expect(res.status).toBe(201);
    expect(res.body.name[0].family).toBe('Ngoé 😀');
  });
});

describe('a Patient.identifier of the wrong type', () => {
  const BAD_IDENTIFIERS: unknown[] = [
    { system: 'x', value: 'y' },
    { system: HEALTH_ID_SYSTEM, value: 'CM0000000000' },
    'CM0000000000',
    42,
    true,
    ['x'],
    [1, 2],
    [null],
    [[{ system: 'x', value: 'y' }]],
    [{ system: HEALTH_ID_SYSTEM, value: 42 }, null],
  ];
  const fhir = (method: string, path: string, body: unknown) =>
    pont.json(`${FHIR}${path}`, { method, headers: { ...bearer, 'content-type': 'application/fhir+json' }, body: JSON.stringify(body) });

  it('is a 400 OperationOutcome on create, update (new and existing patient) and in a transaction; nothing is written', async () => {
    const existing = await fhir('POST', '/Patient', { resourceType: 'Patient', name: [{ family: 'Existing' }] });
    expect(existing.status).toBe(201);
    const id = existing.body.id as string;
    const before = await written();
    for (const identifier of BAD_IDENTIFIERS) {
      const label = JSON.stringify(identifier);
      const patient = (extra: Record<string, unknown> = {}) => ({ resourceType: 'Patient', ...extra, name: [{ family: 'Wrong' }], identifier });
      for (const res of [
        await fhir('POST', '/Patient', patient()),
        await fhir('PUT', `/Patient/${id}`, patient({ id })),
        await fhir('PUT', '/Patient/new-wrong-identifier', patient({ id: 'new-wrong-identifier' })),
        await fhir('POST', '', { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: patient(), request: { method: 'POST', url: 'Patient' } }] }),
      ]) {
        expect(res.status, `${label}: ${JSON.stringify(res.body).slice(0, 300)}`).toBe(400);
        expect(res.body.resourceType, label).toBe('OperationOutcome');
      }
      const batch = await fhir('POST', '', { resourceType: 'Bundle', type: 'batch', entry: [{ resource: patient(), request: { method: 'POST', url: 'Patient' } }] });
      expect(batch.status, label).toBe(200);
      expect(batch.body.entry[0].response.status, label).toMatch(/^400/);
    }
    expect(await written()).toEqual(before);
    // The existing patient keeps its Health ID.
    const read = await fhir('GET', `/Patient/${id}`, undefined);
    expect(read.body.identifier.filter((i: { system: string }) => i.system === HEALTH_ID_SYSTEM)).toHaveLength(1);
  });

  it('is a failed resource of a Bridge batch, not a failed batch', async () => {
    const headers = await agentHeaders();
    const before = await written();
    const res = await pont.json('/api/v1/bridge/sync', {
      method: 'POST',
      headers,
      json: { batch_id: 'wrong-identifier-1', resources: BAD_IDENTIFIERS.map((identifier, i) => ({ resourceType: 'Patient', id: `bad-${i}`, identifier })) },
    });
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(200);
    expect(res.body.counts.failed).toBe(BAD_IDENTIFIERS.length);
    expect(res.body.counts.created).toBe(0);
    // The batch's own record may be stored; no resource and no Health ID is.
    const after = await written();
    expect(after.healthIds).toBe(before.healthIds);
    expect(await count(`SELECT count(*) AS n FROM fhir_resources WHERE resource_type = 'Patient' AND id LIKE 'bad-%'`)).toBe(0);
  });
});

describe('forged cursors', () => {
  const cursor = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

  it('a FHIR _cursor beyond bigint, or an offset beyond a safe integer, is a 400 on search and $everything', async () => {
    const found = await pont.json(`${FHIR}/Patient?identifier=${HEALTH_ID_SYSTEM}|${healthId}`, { headers: bearer });
    const patientId = found.body.entry[0].resource.id as string;
    for (const forged of [
      { afterRid: '99999999999999999999' },
      { afterRid: '9999999999999999999' },
      { afterRid: '9223372036854775808' },
      { offset: 1e21 },
      { offset: 2 ** 53 },
      { offset: 0, total: 1e300 },
      { afterRid: 1 },
      { afterRid: '-1' },
    ])
      for (const path of [`${FHIR}/Patient?_cursor=${cursor(forged)}`, `${FHIR}/Patient/${patientId}/$everything?_cursor=${cursor(forged)}`]) {
        const res = await pont.json(path, { headers: bearer });
        expectRefusal(res, path);
      }
    // The largest bigint is a cursor (past every resource): an empty page.
    const last = await pont.json(`${FHIR}/Patient?_cursor=${cursor({ afterRid: '9223372036854775807' })}`, { headers: bearer });
    expect(last.status).toBe(200);
    expect(last.body.entry ?? []).toEqual([]);
  });

  it('a records cursor with huge, negative, fractional or mistyped offsets is a 422', async () => {
    for (const offsets of [[1e21], [2 ** 53], [Number.MAX_VALUE], [-1], [1.5], ['1'], [null], [], [0, 0], 'x']) {
      const path = `/api/v1/connect/patient/${healthId}/records?type=diagnoses&cursor=${cursor({ type: 'diagnoses', offsets })}`;
      const res = await pont.json(path, { headers: bearer });
      expectRefusal(res, path, 422);
    }
    for (const forged of ['', 'x', cursor(null), cursor([1]), cursor({ type: 'allergies', offsets: [0] })]) {
      const path = `/api/v1/connect/patient/${healthId}/records?type=diagnoses&cursor=${forged}`;
      const res = await pont.json(path, { headers: bearer });
      expect(res.status, forged).toBeGreaterThanOrEqual(400);
      expect(res.status, forged).toBeLessThan(500);
    }
  });
});

describe('a request the HTTP parser refuses', () => {
  /** What the server answers to these bytes, sent over one connection it then closes. */
  const raw = (bytes: string) =>
    new Promise<{ status: number; type: string | undefined; body: any }>((resolve, reject) => {
      const socket = connect(Number(new URL(pont.url).port), '127.0.0.1', () => socket.end(bytes));
      const chunks: Buffer[] = [];
      socket.on('data', (c) => chunks.push(c)).on('error', reject);
      socket.on('close', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const [head, body] = [text.slice(0, text.indexOf('\r\n\r\n')), text.slice(text.indexOf('\r\n\r\n') + 4)];
        resolve({ status: Number(head.split(' ')[1]), type: /content-type: ([^;\r]+)/i.exec(head)?.[1], body: body ? JSON.parse(body) : undefined });
      });
    });
  const long = 'x'.repeat(20_000);

  it('is answered in the documented shape, never a bare status line: an OperationOutcome on FHIR routes', async () => {
    const search = await raw(`GET /api/fhir/R4/Observation?code=${long} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(search).toMatchObject({ status: 431, type: 'application/fhir+json', body: { resourceType: 'OperationOutcome', issue: [{ code: 'too-long' }] } });
    expect(search.body.issue[0].diagnostics).toMatch(/POST \[type\]\/_search/);
    expect(await raw(`GET /api/v1/connect/records?health_id=${long} HTTP/1.1\r\nHost: x\r\n\r\n`)).toMatchObject({ status: 431, type: 'application/json', body: { status: 'error', error_code: 'BAD_REQUEST' } });
    expect(await raw(`GET /api/fhir/R4/Patient HTTP/1.1\r\nHost: x\r\nX-Long: ${long}\r\n\r\n`)).toMatchObject({ status: 431, body: { resourceType: 'OperationOutcome' } });
    expect(await raw('GET /api/fhir/R4/Patient HTTP/1.1\r\nBad Header\r\n\r\n')).toMatchObject({ status: 400, type: 'application/fhir+json', body: { resourceType: 'OperationOutcome', issue: [{ code: 'invalid' }] } });
    expect(await raw('NONSENSE\r\n\r\n')).toMatchObject({ status: 400, body: { status: 'error', error_code: 'BAD_REQUEST' } });
    // The request refused is the last one begun (found by an outside review: a pipelined one took the first's shape),
    // its target in absolute form too.
    expect(await raw(`GET /api/v1/nothing HTTP/1.1\r\nHost: x\r\n\r\nGET /api/fhir/R4/Patient?name=${long} HTTP/1.1\r\nHost: x\r\n\r\n`)).toMatchObject({ body: { resourceType: 'OperationOutcome' } });
    expect(await raw(`GET http://x/api/fhir/R4/Patient?name=${long} HTTP/1.1\r\nHost: x\r\n\r\n`)).toMatchObject({ status: 431, body: { resourceType: 'OperationOutcome' } });
  });

  it('closes the connection once it has answered, even when the client keeps its side open', async () => {
    const count = () => new Promise<number>((resolve, reject) => pont.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
    const before = await count();
    const socket = connect({ port: Number(new URL(pont.url).port), host: '127.0.0.1', allowHalfOpen: true });
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('GET /api/fhir/R4/Patient HTTP/1.1\r\nBad Header\r\n\r\n');
    await new Promise((resolve) => socket.once('end', resolve).resume());
    await eventually(async () => expect(await count()).toBe(before));
    socket.destroy();
  });
});

describe('Cache-Control', () => {
  it('is no-store on every answer under /api/ that carries data, errors included', async () => {
    const created = await pont.json(`${FHIR}/Patient`, { method: 'POST', headers: bearer, json: { resourceType: 'Patient', name: [{ family: 'Cache' }] } });
    const answers = [
      created,
      await pont.json(`${FHIR}/Patient/${created.body.id}`, { headers: bearer }),
      await pont.json(`${FHIR}/Patient?family=Cache`, { headers: bearer }),
      await pont.json(`/api/v1/connect/patients/verify/${healthId}`, { headers: bearer }),
      await pont.json(`/api/v1/connect/patient/${healthId}/records`, { headers: bearer }),
      await pont.json(`${FHIR}/Patient/does-not-exist`, { headers: bearer }),
      await pont.json(`/api/v1/connect/patients/verify/${healthId}`),
      await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: bearer, json: {} }),
      await pont.json('/api/v1/no-such-route', { headers: bearer }),
    ];
    for (const res of answers) expect(res.headers.get('cache-control'), `${res.status} ${JSON.stringify(res.body).slice(0, 100)}`).toBe('no-store');
    expect(answers.map((a) => a.status)).toEqual([201, 200, 200, 200, 200, 404, 401, 422, 404]);
  });

  it('public documents keep their own caching', async () => {
    const metadata = await pont.fetch(`${FHIR}/metadata`);
    expect(metadata.headers.get('cache-control')).toBe('public, max-age=3600');
  });
});
