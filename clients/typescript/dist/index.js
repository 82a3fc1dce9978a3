/**
 * Pont's official TypeScript client (interface §4.7): `const pont = await Pont.create({ clientId, clientSecret,
 * environment })`, then `pont.healthIds.resolve({...})`, `pont.records.pushLabResult({...})`… Answers are the
 * server's JSON, typed from its OpenAPI document (./types.js). Webhook helpers need no client:
 * `import { webhooks } from '@pont/client'`.
 */
import { Transport } from './http.js';
import { ValidationError } from './errors.js';
import * as webhooks from './webhooks.js';
export * from './errors.js';
export { webhooks };
/** Base URLs of the hosted environments; `baseUrl` overrides them (a local server). */
export const ENVIRONMENTS = { sandbox: 'https://sandbox.pont.health', production: 'https://api.pont.health' };
function required(method, values) {
    for (const [name, value] of Object.entries(values))
        if (value === undefined || value === null || value === '')
            throw new ValidationError(`${method}: ${name} is required`);
}
const enc = encodeURIComponent;
export class Pont {
    http;
    auth;
    healthIds;
    patients;
    consents;
    records;
    fhir;
    webhooks;
    inventory;
    payments;
    constructor(http) {
        this.http = http;
        const get = (path, query) => http.request('GET', path, { query });
        const post = (path, body, idempotent = true) => http.request('POST', path, { body, idempotent });
        /** Every page of a FHIR search, following `next` links, as one Bundle. */
        const allPages = async (path, query) => {
            const first = await http.request('GET', path, { query });
            const entry = [...(first.entry ?? [])];
            let next = first.link?.find((l) => l.relation === 'next')?.url;
            while (next) {
                const page = await http.request('GET', '', { url: next });
                entry.push(...(page.entry ?? []));
                next = page.link?.find((l) => l.relation === 'next')?.url;
            }
            return { ...first, link: first.link?.filter((l) => l.relation !== 'next'), entry };
        };
        const perPatient = (type) => (healthId, filters) => {
            required(`fhir.${type}`, { healthId });
            return allPages(`/api/v1/sdk/patients/${enc(healthId)}/fhir/${type}`, filters);
        };
        this.auth = {
            /**
             * Replaces this client's secret: the answer's `client_secret` is shown only this once, and this instance asks
             * for its next tokens with it. The old secret stays valid for `overlapSeconds` (server default 86400; 0: none).
             */
            rotateClientSecret: async (overlapSeconds) => {
                const rotated = await post(`/api/v1/connect/auth/clients/${enc(http.clientId)}/rotate-secret`, overlapSeconds === undefined ? {} : { overlap_seconds: overlapSeconds });
                http.useClientSecret(rotated.client_secret);
                return rotated;
            },
        };
        this.healthIds = {
            /** Finds the patient by Health ID, or by demographics (creating them when none matches): `{health_id, status}`. */
            resolve: (input) => {
                required('healthIds.resolve', { input });
                if (!input.health_id)
                    required('healthIds.resolve', { first_name: input.first_name });
                return post('/api/v1/connect/patients/resolve', input);
            },
            verify: (healthId) => {
                required('healthIds.verify', { healthId });
                return get(`/api/v1/connect/patients/verify/${enc(healthId)}`);
            },
        };
        this.patients = {
            getSummary: (healthId) => {
                required('patients.getSummary', { healthId });
                return get(`/api/v1/sdk/patients/${enc(healthId)}/summary`);
            },
            search: (healthId) => {
                required('patients.search', { healthId });
                return get('/api/v1/connect/patient/search', { health_id: healthId });
            },
        };
        this.consents = {
            request: (input) => {
                required('consents.request', { health_id: input?.health_id, purpose: input?.purpose, requested_scopes: input?.requested_scopes });
                return post('/api/v1/sdk/consents/request', input);
            },
            grant: (healthId, input) => {
                required('consents.grant', { healthId, consent_type: input?.consent_type, expires_at: input?.expires_at });
                return post(`/api/v1/connect/patient/${enc(healthId)}/consent/grant`, input);
            },
            status: (healthId) => {
                required('consents.status', { healthId });
                return get(`/api/v1/connect/patient/${enc(healthId)}/consent`);
            },
            revoke: (healthId, input = {}) => {
                required('consents.revoke', { healthId });
                return post(`/api/v1/connect/patient/${enc(healthId)}/consent/revoke`, input);
            },
        };
        this.records = {
            /** Records by type (`all` by default); a single type pages with `cursor` (`next_cursor`). */
            get: (healthId, options = {}) => {
                required('records.get', { healthId });
                return get(`/api/v1/connect/patient/${enc(healthId)}/records`, options);
            },
            pushEncounter: (input) => {
                required('records.pushEncounter', { health_id: input?.health_id, encounter_type: input?.encounter_type });
                return post('/api/v1/sdk/records/encounters', input);
            },
            pushLabResult: (input) => {
                required('records.pushLabResult', { health_id: input?.health_id, test_name: input?.test_name, result_value: input?.result_value, flagged: input?.flagged });
                return post('/api/v1/sdk/records/lab-results', input);
            },
        };
        this.fhir = {
            medicationRequests: perPatient('MedicationRequest'),
            allergyIntolerances: perPatient('AllergyIntolerance'),
            diagnosticReports: perPatient('DiagnosticReport'),
            conditions: perPatient('Condition'),
            patientEverything: (healthId, params) => {
                required('fhir.patientEverything', { healthId });
                return allPages(`/api/v1/sdk/patients/${enc(healthId)}/fhir/$everything`, params);
            },
            /** A FHIR search on /api/fhir/R4, every page. */
            search: (resourceType, params) => {
                required('fhir.search', { resourceType });
                return allPages(`/api/fhir/R4/${enc(resourceType)}`, params);
            },
            read: (resourceType, id) => {
                required('fhir.read', { resourceType, id });
                return get(`/api/fhir/R4/${enc(resourceType)}/${enc(id)}`);
            },
        };
        this.webhooks = {
            /** Subscribes an HTTPS endpoint; the answer's `webhook_secret` is shown only this once. */
            subscribe: (callbackUrl, events, description = '') => {
                required('webhooks.subscribe', { callbackUrl, events });
                return post('/api/v1/connect/webhooks/subscriptions', { callback_url: callbackUrl, subscribed_events: events, description });
            },
            list: () => get('/api/v1/connect/webhooks/subscriptions'),
            unsubscribe: async (subscriptionId) => {
                required('webhooks.unsubscribe', { subscriptionId });
                await http.request('DELETE', `/api/v1/connect/webhooks/subscriptions/${enc(subscriptionId)}`);
            },
            replay: (eventId) => {
                required('webhooks.replay', { eventId });
                return post(`/api/v1/connect/webhooks/events/${enc(eventId)}/replay`, undefined, false);
            },
            /**
             * Replaces the subscription's signing secret (the answer's `webhook_secret`, shown only this once). For
             * `overlapSeconds` (server default 86400; 0: none) deliveries are signed with both secrets.
             */
            rotateSecret: (subscriptionId, overlapSeconds) => {
                required('webhooks.rotateSecret', { subscriptionId });
                return post(`/api/v1/connect/webhooks/subscriptions/${enc(subscriptionId)}/rotate-secret`, overlapSeconds === undefined ? {} : { overlap_seconds: overlapSeconds });
            },
            verifySignature: webhooks.verifySignature,
            parseEvent: webhooks.parseEvent,
        };
        this.inventory = {
            /** Stock lines by facility and medication, with their batches (`next_offset` pages). */
            pharmacyStock: (filters = {}) => get('/api/v1/connect/pharmacy/stock', filters),
            bloodInventory: (filters = {}) => get('/api/v1/connect/blood-bank/inventory', filters),
        };
        this.payments = {
            /** The day's payments (`date` YYYY-MM-DD) with totals and the ones that do not reconcile. */
            reconciliation: (date, options = {}) => {
                required('payments.reconciliation', { date });
                return get('/api/v1/connect/payments/reconciliation', { date, ...options });
            },
        };
    }
    /** Builds a client and fetches its token (AuthenticationError here on bad credentials). */
    static async create(options) {
        required('Pont.create', { clientId: options?.clientId, clientSecret: options?.clientSecret });
        const environment = options.environment ?? 'sandbox';
        if (!options.baseUrl && !(environment in ENVIRONMENTS))
            throw new ValidationError('Pont.create: environment must be sandbox or production');
        const baseUrl = (options.baseUrl ?? ENVIRONMENTS[environment]).replace(/\/+$/, '');
        const http = new Transport({ ...options, baseUrl });
        await http.accessToken();
        return new Pont(http);
    }
}
