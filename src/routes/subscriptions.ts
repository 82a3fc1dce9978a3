import type { Context } from 'koa';
import { z } from 'zod';
import type { ClientPrincipal, Principal } from '../core/principal';
import { readBody } from '../http/body';
import { ApiError, badRequest, ErrorCode, notFound } from '../http/errors';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../http/services';
import { FHIR_BASE_PATH as FHIR_BASE } from '../fhir/service';
import { topicAsBasic, topicUrl } from '../subscriptions/topics';

/**
 * FHIR Subscriptions (R5 Backport IG STU 1.1 for R4; docs/fhir.md "Subscriptions"): the topics, the Subscription
 * resource of the caller's organisation, $status, $events and $get-ws-binding-token. Mounted before the FHIR routes
 * (`Subscription/{id}/$status` would match `/{type}/{id}/…`).
 */
const FHIR_JSON = 'application/fhir+json';
const ok = (description: string) => ({ description, schema: { type: 'object' }, contentType: FHIR_JSON });
const fhirResult = (body: unknown, status = 200, headers: Record<string, string> = {}) => ({ status, body, headers, contentType: FHIR_JSON });
const tags = ['FHIR'];
const IdParams = z.object({ id: z.string().max(64).describe('Subscription id') });
/** How long a websocket binding token may be used (once). */
const WS_TOKEN_SECONDS = 60;

const client = (principal: Principal | undefined): ClientPrincipal => principal as ClientPrincipal;

/**
 * The parameters of an operation's POST body: none without a body, else it is a Parameters resource whose `parameter`
 * is an array (a body of another shape is refused, not read as naming nothing: $status would answer every subscription).
 */
function bodyParameters(body: unknown): Array<Record<string, unknown>> {
  if (body === undefined) return [];
  const parameter = (body as { parameter?: unknown } | null)?.parameter;
  if (!body || typeof body !== 'object' || Array.isArray(body) || (body as { resourceType?: unknown }).resourceType !== 'Parameters' || (parameter !== undefined && !Array.isArray(parameter)))
    throw badRequest('The body of this operation is a Parameters resource (parameter an array)');
  return ((parameter ?? []) as unknown[]).map((p) => {
    if (!p || typeof p !== 'object' || Array.isArray(p)) throw badRequest('Each parameter of the Parameters body is an object');
    return p as Record<string, unknown>;
  });
}

/** A number parameter of an operation, from the query or a Parameters body. */
function numberParam(ctx: Context, body: unknown, name: string): number | undefined {
  const fromBody = bodyParameters(body).find((p) => p.name === name) as { valueString?: string; valueInteger?: number; valueUnsignedInt?: number } | undefined;
  const raw = ctx.query[name] ?? fromBody?.valueString ?? fromBody?.valueInteger ?? fromBody?.valueUnsignedInt;
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (Array.isArray(raw) || !Number.isSafeInteger(n) || n < 0) throw badRequest(`${name} must be a whole number, given once`);
  return n;
}

/** A repeatable parameter of an operation: every `name` of the query and of a Parameters body (valueId, valueCode, valueString). */
function listParam(ctx: Context, body: unknown, name: string): string[] {
  const query = ctx.query[name];
  const fromQuery = query === undefined ? [] : Array.isArray(query) ? query : [query];
  const fromBody = bodyParameters(body)
    .filter((p) => p.name === name)
    .map((p) => p.valueId ?? p.valueCode ?? p.valueString);
  const values = [...fromQuery, ...fromBody];
  if (values.some((v) => typeof v !== 'string' || !v || v.length > 64)) throw badRequest(`${name} must be a list of ids or codes (at most 64 characters each)`);
  return values as string[];
}

/**
 * The search of Subscription: `url` (its channel's endpoint) and `status`, each once, values joined by commas (OR).
 * Any other parameter is refused, as the FHIR search does (an ignored one would answer more than was asked).
 */
function subscriptionSearch(ctx: Context): { url?: string[]; status?: string[] } {
  const out: { url?: string[]; status?: string[] } = {};
  for (const [name, raw] of Object.entries(ctx.query)) {
    if (name === '_format' || name === '_pretty') continue;
    if (name !== 'url' && name !== 'status') throw badRequest(`Search parameter ${name.slice(0, 64)} is not supported for Subscription (url, status)`);
    if (typeof raw !== 'string' || raw.length > 4096) throw badRequest(`${name} must be given once`);
    out[name] = raw.split(',').filter(Boolean);
  }
  return out;
}

