import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Bundle, BundleEntry, Parameters, ParametersParameter, Resource, Subscription } from '@medplum/fhirtypes';
import type { ClientPrincipal } from '../core/principal';
import { cutoff, type Retention } from '../core/period';
import { onResourcesChanged } from '../events/outbox';
import { ApiError, badRequest, ErrorCode, notFound } from '../core/errors';
import type { Database, Queryable } from '../db/database';
import type { ResourceChange } from '../events/rules';
import type { FhirService } from '../fhir/service';
import type { FhirRepository } from '../fhir/repository';
import { allowedIds, type FoundVersion } from '../fhir/store/history';
import type { Logger } from '../log';
import { accessPolicyFor } from '../policy/index';
import { DELIVERY_CHANNEL } from '../webhooks/deliveries';
import { checkedAddress, DestinationRefused } from '../webhooks/destination';
import { callbackUrlProblem, createSubscription as createWebhookRow } from '../webhooks/subscriptions';
import { BACKPORT, filterValues, loadTopics, topicFires, topicUrl, type Topic } from './topics';

/**
 * FHIR Subscriptions (R5 Backport IG STU 1.1 for R4; docs/fhir.md "Subscriptions"): a second door onto the change
 * machinery. A write's transaction queues the changes that fire a topic (queueChanges: one statement, whatever the number
 * of subscriptions); the fan-out worker (src/subscriptions/fanout.ts, numberQueuedChanges) numbers them, per subscription
 * whose filters pass and whose organisation may read the resource under the access policy, set-based in SQL, one process
 * at a time, in order, each change once; rest-hook notifications are rows of webhook_deliveries, sent, signed and
 * retried by the webhook worker, which asks `notificationBody` for the Bundle and re-checks the policy then (delivery);
 * websocket clients are woken through PostgreSQL NOTIFY on SUBSCRIPTION_CHANNEL.
 */

/** Websocket holders LISTEN here; the payload is subscription ids, comma-separated. */
export const SUBSCRIPTION_CHANNEL = 'pont_fhir_subscriptions';
/** A write that queued changes for the fan-out wakes the fan-out workers here (src/subscriptions/fanout.ts). */
export const CHANGES_CHANNEL = 'pont_fhir_subscription_changes';
/** Ids per NOTIFY payload (32 hex digits and a comma each: under PostgreSQL's 8000-byte limit). */
const NOTIFY_IDS = 200;

const EXT = (name: string) => `${BACKPORT}/StructureDefinition/${name}`;
export const PROFILE = EXT('backport-subscription');
const FILTER_EXT = EXT('backport-filter-criteria');
const CHANNEL_TYPE_EXT = EXT('backport-channel-type');
const CONTENT_EXT = EXT('backport-payload-content');
const HEARTBEAT_EXT = EXT('backport-heartbeat-period');
const TIMEOUT_EXT = EXT('backport-timeout');
const MAX_COUNT_EXT = EXT('backport-max-count');
/** Pont's extension on a created rest-hook Subscription's channel: the signing secret of its notifications, in the 201 only. */
export const SIGNING_SECRET_EXT = 'https://pont.health/fhir/StructureDefinition/subscription-signing-secret';

export type Content = 'empty' | 'id-only' | 'full-resource';
export type NotificationType = 'handshake' | 'heartbeat' | 'event-notification' | 'query-status' | 'query-event';

interface SubscriptionRow {
  id: string;
  organization_id: string;
  client_id: string;
  /** Null: the client was revoked. */
  scopes: string[] | null;
  all_patients: boolean | null;
  topic_id: string;
  filters: Array<{ name: string; value: string }>;
  channel_type: 'rest-hook' | 'websocket';
  endpoint: string | null;
  content: Content;
  status: 'requested' | 'active' | 'error' | 'off';
  resource: Subscription;
  events_since_start: string;
  heartbeat_seconds: number | null;
  max_count: number | null;
  error: string | null;
}

interface EventRow {
  event_number: string;
  focus_type: string;
  focus_id: string;
  focus_version: string | null;
  interaction: string;
  created_at: Date | string;
}

/** A notification that names no resource stands in for an event the subscriber may no longer see (consent revoked). */
export interface NotificationEvent {
  number: number;
  timestamp: string;
  focus?: { type: string; id: string; version: string | null; interaction: string };
  resource?: Resource;
}

const MAX_EVENTS_PAGE = 1000;
/**
 * The error of a rest-hook subscription whose endpoint has not accepted a handshake yet: it is pushed nothing (events are
 * numbered and kept for $events) until a retry of the handshake is answered.
 */
const HANDSHAKE_REFUSED = 'a handshake could not be delivered to the endpoint';
/** Subscriptions one binding token may name (the socket binds at most 20 in all: src/subscriptions/websocket.ts). */
const MAX_TOKEN_IDS = 20;

/** A subscription and, when `from`/`to` are given, its events numbered so (loadMany); `organizationId`: only if it is that organisation's. */
interface LoadRequest {
  id: string;
  organizationId?: string;
  from?: number;
  to?: number;
}
interface Loaded {
  row: SubscriptionRow;
  events: NotificationEvent[];
}
/** The client's scopes and all-patient flag as they are now (null when it was revoked: it is told nothing more). */
const CLIENT_NOW = `(SELECT c.scopes FROM oauth_clients c WHERE c.client_id = fhir_subscriptions.client_id AND c.revoked_at IS NULL) AS scopes,
  (SELECT c.all_patients FROM oauth_clients c WHERE c.client_id = fhir_subscriptions.client_id) AS all_patients`;
const COLUMNS = `id, organization_id, client_id, ${CLIENT_NOW}, topic_id, filters, channel_type, endpoint, content, status, resource,
  events_since_start::text, heartbeat_seconds, max_count, error`;

const invalid = (message: string) => new ApiError(400, ErrorCode.validationFailed, message);
/** An array element of the body (absent: none); anything else is a 400, never a TypeError. */
function list(value: unknown, what: string): Array<Record<string, unknown>> {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'object' || v === null)) throw invalid(`${what} must be a list of objects`);
  return value;
}
/**
 * The filters of one backport-filter-criteria value, in any of the forms the IG lists (components.html "Subscription
 * Filters"): `name=value`, `Type.name=value`, or `Type?name=value` (its examples), several joined with `&`. A name must
 * be one of the topic's filters; a modifier (`name:modifier`) is none the topics define: refused, as the IG asks.
 */
function filtersOf(topic: Topic, text: string): Array<{ name: string; value: string }> {
  const shown = text.slice(0, 200);
  const problem = `backport-filter-criteria: ${shown} must be ${topic.resource}?name=value (or name=value, ${topic.resource}.name=value), with a filter of the topic ${topic.id}`;
  const question = text.indexOf('?');
  const query = question < 0 ? text : text.slice(question + 1);
  if (question >= 0 && text.slice(0, question) !== topic.resource) throw invalid(problem);
  const out: Array<{ name: string; value: string }> = [];
  for (const [raw, value] of new URLSearchParams(query)) {
    const name = raw.startsWith(`${topic.resource}.`) ? raw.slice(topic.resource.length + 1) : raw;
    if (!topic.filters.some((f) => f.name === name))
      throw invalid(`backport-filter-criteria: the topic ${topic.id} does not allow filtering by "${raw.slice(0, 100)}" (it allows: ${topic.filters.map((f) => f.name).join(', ') || 'none'}; no modifiers)`);
    if (!value || value.length > 256) throw invalid(`backport-filter-criteria: ${name} needs a value (at most 256 characters)`);
    out.push({ name, value });
  }
  if (!out.length) throw invalid(problem);
  return out;
}

/**
 * Subscription.channel.payload: FHIR JSON, with at most a charset and the FHIR version of the notifications
 * (components.html "Subscriptions and FHIR Versions": `fhirVersion=4.0` is R4, what Pont sends; any other is refused).
 */
