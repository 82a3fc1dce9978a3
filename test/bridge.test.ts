import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgent, revokeAgent } from '../src/auth/agents';
import { createTestClient, startTestServer, type TestServer } from './harness';

let pont: TestServer;
beforeAll(async () => {
  pont = await startTestServer();
});
afterAll(async () => {
  await pont?.close();
});

const HEARTBEAT = '/api/v1/bridge/heartbeat';
const unix = () => Math.floor(Date.now() / 1000);

type Agent = Awaited<ReturnType<typeof createAgent>>;
const newAgent = (facilityId = 'fac-yaounde-1') => createAgent(pont.services.db, { facilityId, organizationId: 'org-yaounde' });

function agentHeaders(agent: Agent, overrides: Record<string, string> = {}): Record<string, string> {
  return { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(unix()), ...overrides };
}

function heartbeat(agent: Agent, headers = agentHeaders(agent), body: unknown = { agent_id: agent.agent_id, facility_id: agent.facility_id, version: '2.4.1' }) {
  return pont.json(HEARTBEAT, { method: 'POST', headers, json: body });
}

describe('bridge heartbeat', () => {
  it('records the last contact and version and answers with the server time', async () => {
    const agent = await newAgent();
    expect(agent.agent_key).toMatch(/^pak_/);
    const before = Date.now();
    const res = await heartbeat(agent);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      status: 'ok',
      agent_id: agent.agent_id,
      facility_id: 'fac-yaounde-1',
      version: '2.4.1',
      server_time: expect.any(String),
      server_timestamp: expect.any(Number),
      config: { sync_interval_seconds: 300, heartbeat_interval_seconds: 300, max_batch_resources: 1000 },
    });
    expect(Math.abs(Date.parse(res.body.server_time) - before)).toBeLessThan(60_000);
    const { rows } = await pont.services.db.query<{ last_version: string; last_seen_at: Date; key_sha256: string }>(
      'SELECT last_version, last_seen_at, key_sha256 FROM bridge_agents WHERE agent_id = $1',
      [agent.agent_id],
    );
    expect(rows[0]!.last_version).toBe('2.4.1');
    expect(new Date(rows[0]!.last_seen_at).toISOString()).toBe(res.body.server_time);
    expect(rows[0]!.key_sha256).toMatch(/^[0-9a-f]{64}$/); // only the hash is kept
    expect(rows[0]!.key_sha256).not.toContain(agent.agent_key);
  });

  it('accepts a timestamp within 300 s either way and refuses one further off', async () => {
    const agent = await newAgent();
    for (const skew of [-290, 290]) {
      expect((await heartbeat(agent, agentHeaders(agent, { 'x-bridge-timestamp': String(unix() + skew) }))).status).toBe(200);
    }
    for (const skew of [-310, 310]) {
      const res = await heartbeat(agent, agentHeaders(agent, { 'x-bridge-timestamp': String(unix() + skew) }));
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ status: 'error', error_code: 'UNAUTHENTICATED', server_time: expect.any(Number) });
    }
  });

  it('refuses missing, wrong, unknown and revoked credentials with 401 in the Error shape', async () => {
    const agent = await newAgent();
    const other = await newAgent();
    const revoked = await newAgent();
    await revokeAgent(pont.services.db, revoked.agent_id);
    const client = await createTestClient(pont, ['bridge_agent:sync']);
    const cases: Array<[string, Record<string, string>]> = [
      ['no headers', {}],
      ['no timestamp', { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key }],
      ['no key', { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-timestamp': String(unix()) }],
      ['timestamp in milliseconds', agentHeaders(agent, { 'x-bridge-timestamp': String(Date.now()) })],
      ['timestamp not a number', agentHeaders(agent, { 'x-bridge-timestamp': 'now' })],
      ['ISO timestamp', agentHeaders(agent, { 'x-bridge-timestamp': new Date().toISOString() })],
      ['wrong key', agentHeaders(agent, { 'x-bridge-agent-key': agent.agent_key.slice(0, -1) + 'x' })],
      ['another agent\'s key', agentHeaders(agent, { 'x-bridge-agent-key': other.agent_key })],
      ['unknown agent', agentHeaders(agent, { 'x-bridge-agent-id': 'agt_000000000000000000000000' })],
      ['revoked agent', agentHeaders(revoked)],
      ['a client bearer token', client.headers],
    ];
    for (const [name, headers] of cases) {
      const res = await heartbeat(agent, headers);
      expect(`${name}: ${res.status}`).toBe(`${name}: 401`);
      expect(res.body).toMatchObject({ status: 'error', error_code: 'UNAUTHENTICATED', message: expect.any(String) });
    }
  });

  it('requires the body to name the authenticated agent and its facility', async () => {
    const agent = await newAgent('fac-a');
    const other = await newAgent('fac-b');
    const wrongAgent = await heartbeat(agent, agentHeaders(agent), { agent_id: other.agent_id, facility_id: 'fac-a', version: '1' });
    expect(wrongAgent.status).toBe(403);
    expect(wrongAgent.body.error_code).toBe('FORBIDDEN');
    const wrongFacility = await heartbeat(agent, agentHeaders(agent), { agent_id: agent.agent_id, facility_id: 'fac-b', version: '1' });
    expect(wrongFacility.status).toBe(403);
    const noVersion = await heartbeat(agent, agentHeaders(agent), { agent_id: agent.agent_id, facility_id: 'fac-a' });
    expect(noVersion.status).toBe(422);
    expect(noVersion.body.error_code).toBe('VALIDATION_FAILED');
    const notJson = await pont.json(HEARTBEAT, { method: 'POST', headers: { ...agentHeaders(agent), 'content-type': 'application/json' }, body: '{' });
    expect(notJson.status).toBe(400);
  });
});
