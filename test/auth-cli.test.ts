/**
 * The operator's path: `pont clients|agents|keys` on the database, then the service on the same
 * database, used the way an integrator would.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalJWKSet, decodeProtectedHeader, exportJWK, generateKeyPair, jwtVerify, type JSONWebKeySet } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import { startPont, type RunningPont } from '../src/server';
import { invokedAs } from '../src/cli-args';
import { commandDatabase, pontCommand, runPont } from './harness';

/** Each CLI call is a fresh process (the build's start, database open): generous on a busy machine. */
const SLOW = 300_000;

let env: Record<string, string>;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ env, cleanup } = await commandDatabase());
});
afterAll(async () => {
  await cleanup?.();
});

const pont = (...args: string[]) => runPont(env, ...args);

/**
 * The PGlite files are one process's at a time: the service runs only between CLI calls. Its public
 * URL (the token issuer) stays the same across restarts, as in a real deployment.
 */
async function withService<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const service: RunningPont = await startPont(loadConfig({ PORT: '0', LOG_LEVEL: 'error', PONT_PUBLIC_URL: 'http://pont.test', ...env }));
  try {
    return await fn(service.url);
  } finally {
    await service.close();
  }
}

async function token(url: string, clientId: string, secret: string) {
  const res = await fetch(`${url}/api/v1/connect/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: 'Basic ' + Buffer.from(`${clientId}:${secret}`).toString('base64') },
    body: 'grant_type=client_credentials',
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe('pont clients, agents and keys', () => {
  it('creates, lists, rotates and revokes, and the service honours each step', async () => {
    const created = await pont('clients', 'create', '--name', 'Clinique A', '--org', 'org-clinique-a', '--facility', 'fac-1', '--scopes', 'patients:read labs:read');
    expect(created.code).toBe(0);
    expect(created.json).toMatchObject({
      client_id: expect.stringMatching(/^cli_/),
      client_secret: expect.stringMatching(/^pcs_/),
      name: 'Clinique A',
      organization_id: 'org-clinique-a',
      facility_id: 'fac-1',
      scopes: ['patients:read', 'labs:read'],
    });
    const { client_id: clientId, client_secret: secret } = created.json;

    const listed = await pont('clients', 'list');
    expect(listed.json).toEqual([expect.objectContaining({ client_id: clientId, revoked_at: null })]);
    expect(JSON.stringify(listed.json)).not.toContain(secret); // shown once, never again

    const agent = await pont('agents', 'create', '--org', 'org-clinique-a', '--facility', 'fac-1');
    expect(agent.json).toEqual({ agent_id: expect.stringMatching(/^agt_/), agent_key: expect.stringMatching(/^pak_/), facility_id: 'fac-1', organization_id: 'org-clinique-a' });
    // The facility is org-clinique-a's: another organisation's agent there would make the same Pont ids (an outside review).
    const elsewhere = await pont('agents', 'create', '--org', 'org-1', '--facility', 'fac-1');
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toMatch(/Facility fac-1 is bound to another organisation .*; fix: /);

    const first = await withService(async (url) => {
      const issued = await token(url, clientId, secret);
      expect(issued.status).toBe(200);
      const heartbeat = await fetch(`${url}/api/v1/bridge/heartbeat`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-bridge-agent-id': agent.json.agent_id,
          'x-bridge-agent-key': agent.json.agent_key,
          'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)),
        },
        body: JSON.stringify({ agent_id: agent.json.agent_id, facility_id: 'fac-1', version: '1.0.0' }),
      });
      expect(heartbeat.status).toBe(200);
      return issued.body.access_token as string;
    });

    const rotated = await pont('keys', 'rotate');
    expect(rotated.code).toBe(0);
    expect(rotated.json.retired).toEqual([{ kid: decodeProtectedHeader(first).kid, published_until: expect.any(String) }]);
    const keys = await pont('keys', 'list');
    expect(keys.json.map((k: { status: string }) => k.status)).toEqual(['signing', 'published']);

    await withService(async (url) => {
      const jwks = createLocalJWKSet((await (await fetch(`${url}/.well-known/jwks.json`)).json()) as JSONWebKeySet);
      await expect(jwtVerify(first, jwks)).resolves.toBeTruthy(); // signed before the rotation, still verifiable
      const second = (await token(url, clientId, secret)).body.access_token;
      expect(decodeProtectedHeader(second).kid).toBe(rotated.json.kid);
      expect((await fetch(`${url}/api/v1/sdk/token/introspect`, { headers: { authorization: `Bearer ${first}` } })).status).toBe(200);
    });

    const revoked = await pont('clients', 'revoke', clientId);
    expect(revoked.json).toMatchObject({ client_id: clientId, revoked_at: expect.any(String) });
    await withService(async (url) => {
      expect((await token(url, clientId, secret)).status).toBe(401);
      expect((await fetch(`${url}/api/v1/sdk/token/introspect`, { headers: { authorization: `Bearer ${first}` } })).status).toBe(401);
    });
  }, SLOW);

  it('revokes a key at once: its tokens are refused, it leaves the JWKS, and revoking the signing key rotates first', async () => {
    const created = await pont('clients', 'create', '--name', 'Clinique B', '--org', 'org-clinique-b', '--scopes', 'labs:read');
    const { client_id: clientId, client_secret: secret } = created.json;
    const issued = await withService(async (url) => (await token(url, clientId, secret)).body.access_token as string);
    const kid = decodeProtectedHeader(issued).kid!;

    const revoked = await pont('keys', 'revoke', kid);
    expect(revoked.code).toBe(0);
    expect(revoked.json).toEqual({ kid, revoked_at: expect.any(String), signing_kid: expect.any(String) });
    const keys = await pont('keys', 'list');
    expect(keys.json.find((k: { kid: string }) => k.kid === kid)).toMatchObject({ status: 'revoked', revoked_at: revoked.json.revoked_at });
    expect(keys.json[0]).toMatchObject({ kid: revoked.json.signing_kid, status: 'signing' });

    await withService(async (url) => {
      expect((await fetch(`${url}/api/v1/sdk/token/introspect`, { headers: { authorization: `Bearer ${issued}` } })).status).toBe(401);
      const jwks = (await (await fetch(`${url}/.well-known/jwks.json`)).json()) as JSONWebKeySet;
      expect(jwks.keys.map((k) => k.kid)).not.toContain(kid);
      const next = (await token(url, clientId, secret)).body.access_token;
      expect(decodeProtectedHeader(next).kid).toBe(revoked.json.signing_kid);
      expect((await fetch(`${url}/api/v1/sdk/token/introspect`, { headers: { authorization: `Bearer ${next}` } })).status).toBe(200);
    });

    const unknown = await pont('keys', 'revoke', 'no-such-kid');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/No signing key no-such-kid/);
  }, SLOW);

  it('refuses bad input with a message: exit code 2 for a wrong command line, 1 for a command that failed', async () => {
    const unknownScope = await pont('clients', 'create', '--name', 'X', '--org', 'org-x', '--scopes', 'patients:read everything');
    expect(unknownScope.code).toBe(2);
    expect(unknownScope.stderr).toMatch(/--scopes/);
    const noOrg = await pont('clients', 'create', '--name', 'X', '--scopes', 'labs:read');
    expect(noOrg.code).toBe(2);
    expect(noOrg.stderr).toMatch(/--org is required/);
    const unknownClient = await pont('clients', 'revoke', 'cli_nobody');
    expect(unknownClient.code).toBe(1);
    expect(unknownClient.stderr).toMatch(/No client cli_nobody/);
    const noFacility = await pont('agents', 'create', '--org', 'org-1');
    expect(noFacility.code).toBe(2);
    expect(noFacility.stderr).toMatch(/--facility is required/);
    const agentWithoutOrg = await pont('agents', 'create', '--facility', 'fac-1');
    expect(agentWithoutOrg.code).toBe(2);
    expect(agentWithoutOrg.stderr).toMatch(/--org is required/);
    const badOrg = await pont('agents', 'create', '--org', 'org 1', '--facility', 'fac-1');
    expect(badOrg.code).toBe(2);
    expect(badOrg.stderr).toMatch(/^--org: "org 1" is not valid: use 1-64 letters/);
  }, SLOW);

  // Issue 42: a client of signed assertions was answered "No active client with a secret", which reads as "not active".
  it('rotate-secret says what is true of a client without a secret: registered with a key set, revoked, or unknown', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pont-jwks-'));
    try {
      const file = join(dir, 'jwks.json');
      const { publicKey } = await generateKeyPair('ES384', { extractable: true });
      writeFileSync(file, JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES384' }] }));
      const inline = await pont('clients', 'create', '--name', 'Bulk app', '--org', 'org-keys', '--scopes', 'labs:read', '--jwks', file);
      expect(inline.code, inline.stderr).toBe(0);
      const byUrl = await pont('clients', 'create', '--name', 'Hosted keys', '--org', 'org-keys', '--scopes', 'labs:read', '--jwks-uri', 'http://127.0.0.1:9/jwks.json');
      expect(byUrl.code, byUrl.stderr).toBe(0);
      const secret = await pont('clients', 'create', '--name', 'Gone', '--org', 'org-keys', '--scopes', 'labs:read');
      expect((await pont('clients', 'revoke', secret.json.client_id)).code).toBe(0);

      const id = inline.json.client_id;
      const rotateInline = await pont('clients', 'rotate-secret', id);
      expect(rotateInline.code).toBe(1);
      expect(rotateInline.stderr).not.toMatch(/active/);
      expect(rotateInline.stderr).toContain(`Client ${id} is registered with a key set (inline JWKS), not a secret: it has no secret to rotate.`);
      // The commands it tells to run name the command as it was run (here `node` and the build's bin.js).
      const program = invokedAs(pontCommand().at(-1), process.env, process.cwd());
      expect(program).toMatch(/^node /);
      expect(rotateInline.stderr).toContain(`${program} clients create --name "Bulk app" --org org-keys --scopes "labs:read" --jwks FILE`);
      expect(rotateInline.stderr).toContain(`then revoke this one: ${program} clients revoke ${id}`);

      const rotateUrl = await pont('clients', 'rotate-secret', byUrl.json.client_id);
      expect(rotateUrl.code).toBe(1);
      expect(rotateUrl.stderr).toContain(`Client ${byUrl.json.client_id} is registered with a key set (jwks_uri http://127.0.0.1:9/jwks.json), not a secret`);
      expect(rotateUrl.stderr).toMatch(/publish the new key .* at http:\/\/127\.0\.0\.1:9\/jwks\.json/);

      const rotateRevoked = await pont('clients', 'rotate-secret', secret.json.client_id);
      expect(rotateRevoked.code).toBe(1);
      expect(rotateRevoked.stderr).toMatch(new RegExp(`^Client ${secret.json.client_id} was revoked at \\d{4}-`));
      expect(rotateRevoked.stderr).toContain(`Create another with ${program} clients create.`);
      const rotateUnknown = await pont('clients', 'rotate-secret', 'cli_nobody');
      expect(rotateUnknown.code).toBe(1);
      expect(rotateUnknown.stderr).toMatch(/^No client cli_nobody$/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, SLOW);
});
