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
import type { Bundle, CapabilityStatement, ExtractResource, OperationOutcome, Resource, ResourceType } from '@medplum/fhirtypes';
import { type CallOptions, type ResponseInfo, type TransportOptions } from './http.js';
import { PagePromise } from './paging.js';
import * as webhooks from './webhooks.js';
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
export declare const ENVIRONMENTS: {
    readonly sandbox: 'https://sandbox.pont.health';
    readonly production: 'https://api.pont.health';
};
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
export type WithResponse<R> = R & {
    readonly lastResponse: ResponseInfo;
};
type Query = Record<string, string | number | boolean | ReadonlyArray<string | number> | undefined | null>;
type AnyResource = Resource;
type ResourceOf<K extends ResourceType> = ExtractResource<K>;
/** A Bulk Data export's manifest (FHIR Bulk Data Access 2.0). */
export interface BulkExportManifest {
    transactionTime: string;
    request: string;
    requiresAccessToken: boolean;
    output: Array<{
        type: string;
        url: string;
        count?: number;
    }>;
    error: Array<{
        type: string;
        url: string;
    }>;
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
    clients: Array<{
        name: string;
        client_id: string;
        client_secret: string;
        scopes: string[];
    }>;
    bridge_agent: {
        agent_id: string;
        agent_key: string;
        facility_id: string;
        [key: string]: unknown;
    };
    patients: Array<{
        health_id: string;
        patient_id: string;
        first_name?: string;
        last_name?: string;
        [key: string]: unknown;
    }>;
    replaced: {
        fhir_resources: number;
        clients: number;
        bridge_agents: number;
        patient_tokens: number;
        events: number;
        webhook_deliveries: number;
        webhook_subscriptions_kept: number;
    };
    seeded: Record<string, unknown>;
    [key: string]: unknown;
}
export type BulkExportStatus = {
    status: 'in-progress';
    progress: string | null;
    retryAfter: number | null;
    lastResponse: ResponseInfo;
} | {
    status: 'completed';
    manifest: BulkExportManifest;
    lastResponse: ResponseInfo;
};
/** The `lastResponse` of an answer (undefined for anything else). */
export declare function responseOf(answer: unknown): ResponseInfo | undefined;
/**
 * The client of an integration (client credentials, interface §4.7). Two ways to make one:
 * - `await Pont.create(options)`, eager: checks the credentials with one token request before it answers (a wrong
 *   secret or an unknown client: AuthenticationError, at once). The quick starts use it.
 * - `new Pont(options)`, lazy: no network call; the first call that needs a token fetches it (bad credentials:
 *   AuthenticationError from that call). For code that must not block or fail while it is being set up.
 * Either way the token is cached and refreshed 60 s before expiry.
 */
