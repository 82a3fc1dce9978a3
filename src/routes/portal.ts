import { z } from 'zod';
import type { PortalPrincipal } from '../core/principal';
import { ApiError, ErrorCode } from '../http/errors';
import { mediaType, readBody } from '../http/body';
import { ErrorSchema } from '../http/openapi';
import { defineRoute, type RouteSpec, type Security } from '../http/routes';
import type { Services } from '../http/services';
import { SignInRefused } from '../auth/portal-accounts';
import { ActivityFilter, Invitation, NewAgent, NewClient, NewSubscription, Overlap, OVERLAPS, portalActions, Since } from '../portal/actions';
import { activityCsv } from '../portal/csv';
import { authorizeSession, clearSessionCookie, sessionIdOf, setSessionCookie } from '../auth/portal-session';

export const PORTAL_API = '/api/v1/portal';
const tags = ['Portal'];
const session: Security = { kind: 'session' };
const admin: Security = { kind: 'session', role: 'admin' };
const me = (principal: unknown) => principal as PortalPrincipal;

const Id = (name: string, prefix: string) => z.object({ [name]: z.string().max(200).describe(`${prefix}…`) });
const RotateBody = z.object({ overlap: Overlap.default('24h').describe('How long the replaced secret stays valid: now, 1h, 24h or 7d') }).strict();
const SignIn = z.object({ email: z.string().max(320), password: z.string().max(1024) }).strict().meta({ id: 'PortalSignIn' });
const SessionView = z
  .object({
    user: z.object({ id: z.string(), organization_id: z.string(), email: z.string(), role: z.enum(['admin', 'developer', 'viewer']) }),
    csrf_token: z.string().describe('Send it in X-CSRF-Token with every state-changing request'),
    expires_at: z.string().describe('When the session ends at the latest (PONT_PORTAL_SESSION_MAX after sign-in, default 12 h; it also ends after PONT_PORTAL_SESSION_IDLE without a request, default 30 minutes)'),
  })
  .meta({ id: 'PortalSession' });
const ok = (description: string, schema?: z.ZodType) => ({ 200: { description, schema } });

const Client = z
  .object({
    client_id: z.string(),
    name: z.string(),
    organization_id: z.string(),
    facility_id: z.string().nullable(),
    scopes: z.array(z.string()),
    all_patients: z.boolean().describe('Reads every patient without consent (an operator client, made only with `pont clients create --all-patients`)'),
    created_at: z.string(),
    revoked_at: z.string().nullable(),
    previous_secret_expires_at: z.string().nullable(),
    last_used_at: z.string().nullable().describe('When the client last got a token'),
    token_endpoint_auth_method: z.enum(['client_secret', 'private_key_jwt']).describe('How it authenticates: a secret, or signed assertions checked against its key set (jwks or jwks_uri)'),
    jwks: z.object({ keys: z.array(z.record(z.string(), z.unknown())) }).nullable().describe('Its public keys, when registered with a key set (never private material)'),
    jwks_uri: z.string().nullable().describe('Where its public keys are published, when registered so'),
  })
  .meta({ id: 'PortalClient' });
const Agent = z
  .object({
    agent_id: z.string(),
    facility_id: z.string(),
    last_seen_at: z.string().nullable(),
    last_version: z.string().nullable(),
    clock_skew_seconds: z.number().int().nullable().describe("The agent's X-Bridge-Timestamp less server time at its last heartbeat"),
    revoked_at: z.string().nullable(),
    recent_batches: z.array(z.object({ batch_id: z.string(), created_at: z.string(), counts: z.record(z.string(), z.number()).nullable(), errors: z.array(z.string()) })),
  })
  .meta({ id: 'PortalAgent' });
const Activity = z
  .object({
    at: z.string(),
    who: z.string().describe('Client id, or the portal user'),
    health_id: z.string().nullable(),
    what: z.string().describe('The operation'),
    action: z.enum(['create', 'read', 'update', 'delete', 'execute']),
    purpose: z.string().nullable(),
    break_glass: z.boolean(),
  })
  .meta({ id: 'PortalActivity' });
const PortalUser = z
  .object({ id: z.string(), organization_id: z.string(), email: z.string(), role: z.enum(['admin', 'developer', 'viewer']), active: z.boolean(), created_at: z.string() })
  .meta({ id: 'PortalUser' });

/**
 * The portal's JSON routes (SessionAuth): what the pages do, for scripts and progressive enhancement. Each calls
 * the same portal action as its page (src/portal/actions.ts).
 */
