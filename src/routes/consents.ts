import { z } from 'zod';
import { SignJWT } from 'jose';
import type { ClientPrincipal, PatientPrincipal, Principal } from '../core/principal';
import { accessLogOf } from '../consents/access-log';
import { ApiError, ErrorCode } from '../http/errors';
import { ErrorSchema } from '../http/openapi';
import { defineRoute, type ResponseSpec, type RouteSpec } from '../http/routes';
import type { Services } from '../http/services';
import { issuePairingCode, PAIRING_CODE_TTL_SECONDS } from '../consents/mobile';
import { registeredPatient } from '../healthid/registry';
import { answerStates, ConsentService, HIDDEN_FIELDS } from '../consents/service';
import type { MappingSet } from '../mapping/types';
import { CONSENT_TYPE_NAMES, DATA_CLASSES } from '../core/data-classes';
import { HI_TYPES, PURPOSE_CODES, PURPOSES_OF_USE } from '../policy/hi-types';

const CONNECT = '/api/v1/connect';
const MOBILE = '/api/v1/mobile';

const HealthIdPath = z.object({ health_id: z.string().max(64).describe('Health ID (see resolve)') });
const Text = (max: number) => z.string().trim().min(1, 'must not be blank').max(max);
const FutureInstant = z.iso
  .datetime({ offset: true })
  .refine((v) => Date.parse(v) > Date.now(), 'must be in the future')
  .describe('ISO 8601 date-time with a zone, in the future');
const DataClassSchema = z.enum(DATA_CLASSES).meta({ id: 'ConsentDataClass', description: 'A data class a consent covers (docs/integrators.md "Consent")' });
const ConsentTypeSchema = z.enum(CONSENT_TYPE_NAMES as [string, ...string[]]).meta({ id: 'ConsentType', description: 'docs/integrators.md "Consent": the classes each covers' });

