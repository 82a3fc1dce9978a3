/**
 * Pont's official TypeScript client (interface §4.7). `await Pont.create({ clientId, clientSecret, environment })`
 * fetches the first token at once (one token request: bad credentials are an AuthenticationError there);
 * `new Pont({...})` is lazy: it makes no network call, and the first call fetches the token. Every method takes a last `CallOptions` argument (idempotencyKey,
 * timeout, deadline, maxRetries, headers, purposeOfUse, emergencyReason, signal). Answers are the server's JSON,
 * typed from its OpenAPI document (./types.js) and FHIR resources from @medplum/fhirtypes, each with a
 * non-enumerable `lastResponse` (status, requestId…). Lists answer a PagePromise: `await` for one page, `for await`
 * for every item. Webhook helpers need no client: `import { webhooks } from '@pont/client'`. A patient's own app (the
 * /api/v1/mobile routes, with a `pat_` token) is `PatientApp`.
 */
import type { Bundle, BundleEntry, CapabilityStatement, ExtractResource, OperationOutcome, Resource, ResourceType } from '@medplum/fhirtypes';
import { Transport, type Answer, type CallOptions, type Credentials, type Request, type ResponseInfo, type TransportOptions, REFRESH_BEFORE_SECONDS } from './http.js';
import { AuthenticationError, ValidationError } from './errors.js';
import { PagePromise } from './paging.js';
import * as webhooks from './webhooks.js';
import { verifyConsentArtefact, type PublicJwk } from './artefacts.js';
import type * as T from './types.js';

export * from './errors.js';
export type * from './types.js';
export type { WebhookEvent } from './webhooks.js';
export type { CallOptions, Hooks, RequestEvent, ResponseEvent, ResponseInfo, TransportOptions } from './http.js';
export { RETRY_DEFAULTS, retryDelay, mayRetry } from './http.js';
export { PagePromise } from './paging.js';
export { VERSION } from './version.js';
export { webhooks };
export { verifyConsentArtefact, ArtefactVerificationError } from './artefacts.js';
export type { ConsentArtefactPayload, PublicJwk } from './artefacts.js';

/** Base URLs of the hosted environments; `baseUrl` overrides them (a local server). */
export const ENVIRONMENTS = { sandbox: 'https://sandbox.pont.health', production: 'https://api.pont.health' } as const;

/** Settings shared by Pont and BridgeAgent: retries, timeouts, headers, hooks (http.ts), and where Pont is. */
export interface ConnectionOptions extends Omit<TransportOptions, 'baseUrl'> {
  environment?: keyof typeof ENVIRONMENTS;
  /** A server of your own (e.g. http://127.0.0.1:8080); overrides `environment`. */
  baseUrl?: string;
}

export interface PontOptions extends ConnectionOptions {
  clientId: string;
  clientSecret: string;
}

/** An answer with what the library knows about the response that carried it. */
export type WithResponse<R> = R & { readonly lastResponse: ResponseInfo };
type Query = Record<string, string | number | boolean | ReadonlyArray<string | number> | undefined | null>;
type AnyResource = Resource;
type ResourceOf<K extends ResourceType> = ExtractResource<K>;

/** A Bulk Data export's manifest (FHIR Bulk Data Access 2.0). */
export interface BulkExportManifest {
  transactionTime: string;
  request: string;
  requiresAccessToken: boolean;
  output: Array<{ type: string; url: string; count?: number }>;
  error: Array<{ type: string; url: string }>;
}
/** GET /healthz and /readyz: `ok`, or `unavailable` with the check that fails (readyz answers it with 503). */
export interface Health {
  status: 'ok' | 'unavailable';
  checks?: Record<string, string>;
  /** The version of the maps this process runs. */
  mappings_version?: string;
}

/** POST /api/demo/reset: what it removed (`replaced`) and the fresh demo, with its new credentials. */
export interface DemoReset {
  environment: string;
  organization_id: string;
  facility_id: string;
  clients: Array<{ name: string; client_id: string; client_secret: string; scopes: string[] }>;
  bridge_agent: { agent_id: string; agent_key: string; facility_id: string; [key: string]: unknown };
  patients: Array<{ health_id: string; patient_id: string; first_name?: string; last_name?: string; [key: string]: unknown }>;
  replaced: { fhir_resources: number; clients: number; bridge_agents: number; patient_tokens: number; events: number; webhook_deliveries: number; webhook_subscriptions_kept: number };
  seeded: Record<string, unknown>;
  [key: string]: unknown;
}

export type BulkExportStatus =
  | { status: 'in-progress'; progress: string | null; retryAfter: number | null; lastResponse: ResponseInfo }
  | { status: 'completed'; manifest: BulkExportManifest; lastResponse: ResponseInfo };

/** The `lastResponse` of an answer (undefined for anything else). */
export function responseOf(answer: unknown): ResponseInfo | undefined {
  return answer && typeof answer === 'object' ? (answer as { lastResponse?: ResponseInfo }).lastResponse : undefined;
}

function required(method: string, values: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(values))
    if (value === undefined || value === null || value === '') throw new ValidationError(`${method}: ${name} is required`);
}
const enc = encodeURIComponent;

function baseUrlOf(method: string, options: ConnectionOptions): string {
  const environment = options.environment ?? 'sandbox';
  if (!options.baseUrl && !(environment in ENVIRONMENTS)) throw new ValidationError(`${method}: environment must be sandbox or production`);
  const baseUrl = options.baseUrl ?? ENVIRONMENTS[environment];
  if (!URL.canParse(baseUrl) || !/^https?:$/.test(new URL(baseUrl).protocol)) throw new ValidationError(`${method}: baseUrl must be an http(s) URL`);
  return baseUrl;
}

