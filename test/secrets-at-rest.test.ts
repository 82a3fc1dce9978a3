import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes, randomUUID } from 'node:crypto';
import { runIdempotent } from '../src/http/idempotency';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * No secret in plain text at rest (issue 21, item 3): an answer that carries a secret (a webhook secret, a
 * pairing code), stored for Idempotency-Key replays, keeps that secret encrypted; the replay answers it as given.
 */
let pont: TestServer;
let clinic: TestClient;

beforeAll(async () => {
  pont = await startTestServer();
  clinic = await createTestClient(pont, ['webhooks:manage', 'health_id:verify', 'consents:write'], { organizationId: 'org-secrets' });
});
afterAll(async () => {
  await pont?.close();
});

const post = (path: string, key: string, json?: unknown) =>
  pont.json(`/api/v1/connect${path}`, { method: 'POST', headers: { ...clinic.headers, 'idempotency-key': key }, ...(json === undefined ? {} : { json }) });

/** Every (table, column) of the database whose value, as text (bytea: as bytes), contains `needle`. */
async function whereStored(needle: string): Promise<string[]> {
  const { db } = pont.services;
  const { rows: columns } = await db.query<{ table_name: string; column_name: string; data_type: string }>(
    `SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
       JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
      WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
        AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'bytea', 'ARRAY')`,
  );
  expect(columns.length).toBeGreaterThan(20);
  const found: string[] = [];
  for (const { table_name, column_name, data_type } of columns) {
    const column = `"${column_name.replace(/"/g, '""')}"`;
    const test = data_type === 'bytea' ? `position(convert_to($1, 'UTF8') in ${column}) > 0` : `position($1 in ${column}::text) > 0`;
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${table_name}" WHERE ${test}`, [needle]);
    if (rows[0]!.n) found.push(`${table_name}.${column_name}`);
  }
  return found;
}

describe('secrets in answers stored for Idempotency-Key replays', () => {
  it('keeps a webhook secret encrypted; the replay answers the same secret', async () => {
    const key = randomUUID();
    const subscription = { callback_url: 'https://ehr.example.org/hooks', subscribed_events: ['patient.created'] };
    const first = await post('/webhooks/subscriptions', key, subscription);
    expect(first.status).toBe(201);
    const secret = first.body.webhook_secret as string;
    expect(secret).toMatch(/^whsec_/);

    expect(await whereStored(secret)).toEqual([]);
    expect(await whereStored(secret.slice('whsec_'.length))).toEqual([]);
    expect(await whereStored('whsec_')).toEqual([]);

    const replay = await post('/webhooks/subscriptions', key, subscription);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
  });

  it('keeps a pairing code out of the database (hashes only); the replay answers the same code', async () => {
    const resolved = await pont.json('/api/v1/connect/patients/resolve', {
      method: 'POST',
      headers: clinic.headers,
      json: { first_name: 'Ada', last_name: 'Secret', date_of_birth: '1980-01-01', sex: 'female' },
    });
    expect(resolved.status).toBe(201);
    const key = randomUUID();
    const first = await post(`/patient/${resolved.body.health_id}/mobile/pairing-code`, key);
    expect(first.status).toBe(201);
    const code = first.body.code as string;
    expect(code).toMatch(/^[0-9A-Z]{4}-[0-9A-Z]{4}$/);

    expect(await whereStored(code)).toEqual([]);
    expect(await whereStored(code.replace('-', ''))).toEqual([]);

    const replay = await post(`/patient/${resolved.body.health_id}/mobile/pairing-code`, key);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
  });
});

describe('a stored secret whose at-rest key has changed since (PONT_WEBHOOK_SECRET_KEY replaced)', () => {
  it('is replayed without the secret, and the answer says which field it left out', async () => {
    const { db } = pont.services;
    const claim = { clientId: clinic.client_id, key: randomUUID(), hash: 'h' };
    const before = { fields: ['webhook_secret'], key: randomBytes(32) };
    const answer = { id: 'whsub_x', webhook_secret: 'whsec_stored-under-the-old-key' };
    const run = async () => ({ status: 201, body: answer });
    // The answer is serialised once, and a replay answers those bytes.
    expect(await runIdempotent(db, claim, { ttlMs: 60_000 }, run, before)).toEqual({ status: 201, body: JSON.stringify(answer) });
    expect(await whereStored(answer.webhook_secret)).toEqual([]);

    // Under the same key, the replay is the answer itself.
    const same = await runIdempotent(db, claim, { ttlMs: 60_000 }, run, before);
    expect(same).toEqual({ status: 201, body: JSON.stringify(answer), headers: { 'Idempotent-Replayed': 'true' } });

    const replay = await runIdempotent(db, claim, { ttlMs: 60_000 }, run, { ...before, key: randomBytes(32) });
    expect(replay).toEqual({ status: 201, body: JSON.stringify({ id: 'whsub_x' }), headers: { 'Idempotent-Replayed': 'true', 'Idempotent-Replay-Omitted': 'webhook_secret' } });
  });
});
