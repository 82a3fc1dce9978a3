import { z } from 'zod';
import { ApiError, ErrorCode } from '../http/errors';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../services';
import { resetDemo } from './reset';

export function demoRoutes(services: Services): RouteSpec[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/demo/reset',
      operationId: 'resetDemo',
      summary: 'Wipe and seed the demo organisation (development and sandbox only)',
      description:
        'Only where PONT_ENV is development or sandbox (404 in production). Wipes the demo organisation (org-demo) and seeds it afresh: two clients with their credentials (one with every scope), a Bridge agent, five Synthea patients with Health IDs, records and full-record consents, blood units and today\'s payments. Calling it again gives a fresh, equal demo (new credentials). Touches nothing outside the demo organisation. The body is ignored.',
      tags: ['Demo'],
      security: { kind: 'public' },
      body: z.record(z.string(), z.unknown()).optional().describe('Ignored'),
      responses: { 201: { description: 'What was made, with the credentials', schema: z.record(z.string(), z.unknown()) } },
      async handler() {
        if (services.config.environment === 'production') throw new ApiError(404, ErrorCode.notFound, 'No demo in production');
        return { status: 201, body: await resetDemo(services) };
      },
    }),
  ];
}
