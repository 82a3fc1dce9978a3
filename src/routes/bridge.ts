import { z } from 'zod';
import { syncBatch } from '../bridge/sync';
import type { AgentPrincipal } from '../core/principal';
import { ApiError, ErrorCode } from '../http/errors';
import { ErrorSchema } from '../http/openapi';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../http/services';

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
    config: z
      .object({
        sync_interval_seconds: z.number().int().describe('How often to send what changed (PONT_BRIDGE_SYNC_INTERVAL)'),
        heartbeat_interval_seconds: z.number().int().describe('How often to send a heartbeat'),
        max_batch_resources: z.number().int().describe('The most resources one sync batch may hold (more: 413)'),
      })
      .describe('Settings the agent applies from now on'),
  })
  .meta({ id: 'BridgeHeartbeatAck' });

/** The most resources one sync batch may hold. */
export const MAX_BATCH_RESOURCES = 1000;

const SyncBatch = z
  .object({
    batch_id: z.string().regex(/^[\x21-\x7e]{1,128}$/, 'must be 1-128 printable ASCII characters').describe("The agent's id of the batch: a resend under the same id gets the same answer"),
    resources: z.array(z.unknown()).min(1).describe(`FHIR R4 resources, each with the facility system's id; at most ${MAX_BATCH_RESOURCES}`),
    groups: z
      .array(z.array(z.number().int().min(0).max(MAX_BATCH_RESOURCES - 1)).min(2).max(MAX_BATCH_RESOURCES))
      .max(MAX_BATCH_RESOURCES / 2) // two resources a group at least, each in one
      .optional()
      .describe(
        'Resources written together or not at all, each group a run of consecutive indexes in `resources` (an HL7 message\'s ' +
          'resources): when one of a group is refused, the others are `failed` too. An index is in one group at most; a resource in none is written on its own.',
      ),
  })
  .strict()
  .superRefine((batch, ctx) => {
    const problem = groupsProblem(batch.groups ?? [], batch.resources.length);
    if (problem) ctx.addIssue({ code: 'custom', path: ['groups', ...problem.path], message: problem.message });
  })
  .meta({ id: 'BridgeSyncBatch' });

const SyncResult = z
  .object({
    batch_id: z.string(),
    agent_id: z.string(),
    facility_id: z.string(),
    counts: z.object({ created: z.number(), updated: z.number(), unchanged: z.number(), failed: z.number() }),
    results: z.array(
      z.object({
        index: z.number().int(),
        status: z.enum(['created', 'updated', 'unchanged', 'failed']),
        resource_type: z.string().nullable(),
        id: z.string().nullable().describe("Pont's id of the resource"),
        source_id: z.string().nullable().describe("The agent's id, as sent"),
        error: z.string().nullable(),
      }),
    ),
  })
  .meta({ id: 'BridgeSyncResult' });

/**
 * The first thing wrong with a batch's groups, if any: each must name resources of the batch, each once, in a run of
 * consecutive indexes (so that writing a group where its first resource is keeps the batch's order for every other
 * resource: two versions of one resource, one inside a group and one outside it, are written in the order sent).
 */
function groupsProblem(groups: number[][], resources: number): { path: number[]; message: string } | undefined {
  const grouped = new Set<number>();
  for (const [g, group] of groups.entries()) {
    for (const [n, index] of group.entries()) {
      if (index >= resources) return { path: [g, n], message: `resources[${index}] is past the last resource (${resources - 1})` };
      if (group.indexOf(index) !== n) return { path: [g, n], message: `resources[${index}] is in this group twice` };
      if (grouped.has(index)) return { path: [g, n], message: `resources[${index}] is in another group already` };
      grouped.add(index);
    }
    if (Math.max(...group) - Math.min(...group) + 1 !== group.length) return { path: [g], message: 'is not a run of consecutive resources (a group is one, in any order)' };
  }
  return undefined;
}

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
      handler: async ({ ctx, body, principal }) => {
        const agent = principal as AgentPrincipal;
        if (body.agent_id !== agent.agentId || body.facility_id !== agent.facilityId) {
          throw new ApiError(403, ErrorCode.forbidden, 'agent_id and facility_id must be those of the authenticated agent');
        }
        // The agent's clock against ours (its timestamp passed the freshness check, so it is a number), for the portal.
        const skew = Number(ctx.get('x-bridge-timestamp')) - Math.floor(Date.now() / 1000);
        const record = await services.access.agents.recordHeartbeat(agent.agentId, body.version, skew);
        const now = new Date(record.last_seen_at!);
        return {
          body: {
            status: 'ok',
            agent_id: record.agent_id,
            facility_id: record.facility_id,
            version: body.version,
            server_time: now.toISOString(),
            server_timestamp: Math.floor(now.getTime() / 1000),
            config: {
              sync_interval_seconds: Math.round(services.config.bridgeSyncIntervalMs / 1000),
              heartbeat_interval_seconds: Math.round(services.config.bridgeSyncIntervalMs / 1000),
              max_batch_resources: MAX_BATCH_RESOURCES,
            },
          },
        };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/bridge/sync',
      operationId: 'bridgeSync',
      summary: "Sync a batch of FHIR resources from the agent's facility",
      description:
        "docs/integrators.md \"Bridge Agent protocol\". Each resource is validated and written on its own (or with its group, all or nothing), under Pont's id for its facility id; an identical resend changes nothing. 200 with one result per resource, failures included (they raise bridge_agent.sync_failed). The same batch_id with the same resources answers the first answer again (Idempotent-Replayed: true); with others, 409.",
      tags: ['Bridge'],
      security: { kind: 'bridge-agent' },
      body: SyncBatch,
      responses: {
        200: { description: 'One result per resource', schema: SyncResult },
        409: { description: 'batch_id already used for other content (CONFLICT)', schema: ErrorSchema },
        413: { description: `More than ${MAX_BATCH_RESOURCES} resources (PAYLOAD_TOO_LARGE)`, schema: ErrorSchema },
      },
      handler: async ({ body, principal, repo }) => {
        if (body.resources.length > MAX_BATCH_RESOURCES)
          throw new ApiError(413, ErrorCode.payloadTooLarge, `A batch holds at most ${MAX_BATCH_RESOURCES} resources; this one has ${body.resources.length}: split it`);
        const agent = principal as AgentPrincipal;
        if (!agent.organizationId) throw new ApiError(403, ErrorCode.forbidden, 'This agent belongs to no organisation: create a new one with `pont agents create --org ORG --facility FAC`');
        const { answer, replayed } = await syncBatch(repo, agent, body.batch_id, body.resources, body.groups);
        return { body: answer, headers: replayed ? { 'Idempotent-Replayed': 'true' } : ({} as Record<string, string>) };
      },
    }),
  ];
}
