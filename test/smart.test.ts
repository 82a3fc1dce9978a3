/**
 * SMART Backend Services (SMART App Launch 2.x, client-confidential-asymmetric), tried as a backend service
 * written from the specification would: discover the token endpoint, sign an assertion with jose, get a token,
 * read FHIR. Then every way an assertion can be wrong, and the system scopes' limits.
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { purgeUsedAssertions } from '../src/auth/assertions';
import { createKeyClient, keyClientInput, revokeClient } from '../src/auth/clients';
import type { Scope } from '../src/core/scopes';
import { smartScopeTable } from '../src/auth/smart-scopes';
import { createApp } from '../src/app';
import { loadConfig } from '../src/config';
import { startPont, type RunningPont } from '../src/server';
import { createServices } from '../src/services';
import { createLogger } from '../src/log';
import { backend, createTestClient, startTestServer, type TestServer, pontCommand } from './harness';

const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
const ORG = 'org-smart';
const FHIR = '/api/fhir/R4';

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;
interface Signer {
  kid: string;
  alg: 'RS384' | 'ES384' | 'RS256';
  keys: KeyPair;
}

let pont: TestServer;
let tokenEndpoint: string;
let rsa: Signer;
let ec: Signer;
let patientId: string;
let observationId: string;

async function signer(alg: Signer['alg'], kid: string): Promise<Signer> {
  return { alg, kid, keys: await generateKeyPair(alg, { extractable: true }) };
}
async function publicJwk(s: Signer, withAlg = true): Promise<JWK> {
  return { ...(await exportJWK(s.keys.publicKey)), kid: s.kid, ...(withAlg ? { alg: s.alg } : {}) };
}

/** What `pont clients create --jwks|--jwks-uri` does. */
async function keyClient(keys: { jwks?: unknown; jwksUri?: string }, scopes: Scope[], org = ORG) {
  const input = await keyClientInput(true).parseAsync({ name: 'backend service', organizationId: org, scopes, ...keys });
  return createKeyClient(pont.services.db, input);
}

interface Claims {
  iss?: string;
  sub?: string;
  aud?: string;
  exp?: number;
  jti?: string;
}
/** A client assertion as SMART says: iss = sub = client id, aud = the token endpoint, exp within 5 minutes, a new jti. */
async function assertion(s: Signer, clientId: string, claims: Claims = {}, header: Record<string, unknown> = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ jti: claims.jti ?? randomUUID() })
    .setProtectedHeader({ alg: s.alg, kid: s.kid, typ: 'JWT', ...header })
    .setIssuer(claims.iss ?? clientId)
    .setSubject(claims.sub ?? clientId)
    .setAudience(claims.aud ?? tokenEndpoint)
    .setExpirationTime(claims.exp ?? now + 240);
  return jwt.sign(s.keys.privateKey);
}

/** The token request of SMART Backend Services: form-encoded, to the discovered endpoint (or another server's). */
async function requestToken(clientAssertion: string, scope: string, extra: Record<string, string> = {}, base = tokenEndpoint) {
  const res = await fetch(base, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope, client_assertion_type: ASSERTION_TYPE, client_assertion: clientAssertion, ...extra }),
  });
  return { status: res.status, body: (await res.json()) as any, headers: res.headers };
}

async function token(s: Signer, clientId: string, scope: string): Promise<Record<string, string>> {
  const { status, body } = await requestToken(await assertion(s, clientId), scope);
  expect(status, JSON.stringify(body)).toBe(200);
  return { authorization: `Bearer ${body.access_token}` };
}

async function expectInvalidClient(res: { status: number; body: any }, description: RegExp) {
  expect(res.status, JSON.stringify(res.body)).toBe(401);
  expect(res.body.error).toBe('invalid_client');
  expect(res.body.error_description).toMatch(description);
}

/** A JWK Set served over HTTP on loopback (allowed in development), counting its fetches. */
function jwksServer(): Promise<{ url: string; set: { keys: JWK[] }; hits: number; reply?: (res: import('node:http').ServerResponse) => void; server: Server }> {
  const state: any = { set: { keys: [] }, hits: 0 };
  state.server = createServer((_req, res) => {
    state.hits++;
    if (state.reply) return state.reply(res);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(state.set));
  });
  return new Promise((resolve) =>
    state.server.listen(0, '127.0.0.1', () => {
      state.url = `http://127.0.0.1:${(state.server.address() as AddressInfo).port}/jwks.json`;
      resolve(state);
    }),
  );
}

