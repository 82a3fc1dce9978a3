import type { AuditEvent } from '@medplum/fhirtypes';
import { z } from 'zod';
import { createAgent, facilityTakenByAnother } from '../auth/agents';
import { createClient, EntityId, keyRotation, MAX_SECRET_OVERLAP_SECONDS, noSecretToRotate, rotateClientSecret, type ClientRecord } from '../auth/clients';
import type { PortalPrincipal } from '../core/principal';
import { SCOPES, SCOPE_RISK } from '../core/scopes';
import { ORGANIZATION_ID_SYSTEM, CLIENT_ID_SYSTEM, OPERATION_SYSTEM } from '../audit/audit';
import { EVENT_TYPES } from '../events/types';
import { recordEvent } from '../events/outbox';
import type { FhirRepository } from '../fhir/repository';
import { HEALTH_ID_SYSTEM } from '../healthid/healthid';
import { ApiError, ErrorCode, notFound } from '../core/errors';
import type { Services } from '../http/services';
import { replayEvent } from '../webhooks/deliveries';
import { checkedAddress, DestinationRefused } from '../webhooks/destination';
import { callbackUrlProblem, createSubscription, rotateSubscriptionSecret } from '../webhooks/subscriptions';
import { Email, PORTAL_ROLES, setPasswordLink } from '../auth/portal-accounts';
import { ConsentService } from '../consents/service';

/**
 * What the developer portal does, for its JSON routes (src/routes/portal.ts) and its pages (src/portal/pages.ts)
 * alike: every operation acts within the signed-in person's organisation, through the same service objects as the
 * integrator routes (services.access, services.webhooks, the request's FHIR repository and so the policy).
 * Another organisation's object is answered as missing (404).
 */

/** The overlaps a person picks when rotating a secret. */
export const OVERLAPS = { now: 0, '1h': 3600, '24h': 86_400, '7d': 604_800 } as const;
export const Overlap = z.enum(Object.keys(OVERLAPS) as [keyof typeof OVERLAPS, ...Array<keyof typeof OVERLAPS>]);

/**
 * How the portal's people rotate the keys of a client registered with an inline key set: the portal takes no keys, so
 * their Pont operator registers it again (`pont clients create … --jwks`), and they revoke the old one here.
 */
const REGISTER_AGAIN = 'ask your Pont operator to register it again with the new public keys (the portal takes no key sets), use the new client id, then revoke this one';

/** For the clients page: how a client registered with a key set has its keys rotated; undefined for a client with a secret. */
export const keyRotationOf = (client: Pick<ClientRecord, 'jwks' | 'jwks_uri'>) => keyRotation(client, REGISTER_AGAIN);

export const NewClient = z
  .object({
    name: z.string().trim().min(1, 'give the client a name').max(200),
    scopes: z.array(z.enum(SCOPES)).min(1, 'choose at least one scope').max(SCOPES.length),
    facility_id: z.union([z.literal(''), EntityId]).optional(),
  })
  .strict();

export const NewSubscription = z
  .object({
    callback_url: z.string().trim().min(1, 'give the URL that receives the deliveries').max(2048),
    subscribed_events: z.array(z.enum(EVENT_TYPES)).min(1, 'choose at least one event type').max(EVENT_TYPES.length),
    description: z.string().max(500).optional(),
  })
  .strict();

export const NewAgent = z.object({ facility_id: EntityId }).strict();
export const Invitation = z.object({ email: Email, role: z.enum(PORTAL_ROLES) }).strict();

/** ISO 8601 date-time or date (a form's datetime-local gives `2026-01-31T10:00`). */
export const Since = z
  .string()
  .trim()
  .max(40)
  .refine((v) => !Number.isNaN(Date.parse(v)), 'give a date and time, such as 2026-01-31T10:00');

export const ActivityFilter = z
  .object({
    health_id: z.string().trim().max(64).regex(/^[A-Za-z0-9-]*$/, 'a Health ID has letters, digits and dashes').optional(),
    from: z.union([z.literal(''), z.iso.date()]).optional(),
    to: z.union([z.literal(''), z.iso.date()]).optional(),
  })
  .strict();
export type ActivityFilter = z.infer<typeof ActivityFilter>;

/** A field's problem, shown next to it (pages) or in `details` (JSON). */
export class FieldProblem extends ApiError {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(422, ErrorCode.validationFailed, `${field}: ${message}`, { extra: { details: [{ field: `body.${field}`, message }] } });
  }
}

export interface ActivityRow {
  at: string;
  who: string;
  health_id: string | null;
  what: string;
  action: string;
  purpose: string | null;
  break_glass: boolean;
}

const ACTIONS: Record<string, string> = { C: 'create', R: 'read', U: 'update', D: 'delete', E: 'execute' };

