/** The webhook routes over HTTP with real clients and tokens: subscriptions, deliveries view, replay. */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { recordEvent } from '../src/events/outbox';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { eventually } from './eventually';
import { startReceiver, type Receiver } from './webhooks-support';

const BASE = '/api/v1/connect/webhooks';

let pont: TestServer;
let alice: TestClient; // webhooks:manage in org-alice
let bob: TestClient; // webhooks:manage in org-bob
let noScope: TestClient; // org-alice, without webhooks:manage
const receivers: Receiver[] = [];

beforeAll(async () => {
  pont = await startTestServer({ PONT_WEBHOOK_POLL_INTERVAL: '50ms', PONT_WEBHOOK_RETRY_DELAYS: '100ms,100ms,100ms,100ms,100ms,100ms' });
  alice = await createTestClient(pont, ['webhooks:manage'], { organizationId: 'org-alice', facilityId: 'fac-a' });
  bob = await createTestClient(pont, ['webhooks:manage'], { organizationId: 'org-bob' });
  noScope = await createTestClient(pont, ['health_id:verify'], { organizationId: 'org-alice' });
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await pont?.close();
});

const as = (client: TestClient, init: RequestInit & { json?: unknown } = {}) => ({ ...init, headers: { ...client.headers, ...init.headers } });

async function subscribe(client: TestClient, body: Record<string, unknown>) {
  return pont.json(`${BASE}/subscriptions`, as(client, { method: 'POST', json: body }));
}

/** A receiver and a subscription of `client` pointing at it. */
async function subscribedReceiver(client: TestClient, events: string[] = ['patient.created'], reply?: Parameters<typeof startReceiver>[0]) {
  const receiver = await startReceiver(reply);
  receivers.push(receiver);
  const { status, body } = await subscribe(client, { callback_url: receiver.url, subscribed_events: events, description: 'EHR' });
  expect(status).toBe(201);
  receiver.secret = body.webhook_secret;
  return { receiver, subscription: body };
}

function record(organizationId: string, type: 'patient.created' | 'appointment.cancelled' = 'patient.created') {
  return pont.services.db.transaction((tx) => recordEvent(tx, { type, organizationId, environment: 'development', data: { patient_id: 'p1' } }));
}

async function deliveriesOf(client: TestClient, eventId: string) {
  return pont.json(`${BASE}/events/${eventId}/deliveries`, as(client));
}

function settled(client: TestClient, eventId: string) {
  return eventually(async () => {
    const { body } = await deliveriesOf(client, eventId);
    if (body.deliveries.some((d: any) => d.status === 'pending')) throw new Error(`deliveries of ${eventId} still pending`);
    return body;
  });
}

