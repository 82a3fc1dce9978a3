import type { Context } from 'koa';
import { z } from 'zod';
import { ApiError, ErrorCode, notFound, type ErrorCodeValue } from '../http/errors';
import { readBody } from '../http/body';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../http/services';
import { rotateClientSecret, SecretRotationRequest, type ActiveClient } from '../auth/clients';
import type { ClientPrincipal } from '../core/principal';
import { SCOPES } from '../core/scopes';
import { ASSERTION_TYPE, AssertionRefused } from '../auth/assertions';
import { ASSERTION_ALGORITHMS } from '../auth/jwks';
import { grantScopes, SMART_SCOPES_SUPPORTED, smartScopeTable } from '../auth/smart-scopes';

export const TOKEN_PATH = '/api/v1/connect/auth/token';
export const INTROSPECTION_PATH = '/api/v1/connect/auth/introspect';
export const JWKS_PATH = '/.well-known/jwks.json';
export const METADATA_PATH = '/.well-known/oauth-authorization-server';
export const ROTATE_SECRET_PATH = '/api/v1/connect/auth/clients/{client_id}/rotate-secret';
/** SMART App Launch discovery, at the root and under the FHIR base (where SMART clients look). */
export const SMART_CONFIGURATION_PATHS = ['/.well-known/smart-configuration', '/api/fhir/R4/.well-known/smart-configuration'];

const FORM_AND_JSON = ['application/x-www-form-urlencoded', 'application/json'];
/** RFC 6749 §5.1: token responses must not be cached. */
const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };

const TokenRequest = z
  .object({
    grant_type: z.literal('client_credentials'),
    client_id: z.string().optional().describe('Integration client id (or send it with HTTP Basic); optional with a client_assertion, whose iss it must equal'),
    client_secret: z.string().optional().describe('Integration client secret (or send it with HTTP Basic); clients registered with keys have none'),
    client_assertion_type: z.literal(ASSERTION_TYPE).optional().describe('SMART Backend Services (private_key_jwt): with client_assertion, instead of a secret'),
    client_assertion: z
      .string()
      .optional()
      .describe(
        `A JWT signed by a key of the client's registered JWK Set: alg ${ASSERTION_ALGORITHMS.join(' or ')}, header kid; iss = sub = the client id; aud = this endpoint's URL; exp at most 300 s ahead; a jti never used before`,
      ),
    scope: z
      .string()
      .optional()
      .describe("Space-separated scopes to narrow the grant to: Pont's own, or SMART system scopes (system/Observation.rs, system/*.cruds...; see the description); default: all of the client's scopes"),
  })
  .meta({
    id: 'TokenRequest',
    description:
      'Section 2.4. Also accepted form-encoded (SMART clients send it so), with the client credentials in HTTP Basic (RFC 6749 §2.3.1), or a client assertion (RFC 7523, SMART Backend Services).',
  });

const TokenResponseSchema = z
  .object({
    access_token: z.string().describe('RS256-signed JWT'),
    token_type: z.literal('Bearer'),
    expires_in: z.number().int().describe('Seconds; 3600'),
    scope: z.string().describe('Space-separated granted scopes'),
  })
  .meta({ id: 'TokenResponse' });

const OAuthErrorSchema = z
  .object({
    status: z.literal('error'),
    error_code: z.string(),
    message: z.string(),
    error: z.enum(['invalid_request', 'invalid_client', 'unsupported_grant_type', 'invalid_scope']).describe('RFC 6749 §5.2 code'),
    error_description: z.string(),
  })
  .meta({ id: 'OAuthError', description: 'The Error shape, with the RFC 6749 fields OAuth libraries read.' });

const IntrospectionRequest = z
  .object({
    token: z.string().describe('The access token to introspect'),
    token_type_hint: z.string().optional(),
    client_id: z.string().optional().describe('Caller\'s client id, when not using HTTP Basic, Bearer or X-Client-ID'),
    client_secret: z.string().optional(),
  })
  .meta({ id: 'IntrospectionRequest' });

const IntrospectionResponse = z
  .object({
    active: z.boolean(),
    token_type: z.string().optional(),
    scope: z.string().optional(),
    client_id: z.string().optional(),
    sub: z.string().optional(),
    aud: z.string().optional(),
    iss: z.string().optional(),
    exp: z.number().int().optional(),
    iat: z.number().int().optional(),
    jti: z.string().optional(),
  })
  .meta({ id: 'IntrospectionResponse', description: 'RFC 7662. Exactly {"active": false} for any token that is not a live token of ours.' });