function payloadProblem(payload: unknown): void {
  if (typeof payload !== 'string' || payload.length > 200) throw invalid('Subscription.channel.payload must be application/fhir+json');
  const [type, ...params] = payload.split(';').map((p) => p.trim().toLowerCase());
  if (type !== 'application/fhir+json' && type !== 'application/json') throw invalid('Subscription.channel.payload must be application/fhir+json');
  for (const param of params) {
    const [key, value] = param.split('=', 2).map((x) => x?.trim());
    if (key === 'fhirversion') {
      if (value !== '4.0' && !/^4\.0\.\d+$/.test(value ?? '')) throw invalid(`Subscription.channel.payload: notifications are FHIR R4 here (fhirVersion=4.0), not ${String(value).slice(0, 20)}`);
    } else if (key !== 'charset' || value !== 'utf-8') throw invalid(`Subscription.channel.payload: the parameter ${String(key).slice(0, 40)} is not supported`);
  }
}

const ext = (elements: Array<{ url: string }> | undefined, url: string) => elements?.find((e) => e.url === url) as Record<string, any> | undefined;

export class FhirSubscriptions {
  private byId: Map<string, Topic>;
  /** The notifications asked for while a batch is being built are built together, in the next (coalesced). */
  private readonly batchLoad = coalesced<LoadRequest, Loaded | undefined>((wants) => this.loadMany(wants));
  private readonly outcomes = coalesced<{ id: string; type: string; succeeded: boolean }, void>((items) => this.outcomesMany(items));

  constructor(
    private readonly db: Database,
    private readonly deps: { publicUrl: () => string; fhir: FhirService; log: Logger; allowHttpLoopback: boolean; secretKey: Buffer; now: () => Date },
    private published: Topic[],
  ) {
    this.byId = new Map(published.map((t) => [t.id, t]));
  }

  get topics(): readonly Topic[] {
    return this.published;
  }

  /**
   * Reads the topics file again (with a reload of the maps): the new topics serve from now on, for every write's fan-out
   * too; a file with a mistake throws and the running topics stay. Subscriptions of a topic that is gone hear nothing more.
   */
  reloadTopics(dir: string): void {
    const topics = loadTopics(dir);
    this.published = topics;
    this.byId = new Map(topics.map((t) => [t.id, t]));
    useTopics(topics);
  }

  private get base() {
    return `${this.deps.publicUrl()}/api/fhir/R4`;
  }

  /** The canonical URLs of the published topics (the CapabilityStatement lists them). */
  topicUrls(): string[] {
    return this.topics.map((t) => topicUrl(this.deps.publicUrl(), t.id));
  }

  topic(id: string): Topic | undefined {
    return this.byId.get(id);
  }

  // ------------------------------------------------------------------ the Subscription resource

  /** Checks a Subscription against the backport profile and what the topic and the caller's scopes allow; stores it `requested`. */
  async create(principal: ClientPrincipal, body: unknown): Promise<Subscription> {
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('Body must be a Subscription (a JSON object)');
    const s = body as Subscription & Record<string, any>;
    if (s.resourceType !== 'Subscription') throw badRequest(`Body is a ${String(s.resourceType)}, url says Subscription`);
    if (typeof s.criteria !== 'string') throw invalid('Subscription.criteria must be the canonical URL of a SubscriptionTopic (GET /api/fhir/R4/SubscriptionTopic)');
    const prefix = `${this.base}/SubscriptionTopic/`;
    const topic = s.criteria.startsWith(prefix) ? this.byId.get(s.criteria.slice(prefix.length).split('|')[0]!) : undefined;
    if (!topic) throw invalid(`Subscription.criteria: ${s.criteria.slice(0, 200)} is not a topic this server publishes (GET /api/fhir/R4/SubscriptionTopic)`);
    if (s._criteria !== undefined && (typeof s._criteria !== 'object' || s._criteria === null || Array.isArray(s._criteria))) throw invalid('Subscription._criteria must be an object');
    const filters: Array<{ name: string; value: string }> = [];
    const filterTexts: string[] = [];
    for (const e of list(s._criteria?.extension, 'Subscription._criteria.extension') as Array<{ url: string; valueString?: unknown }>) {
      if (e.url !== FILTER_EXT) continue;
      if (typeof e.valueString !== 'string') throw invalid('backport-filter-criteria must have a valueString such as Encounter?patient=Patient/123');
      filters.push(...filtersOf(topic, e.valueString));
      filterTexts.push(e.valueString);
    }
    if (filters.length > 10) throw invalid('At most 10 filters');
    if (s.channel !== undefined && (typeof s.channel !== 'object' || s.channel === null || Array.isArray(s.channel))) throw invalid('Subscription.channel must be an object');
    const channel = (s.channel ?? {}) as Subscription['channel'] & Record<string, any>;
    list(channel.extension, 'Subscription.channel.extension');
    if (channel._payload !== undefined && (typeof channel._payload !== 'object' || channel._payload === null || Array.isArray(channel._payload))) throw invalid('Subscription.channel._payload must be an object');
    list(channel._payload?.extension, 'Subscription.channel._payload.extension');
    list(channel.header, 'Subscription.channel.header');
    const channelType = channel.type;
    if (channelType !== 'rest-hook' && channelType !== 'websocket') throw invalid('Subscription.channel.type must be rest-hook or websocket');
    // A custom channel (backport-channel-type on channel.type) is none this server has: the IG says reject it.
    if (channel._type !== undefined && (typeof channel._type !== 'object' || channel._type === null || Array.isArray(channel._type))) throw invalid('Subscription.channel._type must be an object');
    if (list(channel._type?.extension, 'Subscription.channel._type.extension').some((e) => e.url === CHANNEL_TYPE_EXT))
      throw invalid('backport-channel-type: no custom channel is supported here (rest-hook or websocket)');
    if (channel.payload !== undefined) payloadProblem(channel.payload);
    const content = (ext(channel._payload?.extension, CONTENT_EXT)?.valueCode ?? (channel.payload ? 'id-only' : 'empty')) as string;
    if (!['empty', 'id-only', 'full-resource'].includes(content)) throw invalid('backport-payload-content must be empty, id-only or full-resource');
    // Even numbers without content tell that something matching the filters happened (an abnormal result of a patient):
    // a subscription is for a client that may read its topic's resources, whatever its content.
    if (this.unreadableTopics(principal).includes(topic.id))
      throw new ApiError(403, ErrorCode.forbidden, `A subscription to topic ${topic.id} needs a scope that reads ${topic.resource}`);
    const uint = (url: string, what: string, max: number) => {
      const v = ext(channel.extension, url);
      if (!v) return null;
      const n = v.valueUnsignedInt ?? v.valuePositiveInt;
      if (!Number.isInteger(n) || n < 0 || n > max) throw invalid(`${what} must be an integer from 0 to ${max}`);
      return n as number;
    };
    const heartbeat = uint(HEARTBEAT_EXT, 'backport-heartbeat-period', 86_400);
    if (heartbeat !== null && heartbeat < 10) throw invalid('backport-heartbeat-period must be at least 10 seconds');
    // Applied: a rest-hook attempt fails when no answer comes within `timeout` seconds; a notification carries at most
    // `maxCount` events (those numbered together; absent: one each).
    const timeout = uint(TIMEOUT_EXT, 'backport-timeout', 60);
    if (timeout === 0) throw invalid('backport-timeout must be from 1 to 60 seconds');
    const maxCount = uint(MAX_COUNT_EXT, 'backport-max-count', 100);
    if (maxCount === 0) throw invalid('backport-max-count must be from 1 to 100');
    let endpoint: string | null = null;
    if (channelType === 'rest-hook') {
      if (typeof channel.endpoint !== 'string' || channel.endpoint.length > 2048) throw invalid('Subscription.channel.endpoint: a rest-hook needs the URL notifications are POSTed to');
      const problem = callbackUrlProblem(channel.endpoint, this.deps.allowHttpLoopback);
      if (problem) throw invalid(`Subscription.channel.endpoint ${problem}`);
      try {
        await checkedAddress(channel.endpoint, this.deps.allowHttpLoopback, true);
      } catch (err) {
        if (err instanceof DestinationRefused) throw invalid(`Subscription.channel.endpoint: ${err.message}`);
        throw err;
      }
      if (channel.header?.length) throw invalid('Subscription.channel.header is not supported: notifications are signed (X-Service-Signature) instead');
      endpoint = channel.endpoint;
    } else if (channel.endpoint !== undefined) throw invalid('Subscription.channel.endpoint: a websocket subscription has none (use $get-ws-binding-token)');
    if (s.end !== undefined) throw invalid('Subscription.end is not supported: delete the subscription to end it');
    if (s.reason !== undefined && typeof s.reason !== 'string') throw invalid('Subscription.reason must be a string');

    const id = randomBytes(16).toString('hex');
    const stored: Subscription = {
      resourceType: 'Subscription',
      id,
      meta: { profile: [PROFILE] },
      criteria: s.criteria,
      // The filters as given, the only thing of _criteria kept (nothing else of the body is stored).
      ...(filterTexts.length && ({ _criteria: { extension: filterTexts.map((valueString) => ({ url: FILTER_EXT, valueString })) } } as Record<string, unknown>)),
      ...(s.reason !== undefined && { reason: s.reason.slice(0, 500) }),
      channel: {
        type: channelType,
        ...(endpoint && { endpoint }),
        payload: 'application/fhir+json',
        _payload: { extension: [{ url: CONTENT_EXT, valueCode: content }] },
        ...((heartbeat ?? timeout ?? maxCount) !== null && {
          extension: [
            ...(heartbeat !== null ? [{ url: HEARTBEAT_EXT, valueUnsignedInt: heartbeat }] : []),
            ...(timeout !== null ? [{ url: TIMEOUT_EXT, valueUnsignedInt: timeout }] : []),
            ...(maxCount !== null ? [{ url: MAX_COUNT_EXT, valuePositiveInt: maxCount }] : []),
          ],
        }),
      },
    } as unknown as Subscription; // its status is the row's (present)
    // A websocket subscription needs no handshake: it is active at once (the client binds with a token).
    const status = channelType === 'rest-hook' ? 'requested' : 'active';
    const secret = await this.db.transaction(async (tx) => {
      const webhook = endpoint
        ? await createWebhookRow(tx, this.deps.secretKey, { organizationId: principal.organizationId, facilityId: principal.facilityId }, { callback_url: endpoint, subscribed_events: [], description: `FHIR Subscription/${id}` })
        : undefined;
      await tx.query(
        `INSERT INTO fhir_subscriptions (id, organization_id, client_id, scopes, topic_id, filters, channel_type, endpoint, content,
           heartbeat_seconds, timeout_seconds, max_count, status, resource, webhook_subscription_id)
         VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14::jsonb, $15)`,
        [id, principal.organizationId, principal.clientId, principal.scopes, topic.id, JSON.stringify(filters), channelType, endpoint, content, heartbeat, timeout, maxCount, status, JSON.stringify(stored), webhook?.id ?? null],
      );
      if (endpoint) await queueNotification(tx, id, 'handshake', null);
      return webhook?.webhook_secret;
    });
    if (!secret) return { ...stored, status } as Subscription;
    // The secret that signs its notifications (X-Service-Signature), told once: in this answer only, never stored in the
    // resource nor shown by a read (docs/fhir.md "Subscriptions").
    const told = stored.channel as Subscription['channel'];
    return { ...stored, status, channel: { ...told, extension: [...(told.extension ?? []), { url: SIGNING_SECRET_EXT, valueString: secret }] } } as Subscription;
  }