export function subscriptionRoutes(services: Services): RouteSpec[] {
  const subs = services.subscriptions;
  const body = async (ctx: Context) => (ctx.method === 'POST' ? await readBody(ctx, services.config.maxBodyBytes) : undefined);
  /**
   * An operation's GET and POST routes, on an instance (`Subscription/{id}/$name`) or, with `id` undefined, on the type
   * (`Subscription/$name`, registered before `Subscription/{id}`: $status of several, a token for several).
   */
  const operationRoutes = (
    level: 'type' | 'instance',
    name: string,
    summary: string,
    run: (ctx: Context, principal: ClientPrincipal, body: unknown, id: string | undefined) => Promise<unknown>,
  ): RouteSpec[] =>
    (['get', 'post'] as const).map((method) =>
      defineRoute({
        method,
        path: `${FHIR_BASE}/Subscription/${level === 'instance' ? '{id}/' : ''}$${name}`,
        operationId: `fhirSubscription${level === 'type' ? 'Type' : ''}${name.replace(/(^|-)(\w)/g, (_m, _d, c: string) => c.toUpperCase())}${method === 'post' ? 'Post' : ''}`,
        summary,
        tags,
        fhir: true,
        security: { kind: 'client' },
        group: 'fhir',
        ...(level === 'instance' && { params: IdParams }),
        ...(method === 'post' && { rawBody: { schema: { type: 'object' }, contentTypes: [FHIR_JSON, 'application/json'], required: false } }),
        responses:
          level === 'instance'
            ? { 200: ok(summary), 404: ok('Not found (or another organisation’s)') }
            : { 200: ok(summary), 400: ok('A parameter is not valid'), 404: ok('A subscription named is not found (or another organisation’s)') },
        handler: async ({ ctx, params, principal }) => fhirResult(await run(ctx, client(principal), await body(ctx), (params as { id?: string } | undefined)?.id)),
      }),
    );
  const operations = (name: string, summary: string, run: (ctx: Context, principal: ClientPrincipal, id: string, body: unknown) => Promise<unknown>) =>
    operationRoutes('instance', name, summary, (ctx, principal, b, id) => run(ctx, principal, id!, b));
  const typeOperations = (name: string, summary: string, run: (ctx: Context, principal: ClientPrincipal, body: unknown) => Promise<unknown>) =>
    operationRoutes('type', name, summary, (ctx, principal, b) => run(ctx, principal, b));

  return [
    ...typeOperations('status', '$status of the organisation’s subscriptions (id, status: repeatable): a searchset Bundle of SubscriptionStatus', (ctx, p, b) =>
      subs.statusBundleMany(p, listParam(ctx, b, 'id'), listParam(ctx, b, 'status')),
    ),
    ...typeOperations('get-ws-binding-token', '$get-ws-binding-token for the websocket subscriptions named by id (repeatable, at most 20): one token binds them all', (ctx, p, b) =>
      subs.bindingToken(p, listParam(ctx, b, 'id'), WS_TOKEN_SECONDS),
    ),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/SubscriptionTopic`,
      operationId: 'fhirSubscriptionTopics',
      summary: 'The SubscriptionTopics this server publishes (as R4 Basic resources, Backport IG)',
      tags,
      fhir: true,
      security: { kind: 'public' },
      responses: { 200: ok('searchset Bundle of Basic') },
      handler: async () => {
        const base = services.config.publicUrl;
        return fhirResult({
          resourceType: 'Bundle',
          type: 'searchset',
          total: subs.topics.length,
          entry: subs.topics.map((t) => ({ fullUrl: topicUrl(base, t.id), resource: topicAsBasic(base, t), search: { mode: 'match' } })),
        });
      },
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/SubscriptionTopic/{id}`,
      operationId: 'fhirSubscriptionTopic',
      summary: 'One SubscriptionTopic (its canonical URL), as an R4 Basic resource',
      tags,
      fhir: true,
      security: { kind: 'public' },
      params: z.object({ id: z.string().max(64) }),
      responses: { 200: ok('Basic'), 404: ok('No such topic') },
      handler: async ({ params }) => {
        const topic = subs.topic(params.id);
        if (!topic) throw notFound(`SubscriptionTopic/${params.id} is not published here`);
        return fhirResult(topicAsBasic(services.config.publicUrl, topic), 200, { 'Cache-Control': 'public, max-age=300' });
      },
    }),
    defineRoute({
      method: 'post',
      path: `${FHIR_BASE}/Subscription`,
      operationId: 'fhirSubscriptionCreate',
      summary: 'Subscribe to a topic (backport-subscription profile): rest-hook (handshake, then active) or websocket',
      description: 'Subscription.criteria is a topic canonical (GET SubscriptionTopic); filters in _criteria backport-filter-criteria extensions; content empty, id-only or full-resource; every content needs a token that reads the topic’s resource type, as does every use of the subscription. See docs/fhir.md "Subscriptions".',
      tags,
      fhir: true,
      security: { kind: 'client' },
      group: 'fhir',
      rawBody: { schema: { type: 'object' }, contentTypes: [FHIR_JSON, 'application/json'] },
      responses: { 201: ok('Created, status requested (rest-hook) or active (websocket)'), 400: ok('Not a subscription this server takes') },
      handler: async ({ ctx, principal }) => {
        const created = await subs.create(client(principal), await readBody(ctx, services.config.maxBodyBytes));
        return fhirResult(created, 201, { Location: `${services.config.publicUrl}${FHIR_BASE}/Subscription/${created.id}` });
      },
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/Subscription`,
      operationId: 'fhirSubscriptionList',
      summary: "The organisation's Subscriptions",
      tags,
      fhir: true,
      security: { kind: 'client' },
      group: 'fhir',
      responses: { 200: ok('searchset Bundle'), 400: ok('A search parameter it does not have') },
      handler: async ({ ctx, principal }) => fhirResult(await subs.list(client(principal), subscriptionSearch(ctx))),
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/Subscription/{id}`,
      operationId: 'fhirSubscriptionRead',
      summary: 'Read a Subscription (its status: requested, active, error, off)',
      tags,
      fhir: true,
      security: { kind: 'client' },
      group: 'fhir',
      params: IdParams,
      responses: { 200: ok('Subscription'), 404: ok('Not found (or another organisation’s)') },
      handler: async ({ params, principal }) => fhirResult(await subs.read(client(principal), params.id)),
    }),
    defineRoute({
      method: 'delete',
      path: `${FHIR_BASE}/Subscription/{id}`,
      operationId: 'fhirSubscriptionDelete',
      summary: 'Delete a Subscription: nothing more is numbered or sent',
      tags,
      fhir: true,
      security: { kind: 'client' },
      group: 'fhir',
      params: IdParams,
      responses: { 204: { description: 'Deleted' }, 404: ok('Not found (or another organisation’s)') },
      handler: async ({ params, principal }) => {
        await subs.delete(client(principal), params.id);
        return { status: 204 };
      },
    }),
    // A Subscription is not updated in place (its topic, channel and numbers are fixed at creation): delete and create.
    ...(['put', 'patch'] as const).map((method) =>
      defineRoute({
        method,
        path: `${FHIR_BASE}/Subscription/{id}`,
        operationId: `fhirSubscription${method === 'put' ? 'Update' : 'Patch'}`,
        summary: 'Not supported: delete the Subscription and create another',
        tags,
        fhir: true,
        security: { kind: 'client' },
        group: 'fhir',
        params: IdParams,
        responses: { 405: ok('Not supported') },
        handler: async () => {
          throw new ApiError(405, ErrorCode.methodNotAllowed, 'A Subscription is not updated: DELETE it and POST another', { headers: { Allow: 'GET, DELETE' } });
        },
      }),
    ),
    ...operations('status', '$status: the SubscriptionStatus (searchset Bundle)', (_ctx, p, id) => subs.statusBundle(p, id)),
    ...operations('events', '$events: stored notification events by number (eventsSinceNumber, eventsUntilNumber, content)', (ctx, p, id, b) => {
      const content = ctx.query.content ?? bodyParameters(b).find((x) => x.name === 'content')?.valueCode;
      if (content !== undefined && typeof content !== 'string') throw badRequest('content is empty, id-only or full-resource, given once');
      return subs.eventsBundle(p, id, numberParam(ctx, b, 'eventsSinceNumber'), numberParam(ctx, b, 'eventsUntilNumber'), content);
    }),
    ...operations('get-ws-binding-token', '$get-ws-binding-token: a one-use token to bind a websocket to this subscription', (_ctx, p, id) =>
      subs.bindingToken(p, id, WS_TOKEN_SECONDS),
    ),
  ];
}