describe('subscriptions', () => {
  it('creates a subscription and shows its secret once', async () => {
    const { status, body } = await subscribe(alice, {
      callback_url: 'https://ehr.example.org/hooks',
      subscribed_events: ['patient.created', 'consent.granted', 'patient.created'],
      description: 'EHR integration',
    });
    expect(status).toBe(201);
    expect(body).toEqual({
      id: expect.stringMatching(/^whsub_/),
      callback_url: 'https://ehr.example.org/hooks',
      subscribed_events: ['patient.created', 'consent.granted'],
      description: 'EHR integration',
      status: 'active',
      full_payload: false,
      created_at: expect.any(String),
      webhook_secret: expect.stringMatching(/^whsec_[A-Za-z0-9_-]{43}$/),
    });
    const listed = await pont.json(`${BASE}/subscriptions`, as(alice));
    expect(listed.status).toBe(200);
    const mine = listed.body.subscriptions.find((s: any) => s.id === body.id);
    const { webhook_secret: _, ...withoutSecret } = body;
    expect(mine).toEqual(withoutSecret);
    expect(JSON.stringify(listed.body)).not.toContain('whsec_');
  });

  it.each([
    [{ callback_url: 'http://ehr.example.org/hooks', subscribed_events: ['patient.created'] }, 'callback_url'],
    [{ callback_url: 'ftp://127.0.0.1/hooks', subscribed_events: ['patient.created'] }, 'callback_url'],
    [{ callback_url: 'not a url', subscribed_events: ['patient.created'] }, 'callback_url'],
    [{ callback_url: 'https://user:pw@ehr.example.org/', subscribed_events: ['patient.created'] }, 'callback_url'],
    [{ callback_url: 'https://ehr.example.org/', subscribed_events: [] }, 'subscribed_events'],
    [{ callback_url: 'https://ehr.example.org/', subscribed_events: ['patient.deleted'] }, 'subscribed_events'],
    [{ callback_url: 'https://ehr.example.org/' }, 'subscribed_events'],
    [{ subscribed_events: ['patient.created'] }, 'callback_url'],
    [{ callback_url: 'https://ehr.example.org/', subscribed_events: ['patient.created'], secret: 'mine' }, 'secret'],
    // SSRF: private, link-local and reserved destinations, literal or IPv4-mapped.
    [{ callback_url: 'https://10.1.2.3/hooks', subscribed_events: ['patient.created'] }, 'callback_url'],
    [{ callback_url: 'https://169.254.169.254/latest/meta-data', subscribed_events: ['patient.created'] }, 'callback_url'],
    [{ callback_url: 'https://192.168.0.10/hooks', subscribed_events: ['patient.created'] }, 'callback_url'],
    [{ callback_url: 'https://[::ffff:172.16.0.1]/hooks', subscribed_events: ['patient.created'] }, 'callback_url'],
    [{ callback_url: 'https://[fd00::1]/hooks', subscribed_events: ['patient.created'] }, 'callback_url'],
  ])('refuses %j with 422 naming %s', async (input, field) => {
    const { status, body } = await subscribe(alice, input);
    expect(status).toBe(422);
    expect(body).toMatchObject({ status: 'error', error_code: 'VALIDATION_FAILED' });
    expect(body.message).toContain(field);
  });

  it('refuses malformed JSON with 400', async () => {
    const res = await pont.json(`${BASE}/subscriptions`, as(alice, { method: 'POST', body: '{"callback_url":', headers: { 'content-type': 'application/json' } }));
    expect(res.status).toBe(400);
    expect(res.body.status).toBe('error');
  });

  it('needs a token (401) holding webhooks:manage (403)', async () => {
    const input = { callback_url: 'https://ehr.example.org/', subscribed_events: ['patient.created'] };
    expect((await pont.json(`${BASE}/subscriptions`, { method: 'POST', json: input })).status).toBe(401);
    expect((await subscribe(noScope, input)).status).toBe(403);
    expect((await pont.json(`${BASE}/subscriptions`, as(noScope))).status).toBe(403);
  });

  it("lists only the caller organisation's subscriptions and unsubscribes with 204; another organisation's is 404", async () => {
    const { body: created } = await subscribe(alice, { callback_url: 'https://a.example.org/', subscribed_events: ['consent.revoked'] });
    const bobs = await pont.json(`${BASE}/subscriptions`, as(bob));
    expect(bobs.body.subscriptions.map((s: any) => s.id)).not.toContain(created.id);

    const foreign = await pont.json(`${BASE}/subscriptions/${created.id}`, as(bob, { method: 'DELETE' }));
    expect(foreign.status).toBe(404);
    expect(foreign.body.error_code).toBe('NOT_FOUND');

    const res = await pont.fetch(`${BASE}/subscriptions/${created.id}`, as(alice, { method: 'DELETE' }));
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
    const listed = await pont.json(`${BASE}/subscriptions`, as(alice));
    expect(listed.body.subscriptions.map((s: any) => s.id)).not.toContain(created.id);
    expect((await pont.json(`${BASE}/subscriptions/${created.id}`, as(alice, { method: 'DELETE' }))).status).toBe(404);
  });

  it('refuses http:// loopback callbacks where the configuration does not allow them', async () => {
    const strict = await startTestServer({ PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'false' });
    try {
      const client = await createTestClient(strict, ['webhooks:manage']);
      const res = await strict.json(`${BASE}/subscriptions`, {
        method: 'POST',
        headers: client.headers,
        json: { callback_url: 'http://127.0.0.1:9/hooks', subscribed_events: ['patient.created'] },
      });
      expect(res.status).toBe(422);
      expect(res.body.message).toContain('https://');
    } finally {
      await strict.close();
    }
  });

  it('is documented in the OpenAPI document', async () => {
    const { body } = await pont.json('/api/openapi.json');
    expect(body.paths[`${BASE}/subscriptions`].post.security).toContainEqual({ BearerAuth: ['webhooks:manage'] });
    expect(Object.keys(body.paths[`${BASE}/subscriptions`])).toEqual(expect.arrayContaining(['get', 'post']));
    expect(body.paths[`${BASE}/subscriptions/{subscription_id}`].delete.responses['204']).toBeDefined();
    expect(body.paths[`${BASE}/events/{event_id}/replay`].post).toBeDefined();
    expect(body.paths[`${BASE}/events/{event_id}/deliveries`].get).toBeDefined();
    expect(body.paths[`${BASE}/deliveries`].get.parameters.map((p: any) => p.name)).toEqual(['status', 'subscription_id', 'limit', 'cursor']);
  });
});

