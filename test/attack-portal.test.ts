import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * Attacks on the developer portal by a legitimate person of organisation B against organisation A.
 * Each test states what must hold; a failing test is an open finding (not fixed here).
 */
const PASSWORD = 'correct horse battery staple';
const API = '/api/v1/portal';
const RX = 'http://www.nlm.nih.gov/research/umls/rxnorm';
const amoxicillin = { code: '308182', code_system: RX, display: 'Amoxicillin 250 MG Oral Capsule' };
const paracetamol = { code: '198440', code_system: RX, display: 'Acetaminophen 500 MG Oral Tablet' };

let pont: TestServer;
let pharmacyA: TestClient;
let viewer: TestClient;
let adminB: Awaited<ReturnType<typeof signIn>>;

/** A portal person with a password (the set-password link used at once). */
async function person(org: string, email: string, role: 'admin' | 'developer' | 'viewer'): Promise<void> {
  const created = await pont.services.access.portal.create({ organizationId: org, email, role });
  if (created === 'exists' || !(await pont.services.access.portal.setPassword(created.setPasswordToken, PASSWORD))) throw new Error(`no portal account ${email}`);
}

async function signIn(email: string) {
  const res = await pont.json(`${API}/sign-in`, { method: 'POST', json: { email, password: PASSWORD } });
  const cookie = /service_session=([^;]*)/.exec(res.headers.get('set-cookie') ?? '')?.[0] ?? '';
  return { cookie, csrf: res.body.csrf_token as string, headers: { cookie, 'x-csrf-token': res.body.csrf_token as string } };
}

beforeAll(async () => {
  pont = await startTestServer();
  pharmacyA = await createTestClient(pont, ['pharmacy:write'], { organizationId: 'org-a', facilityId: 'fac-a' });
  viewer = await createTestClient(pont, ['pharmacy:stock:read'], { organizationId: 'org-viewer' });
  await person('org-a', 'someone@a.example', 'viewer');
  await person('org-b', 'admin@b.example', 'admin');
  adminB = await signIn('admin@b.example');
});
afterAll(async () => pont?.close());

describe('portal: binding to another organisation\'s facility', () => {
  it('a portal person of B cannot create a client bound to A\'s facility and write stock lines into A\'s facility', async () => {
    const stock = (medication: typeof amoxicillin, quantity: number) => ({ facility_id: 'fac-a', items: [{ medication, quantity_on_hand: quantity, unit: 'capsules' }] });
    expect((await pont.json('/api/v1/connect/pharmacy/stock', { method: 'PUT', headers: pharmacyA.headers, json: stock(amoxicillin, 400) })).status).toBe(200);

    const created = await pont.json(`${API}/clients`, { method: 'POST', headers: adminB.headers, json: { name: 'b pharmacy', scopes: ['pharmacy:write'], facility_id: 'fac-a' } });
    // Either the portal refuses a facility that is not B's, or the write below is refused.
    if (created.status === 201) {
      const token = await pont.json('/api/v1/connect/auth/token', {
        method: 'POST',
        json: { grant_type: 'client_credentials', client_id: created.body.client_id, client_secret: created.body.client_secret },
      });
      expect(token.status).toBe(200);
      const put = await pont.json('/api/v1/connect/pharmacy/stock', { method: 'PUT', headers: { authorization: `Bearer ${token.body.access_token}` }, json: stock(paracetamol, 5000) });
      expect(put.status, JSON.stringify(put.body)).toBe(403);
    }
    const after = await pont.json('/api/v1/connect/pharmacy/stock?facility_id=fac-a', { headers: viewer.headers });
    // A's facility shows what A's own clients and agents wrote, nothing of B's.
    expect(after.body.items.map((i: any) => i.medication.code)).toEqual(['308182']);
  });

  it('a portal person of B cannot create a Bridge agent of A\'s facility', async () => {
    const created = await pont.json(`${API}/agents`, { method: 'POST', headers: adminB.headers, json: { facility_id: 'fac-a' } });
    expect(created.status, JSON.stringify(created.body)).not.toBe(201);
  });
});

describe("portal: an agent bound to another organisation's facility squats its Bridge ids", () => {
  const unix = () => String(Math.floor(Date.now() / 1000));
  const sync = (agent: { agent_id: string; agent_key: string }, batchId: string, family: string) =>
    pont.json('/api/v1/bridge/sync', {
      method: 'POST',
      headers: { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': unix() },
      json: { batch_id: batchId, resources: [{ resourceType: 'Patient', id: 'MRN-7', name: [{ family }] }] },
    });

  it("B's portal-made agent of fac-a syncs MRN-7 first; A's own agent can still sync its patient MRN-7", async () => {
    const squatter = await pont.json(`${API}/agents`, { method: 'POST', headers: adminB.headers, json: { facility_id: 'fac-a' } });
    if (squatter.status === 201) expect((await sync(squatter.body, 'b-1', 'Squatted')).status).toBe(200);
    const own = await pont.services.access.agents.create('org-a', 'fac-a');
    const res = await sync(own, 'a-1', 'Real');
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    // Both agents' Patient/MRN-7 of fac-a is one Pont id (uuidV5 of facility, type, id): today B's owns it and A's is refused.
    expect(res.body.results[0], JSON.stringify(res.body.results[0])).toMatchObject({ status: expect.stringMatching(/created|updated/) });
  });
});

describe('portal: hostile form bodies (pages)', () => {
  /** A form POST of a page: `body` is sent as it is (application/x-www-form-urlencoded). */
  const post = (path: string, body: string, cookie: string) =>
    pont.fetch(path, { method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body });

  it('the sign-in page answers a NUL (%00) in the e-mail as a wrong sign-in, not a 500 (anyone, no account needed)', async () => {
    const page = await pont.fetch('/portal/sign-in');
    const cookie = /service_sign_in=[^;]*/.exec(page.headers.get('set-cookie') ?? '')![0];
    const token = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]!;
    const res = await post('/portal/sign-in', `_csrf=${token}&email=admin%40b.example%00&password=x&next=%2Fportal`, cookie);
    expect(res.status).toBeLessThan(500);
  });

  it("a signed-in person's forms with a NUL (client name, webhook description, invitation) are refused (4xx), not a 500", async () => {
    const csrf = `_csrf=${encodeURIComponent(adminB.csrf)}`;
    for (const [path, body] of [
      ['/portal/clients', 'name=a%00b&scopes=fhir%3Aread'],
      ['/portal/webhooks', 'callback_url=https%3A%2F%2Fexample.com%2Fhook&description=x%00y&subscribed_events=patient.created'],
      ['/portal/users', 'email=a%00%40b.example&role=viewer'],
    ]) {
      const res = await post(path!, `${csrf}&${body}`, adminB.cookie);
      expect(res.status, path).toBeLessThan(500);
    }
  });
});
