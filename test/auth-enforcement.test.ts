/**
 * Every protected route refuses forged, malformed and insufficient credentials, in the documented
 * error shapes: the Error shape on Connect/SDK routes, an OperationOutcome on FHIR routes.
 */
import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { decodeProtectedHeader, SignJWT, type JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../src/auth/clients';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

let pont: TestServer;
let client: TestClient;
let ourKey: KeyObject;
let ourKid: string;

beforeAll(async () => {
  pont = await startTestServer();
  client = await createTestClient(pont, ['patients:read']);
  ourKid = decodeProtectedHeader(client.access_token).kid!;
  // The service's own private key: forgeries below that use it differ from real tokens only in their claims.
  const { rows } = await pont.services.db.query<{ private_pem: string }>('SELECT private_pem FROM signing_keys WHERE kid = $1', [ourKid]);
  ourKey = createPrivateKey(rows[0]!.private_pem);
});
afterAll(async () => {
  await pont?.close();
});

const SDK_ROUTE = '/api/v1/sdk/token/introspect';
/** A Connect route that needs a scope (webhooks:manage) none of the test clients below holds. */
const SCOPED_CONNECT_ROUTE = '/api/v1/connect/webhooks/subscriptions';
const FHIR_ROUTE = '/api/fhir/R4/Patient?_count=1';
const now = () => Math.floor(Date.now() / 1000);

function validClaims(): JWTPayload {
  const iat = now();
  return {
    iss: pont.config.publicUrl,
    aud: pont.config.publicUrl,
    sub: client.client_id,
    client_id: client.client_id,
    scope: 'patients:read',
    iat,
    exp: iat + 3600,
    jti: crypto.randomUUID(),
  };
}

function sign(claims: JWTPayload, header: Record<string, unknown> = {}, key: KeyObject | Uint8Array = ourKey): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: ourKid, typ: 'at+jwt', ...header } as never).sign(key);
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