function activityRow(event: AuditEvent): ActivityRow {
  const agentOf = (system: string) => event.agent?.find((a) => a.who?.identifier?.system === system)?.who?.identifier?.value;
  const person = event.agent?.find((a) => a.altId?.startsWith('portal:'))?.who?.display;
  return {
    at: event.recorded,
    who: agentOf(CLIENT_ID_SYSTEM) ?? person ?? agentOf(ORGANIZATION_ID_SYSTEM) ?? 'unknown',
    health_id: event.entity?.map((e) => e.what?.identifier).find((i) => i?.system === HEALTH_ID_SYSTEM)?.value ?? null,
    what: event.subtype?.find((c) => c.system === OPERATION_SYSTEM)?.code ?? 'unknown',
    action: ACTIONS[event.action ?? 'E'] ?? 'execute',
    purpose: event.purposeOfEvent?.[0]?.text ?? null,
    break_glass: !!event.purposeOfEvent?.some((p) => p.coding?.some((c) => c.code === 'BTG')),
  };
}

/** Most rows the Activity page and its CSV show. */
export const ACTIVITY_LIMIT = 500;

export function portalActions(services: Services) {
  const { access, webhooks, config, log } = services;
  const consents = new ConsentService(services.mappings);

  async function checkedCallback(url: string): Promise<void> {
    const problem =
      callbackUrlProblem(url, config.webhooks.allowHttpLoopback) ??
      (await checkedAddress(url, config.webhooks.allowHttpLoopback, true).then(
        () => undefined,
        (err: unknown) => (err instanceof DestinationRefused ? `is refused: ${err.message}` : Promise.reject(err)),
      ));
    if (problem) throw new FieldProblem('callback_url', `The URL ${problem}`);
  }

  const ownClient = async (me: PortalPrincipal, clientId: string) => {
    const client = await access.clients.ofOrganizationById(me.organizationId, clientId);
    if (!client) throw notFound(`No client ${clientId} of this organisation`);
    return client;
  };

  /** A facility bound to another organisation's client or agent is not this organisation's to bind (facilityTakenByAnother). */
  const claimFacility = async (sql: Parameters<typeof facilityTakenByAnother>[0], me: PortalPrincipal, facilityId: string) => {
    if (await facilityTakenByAnother(sql, facilityId, me.organizationId)) {
      throw new FieldProblem('facility_id', 'this facility is bound to another organisation; ask your Pont operator if it is yours');
    }
  };

  return {
    clients: (me: PortalPrincipal) => access.clients.ofOrganization(me.organizationId),

    async createClient(me: PortalPrincipal, repo: FhirRepository, input: z.infer<typeof NewClient>) {
      // Break-glass reads patients without consent: only an organisation's admin hands it out.
      const critical = input.scopes.filter((scope) => SCOPE_RISK[scope] === 'Critical');
      if (critical.length && me.role !== 'admin') throw new FieldProblem('scopes', `${critical.join(', ')} (critical risk) can be given by an admin only`);
      return repo.transaction(async (sql) => {
        if (input.facility_id) await claimFacility(sql, me, input.facility_id);
        return createClient(sql, { name: input.name, organizationId: me.organizationId, facilityId: input.facility_id || undefined, scopes: input.scopes });
      });
    },

    async rotateClient(me: PortalPrincipal, repo: FhirRepository, clientId: string, overlapSeconds: number) {
      const client = await ownClient(me, clientId);
      // An active client registered with a key set exists but has no secret: said so (409), with how its keys are rotated.
      const noSecret = !client.revoked_at && noSecretToRotate(client, REGISTER_AGAIN);
      if (noSecret) throw new ApiError(409, ErrorCode.conflict, noSecret);
      access.clients.changing(clientId); // its next request must see the new secret (as the Connect route does)
      const rotated = await repo.transaction((sql) => rotateClientSecret(sql, clientId, Math.min(overlapSeconds, MAX_SECRET_OVERLAP_SECONDS)));
      if (!rotated) throw notFound(`No active client ${clientId} of this organisation`);
      return rotated;
    },

    async revokeClient(me: PortalPrincipal, clientId: string) {
      if (!(await access.clients.revokeOf(me.organizationId, clientId))) throw notFound(`No client ${clientId} of this organisation`);
      return ownClient(me, clientId);
    },

    subscriptions: (me: PortalPrincipal) => webhooks.listSubscriptions(me.organizationId),

    async subscribe(me: PortalPrincipal, repo: FhirRepository, input: z.infer<typeof NewSubscription>) {
      await checkedCallback(input.callback_url);
      return repo.transaction((sql) => createSubscription(sql, config.webhooks.secretKey, { organizationId: me.organizationId }, input));
    },

    async rotateSubscription(me: PortalPrincipal, repo: FhirRepository, subscriptionId: string, overlapSeconds: number) {
      const rotated = await repo.transaction((sql) =>
        rotateSubscriptionSecret(sql, config.webhooks.secretKey, me.organizationId, subscriptionId, overlapSeconds),
      );
      if (!rotated) throw notFound(`No active subscription ${subscriptionId}`);
      return rotated;
    },

    async unsubscribe(me: PortalPrincipal, subscriptionId: string) {
      if (!(await webhooks.unsubscribe(me.organizationId, subscriptionId))) throw notFound(`No active subscription ${subscriptionId}`);
    },

    /**
     * A test event (the subscription's first event type, `data.test: true`) from the organisation, through the
     * delivery worker to this subscription only (testEventTarget in src/webhooks/deliveries.ts).
     */
    async sendTestEvent(me: PortalPrincipal, repo: FhirRepository, subscriptionId: string) {
      const subscription = (await webhooks.listSubscriptions(me.organizationId)).find((s) => s.id === subscriptionId);
      if (!subscription) throw notFound(`No active subscription ${subscriptionId}`);
      const type = subscription.subscribed_events[0]!;
      return repo.transaction((sql) =>
        // organization_id: consent events go to the organisation the data names (src/webhooks/entitlement.ts).
        recordEvent(sql, { type, data: { test: true, subscription_id: subscriptionId, organization_id: me.organizationId }, organizationId: me.organizationId, environment: config.environment }),
      );
    },

    deliveries: (me: PortalPrincipal, filter: { status?: 'pending' | 'delivered' | 'exhausted' | 'cancelled'; subscriptionId?: string; cursor?: string; limit?: number }) =>
      // With the rest-hook notifications of the organisation's FHIR Subscriptions: one attempt log for both doors.
      webhooks.listDeliveries({ organizationId: me.organizationId, status: filter.status, subscriptionId: filter.subscriptionId, cursor: filter.cursor, limit: filter.limit ?? 50, fhirNotifications: true }),

    async replay(me: PortalPrincipal, repo: FhirRepository, eventId: string) {
      const result = await repo.transaction((sql) => replayEvent(sql, me.organizationId, eventId));
      if (result.outcome === 'not-found') throw notFound(`No event ${eventId} for this organisation`);
      if (result.outcome === 'no-subscription') throw new ApiError(409, ErrorCode.conflict, `No active subscription of this organisation receives ${result.type} events`);
      return { event_id: eventId, deliveries: result.deliveries };
    },

    /** Replays every event with an exhausted delivery whose last attempt was at or after `since`. */
    async replayExhausted(me: PortalPrincipal, repo: FhirRepository, since: Date) {
      const events = new Set<string>();
      let cursor: string | undefined;
      do {
        const page = await webhooks.listDeliveries({ organizationId: me.organizationId, status: 'exhausted', cursor, limit: 100 });
        for (const d of page.deliveries) {
          const last = d.attempts.at(-1);
          if (last && new Date(last.started_at) >= since) events.add(d.event_id);
        }
        cursor = page.next_cursor ?? undefined;
      } while (cursor);
      const replayed = [];
      for (const eventId of events) {
        const result = await repo.transaction((sql) => replayEvent(sql, me.organizationId, eventId));
        if (result.outcome === 'queued') replayed.push(eventId);
      }
      return { replayed };
    },

    agents: (me: PortalPrincipal) => access.agents.ofOrganization(me.organizationId),
    createAgent: (me: PortalPrincipal, repo: FhirRepository, input: z.infer<typeof NewAgent>) =>
      repo.transaction(async (sql) => {
        await claimFacility(sql, me, input.facility_id);
        return createAgent(sql, { organizationId: me.organizationId, facilityId: input.facility_id });
      }),
    async revokeAgent(me: PortalPrincipal, agentId: string) {
      const agent = await access.agents.revoke(me.organizationId, agentId);
      if (!agent) throw notFound(`No agent ${agentId} of this organisation`);
      return agent;
    },

    /** The organisation's own accesses to patient data: its AuditEvents, read through the policy (owner only). */
    async activity(repo: FhirRepository, filter: ActivityFilter): Promise<ActivityRow[]> {
      const query: Record<string, string | string[]> = { _sort: '-date', _count: String(ACTIVITY_LIMIT) };
      if (filter.health_id) query['entity:identifier'] = `${HEALTH_ID_SYSTEM}|${filter.health_id}`;
      const dates = [filter.from && `ge${filter.from}`, filter.to && `le${filter.to}`].filter((d): d is string => !!d);
      if (dates.length) query.date = dates;
      const events = await repo.searchResources<AuditEvent>('AuditEvent', query as Record<string, string>, { audit: false });
      return events.map(activityRow);
    },

    /** The organisation's consents by state and type: counts only (no patient is named). */
    consentCounts: (me: PortalPrincipal, repo: FhirRepository) => consents.countsFor(repo, me.organizationId),

    users: (me: PortalPrincipal) => access.portal.users(me.organizationId),

    async invite(me: PortalPrincipal, input: z.infer<typeof Invitation>) {
      const invitation = { organizationId: me.organizationId, email: input.email, role: input.role };
      let created = await access.portal.create(invitation, me.userId);
      if (created === 'exists') {
        // Answered as a new invitation (no account enumeration across organisations); the account stays as it was.
        log.warn('portal invitation of an address that has an account: answered as new, nothing changed', { organization: me.organizationId, invited_by: me.userId });
        created = access.portal.lookalike(invitation);
      }
      return { user: created.user, set_password_link: setPasswordLink(config.publicUrl, created.setPasswordToken) };
    },
  };
}
export type PortalActions = ReturnType<typeof portalActions>;
