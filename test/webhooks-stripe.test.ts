import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Stripe from 'stripe';
import { recordEvent } from '../src/events/outbox';
import { createTestClient, startTestServer, type TestServer } from './harness';
import { startReceiver, type Receiver } from './webhooks-support';

// Our signature is Stripe's scheme (t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">, keyed with the whole secret),
// so Stripe's own published verifier must accept every delivery, and refuse a tampered one.
const stripe = new Stripe('sk_test_unused');

let pont: TestServer;
let receiver: Receiver;
beforeAll(async () => {
  pont = await startTestServer({ PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true' });
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await pont?.close();
});

describe('deliveries verified by a third-party verifier', () => {
  it("Stripe's constructEvent accepts the signature over the raw body and refuses a tampered body", async () => {
    const client = await createTestClient(pont, ['webhooks:manage'], { organizationId: 'org-stripe' });
    const sub = await pont.json('/api/v1/connect/webhooks/subscriptions', {
      method: 'POST',
      headers: client.headers,
      json: { callback_url: receiver.url, subscribed_events: ['patient.created', 'health_id.created'], description: 'stripe check' },
    });
    expect(sub.status).toBe(201);
    const secret: string = sub.body.webhook_secret;
    for (const type of ['patient.created', 'health_id.created'] as const)
      await pont.services.db.transaction((tx) => recordEvent(tx, { type, organizationId: 'org-stripe', environment: 'development', data: { note: 'ünïcödé ✓' } }));
    const deliveries = await receiver.waitFor(2);
    for (const d of deliveries) {
      const header = String(d.headers['x-service-signature']);
      const event = stripe.webhooks.constructEvent(d.rawBody, header, secret, 300) as unknown as { id: string; type: string };
      expect(event.id).toMatch(/^evt_/);
      expect(['patient.created', 'health_id.created']).toContain(event.type);
      expect(() => stripe.webhooks.constructEvent(d.rawBody.replace('}', ' }'), header, secret, 300)).toThrow();
      expect(() => stripe.webhooks.constructEvent(d.rawBody, header, `${secret}x`, 300)).toThrow();
    }
  });
});