  /**
   * The caller's organisation's subscription (another organisation's is answered as absent), for a caller that may read
   * its topic's resources (403 otherwise: its filters, counts and events are facts about those resources).
   */
  private async row(caller: ClientPrincipal, id: string, q: Queryable = this.db): Promise<SubscriptionRow> {
    const { rows } = await q.query<SubscriptionRow>(`SELECT ${COLUMNS} FROM fhir_subscriptions WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL`, [id, caller.organizationId]);
    if (!rows[0]) throw notFound(`Subscription/${id} is not known`);
    if (this.unreadableTopics(caller).includes(rows[0].topic_id))
      throw new ApiError(403, ErrorCode.forbidden, `Subscription/${id} is about ${this.byId.get(rows[0].topic_id)!.resource} resources, which this client may not read`);
    return rows[0];
  }

  /**
   * The published topics whose resources the caller may not read (its token's scopes and SMART type limits): their
   * subscriptions are not for it. A topic no longer published numbers nothing more; its subscriptions stay visible to
   * their organisation, to be deleted.
   */
  private unreadableTopics(caller: ClientPrincipal): string[] {
    const policy = accessPolicyFor(caller, 'fhir');
    return this.topics.filter((t) => !policy.canRead(t.resource)).map((t) => t.id);
  }

  private present(row: SubscriptionRow): Subscription {
    return { ...row.resource, status: row.status, ...(row.error && { error: row.error }) } as Subscription;
  }

  async read(caller: ClientPrincipal, id: string): Promise<Subscription> {
    return this.present(await this.row(caller, id));
  }

  /**
   * The organisation's subscriptions (at most 1000), searched by `url` (the channel's endpoint: a SHALL of the IG's R4
   * CapabilityStatement) and `status` (a SHOULD), each a comma-separated OR; both given: both must match.
   */
  async list(caller: ClientPrincipal, search: { url?: string[]; status?: string[] } = {}): Promise<Bundle> {
    for (const st of search.status ?? []) if (!['requested', 'active', 'error', 'off'].includes(st)) throw invalid('status must be requested, active, error or off');
    const { rows } = await this.db.query<SubscriptionRow>(
      `SELECT ${COLUMNS} FROM fhir_subscriptions WHERE organization_id = $1 AND deleted_at IS NULL
         AND ($2::text[] IS NULL OR endpoint = ANY($2::text[])) AND ($3::text[] IS NULL OR status = ANY($3::text[]))
         AND NOT (topic_id = ANY($4::text[]))
       ORDER BY created_at, id LIMIT 1000`,
      [caller.organizationId, search.url ?? null, search.status ?? null, this.unreadableTopics(caller)],
    );
    return {
      resourceType: 'Bundle',
      type: 'searchset',
      total: rows.length,
      entry: rows.map((r) => ({ fullUrl: `${this.base}/Subscription/${r.id}`, resource: this.present(r), search: { mode: 'match' } })),
    };
  }

