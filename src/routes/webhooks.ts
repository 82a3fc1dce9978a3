import { z } from 'zod';
import { SecretRotationRequest } from '../auth/clients';
import type { Principal } from '../core/principal';
import { EVENT_TYPES } from '../events/types';
import { ApiError, ErrorCode, notFound, validationFailed } from '../http/errors';
import { defineRoute, type RouteSpec, type Security } from '../http/routes';
import type { Services } from '../http/services';
import { replayEvent } from '../webhooks/deliveries';
import { checkedAddress, DestinationRefused } from '../webhooks/destination';
import { callbackUrlProblem, createSubscription, rotateSubscriptionSecret, type Owner } from '../webhooks/subscriptions';

const BASE = '/api/v1/connect/webhooks';
const security: Security = { kind: 'client', scope: 'webhooks:manage' };
const tags = ['Connect'];

const EventTypeSchema = z.enum(EVENT_TYPES).meta({ id: 'WebhookEventType', description: 'Event types of section 6.1' });

const SubscriptionCreate = z
  .object({
    callback_url: z.string().max(2048).describe('HTTPS URL that receives the deliveries'),
    subscribed_events: z.array(EventTypeSchema).min(1).max(100).describe('Event types to receive'),
    description: z.string().max(500).optional(),
  })
  .strict()
  .meta({ id: 'WebhookSubscriptionCreate' });

const Subscription = z
  .object({
    id: z.string().describe('whsub_…'),
    callback_url: z.string(),
    subscribed_events: z.array(EventTypeSchema),
    description: z.string(),
    status: z.literal('active'),
    full_payload: z.boolean().describe('Deliveries carry the full event data (operator switch); otherwise identifiers only'),
    created_at: z.string(),
  })
  .meta({ id: 'WebhookSubscription' });

const SubscriptionCreated = Subscription.extend({
  webhook_secret: z.string().describe('whsec_…: shown in this response only. Verifies X-Service-Signature.'),
}).meta({ id: 'WebhookSubscriptionCreated' });

const SecretRotated = Subscription.extend({
  webhook_secret: z.string().describe('whsec_…: the new secret, shown in this response only'),
  previous_secret_expires_at: z
    .string()
    .nullable()
    .describe('Until when deliveries are also signed with the replaced secret (ISO 8601); null: they no longer are'),
}).meta({ id: 'WebhookSecretRotation' });

const SubscriptionParams = z.object({ subscription_id: z.string().max(200).describe('whsub_…') });

const Attempt = z.object({
  round: z.number().int().describe('1 for the original deliveries, +1 per replay'),
  attempt: z.number().int().describe('1..7 within the round'),
  started_at: z.string(),
  duration_ms: z.number().int(),
  status_code: z.number().int().nullable().describe("The receiver's HTTP status, when it answered"),
  error: z.string().nullable(),
  succeeded: z.boolean(),
  response_excerpt: z.string().nullable().describe("The first 1 KB of the receiver's answer"),
});

const DeliveryStatusSchema = z.enum(['pending', 'delivered', 'exhausted', 'cancelled']);

const Delivery = z
  .object({
    id: z.string().describe('whdlv_…'),
    event_id: z.string(),
    event_type: EventTypeSchema,
    subscription_id: z.string(),
    callback_url: z.string(),
    status: DeliveryStatusSchema,
    round: z.number().int(),
    attempts_made: z.number().int().describe('Attempts finished in the current round'),
    next_attempt_at: z.string().nullable(),
    attempts: z.array(Attempt),
  })
  .meta({ id: 'WebhookDelivery' });

const EventDeliveries = z
  .object({ event_id: z.string(), type: EventTypeSchema, created_at: z.string(), deliveries: z.array(Delivery) })
  .meta({ id: 'WebhookEventDeliveries' });

const DeliveryPage = z
  .object({ deliveries: z.array(Delivery), next_cursor: z.string().nullable().describe('Pass as `cursor` for the next page') })
  .meta({ id: 'WebhookDeliveryPage' });

const Replayed = z
  .object({
    event_id: z.string(),
    deliveries: z.array(z.object({ id: z.string(), subscription_id: z.string(), round: z.number().int() })),
  })
  .meta({ id: 'WebhookReplay' });

const EventParams = z.object({ event_id: z.string().max(200).describe('Event id (evt_…)') });

/** The calling organisation: every webhook operation acts within it. */
function ownerOf(principal: Principal | undefined): Owner {
  if (principal?.kind !== 'client') throw new ApiError(401, ErrorCode.unauthenticated, 'An integration client must call this operation');
  return { organizationId: principal.organizationId, facilityId: principal.facilityId };
}

const unknownEvent = (id: string) => notFound(`No event ${id} for this organisation`);