beforeAll(async () => {
  pont = await startTestServer();
  [rsa, ec] = await Promise.all([signer('RS384', 'rsa-1'), signer('ES384', 'ec-1')]);
  // The organisation's own data: the SMART clients below act for the same organisation.
  const writer = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: ORG });
  const patient = await pont.json(`${FHIR}/Patient`, { method: 'POST', headers: writer.headers, json: { resourceType: 'Patient', name: [{ family: 'Smart' }] } });
  expect(patient.status).toBe(201);
  patientId = patient.body.id;
  const observation = await pont.json(`${FHIR}/Observation`, {
    method: 'POST',
    headers: writer.headers,
    json: { resourceType: 'Observation', status: 'final', code: { text: 'heart rate' }, subject: { reference: `Patient/${patientId}` } },
  });
  expect(observation.status).toBe(201);
  observationId = observation.body.id;
  const { body } = await pont.json('/api/fhir/R4/.well-known/smart-configuration');
  tokenEndpoint = body.token_endpoint;
});
afterAll(async () => {
  await pont?.close();
});

describe('discovery', () => {
  it('publishes the SMART configuration at the root and under the FHIR base', async () => {
    for (const path of ['/.well-known/smart-configuration', `${FHIR}/.well-known/smart-configuration`]) {
      const { status, body } = await pont.json(path);
      expect(status).toBe(200);
      expect(body).toMatchObject({
        token_endpoint: `${pont.config.publicUrl}/api/v1/connect/auth/token`,
        token_endpoint_auth_methods_supported: ['private_key_jwt'],
        token_endpoint_auth_signing_alg_values_supported: ['RS384', 'ES384'],
        grant_types_supported: ['client_credentials'],
        capabilities: expect.arrayContaining(['client-confidential-asymmetric', 'permission-v2', 'permission-v1']),
      });
      expect(body.scopes_supported).toEqual(expect.arrayContaining(['system/*.rs', 'system/*.read']));
    }
  });

  it('declares the SMART security service and the OAuth URIs in the CapabilityStatement', async () => {
    const { body } = await pont.json(`${FHIR}/metadata`);
    const security = body.rest[0].security;
    expect(security.service[0].coding[0]).toMatchObject({ system: 'http://terminology.hl7.org/CodeSystem/restful-security-service', code: 'SMART-on-FHIR' });
    const uris = security.extension.find((e: any) => e.url === 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris');
    expect(uris.extension).toContainEqual({ url: 'token', valueUri: tokenEndpoint });
  });

  it('documents the assertion fields of the token endpoint and the SMART routes in the OpenAPI document', async () => {
    const { body } = await pont.json('/api/openapi.json');
    const token = body.paths['/api/v1/connect/auth/token'].post;
    const form = token.requestBody.content['application/x-www-form-urlencoded'].schema;
    const schema = form.$ref ? body.components.schemas[form.$ref.split('/').pop()] : form;
    expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(['client_assertion_type', 'client_assertion', 'scope']));
    expect(token.description).toContain('system/*.rs');
    expect(body.paths['/.well-known/smart-configuration'].get).toBeDefined();
    expect(body.paths[`${FHIR}/.well-known/smart-configuration`].get).toBeDefined();
  });
});

