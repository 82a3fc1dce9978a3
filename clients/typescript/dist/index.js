import { Transport, REFRESH_BEFORE_SECONDS } from './http.js';
import { AuthenticationError, ValidationError } from './errors.js';
import { PagePromise } from './paging.js';
import * as webhooks from './webhooks.js';
import { verifyConsentArtefact } from './artefacts.js';
export * from './errors.js';
export { RETRY_DEFAULTS, retryDelay, mayRetry } from './http.js';
export { PagePromise } from './paging.js';
export { VERSION } from './version.js';
export { webhooks };
export { verifyConsentArtefact, ArtefactVerificationError } from './artefacts.js';
/** Base URLs of the hosted environments; `baseUrl` overrides them (a local server). */
export const ENVIRONMENTS = { sandbox: 'https://sandbox.pont.health', production: 'https://api.pont.health' };
/** The `lastResponse` of an answer (undefined for anything else). */
export function responseOf(answer) {
    return answer && typeof answer === 'object' ? answer.lastResponse : undefined;
}
function required(method, values) {
    for (const [name, value] of Object.entries(values))
        if (value === undefined || value === null || value === '')
            throw new ValidationError(`${method}: ${name} is required`);
}
const enc = encodeURIComponent;
function baseUrlOf(method, options) {
    const environment = options.environment ?? 'sandbox';
    if (!options.baseUrl && !(environment in ENVIRONMENTS))
        throw new ValidationError(`${method}: environment must be sandbox or production`);
    const baseUrl = options.baseUrl ?? ENVIRONMENTS[environment];
    if (!URL.canParse(baseUrl) || !/^https?:$/.test(new URL(baseUrl).protocol))
        throw new ValidationError(`${method}: baseUrl must be an http(s) URL`);
    return baseUrl;
}
function transportOf(options, baseUrl) {
    return new Transport({ ...options, baseUrl });
}
/** Sends requests and returns the answer with its `lastResponse`; shared by the modules. */
class Caller {
    http;
    credentials;
    constructor(http, credentials) {
        this.http = http;
        this.credentials = credentials;
    }
    async send(req, call) {
        const answer = await this.http.request({ credentials: this.credentials, ...req }, call);
        return withResponse(answer);
    }
    get(path, query, call, accept) {
        return this.send({ method: 'GET', path, query, accept }, call);
    }
    /** A POST under /api/v1/connect or /api/v1/sdk: the server honours an Idempotency-Key, so one is sent. */
    create(path, body, call) {
        return this.send({ method: 'POST', path, body, idempotencyKey: 'new' }, call);
    }
    /** A list: one page per request, the next one from the page. */
    list(first, itemsOf, nextOf) {
        return new PagePromise(first, itemsOf, nextOf);
    }
    /** A FHIR search (or history) Bundle, followed by its `next` links. */
    bundle(first, call) {
        return this.list(first, (page) => (page.entry ?? []).filter((e) => e.resource && e.search?.mode !== 'outcome').map((e) => e.resource), (page) => {
            const next = page.link?.find((l) => l.relation === 'next')?.url;
            return next ? () => this.get(next, undefined, call, FHIR_JSON) : null;
        });
    }
}
function withResponse(answer) {
    const body = (answer.body ?? {});
    if (typeof body === 'object' && body !== null)
        Object.defineProperty(body, 'lastResponse', { value: answer.info, enumerable: false });
    return body;
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
    auth;
    healthIds;
    patients;
    consents;
    records;
    fhir;
    webhooks;
    inventory;
    payments;
    bulk;
    discovery;
    system;
    demo;
    /** Lazy: makes no network call; the first call fetches the token (bad credentials: AuthenticationError there). `Pont.create` checks them at once. */
    constructor(options) {
        required('new Pont', { clientId: options?.clientId, clientSecret: options?.clientSecret });
        const http = transportOf(options, baseUrlOf('new Pont', options));
        const tokens = new TokenSource(http, options.clientId, options.clientSecret);
        const api = new Caller(http, tokens);
        // Discovery documents and probes: public, sent without a token (none is fetched for them).
        const open = new Caller(http);
        const perPatient = (type) => (healthId, filters, call) => {
            required(`fhir.${type}`, { healthId });
            return api.bundle(() => api.get(`/api/v1/sdk/patients/${enc(healthId)}/fhir/${type}`, filters, call, FHIR_JSON), call);
        };
        const fhirSend = (req, call) => api.send({ contentType: FHIR_JSON, accept: FHIR_JSON, ...req }, call);
        const fhirType = (method, type) => {
            required(method, { type });
            if (!/^[A-Z][A-Za-z]+$/.test(type))
                throw new ValidationError(`${method}: ${type} is not a FHIR resource type`);
            return type;
        };
        this.auth = {
            /** The current access token (fetched, or refreshed 60 s before expiry). */
            token: async () => tokens.token(false),
            /** RFC 7662 introspection of any token (`{active: false}` for one that is not live). */
            introspect: (token, call) => {
                required('auth.introspect', { token });
                return api.send({ method: 'POST', path: '/api/v1/connect/auth/introspect', body: { token }, repeatable: true }, call);
            },
            /** This client's own token: its scopes, organisation and expiry. */
            introspectCurrent: (call) => api.get('/api/v1/sdk/token/introspect', undefined, call),
            /**
             * Replaces this client's secret: the answer's `client_secret` is shown only this once, and this instance asks
             * for its next tokens with it. The old secret stays valid for `overlapSeconds` (server default 86400; 0: none).
             */
            rotateClientSecret: async (overlapSeconds, call) => {
                const rotated = await api.create(`/api/v1/connect/auth/clients/${enc(options.clientId)}/rotate-secret`, overlapSeconds === undefined ? {} : { overlap_seconds: overlapSeconds }, call);
                tokens.useClientSecret(rotated.client_secret);
                return rotated;
            },
        };
        this.healthIds = {
            /** Finds the patient by Health ID, or by demographics (creating them when none matches): `{health_id, status}`. */
            resolve: (input, call) => {
                required('healthIds.resolve', { input });
                if (!input.health_id)
                    required('healthIds.resolve', { first_name: input.first_name });
                return api.create('/api/v1/connect/patients/resolve', input, call);
            },
            verify: (healthId, call) => {
                required('healthIds.verify', { healthId });
                return api.get(`/api/v1/connect/patients/verify/${enc(healthId)}`, undefined, call);
            },
        };
        this.patients = {
            getSummary: (healthId, call) => {
                required('patients.getSummary', { healthId });
                return api.get(`/api/v1/sdk/patients/${enc(healthId)}/summary`, undefined, call);
            },
            search: (healthId, call) => {
                required('patients.search', { healthId });
                return api.get('/api/v1/connect/patient/search', { health_id: healthId }, call);
            },
            /** A one-time code the patient enters in Pont's app to pair it (and then answer consent requests). */
            issuePairingCode: (healthId, call) => {
                required('patients.issuePairingCode', { healthId });
                return api.create(`/api/v1/connect/patient/${enc(healthId)}/mobile/pairing-code`, undefined, call);
            },
        };
        this.consents = {
            request: (input, call) => {
                required('consents.request', { health_id: input?.health_id, purpose: input?.purpose, requested_scopes: input?.requested_scopes });
                return api.create('/api/v1/sdk/consents/request', input, call);
            },
            grant: (healthId, input, call) => {
                required('consents.grant', { healthId, consent_type: input?.consent_type, expires_at: input?.expires_at });
                return api.create(`/api/v1/connect/patient/${enc(healthId)}/consent/grant`, input, call);
            },
            status: (healthId, call) => {
                required('consents.status', { healthId });
                return api.get(`/api/v1/connect/patient/${enc(healthId)}/consent`, undefined, call);
            },
            revoke: (healthId, input = {}, call) => {
                required('consents.revoke', { healthId });
                return api.create(`/api/v1/connect/patient/${enc(healthId)}/consent/revoke`, input, call);
            },
            /** The signed consent artefact (`{artefact}`: a compact JWS); verify it with `verifiedArtefact` or verifyConsentArtefact. */
            artefact: (consentId, call) => {
                required('consents.artefact', { consentId });
                return api.get(`/api/v1/connect/consents/${enc(consentId)}/artefact`, undefined, call);
            },
            /** The artefact, fetched and verified with Pont's key set (GET /.well-known/jwks.json): its payload, or ArtefactVerificationError. */
            verifiedArtefact: async (consentId, call) => {
                const { artefact } = await this.consents.artefact(consentId, call);
                const jwks = await api.get('/.well-known/jwks.json', undefined, call);
                return verifyConsentArtefact(artefact, jwks);
            },
            /** The caller's organisation's consents revoked since `since` (ISO date-time): `{items: [{consent_id, revoked_at}]}`. */
            revoked: (since, call) => {
                required('consents.revoked', { since });
                return api.get('/api/v1/connect/consents/revoked', { since }, call);
            },
        };
        this.records = {
            /**
             * Records by type (`all` by default). `await` answers one page; `for await` iterates every record of a single
             * type, following `next_cursor`.
             */
            get: (healthId, filters = {}, call) => {
                required('records.get', { healthId });
                const page = (cursor) => () => api.get(`/api/v1/connect/patient/${enc(healthId)}/records`, { ...filters, cursor }, call);
                return api.list(page(filters.cursor), (p) => Object.values(p.records ?? {}).flatMap((list) => (list ?? [])), (p) => (p.next_cursor ? page(p.next_cursor) : null));
            },
            pushEncounter: (input, call) => {
                required('records.pushEncounter', { health_id: input?.health_id, encounter_type: input?.encounter_type });
                return api.create('/api/v1/sdk/records/encounters', input, call);
            },
            pushLabResult: (input, call) => {
                required('records.pushLabResult', { health_id: input?.health_id, test_name: input?.test_name, result_value: input?.result_value, flagged: input?.flagged });
                return api.create('/api/v1/sdk/records/lab-results', input, call);
            },
        };
        this.fhir = {
            // The SDK's per-patient views, by Health ID.
            medicationRequests: perPatient('MedicationRequest'),
            allergyIntolerances: perPatient('AllergyIntolerance'),
            diagnosticReports: perPatient('DiagnosticReport'),
            conditions: perPatient('Condition'),
            patientEverything: (healthId, params, call) => {
                required('fhir.patientEverything', { healthId });
                return api.bundle(() => api.get(`/api/v1/sdk/patients/${enc(healthId)}/fhir/$everything`, params, call, FHIR_JSON), call);
            },
            // The FHIR R4 API (/api/fhir/R4).
            capabilities: (call) => api.get(`${FHIR}/metadata`, undefined, call, FHIR_JSON),
            /** A search: `await` for the first Bundle, `for await` for every matching resource (one page at a time). */
            search: (type, params, call) => {
                fhirType('fhir.search', type);
                return api.bundle(() => api.get(`${FHIR}/${type}`, params, call, FHIR_JSON), call);
            },
            /** The same search sent as a form (long queries); the next pages are GET links. */
            searchPost: (type, params = {}, call) => {
                fhirType('fhir.searchPost', type);
                const body = new URL(api.http.url('http://form/', params)).searchParams.toString();
                return api.bundle(() => api.send({ method: 'POST', path: `${FHIR}/${type}/_search`, body, contentType: 'application/x-www-form-urlencoded', accept: FHIR_JSON, repeatable: true }, call), call);
            },
            /** A search in a patient's compartment (`Patient/{id}/{type}`). */
            searchCompartment: (patientId, type, params, call) => {
                required('fhir.searchCompartment', { patientId });
                fhirType('fhir.searchCompartment', type);
                return api.bundle(() => api.get(`${FHIR}/Patient/${enc(patientId)}/${type}`, params, call, FHIR_JSON), call);
            },
            /** Patient/{id}/$everything, paged. */
            everything: (patientId, params, call) => {
                required('fhir.everything', { patientId });
                return api.bundle(() => api.get(`${FHIR}/Patient/${enc(patientId)}/$everything`, params, call, FHIR_JSON), call);
            },
            read: (type, id, call) => {
                fhirType('fhir.read', type);
                required('fhir.read', { id });
                return api.get(`${FHIR}/${type}/${enc(id)}`, undefined, call, FHIR_JSON);
            },
            vread: (type, id, versionId, call) => {
                fhirType('fhir.vread', type);
                required('fhir.vread', { id, versionId });
                return api.get(`${FHIR}/${type}/${enc(id)}/_history/${enc(versionId)}`, undefined, call, FHIR_JSON);
            },
            /** The history of a resource (type and id) or of a whole type (no id), newest first, paged. */
            history: (type, id, params, call) => {
                fhirType('fhir.history', type);
                const path = id === undefined ? `${FHIR}/${type}/_history` : `${FHIR}/${type}/${enc(id)}/_history`;
                return api.bundle(() => api.get(path, params, call, FHIR_JSON), call);
            },
            /** Creates a resource (`ifNoneExist`: a conditional create). A write: retried only with a caller's `idempotencyKey`. */
            create: (resource, options = {}) => {
                required('fhir.create', { resourceType: resource?.resourceType });
                const { ifNoneExist, ...call } = options;
                const path = `${FHIR}/${fhirType('fhir.create', resource.resourceType)}`;
                return fhirSend({ method: 'POST', path, body: resource, headers: defined({ 'if-none-exist': ifNoneExist }) }, call);
            },
            /** Replaces a resource (its `id`); `ifMatch` (a version id) refuses it when someone changed it since (412). */
            update: (resource, options = {}) => {
                required('fhir.update', { resourceType: resource?.resourceType, id: resource?.id });
                const { ifMatch, ...call } = options;
                return fhirSend({ method: 'PUT', path: `${FHIR}/${fhirType('fhir.update', resource.resourceType)}/${enc(resource.id)}`, body: resource, headers: defined({ 'if-match': ifMatch && `W/"${ifMatch}"` }) }, call);
            },
            /** Updates the one resource the search matches, or creates it when none does. */
            conditionalUpdate: (resource, params, call) => {
                required('fhir.conditionalUpdate', { resourceType: resource?.resourceType, params });
                return fhirSend({ method: 'PUT', path: `${FHIR}/${fhirType('fhir.conditionalUpdate', resource.resourceType)}`, query: params, body: resource }, call);
            },
            /** A JSON Patch (RFC 6902) of a resource; `ifMatch` as for update. */
            patch: (type, id, operations, options = {}) => {
                fhirType('fhir.patch', type);
                required('fhir.patch', { id, operations });
                const { ifMatch, ...call } = options;
                return fhirSend({ method: 'PATCH', path: `${FHIR}/${type}/${enc(id)}`, body: operations, contentType: 'application/json-patch+json', headers: defined({ 'if-match': ifMatch && `W/"${ifMatch}"` }) }, call);
            },
            /** Patches the one resource the search matches (none: 404; several: 412). */
            conditionalPatch: (type, params, operations, call) => {
                fhirType('fhir.conditionalPatch', type);
                required('fhir.conditionalPatch', { params, operations });
                return fhirSend({ method: 'PATCH', path: `${FHIR}/${type}`, query: params, body: operations, contentType: 'application/json-patch+json' }, call);
            },
            /**
             * $validate: the OperationOutcome of the server's checks, nothing stored. Without `id`, as a new resource; with
             * `id`, against the stored one (`mode` update, the default, or delete). Has no effect: retried like a GET.
             */
            validate: (resource, options = {}) => {
                required('fhir.validate', { resourceType: resource?.resourceType });
                const { id, mode, ...call } = options;
                const type = fhirType('fhir.validate', resource.resourceType);
                const path = id === undefined ? `${FHIR}/${type}/$validate` : `${FHIR}/${type}/${enc(id)}/$validate`;
                return fhirSend({ method: 'POST', path, query: { mode }, body: resource, repeatable: true }, call);
            },
            /** Deletes a resource (deleting one already gone succeeds, so a caller's idempotencyKey makes it retried safely). */
            delete: (type, id, call) => {
                fhirType('fhir.delete', type);
                required('fhir.delete', { id });
                return fhirSend({ method: 'DELETE', path: `${FHIR}/${type}/${enc(id)}` }, call);
            },
            /** Deletes the one resource the search matches (none: nothing deleted; several: 412, nothing deleted). */
            conditionalDelete: (type, params, call) => {
                fhirType('fhir.conditionalDelete', type);
                required('fhir.conditionalDelete', { params });
                return fhirSend({ method: 'DELETE', path: `${FHIR}/${type}`, query: params }, call);
            },
            /** A transaction (all or nothing) or batch Bundle. */
            transaction: (bundle, call) => {
                required('fhir.transaction', { resourceType: bundle?.resourceType, type: bundle?.type });
                return fhirSend({ method: 'POST', path: FHIR, body: bundle }, call);
            },
        };
        this.webhooks = {
            /** Subscribes an HTTPS endpoint; the answer's `webhook_secret` is shown only this once. */
            subscribe: (callbackUrl, events, description = '', call) => {
                required('webhooks.subscribe', { callbackUrl, events });
                return api.create('/api/v1/connect/webhooks/subscriptions', { callback_url: callbackUrl, subscribed_events: events, description }, call);
            },
            /** The organisation's active subscriptions (one page; iterate for each). */
            list: (call) => api.list(() => api.get('/api/v1/connect/webhooks/subscriptions', undefined, call), (p) => p.subscriptions, () => null),
            /** Unsubscribes. Not retried without a caller's idempotencyKey: a repeat of one that went through answers 404. */
            unsubscribe: (subscriptionId, call) => {
                required('webhooks.unsubscribe', { subscriptionId });
                return api.send({ method: 'DELETE', path: `/api/v1/connect/webhooks/subscriptions/${enc(subscriptionId)}` }, call);
            },
            /** Delivers the event again (same id, fresh signature). */
            replay: (eventId, call) => {
                required('webhooks.replay', { eventId });
                return api.create(`/api/v1/connect/webhooks/events/${enc(eventId)}/replay`, undefined, call);
            },
            /**
             * Replaces the subscription's signing secret (the answer's `webhook_secret`, shown only this once). For
             * `overlapSeconds` (server default 86400; 0: none) deliveries are signed with both secrets.
             */
            rotateSecret: (subscriptionId, overlapSeconds, call) => {
                required('webhooks.rotateSecret', { subscriptionId });
                return api.create(`/api/v1/connect/webhooks/subscriptions/${enc(subscriptionId)}/rotate-secret`, overlapSeconds === undefined ? {} : { overlap_seconds: overlapSeconds }, call);
            },
            /** Deliveries, newest first, with their attempts (`status: 'exhausted'`: what to replay); iterate for all. */
            deliveries: (filters = {}, call) => {
                const page = (cursor) => () => api.get('/api/v1/connect/webhooks/deliveries', { ...filters, cursor }, call);
                return api.list(page(filters.cursor), (p) => p.deliveries, (p) => (p.next_cursor ? page(p.next_cursor) : null));
            },
            /** One event's deliveries to the organisation's subscriptions, each attempt with time, status or error, duration. */
            eventDeliveries: (eventId, call) => {
                required('webhooks.eventDeliveries', { eventId });
                return api.get(`/api/v1/connect/webhooks/events/${enc(eventId)}/deliveries`, undefined, call);
            },
            verifySignature: webhooks.verifySignature,
            parseEvent: webhooks.parseEvent,
        };
        this.inventory = {
            /** Stock lines by facility and medication with their batches: one page (`next_offset`); iterate for every line. */
            pharmacyStock: (filters = {}, call) => {
                const page = (offset) => () => api.get('/api/v1/connect/pharmacy/stock', { ...filters, offset }, call);
                return api.list(page(filters.offset), (p) => p.items, (p) => (p.next_offset !== null && p.next_offset !== undefined ? page(p.next_offset) : null));
            },
            /** Replaces the listed medications' stock at a facility (a PUT: retried only with a caller's idempotencyKey). */
            updatePharmacyStock: (update, call) => {
                required('inventory.updatePharmacyStock', { facility_id: update?.facility_id, items: update?.items });
                return api.send({ method: 'PUT', path: '/api/v1/connect/pharmacy/stock', body: update }, call);
            },
            bloodInventory: (filters = {}, call) => api.get('/api/v1/connect/blood-bank/inventory', filters, call),
        };
        this.payments = {
            /** The day's payments (`date` YYYY-MM-DD) with totals and the ones that do not reconcile. */
            reconciliation: (date, filters = {}, call) => {
                required('payments.reconciliation', { date });
                return api.get('/api/v1/connect/payments/reconciliation', { date, ...filters }, call);
            },
        };
        this.bulk = {
            /**
             * Starts a Bulk Data export (FHIR Bulk Data Access 2.0): of everything the client may read (`system`), of every
             * patient (`patient`) or of a Group's members (`group`, with `groupId`). Answers its id and status URL. It
             * starts a job, so it is not retried without a caller's idempotencyKey (a repeat would meet the running
             * export: 429).
             */
            export: (options = {}, call) => {
                const { level = 'system', groupId, ...params } = options;
                if (level === 'group')
                    required('bulk.export', { groupId });
                const path = level === 'system' ? `${FHIR}/$export` : level === 'patient' ? `${FHIR}/Patient/$export` : `${FHIR}/Group/${enc(groupId)}/$export`;
                return api
                    .send({ method: 'GET', path, query: params, accept: FHIR_JSON, headers: { prefer: 'respond-async' }, repeatable: false }, call)
                    .then((answer) => {
                    const statusUrl = answer.lastResponse.headers.get('content-location') ?? '';
                    return { id: decodeURIComponent(statusUrl.split('/').pop() ?? ''), statusUrl, lastResponse: answer.lastResponse };
                });
            },
            /** Where an export is: `in-progress` (with the server's progress text and when to ask again) or `completed` with its manifest. */
            status: async (id, call) => {
                required('bulk.status', { id });
                const answer = await api.get(`${FHIR}/$export-status/${enc(id)}`, undefined, call, FHIR_JSON);
                const info = answer.lastResponse;
                if (info.status === 202)
                    return { status: 'in-progress', progress: info.headers.get('x-progress'), retryAfter: Number(info.headers.get('retry-after')) || null, lastResponse: info };
                return { status: 'completed', manifest: answer, lastResponse: info };
            },
            /** Cancels an export (or deletes a finished one) and its files. */
            cancel: (id, call) => {
                required('bulk.cancel', { id });
                return fhirSend({ method: 'DELETE', path: `${FHIR}/$export-status/${enc(id)}` }, call);
            },
            /** The resources of one output file of the manifest (its `url`), parsed line by line as they stream in. */
            file: async function* (url, call) {
                required('bulk.file', { url });
                const answer = await api.http.request({ method: 'GET', path: url, accept: 'application/fhir+ndjson', credentials: tokens, stream: true }, call);
                let rest = '';
                const decoder = new TextDecoder();
                for await (const chunk of answer.body.body ?? []) {
                    const lines = (rest + decoder.decode(chunk, { stream: true })).split('\n');
                    rest = lines.pop();
                    for (const line of lines)
                        if (line.trim())
                            yield JSON.parse(line);
                }
                rest += decoder.decode();
                if (rest.trim())
                    yield JSON.parse(rest);
            },
        };
        this.discovery = {
            /** SMART App Launch configuration (/.well-known/smart-configuration): how SMART Backend Services authenticate. */
            smartConfiguration: (call) => open.get('/.well-known/smart-configuration', undefined, call),
            /** The same SMART configuration, under the FHIR base (/api/fhir/R4/.well-known/smart-configuration). */
            fhirSmartConfiguration: (call) => open.get(`${FHIR}/.well-known/smart-configuration`, undefined, call),
            /** OAuth 2.0 authorization server metadata (RFC 8414). */
            oauthServerMetadata: (call) => open.get('/.well-known/oauth-authorization-server', undefined, call),
            /** The public keys that verify Pont's access tokens (RS256). */
            jwks: (call) => open.get('/.well-known/jwks.json', undefined, call),
            /** The OpenAPI 3.1 document of the server. */
            openapi: (call) => open.get('/api/openapi.json', undefined, call),
        };
        this.system = {
            /** Liveness: `{status: 'ok'}` while the process is up. */
            healthz: (call) => open.get('/healthz', undefined, call),
            /**
             * Readiness: `{status: 'ok', checks, mappings_version}` once the database answers. Not ready is a 503, retried
             * like any GET, then a ServerError (its `body` is the Health answer): pass `{ maxRetries: 0 }` for a probe.
             */
            readyz: (call) => open.get('/readyz', undefined, call),
        };
        this.demo = {
            /**
             * Wipes and seeds the demo organisation (development and sandbox only; production: NotFoundError). Sent with this
             * client's token: in development the route is open (the token is ignored); in sandbox the client must be an
             * operator's (`pont clients create --all-patients`; any other: AuthorizationError). The demo's clients are
             * replaced: use the answer's `clients` from then on. Not retried without a caller's idempotencyKey (the server
             * does not deduplicate it; a reset asked for while another runs is a ConflictError with `Retry-After`).
             */
            reset: (call) => api.send({ method: 'POST', path: '/api/demo/reset', body: {} }, call),
        };
    }
    /**
     * Eager: the same options as the constructor, and the credentials checked now with one token request (the token is
     * kept for the calls that follow). A wrong secret or an unknown client rejects with AuthenticationError.
     */
    static async create(options) {
        const pont = new Pont(options);
        await pont.auth.token();
        return pont;
    }
}
function defined(headers) {
    return Object.fromEntries(Object.entries(headers).filter((e) => e[1] !== undefined && e[1] !== ''));
}
/** A client's bearer token: fetched on first use, cached, refreshed before expiry (one refresh at a time). */
class TokenSource {
    http;
    clientId;
    clientSecret;
    renewable = true;
    current;
    refreshing;
    constructor(http, clientId, clientSecret) {
        this.http = http;
        this.clientId = clientId;
        this.clientSecret = clientSecret;
    }
    /** After a rotation of the client's secret: later tokens are asked for with the new one. */
    useClientSecret(secret) {
        this.clientSecret = secret;
    }
    async headers(force) {
        return { authorization: `Bearer ${await this.token(force)}` };
    }
    async token(force) {
        if (!force && this.current && this.http.now() / 1000 < this.current.expiresAt - REFRESH_BEFORE_SECONDS)
            return this.current.value;
        this.refreshing ??= this.fetch().finally(() => (this.refreshing = undefined));
        return this.refreshing;
    }
    async fetch() {
        // Asking for a token has no effect to repeat: retried like a GET.
        const { body } = await this.http.request({
            method: 'POST',
            path: '/api/v1/connect/auth/token',
            body: { grant_type: 'client_credentials', client_id: this.clientId, client_secret: this.clientSecret },
            repeatable: true,
        });
        if (!body?.access_token)
            throw new AuthenticationError('The token endpoint answered without an access_token');
        this.current = { value: body.access_token, expiresAt: this.http.now() / 1000 + (body.expires_in ?? 3600) };
        return body.access_token;
    }
}
/**
 * A Bridge Agent (interface §5.2): a facility's on-site system that syncs its records to Pont with its own agent
 * credentials (X-Bridge-Agent-ID, X-Bridge-Agent-Key, and a fresh X-Bridge-Timestamp on every attempt).
 */