function transportOf(options: ConnectionOptions, baseUrl: string): Transport {
  return new Transport({ ...options, baseUrl });
}

/** Sends requests and returns the answer with its `lastResponse`; shared by the modules. */
class Caller {
  constructor(
    readonly http: Transport,
    private readonly credentials?: Credentials,
  ) {}

  async send<R>(req: Request, call?: CallOptions): Promise<WithResponse<R>> {
    const answer: Answer<R> = await this.http.request<R>({ credentials: this.credentials, ...req }, call);
    return withResponse(answer);
  }

  get<R>(path: string, query?: Query, call?: CallOptions, accept?: string): Promise<WithResponse<R>> {
    return this.send<R>({ method: 'GET', path, query, accept }, call);
  }

  /** A POST under /api/v1/connect or /api/v1/sdk: the server honours an Idempotency-Key, so one is sent. */
  create<R>(path: string, body: unknown, call?: CallOptions): Promise<WithResponse<R>> {
    return this.send<R>({ method: 'POST', path, body, idempotencyKey: 'new' }, call);
  }

  /** A list: one page per request, the next one from the page. */
  list<P, I>(first: () => Promise<WithResponse<P>>, itemsOf: (page: P) => I[], nextOf: (page: P) => (() => Promise<WithResponse<P>>) | null): PagePromise<WithResponse<P>, I> {
    return new PagePromise(first, itemsOf, nextOf);
  }

  /** A FHIR search (or history) Bundle, followed by its `next` links. */
  bundle<R extends AnyResource>(first: () => Promise<WithResponse<Bundle<R>>>, call?: CallOptions): PagePromise<WithResponse<Bundle<R>>, R> {
    return this.list<Bundle<R>, R>(
      first,
      (page) => (page.entry ?? []).filter((e: BundleEntry<R>) => e.resource && e.search?.mode !== 'outcome').map((e) => e.resource!),
      (page) => {
        const next = page.link?.find((l) => l.relation === 'next')?.url;
        return next ? () => this.get<Bundle<R>>(next, undefined, call, FHIR_JSON) : null;
      },
    );
  }
}

function withResponse<R>(answer: Answer<R>): WithResponse<R> {
  const body = (answer.body ?? {}) as R;
  if (typeof body === 'object' && body !== null) Object.defineProperty(body, 'lastResponse', { value: answer.info, enumerable: false });
  return body as WithResponse<R>;
}

const FHIR = '/api/fhir/R4';
const FHIR_JSON = 'application/fhir+json';

/**
 * The client of an integration (client credentials, interface §4.7). Two ways to make one:
 * - `await Pont.create(options)`, eager: checks the credentials with one token request before it answers (a wrong
 *   secret or an unknown client: AuthenticationError, at once). The quick starts use it.
 * - `new Pont(options)`, lazy: no network call; the first call that needs a token fetches it (bad credentials:
 *   AuthenticationError from that call). For code that must not block or fail while it is being set up.
 * Either way the token is cached and refreshed 60 s before expiry.
 */
export class Pont {
  readonly auth;
  readonly healthIds;
  readonly patients;
  readonly consents;
  readonly records;
  readonly fhir;
  readonly webhooks;
  readonly inventory;
  readonly payments;
  readonly bulk;
  readonly discovery;
  readonly system;
  readonly demo;

