import { readFileSync } from 'node:fs';
import { get as httpGet, type IncomingHttpHeaders } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { createLocalJWKSet, createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, revokeClient } from '../src/auth/clients';
import { rotateSigningKey } from '../src/auth/keys';
import { fhirScopeTable, type Scope } from '../src/core/scopes';
import { openApiDocument } from '../src/server';
import { createTestClient, startTestServer, type TestServer } from './harness';

let pont: TestServer;
beforeAll(async () => {
  pont = await startTestServer();
});
afterAll(async () => {
  await pont?.close();
});

const TOKEN = '/api/v1/connect/auth/token';
const INTROSPECT = '/api/v1/connect/auth/introspect';

const newClient = (scopes: Scope[] = ['patients:read', 'labs:read', 'health_id:verify'], org = 'org-a') =>
  createClient(pont.services.db, { name: 'EHR', organizationId: org, scopes });

const form = (fields: Record<string, string>) => ({
  method: 'POST',
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams(fields).toString(),
});
const basic = (id: string, secret: string) =>
  'Basic ' + Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64');

async function discover() {
  const { status, body } = await pont.json('/.well-known/oauth-authorization-server');
  expect(status).toBe(200);
  return body as { issuer: string; token_endpoint: string; introspection_endpoint: string; jwks_uri: string; scopes_supported: string[] };
}

describe('discovery', () => {
  it('publishes RFC 8414 metadata with absolute endpoints under the public URL', async () => {
    const meta = await discover();
    expect(meta.issuer).toBe(pont.config.publicUrl);
    expect(meta.token_endpoint).toBe(`${pont.config.publicUrl}${TOKEN}`);
    expect(meta.introspection_endpoint).toBe(`${pont.config.publicUrl}${INTROSPECT}`);
    expect(meta.jwks_uri).toBe(`${pont.config.publicUrl}/.well-known/jwks.json`);
    expect((meta as any).grant_types_supported).toEqual(['client_credentials']);
    for (const scope of ['health_id:verify', 'patients:read', 'webhooks:manage', 'bridge_agent:sync', 'emergency:access']) {
      expect(meta.scopes_supported).toContain(scope);
    }
  });

  it('publishes an RSA-2048 signing key in the JWKS', async () => {
    const { status, body } = await pont.json('/.well-known/jwks.json');
    expect(status).toBe(200);
    expect(body.keys.length).toBeGreaterThanOrEqual(1);
    const [key] = body.keys;
    expect(key).toEqual({ kty: 'RSA', use: 'sig', alg: 'RS256', kid: expect.any(String), n: expect.any(String), e: 'AQAB' });
    expect(Buffer.from(key.n, 'base64url').length * 8).toBe(2048);
    expect(JSON.stringify(body)).not.toMatch(/"d"|"p"|"q"/); // never a private part
  });
});