describe('a backend service with its own keys', () => {
  it('RS384, inline JWK Set: gets a token for system/*.rs and reads FHIR', async () => {
    const client = await keyClient({ jwks: { keys: [await publicJwk(rsa)] } }, ['fhir:read']);
    expect(client).toMatchObject({ token_endpoint_auth_method: 'private_key_jwt', jwks_uri: null });
    expect(client).not.toHaveProperty('client_secret');
    const res = await requestToken(await assertion(rsa, client.client_id), 'system/*.rs');
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ token_type: 'Bearer', scope: 'system/*.rs', expires_in: 3600 });
    expect(res.headers.get('cache-control')).toBe('no-store');
    const headers = { authorization: `Bearer ${res.body.access_token}` };
    expect((await pont.json(`${FHIR}/Patient/${patientId}`, { headers })).status).toBe(200);
    const search = await pont.json(`${FHIR}/Observation?subject=Patient/${patientId}`, { headers });
    expect(search.body.entry.map((e: any) => e.resource.id)).toEqual([observationId]);
    // Writes need a write scope.
    expect((await pont.json(`${FHIR}/Patient`, { method: 'POST', headers, json: { resourceType: 'Patient' } })).status).toBe(403);
    // Introspection tells the scope as granted.
    const introspection = await pont.json('/api/v1/connect/auth/introspect', { method: 'POST', headers, json: { token: res.body.access_token } });
    expect(introspection.body).toMatchObject({ active: true, scope: 'system/*.rs', client_id: client.client_id });
  });

  it('ES384, jwks_uri: fetched once, cached; a new kid is fetched again once the copy is older than the cooldown', async () => {
    const jwks = await jwksServer();
    try {
      jwks.set.keys = [await publicJwk(ec)];
      const client = await keyClient({ jwksUri: jwks.url }, ['labs:read']);
      const headers = await token(ec, client.client_id, 'system/Observation.rs');
      expect((await pont.json(`${FHIR}/Observation/${observationId}`, { headers })).status).toBe(200);
      await token(ec, client.client_id, 'system/Observation.read');
      expect(jwks.hits).toBe(1);

      // The client rotates: a new key at its jwks_uri. Within the cooldown the cached set answers (no new fetch).
      const next = await signer('ES384', 'ec-2');
      jwks.set.keys.push(await publicJwk(next));
      await expectInvalidClient(await requestToken(await assertion(next, client.client_id), 'system/Observation.rs'), /no applicable key|does not verify/i);
      expect(jwks.hits).toBe(1);
      const verifier = pont.services.access.assertions;
      verifier.now = () => Date.now() + 31_000;
      try {
        await token(next, client.client_id, 'system/Observation.rs');
        expect(jwks.hits).toBe(2);
      } finally {
        verifier.now = Date.now;
      }
    } finally {
      jwks.server.close();
    }
  });

  it('a jwks_uri that answers too much, redirects, is not JSON or publishes a private key: invalid_client', async () => {
    const jwks = await jwksServer();
    const verifier = pont.services.access.assertions;
    let clock = Date.now();
    verifier.now = () => clock;
    try {
      const cases: Array<[(res: import('node:http').ServerResponse) => void, RegExp]> = [
        [(res) => res.end(JSON.stringify({ keys: [{ kty: 'RSA', kid: 'x', n: 'a'.repeat(70_000), e: 'AQAB' }] })), /more than 65536 bytes/],
        [(res) => res.writeHead(302, { location: 'http://127.0.0.1:1/jwks' }).end(), /HTTP 302/],
        [(res) => res.end('<html>'), /did not answer JSON/],
        [async (res) => res.end(JSON.stringify({ keys: [{ ...(await exportJWK(rsa.keys.privateKey)), kid: rsa.kid }] })), /private key material/],
      ];
      const client = await keyClient({ jwksUri: jwks.url }, ['fhir:read']);
      for (const [reply, reason] of cases) {
        jwks.reply = reply;
        clock += 6 * 60_000; // past the cache: fetched again
        await expectInvalidClient(await requestToken(await assertion(rsa, client.client_id, { exp: Math.floor(clock / 1000) + 60 }), 'system/*.rs'), reason);
      }
    } finally {
      verifier.now = Date.now;
      jwks.server.close();
    }
  });

  it('a jwks_uri to a private address is never fetched (the webhook destination guard)', async () => {
    // Registered by hand past the CLI's check, as if the name had resolved elsewhere then.
    const client = await keyClient({ jwks: { keys: [await publicJwk(rsa)] } }, ['fhir:read']);
    await pont.services.db.query("UPDATE oauth_clients SET jwks = NULL, jwks_uri = 'https://10.0.0.7/jwks.json' WHERE client_id = $1", [client.client_id]);
    await pont.services.access.caughtUp();
    await expectInvalidClient(await requestToken(await assertion(rsa, client.client_id), 'system/*.rs'), /private, link-local or reserved/);
  });
});