export class BridgeAgent {
    // #private: never shown by console.log (the transport holds the agent key).
    #api;
    agentId;
    facilityId;
    constructor(options) {
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
    heartbeat(version, call) {
        required('BridgeAgent.heartbeat', { version });
        return this.#api.send({ method: 'POST', path: '/api/v1/bridge/heartbeat', body: { agent_id: this.agentId, facility_id: this.facilityId, version }, repeatable: true }, call);
    }
    /** Sends a batch (at most 1000 resources). The server deduplicates by `batch_id`, which is also sent as the Idempotency-Key. */
    sync(batch, call) {
        required('BridgeAgent.sync', { batch_id: batch?.batch_id, resources: batch?.resources });
        return this.#api.send({ method: 'POST', path: '/api/v1/bridge/sync', body: batch, idempotencyKey: batch.batch_id }, call);
    }
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
    #api;
    #token;
    constructor(options = {}) {
        const http = transportOf(options, baseUrlOf('new PatientApp', options));
        this.#token = options.token || undefined;
        this.#api = new Caller(http, {
            renewable: false,
            headers: async () => {
                if (!this.#token)
                    throw new ValidationError('PatientApp: no patient token (signIn(healthId, code) first, or pass token)');
                return { authorization: `Bearer ${this.#token}` };
            },
        });
    }
    /** Whether the app holds a patient token (it may still have expired or been revoked). */
    get signedIn() {
        return this.#token !== undefined;
    }
    /**
     * Exchanges a pairing code for a patient token (`access_token`, `pat_…`, valid `expires_in` seconds), which this
     * instance uses from then on; store it to construct the app with `token` later. A wrong, used or expired code is an
     * AuthenticationError (the code is single use: not retried).
     */
    async signIn(healthId, code, call) {
        required('PatientApp.signIn', { healthId, code });
        const answer = await this.#api.send({ method: 'POST', path: '/api/v1/mobile/auth/token', body: { health_id: healthId, code }, credentials: undefined }, call);
        this.#token = answer.access_token;
        return answer;
    }
    /** The patient's consents and pending requests, newest first (`items`; one page, iterate for each). */
    consents(call) {
        return this.#api.list(() => this.#api.get('/api/v1/mobile/consents', undefined, call), (p) => p.items, () => null);
    }
    /** Approves a pending consent request: the organisation that asked gets access (not one that paired this app: 403). */
    approveRequest(consentRequestId, call) {
        required('PatientApp.approveRequest', { consentRequestId });
        // `approval` narrows what was asked (fewer hi_types, a shorter date_range, an earlier expires_at); wider: ValidationError.
        const { approval, ...options } = call ?? {};
        return this.#api.send({ method: 'POST', path: `/api/v1/mobile/consent-requests/${enc(consentRequestId)}/approve`, ...(approval && { body: approval }) }, options);
    }
    /** Denies a pending consent request (already answered: ConflictError). */
    denyRequest(consentRequestId, call) {
        required('PatientApp.denyRequest', { consentRequestId });
        return this.#api.send({ method: 'POST', path: `/api/v1/mobile/consent-requests/${enc(consentRequestId)}/deny` }, call);
    }
    /** Revokes one of the patient's active consents (`consent_id` of `consents()`; not active: ConflictError). */
    revokeConsent(consentId, call) {
        required('PatientApp.revokeConsent', { consentId });
        return this.#api.send({ method: 'POST', path: `/api/v1/mobile/consents/${enc(consentId)}/revoke` }, call);
    }
    /** Who read or changed which kind of the patient's data, when, why, break-glass or not, newest first; iterate for every entry. */
    accessLog(filters = {}, call) {
        const page = (cursor) => () => this.#api.get('/api/v1/mobile/access-log', { ...filters, cursor }, call);
        return this.#api.list(page(filters.cursor), (p) => p.items, (p) => (p.next_cursor ? page(p.next_cursor) : null));
    }
    /** Signs the app out: the token stops working, and this instance forgets it. */
    async signOut(call) {
        const answer = await this.#api.send({ method: 'POST', path: '/api/v1/mobile/auth/revoke' }, call);
        this.#token = undefined;
        return answer;
    }
}