  /** Lazy: makes no network call; the first call fetches the token (bad credentials: AuthenticationError there). `Pont.create` checks them at once. */
  constructor(options: PontOptions) {
    required('new Pont', { clientId: options?.clientId, clientSecret: options?.clientSecret });
    const http = transportOf(options, baseUrlOf('new Pont', options));
    const tokens = new TokenSource(http, options.clientId, options.clientSecret);
    const api = new Caller(http, tokens);
    // Discovery documents and probes: public, sent without a token (none is fetched for them).
    const open = new Caller(http);
    const perPatient =
      <K extends ResourceType>(type: K) =>
      (healthId: string, filters?: Query, call?: CallOptions) => {
        required(`fhir.${type}`, { healthId });
        return api.bundle<ResourceOf<K>>(() => api.get(`/api/v1/sdk/patients/${enc(healthId)}/fhir/${type}`, filters, call, FHIR_JSON), call);
      };
    const fhirSend = <R>(req: Request, call: CallOptions | undefined) => api.send<R>({ contentType: FHIR_JSON, accept: FHIR_JSON, ...req }, call);
    const fhirType = (method: string, type: string) => {
      required(method, { type });
      if (!/^[A-Z][A-Za-z]+$/.test(type)) throw new ValidationError(`${method}: ${type} is not a FHIR resource type`);
      return type;
    };

    this.auth = {
      /** The current access token (fetched, or refreshed 60 s before expiry). */
      token: async (): Promise<string> => tokens.token(false),
      /** RFC 7662 introspection of any token (`{active: false}` for one that is not live). */
      introspect: (token: string, call?: CallOptions) => {
        required('auth.introspect', { token });
        return api.send<T.IntrospectionResponse>({ method: 'POST', path: '/api/v1/connect/auth/introspect', body: { token }, repeatable: true }, call);
      },
      /** This client's own token: its scopes, organisation and expiry. */
      introspectCurrent: (call?: CallOptions) => api.get<T.SdkTokenIntrospection>('/api/v1/sdk/token/introspect', undefined, call),
      /**
       * Replaces this client's secret: the answer's `client_secret` is shown only this once, and this instance asks
       * for its next tokens with it. The old secret stays valid for `overlapSeconds` (server default 86400; 0: none).
       */
      rotateClientSecret: async (overlapSeconds?: number, call?: CallOptions) => {
        const rotated = await api.create<T.ClientSecretRotation>(`/api/v1/connect/auth/clients/${enc(options.clientId)}/rotate-secret`, overlapSeconds === undefined ? {} : { overlap_seconds: overlapSeconds }, call);
        tokens.useClientSecret(rotated.client_secret);
        return rotated;
      },
    };
    this.healthIds = {
      /** Finds the patient by Health ID, or by demographics (creating them when none matches): `{health_id, status}`. */
      resolve: (input: T.HealthIdResolveRequest, call?: CallOptions) => {
        required('healthIds.resolve', { input });
        if (!input.health_id) required('healthIds.resolve', { first_name: input.first_name });
        return api.create<T.HealthIdResolveResponse>('/api/v1/connect/patients/resolve', input, call);
      },
      verify: (healthId: string, call?: CallOptions) => {
        required('healthIds.verify', { healthId });
        return api.get<T.HealthIdVerifyResponse>(`/api/v1/connect/patients/verify/${enc(healthId)}`, undefined, call);
      },
    };
    this.patients = {
      getSummary: (healthId: string, call?: CallOptions) => {
        required('patients.getSummary', { healthId });
        return api.get<T.PatientSummary>(`/api/v1/sdk/patients/${enc(healthId)}/summary`, undefined, call);
      },
      search: (healthId: string, call?: CallOptions) => {
        required('patients.search', { healthId });
        return api.get<T.PatientProfile>('/api/v1/connect/patient/search', { health_id: healthId }, call);
      },
      /** A one-time code the patient enters in Pont's app to pair it (and then answer consent requests). */
      issuePairingCode: (healthId: string, call?: CallOptions) => {
        required('patients.issuePairingCode', { healthId });
        return api.create<T.PairingCode>(`/api/v1/connect/patient/${enc(healthId)}/mobile/pairing-code`, undefined, call);
      },
    };
    this.consents = {
      request: (input: T.ConsentRequestCreate, call?: CallOptions) => {
        required('consents.request', { health_id: input?.health_id, purpose: input?.purpose, requested_scopes: input?.requested_scopes });
        return api.create<T.ConsentRequestCreated>('/api/v1/sdk/consents/request', input, call);
      },
      grant: (healthId: string, input: T.ConsentGrantRequest, call?: CallOptions) => {
        required('consents.grant', { healthId, consent_type: input?.consent_type, expires_at: input?.expires_at });
        return api.create<T.ConsentStatus>(`/api/v1/connect/patient/${enc(healthId)}/consent/grant`, input, call);
      },
      status: (healthId: string, call?: CallOptions) => {
        required('consents.status', { healthId });
        return api.get<T.ConsentStatus>(`/api/v1/connect/patient/${enc(healthId)}/consent`, undefined, call);
      },
      revoke: (healthId: string, input: { purpose?: string; external_reference?: string } = {}, call?: CallOptions) => {
        required('consents.revoke', { healthId });
        return api.create<T.ConsentStatus>(`/api/v1/connect/patient/${enc(healthId)}/consent/revoke`, input, call);
      },
      /** The signed consent artefact (`{artefact}`: a compact JWS); verify it with `verifiedArtefact` or verifyConsentArtefact. */
      artefact: (consentId: string, call?: CallOptions) => {
        required('consents.artefact', { consentId });
        return api.get<T.ConsentArtefact>(`/api/v1/connect/consents/${enc(consentId)}/artefact`, undefined, call);
      },
      /** The artefact, fetched and verified with Pont's key set (GET /.well-known/jwks.json): its payload, or ArtefactVerificationError. */
      verifiedArtefact: async (consentId: string, call?: CallOptions) => {
        const { artefact } = await this.consents.artefact(consentId, call);
        const jwks = await api.get<{ keys: PublicJwk[] }>('/.well-known/jwks.json', undefined, call);
        return verifyConsentArtefact(artefact, jwks);
      },
      /** The caller's organisation's consents revoked since `since` (ISO date-time): `{items: [{consent_id, revoked_at}]}`. */
      revoked: (since: string, call?: CallOptions) => {
        required('consents.revoked', { since });
        return api.get<T.RevokedConsents>('/api/v1/connect/consents/revoked', { since }, call);
      },
    };
    type RecordItem = NonNullable<T.PatientRecords['records'][keyof T.PatientRecords['records']]>[number];
    this.records = {
      /**
       * Records by type (`all` by default). `await` answers one page; `for await` iterates every record of a single
       * type, following `next_cursor`.
       */
      get: (healthId: string, filters: { type?: string; limit?: number; cursor?: string; since?: string } = {}, call?: CallOptions) => {
        required('records.get', { healthId });
        const page = (cursor?: string) => () => api.get<T.PatientRecords>(`/api/v1/connect/patient/${enc(healthId)}/records`, { ...filters, cursor }, call);
        return api.list<T.PatientRecords, RecordItem>(
          page(filters.cursor),
          (p) => Object.values(p.records ?? {}).flatMap((list) => (list ?? []) as RecordItem[]),
          (p) => (p.next_cursor ? page(p.next_cursor) : null),
        );
      },
      pushEncounter: (input: T.EncounterPush, call?: CallOptions) => {
        required('records.pushEncounter', { health_id: input?.health_id, encounter_type: input?.encounter_type });
        return api.create<T.EncounterPushed>('/api/v1/sdk/records/encounters', input, call);
      },
      pushLabResult: (input: T.LabResultPush, call?: CallOptions) => {
        required('records.pushLabResult', { health_id: input?.health_id, test_name: input?.test_name, result_value: input?.result_value, flagged: input?.flagged });
        return api.create<T.LabResultPushed>('/api/v1/sdk/records/lab-results', input, call);
      },
    };
    this.fhir = {
      // The SDK's per-patient views, by Health ID.
      medicationRequests: perPatient('MedicationRequest'),
      allergyIntolerances: perPatient('AllergyIntolerance'),
      diagnosticReports: perPatient('DiagnosticReport'),
      conditions: perPatient('Condition'),
      patientEverything: (healthId: string, params?: Query, call?: CallOptions) => {
        required('fhir.patientEverything', { healthId });
        return api.bundle<AnyResource>(() => api.get(`/api/v1/sdk/patients/${enc(healthId)}/fhir/$everything`, params, call, FHIR_JSON), call);
      },
      // The FHIR R4 API (/api/fhir/R4).
      capabilities: (call?: CallOptions) => api.get<CapabilityStatement>(`${FHIR}/metadata`, undefined, call, FHIR_JSON),
      /** A search: `await` for the first Bundle, `for await` for every matching resource (one page at a time). */
      search: <K extends ResourceType>(type: K, params?: Query, call?: CallOptions) => {
        fhirType('fhir.search', type);
        return api.bundle<ResourceOf<K>>(() => api.get(`${FHIR}/${type}`, params, call, FHIR_JSON), call);
      },
      /** The same search sent as a form (long queries); the next pages are GET links. */
      searchPost: <K extends ResourceType>(type: K, params: Query = {}, call?: CallOptions) => {
        fhirType('fhir.searchPost', type);
        const body = new URL(api.http.url('http://form/', params)).searchParams.toString();
        return api.bundle<ResourceOf<K>>(
          () => api.send({ method: 'POST', path: `${FHIR}/${type}/_search`, body, contentType: 'application/x-www-form-urlencoded', accept: FHIR_JSON, repeatable: true }, call),
          call,
        );
      },
      /** A search in a patient's compartment (`Patient/{id}/{type}`). */
      searchCompartment: <K extends ResourceType>(patientId: string, type: K, params?: Query, call?: CallOptions) => {
        required('fhir.searchCompartment', { patientId });
        fhirType('fhir.searchCompartment', type);
        return api.bundle<ResourceOf<K>>(() => api.get(`${FHIR}/Patient/${enc(patientId)}/${type}`, params, call, FHIR_JSON), call);
      },
      /** Patient/{id}/$everything, paged. */
      everything: (patientId: string, params?: Query, call?: CallOptions) => {
        required('fhir.everything', { patientId });
        return api.bundle<AnyResource>(() => api.get(`${FHIR}/Patient/${enc(patientId)}/$everything`, params, call, FHIR_JSON), call);
      },
      read: <K extends ResourceType>(type: K, id: string, call?: CallOptions) => {
        fhirType('fhir.read', type);
        required('fhir.read', { id });
        return api.get<ResourceOf<K>>(`${FHIR}/${type}/${enc(id)}`, undefined, call, FHIR_JSON);
      },
      vread: <K extends ResourceType>(type: K, id: string, versionId: string, call?: CallOptions) => {
        fhirType('fhir.vread', type);
        required('fhir.vread', { id, versionId });
        return api.get<ResourceOf<K>>(`${FHIR}/${type}/${enc(id)}/_history/${enc(versionId)}`, undefined, call, FHIR_JSON);
      },
      /** The history of a resource (type and id) or of a whole type (no id), newest first, paged. */
      history: <K extends ResourceType>(type: K, id?: string, params?: Query, call?: CallOptions) => {
        fhirType('fhir.history', type);
        const path = id === undefined ? `${FHIR}/${type}/_history` : `${FHIR}/${type}/${enc(id)}/_history`;
        return api.bundle<ResourceOf<K>>(() => api.get(path, params, call, FHIR_JSON), call);
      },
      /** Creates a resource (`ifNoneExist`: a conditional create). A write: retried only with a caller's `idempotencyKey`. */
      create: <R extends AnyResource>(resource: R, options: CallOptions & { ifNoneExist?: string } = {}) => {
        required('fhir.create', { resourceType: resource?.resourceType });
        const { ifNoneExist, ...call } = options;
        const path = `${FHIR}/${fhirType('fhir.create', resource.resourceType)}`;
        return fhirSend<ResourceOf<R['resourceType']>>({ method: 'POST', path, body: resource, headers: defined({ 'if-none-exist': ifNoneExist }) }, call);
      },
      /** Replaces a resource (its `id`); `ifMatch` (a version id) refuses it when someone changed it since (412). */
      update: <R extends AnyResource>(resource: R, options: CallOptions & { ifMatch?: string } = {}) => {
        required('fhir.update', { resourceType: resource?.resourceType, id: resource?.id });
        const { ifMatch, ...call } = options;
        return fhirSend<ResourceOf<R['resourceType']>>({ method: 'PUT', path: `${FHIR}/${fhirType('fhir.update', resource.resourceType)}/${enc(resource.id!)}`, body: resource, headers: defined({ 'if-match': ifMatch && `W/"${ifMatch}"` }) }, call);
      },
      /** Updates the one resource the search matches, or creates it when none does. */
      conditionalUpdate: <R extends AnyResource>(resource: R, params: Query, call?: CallOptions) => {
        required('fhir.conditionalUpdate', { resourceType: resource?.resourceType, params });
        return fhirSend<ResourceOf<R['resourceType']>>({ method: 'PUT', path: `${FHIR}/${fhirType('fhir.conditionalUpdate', resource.resourceType)}`, query: params, body: resource }, call);
      },
      /** A JSON Patch (RFC 6902) of a resource; `ifMatch` as for update. */
      patch: <K extends ResourceType>(type: K, id: string, operations: ReadonlyArray<{ op: string; path: string; value?: unknown; from?: string }>, options: CallOptions & { ifMatch?: string } = {}) => {
        fhirType('fhir.patch', type);
        required('fhir.patch', { id, operations });
        const { ifMatch, ...call } = options;
        return fhirSend<ResourceOf<K>>({ method: 'PATCH', path: `${FHIR}/${type}/${enc(id)}`, body: operations, contentType: 'application/json-patch+json', headers: defined({ 'if-match': ifMatch && `W/"${ifMatch}"` }) }, call);
      },
      /** Patches the one resource the search matches (none: 404; several: 412). */
      conditionalPatch: <K extends ResourceType>(type: K, params: Query, operations: ReadonlyArray<{ op: string; path: string; value?: unknown; from?: string }>, call?: CallOptions) => {
        fhirType('fhir.conditionalPatch', type);
        required('fhir.conditionalPatch', { params, operations });
        return fhirSend<ResourceOf<K>>({ method: 'PATCH', path: `${FHIR}/${type}`, query: params, body: operations, contentType: 'application/json-patch+json' }, call);
      },
      /**
       * $validate: the OperationOutcome of the server's checks, nothing stored. Without `id`, as a new resource; with
       * `id`, against the stored one (`mode` update, the default, or delete). Has no effect: retried like a GET.
       */
      validate: (resource: AnyResource, options: CallOptions & { id?: string; mode?: 'create' | 'update' | 'delete' } = {}) => {
        required('fhir.validate', { resourceType: resource?.resourceType });
        const { id, mode, ...call } = options;
        const type = fhirType('fhir.validate', resource.resourceType);
        const path = id === undefined ? `${FHIR}/${type}/$validate` : `${FHIR}/${type}/${enc(id)}/$validate`;
        return fhirSend<OperationOutcome>({ method: 'POST', path, query: { mode }, body: resource, repeatable: true }, call);
      },
      /** Deletes a resource (deleting one already gone succeeds, so a caller's idempotencyKey makes it retried safely). */
      delete: (type: ResourceType, id: string, call?: CallOptions) => {
        fhirType('fhir.delete', type);
        required('fhir.delete', { id });
        return fhirSend<Record<string, unknown>>({ method: 'DELETE', path: `${FHIR}/${type}/${enc(id)}` }, call);
      },
      /** Deletes the one resource the search matches (none: nothing deleted; several: 412, nothing deleted). */
      conditionalDelete: (type: ResourceType, params: Query, call?: CallOptions) => {
        fhirType('fhir.conditionalDelete', type);
        required('fhir.conditionalDelete', { params });
        return fhirSend<Record<string, unknown>>({ method: 'DELETE', path: `${FHIR}/${type}`, query: params }, call);
      },
      /** A transaction (all or nothing) or batch Bundle. */
      transaction: (bundle: Bundle, call?: CallOptions) => {
        required('fhir.transaction', { resourceType: bundle?.resourceType, type: bundle?.type });
        return fhirSend<Bundle>({ method: 'POST', path: FHIR, body: bundle }, call);
      },
    };
    this.webhooks = {
      /** Subscribes an HTTPS endpoint; the answer's `webhook_secret` is shown only this once. */
      subscribe: (callbackUrl: string, events: T.WebhookEventType[] | string[], description = '', call?: CallOptions) => {
        required('webhooks.subscribe', { callbackUrl, events });
        return api.create<T.WebhookSubscriptionCreated>('/api/v1/connect/webhooks/subscriptions', { callback_url: callbackUrl, subscribed_events: events, description }, call);
      },
      /** The organisation's active subscriptions (one page; iterate for each). */
      list: (call?: CallOptions) =>
        api.list<{ subscriptions: T.WebhookSubscription[] }, T.WebhookSubscription>(
          () => api.get('/api/v1/connect/webhooks/subscriptions', undefined, call),
          (p) => p.subscriptions,
          () => null,
        ),
      /** Unsubscribes. Not retried without a caller's idempotencyKey: a repeat of one that went through answers 404. */
      unsubscribe: (subscriptionId: string, call?: CallOptions) => {
        required('webhooks.unsubscribe', { subscriptionId });
        return api.send<Record<string, never>>({ method: 'DELETE', path: `/api/v1/connect/webhooks/subscriptions/${enc(subscriptionId)}` }, call);
      },
      /** Delivers the event again (same id, fresh signature). */
      replay: (eventId: string, call?: CallOptions) => {
        required('webhooks.replay', { eventId });
        return api.create<T.WebhookReplay>(`/api/v1/connect/webhooks/events/${enc(eventId)}/replay`, undefined, call);
      },
      /**
       * Replaces the subscription's signing secret (the answer's `webhook_secret`, shown only this once). For
       * `overlapSeconds` (server default 86400; 0: none) deliveries are signed with both secrets.
       */
      rotateSecret: (subscriptionId: string, overlapSeconds?: number, call?: CallOptions) => {
        required('webhooks.rotateSecret', { subscriptionId });
        return api.create<T.WebhookSecretRotation>(`/api/v1/connect/webhooks/subscriptions/${enc(subscriptionId)}/rotate-secret`, overlapSeconds === undefined ? {} : { overlap_seconds: overlapSeconds }, call);
      },
      /** Deliveries, newest first, with their attempts (`status: 'exhausted'`: what to replay); iterate for all. */
      deliveries: (filters: { status?: string; subscription_id?: string; limit?: number; cursor?: string } = {}, call?: CallOptions) => {
        const page = (cursor?: string) => () => api.get<T.WebhookDeliveryPage>('/api/v1/connect/webhooks/deliveries', { ...filters, cursor }, call);
        return api.list<T.WebhookDeliveryPage, T.WebhookDelivery>(page(filters.cursor), (p) => p.deliveries, (p) => (p.next_cursor ? page(p.next_cursor) : null));
      },
      /** One event's deliveries to the organisation's subscriptions, each attempt with time, status or error, duration. */
      eventDeliveries: (eventId: string, call?: CallOptions) => {
        required('webhooks.eventDeliveries', { eventId });
        return api.get<T.WebhookEventDeliveries>(`/api/v1/connect/webhooks/events/${enc(eventId)}/deliveries`, undefined, call);
      },
      verifySignature: webhooks.verifySignature,
      parseEvent: webhooks.parseEvent,
    };
    this.inventory = {
      /** Stock lines by facility and medication with their batches: one page (`next_offset`); iterate for every line. */
      pharmacyStock: (filters: { facility_id?: string; medication?: string; below_reorder_level?: boolean; limit?: number; offset?: number } = {}, call?: CallOptions) => {
        const page = (offset?: number) => () => api.get<T.PharmacyStock>('/api/v1/connect/pharmacy/stock', { ...filters, offset }, call);
        return api.list<T.PharmacyStock, T.PharmacyStockLine>(page(filters.offset), (p) => p.items, (p) => (p.next_offset !== null && p.next_offset !== undefined ? page(p.next_offset) : null));
      },
      /** Replaces the listed medications' stock at a facility (a PUT: retried only with a caller's idempotencyKey). */
      updatePharmacyStock: (update: T.PharmacyStockUpdate, call?: CallOptions) => {
        required('inventory.updatePharmacyStock', { facility_id: update?.facility_id, items: update?.items });
        return api.send<T.PharmacyStockApplied>({ method: 'PUT', path: '/api/v1/connect/pharmacy/stock', body: update }, call);
      },
      bloodInventory: (filters: { facility_id?: string; blood_group?: string; component?: string } = {}, call?: CallOptions) =>
        api.get<T.BloodInventory>('/api/v1/connect/blood-bank/inventory', filters, call),
    };
    this.payments = {
      /** The day's payments (`date` YYYY-MM-DD) with totals and the ones that do not reconcile. */
      reconciliation: (date: string, filters: { facility_id?: string; time_zone?: string } = {}, call?: CallOptions) => {
        required('payments.reconciliation', { date });
        return api.get<T.PaymentReconciliationDay>('/api/v1/connect/payments/reconciliation', { date, ...filters }, call);
      },
    };
    this.bulk = {
      /**
       * Starts a Bulk Data export (FHIR Bulk Data Access 2.0): of everything the client may read (`system`), of every
       * patient (`patient`) or of a Group's members (`group`, with `groupId`). Answers its id and status URL. It
       * starts a job, so it is not retried without a caller's idempotencyKey (a repeat would meet the running
       * export: 429).
       */
      export: (options: { level?: 'system' | 'patient' | 'group'; groupId?: string; _type?: string; _since?: string; _typeFilter?: string; _outputFormat?: string } = {}, call?: CallOptions) => {
        const { level = 'system', groupId, ...params } = options;
        if (level === 'group') required('bulk.export', { groupId });
        const path = level === 'system' ? `${FHIR}/$export` : level === 'patient' ? `${FHIR}/Patient/$export` : `${FHIR}/Group/${enc(groupId!)}/$export`;
        return api
          .send<OperationOutcome>({ method: 'GET', path, query: params, accept: FHIR_JSON, headers: { prefer: 'respond-async' }, repeatable: false }, call)
          .then((answer) => {
            const statusUrl = answer.lastResponse.headers.get('content-location') ?? '';
            return { id: decodeURIComponent(statusUrl.split('/').pop() ?? ''), statusUrl, lastResponse: answer.lastResponse };
          });
      },
      /** Where an export is: `in-progress` (with the server's progress text and when to ask again) or `completed` with its manifest. */
      status: async (id: string, call?: CallOptions): Promise<BulkExportStatus> => {
        required('bulk.status', { id });
        const answer = await api.get<BulkExportManifest>(`${FHIR}/$export-status/${enc(id)}`, undefined, call, FHIR_JSON);
        const info = answer.lastResponse;
        if (info.status === 202) return { status: 'in-progress', progress: info.headers.get('x-progress'), retryAfter: Number(info.headers.get('retry-after')) || null, lastResponse: info };
        return { status: 'completed', manifest: answer, lastResponse: info };
      },
      /** Cancels an export (or deletes a finished one) and its files. */
      cancel: (id: string, call?: CallOptions) => {
        required('bulk.cancel', { id });
        return fhirSend<OperationOutcome>({ method: 'DELETE', path: `${FHIR}/$export-status/${enc(id)}` }, call);
      },
      /** The resources of one output file of the manifest (its `url`), parsed line by line as they stream in. */
      file: async function* <R extends AnyResource = AnyResource>(url: string, call?: CallOptions): AsyncGenerator<R, void, undefined> {
        required('bulk.file', { url });
        const answer = await api.http.request<Response>({ method: 'GET', path: url, accept: 'application/fhir+ndjson', credentials: tokens, stream: true }, call);
        let rest = '';
        const decoder = new TextDecoder();
        for await (const chunk of answer.body.body ?? []) {
          const lines = (rest + decoder.decode(chunk as Uint8Array, { stream: true })).split('\n');
          rest = lines.pop()!;
          for (const line of lines) if (line.trim()) yield JSON.parse(line) as R;
        }
        rest += decoder.decode();
        if (rest.trim()) yield JSON.parse(rest) as R;
      },
    };
    this.discovery = {
      /** SMART App Launch configuration (/.well-known/smart-configuration): how SMART Backend Services authenticate. */
      smartConfiguration: (call?: CallOptions) => open.get<T.SmartConfiguration>('/.well-known/smart-configuration', undefined, call),
      /** The same SMART configuration, under the FHIR base (/api/fhir/R4/.well-known/smart-configuration). */
      fhirSmartConfiguration: (call?: CallOptions) => open.get<T.SmartConfiguration>(`${FHIR}/.well-known/smart-configuration`, undefined, call),
      /** OAuth 2.0 authorization server metadata (RFC 8414). */
      oauthServerMetadata: (call?: CallOptions) => open.get<T.OAuthServerMetadata>('/.well-known/oauth-authorization-server', undefined, call),
      /** The public keys that verify Pont's access tokens (RS256). */
      jwks: (call?: CallOptions) => open.get<T.Jwks>('/.well-known/jwks.json', undefined, call),
      /** The OpenAPI 3.1 document of the server. */
      openapi: (call?: CallOptions) => open.get<Record<string, unknown>>('/api/openapi.json', undefined, call),
    };
    this.system = {
      /** Liveness: `{status: 'ok'}` while the process is up. */
      healthz: (call?: CallOptions) => open.get<Health>('/healthz', undefined, call),
      /**
       * Readiness: `{status: 'ok', checks, mappings_version}` once the database answers. Not ready is a 503, retried
       * like any GET, then a ServerError (its `body` is the Health answer): pass `{ maxRetries: 0 }` for a probe.
       */
      readyz: (call?: CallOptions) => open.get<Health>('/readyz', undefined, call),
    };
    this.demo = {
      /**
       * Wipes and seeds the demo organisation (development and sandbox only; production: NotFoundError). Sent with this
       * client's token: in development the route is open (the token is ignored); in sandbox the client must be an
       * operator's (`pont clients create --all-patients`; any other: AuthorizationError). The demo's clients are
       * replaced: use the answer's `clients` from then on. Not retried without a caller's idempotencyKey (the server
       * does not deduplicate it; a reset asked for while another runs is a ConflictError with `Retry-After`).
       */
      reset: (call?: CallOptions) => api.send<DemoReset>({ method: 'POST', path: '/api/demo/reset', body: {} }, call),
    };
  }