const SdkIntrospection = z
  .object({
    active: z.boolean(),
    scopes: z.array(z.string()),
    client_id: z.string(),
    expires_at: z.string().describe('ISO 8601'),
  })
  .meta({ id: 'SdkTokenIntrospection' });

const ClientSecretRotation = z
  .object({
    client_id: z.string(),
    client_secret: z.string().describe('pcs_…: the new secret, shown in this response only'),
    previous_secret_expires_at: z.string().nullable().describe('Until when the replaced secret is still accepted (ISO 8601); null: refused already'),
  })
  .meta({ id: 'ClientSecretRotation' });

const Jwk = z.object({ kty: z.string(), use: z.string(), alg: z.string(), kid: z.string(), n: z.string(), e: z.string() }).meta({ id: 'Jwk' });
const Jwks = z.object({ keys: z.array(Jwk) }).meta({ id: 'Jwks' });

const OAuthServerMetadata = z
  .object({
    issuer: z.string(),
    token_endpoint: z.string(),
    introspection_endpoint: z.string(),
    jwks_uri: z.string(),
    grant_types_supported: z.array(z.string()),
    scopes_supported: z.array(z.string()),
  })
  .loose()
  .meta({ id: 'OAuthServerMetadata', description: 'RFC 8414' });

const SmartConfiguration = z
  .object({
    token_endpoint: z.string(),
    token_endpoint_auth_methods_supported: z.array(z.string()),
    token_endpoint_auth_signing_alg_values_supported: z.array(z.string()),
    grant_types_supported: z.array(z.string()),
    scopes_supported: z.array(z.string()).describe('System scopes; any resource type may take the place of *'),
    capabilities: z.array(z.string()),
  })
  .loose()
  .meta({ id: 'SmartConfiguration', description: 'SMART App Launch 2.x, .well-known/smart-configuration' });

type OAuthErrorCode = 'invalid_request' | 'invalid_client' | 'unsupported_grant_type' | 'invalid_scope';

/** An error in the Error shape that OAuth libraries also understand (RFC 6749 §5.2). */
function oauthError(error: OAuthErrorCode, message: string, status = 400, code: ErrorCodeValue = ErrorCode.badRequest): ApiError {
  const headers = error === 'invalid_client' ? { 'WWW-Authenticate': 'Basic realm="pont"', ...NO_STORE } : NO_STORE;
  return new ApiError(status, code, message, { extra: { error, error_description: message }, headers });
}

const invalidClient = (message = 'Client authentication failed') =>
  oauthError('invalid_client', message, 401, ErrorCode.unauthenticated);