async function expectRefused(headers: Record<string, string>, status = 401) {
  const connect = await pont.json(status === 403 ? SCOPED_CONNECT_ROUTE : SDK_ROUTE, { headers });
  expect(connect.status).toBe(status);
  expect(connect.body).toEqual({ status: 'error', error_code: status === 401 ? 'UNAUTHENTICATED' : 'FORBIDDEN', message: expect.any(String), ...(status === 403 ? { required_scopes: expect.any(Array) } : {}) });

  const fhir = await pont.json(FHIR_ROUTE, { headers });
  expect(fhir.status).toBe(status);
  expect(fhir.headers.get('content-type')).toMatch(/^application\/fhir\+json/);
  expect(fhir.body).toMatchObject({
    resourceType: 'OperationOutcome',
    issue: [{ severity: 'error', code: status === 401 ? 'login' : 'forbidden', details: { coding: [{ code: status === 401 ? 'UNAUTHENTICATED' : 'FORBIDDEN' }] } }],
  });
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('genuine credentials', () => {
  it('lets a real token and the X-Client-ID/Secret pair through', async () => {
    expect((await pont.json(SDK_ROUTE, { headers: client.headers })).status).toBe(200);
    expect((await pont.json(FHIR_ROUTE, { headers: client.headers })).status).toBe(200);
    const pair = { 'x-client-id': client.client_id, 'x-client-secret': client.client_secret };
    expect((await pont.json(FHIR_ROUTE, { headers: pair })).status).toBe(200);
    // A token re-signed with the service's key and unchanged claims is accepted: the forgeries below fail for their difference alone.
    expect((await pont.json(FHIR_ROUTE, { headers: bearer(await sign(validClaims())) })).status).toBe(200);
  });

  it('keeps public routes public', async () => {
    for (const path of ['/.well-known/jwks.json', '/.well-known/oauth-authorization-server', '/healthz', '/readyz', '/api/fhir/R4/metadata']) {
      expect((await pont.fetch(path)).status, path).toBe(200);
    }
  });
});

describe('forged tokens', () => {
  const forgeries: Array<[string, () => Promise<string>]> = [
    ['alg none', async () => `${b64({ alg: 'none', typ: 'at+jwt', kid: ourKid })}.${b64(validClaims())}.`],
    [
      'HS256 keyed with the public key',
      async () => {
        const jwks = (await pont.json('/.well-known/jwks.json')).body;
        const publicPem = (await import('node:crypto')).createPublicKey({ key: jwks.keys[0], format: 'jwk' }).export({ type: 'spki', format: 'pem' });
        return sign(validClaims(), { alg: 'HS256' }, new TextEncoder().encode(String(publicPem)));
      },
    ],
    ['PS256 with our key', () => sign(validClaims(), { alg: 'PS256' })],
    ['a kid we never published', () => sign(validClaims(), { kid: 'A'.repeat(43) })],
    ['no kid', () => sign(validClaims(), { kid: undefined })],
    [
      'our kid on a foreign key',
      () => sign(validClaims(), {}, generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey),
    ],
    [
      'a foreign key embedded in the header (jwk)',
      () => {
        const foreign = generateKeyPairSync('rsa', { modulusLength: 2048 });
        return sign(validClaims(), { jwk: foreign.publicKey.export({ format: 'jwk' }) }, foreign.privateKey);
      },
    ],
    ['wrong issuer', () => sign({ ...validClaims(), iss: 'https://evil.example' })],
    ['wrong audience', () => sign({ ...validClaims(), aud: 'https://other-api.example' })],
    ['expired', () => sign({ ...validClaims(), iat: now() - 7200, exp: now() - 3600 })],
    ['not yet valid (nbf)', () => sign({ ...validClaims(), nbf: now() + 600 })],
    ['issued in the future', () => sign({ ...validClaims(), iat: now() + 600, exp: now() + 4200 })],
    ['a lifetime longer than ours', () => sign({ ...validClaims(), exp: now() + 86_400 })],
    ['not an access token (typ JWT)', () => sign(validClaims(), { typ: 'JWT' })],
    ['subject other than the client', () => sign({ ...validClaims(), sub: 'cli_someone_else' })],
    ['a client that does not exist', () => sign({ ...validClaims(), sub: 'cli_ghost', client_id: 'cli_ghost' })],
    ['missing jti', () => sign({ ...validClaims(), jti: undefined })],
    [
      'payload changed after signing',
      async () => {
        const [h, p, s] = client.access_token.split('.');
        const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
        return `${h}.${b64({ ...claims, scope: 'patients:read fhir:read emergency:access' })}.${s}`;
      },
    ],
    ['signature cut short', async () => client.access_token.slice(0, -10)],
    ['two segments', async () => client.access_token.split('.').slice(0, 2).join('.')],
    ['garbage', async () => 'eyJhbGciOiJSUzI1NiJ9.garbage.garbage'],
    ['huge', async () => 'a'.repeat(9000) + '.b.c'],
  ];

  for (const [name, make] of forgeries) {
    it(`refuses ${name}`, async () => {
      await expectRefused(bearer(await make()));
    });
  }
});

describe('malformed credentials', () => {
  const cases: Array<[string, () => Record<string, string>]> = [
    ['no credentials', () => ({})],
    ['an empty bearer', () => ({ authorization: 'Bearer ' })],
    ['a Basic header', () => ({ authorization: 'Basic ' + Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64') })],
    ['the token without a scheme', () => ({ authorization: client.access_token })],
    ['X-Client-ID alone', () => ({ 'x-client-id': client.client_id })],
    ['X-Client-Secret alone', () => ({ 'x-client-secret': client.client_secret })],
    ['a wrong X-Client-Secret', () => ({ 'x-client-id': client.client_id, 'x-client-secret': 'pcs_wrong' })],
    ['an unknown X-Client-ID', () => ({ 'x-client-id': 'cli_nobody', 'x-client-secret': client.client_secret })],
  ];
  for (const [name, headers] of cases) {
    it(`refuses ${name}`, async () => {
      await expectRefused(headers());
    });
  }

  it('does not read tokens from the query string', async () => {
    const res = await pont.json(`/api/fhir/R4/Patient?access_token=${client.access_token}`);
    expect(res.status).toBe(401);
  });

  it('answers 401 with an RFC 6750 challenge', async () => {
    const none = await pont.fetch(SDK_ROUTE);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="pont"');
    const bad = await pont.fetch(SDK_ROUTE, { headers: bearer('x.y.z') });
    expect(bad.headers.get('www-authenticate')).toBe('Bearer realm="pont", error="invalid_token"');
  });
});

describe('scopes', () => {
  it('answers 403 when the token lacks the scope of the route', async () => {
    const labs = await createTestClient(pont, ['labs:read']);
    await expectRefused(labs.headers, 403);
    const res = await pont.fetch(FHIR_ROUTE, { headers: labs.headers });
    expect(res.headers.get('www-authenticate')).toMatch(/error="insufficient_scope", scope="patients:read fhir:read"/);
  });

  it('chooses the FHIR read scope by resource type', async () => {
    const labs = await createTestClient(pont, ['labs:read']);
    const records = await createTestClient(pont, ['fhir:read']);
    const auditor = await createTestClient(pont, ['audit:read']);
    const expectations: Array<[TestClient, string, number]> = [
      [labs, 'Observation', 200],
      [labs, 'DiagnosticReport', 200],
      [labs, 'Condition', 403],
      [labs, 'MedicationRequest', 403],
      [client, 'Condition', 200], // patients:read
      [client, 'Observation', 403],
      [records, 'Condition', 200],
      [records, 'Practitioner', 200],
      [records, 'AuditEvent', 403], // the audit trail is for operators only
      [auditor, 'AuditEvent', 200],
      [auditor, 'Patient', 403],
    ];
    for (const [who, type, status] of expectations) {
      const search = await pont.fetch(`/api/fhir/R4/${type}`, { headers: who.headers });
      expect(`${type} search: ${search.status}`).toBe(`${type} search: ${status}`);
      const read = await pont.fetch(`/api/fhir/R4/${type}/does-not-exist`, { headers: who.headers });
      expect(`${type} read: ${read.status}`).toBe(`${type} read: ${status === 200 ? 404 : 403}`);
    }
  });

  it('honours a narrowed grant even though the client holds more', async () => {
    const wide = await createClient(pont.services.db, { name: 'wide', organizationId: 'org-a', scopes: ['patients:read', 'labs:read'] });
    const { body } = await pont.json('/api/v1/connect/auth/token', {
      method: 'POST',
      json: { grant_type: 'client_credentials', client_id: wide.client_id, client_secret: wide.client_secret, scope: 'labs:read' },
    });
    const headers = bearer(body.access_token);
    expect((await pont.fetch('/api/fhir/R4/Observation', { headers })).status).toBe(200);
    expect((await pont.fetch('/api/fhir/R4/Condition', { headers })).status).toBe(403);
  });

  it('needs fhir:write for FHIR writes', async () => {
    const patient = { resourceType: 'Patient', name: [{ family: 'Ngono' }] };
    const init = (headers: Record<string, string>) => ({ method: 'POST', headers: { ...headers, 'content-type': 'application/fhir+json' }, body: JSON.stringify(patient) });
    expect((await pont.fetch('/api/fhir/R4/Patient', init(client.headers))).status).toBe(403);
    const writer = await createTestClient(pont, ['fhir:write']);
    expect((await pont.fetch('/api/fhir/R4/Patient', init(writer.headers))).status).toBe(201);
  });
});

describe('malformed credentials found by the hostile harness', () => {
  it('a genuine token with == appended is refused (its signature would decode the same)', async () => {
    const padded = await pont.json(SDK_ROUTE, { headers: { authorization: `Bearer ${client.access_token}==` } });
    expect(padded.status).toBe(401);
    expect((await pont.json(SDK_ROUTE, { headers: client.headers })).status).toBe(200);
  });

  it('the token endpoint answers a malformed query in RFC 6749 shape', async () => {
    const res = await pont.json('/api/v1/connect/auth/token?x=%zz', { method: 'POST', json: { grant_type: 'client_credentials' } });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(res.body.error_description).toMatch(/percent-encoding/);
  });
});
