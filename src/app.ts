import Koa from 'koa';
import compress from 'koa-compress';
import helmet from 'koa-helmet';
import Router from '@koa/router';
import { randomUUID } from 'node:crypto';
import { ApiError, ErrorCode, errorBody, operationOutcome } from './http/errors';
import { clientAddressMiddleware } from './http/client-address';
import { isContention, sqlState } from './db/database';
import { buildOpenApi } from './http/openapi';
import { prepareDocument, type PreparedDocument } from './http/prepared-document';
import { allowedMethods, mountRoutes, type RouteSpec } from './http/routes';
import type { Services } from './http/services';
import { systemRoutes } from './routes/system';
import { fhirRoutes } from './routes/fhir';
import { FHIR_BASE_PATH } from './fhir/service';
import { authRoutes } from './routes/auth';
import { patientRoutes } from './routes/patients';
import { webhookRoutes } from './routes/webhooks';
import { bridgeRoutes } from './routes/bridge';
import { consentRoutes } from './routes/consents';
import { recordRoutes } from './routes/records';
import { inventoryRoutes } from './routes/inventory';
import { demoRoutes } from './routes/demo';
import { portalRoutes } from './routes/portal';
import { portalPages } from './portal/pages';
import { httpRequests, since } from './metrics';
import type { Logger } from './log';
import { bulkExportRoutes } from './routes/bulk';
import { terminologyRoutes } from './routes/terminology';
import { subscriptionRoutes } from './routes/subscriptions';


/** Every route of the service, in one list: the router and the OpenAPI document are both built from it. */
export function allRoutes(services: Services): RouteSpec[] {
  // Built with the maps (the record types and their shapes are theirs), so checked with them before a start or a
  // reload goes on (MappingHolder.verify); made into its answer once per public URL, which a `PORT=0` start learns
  // only once it listens.
  const built = services.mappings.derived(() => ({ document: buildOpenApi(routes, ''), answers: new Map<string, PreparedDocument>() }));
  const document = (): PreparedDocument => {
    const { document, answers } = built();
    const url = services.config.publicUrl;
    let answer = answers.get(url);
    if (!answer) answers.set(url, (answer = prepareDocument({ ...document, servers: [{ url }] })));
    return answer;
  };
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
    // Before the FHIR routes: `$export` and `$export-status/{id}` would match `/{type}` and `/{type}/{id}`.
    ...bulkExportRoutes(services),
    // Before the FHIR routes too: `CodeSystem/$lookup` would match `/{type}/{id}`.
    ...terminologyRoutes(services),
    // Before the FHIR routes too: `Subscription/{id}/$status` would match `/{type}/{id}/…`, `SubscriptionTopic` `/{type}`.
    ...subscriptionRoutes(services),
    ...fhirRoutes(services),
    ...portalRoutes(services),
  ];
  return routes;
}

/**
 * allRoutes, once what follows from the maps (the record schemas, the OpenAPI document) is built for the active maps
 * (MappingHolder.verify): a map it cannot take stops the start here, and `pont mappings check` (src/server.ts) runs the same.
 */
export function verifiedRoutes(services: Services): RouteSpec[] {
  const routes = allRoutes(services);
  services.mappings.verify();
  return routes;
}

/** Connection failures and server shutdowns (SQLSTATE class 08, 57P01-57P03): nothing the client did wrong. */
function databaseUnavailable(err: unknown): boolean {
  const code = sqlState(err) ?? '';
  return code.startsWith('08') || /^57P0[123]$/.test(code) || /Connection terminated|ECONNREFUSED/.test(String((err as Error)?.message));
}

/** The template of the route a request matched (`/api/fhir/R4/:type/:id`), or `(no route)`. */
const routeOf = (ctx: Koa.Context) => (ctx as { _matchedRoute?: string })._matchedRoute ?? '(no route)';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The OAuth token endpoint (interface §4.4). */
const TOKEN_PATH = '/api/v1/connect/auth/token';

export function createApp(services: Services): Koa {
  const { config, log } = services;
  const app = new Koa();
  // One version of the maps per request, from start to end, whatever a reload swaps in meanwhile.
  app.use((_ctx, next) => services.mappings.pin(next));
  // The caller's address (ctx.ip): the socket's, or behind proxies the X-Forwarded-For entry PONT_TRUST_PROXY says.
  app.use(clientAddressMiddleware(config.trustProxy));
  const router = new Router();
  const routes = verifiedRoutes(services);
  mountRoutes(router, routes, {
    access: services.access,
    maxBodyBytes: config.maxBodyBytes,
    fhir: services.fhir,
    idempotency: { ttlMs: config.idempotencyTtlMs },
  });

  // Request id: the caller's X-Request-ID when well-formed, else a new one; echoed, and bound to the request's logger.
  app.use(async (ctx, next) => {
    const given = ctx.get('x-request-id');
    ctx.state.requestId = REQUEST_ID.test(given) ? given : randomUUID();
    ctx.set('X-Request-ID', ctx.state.requestId);
    const requestLog = log.child({ request_id: ctx.state.requestId });
    ctx.state.log = requestLog;
    const started = performance.now();
    try {
      await next();
    } finally {
      // The route's template, never the path itself (it may hold a Health ID): in the log line and the metrics.
      const route = routeOf(ctx);
      const seconds = since(started);
      httpRequests.observe({ method: ctx.method, route, status: ctx.status }, seconds);
      const principal = ctx.state.principal as { clientId?: string; agentId?: string; organizationId?: string } | undefined;
      requestLog.info('request', {
        method: ctx.method,
        route,
        status: ctx.status,
        ms: Math.round(seconds * 10_000) / 10,
        client_id: principal?.clientId ?? principal?.agentId ?? null,
        org: principal?.organizationId ?? null,
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
            : isContention(thrown) // still losing to concurrent transactions after retryContention's runs
              ? new ApiError(503, ErrorCode.unavailable, 'Too many concurrent changes of the same data; retry shortly', { headers: { 'Retry-After': '1' } })
              : new ApiError(500, ErrorCode.internal, `Internal error (request id ${ctx.state.requestId})`);
      if (!(thrown instanceof ApiError)) {
        const fields = { method: ctx.method, route: routeOf(ctx), error: thrown instanceof Error ? thrown.stack : String(thrown) };
        // A 503 (the database away, or still losing to concurrent transactions) is an answer the service means to
        // give under load: a warning that says which, not an error an operator would hunt as a defect.
        if (err.status === 500) (ctx.state.log as Logger).error('unhandled error', fields);
        else (ctx.state.log as Logger).warn(err.message, fields);
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
  // The developer portal's pages (/portal): HTML, with their own content security policy (src/portal/pages.ts).
  app.use(portalPages(services).routes());
  app.use(router.routes());
  // A path whose routes take other methods: 405 with the Allow header (RFC 9110 §15.5.6), in the documented shape.
  const methodCheck = router.allowedMethods();
  app.use(async (ctx, next) => {
    await methodCheck(ctx as Parameters<typeof methodCheck>[0], next);
    if (ctx.status !== 405 && ctx.status !== 501) return;
    const message = ctx.status === 405 ? 'Method not allowed on this path' : 'Method not supported';
    throw new ApiError(405, ErrorCode.methodNotAllowed, message, { headers: { Allow: allowedMethods(ctx).join(', ') } });
  });
  return app;
}

