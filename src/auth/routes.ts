import type { Context } from 'koa';
import { z } from 'zod';
import { ApiError, ErrorCode, notFound, type ErrorCodeValue } from '../http/errors';
import { readBody } from '../http/body';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../services';
import { rotateClientSecret, SecretRotationRequest, type ActiveClient } from './clients';
import type { ClientPrincipal } from './principal';
import { SCOPES, type Scope } from './scopes';

export const TOKEN_PATH = '/api/v1/connect/auth/token';
export const INTROSPECTION_PATH = '/api/v1/connect/auth/introspect';
export const JWKS_PATH = '/.well-known/jwks.json';
export const METADATA_PATH = '/.well-known/oauth-authorization-server';
export const ROTATE_SECRET_PATH = '/api/v1/connect/auth/clients/{client_id}/rotate-secret';

const FORM_AND_JSON = ['application/x-www-form-urlencoded', 'application/json'];
/** RFC 6749 §5.1: token responses must not be cached. */
const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };

const TokenRequest = z
  .object({
    grant_type: z.literal('client_credentials'),
    client_id: z.string().describe('Integration client id (or send it with HTTP Basic)'),
    client_secret: z.string().describe('Integration client secret (or send it with HTTP Basic)'),
    scope: z.string().optional().describe('Space-separated scopes to narrow the grant to; default: all of the client\'s scopes'),
  })
  .meta({ id: 'TokenRequest', description: 'Section 2.4. Also accepted form-encoded, with the client credentials in HTTP Basic (RFC 6749 §2.3.1).' });

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

/** The scopes to grant: all of the client's, or the requested subset (any other scope is refused). */
function grantedScopes(client: ActiveClient, requested: string | undefined): Scope[] {
  const asked = [...new Set((requested ?? '').split(' ').filter(Boolean))];
  if (!asked.length) return client.scopes;
  const refused = asked.filter((s) => !client.scopes.includes(s as Scope));
  if (refused.length) throw oauthError('invalid_scope', `The client is not allowed the scope(s): ${refused.join(' ')}`);
  return asked as Scope[];
}

export function authRoutes(services: Services): RouteSpec[] {
  const { access, config } = services;
  const url = (path: string) => `${access.issuer}${path}`;

  const oauthErrors = {
    400: { description: 'invalid_request, unsupported_grant_type or invalid_scope', schema: OAuthErrorSchema },
    401: { description: 'invalid_client: unknown client, wrong secret or revoked client (answered alike)', schema: OAuthErrorSchema },
    429: { description: 'Too many requests for this client, or too many failed client authentications from this address' },
  };

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
          token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
          introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'bearer'],
          service_documentation: url('/api/openapi.json'),
        },
      }),
    }),
    defineRoute({
      method: 'post',
      path: TOKEN_PATH,
      operationId: 'issueToken',
      summary: 'OAuth 2.0 client-credentials grant: an RS256 access token for 3600 s',
      description:
        'Client authentication: `client_id` + `client_secret` in the body (JSON or form) or HTTP Basic. ' +
        'Optional `scope` narrows the grant; a scope the client lacks fails with invalid_scope.',
      tags: ['Connect'],
      group: 'token',
      security: { kind: 'public' },
      rawBody: { schema: TokenRequest, contentTypes: FORM_AND_JSON },
      responses: { 200: { description: 'Token issued', schema: TokenResponseSchema }, ...oauthErrors },
      handler: async ({ ctx }) => {
        const body = await readOAuthBody(ctx, config.maxBodyBytes);
        const credentials = clientCredentials(ctx, body);
        if (!body.grant_type) throw oauthError('invalid_request', 'grant_type is required (client_credentials)');
        if (body.grant_type !== 'client_credentials') {
          throw oauthError('unsupported_grant_type', `grant_type ${body.grant_type} is not supported; use client_credentials`);
        }
        if (!credentials) throw invalidClient('Client authentication required: client_id and client_secret, or HTTP Basic');
        const client = await access.checkClientSecret(ctx, credentials.clientId, credentials.secret);
        if (!client) throw invalidClient();
        await access.limits.consume('token', `client:${client.clientId}`);
        const token = await access.tokens.issue(client, grantedScopes(client, body.scope));
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
            scope: verified.scopes.join(' '),
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
      },
      secretFields: { fields: ['client_secret'], key: config.webhooks.secretKey },
      handler: async ({ params, body, principal, repo }) => {
        const caller = principal as ClientPrincipal;
        if (caller.clientId !== params.client_id) throw notFound(`No client ${params.client_id} for this caller`);
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
