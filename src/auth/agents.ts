import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { Queryable } from '../db/database';
import { EntityId, type Origin } from './clients';

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
  /** The agent's clock less the server's at its last heartbeat (seconds), from X-Bridge-Timestamp. */
  clock_skew_seconds: number | null;
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
  last_clock_skew_seconds: number | null;
}

const COLUMNS = 'agent_id, facility_id, organization_id, created_at, revoked_at, last_seen_at, last_version, last_clock_skew_seconds';
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
    clock_skew_seconds: row.last_clock_skew_seconds,
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
  origin: Origin = {},
): Promise<{ agent_id: string; agent_key: string; facility_id: string; organization_id: string }> {
  const { facilityId, organizationId } = z.object({ facilityId: EntityId, organizationId: EntityId }).parse(input);
  const agentId = `agt_${randomBytes(12).toString('hex')}`;
  const agentKey = `pak_${randomBytes(32).toString('base64url')}`;
  await db.query('INSERT INTO bridge_agents (agent_id, facility_id, organization_id, key_sha256, demo_seeded) VALUES ($1, $2, $3, $4, $5)', [
    agentId,
    facilityId,
    organizationId,
    sha256(agentKey).toString('hex'),
    origin.demoSeeded === true,
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

/** Records a heartbeat: when the agent was last heard from, which version it runs and how far its clock is off. */
export async function recordHeartbeat(db: Queryable, agentId: string, version: string, clockSkewSeconds: number | null = null): Promise<AgentRecord> {
  const { rows } = await db.query<AgentRow>(
    `UPDATE bridge_agents SET last_seen_at = now(), last_version = $2, last_clock_skew_seconds = $3 WHERE agent_id = $1 RETURNING ${COLUMNS}`,
    [agentId, version, clockSkewSeconds],
  );
  return toRecord(rows[0]!);
}

/** A sync batch as the portal shows it: its counts and the errors of the resources that failed. */
export interface RecentBatch {
  batch_id: string;
  created_at: string;
  counts: { created: number; updated: number; unchanged: number; failed: number } | null;
  errors: string[];
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
/**
 * Self-service (the developer portal): an organisation may bind a client or Bridge agent only to a facility that no
 * other organisation's client or agent is bound to; otherwise it could write that facility's stock or take its
 * Bridge ids first. Operators (`pont clients|agents create`) decide bindings themselves. Run it in the transaction
 * that inserts the binding: the advisory lock makes two organisations' concurrent claims of one facility take turns,
 * and the check, a statement after the lock, sees the other's committed binding.
 */
export async function facilityTakenByAnother(tx: Queryable, facilityId: string, organizationId: string): Promise<boolean> {
  await tx.query(`SELECT pg_advisory_xact_lock(hashtext('pont-facility:' || $1))`, [facilityId]);
  const { rows } = await tx.query(
    `SELECT 1 FROM oauth_clients WHERE facility_id = $1 AND organization_id <> $2
     UNION ALL SELECT 1 FROM bridge_agents WHERE facility_id = $1 AND organization_id <> $2 LIMIT 1`,
    [facilityId, organizationId],
  );
  return rows.length > 0;
}

export class AgentRegistry {
  constructor(private readonly db: Queryable) {}

  /** The agent when `key` is its key and it is not revoked. */
  authenticate(agentId: string, key: string): Promise<ActiveAgent | undefined> {
    return authenticateAgent(this.db, agentId, key);
  }

  /** An organisation's agents (revoked ones too), newest first, each with its last sync batches (newest first). */
  async ofOrganization(organizationId: string, batches = 5): Promise<Array<AgentRecord & { recent_batches: RecentBatch[] }>> {
    const { rows } = await this.db.query<AgentRow & { recent_batches: RecentBatch[] }>(
      `SELECT ${COLUMNS.split(', ').map((c) => `a.${c}`).join(', ')},
              COALESCE((SELECT jsonb_agg(jsonb_build_object('batch_id', b.batch_id, 'created_at', b.created_at, 'counts', b.answer->'counts',
                                                           'errors', (SELECT COALESCE(jsonb_agg(r->>'error'), '[]'::jsonb) FROM jsonb_array_elements(b.answer->'results') r WHERE r->>'status' = 'failed'))
                                        ORDER BY b.created_at DESC)
                        FROM (SELECT * FROM bridge_batches WHERE agent_id = a.agent_id ORDER BY created_at DESC LIMIT $2) b), '[]'::jsonb) AS recent_batches
       FROM bridge_agents a WHERE a.organization_id = $1 ORDER BY a.created_at DESC, a.agent_id`,
      [organizationId, batches],
    );
    return rows.map((row) => ({ ...toRecord(row), recent_batches: row.recent_batches }));
  }

  /** Creates an agent of the organisation; the key is returned here only. */
  create(organizationId: string, facilityId: string) {
    return createAgent(this.db, { organizationId, facilityId });
  }

  /** Revokes the organisation's agent; undefined when it has no such agent. */
  async revoke(organizationId: string, agentId: string): Promise<AgentRecord | undefined> {
    const { rows } = await this.db.query<AgentRow>(
      `UPDATE bridge_agents SET revoked_at = COALESCE(revoked_at, now()) WHERE agent_id = $1 AND organization_id = $2 RETURNING ${COLUMNS}`,
      [agentId, organizationId],
    );
    return rows[0] && toRecord(rows[0]);
  }

  /** Records a heartbeat of an authenticated agent. */
  recordHeartbeat(agentId: string, version: string, clockSkewSeconds?: number): Promise<AgentRecord> {
    return recordHeartbeat(this.db, agentId, version, clockSkewSeconds);
  }
}

/** Whether an X-Bridge-Timestamp (Unix seconds) is within the tolerance of now. */
export function timestampIsFresh(header: string, nowMs = Date.now()): boolean {
  if (!/^\d{1,12}$/.test(header)) return false;
  return Math.abs(Number(header) - nowMs / 1000) <= BRIDGE_TIMESTAMP_TOLERANCE_SECONDS;
}
