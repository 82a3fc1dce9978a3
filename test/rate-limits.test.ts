import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../src/auth/clients';
import { loadConfig } from '../src/config';
import { startPont } from '../src/server';
import { backend, createTestClient, startTestServer, type TestServer } from './harness';

/**
 * The limits' windows are fixed, 60 s aligned on the epoch: a test whose requests straddle a window's end would see
 * its counter start again (it did, once). Each process's limiter is held in the middle of one window.
 */
const midWindow = Date.now() - (Date.now() % 60_000) + 30_000;
const pinned = (services: { access: { limits: { now: () => number } } }) => (services.access.limits.now = () => midWindow);

let pont: TestServer;
beforeAll(async () => {
  pont = await startTestServer({ PONT_RATE_LIMITS: 'SDK=3/60, FHIR=5/60, token=2/60, failed-auth=3/60' });
  pinned(pont.services);
});
afterAll(async () => {
  await pont?.close();
});

const SDK = '/api/v1/sdk/token/introspect';

function expectTooMany(res: { status: number; body: any; headers: Headers }) {
  expect(res.status).toBe(429);
  const retryAfter = Number(res.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  expect(res.body).toEqual({ status: 'error', error_code: 'RATE_LIMITED', message: expect.any(String), retry_after: retryAfter });
}

describe('rate limits', () => {
  it('limits each client per route group, with Retry-After and retry_after', async () => {
    const a = await createTestClient(pont, ['patients:read']);
    const b = await createTestClient(pont, ['patients:read']);
    for (let i = 0; i < 3; i++) expect((await pont.json(SDK, { headers: a.headers })).status).toBe(200);
    expectTooMany(await pont.json(SDK, { headers: a.headers }));
    // Another client has its own counter; the same client has its own counter in another group.
    expect((await pont.json(SDK, { headers: b.headers })).status).toBe(200);
    expect((await pont.json('/api/fhir/R4/Patient', { headers: a.headers })).status).toBe(200);
  });

  it('answers FHIR routes with an OperationOutcome when limited', async () => {
    const a = await createTestClient(pont, ['patients:read']);
    for (let i = 0; i < 5; i++) expect((await pont.fetch('/api/fhir/R4/Patient', { headers: a.headers })).status).toBe(200);
    const res = await pont.json('/api/fhir/R4/Patient', { headers: a.headers });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(res.body).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ code: 'throttled' }] });
  });

  it('limits token requests per client', async () => {
    const client = await createClient(pont.services.db, { name: 'busy', organizationId: 'org-a', scopes: ['labs:read'] });
    const ask = () =>
      pont.json('/api/v1/connect/auth/token', {
        method: 'POST',
        json: { grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret },
      });
    expect((await ask()).status).toBe(200);
    expect((await ask()).status).toBe(200);
    expectTooMany(await ask());
  });

  it('cuts off an address after repeated failed client authentications', async () => {
    // Failures are counted per source address, so this runs in a server of its own.
    const own = await startTestServer({ PONT_RATE_LIMITS: 'failed-auth=3/60' });
    pinned(own.services);
    try {
      const client = await createClient(own.services.db, { name: 'target', organizationId: 'org-a', scopes: ['labs:read'] });
      const ask = (secret: string) =>
        own.json('/api/v1/connect/auth/token', { method: 'POST', json: { grant_type: 'client_credentials', client_id: client.client_id, client_secret: secret } });
      for (let i = 0; i < 3; i++) expect((await ask('pcs_guess')).status).toBe(401);
      expectTooMany(await ask(client.client_secret));
      const pair = await own.json(SDK, { headers: { 'x-client-id': client.client_id, 'x-client-secret': client.client_secret } });
      expect(pair.status).toBe(429);
    } finally {
      await own.close();
    }
  });

  it.runIf(backend === 'postgres')('shares counters between Pont processes on one database', async () => {
    // Processes behind one load balancer share the public URL (the token issuer) and the database.
    const second = await startPont(
      loadConfig({ PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: pont.config.databaseUrl, PONT_PUBLIC_URL: pont.config.publicUrl, PONT_RATE_LIMITS: 'SDK=3/60' }),
    );
    pinned(second.services);
    try {
      const client = await createTestClient(pont, ['labs:read']);
      expect((await pont.json(SDK, { headers: client.headers })).status).toBe(200);
      expect((await fetch(second.url + SDK, { headers: client.headers })).status).toBe(200);
      expect((await pont.json(SDK, { headers: client.headers })).status).toBe(200);
      const fourth = await fetch(second.url + SDK, { headers: client.headers });
      expect(fourth.status).toBe(429);
    } finally {
      await second.close();
    }
  });

  it('refuses a malformed PONT_RATE_LIMITS at start', () => {
    expect(() => loadConfig({ PONT_RATE_LIMITS: 'FHIR=lots' })).toThrow(/PONT_RATE_LIMITS.*group=requests\/seconds/s);
    expect(loadConfig({ PONT_RATE_LIMITS: 'Connect=10/1' }).rateLimits).toMatchObject({ connect: { points: 10, seconds: 1 }, default: { points: 600, seconds: 60 } });
  });
});