export declare class Pont {
    readonly auth: {
        /** The current access token (fetched, or refreshed 60 s before expiry). */
        token: () => Promise<string>;
        /** RFC 7662 introspection of any token (`{active: false}` for one that is not live). */
        introspect: (token: string, call?: CallOptions) => Promise<WithResponse<T.IntrospectionResponse>>;
        /** This client's own token: its scopes, organisation and expiry. */
        introspectCurrent: (call?: CallOptions) => Promise<WithResponse<T.SdkTokenIntrospection>>;
        /**
         * Replaces this client's secret: the answer's `client_secret` is shown only this once, and this instance asks
         * for its next tokens with it. The old secret stays valid for `overlapSeconds` (server default 86400; 0: none).
         */
        rotateClientSecret: (overlapSeconds?: number, call?: CallOptions) => Promise<WithResponse<T.ClientSecretRotation>>;
    };
    readonly healthIds: {
        /** Finds the patient by Health ID, or by demographics (creating them when none matches): `{health_id, status}`. */
        resolve: (input: T.HealthIdResolveRequest, call?: CallOptions) => Promise<WithResponse<T.HealthIdResolveResponse>>;
        verify: (healthId: string, call?: CallOptions) => Promise<WithResponse<T.HealthIdVerifyResponse>>;
    };
    readonly patients: {
        getSummary: (healthId: string, call?: CallOptions) => Promise<WithResponse<T.PatientSummary>>;
        search: (healthId: string, call?: CallOptions) => Promise<WithResponse<T.PatientProfile>>;
        /** A one-time code the patient enters in Pont's app to pair it (and then answer consent requests). */
        issuePairingCode: (healthId: string, call?: CallOptions) => Promise<WithResponse<T.PairingCode>>;
    };
    readonly consents: {
        request: (input: T.ConsentRequestCreate, call?: CallOptions) => Promise<WithResponse<T.ConsentRequestCreated>>;
        grant: (healthId: string, input: T.ConsentGrantRequest, call?: CallOptions) => Promise<WithResponse<T.ConsentStatus>>;
        status: (healthId: string, call?: CallOptions) => Promise<WithResponse<T.ConsentStatus>>;
        revoke: (healthId: string, input?: {
            purpose?: string;
            external_reference?: string;
        }, call?: CallOptions) => Promise<WithResponse<T.ConsentStatus>>;
        /** The signed consent artefact (`{artefact}`: a compact JWS); verify it with `verifiedArtefact` or verifyConsentArtefact. */
        artefact: (consentId: string, call?: CallOptions) => Promise<WithResponse<T.ConsentArtefact>>;
        /** The artefact, fetched and verified with Pont's key set (GET /.well-known/jwks.json): its payload, or ArtefactVerificationError. */
        verifiedArtefact: (consentId: string, call?: CallOptions) => Promise<import("./artefacts.js").ConsentArtefactPayload>;
        /** The caller's organisation's consents revoked since `since` (ISO date-time): `{items: [{consent_id, revoked_at}]}`. */
        revoked: (since: string, call?: CallOptions) => Promise<WithResponse<T.RevokedConsents>>;
    };
    readonly records: {
        /**
         * Records by type (`all` by default). `await` answers one page; `for await` iterates every record of a single
         * type, following `next_cursor`.
         */
        get: (healthId: string, filters?: {
            type?: string;
            limit?: number;
            cursor?: string;
            since?: string;
        }, call?: CallOptions) => PagePromise<WithResponse<T.PatientRecords>, T.Administration | T.AdverseEvent | T.AllergyRecord | T.Appointment | T.Assessment | T.BodyStructure | T.CarePlan | T.CareTeam | T.CdssAlert | T.ClinicalImpression | T.ClinicalNote | T.ClinicalObservation | T.Communication | T.CommunicationRequest | T.DeviceRequest | T.Diagnosis | T.DiagnosticReportRecord | T.Dispense | T.EpisodeOfCare | T.FamilyHistory | T.Flag | T.Goal | T.ImagingStudy | T.Immunization | T.ImmunizationEvaluation | T.ImmunizationRecommendation | T.LabResult | T.MediaRecord | T.MedicalDevice | T.MedicationUse | T.NutritionOrder | T.Order | T.PatientDocument | T.Prescription | T.Procedure | T.RiskAssessment | T.Specimen | T.Task | T.VisionPrescription | T.Visit | T.Vital>;
        pushEncounter: (input: T.EncounterPush, call?: CallOptions) => Promise<WithResponse<T.EncounterPushed>>;
        pushLabResult: (input: T.LabResultPush, call?: CallOptions) => Promise<WithResponse<T.LabResultPushed>>;
    };
    readonly fhir: {
        medicationRequests: (healthId: string, filters?: Query, call?: CallOptions) => PagePromise<WithResponse<Bundle<import("@medplum/fhirtypes").MedicationRequest>>, import("@medplum/fhirtypes").MedicationRequest>;
        allergyIntolerances: (healthId: string, filters?: Query, call?: CallOptions) => PagePromise<WithResponse<Bundle<import("@medplum/fhirtypes").AllergyIntolerance>>, import("@medplum/fhirtypes").AllergyIntolerance>;
        diagnosticReports: (healthId: string, filters?: Query, call?: CallOptions) => PagePromise<WithResponse<Bundle<import("@medplum/fhirtypes").DiagnosticReport>>, import("@medplum/fhirtypes").DiagnosticReport>;
        conditions: (healthId: string, filters?: Query, call?: CallOptions) => PagePromise<WithResponse<Bundle<import("@medplum/fhirtypes").Condition>>, import("@medplum/fhirtypes").Condition>;
        patientEverything: (healthId: string, params?: Query, call?: CallOptions) => PagePromise<WithResponse<Bundle<Resource>>, Resource>;
        capabilities: (call?: CallOptions) => Promise<WithResponse<CapabilityStatement>>;
        /** A search: `await` for the first Bundle, `for await` for every matching resource (one page at a time). */
        search: <K extends ResourceType>(type: K, params?: Query, call?: CallOptions) => PagePromise<WithResponse<Bundle<ResourceOf<K>>>, ResourceOf<K>>;
        /** The same search sent as a form (long queries); the next pages are GET links. */
        searchPost: <K extends ResourceType>(type: K, params?: Query, call?: CallOptions) => PagePromise<WithResponse<Bundle<ResourceOf<K>>>, ResourceOf<K>>;
        /** A search in a patient's compartment (`Patient/{id}/{type}`). */
        searchCompartment: <K extends ResourceType>(patientId: string, type: K, params?: Query, call?: CallOptions) => PagePromise<WithResponse<Bundle<ResourceOf<K>>>, ResourceOf<K>>;
        /** Patient/{id}/$everything, paged. */
        everything: (patientId: string, params?: Query, call?: CallOptions) => PagePromise<WithResponse<Bundle<Resource>>, Resource>;
        read: <K extends ResourceType>(type: K, id: string, call?: CallOptions) => Promise<WithResponse<ResourceOf<K>>>;
        vread: <K extends ResourceType>(type: K, id: string, versionId: string, call?: CallOptions) => Promise<WithResponse<ResourceOf<K>>>;
        /** The history of a resource (type and id) or of a whole type (no id), newest first, paged. */
        history: <K extends ResourceType>(type: K, id?: string, params?: Query, call?: CallOptions) => PagePromise<WithResponse<Bundle<ResourceOf<K>>>, ResourceOf<K>>;
        /** Creates a resource (`ifNoneExist`: a conditional create). A write: retried only with a caller's `idempotencyKey`. */
        create: <R extends AnyResource>(resource: R, options?: CallOptions & {
            ifNoneExist?: string;
        }) => Promise<WithResponse<ResourceOf<R["resourceType"]>>>;
        /** Replaces a resource (its `id`); `ifMatch` (a version id) refuses it when someone changed it since (412). */
        update: <R extends AnyResource>(resource: R, options?: CallOptions & {
            ifMatch?: string;
        }) => Promise<WithResponse<ResourceOf<R["resourceType"]>>>;
        /** Updates the one resource the search matches, or creates it when none does. */
        conditionalUpdate: <R extends AnyResource>(resource: R, params: Query, call?: CallOptions) => Promise<WithResponse<ResourceOf<R["resourceType"]>>>;
        /** A JSON Patch (RFC 6902) of a resource; `ifMatch` as for update. */
        patch: <K extends ResourceType>(type: K, id: string, operations: ReadonlyArray<{
            op: string;
            path: string;
            value?: unknown;
            from?: string;
        }>, options?: CallOptions & {
            ifMatch?: string;
        }) => Promise<WithResponse<ResourceOf<K>>>;
        /** Patches the one resource the search matches (none: 404; several: 412). */
        conditionalPatch: <K extends ResourceType>(type: K, params: Query, operations: ReadonlyArray<{
            op: string;
            path: string;
            value?: unknown;
            from?: string;
        }>, call?: CallOptions) => Promise<WithResponse<ResourceOf<K>>>;
        /**
         * $validate: the OperationOutcome of the server's checks, nothing stored. Without `id`, as a new resource; with
         * `id`, against the stored one (`mode` update, the default, or delete). Has no effect: retried like a GET.
         */
        validate: (resource: AnyResource, options?: CallOptions & {
            id?: string;
            mode?: 'create' | 'update' | 'delete';
        }) => Promise<WithResponse<OperationOutcome>>;
        /** Deletes a resource (deleting one already gone succeeds, so a caller's idempotencyKey makes it retried safely). */
        delete: (type: ResourceType, id: string, call?: CallOptions) => Promise<WithResponse<Record<string, unknown>>>;
        /** Deletes the one resource the search matches (none: nothing deleted; several: 412, nothing deleted). */
        conditionalDelete: (type: ResourceType, params: Query, call?: CallOptions) => Promise<WithResponse<Record<string, unknown>>>;
        /** A transaction (all or nothing) or batch Bundle. */
        transaction: (bundle: Bundle, call?: CallOptions) => Promise<WithResponse<Bundle<Resource>>>;
    };
    readonly webhooks: {
        /** Subscribes an HTTPS endpoint; the answer's `webhook_secret` is shown only this once. */
        subscribe: (callbackUrl: string, events: T.WebhookEventType[] | string[], description?: string, call?: CallOptions) => Promise<WithResponse<T.WebhookSubscriptionCreated>>;
        /** The organisation's active subscriptions (one page; iterate for each). */
        list: (call?: CallOptions) => PagePromise<WithResponse<{
            subscriptions: T.WebhookSubscription[];
        }>, T.WebhookSubscription>;
        /** Unsubscribes. Not retried without a caller's idempotencyKey: a repeat of one that went through answers 404. */
        unsubscribe: (subscriptionId: string, call?: CallOptions) => Promise<WithResponse<Record<string, never>>>;
        /** Delivers the event again (same id, fresh signature). */
        replay: (eventId: string, call?: CallOptions) => Promise<WithResponse<T.WebhookReplay>>;
        /**
         * Replaces the subscription's signing secret (the answer's `webhook_secret`, shown only this once). For
         * `overlapSeconds` (server default 86400; 0: none) deliveries are signed with both secrets.
         */
        rotateSecret: (subscriptionId: string, overlapSeconds?: number, call?: CallOptions) => Promise<WithResponse<T.WebhookSecretRotation>>;
        /** Deliveries, newest first, with their attempts (`status: 'exhausted'`: what to replay); iterate for all. */
        deliveries: (filters?: {
            status?: string;
            subscription_id?: string;
            limit?: number;
            cursor?: string;
        }, call?: CallOptions) => PagePromise<WithResponse<T.WebhookDeliveryPage>, T.WebhookDelivery>;
        /** One event's deliveries to the organisation's subscriptions, each attempt with time, status or error, duration. */
        eventDeliveries: (eventId: string, call?: CallOptions) => Promise<WithResponse<T.WebhookEventDeliveries>>;
        verifySignature: typeof webhooks.verifySignature;
        parseEvent: typeof webhooks.parseEvent;
    };
    readonly inventory: {
        /** Stock lines by facility and medication with their batches: one page (`next_offset`); iterate for every line. */
        pharmacyStock: (filters?: {
            facility_id?: string;
            medication?: string;
            below_reorder_level?: boolean;
            limit?: number;
            offset?: number;
        }, call?: CallOptions) => PagePromise<WithResponse<T.PharmacyStock>, T.PharmacyStockLine>;
        /** Replaces the listed medications' stock at a facility (a PUT: retried only with a caller's idempotencyKey). */
        updatePharmacyStock: (update: T.PharmacyStockUpdate, call?: CallOptions) => Promise<WithResponse<T.PharmacyStockApplied>>;
        bloodInventory: (filters?: {
            facility_id?: string;
            blood_group?: string;
            component?: string;
        }, call?: CallOptions) => Promise<WithResponse<T.BloodInventory>>;
    };
    readonly payments: {
        /** The day's payments (`date` YYYY-MM-DD) with totals and the ones that do not reconcile. */
        reconciliation: (date: string, filters?: {
            facility_id?: string;
            time_zone?: string;
        }, call?: CallOptions) => Promise<WithResponse<T.PaymentReconciliationDay>>;
    };
    readonly bulk: {
        /**
         * Starts a Bulk Data export (FHIR Bulk Data Access 2.0): of everything the client may read (`system`), of every
         * patient (`patient`) or of a Group's members (`group`, with `groupId`). Answers its id and status URL. It
         * starts a job, so it is not retried without a caller's idempotencyKey (a repeat would meet the running
         * export: 429).
         */
        export: (options?: {
            level?: 'system' | 'patient' | 'group';
            groupId?: string;
            _type?: string;
            _since?: string;
            _typeFilter?: string;
            _outputFormat?: string;
        }, call?: CallOptions) => Promise<{
            id: string;
            statusUrl: string;
            lastResponse: ResponseInfo;
        }>;
        /** Where an export is: `in-progress` (with the server's progress text and when to ask again) or `completed` with its manifest. */
        status: (id: string, call?: CallOptions) => Promise<BulkExportStatus>;
        /** Cancels an export (or deletes a finished one) and its files. */
        cancel: (id: string, call?: CallOptions) => Promise<WithResponse<OperationOutcome>>;
        /** The resources of one output file of the manifest (its `url`), parsed line by line as they stream in. */
        file: <R extends AnyResource = AnyResource>(url: string, call?: CallOptions) => AsyncGenerator<R, void, undefined>;
    };
    readonly discovery: {
        /** SMART App Launch configuration (/.well-known/smart-configuration): how SMART Backend Services authenticate. */
        smartConfiguration: (call?: CallOptions) => Promise<WithResponse<T.SmartConfiguration>>;
        /** The same SMART configuration, under the FHIR base (/api/fhir/R4/.well-known/smart-configuration). */
        fhirSmartConfiguration: (call?: CallOptions) => Promise<WithResponse<T.SmartConfiguration>>;
        /** OAuth 2.0 authorization server metadata (RFC 8414). */
        oauthServerMetadata: (call?: CallOptions) => Promise<WithResponse<T.OAuthServerMetadata>>;
        /** The public keys that verify Pont's access tokens (RS256). */
        jwks: (call?: CallOptions) => Promise<WithResponse<T.Jwks>>;
        /** The OpenAPI 3.1 document of the server. */
        openapi: (call?: CallOptions) => Promise<WithResponse<Record<string, unknown>>>;
    };
    readonly system: {
        /** Liveness: `{status: 'ok'}` while the process is up. */
        healthz: (call?: CallOptions) => Promise<WithResponse<Health>>;
        /**
         * Readiness: `{status: 'ok', checks, mappings_version}` once the database answers. Not ready is a 503, retried
         * like any GET, then a ServerError (its `body` is the Health answer): pass `{ maxRetries: 0 }` for a probe.
         */
        readyz: (call?: CallOptions) => Promise<WithResponse<Health>>;
    };
    readonly demo: {
        /**
         * Wipes and seeds the demo organisation (development and sandbox only; production: NotFoundError). Sent with this
         * client's token: in development the route is open (the token is ignored); in sandbox the client must be an
         * operator's (`pont clients create --all-patients`; any other: AuthorizationError). The demo's clients are
         * replaced: use the answer's `clients` from then on. Not retried without a caller's idempotencyKey (the server
         * does not deduplicate it; a reset asked for while another runs is a ConflictError with `Retry-After`).
         */
        reset: (call?: CallOptions) => Promise<WithResponse<DemoReset>>;
    };
    /** Lazy: makes no network call; the first call fetches the token (bad credentials: AuthenticationError there). `Pont.create` checks them at once. */
    constructor(options: PontOptions);
    /**
     * Eager: the same options as the constructor, and the credentials checked now with one token request (the token is
     * kept for the calls that follow). A wrong secret or an unknown client rejects with AuthenticationError.
     */
    static create(options: PontOptions): Promise<Pont>;
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
export declare class BridgeAgent {
    #private;
    readonly agentId: string;
    readonly facilityId: string;
    constructor(options: BridgeAgentOptions);
    /** Records the agent's contact and version; answers the server time and the settings to apply. Retried like a GET. */
    heartbeat(version: string, call?: CallOptions): Promise<WithResponse<T.BridgeHeartbeatAck>>;
    /** Sends a batch (at most 1000 resources). The server deduplicates by `batch_id`, which is also sent as the Idempotency-Key. */
    sync(batch: T.BridgeSyncBatch, call?: CallOptions): Promise<WithResponse<T.BridgeSyncResult>>;
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
export declare class PatientApp {
    #private;
    constructor(options?: PatientAppOptions);
    /** Whether the app holds a patient token (it may still have expired or been revoked). */
    get signedIn(): boolean;
    /**
     * Exchanges a pairing code for a patient token (`access_token`, `pat_…`, valid `expires_in` seconds), which this
     * instance uses from then on; store it to construct the app with `token` later. A wrong, used or expired code is an
     * AuthenticationError (the code is single use: not retried).
     */
    signIn(healthId: string, code: string, call?: CallOptions): Promise<WithResponse<T.MobileTokenResponse>>;
    /** The patient's consents and pending requests, newest first (`items`; one page, iterate for each). */
    consents(call?: CallOptions): PagePromise<WithResponse<T.MyConsents>, T.ConsentStatus>;
    /** Approves a pending consent request: the organisation that asked gets access (not one that paired this app: 403). */
    approveRequest(consentRequestId: string, call?: CallOptions & {
        approval?: T.ConsentApproval;
    }): Promise<WithResponse<T.ConsentStatus>>;
    /** Denies a pending consent request (already answered: ConflictError). */
    denyRequest(consentRequestId: string, call?: CallOptions): Promise<WithResponse<T.ConsentStatus>>;
    /** Revokes one of the patient's active consents (`consent_id` of `consents()`; not active: ConflictError). */
    revokeConsent(consentId: string, call?: CallOptions): Promise<WithResponse<T.ConsentStatus>>;
    /** Who read or changed which kind of the patient's data, when, why, break-glass or not, newest first; iterate for every entry. */
    accessLog(filters?: {
        limit?: number;
        cursor?: string;
    }, call?: CallOptions): PagePromise<WithResponse<T.AccessLog>, {
        at: string;
        actor: {
            kind: "organization" | "patient" | "system";
            organization_id: string | null;
            client_id: string | null;
        };
        operation: string | null;
        action: "read" | "create" | "update" | "delete" | "execute";
        data_types: Array<string>;
        purpose: string | null;
        break_glass: boolean;
        outcome: "allowed" | "refused";
    }>;
    /** Signs the app out: the token stops working, and this instance forgets it. */
    signOut(call?: CallOptions): Promise<WithResponse<Record<string, never>>>;
}