  /** Deletes it (off): nothing more is numbered or sent; its pending notifications are cancelled. */
  async delete(caller: ClientPrincipal, id: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      const row = await this.row(caller, id, tx);
      await tx.query(`UPDATE fhir_subscriptions SET deleted_at = now(), status = 'off' WHERE id = $1`, [row.id]);
      await tx.query('UPDATE webhook_subscriptions SET deleted_at = now() WHERE id = (SELECT webhook_subscription_id FROM fhir_subscriptions WHERE id = $1)', [row.id]);
      await tx.query(
        `UPDATE webhook_deliveries SET status = 'cancelled', lease_token = NULL, next_attempt_at = NULL, updated_at = now() WHERE fhir_subscription_id = $1 AND status = 'pending'`,
        [row.id],
      );
      await tx.query('SELECT pg_notify($1, $2)', [SUBSCRIPTION_CHANNEL, row.id]);
    });
  }

  // ------------------------------------------------------------------ notifications

  /** The R4 SubscriptionStatus (a Parameters with the backport-subscription-status-r4 profile). */
  private status(row: SubscriptionRow, type: NotificationType, events: NotificationEvent[], eventsSinceStart = row.events_since_start): Parameters {
    const parameter: ParametersParameter[] = [
      { name: 'subscription', valueReference: { reference: `${this.base}/Subscription/${row.id}` } },
      // The IG: the topic SHOULD NOT be present with `empty` payloads (SHOULD with full-resource, MAY with id-only).
      ...(row.content === 'empty' ? [] : [{ name: 'topic', valueCanonical: topicUrl(this.deps.publicUrl(), row.topic_id) }]),
      { name: 'status', valueCode: row.status },
      { name: 'type', valueCode: type },
      { name: 'events-since-subscription-start', valueString: String(eventsSinceStart) },
      ...events.map((e) => ({
        name: 'notification-event',
        part: [
          { name: 'event-number', valueString: String(e.number) },
          { name: 'timestamp', valueInstant: e.timestamp },
          ...(e.focus && row.content !== 'empty' ? [{ name: 'focus', valueReference: { reference: `${this.base}/${e.focus.type}/${e.focus.id}` } }] : []),
        ],
      })),
      ...(row.error ? [{ name: 'error', valueCodeableConcept: { text: row.error } }] : []),
    ];
    return { resourceType: 'Parameters', id: randomBytes(8).toString('hex'), meta: { profile: [`${BACKPORT}/StructureDefinition/backport-subscription-status-r4`] }, parameter };
  }

  /** A subscription-notification Bundle (type history, the status first, then the focus resources the content asks for). */
  private notification(row: SubscriptionRow, type: NotificationType, events: NotificationEvent[]): Bundle {
    const status = this.status(row, type, events);
    const entries: BundleEntry[] = [];
    if (row.content !== 'empty')
      for (const e of events) {
        if (!e.focus) continue;
        const url = `${this.base}/${e.focus.type}/${e.focus.id}`;
        entries.push({
          fullUrl: url,
          ...(row.content === 'full-resource' && e.resource && { resource: e.resource }),
          // As a history Bundle has it (the IG's example r4-notification-full-resource): a create is a POST to the type.
          request: e.focus.interaction === 'create' ? { method: 'POST', url: e.focus.type } : { method: e.focus.interaction === 'delete' ? 'DELETE' : 'PUT', url: `${e.focus.type}/${e.focus.id}` },
          response: { status: e.focus.interaction === 'create' ? '201' : '200' },
        });
      }
    return {
      resourceType: 'Bundle',
      id: randomBytes(8).toString('hex'),
      meta: { profile: [`${BACKPORT}/StructureDefinition/backport-subscription-notification-r4`] },
      type: 'history',
      timestamp: this.deps.now().toISOString(),
      entry: [
        { fullUrl: `urn:uuid:${randomUUID()}`, resource: status, request: { method: 'GET', url: `${this.base}/Subscription/${row.id}/$status` }, response: { status: '200' } },
        ...entries,
      ],
    };
  }

  /**
   * Each subscription's events as its reader may see them now, for many subscriptions at once: the reader is the
   * subscriber, or for `$events` the client asking (`reader`), so another client of the organisation is shown only what
   * it could read itself, audited as its own read. The policy is asked again through the reader's repository, one
   * statement for the focus versions of all the events of the readers of one policy (same organisation, scopes and
   * all-patient flag: the same answer), however many subscriptions and events; each reader's reads of the batch are
   * audited as one record naming the patients (FhirRepository
   * auditVersionsRead: a consent limiting how often counts them as any read). An event it may no longer see (refused,
   * deleted, a spent consent frequency) keeps its number and names no resource.
   */
  private async visibleMany(wanted: Array<{ row: SubscriptionRow; events: EventRow[]; reader?: ClientPrincipal }>): Promise<NotificationEvent[][]> {
    const base = (e: EventRow): NotificationEvent => ({ number: Number(e.event_number), timestamp: new Date(e.created_at).toISOString() });
    const ref = (type: string, id: string, version: string) => `${type}/${id}/_history/${version}`;
    // The subscribers of one policy answer read together; each subscriber is audited on its own repository.
    const policies = new Map<string, { reader: FhirRepository; refs: Map<string, { type: string; id: string; versionId: string }>; found?: Map<string, FoundVersion> }>();
    const repos = new Map<string, FhirRepository>();
    const policyOf = new Map<SubscriptionRow, { key: string; clientId: string }>();
    for (const { row, events, reader } of wanted) {
      // A revoked subscriber's subscription names nothing more, to anyone: numbered, naming nothing.
      const own = subscriber(row);
      const principal = own && (reader ?? own);
      if (!principal || row.content === 'empty' || !events.length) continue;
      // A caller's token may narrow it further (SMART types): its reads are shared with no one.
      const key = reader ? `caller\u0000${reader.clientId}` : `${row.organization_id}\u0000${!!row.all_patients}\u0000${[...row.scopes!].sort().join(' ')}`;
      policyOf.set(row, { key, clientId: principal.clientId });
      let repo = repos.get(principal.clientId);
      if (!repo) repos.set(principal.clientId, (repo = this.deps.fhir.repository({ principal, channel: 'fhir', operation: 'subscriptionNotification' })));
      let policy = policies.get(key);
      if (!policy) policies.set(key, (policy = { reader: repo, refs: new Map() }));
      for (const e of events) if (e.focus_version) policy.refs.set(ref(e.focus_type, e.focus_id, e.focus_version), { type: e.focus_type, id: e.focus_id, versionId: e.focus_version });
    }
    for (const policy of policies.values()) {
      const found = policy.refs.size ? await policy.reader.readVersions([...policy.refs.values()]) : [];
      policy.found = new Map(found.map((v) => [ref(v.type, v.id, v.versionId), v]));
    }
    // Per subscriber: what it is shown and refused in this batch (each version once), audited once.
    const seen = new Map<string, { shown: Map<string, FoundVersion>; refused: Map<string, FoundVersion>; withheld?: Set<FoundVersion> }>();
    for (const { row, events } of wanted) {
      const of = policyOf.get(row);
      if (of === undefined) continue;
      const found = policies.get(of.key)!.found!;
      let mine = seen.get(of.clientId);
      if (!mine) seen.set(of.clientId, (mine = { shown: new Map(), refused: new Map() }));
      for (const e of events) {
        const v = e.focus_version ? found.get(ref(e.focus_type, e.focus_id, e.focus_version)) : undefined;
        if (!v) continue;
        const k = ref(v.type, v.id, v.versionId);
        if (!v.allowed) mine.refused.set(k, v);
        else if (!v.deleted && v.content) mine.shown.set(k, v);
      }
    }
    for (const [clientId, mine] of seen) mine.withheld = await repos.get(clientId)!.auditVersionsRead([...mine.shown.values()], [...mine.refused.values()], 'subscriptionNotification');
    const out: NotificationEvent[][] = [];
    for (const { row, events } of wanted) {
      const of = policyOf.get(row);
      if (of === undefined) {
        out.push(events.map(base));
        continue;
      }
      const found = policies.get(of.key)!.found!;
      const mine = seen.get(of.clientId)!;
      const repo = repos.get(of.clientId)!;
      const list: NotificationEvent[] = [];
      for (const e of events) {
        if (!e.focus_version) {
          list.push(await this.readCurrent(repo, e)); // queued without a version (none so far): a read of the current one
          continue;
        }
        const v = found.get(ref(e.focus_type, e.focus_id, e.focus_version));
        // withheld: refused, deleted, unknown, or the consent's frequency spent: numbered, naming nothing
        if (!v || !v.allowed || v.deleted || !v.content || mine.withheld!.has(v)) list.push(base(e));
        else list.push({ ...base(e), focus: { type: e.focus_type, id: e.focus_id, version: e.focus_version, interaction: e.interaction }, resource: v.content });
      }
      out.push(list);
    }
    return out;
  }

  /** An event queued without a version: its resource's current version, read (and audited) as any read. */
  private async readCurrent(repo: FhirRepository, e: EventRow): Promise<NotificationEvent> {
    const base: NotificationEvent = { number: Number(e.event_number), timestamp: new Date(e.created_at).toISOString() };
    try {
      const resource = await repo.read(e.focus_type, e.focus_id);
      return { ...base, focus: { type: e.focus_type, id: e.focus_id, version: e.focus_version, interaction: e.interaction }, resource };
    } catch (err) {
      if (!(err instanceof ApiError) || err.status >= 500) throw err;
      return base;
    }
  }

  /**
   * Subscriptions and their events from `from` to `to` (numbers), as their subscribers may see them now, for many at once
   * (the rest-hook deliveries and websocket catch-ups of a moment, coalesced by `batchLoad`): one statement for the rows,
   * one for the events, the reads of visibleMany. Undefined for a subscription gone (or of another organisation).
   */
  private async loadMany(wants: LoadRequest[]): Promise<Array<Loaded | undefined>> {
    const ids = [...new Set(wants.map((w) => w.id))];
    const { rows } = await this.db.query<SubscriptionRow>(`SELECT ${COLUMNS} FROM fhir_subscriptions WHERE id = ANY($1::text[]) AND deleted_at IS NULL`, [ids]);
    const byId = new Map(rows.map((r) => [r.id, r]));
    const found = wants.map((w) => {
      const row = byId.get(w.id);
      return row && (w.organizationId === undefined || row.organization_id === w.organizationId) ? row : undefined;
    });
    const ranged = wants.flatMap((w, i) => (found[i] && w.from !== undefined && w.to !== undefined && w.to >= w.from ? [{ i, id: w.id, from: w.from, to: w.to }] : []));
    const stored = await storedEventsMany(this.db, ranged);
    const visible = await this.visibleMany(ranged.map((r, j) => ({ row: found[r.i]!, events: stored[j]! })));
    const events = new Map(ranged.map((r, j) => [r.i, visible[j]!]));
    return wants.map((_, i) => found[i] && { row: found[i], events: events.get(i) ?? [] });
  }

  /**
   * The body of a rest-hook delivery (src/webhooks/worker.ts): an event-notification carries the events `eventNumber` ..
   * `eventNumber + eventCount - 1` (up to the subscription's maxCount, numbered in one run of the fan-out); undefined when
   * the subscription is gone (cancel it).
   */
  async notificationBody(subscriptionId: string, type: 'handshake' | 'heartbeat' | 'event-notification', eventNumber: number | null, eventCount = 1): Promise<string | undefined> {
    const numbered = type === 'event-notification' && eventNumber !== null;
    const last = numbered ? eventNumber + Math.max(1, eventCount) - 1 : 0;
    const loaded = await this.batchLoad(numbered ? { id: subscriptionId, from: eventNumber, to: last } : { id: subscriptionId });
    if (!loaded) return undefined;
    const { row } = loaded;
    let events: NotificationEvent[] = [];
    if (numbered) {
      const visible = new Map(loaded.events.map((e) => [e.number, e]));
      // Past retention: still numbered, naming nothing.
      events = Array.from({ length: last - eventNumber + 1 }, (_, i) => visible.get(eventNumber + i) ?? { number: eventNumber + i, timestamp: this.deps.now().toISOString() });
    }
    // The status as it is when the notification is built (the IG's example handshake: requested, until it succeeds).
    return JSON.stringify(this.notification(row, type, events));
  }

  /**
   * What a finished rest-hook attempt means for the subscription: a handshake answered makes it active (from requested,
   * or from the error of a refused handshake); a handshake refused makes it error at once (the IG: "any errors in the
   * initial handshake SHALL result in the status being changed to error"), and it stays that error, pushed nothing, until a
   * retry of the handshake is answered; another notification answered makes an error active again, and one still refused
   * when its attempts are exhausted makes it error. The outcomes of attempts finished while a batch is written go in the
   * next, one statement each way (coalesced): most are successes of an active subscription, which change nothing.
   */
  async delivered(subscriptionId: string, type: string, succeeded: boolean, exhausted: boolean): Promise<void> {
    if (succeeded || exhausted || type === 'handshake') await this.outcomes({ id: subscriptionId, type, succeeded });
  }

  private async outcomesMany(items: Array<{ id: string; type: string; succeeded: boolean }>): Promise<void[]> {
    const ok = items.filter((i) => i.succeeded);
    if (ok.length)
      await this.db.query(
        `UPDATE fhir_subscriptions s SET status = 'active', error = NULL
         FROM (SELECT id, bool_or(handshake) AS handshake, bool_or(NOT handshake) AS other FROM unnest($1::text[], $2::boolean[]) AS d(id, handshake) GROUP BY id) d
         WHERE s.id = d.id AND s.deleted_at IS NULL
           AND ((d.other AND s.status = 'error' AND s.error IS DISTINCT FROM $3) OR (d.handshake AND (s.status = 'requested' OR s.error = $3)))`,
        [ok.map((i) => i.id), ok.map((i) => i.type === 'handshake'), HANDSHAKE_REFUSED],
      );
    const failed = items.filter((i) => !i.succeeded);
    if (failed.length)
      await this.db.query(
        `UPDATE fhir_subscriptions s SET status = 'error', error = d.error
         FROM (SELECT DISTINCT ON (id) id, error FROM unnest($1::text[], $2::text[]) AS d(id, error)) d
         WHERE s.id = d.id AND s.deleted_at IS NULL AND (d.error <> $3 OR s.status IN ('requested', 'error'))`,
        [failed.map((i) => i.id), failed.map((i) => (i.type === 'handshake' ? HANDSHAKE_REFUSED : `a ${i.type} could not be delivered to the endpoint`)), HANDSHAKE_REFUSED],
      );
    return items.map(() => undefined);
  }

  /** `$status`: a searchset Bundle with the SubscriptionStatus. */
  async statusBundle(caller: ClientPrincipal, id: string): Promise<Bundle> {
    const row = await this.row(caller, id);
    return { resourceType: 'Bundle', type: 'searchset', total: 1, entry: [{ resource: this.status(row, 'query-status', []), search: { mode: 'match' } }] };
  }

  /**
   * `$status` at the type level: the SubscriptionStatus of each of the organisation's subscriptions with one of these ids
   * (none given: all of them, at most 1000) and one of these statuses (none given: any); others' ids are not found, nor
   * are those about resources the caller may not read.
   */
  async statusBundleMany(caller: ClientPrincipal, ids: string[], statuses: string[]): Promise<Bundle> {
    for (const st of statuses) if (!['requested', 'active', 'error', 'off'].includes(st)) throw invalid('status must be requested, active, error or off');
    if (ids.length > 1000) throw invalid('$status: at most 1000 ids');
    const { rows } = await this.db.query<SubscriptionRow>(
      `SELECT ${COLUMNS} FROM fhir_subscriptions WHERE organization_id = $1 AND deleted_at IS NULL
         AND (cardinality($2::text[]) = 0 OR id = ANY($2::text[])) AND (cardinality($3::text[]) = 0 OR status = ANY($3::text[]))
         AND NOT (topic_id = ANY($4::text[]))
       ORDER BY created_at, id LIMIT 1000`,
      [caller.organizationId, ids, statuses, this.unreadableTopics(caller)],
    );
    return { resourceType: 'Bundle', type: 'searchset', total: rows.length, entry: rows.map((r) => ({ resource: this.status(r, 'query-status', []), search: { mode: 'match' } })) };
  }

  /**
   * `$events`: the stored events from `since` to `until` (numbers), as a subscription-notification Bundle (query-event),
   * shown as the caller may read them now (a subscription is its organisation's: another of its clients may ask).
   */
  async eventsBundle(caller: ClientPrincipal, id: string, since?: number, until?: number, content?: string): Promise<Bundle> {
    const row = await this.row(caller, id);
    const last = Number(row.events_since_start);
    const from = Math.max(1, since ?? 1);
    const to = Math.min(last, until ?? last, from + MAX_EVENTS_PAGE - 1);
    if (content !== undefined && !['empty', 'id-only', 'full-resource'].includes(content)) throw invalid('content must be empty, id-only or full-resource');
    // The IG: `content` is a hint the server MAY ignore. Less than the subscription has is given; more is not (it is
    // answered with what the subscription was made for).
    const levels: Content[] = ['empty', 'id-only', 'full-resource'];
    const shown = content && levels.indexOf(content as Content) < levels.indexOf(row.content) ? { ...row, content: content as Content } : row;
    const rows = await storedEvents(this.db, row.id, from, to);
    return this.notification(shown, 'query-event', (await this.visibleMany([{ row: shown, events: rows, reader: caller }]))[0]!);
  }

  // ------------------------------------------------------------------ fan-out

  /**
   * Numbers every change queued before the call (the fan-out workers do it as changes come; this waits for them or does
   * it): for the bench, the CLI and tests that must see a write's numbers at once.
   */
  async numberQueued(): Promise<void> {
    for (;;) {
      const run = await numberQueuedChanges(this.db);
      if (run.busy) await new Promise((resolve) => setTimeout(resolve, 5)); // another process's turn: it goes on until the queue is empty
      else if (!run.changes) return;
    }
  }

  /** Heartbeats: a rest-hook subscription quiet for its heartbeat period gets one (one process queues it). */
  async queueHeartbeats(): Promise<number> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ id: string }>(
        `UPDATE fhir_subscriptions SET last_sent_at = now()
         WHERE id IN (SELECT id FROM fhir_subscriptions WHERE deleted_at IS NULL AND status = 'active' AND channel_type = 'rest-hook'
                        AND heartbeat_seconds IS NOT NULL AND coalesce(last_sent_at, created_at) + make_interval(secs => heartbeat_seconds) <= now()
                      FOR UPDATE SKIP LOCKED)
         RETURNING id`,
      );
      for (const r of rows) await queueNotification(tx, r.id, 'heartbeat', null);
      return rows.length;
    });
  }

  // ------------------------------------------------------------------ websocket

  /**
   * `$get-ws-binding-token`: a one-use token (valid `ttlSeconds`) that binds a websocket to these subscriptions of the
   * organisation (the instance's, or the ids given at the type level: at most MAX_TOKEN_IDS, each a websocket one).
   * Only their subscriber gets one, with a token that reads their topics' resources: a socket's notifications are shown
   * under the subscriber's scopes.
   */
  async bindingToken(caller: ClientPrincipal, ids: string | string[], ttlSeconds: number): Promise<Parameters> {
    const wanted = [...new Set(typeof ids === 'string' ? [ids] : ids)];
    if (!wanted.length) throw invalid('$get-ws-binding-token: name the subscriptions (the id parameter), or call it on one');
    if (wanted.length > MAX_TOKEN_IDS) throw invalid(`$get-ws-binding-token: at most ${MAX_TOKEN_IDS} subscriptions per token`);
    const rows: SubscriptionRow[] = [];
    for (const id of wanted) {
      const row = await this.row(caller, id);
      if (row.channel_type !== 'websocket') throw invalid(`Subscription/${id} is not a websocket subscription`);
      if (row.client_id !== caller.clientId)
        throw new ApiError(403, ErrorCode.forbidden, `Subscription/${id} was made by another client of your organisation: only that client binds a websocket to it (its notifications are shown under that client's scopes)`);
      rows.push(row);
    }
    const token = randomBytes(24).toString('base64url');
    const expires = new Date(this.deps.now().getTime() + ttlSeconds * 1000);
    await this.db.query('INSERT INTO fhir_subscription_ws_tokens (token, organization_id, subscription_ids, expires_at) VALUES ($1, $2, $3, $4)', [token, caller.organizationId, rows.map((r) => r.id), expires.toISOString()]);
    return {
      resourceType: 'Parameters',
      parameter: [
        { name: 'token', valueString: token },
        { name: 'expiration', valueDateTime: expires.toISOString() },
        ...rows.map((row) => ({ name: 'subscription', valueString: `${this.base}/Subscription/${row.id}` })),
        { name: 'websocket-url', valueUrl: `${this.deps.publicUrl().replace(/^http/, 'ws')}/api/fhir/R4/$subscription-ws` },
      ],
    };
  }

  /** Uses a binding token (once): the subscriptions it binds, or undefined when it is unknown, used or expired. */
  async redeem(token: string): Promise<Array<{ id: string; organizationId: string }> | undefined> {
    const { rows } = await this.db.query<{ organization_id: string; subscription_ids: string[] }>(
      'DELETE FROM fhir_subscription_ws_tokens WHERE token = $1 AND expires_at > $2 RETURNING organization_id, subscription_ids',
      [token, this.deps.now().toISOString()],
    );
    return rows[0]?.subscription_ids.map((id) => ({ id, organizationId: rows[0]!.organization_id }));
  }

  /** The events of a subscription after `after` (its number), as websocket notifications; and the new last number. */
  async eventsAfter(organizationId: string, id: string, after: number): Promise<{ bundles: string[]; last: number } | undefined> {
    const loaded = await this.batchLoad({ id, organizationId, from: after + 1, to: after + MAX_EVENTS_PAGE });
    if (!loaded) return undefined;
    const { row, events: visible } = loaded;
    // At most the subscription's maxCount events per notification (backport-max-count; none: one each).
    const per = Math.max(1, row.max_count ?? 1);
    const bundles: string[] = [];
    for (let i = 0; i < visible.length; i += per) bundles.push(JSON.stringify(this.notification(row, 'event-notification', visible.slice(i, i + per))));
    return { bundles, last: visible.at(-1)?.number ?? after };
  }

  /** The handshake a websocket client gets once bound (the IG: a handshake per bound subscription). */
  async wsHandshake(organizationId: string, id: string): Promise<{ body: string; last: number; heartbeatSeconds: number | null } | undefined> {
    const { rows } = await this.db.query<SubscriptionRow>(`SELECT ${COLUMNS} FROM fhir_subscriptions WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL`, [id, organizationId]);
    const row = rows[0];
    if (!row) return undefined;
    return { body: JSON.stringify(this.notification(row, 'handshake', [])), last: Number(row.events_since_start), heartbeatSeconds: row.heartbeat_seconds };
  }

  async wsHeartbeat(organizationId: string, id: string): Promise<string | undefined> {
    const { rows } = await this.db.query<SubscriptionRow>(`SELECT ${COLUMNS} FROM fhir_subscriptions WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL`, [id, organizationId]);
    return rows[0] ? JSON.stringify(this.notification(rows[0], 'heartbeat', [])) : undefined;
  }

  /** Removes the numbered events older than the retention of events (PONT_RETENTION_EVENTS; default never) and expired binding tokens. */
  async purge(retention: Retention): Promise<void> {
    const now = this.deps.now();
    await this.db.query('DELETE FROM fhir_subscription_ws_tokens WHERE expires_at < $1', [now.toISOString()]);
    const before = cutoff(retention, now);
    if (before) await this.db.query('DELETE FROM fhir_subscription_event_runs WHERE created_at < $1', [before.toISOString()]);
  }
}

