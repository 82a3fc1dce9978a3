import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { exportJWK, generateKeyPair } from 'jose';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createAgent } from '../src/auth/agents';
import { createKeyClient, keyClientInput } from '../src/auth/clients';
import { ConsentService } from '../src/consents/service';
import { hashKey } from '../src/core/hash';
import type { ClientPrincipal } from '../src/core/principal';
import { SCOPES } from '../src/core/scopes';
import { BLOOD_COMPONENTS, BLOOD_GROUPS } from '../src/inventory/blood';
import type { Queryable } from '../src/db/database';
import { listMigrations, migrate } from '../src/db/migrate';
import { openDatabase } from '../src/db/open';
import { backend, createPortalPerson, createScratchDatabase, createTestClient, startTestServer, type TestServer } from './harness';
import { startReceiver } from './webhooks-support';

/** The sandbox a newcomer uses: one call, then a complete integrator flow with the credentials it answers. */
let pont: TestServer;
beforeAll(async () => {
  // More resets than the default limit (5 a minute per address), which the sandbox tests below hold to.
  pont = await startTestServer({ PONT_RATE_LIMITS: 'demo-reset=100/60' });
});
afterAll(async () => {
  await pont?.close();
});

const reset = () => pont.json('/api/demo/reset', { method: 'POST', json: {} });
async function tokenOf(client: { client_id: string; client_secret: string }) {
  const res = await pont.json('/api/v1/connect/auth/token', { method: 'POST', json: { grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret } });
  return res.status === 200 ? { authorization: `Bearer ${res.body.access_token}` } : undefined;
}
/** The demo's data; its audit trail (AuditEvents it authors) grows with every use and outlives resets. */
const demoCounts = async () =>
  (await pont.services.db.query<{ resource_type: string; n: number }>(`SELECT resource_type, count(*)::int AS n FROM fhir_resources WHERE author_org = 'org-demo' AND resource_type <> 'AuditEvent' GROUP BY 1 ORDER BY 1`)).rows;

describe('POST /api/demo/reset', () => {
  it('seeds a demo that a complete integrator flow runs against', async () => {
    const res = await reset();
    expect(res.status).toBe(201);
    const demo = res.body;
    expect(demo.clients).toHaveLength(2);
    expect(demo.patients).toHaveLength(5);
    const headers = (await tokenOf(demo.clients[0]))!;
    expect(headers).toBeDefined();
    const { health_id: healthId } = demo.patients[0];

    const resolved = await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers, json: { health_id: healthId } });
    expect(resolved.body.status).toBe('found');
    expect((await pont.json(`/api/v1/connect/patient/${healthId}/consent`, { headers })).body.status).toBe('active');
    const records = await pont.json(`/api/v1/connect/patient/${healthId}/records`, { headers });
    expect(records.status).toBe(200);
    expect(records.body.records.diagnoses.length + records.body.records.vitals.length).toBeGreaterThan(0);
    expect((await pont.json(`/api/v1/sdk/patients/${healthId}/summary`, { headers })).body.patient.first_name).toBe(demo.patients[0].first_name);
    const pushed = await pont.json('/api/v1/sdk/records/lab-results', { method: 'POST', headers, json: { health_id: healthId, test_name: 'Glucose', result_value: '5.4', unit: 'mmol/L', flagged: false } });
    expect(pushed.status).toBe(201);
    const blood = await pont.json('/api/v1/connect/blood-bank/inventory?facility_id=fac-demo', { headers });
    expect(blood.body.items).toHaveLength(40);
    const payments = await pont.json(`/api/v1/connect/payments/reconciliation?date=${demo.seeded.payments_date}`, { headers });
    expect(payments.body.payments).toHaveLength(5);
    expect(payments.body.unreconciled).toBe(1);
    const agent = demo.bridge_agent;
    const beat = await pont.json('/api/v1/bridge/heartbeat', {
      method: 'POST',
      headers: { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)) },
      json: { agent_id: agent.agent_id, facility_id: agent.facility_id, version: 'demo' },
    });
    expect(beat.status).toBe(200);
  }, 60_000);

  it('gives a fresh, equal demo each time and touches nothing outside the demo organisation', async () => {
    const other = await createTestClient(pont, ['health_id:verify', 'fhir:read', 'fhir:write'], { organizationId: 'org-other' });
    const mine = await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: other.headers, json: { first_name: 'Outside', last_name: 'Demo', date_of_birth: '1970-01-01' } });
    expect(mine.status).toBe(201);
    const first = (await reset()).body;
    const before = await demoCounts();
    const oldHeaders = (await tokenOf(first.clients[0]))!;
    expect((await pont.json('/api/fhir/R4/Patient?_count=1', { headers: oldHeaders })).status).toBe(200);
    const second = (await reset()).body;
    // A token of a client the reset removed is refused on the very next request.
    expect((await pont.json('/api/fhir/R4/Patient?_count=1', { headers: oldHeaders })).status).toBe(401);
    expect(await demoCounts()).toEqual(before);
    expect(second.patients.map((p: any) => [p.first_name, p.last_name])).toEqual(first.patients.map((p: any) => [p.first_name, p.last_name]));
    expect(await tokenOf(first.clients[0])).toBeUndefined(); // the old credentials are gone
    expect(await tokenOf(second.clients[0])).toBeDefined();
    const still = await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: other.headers, json: { health_id: mine.body.health_id } });
    expect(still.body.status).toBe('found');
    expect((await pont.json(`/api/v1/connect/patients/verify/${mine.body.health_id}`, { headers: other.headers })).status).toBe(200);
  }, 60_000);
});

