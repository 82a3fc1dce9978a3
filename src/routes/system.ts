import { z } from 'zod';
import { preparedAnswer, type PreparedDocument } from '../http/prepared-document';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../http/services';

const Health = z.object({
  status: z.enum(['ok', 'unavailable']),
  checks: z.record(z.string(), z.string()).optional(),
  /** Which maps this process runs: a hash of the mapping files, changed by a successful reload (mappings/README.md). */
  mappings_version: z.string().optional(),
});

export function systemRoutes(services: Services, openApi: () => PreparedDocument): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      path: '/healthz',
      operationId: 'healthz',
      summary: 'Liveness: the process is up',
      tags: ['Operational Flow'],
      security: { kind: 'public' },
      responses: { 200: { description: 'Alive', schema: Health } },
      handler: async () => ({ body: { status: 'ok' } }),
    }),
    defineRoute({
      method: 'get',
      path: '/readyz',
      operationId: 'readyz',
      summary: 'Readiness: the database answers and FHIR definitions are loaded; the version of the maps in use',
      tags: ['Operational Flow'],
      security: { kind: 'public' },
      responses: { 200: { description: 'Ready', schema: Health }, 503: { description: 'Not ready', schema: Health } },
      handler: async () => {
        const checks: Record<string, string> = {};
        try {
          await services.checkDatabase();
          checks.database = 'ok';
        } catch (err) {
          // The detail is for the operator's log, not for an anonymous caller.
          services.log.error('readiness: the database does not answer', { error: String(err) });
          checks.database = 'failing';
        }
        const ok = Object.values(checks).every((v) => v === 'ok');
        return { status: ok ? 200 : 503, body: { status: ok ? 'ok' : 'unavailable', checks, mappings_version: services.mappings.version } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/openapi.json',
      operationId: 'openapi',
      summary: 'This OpenAPI 3.1 document',
      tags: ['Discovery'],
      security: { kind: 'public' },
      responses: { 200: { description: 'OpenAPI 3.1 document', schema: { type: 'object' } }, 304: { description: 'Not modified: If-None-Match holds its ETag' } },
      handler: async ({ ctx }) => preparedAnswer(ctx, openApi(), 'application/json'),
    }),
  ];
}