export function webhookRoutes(services: Services): RouteSpec[] {
  const { webhooks, config } = services;
  return [
    defineRoute({
      method: 'post',
      path: `${BASE}/subscriptions`,
      operationId: 'createWebhookSubscription',
      summary: 'Subscribe an endpoint to events',
      description:
        'Deliveries go only to subscriptions of organisations entitled to the event (see docs/integrators.md "Webhooks"). ' +
        'callback_url must be https:// (http:// to a loopback address only outside production). ' +
        'The webhook_secret is returned in this response only; it is stored encrypted.',
      tags,
      security,
      body: SubscriptionCreate,
      responses: { 201: { description: 'Subscribed', schema: SubscriptionCreated } },
      secretFields: { fields: ['webhook_secret'], key: config.webhooks.secretKey },
      handler: async ({ body, principal, repo }) => {
        const owner = ownerOf(principal);
        const problem =
          callbackUrlProblem(body.callback_url, config.webhooks.allowHttpLoopback) ??
          (await checkedAddress(body.callback_url, config.webhooks.allowHttpLoopback, true).then(
            () => undefined,
            (err: unknown) => (err instanceof DestinationRefused ? `is refused: ${err.message}` : Promise.reject(err)),
          ));
        if (problem) {
          throw validationFailed(`callback_url ${problem}`, { extra: { details: [{ field: 'body.callback_url', message: problem }] } });
        }
        return { status: 201, body: await repo.transaction((sql) => createSubscription(sql, config.webhooks.secretKey, owner, body)) };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${BASE}/subscriptions`,
      operationId: 'listWebhookSubscriptions',
      summary: "The calling organisation's active subscriptions (secrets are never shown again)",
      tags,
      security,
      responses: { 200: { description: 'Active subscriptions', schema: z.object({ subscriptions: z.array(Subscription) }) } },
      handler: async ({ principal }) => ({ body: { subscriptions: await webhooks.listSubscriptions(ownerOf(principal).organizationId) } }),
    }),
    defineRoute({
      method: 'delete',
      path: `${BASE}/subscriptions/{subscription_id}`,
      operationId: 'deleteWebhookSubscription',
      summary: 'Unsubscribe an endpoint',
      description: 'Its pending deliveries are cancelled. Another organisation\'s subscription is 404.',
      tags,
      security,
      params: SubscriptionParams,
      responses: { 204: { description: 'Unsubscribed' } },
      handler: async ({ params, principal }) => {
        if (!(await webhooks.unsubscribe(ownerOf(principal).organizationId, params.subscription_id))) {
          throw notFound(`No active subscription ${params.subscription_id}`);
        }
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'post',
      path: `${BASE}/subscriptions/{subscription_id}/rotate-secret`,
      operationId: 'rotateWebhookSecret',
      summary: "Replace a subscription's signing secret; deliveries carry both signatures for an overlap",
      description:
        'Until `previous_secret_expires_at` (`overlap_seconds`, default 86400; 0: at once) every delivery is signed ' +
        'with both secrets, the new one first: `X-Service-Signature: t=…,v1=<new>,v1=<old>`; a receiver accepts a ' +
        'delivery when any `v1` matches its secret, so it can switch secrets at any time within the overlap. A secret ' +
        'replaced by an earlier rotation signs nothing more. The new secret is returned in this response only and ' +
        'stored encrypted. Another organisation\'s subscription is 404.',
      tags,
      security,
      params: SubscriptionParams,
      body: SecretRotationRequest,
      responses: { 200: { description: 'The new secret', schema: SecretRotated }, 404: { description: 'No such active subscription of this organisation' } },
      secretFields: { fields: ['webhook_secret'], key: config.webhooks.secretKey },
      handler: async ({ params, body, principal, repo }) => {
        const organizationId = ownerOf(principal).organizationId;
        const rotated = await repo.transaction((sql) =>
          rotateSubscriptionSecret(sql, config.webhooks.secretKey, organizationId, params.subscription_id, body.overlap_seconds),
        );
        if (!rotated) throw notFound(`No active subscription ${params.subscription_id}`);
        return { body: rotated };
      },
    }),
    defineRoute({
      method: 'post',
      path: `${BASE}/events/{event_id}/replay`,
      operationId: 'replayWebhookEvent',
      summary: "Deliver an event again to the caller's subscriptions",
      description:
        'Same event id, fresh timestamp and signature; a new round of up to 7 attempts starting now, also after ' +
        '`exhausted`. Unknown events and events the organisation is not entitled to are 404; 409 when no active ' +
        'subscription of the organisation receives the event type.',
      tags,
      security,
      params: EventParams,
      responses: { 202: { description: 'Queued for delivery', schema: Replayed } },
      handler: async ({ params, principal, repo }) => {
        const result = await repo.transaction((sql) => replayEvent(sql, ownerOf(principal).organizationId, params.event_id));
        if (result.outcome === 'not-found') throw unknownEvent(params.event_id);
        if (result.outcome === 'no-subscription') {
          throw new ApiError(409, ErrorCode.conflict, `No active subscription of this organisation receives ${result.type} events`);
        }
        return { status: 202, body: { event_id: params.event_id, deliveries: result.deliveries } };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${BASE}/deliveries`,
      operationId: 'listWebhookDeliveries',
      summary: "The caller organisation's deliveries, newest first (status=exhausted: what to replay)",
      tags,
      security,
      query: z
        .object({
          status: DeliveryStatusSchema.optional(),
          subscription_id: z.string().max(200).optional(),
          limit: z.coerce.number().int().min(1).max(100).default(50),
          cursor: z.string().max(200).optional().describe('next_cursor of the previous page'),
        })
        .strict(),
      responses: { 200: { description: 'A page of deliveries with their attempts', schema: DeliveryPage } },
      handler: async ({ query, principal }) => ({
        body: await webhooks.listDeliveries({
          organizationId: ownerOf(principal).organizationId,
          status: query.status,
          subscriptionId: query.subscription_id,
          cursor: query.cursor,
          limit: query.limit,
        }),
      }),
    }),
    defineRoute({
      method: 'get',
      path: `${BASE}/events/{event_id}/deliveries`,
      operationId: 'listWebhookEventDeliveries',
      summary: "An event's deliveries to the caller's subscriptions, with every attempt",
      description: 'Shows status (pending, delivered, exhausted, cancelled), each attempt\'s time, HTTP status or error and duration: what to replay.',
      tags,
      security,
      params: EventParams,
      responses: { 200: { description: 'Deliveries and attempts', schema: EventDeliveries } },
      handler: async ({ params, principal }) => {
        const found = await webhooks.eventDeliveries(ownerOf(principal).organizationId, params.event_id);
        if (!found) throw unknownEvent(params.event_id);
        return { body: found };
      },
    }),
  ];
}