/** The body of an OAuth endpoint (form or JSON) as strings; anything else is invalid_request. */
async function readOAuthBody(ctx: Context, limit: number): Promise<Record<string, string>> {
  let body: unknown;
  try {
    body = (await readBody(ctx, limit, true)) ?? {};
  } catch (err) {
    if (err instanceof ApiError) throw oauthError('invalid_request', err.message, err.status, err.code);
    throw err;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw oauthError('invalid_request', 'The body must be an object of parameters');
  for (const [name, value] of Object.entries(body)) {
    if (typeof value !== 'string') throw oauthError('invalid_request', `Parameter ${name} must be a string`);
  }
  return body as Record<string, string>;
}

/** RFC 6749 §2.3.1: the Basic user and password are form-encoded before base64. */
function formDecode(value: string): string {
  return decodeURIComponent(value.replace(/\+/g, ' '));
}

/**
 * Client credentials of an OAuth request: HTTP Basic or `client_id` + `client_secret` in the body
 * (never both, RFC 6749 §2.3). Undefined when the request carries neither.
 */
function clientCredentials(ctx: Context, body: Record<string, string>): { clientId: string; secret: string } | undefined {
  const basic = /^Basic +([A-Za-z0-9+/]+=*) *$/i.exec(ctx.get('authorization'))?.[1];
  if (basic) {
    if (body.client_secret !== undefined) throw oauthError('invalid_request', 'Send the client credentials once: HTTP Basic or the body, not both');
    const decoded = Buffer.from(basic, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw invalidClient('Malformed HTTP Basic credentials');
    try {
      const clientId = formDecode(decoded.slice(0, colon));
      if (body.client_id !== undefined && body.client_id !== clientId) {
        throw oauthError('invalid_request', 'client_id in the body differs from the HTTP Basic client');
      }
      return { clientId, secret: formDecode(decoded.slice(colon + 1)) };
    } catch (err) {
      if (err instanceof URIError) throw invalidClient('Malformed HTTP Basic credentials');
      throw err;
    }
  }
  if (body.client_id !== undefined || body.client_secret !== undefined) {
    if (!body.client_id || !body.client_secret) throw invalidClient('Send both client_id and client_secret');
    return { clientId: body.client_id, secret: body.client_secret };
  }
  return undefined;
}

/** Most scopes one token request may name. */
const MAX_REQUESTED_SCOPES = 100;

/**
 * The scopes to grant, as the token and its answer will carry them: all of the client's, or those requested,
 * Pont's own or SMART's (src/auth/smart-scopes.ts); one the client may not have refuses the request.
 */
function grantedScopes(client: ActiveClient, requested: string | undefined): string[] {
  const asked = [...new Set((requested ?? '').split(' ').filter(Boolean))];
  if (!asked.length) return client.scopes;
  if (asked.length > MAX_REQUESTED_SCOPES) throw oauthError('invalid_scope', `Ask at most ${MAX_REQUESTED_SCOPES} scopes`);
  const { refused } = grantScopes(asked, client.scopes);
  if (refused.length) throw oauthError('invalid_scope', `The client is not allowed the scope(s): ${refused.map((r) => `${r.scope.slice(0, 100)} (${r.reason})`).join('; ')}`);
  return asked;
}

/** A client assertion (RFC 7523 §2.2), when the request carries one; it is then the only client authentication. */
function clientAssertion(ctx: Context, body: Record<string, string>): string | undefined {
  if (body.client_assertion_type === undefined && body.client_assertion === undefined) return undefined;
  if (body.client_assertion_type !== ASSERTION_TYPE) throw oauthError('invalid_request', `client_assertion_type must be ${ASSERTION_TYPE}`);
  if (!body.client_assertion) throw oauthError('invalid_request', 'client_assertion is required with client_assertion_type');
  if (body.client_secret !== undefined || /^Basic /i.test(ctx.get('authorization')))
    throw oauthError('invalid_request', 'Authenticate the client once: a client assertion or a secret, not both');
  return body.client_assertion;
}

export function authRoutes(services: Services): RouteSpec[] {
  const { access, config } = services;
  const url = (path: string) => `${access.issuer}${path}`;

  const oauthErrors = {
    400: { description: 'invalid_request, unsupported_grant_type or invalid_scope', schema: OAuthErrorSchema },
    401: { description: 'invalid_client: unknown client, wrong secret or revoked client (answered alike)', schema: OAuthErrorSchema },
    429: { description: 'Too many requests for this client, or too many failed client authentications from this address' },
  };

  const smartConfiguration = () => ({
    issuer: access.issuer,
    jwks_uri: url(JWKS_PATH),
    token_endpoint: url(TOKEN_PATH),
    introspection_endpoint: url(INTROSPECTION_PATH),
    token_endpoint_auth_methods_supported: ['private_key_jwt'],
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
    grant_types_supported: ['client_credentials'],
    scopes_supported: SMART_SCOPES_SUPPORTED,
    response_types_supported: [],
    code_challenge_methods_supported: [],
    capabilities: ['client-confidential-asymmetric', 'permission-v2', 'permission-v1'],
  });

  return [
    defineRoute({
      method: 'get',
      path: JWKS_PATH,
      operationId: 'getJwks',
      summary: 'Public keys that verify access tokens (RS256)',
      description: 'The signing key and, after `pont keys rotate`, earlier keys until every token they signed has expired.',
      tags: ['Discovery'],
      security: { kind: 'public' },
      responses: { 200: { description: 'JWKS', schema: Jwks } },
      handler: async () => ({ body: await access.keys.jwks(), headers: { 'Cache-Control': 'public, max-age=300' } }),
    }),
    defineRoute({
      method: 'get',
      path: METADATA_PATH,
      operationId: 'getOAuthServerMetadata',
      summary: 'OAuth 2.0 authorization server metadata (RFC 8414)',
      tags: ['Discovery'],
      security: { kind: 'public' },
      responses: { 200: { description: 'Metadata', schema: OAuthServerMetadata } },
      handler: async () => ({
        body: {
          issuer: access.issuer,
          token_endpoint: url(TOKEN_PATH),
          introspection_endpoint: url(INTROSPECTION_PATH),
          jwks_uri: url(JWKS_PATH),
          grant_types_supported: ['client_credentials'],
          scopes_supported: SCOPES,
          response_types_supported: [],
          token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'private_key_jwt'],
          token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
          introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'bearer'],
          service_documentation: url('/api/openapi.json'),
        },
      }),
    }),
    ...SMART_CONFIGURATION_PATHS.map((path, i) =>
      defineRoute({
        method: 'get',
        path,
        operationId: i === 0 ? 'getSmartConfiguration' : 'getFhirSmartConfiguration',
        summary: 'SMART App Launch 2.x configuration: how SMART Backend Services authenticate',
        description: 'Clients registered with public keys (`pont clients create --jwks FILE | --jwks-uri URL`) authenticate at `token_endpoint` with a signed client assertion.',
        tags: ['Discovery'],
        security: { kind: 'public' },
        responses: { 200: { description: 'SMART configuration', schema: SmartConfiguration } },
        handler: async () => ({ body: smartConfiguration(), headers: { 'Cache-Control': 'public, max-age=3600' } }),
      }),
    ),
    defineRoute({
      method: 'post',
      path: TOKEN_PATH,
      operationId: 'issueToken',
      summary: 'OAuth 2.0 client-credentials grant: an RS256 access token for 3600 s',
      description:
        'Client authentication: `client_id` + `client_secret` in the body (JSON or form) or HTTP Basic; or, for a ' +
        'client registered with public keys (SMART Backend Services, `private_key_jwt`), `client_assertion_type` + ' +
        '`client_assertion`. A replayed, expired or badly signed assertion, a wrong `aud` or an unknown client: 401 ' +
        'invalid_client. Optional `scope` narrows the grant, in Pont scopes or SMART system scopes (answered as asked); ' +
        'a scope the client lacks fails with invalid_scope. SMART scopes map onto Pont scopes so:\n\n' +
        smartScopeTable(),
      tags: ['Connect'],
      group: 'token',
      security: { kind: 'public' },
      rawBody: { schema: TokenRequest, contentTypes: FORM_AND_JSON },
      responses: { 200: { description: 'Token issued', schema: TokenResponseSchema }, ...oauthErrors },
      handler: async ({ ctx }) => {
        const body = await readOAuthBody(ctx, config.maxBodyBytes);
        const assertion = clientAssertion(ctx, body);
        const credentials = assertion === undefined ? clientCredentials(ctx, body) : undefined;
        if (!body.grant_type) throw oauthError('invalid_request', 'grant_type is required (client_credentials)');
        if (body.grant_type !== 'client_credentials') {
          throw oauthError('unsupported_grant_type', `grant_type ${body.grant_type} is not supported; use client_credentials`);
        }
        let client: ActiveClient | undefined;
        if (assertion !== undefined) {
          try {
            client = await access.checkClientAssertion(ctx, assertion, url(TOKEN_PATH), body.client_id);
          } catch (err) {
            if (err instanceof AssertionRefused) throw invalidClient(err.message);
            throw err;
          }
        } else {
          if (!credentials) throw invalidClient('Client authentication required: client_id and client_secret, HTTP Basic, or a client_assertion');
          client = await access.checkClientSecret(ctx, credentials.clientId, credentials.secret);
        }
        if (!client) throw invalidClient();
        await access.limits.consume('token', `client:${client.clientId}`);
        const token = await access.tokens.issue(client, grantedScopes(client, body.scope));
        await access.clients.recordUse(client.clientId);
        return { body: token, headers: NO_STORE };
      },
    }),
    defineRoute({
      method: 'post',
      path: INTROSPECTION_PATH,
      operationId: 'introspectToken',
      summary: 'Token introspection (RFC 7662)',
      description:
        'The caller authenticates as a client: HTTP Basic, `client_id` + `client_secret` in the form, ' +
        'X-Client-ID + X-Client-Secret, or its own bearer token.',
      tags: ['Connect'],
      group: 'introspect',
      security: { kind: 'public' },
      rawBody: { schema: IntrospectionRequest, contentTypes: FORM_AND_JSON },
      responses: {
        200: { description: 'Token state', schema: IntrospectionResponse },
        400: { description: 'invalid_request: no token parameter', schema: OAuthErrorSchema },
        401: { description: 'The caller is not an authenticated client', schema: OAuthErrorSchema },
        429: { description: 'Too many requests' },
      },
      handler: async ({ ctx }) => {
        const body = await readOAuthBody(ctx, config.maxBodyBytes);
        const credentials = clientCredentials(ctx, body);
        let callerId: string;
        if (credentials) {
          const caller = await access.checkClientSecret(ctx, credentials.clientId, credentials.secret);
          if (!caller) throw invalidClient();
          callerId = caller.clientId;
        } else {
          callerId = (await access.authenticateClient(ctx)).clientId;
        }
        await access.limits.consume('introspect', `client:${callerId}`);
        if (!body.token) throw oauthError('invalid_request', 'The token parameter is required');
        const verified = await access.tokens.verify(body.token);
        if (!verified) return { body: { active: false }, headers: NO_STORE };
        const { claims } = verified;
        return {
          headers: NO_STORE,
          body: {
            active: true,
            token_type: 'Bearer',
            scope: verified.scope,
            client_id: claims.client_id,
            sub: claims.sub,
            aud: claims.aud,
            iss: claims.iss,
            exp: claims.exp,
            iat: claims.iat,
            jti: claims.jti,
          },
        };
      },
    }),
    defineRoute({
      method: 'post',
      path: ROTATE_SECRET_PATH,
      operationId: 'rotateClientSecret',
      summary: "Replace the calling client's secret; the old one stays valid for an overlap",
      description:
        'The caller is the client itself (its bearer token or its X-Client-ID/X-Client-Secret pair); any other ' +
        'client id is 404. Both secrets are accepted until `previous_secret_expires_at` (`overlap_seconds`, default ' +
        '86400, 0: the old one is refused at once), in every process; a secret replaced by an earlier rotation is ' +
        'refused from now on. Tokens already issued stay valid until they expire. The new secret is returned in ' +
        'this response only (an Idempotency-Key replay answers it again; it is kept encrypted for that).',
      tags: ['Connect'],
      security: { kind: 'client' },
      params: z.object({ client_id: z.string().max(128).describe('cli_…: the calling client') }),
      body: SecretRotationRequest,
      responses: {
        200: { description: 'The new secret', schema: ClientSecretRotation },
        404: { description: 'Not the calling client' },
        409: { description: 'The client authenticates with public keys: it has no secret' },
      },
      secretFields: { fields: ['client_secret'], key: config.webhooks.secretKey },
      handler: async ({ params, body, principal, repo }) => {
        const caller = principal as ClientPrincipal;
        if (caller.clientId !== params.client_id) throw notFound(`No client ${params.client_id} for this caller`);
        if ((await access.clients.active(caller.clientId))?.keys)
          throw new ApiError(409, ErrorCode.conflict, 'This client authenticates with its public keys (private_key_jwt): it has no secret to rotate');
        access.clients.changing(caller.clientId); // its next request, right after this answer, must see the new secret
        const rotated = await repo.transaction((sql) => rotateClientSecret(sql, caller.clientId, body.overlap_seconds));
        if (!rotated) throw notFound(`No client ${params.client_id} for this caller`); // revoked meanwhile
        return { body: rotated, headers: NO_STORE };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/sdk/token/introspect',
      operationId: 'sdkIntrospectToken',
      summary: 'Introspect the bearer token of this request (SDK shape)',
      description: 'Needs `Authorization: Bearer`: a request authenticated by the X-Client-ID/Secret pair has no token to describe (401).',
      tags: ['SDK'],
      security: { kind: 'client' },
      responses: { 200: { description: 'Token state', schema: SdkIntrospection } },
      handler: async ({ principal }) => {
        const client = principal as ClientPrincipal;
        if (!client.tokenId || client.tokenExpiresAt === undefined) {
          throw new ApiError(401, ErrorCode.unauthenticated, 'This operation introspects a bearer token: send Authorization: Bearer <access token>');
        }
        return {
          body: {
            active: true,
            scopes: client.scopes,
            client_id: client.clientId,
            expires_at: new Date(client.tokenExpiresAt * 1000).toISOString(),
          },
        };
      },
    }),
  ];
}