describe('what a reset replaces', () => {
  it('counts what it removed, ends the old clients, and keeps the demo\'s webhook subscriptions, which hear the fresh demo', async () => {
    const first = (await reset()).body;
    const headers = (await tokenOf(first.clients[0]))!;
    const receiver = await startReceiver();
    try {
      const subscribed = await pont.json('/api/v1/connect/webhooks/subscriptions', { method: 'POST', headers, json: { callback_url: receiver.url, subscribed_events: ['patient.created'], description: 'mine' } });
      expect(subscribed.status).toBe(201);
      const resources = (await demoCounts()).reduce((n, r) => n + r.n, 0);

      const second = (await reset()).body;
      expect(second.replaced).toEqual({
        fhir_resources: resources,
        clients: 2,
        bridge_agents: 1,
        patient_tokens: 0,
        events: expect.any(Number),
        webhook_deliveries: 0,
        webhook_subscriptions_kept: 1,
      });
      expect(second.replaced.events).toBeGreaterThan(0);
      expect(await tokenOf(first.clients[0])).toBeUndefined();
      // The subscription is the new clients' organisation's still, and hears the fresh demo's patients.
      const listed = await pont.json('/api/v1/connect/webhooks/subscriptions', { headers: (await tokenOf(second.clients[0]))! });
      expect(JSON.stringify(listed.body)).toContain(subscribed.body.id);
      const heard = await receiver.waitFor(second.patients.length);
      expect(heard.map((r: any) => r.body.data.patient_id).sort()).toEqual(second.patients.map((p: any) => p.patient_id).sort());

      // Those deliveries were of the demo's events: the next reset removes them, and keeps the subscription.
      const third = (await reset()).body;
      expect(third.replaced.webhook_deliveries).toBe(second.patients.length);
      expect(third.replaced.webhook_subscriptions_kept).toBe(1);
      expect((await pont.services.db.query(`SELECT 1 FROM webhook_subscriptions WHERE id = $1 AND deleted_at IS NULL`, [subscribed.body.id])).rows).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  }, 60_000);

  it('is described as it is: the integrators\' guide states the counts a real reset answers, the OpenAPI document what `replaced` holds', async () => {
    const guide = readFileSync(new URL('../docs/integrators.md', import.meta.url), 'utf8');
    const section = /\n## Demo\n([\s\S]*?)\n## /.exec(guide)![1]!.replace(/\s+/g, ' ');
    const stated = (pattern: RegExp) => Number(pattern.exec(section)?.[1]);
    const res = await reset();
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const { body } = res;
    expect({
      clients: stated(/`clients`: (\d+) integration clients/),
      patients: stated(/`patients`: (\d+) patients/),
      fhir_resources: stated(/the smallest records: (\d+) FHIR resources/),
      blood_units: stated(/(\d+) blood units/),
      blood_lines: stated(/of each of the (\d+) groups and components/),
      pharmacy_stock_lines: stated(/(\d+) pharmacy stock lines/),
      payments: stated(/today's (\d+) payments/),
    }).toEqual({
      clients: body.clients.length,
      patients: body.patients.length,
      fhir_resources: body.seeded.fhir_resources,
      blood_units: body.seeded.blood_units,
      blood_lines: (await pont.json('/api/v1/connect/blood-bank/inventory?facility_id=fac-demo', { headers: (await tokenOf(body.clients[0]))! })).body.items.length,
      pharmacy_stock_lines: body.seeded.pharmacy_stock_lines,
      payments: body.seeded.payments,
    });
    // Every count of `replaced` is named in the guide and described in the OpenAPI document.
    for (const key of Object.keys(body.replaced)) expect(section).toContain(`\`${key}\``);
    const document = (await pont.json('/api/openapi.json')).body;
    const answer = document.paths['/api/demo/reset'].post.responses['201'].content['application/json'].schema;
    expect(Object.keys(answer.properties.replaced.properties).sort()).toEqual(Object.keys(body.replaced).sort());
  }, 60_000);
});

/** The rows of a resource in each derived table, by the type the table follows: a new derived table adds its query. */
const DERIVED_ROWS: Record<string, string> = {
  Consent: 'SELECT 1 FROM consent_access WHERE consent_id = $1',
  BiologicallyDerivedProduct: 'SELECT 1 FROM blood_units WHERE unit_id = $1',
  PaymentReconciliation: 'SELECT 1 FROM payments WHERE payment_id = $1',
  Medication: 'SELECT 1 FROM pharmacy_stock WHERE medication_id = $1',
};

/**
 * Demo data a reset does not seed again (ids of its own), one resource of each derived table's type: a blood unit, a
 * payment and a stock line of the demo facility, and a consent granted to the demo organisation by a patient outside
 * the demo. Answers their ids by type.
 */
async function extraDemoData(): Promise<Record<string, string>> {
  const principal: ClientPrincipal = { kind: 'client', clientId: 'demo-extra', organizationId: 'org-demo', facilityId: 'fac-demo', scopes: [...SCOPES], allPatients: true };
  const repo = pont.services.fhir.repository({ principal, channel: 'system', operation: 'demoExtra' });
  const maps = pont.services.mappings;
  const now = new Date().toISOString();
  const resources = [
    maps.get('blood-unit').toFhir({ id: randomUUID(), facility_id: 'fac-demo', blood_group: BLOOD_GROUPS[0], component: BLOOD_COMPONENTS[0], status: 'available', units: 1, collected_at: now, expires_at: new Date(Date.now() + 86_400_000).toISOString() }),
    maps.get('payment').toFhir({ id: randomUUID(), facility_id: 'fac-demo', payer: 'Extra', method: 'cash', amount: 100, currency: 'XAF', amount_due: 100, currency_due: 'XAF', reference: null, status: 'active', paid_at: now, paid_on: now.slice(0, 10) }),
    maps.get('pharmacy-stock').toFhir({ id: randomUUID(), facility_id: 'fac-demo', code: '999999', code_system: 'http://www.nlm.nih.gov/research/umls/rxnorm', display: 'Extra', lot: null, expires_on: null, quantity: 5, unit: 'tablets', reorder_level: null }),
  ];
  const ids: Record<string, string> = {};
  for (const resource of resources) ids[resource.resourceType] = (await repo.update(resource, { audit: false })).resource.id!;
  const other = await createTestClient(pont, ['health_id:verify'], { organizationId: 'org-outside' });
  const outside = await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: other.headers, json: { first_name: 'Outside', last_name: `Grantor${randomUUID().slice(0, 8)}`, date_of_birth: '1971-03-03' } });
  expect(outside.status).toBe(201);
  const consent = await new ConsentService(maps).grant(repo, 'org-demo', outside.body.health_id, { consent_type: 'full_record', expires_at: new Date(Date.now() + 86_400_000).toISOString() });
  ids.Consent = consent.consent_id!;
  return ids;
}

