import type { Context } from 'koa';
import type Router from '@koa/router';
import { z } from 'zod';
import type { AccessControl, Principal, Security } from '../core/principal';
import type { Channel } from '../policy/index';
import type { FhirRepository } from '../fhir/repository';
import type { FhirService } from '../fhir/service';
import { isResourceType } from '../core/fhir-definitions';
import { readBody } from './body';
import { ApiError, ErrorCode, invalidFields } from './errors';
import type { HandlerResult } from './result';
import { idempotencyKeyOf, requestHash, runIdempotent, type IdempotencyOptions, type SecretFields } from './idempotency';

/**
 * How a route is protected.
 * - public: no credentials.
 * - client: an integration client (Bearer JWT, or X-Client-ID + X-Client-Secret); `scope` is what it
 *   must hold (any one of a list), or a function of the request for routes whose scope depends on it.
 * - bridge-agent: the X-Bridge-Agent-* headers.
 * - patient: a patient's `pat_` token (the mobile routes, and nothing else).
 * - session: a developer-portal session (cookie service_session), with the session's CSRF token on every
 *   state-changing request; `role` is the least role needed (default: viewer to read, developer to change).
 */
type JsonSchema = Record<string, unknown>;
/** A schema for the published document only: zod (validated and published) or plain JSON Schema. */
type Documented = z.ZodType | JsonSchema;

export interface ResponseSpec {
  description: string;
  schema?: Documented;
  /** Defaults to application/json. */
  contentType?: string;
  headers?: Record<string, { description: string; schema: JsonSchema }>;
}

export interface HandlerInput<P, Q, B> {
  ctx: Context;
  params: P;
  query: Q;
  body: B;
  principal: Principal | undefined;
  /**
   * The request's FHIR repository (built from the principal, the channel, the request id and the
   * stated purpose): every read and write of clinical data goes through it. Not on public routes.
   */
  repo: FhirRepository;
}

export type { HandlerResult } from './result';
export type { AccessControl, Security } from '../core/principal';

