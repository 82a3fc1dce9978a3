import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { Queryable } from '../db/database';
import { EntityId } from './clients';

/** Largest accepted distance between X-Bridge-Timestamp and server time (section 5.2). */
export const BRIDGE_TIMESTAMP_TOLERANCE_SECONDS = 300;

export interface AgentRecord {
  agent_id: string;
  facility_id: string;
  organization_id: string | null;
  created_at: string;
  revoked_at: string | null;
  last_seen_at: string | null;
  last_version: string | null;
}

interface AgentRow {
  agent_id: string;
  facility_id: string;
  organization_id: string | null;
  key_sha256: string;
  created_at: Date | string;
  revoked_at: Date | string | null;
  last_seen_at: Date | string | null;
  last_version: string | null;
}

const COLUMNS = 'agent_id, facility_id, organization_id, created_at, revoked_at, last_seen_at, last_version';
const iso = (v: Date | string | null) => (v === null ? null : new Date(v).toISOString());

function toRecord(row: Omit<AgentRow, 'key_sha256'>): AgentRecord {
  return {
    agent_id: row.agent_id,
    facility_id: row.facility_id,
    organization_id: row.organization_id,
    created_at: iso(row.created_at)!,
    revoked_at: iso(row.revoked_at),
    last_seen_at: iso(row.last_seen_at),
    last_version: row.last_version,
  };
}

const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/**
 * Creates an agent key for a facility of an organisation (whose patients' data the agent writes and reads back);
 * the key is printed once and stored only as its SHA-256.
 */
export async function createAgent(
  db: Queryable,
  input: { facilityId: string; organizationId: string },
): Promise<{ agent_id: string; agent_key: string; facility_id: string; organization_id: string }> {
  const { facilityId, organizationId } = z.object({ facilityId: EntityId, organizationId: EntityId }).parse(input);
  const agentId = `agt_${randomBytes(12).toString('hex')}`;
  const agentKey = `pak_${randomBytes(32).toString('base64url')}`;
  await db.query('INSERT INTO bridge_agents (agent_id, facility_id, organization_id, key_sha256) VALUES ($1, $2, $3, $4)', [
    agentId,
    facilityId,
    organizationId,
    sha256(agentKey).toString('hex'),
  ]);
  return { agent_id: agentId, agent_key: agentKey, facility_id: facilityId, organization_id: organizationId };
}

export async function listAgents(db: Queryable): Promise<AgentRecord[]> {
  const { rows } = await db.query<AgentRow>(`SELECT ${COLUMNS} FROM bridge_agents ORDER BY created_at, agent_id`);
  return rows.map(toRecord);
}

export async function revokeAgent(db: Queryable, agentId: string): Promise<AgentRecord | undefined> {
  const { rows } = await db.query<AgentRow>(
    `UPDATE bridge_agents SET revoked_at = COALESCE(revoked_at, now()) WHERE agent_id = $1 RETURNING ${COLUMNS}`,
    [agentId],
  );
  return rows[0] && toRecord(rows[0]);
}

/** Records a heartbeat: when the agent was last heard from and which version it runs. */
export async function recordHeartbeat(db: Queryable, agentId: string, version: string): Promise<AgentRecord> {
  const { rows } = await db.query<AgentRow>(
    `UPDATE bridge_agents SET last_seen_at = now(), last_version = $2 WHERE agent_id = $1 RETURNING ${COLUMNS}`,
    [agentId, version],
  );
  return toRecord(rows[0]!);
}

export interface ActiveAgent {
  agentId: string;
  facilityId: string;
  organizationId?: string;
}

/** The agent when `key` is its key and it is not revoked; unknown agents cost the same comparison. */
export async function authenticateAgent(db: Queryable, agentId: string, key: string): Promise<ActiveAgent | undefined> {
  const { rows } = await db.query<AgentRow>(`SELECT ${COLUMNS}, key_sha256 FROM bridge_agents WHERE agent_id = $1`, [agentId]);
  const row = rows[0];
  const expected = row ? Buffer.from(row.key_sha256, 'hex') : randomBytes(32);
  const matches = timingSafeEqual(expected, sha256(key));
  return row && matches && row.revoked_at === null ? { agentId: row.agent_id, facilityId: row.facility_id, organizationId: row.organization_id ?? undefined } : undefined;
}

/** The Bridge agents table as the access layer and the Bridge routes use it (the CLI uses the functions above). */
export class AgentRegistry {
  constructor(private readonly db: Queryable) {}

  /** The agent when `key` is its key and it is not revoked. */
  authenticate(agentId: string, key: string): Promise<ActiveAgent | undefined> {
    return authenticateAgent(this.db, agentId, key);
  }

  /** Records a heartbeat of an authenticated agent. */
  recordHeartbeat(agentId: string, version: string): Promise<AgentRecord> {
    return recordHeartbeat(this.db, agentId, version);
  }
}

/** Whether an X-Bridge-Timestamp (Unix seconds) is within the tolerance of now. */
export function timestampIsFresh(header: string, nowMs = Date.now()): boolean {
  if (!/^\d{1,12}$/.test(header)) return false;
  return Math.abs(Number(header) - nowMs / 1000) <= BRIDGE_TIMESTAMP_TOLERANCE_SECONDS;
}