/**
 * The changes of one write, in its transaction: each change that fires a topic some subscription is on is queued once
 * per topic (fhir_subscription_changes), with the values of the topic's filters on the resource, and the fan-out workers
 * are woken when it commits. One statement, whatever the number of subscriptions; none when no topic fires.
 */
export async function queueChanges(tx: Queryable, changes: ResourceChange[], topics: readonly Topic[]): Promise<void> {
  const queued: Array<{ topic: string; type: string; id: string; version: string | null; interaction: string; filters: string }> = [];
  for (const change of changes) {
    const resource = change.after ?? change.before;
    if (!resource?.id) continue;
    for (const topic of topics)
      if (topicFires(topic, change))
        queued.push({ topic: topic.id, type: resource.resourceType, id: resource.id, version: resource.meta?.versionId ?? null, interaction: change.interaction, filters: JSON.stringify(filterValues(topic, resource)) });
  }
  if (!queued.length) return;
  await tx.query(
    `WITH queued AS (
       INSERT INTO fhir_subscription_changes (topic_id, focus_type, focus_id, focus_version, interaction, filter_values)
       SELECT c.topic_id, c.focus_type, c.focus_id, c.focus_version, c.interaction, c.filter_values::jsonb
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS c(topic_id, focus_type, focus_id, focus_version, interaction, filter_values, n)
       WHERE EXISTS (SELECT 1 FROM fhir_subscriptions s WHERE s.topic_id = c.topic_id AND s.deleted_at IS NULL AND s.status <> 'off')
       ORDER BY c.n
       RETURNING 1)
     SELECT pg_notify($7, '') FROM (SELECT 1 FROM queued LIMIT 1) AS any_queued`,
    [queued.map((q) => q.topic), queued.map((q) => q.type), queued.map((q) => q.id), queued.map((q) => q.version), queued.map((q) => q.interaction), queued.map((q) => q.filters), CHANGES_CHANNEL],
  );
}