describe('documentation', () => {
  it('writes the FHIR scope of each resource type in the OpenAPI document and the integrators\' guide', async () => {
    const table = fhirScopeTable();
    expect(table).toContain('| Observation, DiagnosticReport, ImagingStudy, ServiceRequest, Specimen, QuestionnaireResponse, RiskAssessment | `labs:read` or `fhir:read` |');
    const { body } = await pont.json('/api/openapi.json');
    expect(body.components.securitySchemes.BearerAuth.description).toContain(table);
    expect(body.paths['/api/v1/connect/auth/token'].post.requestBody.content).toHaveProperty('application/x-www-form-urlencoded');
    expect(readFileSync(new URL('../docs/integrators.md', import.meta.url), 'utf8')).toContain(table);
  });

  it('is the document openApiDocument builds without a service, which the client libraries\' types are generated from', async () => {
    const { body } = await pont.json('/api/openapi.json');
    const built = openApiDocument(pont.config, pont.config.mappingsDir) as typeof body;
    expect(Object.keys(built.components.schemas).length).toBeGreaterThan(50);
    expect({ ...built, servers: body.servers }).toEqual(body);
    // The server is where this service listens (its port known only once it listened: PORT=0), not the start's guess.
    expect(body.servers).toEqual([{ url: pont.url }]);
  });

  it('the OpenAPI document and the CapabilityStatement, public and unlimited, are made once: the same bytes each time, gzip to a caller that takes it, the text to one that does not (never compressed per request), 304 for the ETag', async () => {
    /** One GET as it goes on the wire: nothing decoded, only the headers given. */
    const raw = (path: string, headers: Record<string, string>) =>
      new Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
        httpGet(`${pont.url}${path}`, { headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        }).on('error', reject);
      });
    for (const path of ['/api/openapi.json', '/api/fhir/R4/metadata']) {
      const zipped = await raw(path, { 'accept-encoding': 'gzip, deflate, br' });
      expect(zipped.status, path).toBe(200);
      expect(zipped.headers['content-encoding'], path).toBe('gzip');
      expect(zipped.headers.vary, path).toMatch(/accept-encoding/i);
      const again = await raw(path, { 'accept-encoding': 'gzip' });
      expect(again.body.equals(zipped.body), path).toBe(true);
      expect(again.headers.etag, path).toBe(zipped.headers.etag);
      for (const encoding of ['identity', 'br']) {
        const plain = await raw(path, { 'accept-encoding': encoding });
        expect(plain.headers['content-encoding'], `${path} ${encoding}`).toBeUndefined();
        expect(plain.body.toString('utf8'), `${path} ${encoding}`).toBe(gunzipSync(zipped.body).toString('utf8'));
      }
      const text = gunzipSync(zipped.body).toString('utf8');
      expect(JSON.parse(text)).toEqual((await pont.json(path)).body);
      for (const tag of [zipped.headers.etag!, `W/${zipped.headers.etag}`, `"other", ${zipped.headers.etag}`, '*'])
        expect((await raw(path, { 'if-none-match': tag })).status, `${path} ${tag}`).toBe(304);
      expect((await raw(path, { 'if-none-match': '"other"' })).status, path).toBe(200);
    }
  });

  it('the public documents are the same for every caller (an organisation\'s client, a token that is none, nobody), and a write to their paths changes nothing', async () => {
    const clinic = await createTestClient(pont, ['labs:read'], { organizationId: 'org-public-docs' });
    for (const path of ['/api/openapi.json', '/api/fhir/R4/metadata']) {
      const anonymous = await pont.fetch(path);
      const text = await anonymous.text();
      for (const headers of [clinic.headers, { authorization: 'Bearer not-a-token' }]) {
        const res = await pont.fetch(path, { headers });
        expect(res.status, path).toBe(200);
        expect(res.headers.get('etag'), path).toBe(anonymous.headers.get('etag'));
        expect(await res.text(), path).toBe(text);
      }
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        const res = await pont.fetch(path, { method, headers: { ...clinic.headers, 'content-type': 'application/json' }, body: method === 'DELETE' ? undefined : '{"openapi":"0"}' });
        expect(res.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
        expect(res.status, `${method} ${path}`).toBeLessThan(500);
      }
      const after = await pont.fetch(path);
      expect(after.headers.get('etag'), path).toBe(anonymous.headers.get('etag'));
      expect(await after.text(), path).toBe(text);
    }
  });
});