export interface RouteSpec<P = any, Q = any, B = any> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI form: `/api/v1/connect/patients/verify/{health_id}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  security: Security;
  /** Rate-limit group (defaults to the first tag). */
  group?: string;
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  /** A JSON body validated with this schema. */
  body?: z.ZodType<B>;
  /** Also accept application/x-www-form-urlencoded bodies (OAuth endpoints). */
  acceptForm?: boolean;
  /** Body handled by the route itself (FHIR): documented with this schema, not parsed here. */
  rawBody?: { schema: Documented; contentTypes: string[]; required?: boolean };
  /** Query parameters that the route validates itself, documented here. */
  extraQueryDocs?: Array<{ name: string; description: string; schema: JsonSchema; required?: boolean }>;
  responses: Record<number, ResponseSpec>;
  /** Wraps handler errors into an OperationOutcome instead of the Error shape. */
  fhir?: boolean;
  /**
   * Honours an Idempotency-Key (src/http/idempotency.ts). Default: every authenticated POST under
   * /api/v1/connect and /api/v1/sdk (they create something).
   */
  idempotent?: boolean;
  /** Answer fields that hold a secret: an answer kept for Idempotency-Key replays stores them encrypted. */
  secretFields?: SecretFields;
  handler(input: HandlerInput<P, Q, B>): Promise<HandlerResult | void>;
}

/** Keeps route literals typed at the definition site. */
export function defineRoute<P, Q, B>(spec: RouteSpec<P, Q, B>): RouteSpec<P, Q, B> {
  return spec;
}

/** `/a/{id}/b` -> `/a/:id/b` */
export function koaPath(path: string): string {
  return path.replace(/\{([^}]+)\}/g, ':$1');
}

function parse<T>(schema: z.ZodType<T> | undefined, value: unknown, where: string): T {
  if (!schema) return value as T;
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw invalidFields(result.error.issues.map((i) => ({ field: [where, ...i.path].join('.'), message: i.message })));
}

function firstValues(query: Record<string, unknown>): Record<string, unknown> {
  // Repeated query keys arrive as arrays; schemas for single-valued parameters see the first one.
  return Object.fromEntries(Object.entries(query).map(([k, v]) => [k, Array.isArray(v) ? v[0] : v]));
}

export interface MountOptions {
  access: AccessControl;
  maxBodyBytes: number;
  fhir: FhirService;
  idempotency: IdempotencyOptions;
}

function isIdempotent(route: RouteSpec): boolean {
  return route.idempotent ?? (route.method === 'post' && route.security.kind !== 'public' && /^\/api\/v1\/(connect|sdk)\//.test(route.path));
}

/** Which layer a path belongs to: the repository holds FHIR clients to the FHIR scope table. */
function channelOf(path: string): Channel {
  if (path.startsWith('/api/fhir/')) return 'fhir';
  if (path.startsWith('/api/v1/sdk/')) return 'sdk';
  if (path.startsWith('/api/v1/bridge/')) return 'bridge';
  if (path.startsWith('/api/v1/mobile/')) return 'mobile';
  return 'connect';
}

/** X-Emergency-Reason: break-glass, with a stated reason (a blank one is refused). */
function emergencyReasonOf(ctx: Context): string | undefined {
  if (ctx.get('x-emergency-reason') === '' && !('x-emergency-reason' in ctx.headers)) return undefined;
  const reason = ctx.get('x-emergency-reason').trim();
  if (!reason) throw new ApiError(400, ErrorCode.badRequest, 'X-Emergency-Reason must state the reason for the emergency access');
  if (reason.length > 500) throw new ApiError(400, ErrorCode.badRequest, 'X-Emergency-Reason is at most 500 characters');
  return reason;
}

/** The repository of one request, built on first use (public routes never need one). */
function repositoryOf(ctx: Context, route: RouteSpec, principal: Principal | undefined, fhir: FhirService): () => FhirRepository {
  let repo: FhirRepository | undefined;
  return () => {
    if (!principal) throw new Error(`${route.operationId} is public: it has no repository`);
    return (repo ??= fhir.repository({
      principal,
      channel: channelOf(route.path),
      requestId: ctx.state.requestId as string | undefined,
      address: ctx.ip,
      operation: route.operationId,
      purpose: ctx.get('x-purpose-of-use').trim() || undefined,
      emergencyReason: emergencyReasonOf(ctx),
    }));
  };
}

/** Adds each route to the router: authorize, validate params/query/body, call, write the result. */
export function mountRoutes(router: Router, routes: readonly RouteSpec[], options: MountOptions): void {
  for (const route of routes) {
    router[route.method](koaPath(route.path), async (ctx) => {
      if (route.fhir) ctx.state.fhir = true;
      // `{type}` that is no resource type, on a path that has routes of its own (`DELETE /metadata` matches `DELETE
      // /{type}`): the 405 of that path's methods, before any authentication, as if this route did not match.
      const type = route.fhir ? (ctx.params as Record<string, string>).type : undefined;
      if (type !== undefined && !isResourceType(type)) {
        const allow = allowedMethods(ctx);
        if (allow.length && !allow.includes(ctx.method)) throw new ApiError(405, ErrorCode.methodNotAllowed, 'Method not allowed on this path', { headers: { Allow: allow.join(', ') } });
      }
      const principal = await options.access.authorize(ctx, route.security, route.group ?? route.tags[0] ?? 'default');
      ctx.state.principal = principal;
      const params = parse(route.params, ctx.params, 'path');
      const query = parse(route.query, firstValues(ctx.query), 'query');
      let body: unknown;
      if (route.body) {
        const raw = await readBody(ctx, options.maxBodyBytes, route.acceptForm);
        body = parse(route.body, raw ?? {}, 'body');
      }
      const repo = repositoryOf(ctx, route, principal, options.fhir);
      const handle = () =>
        route.handler({
          ctx,
          params,
          query,
          body,
          principal,
          get repo() {
            return repo();
          },
        });
      const key = isIdempotent(route) ? idempotencyKeyOf(ctx) : undefined;
      const caller = principal?.kind === 'client' ? principal.clientId : principal?.kind === 'bridge-agent' ? `agent:${principal.agentId}` : undefined;
      const result =
        key && caller
          ? // The handler runs in this transaction (its repository calls join it): change and key commit together.
            await repo().transaction((sql) => runIdempotent(sql, { clientId: caller, key, hash: requestHash(ctx, body) }, options.idempotency, handle, route.secretFields))
          : await handle();
      if (!result) return;
      const text = result.body === undefined || typeof result.body === 'string' || Buffer.isBuffer(result.body) ? result.body : JSON.stringify(result.body);
      await result.settles;
      if (result.headers) ctx.set(result.headers);
      ctx.status = result.status ?? 200;
      if (text !== undefined) {
        ctx.type = result.contentType ?? 'application/json';
        // Encoded once: koa would measure a string's bytes for Content-Length and Node measure and encode it again
        // as it writes (three passes over a records answer's ~300 KB, ~1 ms).
        ctx.body = typeof text === 'string' ? Buffer.from(text) : text;
      } else if (ctx.status !== 204 && ctx.status !== 304) ctx.body = ''; // no body (e.g. Prefer: return=minimal), not koa's status text
    });
  }
}

interface MatchedLayer {
  methods: string[];
  captures(path: string): string[];
  params(path: string, captures: string[]): Record<string, string>;
}

/**
 * The methods the path answers, for a 405's Allow: those of the routes it matched, less the FHIR routes whose
 * `{type}` is no resource type (`/metadata` also matches `/{type}`, but POST there is no create).
 */
export function allowedMethods(ctx: Context): string[] {
  const layers = ((ctx as { matched?: MatchedLayer[] }).matched ?? []).filter((l) => l.methods.length);
  const typed = layers.filter((l) => {
    const type = l.params(ctx.path, l.captures(ctx.path)).type;
    return type === undefined || isResourceType(type);
  });
  return [...new Set((typed.length ? typed : layers).flatMap((l) => l.methods))];
}