describe('deliveries and replay', () => {
  // Each test in an organisation of its own, so only its own receivers get its events.
  let orgs = 0;
  const newClient = () => createTestClient(pont, ['webhooks:manage'], { organizationId: `org-delivery-${++orgs}` });

  it('delivers to the subscription, shows the attempts, and replays the same event on request', async () => {
    const alice = await newClient();
    const { receiver, subscription } = await subscribedReceiver(alice);
    const event = await record(alice.organization_id);
    const [first] = await receiver.waitFor(1);
    expect(first!.signatureValid).toBe(true);
    expect(first!.body).toMatchObject({ id: event.id, type: 'patient.created', data: { patient_id: 'p1' } });

    const view = await settled(alice, event.id);
    expect(view).toMatchObject({ event_id: event.id, type: 'patient.created', created_at: event.created_at });
    expect(view.deliveries).toEqual([
      expect.objectContaining({
        event_id: event.id,
        event_type: 'patient.created',
        subscription_id: subscription.id,
        callback_url: receiver.url,
        status: 'delivered',
        round: 1,
        attempts_made: 1,
      }),
    ]);
    expect(view.deliveries[0].attempts[0]).toMatchObject({ round: 1, attempt: 1, status_code: 200, succeeded: true });

    const replay = await pont.json(`${BASE}/events/${event.id}/replay`, as(alice, { method: 'POST' }));
    expect(replay.status).toBe(202);
    expect(replay.body).toEqual({ event_id: event.id, deliveries: [{ id: view.deliveries[0].id, subscription_id: subscription.id, round: 2 }] });
    const [, again] = await receiver.waitFor(2);
    expect(again!.signatureValid).toBe(true);
    expect(again!.body.id).toBe(event.id);
    expect((await settled(alice, event.id)).deliveries[0]).toMatchObject({ status: 'delivered', round: 2 });
  });

  it("answers 404 for unknown events and for another organisation's events", async () => {
    const [alice, bob] = [await newClient(), await newClient()];
    await subscribedReceiver(bob);
    const event = await record(alice.organization_id);
    for (const path of [`${BASE}/events/${event.id}/replay`, `${BASE}/events/evt_0000/replay`]) {
      const res = await pont.json(path, as(bob, { method: 'POST' }));
      expect(res.status).toBe(404);
      expect(res.body.error_code).toBe('NOT_FOUND');
    }
    expect((await deliveriesOf(bob, event.id)).status).toBe(404);
    expect((await deliveriesOf(alice, 'evt_unknown')).status).toBe(404);
  });

  it('lists exhausted deliveries, newest first and paged, so an integrator knows what to replay', async () => {
    const [alice, bob] = [await newClient(), await newClient()];
    const { receiver } = await subscribedReceiver(alice, ['patient.created'], () => 500);
    const events = [];
    for (let i = 0; i < 3; i++) events.push(await record(alice.organization_id));
    await receiver.waitFor(21); // 3 events × 7 attempts
    for (const event of events) await settled(alice, event.id);

    const first = await pont.json(`${BASE}/deliveries?status=exhausted&limit=2`, as(alice));
    expect(first.status).toBe(200);
    expect(first.body.deliveries.map((d: any) => d.event_id)).toEqual([events[2]!.id, events[1]!.id]);
    expect(first.body.deliveries[0]).toMatchObject({ event_type: 'patient.created', status: 'exhausted', attempts_made: 7 });
    expect(first.body.deliveries[0].attempts).toHaveLength(7);
    const second = await pont.json(`${BASE}/deliveries?status=exhausted&limit=2&cursor=${first.body.next_cursor}`, as(alice));
    expect(second.body).toMatchObject({ deliveries: [{ event_id: events[0]!.id }], next_cursor: null });

    expect((await pont.json(`${BASE}/deliveries?status=delivered`, as(alice))).body.deliveries).toEqual([]);
    expect((await pont.json(`${BASE}/deliveries`, as(bob))).body).toEqual({ deliveries: [], next_cursor: null });
    for (const query of ['cursor=abc', 'status=lost', 'limit=0', 'limit=101', 'colour=red']) {
      const bad = await pont.json(`${BASE}/deliveries?${query}`, as(alice));
      expect(bad.status).toBe(422);
      expect(bad.body.error_code).toBe('VALIDATION_FAILED');
    }
  });

  it('answers 409 when no active subscription of the caller receives the event type', async () => {
    const alice = await newClient();
    await subscribedReceiver(alice, ['patient.created']);
    const event = await record(alice.organization_id, 'appointment.cancelled');
    const res = await pont.json(`${BASE}/events/${event.id}/replay`, as(alice, { method: 'POST' }));
    expect(res.status).toBe(409);
    expect(res.body.status).toBe('error');
  });

  it('stops delivering to an endpoint once unsubscribed, even with an attempt in flight', async () => {
    const bob = await newClient();
    const { receiver, subscription } = await subscribedReceiver(bob, ['patient.created'], () => 'hang');
    const event = await record(bob.organization_id);
    await receiver.waitFor(1); // attempt 1 in flight, unanswered
    expect((await pont.fetch(`${BASE}/subscriptions/${subscription.id}`, as(bob, { method: 'DELETE' }))).status).toBe(204);
    receiver.release(500);
    const { body } = await eventually(async () => {
      const found = await deliveriesOf(bob, event.id);
      if (found.body.deliveries[0].attempts.length !== 1) throw new Error('attempt 1 not recorded yet');
      return found;
    });
    expect(body.deliveries[0]).toMatchObject({ status: 'cancelled', next_attempt_at: null });
    expect(body.deliveries[0].attempts[0]).toMatchObject({ status_code: 500, succeeded: false });
    const later = await record(bob.organization_id);
    expect((await deliveriesOf(bob, later.id)).body.deliveries).toEqual([]);
    expect(receiver.received).toHaveLength(1);
  });

  it('delivers the events of a real patient resolve to the acting organisation only, identifiers only', async () => {
    const clinic = await createTestClient(pont, ['webhooks:manage', 'health_id:verify'], { organizationId: 'org-e2e-clinic', facilityId: 'fac-e2e' });
    const other = await newClient();
    const { receiver } = await subscribedReceiver(clinic, ['patient.created', 'health_id.created', 'health_id.verified']);
    const { receiver: otherReceiver } = await subscribedReceiver(other, ['patient.created', 'health_id.created']);

    const refused = await pont.json('/api/v1/connect/patients/resolve', as(clinic, { method: 'POST', json: { last_name: 'Webhook' } }));
    expect(refused.status).toBe(422); // no change, so no event
    const person = { first_name: 'Nadia', last_name: 'Webhook', date_of_birth: '1985-02-03', sex: 'female' };
    const created = await pont.json('/api/v1/connect/patients/resolve', as(clinic, { method: 'POST', json: person }));
    expect(created.status).toBe(201);
    const healthId = created.body.health_id;

    const received = await receiver.waitFor(2);
    expect(received.every((r) => r.signatureValid)).toBe(true);
    expect(received.map((r) => r.body.type).sort()).toEqual(['health_id.created', 'patient.created']);
    for (const { body } of received) {
      expect(body.meta).toMatchObject({ organization_id: 'org-e2e-clinic', facility_id: 'fac-e2e', environment: 'development' });
      expect(body.data.health_id).toBe(healthId);
      expect(Object.keys(body.data).every((key) => key === 'id' || key.endsWith('_id'))).toBe(true); // metadata only
      expect(JSON.stringify(body)).not.toContain('Nadia');
    }
    for (const { body } of received) await settled(clinic, body.id);
    expect(otherReceiver.received).toHaveLength(0);
    expect(receiver.received).toHaveLength(2);
  });
});
