import { z } from 'zod';
import type { RouteSpec, Security } from './routes';
import { fhirScopeTable } from '../core/scopes';

type JsonSchema = Record<string, unknown>;

export const ErrorSchema = z
  .object({
    status: z.literal('error'),
    error_code: z.string().describe('Machine code, e.g. VALIDATION_FAILED'),
    message: z.string().describe('Human-readable text'),
  })
  .loose()
  .meta({ id: 'Error', description: 'Error shape of every non-FHIR route (section 2.9).' });

/**
 * zod -> JSON Schema. Schemas named with `.meta({ id })` become shared components: their
 * `$defs` move into `components` (collected here) and references point there.
 */
function toJsonSchema(schema: unknown, io: 'input' | 'output', components: Record<string, JsonSchema>): JsonSchema {
  if (!(schema instanceof z.ZodType)) return schema as JsonSchema;
  const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as JsonSchema;
  const { $schema: _, $defs, ...rest } = JSON.parse(JSON.stringify(json).replaceAll('"#/$defs/', '"#/components/schemas/')) as JsonSchema;
  for (const [name, def] of Object.entries(($defs ?? {}) as Record<string, JsonSchema>)) {
    const { id: _id, ...clean } = def;
    // Two different zod schemas with one id would publish one of them under both uses (one name, one shape).
    // `schema` names it, so that MappingHolder.verify can point at the map whose record shape took the name.
    if (components[name] && JSON.stringify(components[name]) !== JSON.stringify(clean)) {
      throw Object.assign(new Error(`Two different schemas are named ${name} (.meta({ id }))`), { schema: name });
    }
    components[name] = clean;
  }
  return rest;
}

const securitySchemes = {
  BearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: `RS256 JWT from POST /api/v1/connect/auth/token.\n\n${fhirScopeTable()}` },
  ClientId: { type: 'apiKey', in: 'header', name: 'X-Client-ID', description: 'Used together with X-Client-Secret' },
  ClientSecret: { type: 'apiKey', in: 'header', name: 'X-Client-Secret', description: 'Verified against an Argon2id hash' },
  BridgeAgentId: { type: 'apiKey', in: 'header', name: 'X-Bridge-Agent-ID' },
  BridgeAgentKey: { type: 'apiKey', in: 'header', name: 'X-Bridge-Agent-Key', description: 'Checked against a stored SHA-256 hash' },
  BridgeTimestamp: { type: 'apiKey', in: 'header', name: 'X-Bridge-Timestamp', description: 'Unix seconds; at most 300 s from server time' },
  MobileToken: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'opaque pat_…',
    description: "A patient's token (prefix pat_) from POST /api/v1/mobile/auth/token: the mobile routes only, the patient's own data only.",
  },
  SessionAuth: {
    type: 'apiKey',
    in: 'cookie',
    name: 'service_session',
    description:
      'A developer-portal session (sign in at /portal; `__Host-service_session` when served over HTTPS). Every state-changing request also sends the session\'s CSRF token in X-CSRF-Token (GET /api/v1/portal/session gives it).',
  },
};

function securityOf(security: Security): { security: unknown[]; scopeNote?: string } {
  switch (security.kind) {
    case 'public':
      return { security: [] };
    case 'bridge-agent':
      return { security: [{ BridgeAgentId: [], BridgeAgentKey: [], BridgeTimestamp: [] }] };
    case 'patient':
      return { security: [{ MobileToken: [] }] };
    case 'session':
      return { security: [{ SessionAuth: [] }], scopeNote: `Portal role: ${security.role ?? 'viewer to read, developer to change'}.` };
    case 'client': {
      const scope = security.scope;
      const scopes = typeof scope === 'function' || scope === undefined ? [] : Array.isArray(scope) ? scope : [scope];
      return {
        security: [{ BearerAuth: scopes }, { ClientId: scopes, ClientSecret: scopes }],
        scopeNote:
          typeof scope === 'function'
            ? 'Required scope depends on the request (see description).'
            : scopes.length
              ? `Required scope: ${scopes.join(' or ')}.`
              : undefined,
      };
    }
  }
}

function parameters(route: RouteSpec, components: Record<string, JsonSchema>): unknown[] {
  const out: unknown[] = [];
  for (const [where, schema] of [['path', route.params], ['query', route.query]] as const) {
    if (!schema) continue;
    const json = toJsonSchema(schema, 'input', components) as { properties?: Record<string, JsonSchema>; required?: string[] };
    for (const [name, prop] of Object.entries(json.properties ?? {})) {
      const { description, ...rest } = prop as { description?: string };
      out.push({ name, in: where, required: where === 'path' || (json.required ?? []).includes(name), description, schema: rest });
    }
  }
  for (const p of route.extraQueryDocs ?? []) out.push({ in: 'query', required: p.required ?? false, ...p });
  return out;
}

const errorResponse = (description: string, fhir: boolean) => ({
  description,
  content: fhir
    ? { 'application/fhir+json': { schema: { $ref: '#/components/schemas/OperationOutcome' } } }
    : { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

/** The OpenAPI 3.1 document, generated from the same route specs (and zod schemas) the server runs. */
export function buildOpenApi(routes: readonly RouteSpec[], serverUrl: string): JsonSchema {
  const components: Record<string, JsonSchema> = {
    OperationOutcome: {
      type: 'object',
      required: ['resourceType', 'issue'],
      properties: { resourceType: { const: 'OperationOutcome' }, issue: { type: 'array', items: { type: 'object' } } },
    },
  };
  toJsonSchema(ErrorSchema, 'output', components);
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const { security, scopeNote } = securityOf(route.security);
    const responses: Record<string, unknown> = {};
    for (const [status, r] of Object.entries(route.responses)) {
      responses[status] = {
        description: r.description,
        ...(r.headers ? { headers: r.headers } : {}),
        ...(r.schema ? { content: { [r.contentType ?? 'application/json']: { schema: toJsonSchema(r.schema, 'output', components) } } } : {}),
      };
    }
    const fhir = route.fhir ?? false;
    const defaults: Record<string, string> = { '400': 'Bad request', '422': 'Validation failed', '500': 'Server error' };
    if (route.security.kind !== 'public') Object.assign(defaults, { '401': 'Unauthenticated', '403': 'Forbidden', '429': 'Too many requests' });
    for (const [status, description] of Object.entries(defaults)) responses[status] ??= errorResponse(description, fhir);

    const requestBody = route.body
      ? {
          required: true,
          content: Object.fromEntries(
            ['application/json', ...(route.acceptForm ? ['application/x-www-form-urlencoded'] : [])].map((t) => [
              t,
              { schema: toJsonSchema(route.body, 'input', components) },
            ]),
          ),
        }
      : route.rawBody
        ? {
            required: route.rawBody.required ?? true,
            content: Object.fromEntries(route.rawBody.contentTypes.map((t) => [t, { schema: toJsonSchema(route.rawBody!.schema, 'input', components) }])),
          }
        : undefined;

    paths[route.path] ??= {};
    paths[route.path][route.method] = {
      operationId: route.operationId,
      summary: route.summary,
      description: [route.description, scopeNote].filter(Boolean).join('\n\n') || undefined,
      tags: route.tags,
      security,
      parameters: parameters(route, components),
      ...(requestBody ? { requestBody } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Pont healthcare interoperability service',
      version: '1.2.0',
      description:
        'Connect, FHIR R4, SDK and Bridge interface. Errors use the Error shape; FHIR routes return OperationOutcome.',
    },
    servers: [{ url: serverUrl }],
    paths,
    components: {
      securitySchemes,
      schemas: components,
    },
  };
}
