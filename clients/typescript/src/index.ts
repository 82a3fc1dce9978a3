/**
 * Pont's official TypeScript client (interface §4.7): `const pont = await Pont.create({ clientId, clientSecret,
 * environment })`, then `pont.healthIds.resolve({...})`, `pont.records.pushLabResult({...})`… Answers are the
 * server's JSON, typed from its OpenAPI document (./types.js). Webhook helpers need no client:
 * `import { webhooks } from '@pont/client'`.
 */
import { Transport, type TransportOptions } from './http.js';
import { ValidationError } from './errors.js';
import * as webhooks from './webhooks.js';
import type * as T from './types.js';

export * from './errors.js';
export type * from './types.js';
export type { WebhookEvent } from './webhooks.js';
export { webhooks };

/** Base URLs of the hosted environments; `baseUrl` overrides them (a local server). */
export const ENVIRONMENTS = { sandbox: 'https://sandbox.pont.health', production: 'https://api.pont.health' } as const;

export interface PontOptions extends Omit<TransportOptions, 'baseUrl'> {
  environment?: keyof typeof ENVIRONMENTS;
  baseUrl?: string;
}

type Query = Record<string, string | number | boolean | undefined | null>;
type Bundle = { resourceType: 'Bundle'; type?: string; total?: number; link?: Array<{ relation: string; url: string }>; entry?: Array<{ fullUrl?: string; resource?: any; search?: { mode?: string } }> };