describe('assertions that are refused: 401 invalid_client', () => {
  let clientId: string;
  beforeAll(async () => {
    clientId = (await keyClient({ jwks: { keys: [await publicJwk(rsa), await publicJwk(ec)] } }, ['fhir:read'])).client_id;
  });

  it('a replayed assertion, on the same server', async () => {
    const signed = await assertion(rsa, clientId);
    expect((await requestToken(signed, 'system/*.rs')).status).toBe(200);
    await expectInvalidClient(await requestToken(signed, 'system/*.rs'), /used already/);
  });

  it('a jti used once is refused for its lifetime, then free; used jti are purged after they expire', async () => {
    const verifier = pont.services.access.assertions;
    const jti = randomUUID();
    const exp = Math.floor(Date.now() / 1000) + 60;
    expect((await requestToken(await assertion(ec, clientId, { jti, exp }), 'system/*.rs')).status).toBe(200);
    await expectInvalidClient(await requestToken(await assertion(ec, clientId, { jti, exp: exp + 100 }), 'system/*.rs'), /used already/);
    const later = Date.now() + 3 * 60_000;
    verifier.now = () => later;
    try {
      expect((await requestToken(await assertion(ec, clientId, { jti, exp: Math.floor(later / 1000) + 60 }), 'system/*.rs')).status).toBe(200);
    } finally {
      verifier.now = Date.now;
    }
    const count = async () => Number((await pont.services.db.query<{ n: string }>('SELECT count(*) AS n FROM used_client_assertions WHERE jti = $1', [jti])).rows[0]!.n);
    expect(await count()).toBe(1);
    await purgeUsedAssertions(pont.services.db, Date.now());
    expect(await count()).toBe(1); // still within its lifetime
    await purgeUsedAssertions(pont.services.db, later + 120_000);
    expect(await count()).toBe(0);
  });

  it('exp more than 5 minutes ahead, expired, no exp, no jti', async () => {
    const now = Math.floor(Date.now() / 1000);
    await expectInvalidClient(await requestToken(await assertion(rsa, clientId, { exp: now + 600 }), 'system/*.rs'), /at most 300 s ahead/);
    await expectInvalidClient(await requestToken(await assertion(rsa, clientId, { exp: now - 60 }), 'system/*.rs'), /expired/);
    const noExp = await new SignJWT({ jti: randomUUID() }).setProtectedHeader({ alg: 'RS384', kid: rsa.kid }).setIssuer(clientId).setSubject(clientId).setAudience(tokenEndpoint).sign(rsa.keys.privateKey);
    await expectInvalidClient(await requestToken(noExp, 'system/*.rs'), /exp/);
    const noJti = await new SignJWT({}).setProtectedHeader({ alg: 'RS384', kid: rsa.kid }).setIssuer(clientId).setSubject(clientId).setAudience(tokenEndpoint).setExpirationTime(now + 60).sign(rsa.keys.privateKey);
    await expectInvalidClient(await requestToken(noJti, 'system/*.rs'), /jti/);
  });

  it('a wrong aud, iss, sub or client_id', async () => {
    await expectInvalidClient(await requestToken(await assertion(rsa, clientId, { aud: `${pont.config.publicUrl}${FHIR}` }), 'system/*.rs'), /aud/);
    await expectInvalidClient(await requestToken(await assertion(rsa, clientId, { sub: 'someone-else' }), 'system/*.rs'), /sub must equal its iss/);
    await expectInvalidClient(await requestToken(await assertion(rsa, 'cli_unknown'), 'system/*.rs'), /unknown client/);
    await expectInvalidClient(await requestToken(await assertion(rsa, clientId), 'system/*.rs', { client_id: 'cli_other' }), /client_id differs/);
  });

  it('alg HS256, none and RS256 (even with a registered RSA key), an unknown kid, no kid, a foreign jku', async () => {
    const hs = await new SignJWT({ jti: randomUUID() })
      .setProtectedHeader({ alg: 'HS256', kid: rsa.kid })
      .setIssuer(clientId)
      .setSubject(clientId)
      .setAudience(tokenEndpoint)
      .setExpirationTime('2m')
      .sign(new TextEncoder().encode('a shared secret of at least thirty-two bytes'));
    await expectInvalidClient(await requestToken(hs, 'system/*.rs'), /RS384 or ES384, not HS256/);
    const none = new UnsecuredJWT({ jti: randomUUID() }).setIssuer(clientId).setSubject(clientId).setAudience(tokenEndpoint).setExpirationTime('2m').encode();
    await expectInvalidClient(await requestToken(none, 'system/*.rs'), /not none/);
    // A key registered without alg is an RS384 key: RS256 signatures by it are refused.
    const rs256 = await signer('RS256', 'rs256');
    const rs256Client = await keyClient({ jwks: { keys: [await publicJwk(rs256, false)] } }, ['fhir:read']);
    await expectInvalidClient(await requestToken(await assertion(rs256, rs256Client.client_id), 'system/*.rs'), /not RS256/);
    await expectInvalidClient(await requestToken(await assertion({ ...rsa, kid: 'unknown' }, clientId), 'system/*.rs'), /does not verify/);
    await expectInvalidClient(await requestToken(await assertion(rsa, clientId, {}, { kid: undefined }), 'system/*.rs'), /needs the kid/);
    await expectInvalidClient(await requestToken(await assertion(rsa, clientId, {}, { jku: 'https://attacker.example/jwks.json' }), 'system/*.rs'), /jku/);
    // Another client's key: the signature does not verify against this client's set.
    const stranger = await signer('RS384', rsa.kid);
    await expectInvalidClient(await requestToken(await assertion(stranger, clientId), 'system/*.rs'), /does not verify/);
  });

  it('garbage, a huge assertion, a secret beside the assertion, a wrong assertion type; a key client has no secret', async () => {
    await expectInvalidClient(await requestToken('not.a.jwt', 'system/*.rs'), /not a signed JWT/);
    await expectInvalidClient(await requestToken('x'.repeat(20_000), 'system/*.rs'), /longer than/);
    const both = await requestToken(await assertion(rsa, clientId), 'system/*.rs', { client_secret: 'pcs_x' });
    expect(both.status).toBe(400);
    expect(both.body.error).toBe('invalid_request');
    const wrongType = await requestToken(await assertion(rsa, clientId), 'system/*.rs', { client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:saml2-bearer' });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.error).toBe('invalid_request');
    const secret = await pont.json('/api/v1/connect/auth/token', { method: 'POST', json: { grant_type: 'client_credentials', client_id: clientId, client_secret: '' } });
    expect(secret.status).toBe(401);
    const guessed = await pont.json('/api/v1/connect/auth/token', { method: 'POST', json: { grant_type: 'client_credentials', client_id: clientId, client_secret: 'null' } });
    expect(guessed.status).toBe(401);
    expect(guessed.body.error).toBe('invalid_client');
  });

  it('a revoked client, and a client that authenticates with a secret', async () => {
    const revoked = await keyClient({ jwks: { keys: [await publicJwk(rsa)] } }, ['fhir:read']);
    await revokeClient(pont.services.db, revoked.client_id);
    await expectInvalidClient(await requestToken(await assertion(rsa, revoked.client_id), 'system/*.rs'), /unknown client, revoked client/);
    const secretClient = await createTestClient(pont, ['fhir:read'], { organizationId: ORG });
    await expectInvalidClient(await requestToken(await assertion(rsa, secretClient.client_id), 'system/*.rs'), /authenticates with a secret/);
    // And a key client cannot be given a secret by rotation.
    const headers = await token(rsa, clientId, 'system/*.rs');
    const rotated = await pont.json(`/api/v1/connect/auth/clients/${clientId}/rotate-secret`, { method: 'POST', headers, json: {} });
    expect(rotated.status).toBe(409);
  });

  it('a replayed assertion on another server process on the same database; concurrent replays: exactly one token', async () => {
    let other: { url: string; close(): Promise<void> };
    if (backend === 'postgres') {
      // A second Pont process on the same PostgreSQL database and public URL (as behind a load balancer).
      const second: RunningPont = await startPont(loadConfig({ PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: pont.config.databaseUrl!, PONT_PUBLIC_URL: pont.config.publicUrl }));
      other = { url: second.url, close: () => second.close() };
    } else {
      // The embedded database is one process's: a second composition (own caches, own verifier) on it.
      const services = await createServices(pont.config, pont.services.db, createLogger('error'));
      const server = createApp(services).listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      other = {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: async () => {
          await new Promise((resolve) => server.close(resolve));
          await services.access.close();
        },
      };
    }
    try {
      const otherEndpoint = `${other.url}/api/v1/connect/auth/token`;
      const signed = await assertion(ec, clientId);
      expect((await requestToken(signed, 'system/*.rs')).status).toBe(200);
      await expectInvalidClient(await requestToken(signed, 'system/*.rs', {}, otherEndpoint), /used already/);
      const race = await assertion(rsa, clientId);
      const answers = await Promise.all([tokenEndpoint, otherEndpoint, tokenEndpoint, otherEndpoint].map((endpoint) => requestToken(race, 'system/*.rs', {}, endpoint)));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 401, 401, 401]);
    } finally {
      await other.close();
    }
  });

  it.runIf(backend === 'postgres')('a replayed assertion on `pont serve --workers 2` (other OS processes) on the same database', async () => {
    // Same database and public URL (the assertion's aud), as processes behind one load balancer would have.
    const server = spawn(process.execPath, pontCommand('serve', '--workers', '2'), {
      env: { ...process.env, DATABASE_URL: pont.config.databaseUrl!, PONT_PUBLIC_URL: pont.config.publicUrl, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'error' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      server.stdout!.on('data', (c) => (out += c));
      server.stderr!.on('data', (c) => (out += c));
      const url = await new Promise<string>((resolve, reject) => {
        server.stdout!.on('data', () => {
          const m = /listening on (http:\/\/\S+).*2 worker processes/.exec(out);
          if (m) resolve(m[1]!);
        });
        server.once('exit', () => reject(new Error(`exited: ${out}`)));
      });
      const workers = `${url}/api/v1/connect/auth/token`;
      const used = await assertion(rsa, clientId);
      expect((await requestToken(used, 'system/*.rs')).status).toBe(200);
      for (let i = 0; i < 4; i++) await expectInvalidClient(await requestToken(used, 'system/*.rs', {}, workers), /used already/);
      const race = await assertion(ec, clientId);
      const answers = await Promise.all(Array.from({ length: 8 }, () => requestToken(race, 'system/*.rs', {}, workers)));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 401, 401, 401, 401, 401, 401, 401]);
    } finally {
      const exited = once(server, 'exit');
      server.kill('SIGTERM');
      await exited;
    }
  }, 180_000);
});

