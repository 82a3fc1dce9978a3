import { z } from 'zod';
import { recordHeartbeat } from '../auth/agents';
import type { AgentPrincipal } from '../auth/principal';
import { ApiError, ErrorCode } from '../http/errors';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../services';

const Heartbeat = z
  .object({
    agent_id: z.string().min(1).max(128),
    facility_id: z.string().min(1).max(64),
    version: z.string().trim().min(1).max(64).describe('Version of the Bridge Agent software'),
  })
  .meta({ id: 'BridgeHeartbeat' });

const HeartbeatAck = z
  .object({
    status: z.literal('ok'),
    agent_id: z.string(),
    facility_id: z.string(),
    version: z.string(),
    server_time: z.string().describe('ISO 8601; agents can correct their clock for X-Bridge-Timestamp'),
    server_timestamp: z.number().int().describe('Unix seconds'),
  })
  .meta({ id: 'BridgeHeartbeatAck' });

export function bridgeRoutes(services: Services): RouteSpec[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/bridge/heartbeat',
      operationId: 'bridgeHeartbeat',
      summary: 'Bridge Agent heartbeat: records last contact and version, answers with the server time',
      description: 'The body must name the authenticated agent and its facility.',
      tags: ['Bridge'],
      security: { kind: 'bridge-agent' },
      body: Heartbeat,
      responses: { 200: { description: 'Recorded', schema: HeartbeatAck } },
      handler: async ({ body, principal }) => {
        const agent = principal as AgentPrincipal;
        if (body.agent_id !== agent.agentId || body.facility_id !== agent.facilityId) {
          throw new ApiError(403, ErrorCode.forbidden, 'agent_id and facility_id must be those of the authenticated agent');
        }
        const record = await recordHeartbeat(services.db, agent.agentId, body.version);
        const now = new Date(record.last_seen_at!);
        return {
          body: {
            status: 'ok',
            agent_id: record.agent_id,
            facility_id: record.facility_id,
            version: body.version,
            server_time: now.toISOString(),
            server_timestamp: Math.floor(now.getTime() / 1000),
          },
        };
      },
    }),
  ];
}