// The consent artefact (issue 43; docs/consent-artefacts.md).
const PurposeOfUseSchema = z
  .enum(PURPOSE_CODES as [string, ...string[]])
  .meta({ id: 'PurposeOfUse', description: `Why the data is wanted: an HL7 v3 ActReason code (http://terminology.hl7.org/CodeSystem/v3-ActReason). ${Object.entries(PURPOSES_OF_USE).map(([c, d]) => `\`${c}\`: ${d}`).join('; ')}` });
const HiTypeSchema = z.enum(HI_TYPES).meta({ id: 'HiType', description: 'A kind of record (mappings/tables/hi-types.yaml: its data classes and FHIR resource types)' });
const HiTypes = z
  .array(HiTypeSchema)
  .min(1)
  .max(HI_TYPES.length)
  .refine((v) => new Set(v).size === v.length, 'each kind at most once')
  .describe('The kinds of record it covers (narrows the classes; absent: every kind of its classes)');
const DateOnly = z.iso.date().describe('YYYY-MM-DD');
const DateRangeSchema = z
  .object({ from: DateOnly, to: DateOnly })
  .strict()
  .refine((r) => r.from <= r.to, { message: 'from must not be after to', path: ['to'] })
  .meta({ id: 'ConsentDateRange', description: 'The period of care the data may come from (both days included)' });
const FrequencySchema = z
  .object({ count: z.number().int().min(1).max(1_000_000), unit: z.enum(['hour', 'day', 'week', 'month', 'year']) })
  .strict()
  .meta({ id: 'ConsentFrequency', description: 'How often the data may be fetched: at most `count` requests per `unit` (calendar window, UTC)' });
const ArtefactFields = {
  purpose_of_use: PurposeOfUseSchema.optional().describe('Default CAREMGT'),
  hi_types: HiTypes.optional(),
  date_range: DateRangeSchema.optional(),
  erase_at: FutureInstant.optional().describe('When the receiver must have deleted its copies (event consent.erase_due)'),
  frequency: FrequencySchema.optional(),
};

const ConsentGrant = z
  .object({
    consent_type: ConsentTypeSchema,
    expires_at: FutureInstant,
    purpose: Text(500).optional(),
    scopes: z.array(DataClassSchema).max(DATA_CLASSES.length).optional().describe("Narrows the consent type's classes (never widens)"),
    external_reference: Text(200).optional().describe("The caller's own reference, written to the audit trail"),
    ...ArtefactFields,
  })
  .strict()
  .meta({ id: 'ConsentGrantRequest' });

/**
 * A consent answer: the consent map's record (mappings/consent.map.yaml) but its HIDDEN_FIELDS, after the consent id
 * and Health ID (null consent id and fields: no consent on file), its status values the map's and the derived ones.
 */
function consentSchemas(maps: MappingSet) {
  const map = maps.get('consent');
  const fields = Object.entries(map.shape().shape).filter(([name]) => !HIDDEN_FIELDS.includes(name));
  const ConsentStatus = z
    .object({ consent_id: z.string().nullable(), health_id: z.string(), ...Object.fromEntries(fields) })
    .extend({
      organization_id: z.string(),
      status: z.enum(answerStates(map) as [string, ...string[]]).describe('The consent map\'s status; `expired`: active, but expires_at has passed; `none`: no consent on file'),
      scopes: z.array(z.string()).describe('The data classes it covers'),
    })
    .meta({ id: 'ConsentStatus' });
  const MyConsents = z.object({ items: z.array(ConsentStatus) }).meta({ id: 'MyConsents' });
  return { ConsentStatus, MyConsents };
}

const ConsentRequest = z
  .object({
    health_id: z.string().max(64),
    purpose: Text(500),
    requested_scopes: z.array(DataClassSchema).min(1).max(DATA_CLASSES.length),
    consent_type: ConsentTypeSchema.optional().describe('Default full_record, narrowed to requested_scopes'),
    expires_at: FutureInstant.optional().describe(`How long the consent lasts once approved (default ${365} days from approval)`),
    ...ArtefactFields,
  })
  .strict()
  .meta({ id: 'ConsentRequestCreate' });

/** What the patient approves, when narrower than what was asked: fewer kinds, a shorter period, an earlier end. */
const ConsentApproval = z
  .object({ hi_types: HiTypes.optional(), date_range: DateRangeSchema.optional(), expires_at: FutureInstant.optional() })
  .strict()
  .meta({ id: 'ConsentApproval' });

const ConsentRequestCreated = z
  .object({
    consent_request_id: z.string(),
    health_id: z.string(),
    organization_id: z.string(),
    status: z.literal('pending'),
    consent_type: z.string(),
    requested_scopes: z.array(z.string()),
    purpose: z.string(),
    created_at: z.string(),
    purpose_of_use: PurposeOfUseSchema,
    hi_types: z.array(HiTypeSchema),
    date_range: DateRangeSchema.nullable(),
    erase_at: z.string().nullable(),
    frequency: FrequencySchema.nullable(),
  })
  .meta({ id: 'ConsentRequestCreated' });

const Reason = z.object({ purpose: Text(500).optional(), external_reference: Text(200).optional() }).strict();

const errors = {
  403: { description: 'Missing scope (FORBIDDEN)', schema: ErrorSchema },
  404: { description: 'Health ID not registered (HEALTH_ID_NOT_REGISTERED) or no such consent (CONSENT_NOT_FOUND)', schema: ErrorSchema },
  422: { description: 'Malformed Health ID or invalid field (VALIDATION_FAILED, HEALTH_ID_*)', schema: ErrorSchema },
};

const client = (p: Principal | undefined) => p as ClientPrincipal;
const patient = (p: Principal | undefined) => p as PatientPrincipal;

export function consentRoutes(services: Services): RouteSpec[] {
  const consents = new ConsentService(services.mappings);
  // The maps of the request (a reload changes them).
  const live = services.mappings.derived(consentSchemas);
  const tags = ['Connect', 'Consents'];
  return [
    defineRoute({
      method: 'post',
      path: `${CONNECT}/patient/{health_id}/consent/grant`,
      operationId: 'grantConsent',
      summary: "Record the patient's consent to the caller's organisation",
      description:
        'The patient, present at the facility or verified another way, grants the caller\'s organisation access to the classes of their data that `consent_type` (narrowed by `scopes`) covers, until `expires_at`. A grant while one is active replaces it. Event `consent.granted`; audited.',
      tags,
      security: { kind: 'client', scope: 'consents:write' },
      params: HealthIdPath,
      body: ConsentGrant,
      get responses() {
        return { 201: { description: 'Granted', schema: live().ConsentStatus }, ...errors };
      },
      async handler({ params, body, principal, repo }) {
        return { status: 201, body: await consents.grant(repo, client(principal).organizationId, params.health_id, body) };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${CONNECT}/patient/{health_id}/consent`,
      operationId: 'getConsentStatus',
      summary: "The caller's organisation's consent for the patient",
      description: '`status`: the consent map\'s (e.g. pending: a request awaits the patient), `expired` or `none`; the schema lists them. Check it before reading records.',
      tags,
      security: { kind: 'client', scope: ['consents:read', 'consents:write'] },
      params: HealthIdPath,
      get responses() {
        return { 200: { description: 'The consent status', schema: live().ConsentStatus }, ...errors };
      },
      async handler({ params, principal, repo }) {
        return { body: await consents.status(repo, client(principal).organizationId, params.health_id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: `${CONNECT}/patient/{health_id}/consent/revoke`,
      operationId: 'revokeConsent',
      summary: "Record the patient's revocation of the caller's organisation's consent",
      description: 'Takes effect on the next request, in every process. Event `consent.revoked` (to the organisation that lost access).',
      tags,
      security: { kind: 'client', scope: 'consents:write' },
      params: HealthIdPath,
      body: Reason,
      get responses() {
        return { 200: { description: 'Revoked', schema: live().ConsentStatus }, ...errors };
      },
      async handler({ params, body, principal, repo }) {
        return { body: await consents.revokeFor(repo, client(principal).organizationId, params.health_id, body) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/sdk/consents/request',
      operationId: 'requestConsent',
      summary: 'Ask the patient for consent (they answer in their app)',
      description: 'Creates a pending request (a proposed Consent). Event `consent.requested`; the answer raises `consent.granted` or `consent.denied`.',
      tags: ['SDK', 'Consents'],
      security: { kind: 'client', scope: 'consents:write' },
      body: ConsentRequest,
      responses: { 201: { description: 'Requested', schema: ConsentRequestCreated }, ...errors },
      async handler({ body, principal, repo }) {
        return { status: 201, body: await consents.request(repo, client(principal).organizationId, body) };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${CONNECT}/consents/{consent_id}/artefact`,
      operationId: 'getConsentArtefact',
      summary: 'The signed consent artefact: a compact JWS both sides verify offline',
      description:
        "The consent's facts (purpose_of_use, hi_types, date_range, expires_at, erase_at, frequency, requester, holders) as the `consent` claim of a JWS signed with Pont's token key (`alg` RS256, `kid` of GET /.well-known/jwks.json; `exp` is the consent's expiry). Verify it with the key set, then check the revocation list (GET …/consents/revoked). For the organisation it is granted to; any other gets the 404 of an unknown id. `Accept: application/jose` answers the JWS itself. Audited.",
      tags,
      security: { kind: 'client', scope: ['consents:read', 'consents:write'] },
      params: z.object({ consent_id: z.string().max(64) }),
      responses: {
        200: { description: 'The artefact', schema: z.object({ artefact: z.string().describe('Compact JWS (RS256)') }).meta({ id: 'ConsentArtefact' }) },
        ...errors,
      },
      async handler({ ctx, params, principal, repo }) {
        const sign = async (payload: Record<string, unknown>, exp: number | undefined) => {
          const { kid, privateKey } = await services.access.keys.signingKey();
          const jwt = new SignJWT(payload)
            .setProtectedHeader({ alg: 'RS256', kid, typ: 'consent-artefact+jwt' })
            .setIssuer(services.config.publicUrl)
            .setSubject(params.consent_id)
            .setIssuedAt();
          if (exp !== undefined) jwt.setExpirationTime(exp);
          return jwt.sign(privateKey);
        };
        const artefact = await consents.artefact(repo, client(principal).organizationId, params.consent_id, sign);
        if (ctx.accepts('application/json', 'application/jose') === 'application/jose') return { body: artefact, contentType: 'application/jose' };
        return { body: { artefact } };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${CONNECT}/consents/revoked`,
      operationId: 'listRevokedConsents',
      summary: "The caller's organisation's consents revoked since a time (the artefacts' revocation list)",
      description: 'Oldest first; page on with `since` set to the last `revoked_at`. An artefact listed here is void, whatever its signature says.',
      tags,
      security: { kind: 'client', scope: ['consents:read', 'consents:write'] },
      query: z.object({ since: z.iso.datetime({ offset: true }), limit: z.coerce.number().int().min(1).max(1000).default(1000) }),
      responses: {
        200: {
          description: 'Revoked consents',
          schema: z.object({ items: z.array(z.object({ consent_id: z.string(), revoked_at: z.string() })) }).meta({ id: 'RevokedConsents' }),
        },
        ...errors,
      },
      async handler({ query, principal, repo }) {
        return { body: { items: await consents.revokedSince(repo, client(principal).organizationId, query.since, query.limit) } };
      },
    }),
    defineRoute({
      method: 'post',
      path: `${CONNECT}/patient/{health_id}/mobile/pairing-code`,
      operationId: 'issuePairingCode',
      summary: "A short-lived code that pairs the patient's app (given to the patient in person)",
      description: `Only an organisation that registered the patient or holds their active consent may issue one (403 otherwise); the app it pairs never approves that organisation's own consent requests, and the pairing is in the patient's access log. Single use, valid ${PAIRING_CODE_TTL_SECONDS / 60} minutes, at most 5 wrong tries; a new code ends the previous one. The app exchanges it at POST ${MOBILE}/auth/token.`,
      tags: ['Connect', 'Mobile'],
      security: { kind: 'client', scope: 'consents:write' },
      params: HealthIdPath,
      responses: { 201: { description: 'The code', schema: z.object({ code: z.string(), expires_at: z.string() }).meta({ id: 'PairingCode' }) }, ...errors },
      secretFields: { fields: ['code'], key: services.config.webhooks.secretKey },
      async handler({ params, principal, repo }) {
        return {
          status: 201,
          body: await repo.transaction(async (sql) => {
            const record = await registeredPatient(sql, params.health_id);
            // Only an organisation with a standing relationship to the patient pairs their app (src/policy).
            await repo.requireRelationship(record.patientId, 'issuePairingCode');
            const issued = await issuePairingCode(sql, record, client(principal));
            await repo.audit({ operation: 'issuePairingCode', action: 'C', outcome: 'success', outcomeDescription: 'pairing code issued', patient: { id: record.patientId, healthId: record.healthId } });
            return issued;
          }),
        };
      },
    }),

    // ---------------------------------------------------------------- the patient's app
    defineRoute({
      method: 'post',
      path: `${MOBILE}/auth/token`,
      operationId: 'mobileToken',
      summary: 'Exchange a pairing code for a patient token (pat_…)',
      description: 'Public. Every failure answers 401 alike (no hint whether the Health ID exists); failures are rate-limited per address and per Health ID.',
      tags: ['Mobile'],
      security: { kind: 'public' },
      group: 'failed-auth',
      body: z.object({ health_id: z.string().max(64), code: z.string().max(32) }).strict().meta({ id: 'MobileTokenRequest' }),
      responses: {
        200: {
          description: 'A patient token',
          schema: z.object({ access_token: z.string(), token_type: z.literal('Bearer'), expires_in: z.number().int() }).meta({ id: 'MobileTokenResponse' }),
        },
        401: { description: 'Wrong, used or expired code (UNAUTHENTICATED)', schema: ErrorSchema },
        429: { description: 'Too many failures (RATE_LIMITED)', schema: ErrorSchema },
        503: { description: 'Concurrent requests for the same Health ID kept colliding (SERVICE_UNAVAILABLE); retry after Retry-After', schema: ErrorSchema },
      },
      async handler({ ctx, body }) {
        const { limits } = services.access;
        const keys = [`ip:${ctx.ip}`, `pairing:${body.health_id}`];
        for (const key of keys) await limits.assertNotExhausted('failed-auth', key);
        const issued = await services.access.patientTokens.exchange(body.health_id, body.code);
        if (!issued) {
          for (const key of keys) await limits.penalize('failed-auth', key);
          throw new ApiError(401, ErrorCode.unauthenticated, 'Invalid, used or expired pairing code');
        }
        return { body: { access_token: issued.token, token_type: 'Bearer', expires_in: issued.expiresIn } };
      },
    }),
    defineRoute({
      method: 'post',
      path: `${MOBILE}/auth/revoke`,
      operationId: 'mobileSignOut',
      summary: "Revoke the calling patient token (the app signs out)",
      tags: ['Mobile'],
      security: { kind: 'patient' },
      responses: { 204: { description: 'Revoked' } },
      async handler({ ctx }) {
        await services.access.patientTokens.revoke(ctx.get('authorization').replace(/^Bearer +/i, '').trim());
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${MOBILE}/consents`,
      operationId: 'listMyConsents',
      summary: "The patient's consents and pending requests",
      tags: ['Mobile'],
      security: { kind: 'patient' },
      get responses() {
        return { 200: { description: 'Newest first', schema: live().MyConsents } };
      },
      async handler({ principal, repo }) {
        const me = patient(principal);
        return { body: { items: await consents.listForPatient(repo, me.patientId, me.healthId) } };
      },
    }),
    ...(['approve', 'deny'] as const).map((answer) =>
      defineRoute({
        method: 'post',
        path: `${MOBILE}/consent-requests/{consent_request_id}/${answer}`,
        operationId: answer === 'approve' ? 'approveConsentRequest' : 'denyConsentRequest',
        summary: answer === 'approve' ? 'Approve a consent request: the organisation gets access' : 'Deny a consent request',
        description: `Event \`consent.${answer === 'approve' ? 'granted' : 'denied'}\` to the requesting organisation. 409 if already answered.${answer === 'approve' ? ' The body may narrow what was asked (fewer `hi_types`, a shorter `date_range`, an earlier `expires_at`); the consent records what was approved.' : ''}`,
        tags: ['Mobile'],
        security: { kind: 'patient' },
        params: z.object({ consent_request_id: z.string().max(64) }),
        ...(answer === 'approve' ? { body: ConsentApproval } : {}),
        get responses() {
          const out: Record<number, ResponseSpec> = {
            200: { description: 'Answered', schema: live().ConsentStatus },
            404: { description: 'No such request of yours (CONSENT_NOT_FOUND)', schema: ErrorSchema },
            409: { description: 'Already answered (CONFLICT)', schema: ErrorSchema },
          };
          if (answer === 'approve') out[422] = { description: 'Wider than asked (more kinds, a longer period, a later end) or invalid (VALIDATION_FAILED); the request stays pending', schema: ErrorSchema };
          return out;
        },
        async handler({ params, principal, repo, body }) {
          const me = patient(principal);
          return { body: await consents.answer(repo, me, params.consent_request_id, answer, body as z.infer<typeof ConsentApproval> | undefined) };
        },
      }),
    ),
    defineRoute({
      method: 'post',
      path: `${MOBILE}/consents/{consent_id}/revoke`,
      operationId: 'revokeMyConsent',
      summary: 'Revoke one of my consents',
      description: 'Takes effect on the next request, in every process. Event `consent.revoked` to the organisation that lost access.',
      tags: ['Mobile'],
      security: { kind: 'patient' },
      params: z.object({ consent_id: z.string().max(64) }),
      get responses() {
        return {
          200: { description: 'Revoked', schema: live().ConsentStatus },
          404: { description: 'No such consent of yours (CONSENT_NOT_FOUND)', schema: ErrorSchema },
          409: { description: 'Not active (CONFLICT)', schema: ErrorSchema },
        };
      },
      async handler({ params, principal, repo }) {
        const me = patient(principal);
        return { body: await consents.revokeByPatient(repo, me.patientId, me.healthId, params.consent_id) };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${MOBILE}/access-log`,
      operationId: 'myAccessLog',
      summary: 'Who read which kind of my data, when, why, and whether it was break-glass',
      tags: ['Mobile'],
      security: { kind: 'patient' },
      query: z.object({ limit: z.coerce.number().int().min(1).max(200).default(50), cursor: z.string().max(200).optional() }),
      responses: {
        200: {
          description: 'Newest first; next_cursor pages on',
          schema: z
            .object({
              items: z.array(
                z.object({
                  at: z.string(),
                  actor: z.object({ kind: z.enum(['organization', 'patient', 'system']), organization_id: z.string().nullable(), client_id: z.string().nullable() }),
                  operation: z.string().nullable(),
                  action: z.enum(['read', 'create', 'update', 'delete', 'execute']),
                  data_types: z.array(z.string()),
                  purpose: z.string().nullable(),
                  break_glass: z.boolean(),
                  outcome: z.enum(['allowed', 'refused']),
                }),
              ),
              next_cursor: z.string().nullable(),
            })
            .meta({ id: 'AccessLog' }),
        },
      },
      async handler({ query, principal }) {
        const me = patient(principal);
        return { body: await accessLogOf(services.fhir.system('access-log'), me.patientId, { limit: query.limit, cursor: query.cursor }) };
      },
    }),
  ];
}