describe('system scopes', () => {
  it('a scope the client was not given: invalid_scope', async () => {
    const client = await keyClient({ jwks: { keys: [await publicJwk(rsa)] } }, ['labs:read']);
    for (const [scope, reason] of [
      ['system/Patient.rs', /needs patients:read or fhir:read/],
      ['system/*.rs', /needs fhir:read/],
      ['system/*.cud', /needs fhir:write/],
      ['system/Observation.r', /ask rs, cud or cruds/],
      ['patient/Observation.rs', /system\/ scopes/],
      ['system/Nonsense.rs', /not a FHIR R4 resource type/],
      ['system/Observation.rs labs:read', /may not be mixed/],
    ] as const) {
      const res = await requestToken(await assertion(rsa, client.client_id), scope);
      expect(res.status, scope).toBe(400);
      expect(res.body.error).toBe('invalid_scope');
      expect(res.body.error_description).toMatch(reason);
    }
  });

  it('an export is seen, downloaded and cancelled only with a token that may read every type it holds (403 for a narrower token of the same client)', async () => {
    const client = await keyClient({ jwks: { keys: [await publicJwk(rsa)] } }, ['fhir:read', 'webhooks:manage']);
    const full = await token(rsa, client.client_id, 'system/*.rs');
    const kick = await pont.fetch(`${FHIR}/$export?_type=Patient,Observation`, { headers: { ...full, prefer: 'respond-async' } });
    expect(kick.status, await kick.clone().text()).toBe(202);
    const status = new URL(kick.headers.get('content-location')!).pathname;
    await (pont.services.workers.find((w) => w.name === 'bulk-export') as unknown as { drain(): Promise<void> }).drain();
    const manifest = await pont.json(status, { headers: full });
    expect(manifest.status).toBe(200);
    const files = (manifest.body.output as Array<{ url: string }>).map((f) => new URL(f.url).pathname);
    expect(files.length).toBeGreaterThanOrEqual(2);
    const narrower = [await token(rsa, client.client_id, 'system/Observation.rs'), await token(rsa, client.client_id, 'webhooks:manage')];
    for (const headers of narrower) {
      for (const [method, path] of [['GET', status], ...files.map((f) => ['GET', f]), ['DELETE', status]]) {
        const res = await pont.json(path!, { method, headers });
        expect(res.status, `${method} ${path}`).toBe(403);
        expect(res.body.resourceType).toBe('OperationOutcome');
      }
    }
    // Nothing was cancelled: the token of the kick-off still has every file.
    expect((await pont.json(status, { headers: full })).status).toBe(200);
    for (const file of files) expect((await pont.fetch(file, { headers: full })).status).toBe(200);
    expect((await pont.json(status, { method: 'DELETE', headers: full })).status).toBe(202);
  });

  it('system/Observation.rs reads Observation and nothing else, whichever Pont scope it rests on', async () => {
    for (const scopes of [['labs:read'], ['fhir:read']] as Scope[][]) {
      const client = await keyClient({ jwks: { keys: [await publicJwk(rsa)] } }, scopes);
      const headers = await token(rsa, client.client_id, 'system/Observation.rs');
      expect((await pont.json(`${FHIR}/Observation/${observationId}`, { headers })).status).toBe(200);
      expect((await pont.json(`${FHIR}/Observation?subject=Patient/${patientId}`, { headers })).status).toBe(200);
      // An include of a type it may not read finds nothing of it.
      const included = await pont.json(`${FHIR}/Observation?_include=Observation:subject`, { headers });
      expect(included.status).toBe(200);
      expect(included.body.entry.map((e: any) => e.resource.resourceType)).not.toContain('Patient');
      for (const path of [
        `/Patient/${patientId}`,
        `/Patient?_id=${patientId}`,
        `/Patient/${patientId}/$everything`,
        `/Patient/${patientId}/_history`,
        `/DiagnosticReport`,
      ]) {
        const res = await pont.json(`${FHIR}${path}`, { headers });
        expect(res.status, `${scopes} ${path}`).toBe(403);
        expect(res.body.resourceType).toBe('OperationOutcome');
      }
    }
  });

  it('system/Observation.cud writes Observation only; system/*.cruds reads and writes everything', async () => {
    const client = await keyClient({ jwks: { keys: [await publicJwk(ec)] } }, ['fhir:read', 'fhir:write']);
    const observation = { resourceType: 'Observation', status: 'final', code: { text: 'weight' }, subject: { reference: `Patient/${patientId}` } };
    const limited = await token(ec, client.client_id, 'system/Observation.cud system/Observation.rs');
    expect((await pont.json(`${FHIR}/Observation`, { method: 'POST', headers: limited, json: observation })).status).toBe(201);
    const patient = await pont.json(`${FHIR}/Patient`, { method: 'POST', headers: limited, json: { resourceType: 'Patient' } });
    expect(patient.status).toBe(403);
    const bundle = await pont.json(FHIR, {
      method: 'POST',
      headers: limited,
      json: { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: observation, request: { method: 'POST', url: 'Observation' } }, { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } }] },
    });
    expect(bundle.status).toBe(403);
    const all = await token(ec, client.client_id, 'system/*.cruds');
    expect((await pont.json(`${FHIR}/Patient`, { method: 'POST', headers: all, json: { resourceType: 'Patient' } })).status).toBe(201);
    expect((await pont.json(`${FHIR}/Patient/${patientId}`, { headers: all })).status).toBe(200);
  });

  it("another organisation's backend service with system/*.rs reads none of this organisation's patients", async () => {
    const client = await keyClient({ jwks: { keys: [await publicJwk(rsa)] } }, ['fhir:read'], 'org-elsewhere');
    const headers = await token(rsa, client.client_id, 'system/*.rs');
    const read = await pont.json(`${FHIR}/Patient/${patientId}`, { headers });
    expect([403, 404]).toContain(read.status);
    expect(JSON.stringify(read.body)).not.toContain('Smart');
    const search = await pont.json(`${FHIR}/Observation`, { headers });
    expect(search.status).toBe(200);
    expect((search.body.entry ?? []).filter((e: any) => e.search.mode === 'match')).toEqual([]);
  });
});