/** A subscription's filters all pass the queued change `c` (each filter's value is among the change's values of it). */
const FILTERS_PASS = `(s.filters = '[]'::jsonb OR NOT EXISTS (SELECT 1 FROM jsonb_array_elements(s.filters) f WHERE NOT coalesce(c.filter_values -> (f ->> 'name'), '[]'::jsonb) ? (f ->> 'value')))`;
/** Only one process numbers at a time (pg_try_advisory_xact_lock): the queue is numbered in its order. */
const FANOUT_LOCK = 44_044_044;
/** Queued changes numbered per transaction of the fan-out, at most: so a run's row holds at most this many events (migration 038). */
export const FANOUT_BATCH = 200;

/**
 * The stored events of a subscription numbered `from` to `to`, in number order (at most MAX_EVENTS_PAGE): unnested from
 * the fan-out's rows (one per run, FANOUT_BATCH events at most), found by their last number.
 */
async function storedEvents(db: Queryable, subscriptionId: string, from: number, to: number): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT (r.first_number + x.i - 1)::text AS event_number, x.focus_type, x.focus_id, x.focus_version, x.interaction, x.created_at
     FROM fhir_subscription_event_runs r
     CROSS JOIN LATERAL unnest(r.focus_types, r.focus_ids, r.focus_versions, r.interactions, r.created_ats)
       WITH ORDINALITY AS x(focus_type, focus_id, focus_version, interaction, created_at, i)
     WHERE r.subscription_id = $1 AND r.last_number BETWEEN $2 AND $3::bigint + $5 AND r.first_number <= $3
       AND r.first_number + x.i - 1 BETWEEN $2 AND $3
     ORDER BY r.first_number + x.i - 1
     LIMIT $4`,
    [subscriptionId, from, to, MAX_EVENTS_PAGE, FANOUT_BATCH],
  );
  return rows;
}

/**
 * storedEvents for many subscriptions and ranges in one statement (each range at most MAX_EVENTS_PAGE events): the
 * events of each want, in number order.
 */
async function storedEventsMany(db: Queryable, wants: Array<{ id: string; from: number; to: number }>): Promise<EventRow[][]> {
  const out: EventRow[][] = wants.map(() => []);
  if (!wants.length) return out;
  const { rows } = await db.query<EventRow & { n: string }>(
    `SELECT w.n::text AS n, (r.first_number + x.i - 1)::text AS event_number, x.focus_type, x.focus_id, x.focus_version, x.interaction, x.created_at
     FROM unnest($1::text[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS w(id, from_number, to_number, n)
     JOIN fhir_subscription_event_runs r ON r.subscription_id = w.id AND r.last_number BETWEEN w.from_number AND w.to_number + $4 AND r.first_number <= w.to_number
     CROSS JOIN LATERAL unnest(r.focus_types, r.focus_ids, r.focus_versions, r.interactions, r.created_ats)
       WITH ORDINALITY AS x(focus_type, focus_id, focus_version, interaction, created_at, i)
     WHERE r.first_number + x.i - 1 BETWEEN w.from_number AND w.to_number
     ORDER BY w.n, r.first_number + x.i - 1`,
    [wants.map((w) => w.id), wants.map((w) => w.from), wants.map((w) => Math.min(w.to, w.from + MAX_EVENTS_PAGE - 1)), FANOUT_BATCH],
  );
  for (const { n, ...row } of rows) out[Number(n) - 1]!.push(row);
  return out;
}

/**
 * Calls of `one` made while a batch runs are run together in the next batch, one batch at a time (the first waits for the
 * calls of the same turn of the event loop): many rest-hook deliveries claimed together, or websockets woken by one
 * NOTIFY, are built with one set of statements. When a batch fails, its calls are made again one at a time.
 */
function coalesced<I, O>(many: (items: I[]) => Promise<O[]>): (item: I) => Promise<O> {
  let waiting: Array<{ item: I; resolve: (o: O) => void; reject: (err: unknown) => void }> = [];
  let running = false;
  const next = () => {
    if (running || !waiting.length) return;
    running = true;
    const batch = waiting;
    waiting = [];
    many(batch.map((w) => w.item))
      .then(
        (outs) => batch.forEach((w, i) => w.resolve(outs[i]!)),
        // One call may have failed the batch (a bad row, a database refusal): each is tried alone, so it fails only itself.
        (err) =>
          batch.length === 1
            ? batch[0]!.reject(err)
            : batch.reduce((done, w) => done.then(() => many([w.item]).then(([out]) => w.resolve(out!), w.reject)), Promise.resolve()),
      )
      .finally(() => {
        running = false;
        next();
      });
  };
  // The batch's own context: a call may come from inside another's async context (a transaction), which it must not inherit.
  const inOwnContext = AsyncLocalStorage.snapshot();
  return (item) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ item, resolve, reject });
      if (waiting.length === 1 && !running) inOwnContext(() => setImmediate(next));
    });
}

/**
 * One run of the fan-out: takes up to `batch` queued changes in order and, for every subscription of their topics whose
 * filters pass and whose subscriber may read the resource now (the access policy, asked once per subscriber and
 * resource, not per subscription), gives the next event numbers, a row each, and queues the rest-hook notifications (up
 * to the subscription's maxCount events each) or wakes the websocket holders; then deletes the changes. One transaction,
 * a fixed number of statements whatever the number of subscriptions. `busy`: another process holds the turn.
 */
export async function numberQueuedChanges(db: Database, batch = FANOUT_BATCH): Promise<{ changes: number; events: number; busy: boolean }> {
  return db.transaction(async (tx) => {
    const { rows: turn } = await tx.query<{ mine: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS mine', [FANOUT_LOCK]);
    if (!turn[0]?.mine) return { changes: 0, events: 0, busy: true };
    const { rows: queued } = await tx.query<{ seq: string }>(
      'SELECT seq FROM fhir_subscription_changes WHERE retry_at IS NULL OR retry_at <= now() ORDER BY seq LIMIT $1',
      [Math.min(batch, FANOUT_BATCH)],
    );
    if (!queued.length) return { changes: 0, events: 0, busy: false };
    const seqs = queued.map((q) => q.seq);
    // Who would hear of each change: its subscribers (client, organisation, content empty or not), with the client as it is now.
    const { rows: audience } = await tx.query<{
      seq: string;
      focus_type: string;
      focus_id: string;
      client_id: string;
      organization_id: string;
      empty: boolean;
      scopes: string[] | null;
      all_patients: boolean | null;
    }>(
      `SELECT a.*, (SELECT k.scopes FROM oauth_clients k WHERE k.client_id = a.client_id AND k.revoked_at IS NULL) AS scopes,
              (SELECT k.all_patients FROM oauth_clients k WHERE k.client_id = a.client_id) AS all_patients
       FROM (SELECT DISTINCT c.seq::text AS seq, c.focus_type, c.focus_id, s.client_id, s.organization_id, s.content = 'empty' AS empty
             FROM fhir_subscription_changes c
             JOIN fhir_subscriptions s ON s.topic_id = c.topic_id AND s.deleted_at IS NULL AND s.status <> 'off' AND s.created_at <= c.created_at
             WHERE c.seq = ANY($1::bigint[]) AND ${FILTERS_PASS}) a`,
      [seqs],
    );
    // The policy once per subscriber and resource type, for all the run's resources of that type: a statement each.
    const groups = new Map<string, { subscriber: (typeof audience)[number]; type: string; ids: Set<string>; allowed?: Set<string> }>();
    const groupKey = (a: (typeof audience)[number]) => `${a.client_id}\u0000${a.organization_id}\u0000${a.empty}\u0000${a.focus_type}`;
    for (const a of audience) {
      const key = groupKey(a);
      let group = groups.get(key);
      if (!group) groups.set(key, (group = { subscriber: a, type: a.focus_type, ids: new Set() }));
      group.ids.add(a.focus_id);
    }
    for (const group of groups.values()) group.allowed = await mayRead(tx, group.subscriber, group.subscriber.empty, group.type, [...group.ids]);
    const allowed = audience.filter((a) => groups.get(groupKey(a))!.allowed!.has(a.focus_id));
    let events = 0;
    let sockets: string[] = [];
    let hooks = 0;
    if (allowed.length) {
      const { rows } = await tx.query<{ events: string; hooks: string; sockets: string[] }>(
        `WITH allowed AS (
           SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::boolean[]) AS a(seq, client_id, organization_id, empty)
         ), matched AS (
           SELECT s.id AS subscription_id, c.seq, c.focus_type, c.focus_id, c.focus_version, c.interaction, c.created_at
           FROM allowed a
           JOIN fhir_subscription_changes c ON c.seq = a.seq
           JOIN fhir_subscriptions s ON s.topic_id = c.topic_id AND s.client_id = a.client_id AND s.organization_id = a.organization_id
             AND (s.content = 'empty') = a.empty AND s.deleted_at IS NULL AND s.status <> 'off' AND s.created_at <= c.created_at
           WHERE ${FILTERS_PASS}
         ), grouped AS (
           -- per subscription, this run's events in queue order
           SELECT subscription_id, count(*) AS n, array_agg(focus_type ORDER BY seq) AS focus_types, array_agg(focus_id ORDER BY seq) AS focus_ids,
                  array_agg(focus_version ORDER BY seq) AS focus_versions, array_agg(interaction ORDER BY seq) AS interactions,
                  array_agg(created_at ORDER BY seq) AS created_ats
           FROM matched GROUP BY subscription_id
         ), raised AS (
           -- deleted meanwhile: re-checked on the locked row, so it is numbered nothing more. What the later statements
           -- need comes out of this one (no join between the CTEs: the planner cannot size them)
           UPDATE fhir_subscriptions s SET events_since_start = s.events_since_start + g.n, last_sent_at = now()
           FROM grouped g WHERE s.id = g.subscription_id AND s.deleted_at IS NULL AND s.status <> 'off'
           RETURNING s.id, s.events_since_start - g.n AS base, g.n, s.channel_type, s.status, s.error, s.webhook_subscription_id, greatest(coalesce(s.max_count, 1), 1) AS per,
                     g.focus_types, g.focus_ids, g.focus_versions, g.interactions, g.created_ats
         ), numbered AS (
           -- one row per subscription: this run's events for it, numbered base + 1 .. base + n
           INSERT INTO fhir_subscription_event_runs (subscription_id, first_number, last_number, focus_types, focus_ids, focus_versions, interactions, created_ats)
           SELECT id, base + 1, base + n, focus_types, focus_ids, focus_versions, interactions, created_ats FROM raised
           RETURNING cardinality(focus_ids) AS n
         ), hooks AS (
           -- an error subscription is still sent to (a success makes it active again); a requested one, or one whose
           -- handshake was refused ($5), waits for its handshake
           INSERT INTO webhook_deliveries (id, subscription_id, fhir_subscription_id, notification_type, event_number, event_count, status, next_attempt_at)
           SELECT 'whdlv_' || replace(gen_random_uuid()::text, '-', ''), r.webhook_subscription_id, r.id, 'event-notification',
                  r.base + g.first, least(r.per, r.n - g.first + 1), 'pending', now()
           FROM raised r CROSS JOIN LATERAL generate_series(1, r.n, r.per) AS g(first)
           WHERE r.channel_type = 'rest-hook' AND r.status <> 'requested' AND r.error IS DISTINCT FROM $5 AND r.webhook_subscription_id IS NOT NULL
           RETURNING 1
         )
         SELECT (SELECT coalesce(sum(n), 0) FROM numbered)::text AS events, (SELECT count(*) FROM hooks)::text AS hooks,
                coalesce((SELECT array_agg(id) FROM raised WHERE channel_type = 'websocket'), '{}') AS sockets`,
        [allowed.map((a) => a.seq), allowed.map((a) => a.client_id), allowed.map((a) => a.organization_id), allowed.map((a) => a.empty), HANDSHAKE_REFUSED],
      );
      events = Number(rows[0]!.events);
      hooks = Number(rows[0]!.hooks);
      sockets = rows[0]!.sockets;
    }
    await tx.query('DELETE FROM fhir_subscription_changes WHERE seq = ANY($1::bigint[])', [seqs]);
    if (hooks) await tx.query('SELECT pg_notify($1, $2)', [DELIVERY_CHANNEL, '']);
    // The processes holding sockets are woken with the ids, as few NOTIFYs as the payload limit (8000 bytes) allows.
    const payloads: string[] = [];
    for (let i = 0; i < sockets.length; i += NOTIFY_IDS) payloads.push(sockets.slice(i, i + NOTIFY_IDS).join(','));
    if (payloads.length) await tx.query('SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p', [SUBSCRIPTION_CHANNEL, payloads]);
    return { changes: seqs.length, events, busy: false };
  });
}

/**
 * Sets aside the oldest due queued change after it failed alone (numberQueuedChanges with a batch of 1): not taken again
 * for 10 s per attempt so far, at most 10 minutes, so the changes after it go on. Its seq, or undefined when another
 * process holds the turn or nothing is due.
 */
export async function setAsideOldestChange(db: Database, error: string): Promise<string | undefined> {
  return db.transaction(async (tx) => {
    const { rows: turn } = await tx.query<{ mine: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS mine', [FANOUT_LOCK]);
    if (!turn[0]?.mine) return undefined;
    const { rows } = await tx.query<{ seq: string }>(
      `UPDATE fhir_subscription_changes SET attempts = attempts + 1, error = left($1, 1000),
         retry_at = now() + least(attempts + 1, 60) * interval '10 seconds'
       WHERE seq = (SELECT seq FROM fhir_subscription_changes WHERE retry_at IS NULL OR retry_at <= now() ORDER BY seq LIMIT 1)
       RETURNING seq`,
      [error],
    );
    return rows[0]?.seq;
  });
}

let loadedTopics: readonly Topic[] = [];
const queueLoaded = (tx: Queryable, changes: ResourceChange[]) => queueChanges(tx, changes, loadedTopics);

/** The topics every write's changes are queued by from now on (registered once per process: a change is queued once). */
export function useTopics(topics: readonly Topic[]): void {
  loadedTopics = topics;
  onResourcesChanged(queueLoaded);
}

/** Which of these resources of one type may the subscriber's organisation read now? The access policy's row rule, in the fan-out's transaction. */
async function mayRead(
  tx: Queryable,
  sub: Pick<SubscriptionRow, 'client_id' | 'organization_id' | 'scopes' | 'all_patients'>,
  empty: boolean,
  type: string,
  ids: string[],
): Promise<Set<string>> {
  const principal = subscriber(sub);
  if (!principal) return new Set();
  const policy = accessPolicyFor(principal, 'fhir');
  if (!empty && !policy.canRead(type)) return new Set();
  return allowedIds(tx, type, ids, policy.rowFilter);
}

/** The subscriber as the policy sees it now: the client that made the subscription, undefined once it is revoked. */
function subscriber(row: Pick<SubscriptionRow, 'client_id' | 'organization_id' | 'scopes' | 'all_patients'>): ClientPrincipal | undefined {
  if (!row.scopes) return undefined;
  return { kind: 'client', clientId: row.client_id, organizationId: row.organization_id, scopes: row.scopes, ...(row.all_patients && { allPatients: true }) };
}

/** A handshake or heartbeat delivery of a rest-hook subscription, due now; the workers wake on commit. */
async function queueNotification(tx: Queryable, subscriptionId: string, type: 'handshake' | 'heartbeat', eventNumber: number | null): Promise<void> {
  await tx.query(
    `INSERT INTO webhook_deliveries (id, subscription_id, fhir_subscription_id, notification_type, event_number, status, next_attempt_at)
     SELECT 'whdlv_' || replace(gen_random_uuid()::text, '-', ''), webhook_subscription_id, id, $2, $3, 'pending', now()
     FROM fhir_subscriptions WHERE id = $1 AND webhook_subscription_id IS NOT NULL`,
    [subscriptionId, type, eventNumber],
  );
  await tx.query('SELECT pg_notify($1, $2)', [DELIVERY_CHANNEL, '']);
}
