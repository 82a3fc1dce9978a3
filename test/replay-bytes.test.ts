import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes, randomUUID } from 'node:crypto';
import { runIdempotent } from '../src/http/idempotency';
import { encryptSecret } from '../src/webhooks/secrets';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * Idempotent replays are the first answer byte for byte (issue 23, item 7): clients that hash answers see the
 * same hash, as with Stripe. The stored copy still holds no secret in clear.
 */
let pont: TestServer;
let clinic: TestClient;
let healthId: string;

beforeAll(async () => {
  pont = await startTestServer();
  clinic = await createTestClient(pont, ['health_id:verify', 'encounters:write', 'webhooks:manage'], { organizationId: 'org-replay' });
  const resolved = await pont.json('/api/v1/connect/patients/resolve', {
    method: 'POST',
    headers: clinic.headers,
    json: { first_name: 'Ada', last_name: 'Replay', date_of_birth: '1981-02-03', sex: 'female' },
  });
  expect(resolved.status).toBe(201);
  healthId = resolved.body.health_id;
});
afterAll(async () => {
  await pont?.close();
});

/** The raw answer to a POST with an Idempotency-Key. */
async function post(path: string, key: string, json: unknown) {
  const res = await pont.fetch(path, {
    method: 'POST',
    headers: { ...clinic.headers, 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(json),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

describe('a replay answers the bytes of the first answer', () => {
  it('for an SDK push', async () => {
    const key = randomUUID();
    const payload = { health_id: healthId, encounter_type: 'consultation', reason: 'replayed byte for byte' };
    const first = await post('/api/v1/sdk/records/encounters', key, payload);
    expect(first.status, first.text).toBe(201);
    // Key order differs from what jsonb would keep (it sorts keys by length): a re-serialised body would show it.
    const again = await post('/api/v1/sdk/records/encounters', key, { reason: payload.reason, encounter_type: 'consultation', health_id: healthId });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(first.text);
    expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
  });

  it('for a webhook subscription, whose secret is stored encrypted', async () => {
    const key = randomUUID();
    const subscription = { callback_url: 'https://ehr.example.org/replay-hooks', subscribed_events: ['patient.created', 'consent.granted'] };
    const first = await post('/api/v1/connect/webhooks/subscriptions', key, subscription);
    expect(first.status, first.text).toBe(201);
    const secret = JSON.parse(first.text).webhook_secret as string;
    expect(secret).toMatch(/^whsec_/);
    const again = await post('/api/v1/connect/webhooks/subscriptions', key, subscription);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(first.text);

    const { rows } = await pont.services.db.query<{ body: unknown; headers: unknown }>('SELECT body, headers FROM idempotency_keys WHERE client_id = $1', [clinic.client_id]);
    expect(rows.length).toBeGreaterThan(0);
    expect(JSON.stringify(rows)).not.toContain('whsec_');
    expect(JSON.stringify(rows)).not.toContain(secret.slice('whsec_'.length));
  });
});

describe('runIdempotent', () => {
  const secrets = { fields: ['webhook_secret'], key: randomBytes(32) };

  it('stores the serialised answer: key order, unicode and the secret come back as sent', async () => {
    const claim = { clientId: clinic.client_id, key: randomUUID(), hash: 'h' };
    const answer = { zebra: 1, a: [2, { y: 'é', b: null }], webhook_secret: 'whsec_$&-not-a-pattern', middle: '"quoted"' };
    const run = async () => ({ status: 201, body: answer, contentType: 'application/fhir+json' });
    const first = await runIdempotent(pont.services.db, claim, { ttlMs: 60_000 }, run, secrets);
    expect(first).toEqual({ status: 201, body: JSON.stringify(answer), contentType: 'application/fhir+json' });
    const replay = await runIdempotent(pont.services.db, claim, { ttlMs: 60_000 }, run, secrets);
    expect(replay).toEqual({ status: 201, body: JSON.stringify(answer), contentType: 'application/fhir+json', headers: { 'Idempotent-Replayed': 'true' } });
  });

  it('replays an answer stored before (a JSON value, its secret encrypted in place)', async () => {
    const claim = { clientId: clinic.client_id, key: randomUUID(), hash: 'h' };
    const answer = { id: 'whsub_legacy', webhook_secret: 'whsec_legacy' };
    const run = async () => ({ status: 201, body: answer });
    await runIdempotent(pont.services.db, claim, { ttlMs: 60_000 }, run, secrets);
    // The row rewritten as the earlier code kept it.
    const context = JSON.stringify(['idempotency', claim.clientId, claim.key, 'webhook_secret']);
    const legacy = { ...answer, webhook_secret: encryptSecret(secrets.key, context, answer.webhook_secret) };
    await pont.services.db.query(`UPDATE idempotency_keys SET body = $3::jsonb WHERE client_id = $1 AND key = $2`, [claim.clientId, claim.key, JSON.stringify(legacy)]);
    const replay = await runIdempotent(pont.services.db, claim, { ttlMs: 60_000 }, run, secrets);
    expect(replay).toMatchObject({ status: 201, headers: { 'Idempotent-Replayed': 'true' } });
    expect(JSON.parse(String(replay!.body))).toEqual(answer);
  });
});