describe('registration', () => {
  it('refuses private keys, symmetric keys, keys without kid or of another alg, weak RSA, keys not for signatures, a bad jwks_uri, both or neither', async () => {
    const privateRsa = { ...(await exportJWK(rsa.keys.privateKey)), kid: 'p' };
    const weak = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'jwk' });
    const p256 = await generateKeyPair('ES256', { extractable: true });
    const cases: Array<[Record<string, unknown>, RegExp, boolean?]> = [
      [{ jwks: { keys: [privateRsa] } }, /private key material \("d"\)/],
      [{ jwks: { keys: [{ kty: 'oct', k: 'c2VjcmV0', kid: 'o' }] } }, /private key material \("k"\)/],
      [{ jwks: { keys: [{ ...(await publicJwk(rsa)), kid: undefined }] } }, /needs a kid/],
      [{ jwks: { keys: [{ ...(await publicJwk(rsa)), alg: 'RS256' }] } }, /alg must be RS384 or ES384/],
      [{ jwks: { keys: [] } }, /1 to 16 keys/],
      [{ jwks: { keys: [{ ...(await exportJWK(p256.publicKey)), kid: 'p256' }] } }, /not a usable ES384 public key/],
      [{ jwks: { keys: [await publicJwk(rsa), { ...(await publicJwk(ec)), kid: rsa.kid }] } }, /used twice/],
      [{ jwks: [] }, /"keys" array/],
      [{ jwksUri: 'http://app.example.org/jwks.json' }, /loopback/],
      [{ jwksUri: 'http://127.0.0.1/jwks.json' }, /must use https/, false],
      [{ jwksUri: 'https://10.1.2.3/jwks.json' }, /private, link-local or reserved/],
      [{ jwks: { keys: [await publicJwk(rsa)] }, jwksUri: 'https://app.example.org/jwks.json' }, /one of the two/],
      [{}, /one of the two/],
      [{ jwks: { keys: [{ ...weak, kid: 'w' }] } }, /2048 bits|not a usable/],
      [{ jwks: { keys: [{ ...(await publicJwk(rsa)), use: 'enc' }] } }, /use must be "sig"/],
      [{ jwks: { keys: [{ ...(await publicJwk(ec)), key_ops: ['encrypt'] }] } }, /key_ops must include "verify"/],
    ];
    for (const [keys, message, development = true] of cases) {
      const parsed = await keyClientInput(development).safeParseAsync({ name: 'x', organizationId: ORG, scopes: ['fhir:read'], ...keys });
      expect(parsed.success, JSON.stringify(keys).slice(0, 80)).toBe(false);
      expect(parsed.error!.issues.map((i) => i.message).join('; ')).toMatch(message);
    }
  });

  it('`pont clients create --jwks FILE` refuses a private JWK Set and names the flag', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pont-smart-'));
    try {
      const file = join(dir, 'jwks.json');
      writeFileSync(file, JSON.stringify({ keys: [{ ...(await exportJWK(ec.keys.privateKey)), kid: 'ec' }] }));
      const failed = await promisify(execFile)(process.execPath, pontCommand('clients', 'create', '--name', 'x', '--org', ORG, '--scopes', 'fhir:read', '--jwks', file), {
        env: { ...process.env, PONT_DATA_DIR: join(dir, 'data') },
      }).catch((err: { code: number; stderr: string }) => err);
      expect((failed as { code: number }).code).toBe(2);
      expect((failed as { stderr: string }).stderr).toMatch(/--jwks: key 0 holds private key material/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('`pont clients create --jwks FILE` registers a client without a secret; on PostgreSQL the running service takes its assertions', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pont-smart-'));
    try {
      const file = join(dir, 'jwks.json');
      writeFileSync(file, JSON.stringify({ keys: [await publicJwk(ec)] }));
      // The embedded test database lives in the test's memory: the command gets a database of its own there.
      const database = backend === 'postgres' ? { DATABASE_URL: pont.config.databaseUrl! } : { PONT_DATA_DIR: join(dir, 'data') };
      const { stdout } = await promisify(execFile)(process.execPath, pontCommand('clients', 'create', '--name', 'Bulk app', '--org', ORG, '--scopes', 'labs:read', '--jwks', file), {
        env: { ...process.env, ...database },
      });
      const created = JSON.parse(stdout);
      expect(created).toMatchObject({ token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [{ kid: ec.kid, kty: 'EC' }] }, jwks_uri: null });
      expect(created).not.toHaveProperty('client_secret');
      if (backend === 'postgres') await token(ec, created.client_id, 'system/Observation.rs');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('documentation', () => {
  it('the FHIR apps\' guide carries the SMART scope table as the code maps it', async () => {
    const { readFileSync } = await import('node:fs');
    const readme = readFileSync(new URL('../docs/fhir.md', import.meta.url), 'utf8');
    const block = /<!-- smart-scopes[^>]*-->\n([\s\S]*?)<!-- \/smart-scopes -->/.exec(readme);
    expect(block?.[1]?.trim()).toBe(smartScopeTable());
  });
});
