import { createPrivateKey, randomUUID } from 'node:crypto';
import { decodeProtectedHeader, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeSigningKey, rotateSigningKey } from '../src/auth/keys';
import { loadConfig } from '../src/config';
import { startPont, type RunningPont } from '../src/server';
import { backend, createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * Signing keys (issue 21, item 5): a rotated key stops signing at once (what it signed before stays valid
 * until it expires; a token it "signed" after its retirement is forged), and a revoked key's tokens are
 * refused at the next request in every process.
 */
/** Any route a bearer token opens. */
const ROUTE = '/api/v1/sdk/token/introspect';

let pont: TestServer;
/** A second Pont process on the same PostgreSQL database (PGlite is one process's database). */
let second: RunningPont | undefined;
let client: TestClient;

beforeAll(async () => {
  pont = await startTestServer();
  if (backend === 'postgres') second = await startPont(loadConfig({ PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: pont.config.databaseUrl, PONT_PUBLIC_URL: pont.config.publicUrl }));
  client = await createTestClient(pont, ['fhir:read']);
});
afterAll(async () => {
  await second?.close();
  await pont?.close();
});

const servers = () => [pont.url, ...(second ? [second.url] : [])];
const statusOf = async (url: string, token: string) => (await fetch(url + ROUTE, { headers: { authorization: `Bearer ${token}` } })).status;
const kidOf = (token: string) => decodeProtectedHeader(token).kid as string;
const jwksKids = async () => ((await pont.json('/.well-known/jwks.json')).body.keys as Array<{ kid: string }>).map((k) => k.kid);

async function keyRow(kid: string) {
  const { rows } = await pont.services.db.query<{ private_pem: string; retired_at: Date | string | null }>('SELECT private_pem, retired_at FROM signing_keys WHERE kid = $1', [kid]);
  return rows[0]!;
}

/** A token as Pont would sign it, made with the key's private key read from the database (what a thief holds). */
async function forge(kid: string, iat: number): Promise<string> {
  const { private_pem } = await keyRow(kid);
  return new SignJWT({ client_id: client.client_id, scope: 'fhir:read' })
    .setProtectedHeader({ alg: 'RS256', kid, typ: 'at+jwt' })
    .setIssuer(pont.config.publicUrl)
    .setSubject(client.client_id)
    .setAudience(pont.config.publicUrl)
    .setIssuedAt(iat)
    .setExpirationTime(iat + 3600)
    .setJti(randomUUID())
    .sign(createPrivateKey(private_pem));
}

/** A fresh token from the token endpoint. */
async function newToken(): Promise<string> {
  const { status, body } = await pont.json('/api/v1/connect/auth/token', {
    method: 'POST',
    json: { grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret },
  });
  expect(status).toBe(200);
  return body.access_token;
}

/** Every process has verified (and cached) the token. */
async function usedEverywhere(token: string) {
  for (const url of servers()) for (let i = 0; i < 2; i++) expect(await statusOf(url, token)).toBe(200);
}

describe('pont keys rotate', () => {
  it('stops signing with the old key at once: its earlier tokens stay valid, a token it signs after its retirement is refused', async () => {
    const before = await newToken();
    const oldKid = kidOf(before);
    await usedEverywhere(before);

    const rotation = await rotateSigningKey(pont.services.db);
    expect(rotation.retired.map((r) => r.kid)).toEqual([oldKid]);
    const retiredAt = Math.floor(new Date((await keyRow(oldKid)).retired_at!).getTime() / 1000);

    // New tokens come from the new key; the old key stays published for the tokens it signed.
    expect(kidOf(await newToken())).toBe(rotation.kid);
    expect(await jwksKids()).toEqual([rotation.kid, oldKid]);
    for (const url of servers()) expect(await statusOf(url, before)).toBe(200);

    // Signed with the retired key, dated after its retirement (at most a second ahead of now: within clock tolerance).
    const forged = await forge(oldKid, Math.max(Math.floor(Date.now() / 1000), retiredAt + 1));
    for (const url of servers()) expect(await statusOf(url, forged)).toBe(401);
    const introspected = await pont.json('/api/v1/connect/auth/introspect', {
      method: 'POST',
      headers: { 'x-client-id': client.client_id, 'x-client-secret': client.client_secret },
      json: { token: forged },
    });
    expect(introspected.body).toEqual({ active: false });
    // The same forgery dated before the retirement is what the old key signed while it signed: accepted.
    expect(await statusOf(pont.url, await forge(oldKid, retiredAt - 5))).toBe(200);
  });
});

describe('pont keys revoke', () => {
  it("withdraws a retired key at once: its tokens are refused at the next request in every process, and it leaves the JWKS", async () => {
    const token = await newToken();
    const kid = kidOf(token);
    await rotateSigningKey(pont.services.db);
    await usedEverywhere(token);

    const revoked = await revokeSigningKey(pont.services.db, kid);
    expect(revoked).toMatchObject({ kid, revoked_at: expect.any(String) });
    // The process that revoked refuses at once (as `pont clients revoke` does, revoking waits for its own caches).
    expect(await statusOf(pont.url, token)).toBe(401);
    // Another process, once the notification of the commit has reached it (it is there before an operator's next request).
    if (second) {
      await second.services.db.listenersCaughtUp();
      expect(await statusOf(second.url, token)).toBe(401);
    }
    expect(await jwksKids()).not.toContain(kid);
    expect(await statusOf(pont.url, await forge(kid, Math.floor(Date.now() / 1000) - 60))).toBe(401);
  });

  it('revoking the signing key rotates first: the service keeps issuing tokens, none of the revoked key', async () => {
    const token = await newToken();
    const kid = kidOf(token);
    await usedEverywhere(token);

    const revoked = await revokeSigningKey(pont.services.db, kid);
    expect(revoked).toMatchObject({ kid, revoked_at: expect.any(String), signing_kid: expect.any(String) });
    expect(revoked!.signing_kid).not.toBe(kid);
    expect(await statusOf(pont.url, token)).toBe(401);
    if (second) {
      await second.services.db.listenersCaughtUp();
      expect(await statusOf(second.url, token)).toBe(401);
    }
    const next = await newToken();
    expect(kidOf(next)).toBe(revoked!.signing_kid);
    for (const url of servers()) expect(await statusOf(url, next)).toBe(200);
    const published = await jwksKids();
    expect(published[0]).toBe(revoked!.signing_kid);
    expect(published).not.toContain(kid);
  });

  it('answers undefined for an unknown key, and the same revocation again changes nothing', async () => {
    expect(await revokeSigningKey(pont.services.db, 'A'.repeat(43))).toBeUndefined();
    const kid = kidOf(await newToken());
    const first = await revokeSigningKey(pont.services.db, kid);
    const again = await revokeSigningKey(pont.services.db, kid);
    expect(again).toEqual({ kid, revoked_at: first!.revoked_at });
  });
});