describe('the derived tables', () => {
  it('a reset asks every registered derived table to forget the demo\'s resources, and leaves none of their rows', async () => {
    await reset();
    const tables = pont.services.fhir.derived;
    expect(tables.map((t) => t.resourceType).sort(), 'a registered derived table without its query in DERIVED_ROWS').toEqual(Object.keys(DERIVED_ROWS).sort());
    const extra = await extraDemoData();
    const rowsOf = async (type: string) => (await pont.services.db.query(DERIVED_ROWS[type]!, [extra[type]])).rows.length;
    for (const type of Object.keys(DERIVED_ROWS)) expect(await rowsOf(type), `${type}/${extra[type]} in its derived table before the reset`).toBe(1);
    const { rows: held } = await pont.services.db.query<{ resource_type: string; id: string }>(`SELECT resource_type, id FROM fhir_resources WHERE author_org = 'org-demo' AND resource_type <> 'AuditEvent'`);

    const spies = tables.map((t) => vi.spyOn(t, 'purge'));
    let asked: string[][];
    try {
      expect((await reset()).status).toBe(201);
    } finally {
      asked = spies.map((spy) => spy.mock.calls.flatMap(([, ids]) => ids).sort());
      for (const spy of spies) spy.mockRestore();
    }
    tables.forEach((t, i) => {
      const demoIds = held.filter((r) => r.resource_type === t.resourceType).map((r) => r.id).sort();
      expect(asked[i], `the ${t.resourceType} table was not asked to forget the demo's resources`).toEqual(demoIds);
    });
    for (const type of Object.keys(DERIVED_ROWS)) expect(await rowsOf(type), `${type}/${extra[type]} left in its derived table by the reset`).toBe(0);
  }, 60_000);
});