  /**
   * Eager: the same options as the constructor, and the credentials checked now with one token request (the token is
   * kept for the calls that follow). A wrong secret or an unknown client rejects with AuthenticationError.
   */
  static async create(options: PontOptions): Promise<Pont> {
    const pont = new Pont(options);
    await pont.auth.token();
    return pont;
  }
}

function defined(headers: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ''));
}

/** A client's bearer token: fetched on first use, cached, refreshed before expiry (one refresh at a time). */
class TokenSource implements Credentials {
  readonly renewable = true;
  private current?: { value: string; expiresAt: number };
  private refreshing?: Promise<string>;

  constructor(
    private readonly http: Transport,
    private readonly clientId: string,
    private clientSecret: string,
  ) {}

  /** After a rotation of the client's secret: later tokens are asked for with the new one. */
  useClientSecret(secret: string): void {
    this.clientSecret = secret;
  }

  async headers(force: boolean): Promise<Record<string, string>> {
    return { authorization: `Bearer ${await this.token(force)}` };
  }

  async token(force: boolean): Promise<string> {
    if (!force && this.current && this.http.now() / 1000 < this.current.expiresAt - REFRESH_BEFORE_SECONDS) return this.current.value;
    this.refreshing ??= this.fetch().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async fetch(): Promise<string> {
    // Asking for a token has no effect to repeat: retried like a GET.
    const { body } = await this.http.request<{ access_token?: string; expires_in?: number }>({
      method: 'POST',
      path: '/api/v1/connect/auth/token',
      body: { grant_type: 'client_credentials', client_id: this.clientId, client_secret: this.clientSecret },
      repeatable: true,
    });
    if (!body?.access_token) throw new AuthenticationError('The token endpoint answered without an access_token');
    this.current = { value: body.access_token, expiresAt: this.http.now() / 1000 + (body.expires_in ?? 3600) };
    return body.access_token;
  }
}

export interface BridgeAgentOptions extends ConnectionOptions {
  agentId: string;
  agentKey: string;
  /** The facility the agent is bound to (sent in heartbeats). */
  facilityId: string;
}

/**
 * A Bridge Agent (interface §5.2): a facility's on-site system that syncs its records to Pont with its own agent
 * credentials (X-Bridge-Agent-ID, X-Bridge-Agent-Key, and a fresh X-Bridge-Timestamp on every attempt).
 */
export class BridgeAgent {
  // #private: never shown by console.log (the transport holds the agent key).
  readonly #api: Caller;
  readonly agentId: string;
  readonly facilityId: string;