export function portalRoutes(services: Services): RouteSpec[] {
  const actions = portalActions(services);
  const { access, config } = services;
  return [
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/sign-in`,
      operationId: 'portalSignIn',
      summary: 'Sign in to the developer portal: sets the session cookie, answers the CSRF token',
      description:
        'A wrong password, an unknown e-mail and an account without a password yet are answered alike (401), after one Argon2id verification each. Each attempt is counted before its password is checked; after 5 failures of an account, or 30 from an address, in 15 minutes: 429, the right password too, until the window ends. A new session id every time (no fixation).',
      tags,
      group: 'portal-sign-in',
      security: { kind: 'public' },
      rawBody: { schema: SignIn, contentTypes: ['application/json'] },
      responses: { 200: { description: 'Signed in', schema: SessionView }, 401: { description: 'Wrong e-mail or password' }, 415: { description: 'Not application/json' }, 429: { description: 'Too many failed sign-ins' } },
      handler: async ({ ctx }) => {
        // JSON only: a cross-site form cannot send it without a CORS preflight, which Pont never allows (no login CSRF).
        // Said, not assumed: readBody takes a body without a Content-Type as JSON, and a cross-site no-cors fetch of a Blob sends none.
        if (mediaType(ctx) !== 'application/json') throw new ApiError(415, ErrorCode.unsupportedMediaType, 'Send the sign-in as application/json');
        const parsed = SignIn.safeParse((await readBody(ctx, config.maxBodyBytes)) ?? {});
        if (!parsed.success) throw new ApiError(422, ErrorCode.validationFailed, 'Send {"email": "…", "password": "…"}');
        try {
          const { sessionId, session: s } = await access.portal.signIn(parsed.data.email, parsed.data.password, ctx.ip);
          await access.portal.signOut(sessionIdOf(ctx, config)); // a session the browser carried ends
          setSessionCookie(ctx, config, sessionId);
          return { body: { user: portalPrincipalView(s.user), csrf_token: s.csrfToken, expires_at: new Date(s.expiresAt).toISOString() } };
        } catch (err) {
          if (!(err instanceof SignInRefused)) throw err;
          if (err.retryAfterSeconds)
            throw new ApiError(429, ErrorCode.rateLimited, 'Too many failed sign-ins; try again later', { extra: { retry_after: err.retryAfterSeconds }, headers: { 'Retry-After': String(err.retryAfterSeconds) } });
          throw new ApiError(401, ErrorCode.unauthenticated, 'Wrong e-mail or password');
        }
      },
    }),
    defineRoute({
      method: 'get',
      path: `${PORTAL_API}/session`,
      operationId: 'portalSession',
      summary: 'The signed-in person and the CSRF token of their session',
      tags,
      security: session,
      responses: { 200: { description: 'The session', schema: SessionView } },
      handler: async ({ ctx }) => {
        const s = await authorizeSession(ctx, access.portal, config, {});
        return { body: { user: portalPrincipalView(s.user), csrf_token: s.csrfToken, expires_at: new Date(s.expiresAt).toISOString() } };
      },
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/sign-out`,
      operationId: 'portalSignOut',
      summary: 'End the session (its row is deleted)',
      tags,
      security: { kind: 'session', role: 'viewer' },
      responses: { 204: { description: 'Signed out' } },
      handler: async ({ ctx }) => {
        await access.portal.signOut(sessionIdOf(ctx, config));
        clearSessionCookie(ctx, config);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${PORTAL_API}/clients`,
      operationId: 'portalListClients',
      summary: "The organisation's integration clients, with when each last got a token",
      tags,
      security: session,
      responses: ok('Clients (never a secret)', z.object({ clients: z.array(Client) })),
      handler: async ({ principal }) => ({ body: { clients: await actions.clients(me(principal)) } }),
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/clients`,
      operationId: 'portalCreateClient',
      summary: 'Create an integration client of the organisation; the secret is in this answer only',
      tags,
      security: session,
      body: NewClient,
      responses: { 201: { description: 'Created, with client_secret' } },
      handler: async ({ principal, repo, body }) => ({ status: 201, body: await actions.createClient(me(principal), repo, body) }),
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/clients/{client_id}/rotate-secret`,
      operationId: 'portalRotateClientSecret',
      summary: "Replace a client's secret; the old one stays valid for the overlap chosen",
      description:
        'Answers `{client_id, client_secret, previous_secret_expires_at}`: the new secret, in this answer only. A client ' +
        'registered with a key set (SMART Backend Services, `pont clients create … --jwks FILE` or `--jwks-uri URL`) has ' +
        'no secret: 409, whose message says how its keys are rotated (a new key published at its jwks_uri; an inline ' +
        'set, by the Pont operator registering it again). A revoked client, and any client of another organisation, are 404.',
      tags,
      security: session,
      params: Id('client_id', 'cli_'),
      body: RotateBody,
      responses: {
        200: { description: 'The new secret (this answer only)' },
        404: { description: 'No active client of this id in the organisation (revoked, unknown, or of another organisation)', schema: ErrorSchema },
        409: { description: 'The client is registered with a key set: it has no secret; the message says how its keys are rotated (CONFLICT)', schema: ErrorSchema },
      },
      handler: async ({ principal, repo, params, body }) => ({ body: await actions.rotateClient(me(principal), repo, params.client_id as string, OVERLAPS[body.overlap]) }),
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/clients/{client_id}/revoke`,
      operationId: 'portalRevokeClient',
      summary: 'Revoke a client: its secret and tokens stop working at once',
      tags,
      security: session,
      params: Id('client_id', 'cli_'),
      responses: ok('Revoked'),
      handler: async ({ principal, params }) => ({ body: await actions.revokeClient(me(principal), params.client_id as string) }),
    }),
    defineRoute({
      method: 'get',
      path: `${PORTAL_API}/webhooks/subscriptions`,
      operationId: 'portalListSubscriptions',
      summary: "The organisation's active webhook subscriptions",
      tags,
      security: session,
      responses: ok('Subscriptions (never a secret)'),
      handler: async ({ principal }) => ({ body: { subscriptions: await actions.subscriptions(me(principal)) } }),
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/webhooks/subscriptions`,
      operationId: 'portalSubscribe',
      summary: 'Subscribe an endpoint; the webhook secret is in this answer only',
      tags,
      security: session,
      body: NewSubscription,
      responses: { 201: { description: 'Subscribed, with webhook_secret' } },
      handler: async ({ principal, repo, body }) => ({ status: 201, body: await actions.subscribe(me(principal), repo, body) }),
    }),
    defineRoute({
      method: 'delete',
      path: `${PORTAL_API}/webhooks/subscriptions/{subscription_id}`,
      operationId: 'portalUnsubscribe',
      summary: 'Unsubscribe an endpoint (its pending deliveries are cancelled)',
      tags,
      security: session,
      params: Id('subscription_id', 'whsub_'),
      responses: { 204: { description: 'Unsubscribed' } },
      handler: async ({ principal, params }) => {
        await actions.unsubscribe(me(principal), params.subscription_id as string);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/webhooks/subscriptions/{subscription_id}/rotate-secret`,
      operationId: 'portalRotateWebhookSecret',
      summary: "Replace a subscription's signing secret; deliveries carry both signatures for the overlap",
      tags,
      security: session,
      params: Id('subscription_id', 'whsub_'),
      body: RotateBody,
      responses: ok('The new secret (this answer only)'),
      handler: async ({ principal, repo, params, body }) => ({
        body: await actions.rotateSubscription(me(principal), repo, params.subscription_id as string, OVERLAPS[body.overlap]),
      }),
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/webhooks/subscriptions/{subscription_id}/test`,
      operationId: 'portalSendTestEvent',
      summary: "Send a test event (the subscription's first event type, data.test: true) through the delivery worker",
      tags,
      security: session,
      params: Id('subscription_id', 'whsub_'),
      responses: { 202: { description: 'The event, queued for delivery' } },
      handler: async ({ principal, repo, params }) => ({ status: 202, body: await actions.sendTestEvent(me(principal), repo, params.subscription_id as string) }),
    }),
    defineRoute({
      method: 'get',
      path: `${PORTAL_API}/webhooks/deliveries`,
      operationId: 'portalListDeliveries',
      summary: "The organisation's deliveries, newest first, with every attempt and the first 1 KB of each answer",
      tags,
      security: session,
      query: z
        .object({
          status: z.enum(['pending', 'delivered', 'exhausted', 'cancelled']).optional(),
          subscription_id: z.string().max(200).optional(),
          cursor: z.string().max(200).optional(),
        })
        .strict(),
      responses: ok('A page of deliveries'),
      handler: async ({ principal, query }) => ({ body: await actions.deliveries(me(principal), { status: query.status, subscriptionId: query.subscription_id, cursor: query.cursor }) }),
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/webhooks/events/{event_id}/replay`,
      operationId: 'portalReplayEvent',
      summary: "Deliver an event again to the organisation's subscriptions",
      tags,
      security: session,
      params: Id('event_id', 'evt_'),
      responses: { 202: { description: 'Queued' } },
      handler: async ({ principal, repo, params }) => ({ status: 202, body: await actions.replay(me(principal), repo, params.event_id as string) }),
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/webhooks/replay-exhausted`,
      operationId: 'portalReplayExhausted',
      summary: 'Replay every event whose delivery was exhausted at or after `since`',
      tags,
      security: session,
      body: z.object({ since: Since }).strict(),
      responses: { 202: { description: 'The events replayed' } },
      handler: async ({ principal, repo, body }) => ({ status: 202, body: await actions.replayExhausted(me(principal), repo, new Date(body.since)) }),
    }),
    defineRoute({
      method: 'get',
      path: `${PORTAL_API}/agents`,
      operationId: 'portalListAgents',
      summary: "The organisation's Bridge agents: last heartbeat, version, recent sync batches with failures",
      tags,
      security: session,
      responses: ok('Agents (never a key)', z.object({ agents: z.array(Agent) })),
      handler: async ({ principal }) => ({ body: { agents: await actions.agents(me(principal)) } }),
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/agents`,
      operationId: 'portalCreateAgent',
      summary: 'Create a Bridge agent of a facility; the key is in this answer only',
      tags,
      security: session,
      body: NewAgent,
      responses: { 201: { description: 'Created, with agent_key' } },
      handler: async ({ principal, repo, body }) => ({ status: 201, body: await actions.createAgent(me(principal), repo, body) }),
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/agents/{agent_id}/revoke`,
      operationId: 'portalRevokeAgent',
      summary: 'Revoke a Bridge agent: its key stops working at once',
      tags,
      security: session,
      params: Id('agent_id', 'agt_'),
      responses: ok('Revoked'),
      handler: async ({ principal, params }) => ({ body: await actions.revokeAgent(me(principal), params.agent_id as string) }),
    }),
    defineRoute({
      method: 'get',
      path: `${PORTAL_API}/activity`,
      operationId: 'portalActivity',
      summary: "The organisation's own accesses to patient data (audit trail), newest first; format=csv for a CSV file",
      tags,
      security: session,
      query: ActivityFilter.extend({ format: z.enum(['json', 'csv']).default('json') }),
      responses: { 200: { description: 'Activity rows (at most 500), or text/csv with format=csv', schema: z.object({ activity: z.array(Activity) }) } },
      handler: async ({ repo, query }) => {
        const rows = await actions.activity(repo, query);
        if (query.format === 'csv') {
          return { body: activityCsv(rows), contentType: 'text/csv; charset=utf-8', headers: { 'Content-Disposition': 'attachment; filename="activity.csv"' } };
        }
        return { body: { activity: rows } };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${PORTAL_API}/consents`,
      operationId: 'portalConsentCounts',
      summary: "Counts of the organisation's consents by state, type and purpose of use",
      tags,
      security: session,
      responses: ok(
        'Counts',
        z.object({
          counts: z.array(
            z.object({
              state: z.string(),
              consent_type: z.string(),
              purpose_of_use: z.string().describe('HL7 v3 ActReason code (CAREMGT for consents made before artefacts)'),
              count: z.number().int(),
              narrowed: z.number().int().describe('How many of them name kinds of record, a period of care or a frequency'),
            }),
          ),
        }),
      ),
      handler: async ({ principal, repo }) => ({ body: { counts: await actions.consentCounts(me(principal), repo) } }),
    }),
    defineRoute({
      method: 'get',
      path: `${PORTAL_API}/users`,
      operationId: 'portalListUsers',
      summary: "The organisation's portal users (admin)",
      tags,
      security: admin,
      responses: ok('Users', z.object({ users: z.array(PortalUser) })),
      handler: async ({ principal }) => ({ body: { users: await actions.users(me(principal)) } }),
    }),
    defineRoute({
      method: 'post',
      path: `${PORTAL_API}/users`,
      operationId: 'portalInviteUser',
      summary: 'Invite a person of the organisation (admin): answers their one-time set-password link (24 h)',
      description:
        "An address that has a portal account already (of any organisation) is answered alike (201, a made-up user and a link that works nowhere) and nothing changes: the answer does not tell which addresses hold accounts. The clash is logged for the operator.",
      tags,
      security: admin,
      body: Invitation,
      responses: { 201: { description: 'Invited', schema: z.object({ user: PortalUser, set_password_link: z.string().describe('One-time, valid 24 h') }) } },
      handler: async ({ principal, body }) => ({ status: 201, body: await actions.invite(me(principal), body) }),
    }),
  ];
}

const portalPrincipalView = (user: { id: string; organization_id: string; email: string; role: string }) => ({
  id: user.id,
  organization_id: user.organization_id,
  email: user.email,
  role: user.role,
});
