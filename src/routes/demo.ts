import { z } from 'zod';
import { DEMO_RESET_GROUP } from '../config';
import { ApiError, ErrorCode } from '../http/errors';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../http/services';
import { ReplacedSchema, resetDemo } from '../demo/reset';

export function demoRoutes(services: Services): RouteSpec[] {
  const { environment } = services.config;
  return [
    defineRoute({
      method: 'post',
      path: '/api/demo/reset',
      operationId: 'resetDemo',
      summary: 'Wipe and seed the demo organisation (development and sandbox only)',
      description:
        'Only where PONT_ENV is development or sandbox (404 in production). In development it is open to any caller; in sandbox it needs an operator client (created with `pont clients create --all-patients`; any other client: 403). ' +
        `Rate-limited per source address (group \`${DEMO_RESET_GROUP}\`, default 5 per minute: 429), and one reset runs at a time: a reset asked for while another runs is answered 409 CONFLICT with Retry-After. ` +
        'Replaces the demo organisation (org-demo) in one transaction of about a second. It removes the FHIR resources the demo wrote, its clients (every token they were issued is refused from the next request), its Bridge agent, its patients\' mobile tokens, and the events of the demo with their webhook deliveries; it keeps the demo\'s audit trail and its webhook subscriptions (an integrator\'s own set-up: they hear the fresh demo\'s events like any write\'s). `replaced` counts what it removed and the subscriptions it kept. ' +
        'It then seeds two clients with their credentials (one with the scopes a sandbox integrator needs: every scope but audit:read, emergency:access and consents:write), a Bridge agent, five Synthea patients with Health IDs, records and full-record consents to the demo organisation, blood units, pharmacy stock and today\'s payments; `seeded` counts them. Calling it again gives a fresh, equal demo (new credentials). Touches nothing outside the demo organisation. The body is ignored.',
      tags: ['Demo'],
      // Development: open (its secrets are public anyway); sandbox: an operator's credentials.
      security: environment === 'sandbox' ? { kind: 'client' } : { kind: 'public' },
      body: z.record(z.string(), z.unknown()).optional().describe('Ignored'),
      responses: {
        201: { description: 'What it removed (`replaced`) and what it made, with the credentials', schema: z.object({ replaced: ReplacedSchema }).catchall(z.unknown()) },
        409: { description: 'Another reset is running (CONFLICT); retry after Retry-After seconds' },
        429: { description: 'Too many resets from this address (RATE_LIMITED)' },
      },
      async handler({ ctx, principal }) {
        if (environment === 'production') throw new ApiError(404, ErrorCode.notFound, 'No demo in production');
        if (environment === 'sandbox' && !(principal?.kind === 'client' && principal.allPatients))
          throw new ApiError(403, ErrorCode.forbidden, 'The demo reset needs an operator client (pont clients create --all-patients)');
        return { status: 201, body: await resetDemo(services, () => services.access.limits.consume(DEMO_RESET_GROUP, `ip:${ctx.ip}`)) };
      },
    }),
  ];
}