describe('token endpoint', () => {
  it('issues an RS256 JWT that verifies against the published JWKS', async () => {
    const client = await newClient();
    const meta = await discover();
    const res = await fetch(meta.token_endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = (await res.json()) as { access_token: string; scope: string };
    expect(body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 3600, scope: 'patients:read labs:read health_id:verify' });
    expect(body.access_token.split('.')).toHaveLength(3);

    const { payload, protectedHeader } = await jwtVerify(body.access_token, createRemoteJWKSet(new URL(meta.jwks_uri)), {
      issuer: meta.issuer,
      audience: meta.issuer,
      algorithms: ['RS256'],
    });
    expect(protectedHeader).toMatchObject({ alg: 'RS256', kid: expect.any(String) });
    expect(payload).toMatchObject({ iss: meta.issuer, sub: client.client_id, aud: meta.issuer, client_id: client.client_id, scope: body.scope });
    expect(payload.exp! - payload.iat!).toBe(3600);
    expect(payload.jti).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('accepts a form body with HTTP Basic credentials form-encoded as RFC 6749 §2.3.1 says', async () => {
    const client = await newClient();
    // `_` percent-encoded: the server must form-decode the Basic user before matching it.
    const encodedId = client.client_id.replace('_', '%5F');
    const res = await pont.json(TOKEN, {
      ...form({ grant_type: 'client_credentials' }),
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: 'Basic ' + Buffer.from(`${encodedId}:${client.client_secret}`).toString('base64') },
    });
    expect(res.status).toBe(200);
    expect(res.body.token_type).toBe('Bearer');
  });

  it('accepts form-encoded client_secret_post', async () => {
    const client = await newClient();
    const res = await pont.json(TOKEN, form({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }));
    expect(res.status).toBe(200);
  });

  it('narrows the grant to the requested scopes and refuses scopes the client lacks', async () => {
    const client = await newClient();
    const narrowed = await pont.json(TOKEN, {
      ...form({ grant_type: 'client_credentials', scope: 'labs:read' }),
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(client.client_id, client.client_secret) },
    });
    expect(narrowed.status).toBe(200);
    expect(narrowed.body.scope).toBe('labs:read');

    const refused = await pont.json(TOKEN, {
      method: 'POST',
      json: { grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret, scope: 'labs:read webhooks:manage' },
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({
      status: 'error',
      error_code: 'BAD_REQUEST',
      message: expect.stringContaining('webhooks:manage'),
      error: 'invalid_scope',
      error_description: expect.any(String),
    });
  });

  it('answers an unknown client and a wrong secret alike', async () => {
    const client = await newClient();
    const unknown = await pont.json(TOKEN, { method: 'POST', json: { grant_type: 'client_credentials', client_id: 'cli_nobody', client_secret: client.client_secret } });
    const wrong = await pont.json(TOKEN, { method: 'POST', json: { grant_type: 'client_credentials', client_id: client.client_id, client_secret: 'pcs_wrong' } });
    expect(unknown.status).toBe(401);
    expect(wrong.status).toBe(401);
    expect(unknown.body).toEqual(wrong.body);
    expect(wrong.body).toMatchObject({ status: 'error', error_code: 'UNAUTHENTICATED', error: 'invalid_client' });
    expect(wrong.headers.get('www-authenticate')).toMatch(/^Basic/);
  });

  it('refuses malformed requests with OAuth error codes in the Error shape', async () => {
    const client = await newClient();
    const cases: Array<[RequestInit & { json?: unknown }, number, string]> = [
      [{ method: 'POST', json: { client_id: client.client_id, client_secret: client.client_secret } }, 400, 'invalid_request'],
      [{ method: 'POST', json: { grant_type: 'password', client_id: client.client_id, client_secret: client.client_secret } }, 400, 'unsupported_grant_type'],
      [{ method: 'POST', json: { grant_type: 'client_credentials' } }, 401, 'invalid_client'],
      [{ method: 'POST', json: { grant_type: 'client_credentials', client_id: client.client_id } }, 401, 'invalid_client'],
      [{ method: 'POST', json: { grant_type: 'client_credentials', client_id: 7, client_secret: client.client_secret } }, 400, 'invalid_request'],
      [{ method: 'POST', json: ['client_credentials'] }, 400, 'invalid_request'],
      [{ method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"grant_type":' }, 400, 'invalid_request'],
      [{ method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'grant_type=client_credentials' }, 415, 'invalid_request'],
      [
        {
          ...form({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
          headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(client.client_id, client.client_secret) },
        },
        400,
        'invalid_request',
      ],
      [{ method: 'POST', json: { grant_type: 'client_credentials' }, headers: { authorization: 'Basic bm9jb2xvbg==' } }, 401, 'invalid_client'],
    ];
    for (const [init, status, error] of cases) {
      const res = await pont.json(TOKEN, init);
      expect({ status: res.status, error: res.body?.error }).toEqual({ status, error });
      expect(res.body).toMatchObject({ status: 'error', error_code: expect.any(String), message: expect.any(String), error_description: expect.any(String) });
    }
  });
});

describe('introspection', () => {
  it('describes an active token to an authenticated client (RFC 7662)', async () => {
    const caller = await newClient();
    const subject = await createTestClient(pont, ['labs:read']);
    const res = await pont.json(INTROSPECT, {
      ...form({ token: subject.access_token, token_type_hint: 'access_token' }),
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(caller.client_id, caller.client_secret) },
    });
    expect(res.status).toBe(200);
    const { payload } = await jwtVerify(subject.access_token, createLocalJWKSet((await pont.json('/.well-known/jwks.json')).body));
    expect(res.body).toEqual({
      active: true,
      token_type: 'Bearer',
      scope: 'labs:read',
      client_id: subject.client_id,
      sub: subject.client_id,
      aud: pont.config.publicUrl,
      iss: pont.config.publicUrl,
      exp: payload.exp,
      iat: payload.iat,
      jti: payload.jti,
    });
  });

  it('accepts the caller by client_secret_post, X-Client-ID/Secret or its own bearer token', async () => {
    const caller = await createTestClient(pont, ['labs:read']);
    const ways: RequestInit[] = [
      form({ token: caller.access_token, client_id: caller.client_id, client_secret: caller.client_secret }),
      { ...form({ token: caller.access_token }), headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-client-id': caller.client_id, 'x-client-secret': caller.client_secret } },
      { ...form({ token: caller.access_token }), headers: { 'content-type': 'application/x-www-form-urlencoded', ...caller.headers } },
    ];
    for (const init of ways) {
      const res = await pont.json(INTROSPECT, init);
      expect(res.status).toBe(200);
      expect(res.body.active).toBe(true);
    }
  });

  it('answers exactly {"active": false} for tokens that are not live tokens of ours', async () => {
    const caller = await newClient();
    const subject = await createTestClient(pont, ['labs:read']);
    const [h, p, s] = subject.access_token.split('.');
    const payload = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const tampered = `${h}.${Buffer.from(JSON.stringify({ ...payload, scope: 'labs:read emergency:access' })).toString('base64url')}.${s}`;
    for (const token of [tampered, `${h}.${p}.${s!.slice(0, -4)}AAAA`, 'not-a-jwt', `${h}.${p}.`, 'a.b.c']) {
      const res = await pont.json(INTROSPECT, {
        ...form({ token }),
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(caller.client_id, caller.client_secret) },
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ active: false });
    }
  });

  it('requires the caller to authenticate, and a token parameter', async () => {
    const subject = await createTestClient(pont, ['labs:read']);
    const anonymous = await pont.json(INTROSPECT, form({ token: subject.access_token }));
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toMatchObject({ status: 'error', error_code: 'UNAUTHENTICATED' });

    const wrongSecret = await pont.json(INTROSPECT, form({ token: subject.access_token, client_id: subject.client_id, client_secret: 'pcs_x' }));
    expect(wrongSecret.status).toBe(401);
    expect(wrongSecret.body.error).toBe('invalid_client');

    const noToken = await pont.json(INTROSPECT, { ...form({}), headers: { 'content-type': 'application/x-www-form-urlencoded', ...subject.headers } });
    expect(noToken.status).toBe(400);
    expect(noToken.body.error).toBe('invalid_request');
  });

  it('returns the SDK shape for the bearer token of the request', async () => {
    const client = await createTestClient(pont, ['labs:read', 'patients:read']);
    const res = await pont.json('/api/v1/sdk/token/introspect', { headers: client.headers });
    expect(res.status).toBe(200);
    const { exp } = JSON.parse(Buffer.from(client.access_token.split('.')[1]!, 'base64url').toString());
    expect(res.body).toEqual({ active: true, scopes: ['labs:read', 'patients:read'], client_id: client.client_id, expires_at: new Date(exp * 1000).toISOString() });

    const headerPair = await pont.json('/api/v1/sdk/token/introspect', { headers: { 'x-client-id': client.client_id, 'x-client-secret': client.client_secret } });
    expect(headerPair.status).toBe(401);
    expect(headerPair.body.error_code).toBe('UNAUTHENTICATED');
  });
});

describe('revocation', () => {
  it('stops a revoked client at once: its tokens, its secret and introspection', async () => {
    const caller = await newClient();
    const client = await createTestClient(pont, ['labs:read']);
    expect((await pont.json('/api/v1/sdk/token/introspect', { headers: client.headers })).status).toBe(200);

    await revokeClient(pont.services.db, client.client_id);

    const use = await pont.json('/api/v1/sdk/token/introspect', { headers: client.headers });
    expect(use.status).toBe(401);
    expect(use.body).toMatchObject({ status: 'error', error_code: 'UNAUTHENTICATED' });
    const introspected = await pont.json(INTROSPECT, {
      ...form({ token: client.access_token }),
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(caller.client_id, caller.client_secret) },
    });
    expect(introspected.body).toEqual({ active: false });
    const again = await pont.json(TOKEN, { method: 'POST', json: { grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret } });
    expect(again.status).toBe(401);
    expect(again.body.error).toBe('invalid_client');
    const headerPair = await pont.json('/api/v1/sdk/token/introspect', { headers: { 'x-client-id': client.client_id, 'x-client-secret': client.client_secret } });
    expect(headerPair.status).toBe(401);
  });
});

describe('key rotation', () => {
  it('keeps tokens signed before a rotation valid, and signs new ones with the new key', async () => {
    const before = await createTestClient(pont, ['labs:read']);
    const oldKid = decodeProtectedHeader(before.access_token).kid;

    const rotation = await rotateSigningKey(pont.services.db);
    expect(rotation.retired.map((r) => r.kid)).toEqual([oldKid]);

    const after = await createTestClient(pont, ['labs:read']);
    const newKid = decodeProtectedHeader(after.access_token).kid;
    expect(newKid).toBe(rotation.kid);
    expect(newKid).not.toBe(oldKid);

    const jwks = (await pont.json('/.well-known/jwks.json')).body;
    expect(jwks.keys.map((k: { kid: string }) => k.kid).sort()).toEqual([oldKid, newKid].sort());
    const keySet = createLocalJWKSet(jwks);
    for (const token of [before.access_token, after.access_token]) {
      await expect(jwtVerify(token, keySet, { issuer: pont.config.publicUrl, audience: pont.config.publicUrl })).resolves.toBeTruthy();
      expect((await pont.json('/api/v1/sdk/token/introspect', { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    }
  });
});
