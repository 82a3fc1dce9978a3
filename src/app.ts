import Koa from 'koa';
import compress from 'koa-compress';
import helmet from 'koa-helmet';
import Router from '@koa/router';
import { randomUUID } from 'node:crypto';
import { ApiError, ErrorCode, errorBody, operationOutcome } from './http/errors';
import { clientAddressMiddleware } from './http/client-address';
import { sqlState } from './db/database';
import { buildOpenApi } from './http/openapi';
import { mountRoutes, type RouteSpec } from './http/routes';
import type { Services } from './services';
import { systemRoutes } from './system/routes';
import { fhirRoutes } from './fhir/routes';
import { FHIR_BASE_PATH } from './fhir/service';
import { isResourceType } from './fhir/definitions';
import { authRoutes } from './auth/routes';
import { patientRoutes } from './patients/routes';
import { webhookRoutes } from './webhooks/routes';
import { bridgeRoutes } from './bridge/routes';
import { consentRoutes } from './consents/routes';
import { recordRoutes } from './records/routes';
import { inventoryRoutes } from './inventory/routes';
import { demoRoutes } from './demo/routes';


/** Every route of the service, in one list: the router and the OpenAPI document are both built from it. */
export function allRoutes(services: Services): RouteSpec[] {
  let openApi: unknown;
  // Built on first request: the public URL is known only once the server listens.
  const document = () => (openApi ??= buildOpenApi(routes, services.config.publicUrl));
  const routes: RouteSpec[] = [
    ...systemRoutes(services, document),
    ...authRoutes(services),
    ...patientRoutes(services),
    ...consentRoutes(services),
    ...recordRoutes(services),
    ...inventoryRoutes(services),
    ...demoRoutes(services),
    ...webhookRoutes(services),
    ...bridgeRoutes(services),
    ...fhirRoutes(services),
  ];
  return routes;
}

/** Connection failures and server shutdowns (SQLSTATE class 08, 57P01-57P03): nothing the client did wrong. */
function databaseUnavailable(err: unknown): boolean {
  const code = sqlState(err) ?? '';
  return code.startsWith('08') || /^57P0[123]$/.test(code) || /Connection terminated|ECONNREFUSED/.test(String((err as Error)?.message));
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The OAuth token endpoint (interface §4.4). */
const TOKEN_PATH = '/api/v1/connect/auth/token';

export function createApp(services: Services): Koa {
  const { config, log } = services;
  const app = new Koa();
  // The caller's address (ctx.ip): the socket's, or behind proxies the X-Forwarded-For entry PONT_TRUST_PROXY says.
  app.use(clientAddressMiddleware(config.trustProxy));
  const router = new Router();
  mountRoutes(router, allRoutes(services), {
    access: services.access,
    maxBodyBytes: config.maxBodyBytes,
    fhir: services.fhir,
    idempotency: { ttlMs: config.idempotencyTtlMs },
  });

  // Request id: the caller's X-Request-ID when well-formed, else a new one; echoed and logged.
  app.use(async (ctx, next) => {
    const given = ctx.get('x-request-id');
    ctx.state.requestId = REQUEST_ID.test(given) ? given : randomUUID();
    ctx.set('X-Request-ID', ctx.state.requestId);
    const started = performance.now();
    try {
      await next();
    } finally {
      // One line per request: the route's template, never the path itself (it may hold a Health ID).
      const principal = ctx.state.principal as { clientId?: string; agentId?: string } | undefined;
      log.info('request', {
        request_id: ctx.state.requestId,
        method: ctx.method,
        route: (ctx as { _matchedRoute?: string })._matchedRoute ?? '(no route)',
        status: ctx.status,
        ms: Math.round((performance.now() - started) * 10) / 10,
        client_id: principal?.clientId ?? principal?.agentId ?? null,
      });
    }
  });

  // Answers under /api/ carry patient data or credentials: no cache may keep them. Set before the route runs, so
  // error answers have it too; a route with a public document sets its own (the CapabilityStatement).
  app.use(async (ctx, next) => {
    if (ctx.path.startsWith('/api/')) ctx.set('Cache-Control', 'no-store');
    await next();
  });

  // Security headers for an API that serves no pages, and compressed answers (FHIR bundles compress ~10x).
  app.use(helmet({ contentSecurityPolicy: { directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } } }));
  app.use(compress({ threshold: 1024 }));

  // Errors: one place turns every failure into the Error shape, or an OperationOutcome on FHIR routes.
  app.use(async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new ApiError(404, ErrorCode.notFound, `No route for ${ctx.method} ${ctx.path}`);
      }
    } catch (thrown) {
      const err =
        thrown instanceof ApiError
          ? thrown
          : databaseUnavailable(thrown)
            ? new ApiError(503, ErrorCode.unavailable, 'The database is unavailable; retry shortly', { headers: { 'Retry-After': '5' } })
            : new ApiError(500, ErrorCode.internal, `Internal error (request id ${ctx.state.requestId})`);
      if (!(thrown instanceof ApiError)) {
        log.error('unhandled error', {
          request_id: ctx.state.requestId,
          method: ctx.method,
          path: ctx.path,
          error: thrown instanceof Error ? thrown.stack : String(thrown),
        });
      }
      ctx.status = err.status;
      if (err.options.headers) ctx.set(err.options.headers);
      if (ctx.path.startsWith(FHIR_BASE_PATH)) {
        ctx.type = 'application/fhir+json';
        ctx.body = JSON.stringify(operationOutcome(err));
      } else {
        ctx.type = 'application/json';
        ctx.body = JSON.stringify(errorBody(err));
      }
    }
  });

  // PostgreSQL cannot store NUL characters, and no identifier or search value contains one.
  app.use(async (ctx, next) => {
    let url: string;
    try {
      url = decodeURIComponent(ctx.url);
    } catch {
      const message = 'Malformed percent-encoding in the URL';
      // The token endpoint answers errors in RFC 6749's shape too (section 5.2), whatever went wrong.
      const oauth = ctx.path === TOKEN_PATH ? { extra: { error: 'invalid_request', error_description: message } } : undefined;
      throw new ApiError(400, ErrorCode.badRequest, message, oauth);
    }
    if (url.includes('\u0000')) throw new ApiError(400, ErrorCode.badRequest, 'NUL characters are not allowed in the URL');
    await next();
  });
  app.use(router.routes());
  // A path whose routes take other methods: 405 with the Allow header (RFC 9110 §15.5.6), in the documented shape.
  const methodCheck = router.allowedMethods();
  app.use(async (ctx, next) => {
    await methodCheck(ctx as Parameters<typeof methodCheck>[0], next);
    if (ctx.status !== 405 && ctx.status !== 501) return;
    const message = ctx.status === 405 ? 'Method not allowed on this path' : 'Method not supported';
    throw new ApiError(405, ErrorCode.methodNotAllowed, message, { headers: { Allow: allowedMethods(ctx) } });
  });
  return app;
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
function allowedMethods(ctx: Koa.Context): string {
  const layers = ((ctx as { matched?: MatchedLayer[] }).matched ?? []).filter((l) => l.methods.length);
  const typed = layers.filter((l) => {
    const type = l.params(ctx.path, l.captures(ctx.path)).type;
    return type === undefined || isResourceType(type);
  });
  return [...new Set((typed.length ? typed : layers).flatMap((l) => l.methods))].join(', ');
}