describe('the demo clients, used as an attacker would', () => {
  it('cannot read the audit trail, break the glass or grant themselves consent', async () => {
    const demo = (await reset()).body;
    for (const client of demo.clients) {
      expect(client.scopes).not.toContain('audit:read');
      expect(client.scopes).not.toContain('emergency:access');
      expect(client.scopes).not.toContain('consents:write');
      const headers = (await tokenOf(client))!;
      const audit = await pont.json('/api/fhir/R4/AuditEvent', { headers });
      expect(audit.status).toBe(403);
      const patient = demo.patients[0].patient_id;
      const glass = await pont.json(`/api/fhir/R4/Observation?subject=Patient/${patient}`, { headers: { ...headers, 'x-emergency-reason': 'curious' } });
      expect(glass.status).toBe(403);
      // A patient of another organisation: no consent, and no way to grant one.
      const other = await createTestClient(pont, ['health_id:verify'], { organizationId: 'org-victim' });
      const victim = await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: other.headers, json: { first_name: 'Vic', last_name: 'Tim', date_of_birth: '1980-02-02' } });
      const grant = await pont.json(`/api/v1/connect/patient/${victim.body.health_id}/consent/grant`, {
        method: 'POST',
        headers,
        json: { consent_type: 'full_record', expires_at: new Date(Date.now() + 86_400_000).toISOString() },
      });
      expect(grant.status).toBe(403);
      expect(grant.body.error_code).toBe('FORBIDDEN');
    }
  }, 60_000);
});

