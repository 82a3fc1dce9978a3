/**
 * Pont's official TypeScript client (interface §4.7): `const pont = await Pont.create({ clientId, clientSecret,
 * environment })`, then `pont.healthIds.resolve({...})`, `pont.records.pushLabResult({...})`… Answers are the
 * server's JSON, typed from its OpenAPI document (./types.js). Webhook helpers need no client:
 * `import { webhooks } from '@pont/client'`.
 */
import { type TransportOptions } from './http.js';
import * as webhooks from './webhooks.js';
import type * as T from './types.js';
export * from './errors.js';
export type * from './types.js';
export type { WebhookEvent } from './webhooks.js';
export { webhooks };
/** Base URLs of the hosted environments; `baseUrl` overrides them (a local server). */
export declare const ENVIRONMENTS: {
    readonly sandbox: 'https://sandbox.pont.health';
    readonly production: 'https://api.pont.health';
};
export interface PontOptions extends Omit<TransportOptions, 'baseUrl'> {
    environment?: keyof typeof ENVIRONMENTS;
    baseUrl?: string;
}
type Query = Record<string, string | number | boolean | undefined | null>;
type Bundle = {
    resourceType: 'Bundle';
    type?: string;
    total?: number;
    link?: Array<{
        relation: string;
        url: string;
    }>;
    entry?: Array<{
        fullUrl?: string;
        resource?: any;
        search?: {
            mode?: string;
        };
    }>;
};
export declare class Pont {
    private readonly http;
    readonly auth: {
        /**
         * Replaces this client's secret: the answer's `client_secret` is shown only this once, and this instance asks
         * for its next tokens with it. The old secret stays valid for `overlapSeconds` (server default 86400; 0: none).
         */
        rotateClientSecret: (overlapSeconds?: number) => Promise<T.ClientSecretRotation>;
    };
    readonly healthIds: {
        /** Finds the patient by Health ID, or by demographics (creating them when none matches): `{health_id, status}`. */
        resolve: (input: T.HealthIdResolveRequest) => Promise<T.HealthIdResolveResponse>;
        verify: (healthId: string) => Promise<T.HealthIdVerifyResponse>;
    };
    readonly patients: {
        getSummary: (healthId: string) => Promise<T.PatientSummary>;
        search: (healthId: string) => Promise<T.PatientProfile>;
    };
    readonly consents: {
        request: (input: T.ConsentRequestCreate) => Promise<T.ConsentRequestCreated>;
        grant: (healthId: string, input: T.ConsentGrantRequest) => Promise<T.ConsentStatus>;
        status: (healthId: string) => Promise<T.ConsentStatus>;
        revoke: (healthId: string, input?: {
            purpose?: string;
            external_reference?: string;
        }) => Promise<T.ConsentStatus>;
    };
    readonly records: {
        /** Records by type (`all` by default); a single type pages with `cursor` (`next_cursor`). */
        get: (healthId: string, options?: {
            type?: string;
            limit?: number;
            cursor?: string;
            since?: string;
        }) => Promise<T.PatientRecords>;
        pushEncounter: (input: T.EncounterPush) => Promise<T.EncounterPushed>;
        pushLabResult: (input: T.LabResultPush) => Promise<T.LabResultPushed>;
    };
    readonly fhir: {
        medicationRequests: (healthId: string, filters?: Query) => Promise<Bundle>;
        allergyIntolerances: (healthId: string, filters?: Query) => Promise<Bundle>;
        diagnosticReports: (healthId: string, filters?: Query) => Promise<Bundle>;
        conditions: (healthId: string, filters?: Query) => Promise<Bundle>;
        patientEverything: (healthId: string, params?: Query) => Promise<Bundle>;
        /** A FHIR search on /api/fhir/R4, every page. */
        search: (resourceType: string, params?: Query) => Promise<Bundle>;
        read: (resourceType: string, id: string) => Promise<Record<string, any>>;
    };
    readonly webhooks: {
        /** Subscribes an HTTPS endpoint; the answer's `webhook_secret` is shown only this once. */
        subscribe: (callbackUrl: string, events: string[], description?: string) => Promise<T.WebhookSubscriptionCreated>;
        list: () => Promise<{
            subscriptions: T.WebhookSubscription[];
        }>;
        unsubscribe: (subscriptionId: string) => Promise<void>;
        replay: (eventId: string) => Promise<T.WebhookReplay>;
        /**
         * Replaces the subscription's signing secret (the answer's `webhook_secret`, shown only this once). For
         * `overlapSeconds` (server default 86400; 0: none) deliveries are signed with both secrets.
         */
        rotateSecret: (subscriptionId: string, overlapSeconds?: number) => Promise<T.WebhookSecretRotation>;
        verifySignature: typeof webhooks.verifySignature;
        parseEvent: typeof webhooks.parseEvent;
    };
    readonly inventory: {
        /** Stock lines by facility and medication, with their batches (`next_offset` pages). */
        pharmacyStock: (filters?: {
            facility_id?: string;
            medication?: string;
            below_reorder_level?: boolean;
            limit?: number;
            offset?: number;
        }) => Promise<T.PharmacyStock>;
        bloodInventory: (filters?: {
            facility_id?: string;
            blood_group?: string;
            component?: string;
        }) => Promise<T.BloodInventory>;
    };
    readonly payments: {
        /** The day's payments (`date` YYYY-MM-DD) with totals and the ones that do not reconcile. */
        reconciliation: (date: string, options?: {
            facility_id?: string;
            time_zone?: string;
        }) => Promise<T.PaymentReconciliationDay>;
    };
    private constructor();
    /** Builds a client and fetches its token (AuthenticationError here on bad credentials). */
    static create(options: PontOptions): Promise<Pont>;
}