function required(method: string, values: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(values))
    if (value === undefined || value === null || value === '') throw new ValidationError(`${method}: ${name} is required`);
}
const enc = encodeURIComponent;

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

  private constructor(private readonly http: Transport) {
    const get = <R>(path: string, query?: Query) => http.request<R>('GET', path, { query });
    const post = <R>(path: string, body: unknown, idempotent = true) => http.request<R>('POST', path, { body, idempotent });
    /** Every page of a FHIR search, following `next` links, as one Bundle. */
    const allPages = async (path: string, query?: Query): Promise<Bundle> => {
      const first = await http.request<Bundle>('GET', path, { query });
      const entry = [...(first.entry ?? [])];
      let next = first.link?.find((l) => l.relation === 'next')?.url;
      while (next) {
        const page: Bundle = await http.request<Bundle>('GET', '', { url: next });
        entry.push(...(page.entry ?? []));
        next = page.link?.find((l) => l.relation === 'next')?.url;
      }
      return { ...first, link: first.link?.filter((l) => l.relation !== 'next'), entry };
    };
    const perPatient = (type: string) => (healthId: string, filters?: Query) => {
      required(`fhir.${type}`, { healthId });
      return allPages(`/api/v1/sdk/patients/${enc(healthId)}/fhir/${type}`, filters);
    };

    this.auth = {
      /**
       * Replaces this client's secret: the answer's `client_secret` is shown only this once, and this instance asks
       * for its next tokens with it. The old secret stays valid for `overlapSeconds` (server default 86400; 0: none).
       */
      rotateClientSecret: async (overlapSeconds?: number) => {
        const rotated = await post<T.ClientSecretRotation>(`/api/v1/connect/auth/clients/${enc(http.clientId)}/rotate-secret`, overlapSeconds === undefined ? {} : { overlap_seconds: overlapSeconds });
        http.useClientSecret(rotated.client_secret);
        return rotated;
      },
    };
    this.healthIds = {
      /** Finds the patient by Health ID, or by demographics (creating them when none matches): `{health_id, status}`. */
      resolve: (input: T.HealthIdResolveRequest) => {
        required('healthIds.resolve', { input });
        if (!input.health_id) required('healthIds.resolve', { first_name: input.first_name });
        return post<T.HealthIdResolveResponse>('/api/v1/connect/patients/resolve', input);
      },
      verify: (healthId: string) => {
        required('healthIds.verify', { healthId });
        return get<T.HealthIdVerifyResponse>(`/api/v1/connect/patients/verify/${enc(healthId)}`);
      },
    };
    this.patients = {
      getSummary: (healthId: string) => {
        required('patients.getSummary', { healthId });
        return get<T.PatientSummary>(`/api/v1/sdk/patients/${enc(healthId)}/summary`);
      },
      search: (healthId: string) => {
        required('patients.search', { healthId });
        return get<T.PatientProfile>('/api/v1/connect/patient/search', { health_id: healthId });
      },
    };
    this.consents = {
      request: (input: T.ConsentRequestCreate) => {
        required('consents.request', { health_id: input?.health_id, purpose: input?.purpose, requested_scopes: input?.requested_scopes });
        return post<T.ConsentRequestCreated>('/api/v1/sdk/consents/request', input);
      },
      grant: (healthId: string, input: T.ConsentGrantRequest) => {
        required('consents.grant', { healthId, consent_type: input?.consent_type, expires_at: input?.expires_at });
        return post<T.ConsentStatus>(`/api/v1/connect/patient/${enc(healthId)}/consent/grant`, input);
      },
      status: (healthId: string) => {
        required('consents.status', { healthId });
        return get<T.ConsentStatus>(`/api/v1/connect/patient/${enc(healthId)}/consent`);
      },
      revoke: (healthId: string, input: { purpose?: string; external_reference?: string } = {}) => {
        required('consents.revoke', { healthId });
        return post<T.ConsentStatus>(`/api/v1/connect/patient/${enc(healthId)}/consent/revoke`, input);
      },
    };
    this.records = {
      /** Records by type (`all` by default); a single type pages with `cursor` (`next_cursor`). */
      get: (healthId: string, options: { type?: string; limit?: number; cursor?: string; since?: string } = {}) => {
        required('records.get', { healthId });
        return get<T.PatientRecords>(`/api/v1/connect/patient/${enc(healthId)}/records`, options);
      },
      pushEncounter: (input: T.EncounterPush) => {
        required('records.pushEncounter', { health_id: input?.health_id, encounter_type: input?.encounter_type });
        return post<T.EncounterPushed>('/api/v1/sdk/records/encounters', input);
      },
      pushLabResult: (input: T.LabResultPush) => {
        required('records.pushLabResult', { health_id: input?.health_id, test_name: input?.test_name, result_value: input?.result_value, flagged: input?.flagged });
        return post<T.LabResultPushed>('/api/v1/sdk/records/lab-results', input);
      },
    };
    this.fhir = {
      medicationRequests: perPatient('MedicationRequest'),
      allergyIntolerances: perPatient('AllergyIntolerance'),
      diagnosticReports: perPatient('DiagnosticReport'),
      conditions: perPatient('Condition'),
      patientEverything: (healthId: string, params?: Query) => {
        required('fhir.patientEverything', { healthId });
        return allPages(`/api/v1/sdk/patients/${enc(healthId)}/fhir/$everything`, params);
      },
      /** A FHIR search on /api/fhir/R4, every page. */
      search: (resourceType: string, params?: Query) => {
        required('fhir.search', { resourceType });
        return allPages(`/api/fhir/R4/${enc(resourceType)}`, params);
      },
      read: (resourceType: string, id: string) => {
        required('fhir.read', { resourceType, id });
        return get<Record<string, any>>(`/api/fhir/R4/${enc(resourceType)}/${enc(id)}`);
      },
    };
    this.webhooks = {
      /** Subscribes an HTTPS endpoint; the answer's `webhook_secret` is shown only this once. */
      subscribe: (callbackUrl: string, events: string[], description = '') => {
        required('webhooks.subscribe', { callbackUrl, events });
        return post<T.WebhookSubscriptionCreated>('/api/v1/connect/webhooks/subscriptions', { callback_url: callbackUrl, subscribed_events: events, description });
      },
      list: () => get<{ subscriptions: T.WebhookSubscription[] }>('/api/v1/connect/webhooks/subscriptions'),
      unsubscribe: async (subscriptionId: string) => {
        required('webhooks.unsubscribe', { subscriptionId });
        await http.request('DELETE', `/api/v1/connect/webhooks/subscriptions/${enc(subscriptionId)}`);
      },
      replay: (eventId: string) => {
        required('webhooks.replay', { eventId });
        return post<T.WebhookReplay>(`/api/v1/connect/webhooks/events/${enc(eventId)}/replay`, undefined, false);
      },
      /**
       * Replaces the subscription's signing secret (the answer's `webhook_secret`, shown only this once). For
       * `overlapSeconds` (server default 86400; 0: none) deliveries are signed with both secrets.
       */
      rotateSecret: (subscriptionId: string, overlapSeconds?: number) => {
        required('webhooks.rotateSecret', { subscriptionId });
        return post<T.WebhookSecretRotation>(`/api/v1/connect/webhooks/subscriptions/${enc(subscriptionId)}/rotate-secret`, overlapSeconds === undefined ? {} : { overlap_seconds: overlapSeconds });
      },
      verifySignature: webhooks.verifySignature,
      parseEvent: webhooks.parseEvent,
    };
    this.inventory = {
      /** Stock lines by facility and medication, with their batches (`next_offset` pages). */
      pharmacyStock: (filters: { facility_id?: string; medication?: string; below_reorder_level?: boolean; limit?: number; offset?: number } = {}) =>
        get<T.PharmacyStock>('/api/v1/connect/pharmacy/stock', filters),
      bloodInventory: (filters: { facility_id?: string; blood_group?: string; component?: string } = {}) => get<T.BloodInventory>('/api/v1/connect/blood-bank/inventory', filters),
    };
    this.payments = {
      /** The day's payments (`date` YYYY-MM-DD) with totals and the ones that do not reconcile. */
      reconciliation: (date: string, options: { facility_id?: string; time_zone?: string } = {}) => {
        required('payments.reconciliation', { date });
        return get<T.PaymentReconciliationDay>('/api/v1/connect/payments/reconciliation', { date, ...options });
      },
    };
  }

  /** Builds a client and fetches its token (AuthenticationError here on bad credentials). */
  static async create(options: PontOptions): Promise<Pont> {
    required('Pont.create', { clientId: options?.clientId, clientSecret: options?.clientSecret });
    const environment = options.environment ?? 'sandbox';
    if (!options.baseUrl && !(environment in ENVIRONMENTS)) throw new ValidationError('Pont.create: environment must be sandbox or production');
    const baseUrl = (options.baseUrl ?? ENVIRONMENTS[environment]).replace(/\/+$/, '');
    const http = new Transport({ ...options, baseUrl });
    await http.accessToken();
    return new Pont(http);
  }
}