  constructor(options: BridgeAgentOptions) {
    required('new BridgeAgent', { agentId: options?.agentId, agentKey: options?.agentKey, facilityId: options?.facilityId });
    this.agentId = options.agentId;
    this.facilityId = options.facilityId;
    const http = transportOf(options, baseUrlOf('new BridgeAgent', options));
    this.#api = new Caller(http, {
      renewable: false,
      headers: async () => ({ 'x-bridge-agent-id': options.agentId, 'x-bridge-agent-key': options.agentKey, 'x-bridge-timestamp': String(Math.floor(http.now() / 1000)) }),
    });
  }

  /** Records the agent's contact and version; answers the server time and the settings to apply. Retried like a GET. */
  heartbeat(version: string, call?: CallOptions) {
    required('BridgeAgent.heartbeat', { version });
    return this.#api.send<T.BridgeHeartbeatAck>({ method: 'POST', path: '/api/v1/bridge/heartbeat', body: { agent_id: this.agentId, facility_id: this.facilityId, version }, repeatable: true }, call);
  }

  /** Sends a batch (at most 1000 resources). The server deduplicates by `batch_id`, which is also sent as the Idempotency-Key. */
  sync(batch: T.BridgeSyncBatch, call?: CallOptions) {
    required('BridgeAgent.sync', { batch_id: batch?.batch_id, resources: batch?.resources });
    return this.#api.send<T.BridgeSyncResult>({ method: 'POST', path: '/api/v1/bridge/sync', body: batch, idempotencyKey: batch.batch_id }, call);
  }
}