describe('resets at once', () => {
  it('run one at a time: the others are refused at once with 409 or 429, never queued, never a 5xx', async () => {
    const answers = await Promise.all(Array.from({ length: 10 }, () => reset()));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.every((s) => s === 201 || s === 409 || s === 429)).toBe(true);
    const refused = answers.find((a) => a.status === 409)!;
    expect(refused.body.error_code).toBe('CONFLICT');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // The one that ran left a whole demo.
    const winner = answers.find((a) => a.status === 201)!.body;
    expect(await tokenOf(winner.clients[0])).toBeDefined();
  }, 60_000);

  it.runIf(backend === 'postgres')('another process running one (holding the lock) is answered 409', async () => {
    const other = new pg.Client({ connectionString: pont.config.databaseUrl });
    await other.connect();
    try {
      await other.query('SELECT pg_advisory_lock($1::bigint)', [hashKey('demo-reset')]);
      const res = await reset();
      expect(res.status).toBe(409);
      expect(res.headers.get('retry-after')).toBeTruthy();
    } finally {
      await other.end();
    }
  });
});

describe('a reset while webhooks are being delivered', () => {
  it.runIf(backend === 'postgres')('waits for a delivery worker recording an attempt on a demo delivery, then removes both', async () => {
    const first = (await reset()).body;
    const receiver = await startReceiver();
    const worker = new pg.Client({ connectionString: pont.config.databaseUrl });
    await worker.connect();
    try {
      const subscribed = await pont.json('/api/v1/connect/webhooks/subscriptions', { method: 'POST', headers: (await tokenOf(first.clients[0]))!, json: { callback_url: receiver.url, subscribed_events: ['patient.created'] } });
      expect(subscribed.status).toBe(201);
      const second = (await reset()).body;
      await receiver.waitFor(second.patients.length);
      // A worker's attempt on a delivery of the demo, not yet committed when the reset starts.
      await worker.query('BEGIN');
      await worker.query(
        `INSERT INTO webhook_delivery_attempts (delivery_id, round, attempt, started_at, duration_ms, succeeded)
         SELECT id, 1, 2, now(), 1, true FROM webhook_deliveries WHERE subscription_id = $1 LIMIT 1`,
        [subscribed.body.id],
      );
      const answer = reset();
      const waiting = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`;
      while ((await pont.services.db.query<{ n: number }>(waiting)).rows[0]!.n === 0);
      await worker.query('COMMIT');
      const third = await answer;
      expect(third.status, JSON.stringify(third.body)).toBe(201);
      // Each kept subscription (an earlier test's too) had a delivery of each patient's patient.created.
      expect(third.body.replaced.webhook_deliveries).toBe(second.patients.length * second.replaced.webhook_subscriptions_kept);
    } finally {
      await worker.end();
      await receiver.close();
    }
  }, 60_000);
});

describe('in sandbox', () => {
  it('needs an operator client, and is rate-limited per address', async () => {
    const sandbox = await startTestServer({
      PONT_ENV: 'sandbox',
      PONT_WEBHOOK_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'),
      PONT_MATCH_KEY_SECRET: Buffer.alloc(32, 9).toString('base64'),
      // A day-long window: fixed windows are aligned on the epoch, and a minute's could end between the two resets.
      PONT_RATE_LIMITS: 'demo-reset=1/86400',
    });
    try {
      const post = (headers?: Record<string, string>) => sandbox.json('/api/demo/reset', { method: 'POST', headers, json: {} });
      const anonymous = await post();
      expect(anonymous.status).toBe(401);
      expect(anonymous.body.error_code).toBe('UNAUTHENTICATED');
      const integrator = await createTestClient(sandbox, ['fhir:read', 'fhir:write', 'audit:read'], { organizationId: 'org-integrator' });
      expect((await post(integrator.headers)).status).toBe(403);
      expect(await sandbox.services.db.query(`SELECT 1 FROM oauth_clients WHERE organization_id = 'org-demo'`).then((r) => r.rows)).toEqual([]);
      const operator = await createTestClient(sandbox, ['fhir:read'], { organizationId: 'org-operator', allPatients: true });
      expect((await post(operator.headers)).status).toBe(201);
      const again = await post(operator.headers);
      expect(again.status).toBe(429);
      expect(again.body.error_code).toBe('RATE_LIMITED');
      const document = (await sandbox.json('/api/openapi.json')).body;
      expect(document.paths['/api/demo/reset'].post.security).not.toEqual([]);
    } finally {
      await sandbox.close();
    }
  }, 60_000);
});

describe('in production', () => {
  it('does not exist', async () => {
    const prod = await startTestServer({ PONT_ENV: 'production', PONT_WEBHOOK_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'), PONT_MATCH_KEY_SECRET: Buffer.alloc(32, 9).toString('base64'), PONT_PUBLIC_URL: 'https://pont.example' });
    try {
      expect((await prod.json('/api/demo/reset', { method: 'POST', json: {} })).status).toBe(404);
    } finally {
      await prod.close();
    }
  });
});

// Issue 42 (5): a reset replaced every client of the demo organisation, the ones a person had just made in the portal
// (a SMART client too) among them. A person's clients, agents and subscriptions are theirs, whatever their name.
describe('what a person made for the demo organisation', () => {
  const PASSWORD = 'correct horse battery staple';

  /** A portal user of the demo organisation, made as `pont portal-users create` makes one, signed in through the portal API. */
  async function signedInPerson(email: string): Promise<Record<string, string>> {
    await createPortalPerson(pont, 'org-demo', email, PASSWORD);
    const signIn = await pont.json('/api/v1/portal/sign-in', { method: 'POST', json: { email, password: PASSWORD } });
    expect(signIn.status).toBe(200);
    return { cookie: /service_session=[^;]*/.exec(signIn.headers.get('set-cookie') ?? '')![0], 'x-csrf-token': signIn.body.csrf_token };
  }

  it('a reset removes only the clients and agent it seeded: clients, agents and subscriptions made in the portal or with the CLI stay, and work', async () => {
    const first = (await reset()).body;
    const headers = await signedInPerson(`dev-${randomUUID().slice(0, 8)}@demo.example`);
    const receiver = await startReceiver();
    try {
      // In the portal: a client, an agent and a webhook subscription, named as the demo names its own.
      const portalClient = await pont.json('/api/v1/portal/clients', { method: 'POST', headers, json: { name: 'Demo records reader', scopes: ['patients:read', 'fhir:read'] } });
      expect(portalClient.status, JSON.stringify(portalClient.body)).toBe(201);
      const portalAgent = await pont.json('/api/v1/portal/agents', { method: 'POST', headers, json: { facility_id: 'fac-demo' } });
      expect(portalAgent.status, JSON.stringify(portalAgent.body)).toBe(201);
      const subscription = await pont.json('/api/v1/portal/webhooks/subscriptions', { method: 'POST', headers, json: { callback_url: receiver.url, subscribed_events: ['patient.created'] } });
      expect(subscription.status, JSON.stringify(subscription.body)).toBe(201);
      // With the CLI (what `pont clients create --jwks FILE` and `pont agents create` do): a SMART client and an agent.
      const { publicKey } = await generateKeyPair('ES384', { extractable: true });
      const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'demo-app', alg: 'ES384' }] };
      const smart = await createKeyClient(pont.services.db, await keyClientInput(true).parseAsync({ name: 'Demo integrator (sandbox scopes)', organizationId: 'org-demo', scopes: ['fhir:read'], jwks }));
      const cliAgent = await createAgent(pont.services.db, { organizationId: 'org-demo', facilityId: 'fac-demo' });

      const second = (await reset()).body;
      expect(second.replaced).toMatchObject({ clients: 2, bridge_agents: 1 });
      expect(await tokenOf(first.clients[0])).toBeUndefined(); // the demo's own, replaced
      expect(await tokenOf(portalClient.body)).toBeDefined();
      const listed = await pont.json('/api/v1/portal/clients', { headers });
      const ids = (rows: Array<{ client_id: string; revoked_at: string | null }>) => rows.filter((c) => !c.revoked_at).map((c) => c.client_id).sort();
      expect(ids(listed.body.clients ?? listed.body)).toEqual([portalClient.body.client_id, smart.client_id, ...second.clients.map((c: any) => c.client_id)].sort());
      const agents = await pont.json('/api/v1/portal/agents', { headers });
      const agentIds = (agents.body.agents ?? agents.body).filter((a: any) => !a.revoked_at).map((a: any) => a.agent_id).sort();
      expect(agentIds).toEqual([portalAgent.body.agent_id, cliAgent.agent_id, second.bridge_agent.agent_id].sort());
      const beat = await pont.json('/api/v1/bridge/heartbeat', {
        method: 'POST',
        headers: { 'x-bridge-agent-id': cliAgent.agent_id, 'x-bridge-agent-key': cliAgent.agent_key, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)) },
        json: { agent_id: cliAgent.agent_id, facility_id: 'fac-demo', version: 'mine' },
      });
      expect(beat.status).toBe(200);
      const subscriptions = await pont.json('/api/v1/portal/webhooks/subscriptions', { headers });
      expect(JSON.stringify(subscriptions.body)).toContain(subscription.body.id);

      // And the next reset keeps them again: only what that reset's predecessor seeded goes.
      const third = (await reset()).body;
      expect(third.replaced).toMatchObject({ clients: 2, bridge_agents: 1 });
      expect(await tokenOf(portalClient.body)).toBeDefined();
      expect((await pont.json(`/api/v1/portal/webhooks/subscriptions/${subscription.body.id}`, { method: 'DELETE', headers })).status).toBeLessThan(300);
    } finally {
      await receiver.close();
    }
  }, 60_000);
});

describe('a database from before the demo marked what it seeds (migration 029)', () => {
  it('marks the clients and agent an earlier reset made together, in one transaction, and none a person made', async () => {
    const scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
    const db = await openDatabase(scratch ? { databaseUrl: scratch.url } : {});
    try {
      await db.exec('CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
      for (const m of listMigrations().filter((m) => m.version < '029')) {
        await db.transaction(async (tx) => {
          await tx.exec(m.sql);
          await tx.query('INSERT INTO schema_migrations (version) VALUES ($1)', [m.version]);
        });
      }
      // created_at: the transaction's start (now()) unless given, as a person's request made at its own moment.
      const client = (sql: Queryable, id: string, org: string, at?: string) =>
        sql.query(`INSERT INTO oauth_clients (client_id, name, organization_id, scopes, secret_hash, created_at) VALUES ($1, 'Demo records reader', $2, '{labs:read}', 'x', COALESCE($3::timestamptz, now()))`, [id, org, at ?? null]);
      const agent = (sql: Queryable, id: string, org: string, at?: string) =>
        sql.query(`INSERT INTO bridge_agents (agent_id, facility_id, organization_id, key_sha256, created_at) VALUES ($1, 'fac-demo', $2, 'x', COALESCE($3::timestamptz, now()))`, [id, org, at ?? null]);
      await db.transaction(async (sql) => {
        await client(sql, 'cli_seeded_1', 'org-demo');
        await client(sql, 'cli_seeded_2', 'org-demo');
        await agent(sql, 'agt_seeded', 'org-demo');
      });
      await client(db, 'cli_person', 'org-demo', '2025-01-01T10:00:00Z');
      await agent(db, 'agt_person', 'org-demo', '2025-01-01T10:04:00Z');
      await db.transaction(async (sql) => {
        await client(sql, 'cli_elsewhere', 'org-other');
        await agent(sql, 'agt_elsewhere', 'org-other');
      });
      expect(await migrate(db)).toContain('029_demo_seeded');
      const marked = async (table: string, id: string) => (await db.query<{ id: string }>(`SELECT ${id} AS id FROM ${table} WHERE demo_seeded ORDER BY 1`)).rows.map((r) => r.id);
      expect(await marked('oauth_clients', 'client_id')).toEqual(['cli_seeded_1', 'cli_seeded_2']);
      expect(await marked('bridge_agents', 'agent_id')).toEqual(['agt_seeded']);
    } finally {
      await db.close();
      await scratch?.drop();
    }
  }, 120_000);
});
