import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeyClient, keyClientInput } from '../src/auth/clients';
import { startTestServer, type TestServer } from './harness';

/**
 * Attacks on the SMART Backend Services token endpoint (client assertions). A failing test is an open finding
 * (not fixed here). The body's NUL check does not see inside the base64url JWT, so a NUL in a claim reaches the
 * database.
 */
const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
let pont: TestServer;
let endpoint: string;

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

async function tokenRequest(clientAssertion: string) {
  const res = await pont.fetch('/api/v1/connect/auth/token', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE, client_assertion: clientAssertion }),
  });
  return { status: res.status, body: (await res.json()) as { error?: string } };
}

beforeAll(async () => {
  pont = await startTestServer();
  endpoint = `${pont.config.publicUrl}/api/v1/connect/auth/token`;
});
afterAll(async () => pont?.close());

describe('client assertions with a NUL character inside a claim', () => {
  it('an unsigned assertion whose iss holds a NUL is invalid_client (401), not a 500 (no credentials needed)', async () => {
    const forged = `${b64({ alg: 'ES384', kid: 'k1' })}.${b64({ iss: 'cli_\u0000', sub: 'cli_\u0000', exp: 1 })}.AAAA`;
    const res = await tokenRequest(forged);
    expect(res.status, JSON.stringify(res.body)).toBe(401);
    expect(res.body.error).toBe('invalid_client');
  });

  it('a signed assertion whose jti holds a NUL is refused (401 invalid_client), not a 500', async () => {
    const keys = await generateKeyPair('ES384', { extractable: true });
    const input = await keyClientInput(true).parseAsync({
      name: 'backend service',
      organizationId: 'org-a',
      scopes: ['fhir:read'],
      jwks: { keys: [{ ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'ES384' }] },
    });
    const client = await createKeyClient(pont.services.db, input);
    const assertion = await new SignJWT({ jti: `${randomUUID()}\u0000` })
      .setProtectedHeader({ alg: 'ES384', kid: 'k1' })
      .setIssuer(client.client_id)
      .setSubject(client.client_id)
      .setAudience(endpoint)
      .setExpirationTime(Math.floor(Date.now() / 1000) + 200)
      .sign(keys.privateKey);
    const res = await tokenRequest(assertion);
    expect(res.status, JSON.stringify(res.body)).toBe(401);
    expect(res.body.error).toBe('invalid_client');
  });
});