export interface PatientAppOptions extends ConnectionOptions {
  /** A patient token (`pat_…`) the app stored; without one, `signIn` gets it from a pairing code. */
  token?: string;
}

/**
 * A patient's own app (the /api/v1/mobile routes): the patient's consents and access log, with the patient's
 * `pat_` token, not an integrator's credentials. Pair it once with `signIn(healthId, code)` (the code an
 * organisation gave the patient in person: `pont.patients.issuePairingCode`), or construct it with a stored `token`.
 * Makes no network call here. A `pat_` token is not renewed: a 401 (expired, signed out) is an AuthenticationError.
 * Writes (sign-in, answers, revocations, sign-out) are not deduplicated by the server: they are sent once, retried
 * only with a caller's idempotencyKey; reads are retried like any GET.
 */
export class PatientApp {
  // #private: never shown by console.log.
  readonly #api: Caller;
  #token: string | undefined;

  constructor(options: PatientAppOptions = {}) {
    const http = transportOf(options, baseUrlOf('new PatientApp', options));
    this.#token = options.token || undefined;
    this.#api = new Caller(http, {
      renewable: false,
      headers: async () => {
        if (!this.#token) throw new ValidationError('PatientApp: no patient token (signIn(healthId, code) first, or pass token)');
        return { authorization: `Bearer ${this.#token}` };
      },
    });
  }

  /** Whether the app holds a patient token (it may still have expired or been revoked). */
  get signedIn(): boolean {
    return this.#token !== undefined;
  }

  /**
   * Exchanges a pairing code for a patient token (`access_token`, `pat_…`, valid `expires_in` seconds), which this
   * instance uses from then on; store it to construct the app with `token` later. A wrong, used or expired code is an
   * AuthenticationError (the code is single use: not retried).
   */
  async signIn(healthId: string, code: string, call?: CallOptions) {
    required('PatientApp.signIn', { healthId, code });
    const answer = await this.#api.send<T.MobileTokenResponse>({ method: 'POST', path: '/api/v1/mobile/auth/token', body: { health_id: healthId, code }, credentials: undefined }, call);
    this.#token = answer.access_token;
    return answer;
  }

  /** The patient's consents and pending requests, newest first (`items`; one page, iterate for each). */
  consents(call?: CallOptions) {
    return this.#api.list<T.MyConsents, T.ConsentStatus>(() => this.#api.get('/api/v1/mobile/consents', undefined, call), (p) => p.items, () => null);
  }

  /** Approves a pending consent request: the organisation that asked gets access (not one that paired this app: 403). */
  approveRequest(consentRequestId: string, call?: CallOptions & { approval?: T.ConsentApproval }) {
    required('PatientApp.approveRequest', { consentRequestId });
    // `approval` narrows what was asked (fewer hi_types, a shorter date_range, an earlier expires_at); wider: ValidationError.
    const { approval, ...options } = call ?? {};
    return this.#api.send<T.ConsentStatus>({ method: 'POST', path: `/api/v1/mobile/consent-requests/${enc(consentRequestId)}/approve`, ...(approval && { body: approval }) }, options);
  }

  /** Denies a pending consent request (already answered: ConflictError). */
  denyRequest(consentRequestId: string, call?: CallOptions) {
    required('PatientApp.denyRequest', { consentRequestId });
    return this.#api.send<T.ConsentStatus>({ method: 'POST', path: `/api/v1/mobile/consent-requests/${enc(consentRequestId)}/deny` }, call);
  }

  /** Revokes one of the patient's active consents (`consent_id` of `consents()`; not active: ConflictError). */
  revokeConsent(consentId: string, call?: CallOptions) {
    required('PatientApp.revokeConsent', { consentId });
    return this.#api.send<T.ConsentStatus>({ method: 'POST', path: `/api/v1/mobile/consents/${enc(consentId)}/revoke` }, call);
  }

  /** Who read or changed which kind of the patient's data, when, why, break-glass or not, newest first; iterate for every entry. */
  accessLog(filters: { limit?: number; cursor?: string } = {}, call?: CallOptions) {
    type Entry = T.AccessLog['items'][number];
    const page = (cursor?: string) => () => this.#api.get<T.AccessLog>('/api/v1/mobile/access-log', { ...filters, cursor }, call);
    return this.#api.list<T.AccessLog, Entry>(page(filters.cursor), (p) => p.items, (p) => (p.next_cursor ? page(p.next_cursor) : null));
  }

  /** Signs the app out: the token stops working, and this instance forgets it. */
  async signOut(call?: CallOptions) {
    const answer = await this.#api.send<Record<string, never>>({ method: 'POST', path: '/api/v1/mobile/auth/revoke' }, call);
    this.#token = undefined;
    return answer;
  }
}
