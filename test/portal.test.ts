import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend, commandDatabase, createPortalPerson, createTestClient, startTestServer, type TestServer, pontCommand } from './harness';
import { eventually } from './eventually';
import { loadConfig } from '../src/config';
import { startPont } from '../src/server';
import { safeNext } from '../src/portal/pages';
import { csvField } from '../src/portal/csv';
import { html } from '../src/portal/html';
import { MAX_FAILURES_PER_ACCOUNT, MAX_FAILURES_PER_ADDRESS, SESSION_ABSOLUTE_MS, SESSION_IDLE_MS, SIGN_IN_WINDOW_MS } from '../src/auth/portal-accounts';
import { secureCookies, sessionCookieName } from '../src/auth/portal-session';
import { CONSENT_TYPE_NAMES } from '../src/core/data-classes';
import { exportJWK, generateKeyPair } from 'jose';
import { createKeyClient, keyClientInput } from '../src/auth/clients';

const CONSENT_TYPE = CONSENT_TYPE_NAMES[0]!;

const PASSWORD = 'correct horse battery staple';
const API = '/api/v1/portal';

interface Signed {
  cookie: string;
  csrf: string;
  headers: Record<string, string>;
}

let pont: TestServer;
let clock = Date.now();

/** A portal user made as `pont portal-users create` makes it, with the password set through the set-password page. */
const person = (org: string, email: string, role: 'admin' | 'developer' | 'viewer' = 'admin') => createPortalPerson(pont, org, email, PASSWORD, role);

async function signIn(email: string, password = PASSWORD, cookie?: string): Promise<Signed & { status: number; body: any; setCookie: string }> {
  const res = await pont.json(`${API}/sign-in`, { method: 'POST', json: { email, password }, headers: cookie ? { cookie } : {} });
  const setCookie = res.headers.get('set-cookie') ?? '';
  const sessionCookie = /service_session=([^;]*)/.exec(setCookie)?.[0] ?? '';
  const csrf = res.body?.csrf_token ?? '';
  return { status: res.status, body: res.body, setCookie, cookie: sessionCookie, csrf, headers: { cookie: sessionCookie, 'x-csrf-token': csrf } };
}

let adminA: Signed;
let adminB: Signed;

beforeAll(async () => {
  pont = await startTestServer({ PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true' });
  pont.services.access.portal.now = () => clock;
  await person('org-a', 'admin@a.example', 'admin');
  await person('org-b', 'admin@b.example', 'admin');
  await person('org-a', 'viewer@a.example', 'viewer');
  adminA = await signIn('admin@a.example');
  adminB = await signIn('admin@b.example');
});
afterAll(async () => pont?.close());

describe('portal sign-in and sessions', () => {
  it('signs in with an HttpOnly, SameSite=Lax cookie and answers wrong password and unknown e-mail alike', async () => {
    const good = await signIn('admin@a.example');
    expect(good.status).toBe(200);
    expect(good.setCookie).toMatch(/HttpOnly/i);
    expect(good.setCookie).toMatch(/SameSite=Lax/i);
    expect(good.body.user).toMatchObject({ email: 'admin@a.example', organization_id: 'org-a', role: 'admin' });
    const wrong = await signIn('admin@a.example', 'not the password');
    const unknown = await signIn('nobody@a.example', 'not the password');
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(unknown.body).toEqual(wrong.body);
  });

  it('gives a new session id at sign-in, whatever cookie the browser carried (no fixation), and ends the old one', async () => {
    const first = await signIn('admin@a.example');
    const second = await signIn('admin@a.example', PASSWORD, first.cookie);
    expect(second.cookie).not.toBe(first.cookie);
    expect((await pont.json(`${API}/session`, { headers: { cookie: first.cookie } })).status).toBe(401);
    expect((await pont.json(`${API}/session`, { headers: { cookie: second.cookie } })).status).toBe(200);
  });

  it('ends a session after the idle time, and the pages send the person to sign-in and back', async () => {
    const s = await signIn('admin@a.example');
    clock += SESSION_IDLE_MS + 1000;
    try {
      expect((await pont.json(`${API}/session`, { headers: s.headers })).status).toBe(401);
      const page = await pont.fetch('/portal/clients', { headers: { cookie: s.cookie }, redirect: 'manual' });
      expect(page.status).toBe(302);
      expect(page.headers.get('location')).toBe('/portal/sign-in?next=%2Fportal%2Fclients');
      // A form sent after expiry returns to the page it came from (a /portal page only).
      const form = (referer: string) =>
        pont.fetch('/portal/clients', { method: 'POST', redirect: 'manual', headers: { cookie: s.cookie, referer, 'content-type': 'application/x-www-form-urlencoded' }, body: `_csrf=${s.csrf}` });
      expect((await form(`${pont.url}/portal/webhooks`)).headers.get('location')).toBe('/portal/sign-in?next=%2Fportal%2Fwebhooks');
      expect((await form('https://evil.example/portal-ish')).headers.get('location')).toBe('/portal/sign-in?next=%2Fportal');
      expect((await form('not a url')).headers.get('location')).toBe('/portal/sign-in?next=%2Fportal');
    } finally {
      adminA = await signIn('admin@a.example');
      adminB = await signIn('admin@b.example');
    }
  });

  it('ends a session 12 hours after sign-in however busy it was', async () => {
    const s = await signIn('admin@a.example');
    try {
      // A request every 15 minutes (well within the idle time) up to 11 h 45 min: alive throughout.
      const step = SESSION_IDLE_MS / 2;
      for (let elapsed = step; elapsed < SESSION_ABSOLUTE_MS; elapsed += step) {
        clock += step;
        expect((await pont.json(`${API}/session`, { headers: s.headers })).status).toBe(200);
      }
      clock += (4 * step) / 3; // 12 h 5 min after sign-in, 20 minutes after the last request
      expect((await pont.json(`${API}/session`, { headers: s.headers })).status).toBe(401);
    } finally {
      adminA = await signIn('admin@a.example');
      adminB = await signIn('admin@b.example');
    }
  });

  it('takes the idle and absolute session times from PONT_PORTAL_SESSION_IDLE and PONT_PORTAL_SESSION_MAX', async () => {
    const other = await startTestServer({ PONT_PORTAL_SESSION_IDLE: '5m', PONT_PORTAL_SESSION_MAX: '1h' });
    let now = Date.now();
    other.services.access.portal.now = () => now;
    try {
      const created = await other.services.access.portal.create({ organizationId: 'org-a', email: 'short@a.example', role: 'viewer' });
      if (created === 'exists') throw new Error('exists');
      await other.services.access.portal.setPassword(created.setPasswordToken, PASSWORD);
      const signInThere = async () => {
        const res = await other.json(`${API}/sign-in`, { method: 'POST', json: { email: 'short@a.example', password: PASSWORD } });
        expect(res.status).toBe(200);
        const expires = Date.parse(/expires=([^;]+)/i.exec(res.headers.get('set-cookie')!)![1]!); // the cookie lasts as long as the session may
        expect(Math.abs(expires - (Date.now() + 3_600_000))).toBeLessThan(60_000);
        expect(Date.parse(res.body.expires_at) - now).toBe(3_600_000);
        return /service_session=[^;]*/.exec(res.headers.get('set-cookie')!)![0];
      };
      const alive = async (cookie: string) => (await other.json(`${API}/session`, { headers: { cookie } })).status;
      // Idle: alive after 4 min 59 s of quiet, gone after 5 min 1 s.
      const idle = await signInThere();
      now += 299_000;
      expect(await alive(idle)).toBe(200);
      now += 301_000;
      expect(await alive(idle)).toBe(401);
      // Absolute: a request every 4 minutes keeps it alive until 1 h after sign-in, not after.
      const busy = await signInThere();
      const signedInAt = now;
      while (now + 240_000 < signedInAt + 3_600_000) {
        now += 240_000;
        expect(await alive(busy)).toBe(200);
      }
      now = signedInAt + 3_600_000;
      expect(await alive(busy)).toBe(401);
    } finally {
      await other.close();
    }
  });

  it('refuses a bad PONT_PORTAL_SESSION_IDLE or PONT_PORTAL_SESSION_MAX at start, with the variable named', () => {
    expect(() => loadConfig({ PONT_PORTAL_SESSION_IDLE: 'soon' })).toThrow(/PONT_PORTAL_SESSION_IDLE/);
    expect(() => loadConfig({ PONT_PORTAL_SESSION_MAX: '0s' })).toThrow(/PONT_PORTAL_SESSION_MAX/);
  });

  it('signs the account out everywhere when its password is set again', async () => {
    await person('org-a', 'twice@a.example', 'developer');
    const [laptop, phone] = [await signIn('twice@a.example'), await signIn('twice@a.example')];
    expect((await pont.json(`${API}/session`, { headers: laptop.headers })).status).toBe(200);
    const user = (await pont.services.access.portal.users('org-a')).find((u) => u.email === 'twice@a.example')!;
    const token = await pont.services.access.portal.newPasswordLink(user.id);
    const set = await pont.fetch('/portal/set-password', {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token, password: 'a new password, long', confirm: 'a new password, long' }),
    });
    expect(set.status).toBe(302);
    for (const s of [laptop, phone]) expect((await pont.json(`${API}/session`, { headers: s.headers })).status).toBe(401);
    expect((await signIn('twice@a.example')).status).toBe(401);
    expect((await signIn('twice@a.example', 'a new password, long')).status).toBe(200);
  });

  it('names the cookie __Host-service_session, Secure, when served over HTTPS', () => {
    const config = { ...pont.config, publicUrl: 'https://pont.example.org' };
    expect(sessionCookieName(config)).toBe('__Host-service_session');
    expect(secureCookies(config)).toBe(true);
    expect(secureCookies({ ...pont.config, environment: 'production' })).toBe(true);
    expect(sessionCookieName(pont.config)).toBe('service_session');
  });

  it('sign-out deletes the session', async () => {
    const s = await signIn('admin@a.example');
    expect((await pont.fetch(`${API}/sign-out`, { method: 'POST', headers: s.headers })).status).toBe(204);
    expect((await pont.json(`${API}/session`, { headers: s.headers })).status).toBe(401);
  });

  it('limits failed sign-ins per account: the right password is refused too once the account is locked', async () => {
    await person('org-c', 'locked@c.example', 'developer');
    for (let i = 0; i < 5; i++) expect((await signIn('locked@c.example', 'wrong password!')).status).toBe(401);
    const locked = await signIn('locked@c.example');
    expect(locked.status).toBe(429);
    expect(locked.cookie).toBe('');
  });

  it('counts a sign-in before checking it: 50 concurrent wrong guesses and the right password get at most 5 checks, then 429 (also in another process)', async () => {
    await person('org-c', 'race@c.example', 'developer');
    const counted = async () =>
      Number((await pont.services.db.query<{ count: number }>("SELECT coalesce(max(count), 0) AS count FROM portal_sign_in_failures WHERE key = 'account:race@c.example'")).rows[0]!.count);
    try {
      const guesses = Array.from({ length: 50 }, (_, i) => signIn('race@c.example', `wrong password ${i}`));
      // The right password, sent while the guesses are in flight once the account's counter has reached the limit.
      await eventually(async () => expect(await counted()).toBeGreaterThanOrEqual(MAX_FAILURES_PER_ACCOUNT), { intervalMs: 5 });
      const right = await signIn('race@c.example');
      const statuses = (await Promise.all(guesses)).map((r) => r.status);
      expect(statuses.filter((s) => s === 401).length, statuses.join(' ')).toBeLessThanOrEqual(MAX_FAILURES_PER_ACCOUNT);
      expect(new Set(statuses)).toEqual(new Set([401, 429]));
      expect(right.status).toBe(429);
      expect(right.cookie).toBe('');
      expect(right.body.error_code).toBe('RATE_LIMITED');
      expect((await signIn('race@c.example')).status).toBe(429);
      if (backend === 'postgres') {
        // Another Pont process on the same database counts in the same row.
        const other = await startPont(loadConfig({ PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: pont.config.databaseUrl! }));
        try {
          other.services.access.portal.now = () => clock;
          const res = await fetch(`${other.url}${API}/sign-in`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'race@c.example', password: PASSWORD }) });
          expect(res.status).toBe(429);
        } finally {
          await other.close();
        }
      }
    } finally {
      clock += SIGN_IN_WINDOW_MS; // the address's counter is past its limit too
      adminA = await signIn('admin@a.example');
      adminB = await signIn('admin@b.example');
    }
  });

  it('counts concurrent guesses at many accounts from one address: at most 30 checked', async () => {
    try {
      const statuses = (await Promise.all(Array.from({ length: 60 }, (_, i) => signIn(`spray${i}@c.example`, 'wrong password!')))).map((r) => r.status);
      expect(statuses.filter((s) => s === 401).length, statuses.join(' ')).toBeLessThanOrEqual(MAX_FAILURES_PER_ADDRESS);
      expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(60 - MAX_FAILURES_PER_ADDRESS);
    } finally {
      clock += SIGN_IN_WINDOW_MS;
      adminA = await signIn('admin@a.example');
      adminB = await signIn('admin@b.example');
    }
  });

  it('limits failed sign-ins per address, for every account, until the window ends', async () => {
    // Each guess names another account, so only the address's counter can stop them.
    const statuses: number[] = [];
    for (let i = 0; i <= MAX_FAILURES_PER_ADDRESS && !statuses.includes(429); i++) statuses.push((await signIn(`guess${i}@a.example`, 'wrong password!')).status);
    expect(statuses.at(-1)).toBe(429);
    expect(new Set(statuses.slice(0, -1))).toEqual(new Set([401]));
    expect((await signIn('admin@a.example')).status).toBe(429);
    clock += SIGN_IN_WINDOW_MS;
    adminA = await signIn('admin@a.example');
    adminB = await signIn('admin@b.example');
    expect((await pont.json(`${API}/session`, { headers: adminA.headers })).status).toBe(200);
  });

  it('uses a set-password link once', async () => {
    const created = await pont.services.access.portal.create({ organizationId: 'org-a', email: 'once@a.example' });
    if (created === 'exists') throw new Error('exists');
    const form = { token: created.setPasswordToken, password: PASSWORD, confirm: PASSWORD };
    const post = () => pont.fetch('/portal/set-password', { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form) });
    expect((await post()).status).toBe(302);
    expect((await post()).status).toBe(410);
  });

  it('refuses an open redirect in the return-to parameter', async () => {
    for (const next of ['//evil.example/', 'https://evil.example/', '/\\evil.example', '/portalx', '/api/v1/portal/users', ' /portal']) expect(safeNext(next)).toBe('/portal');
    expect(safeNext('/portal/webhooks?status=exhausted')).toBe('/portal/webhooks?status=exhausted');
    // Through the form: the sign-in page's own token (double-submit cookie) and a hostile next.
    const page = await pont.fetch('/portal/sign-in?next=//evil.example/');
    const cookie = /service_sign_in=[^;]*/.exec(page.headers.get('set-cookie') ?? '')![0];
    const token = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]!;
    const res = await pont.fetch('/portal/sign-in', {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      body: new URLSearchParams({ _csrf: token, email: 'admin@a.example', password: PASSWORD, next: '//evil.example/' }),
    });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('/portal');
  });

  it('refuses the sign-in form without its token (login CSRF)', async () => {
    const res = await pont.fetch('/portal/sign-in', {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ email: 'admin@a.example', password: PASSWORD }),
    });
    expect(res.status).toBe(403);
    expect(res.headers.get('set-cookie') ?? '').not.toMatch(/service_session=[^;]/);
  });
});

describe('portal JSON routes', () => {
  it('creates a client whose secret gets a real token, and lists when it was last used', async () => {
    const created = await pont.json(`${API}/clients`, { method: 'POST', headers: adminA.headers, json: { name: 'Lab system', scopes: ['health_id:verify'] } });
    expect(created.status).toBe(201);
    const token = await pont.json('/api/v1/connect/auth/token', {
      method: 'POST',
      json: { grant_type: 'client_credentials', client_id: created.body.client_id, client_secret: created.body.client_secret },
    });
    expect(token.status).toBe(200);
    const list = await pont.json(`${API}/clients`, { headers: adminA.headers });
    const row = list.body.clients.find((c: any) => c.client_id === created.body.client_id);
    expect(row.last_used_at).not.toBeNull();
    expect(JSON.stringify(list.body)).not.toContain(created.body.client_secret);
    // What the route sends is what the OpenAPI document publishes, no field more (the client libraries' types come from it).
    const published = (await pont.json('/api/openapi.json')).body.components.schemas.PortalClient;
    expect(Object.keys(row).sort()).toEqual(Object.keys(published.properties).sort());
    expect(row.token_endpoint_auth_method).toBe('client_secret');
  });

  it('refuses a state-changing request without the CSRF token, or with a forged one, and changes nothing', async () => {
    const before = (await pont.json(`${API}/clients`, { headers: adminA.headers })).body.clients.length;
    for (const csrf of [undefined, 'forged', adminB.csrf]) {
      const headers: Record<string, string> = { cookie: adminA.cookie, ...(csrf ? { 'x-csrf-token': csrf } : {}) };
      const res = await pont.json(`${API}/clients`, { method: 'POST', headers, json: { name: 'x', scopes: ['health_id:verify'] } });
      expect(res.status).toBe(403);
    }
    expect((await pont.json(`${API}/clients`, { headers: adminA.headers })).body.clients.length).toBe(before);
  });

  it("never shows or changes another organisation's objects (404), through every route", async () => {
    const client = (await pont.json(`${API}/clients`, { method: 'POST', headers: adminA.headers, json: { name: 'A only', scopes: ['webhooks:manage'] } })).body;
    const sub = (await pont.json(`${API}/webhooks/subscriptions`, { method: 'POST', headers: adminA.headers, json: { callback_url: 'http://127.0.0.1:9/hook', subscribed_events: ['patient.created'] } })).body;
    expect(sub.id).toMatch(/^whsub_/);
    const agent = (await pont.json(`${API}/agents`, { method: 'POST', headers: adminA.headers, json: { facility_id: 'fac-a' } })).body;
    const event = (await pont.json(`${API}/webhooks/subscriptions/${sub.id}/test`, { method: 'POST', headers: adminA.headers })).body;
    expect(event.id).toMatch(/^evt_/);

    const attempts: Array<[string, string, unknown?]> = [
      ['POST', `${API}/clients/${client.client_id}/rotate-secret`, { overlap: 'now' }],
      ['POST', `${API}/clients/${client.client_id}/revoke`],
      ['POST', `${API}/webhooks/subscriptions/${sub.id}/rotate-secret`, { overlap: 'now' }],
      ['POST', `${API}/webhooks/subscriptions/${sub.id}/test`],
      ['DELETE', `${API}/webhooks/subscriptions/${sub.id}`],
      ['POST', `${API}/webhooks/events/${event.id}/replay`],
      ['POST', `${API}/agents/${agent.agent_id}/revoke`],
    ];
    for (const [method, path, json] of attempts) {
      const res = await pont.json(path, { method, headers: adminB.headers, json });
      expect(res.status, `${method} ${path}`).toBe(404);
    }
    // The pages too.
    for (const path of [`/portal/clients/${client.client_id}/revoke`, `/portal/webhooks/${sub.id}/unsubscribe`, `/portal/agents/${agent.agent_id}/revoke`]) {
      const res = await pont.fetch(path, { method: 'POST', headers: { cookie: adminB.cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ _csrf: adminB.csrf }) });
      expect(res.status, path).toBe(404);
    }
    const lists = [`${API}/clients`, `${API}/webhooks/subscriptions`, `${API}/agents`, `${API}/webhooks/deliveries`, `${API}/users`];
    for (const path of lists) {
      const text = JSON.stringify((await pont.json(path, { headers: adminB.headers })).body);
      for (const id of [client.client_id, sub.id, agent.agent_id, event.id, 'admin@a.example']) expect(text, path).not.toContain(id);
    }
    // Nothing changed for A.
    const mine = (await pont.json(`${API}/clients`, { headers: adminA.headers })).body.clients.find((c: any) => c.client_id === client.client_id);
    expect(mine.revoked_at).toBeNull();
    expect(mine.previous_secret_expires_at).toBeNull();
    expect((await pont.json(`${API}/webhooks/subscriptions`, { headers: adminA.headers })).body.subscriptions.map((s: any) => s.id)).toContain(sub.id);
    expect((await pont.json(`${API}/agents`, { headers: adminA.headers })).body.agents.find((a: any) => a.agent_id === agent.agent_id).revoked_at).toBeNull();
  });

  it("refuses a patient's pat_ token and an integration client's token on the portal routes, as a header or as the cookie", async () => {
    const hospital = await createTestClient(pont, ['health_id:verify', 'consents:write'], { organizationId: 'org-a' });
    const resolved = await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: hospital.headers, json: { first_name: 'Portia', last_name: 'Token', date_of_birth: '1990-01-01', sex: 'female' } });
    const code = await pont.json(`/api/v1/connect/patient/${resolved.body.health_id}/mobile/pairing-code`, { method: 'POST', headers: hospital.headers });
    const pat = (await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: resolved.body.health_id, code: code.body.code } })).body.access_token as string;
    expect(pat).toMatch(/^pat_/);
    for (const token of [pat, hospital.access_token]) {
      for (const headers of [{ authorization: `Bearer ${token}` }, { cookie: `service_session=${token}` }] as Record<string, string>[]) {
        expect((await pont.json(`${API}/session`, { headers })).status).toBe(401);
        expect((await pont.json(`${API}/clients`, { headers })).status).toBe(401);
        const write = await pont.json(`${API}/clients`, { method: 'POST', headers: { ...headers, 'x-csrf-token': token }, json: { name: 'pat', scopes: ['fhir:read'] } });
        expect(write.status).toBe(401);
        expect(write.body).toMatchObject({ status: 'error', error_code: 'UNAUTHENTICATED' });
        const page = await pont.fetch('/portal/clients', { headers, redirect: 'manual' });
        expect(page.status).toBe(302);
        expect(page.headers.get('location')).toMatch(/^\/portal\/sign-in/);
      }
    }
  });

  it("refuses to replay another organisation's event through the portal, and queues nothing", async () => {
    const subA = (await pont.json(`${API}/webhooks/subscriptions`, { method: 'POST', headers: adminA.headers, json: { callback_url: 'http://127.0.0.1:9/a', subscribed_events: ['patient.updated'] } })).body;
    const subB = (await pont.json(`${API}/webhooks/subscriptions`, { method: 'POST', headers: adminB.headers, json: { callback_url: 'http://127.0.0.1:9/b', subscribed_events: ['patient.updated'] } })).body;
    const event = (await pont.json(`${API}/webhooks/subscriptions/${subA.id}/test`, { method: 'POST', headers: adminA.headers })).body;
    const deliveriesOf = async (signed: Signed) =>
      (await pont.json(`${API}/webhooks/deliveries`, { headers: signed.headers })).body.deliveries.filter((d: any) => d.event_id === event.id).length;
    const before = await deliveriesOf(adminA);
    const replay = await pont.json(`${API}/webhooks/events/${event.id}/replay`, { method: 'POST', headers: adminB.headers });
    expect(replay.status).toBe(404);
    expect(replay.body).toMatchObject({ status: 'error', error_code: 'NOT_FOUND' });
    const page = await pont.fetch(`/portal/webhooks/events/${event.id}/replay`, { method: 'POST', headers: { cookie: adminB.cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ _csrf: adminB.csrf }) });
    expect(page.status).toBe(404);
    expect(await deliveriesOf(adminB)).toBe(0);
    expect(await deliveriesOf(adminA)).toBe(before);
    for (const [signed, id] of [[adminA, subA.id], [adminB, subB.id]] as const) await pont.fetch(`${API}/webhooks/subscriptions/${id}`, { method: 'DELETE', headers: signed.headers });
  });

  it('lets a viewer read but not write (403), and only an admin see and invite users', async () => {
    const viewer = await signIn('viewer@a.example');
    expect((await pont.json(`${API}/clients`, { headers: viewer.headers })).status).toBe(200);
    expect((await pont.json(`${API}/clients`, { method: 'POST', headers: viewer.headers, json: { name: 'x', scopes: ['health_id:verify'] } })).status).toBe(403);
    expect((await pont.json(`${API}/users`, { headers: viewer.headers })).status).toBe(403);
    const page = await pont.fetch('/portal/clients', { method: 'POST', headers: { cookie: viewer.cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ _csrf: viewer.csrf, name: 'x', scopes: 'health_id:verify' }) });
    expect(page.status).toBe(403);
    const read = await (await pont.fetch('/portal/clients', { headers: { cookie: viewer.cookie } })).text();
    expect(read).toContain('<h1>Clients</h1>');
    expect(read).not.toContain('Create client');
    expect(read).not.toContain('/portal/users'); // no Users link for a viewer
    expect((await pont.fetch('/portal/users', { headers: { cookie: viewer.cookie } })).status).toBe(403);
    const invited = await pont.json(`${API}/users`, { method: 'POST', headers: adminA.headers, json: { email: 'dev@a.example', role: 'developer' } });
    expect(invited.status).toBe(201);
    // The developer can create clients, but not hand out break-glass.
    const link = new URL(invited.body.set_password_link);
    expect(await (await pont.fetch(link.pathname + link.search)).text()).toContain('dev@a.example');
    const token = link.searchParams.get('token')!;
    await pont.fetch('/portal/set-password', { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token, password: PASSWORD, confirm: PASSWORD }) });
    const dev = await signIn('dev@a.example');
    expect((await pont.json(`${API}/clients`, { method: 'POST', headers: dev.headers, json: { name: 'ok', scopes: ['health_id:verify'] } })).status).toBe(201);
    const glass = await pont.json(`${API}/clients`, { method: 'POST', headers: dev.headers, json: { name: 'glass', scopes: ['emergency:access'] } });
    expect(glass.status).toBe(422);
    expect(glass.body.details[0].field).toBe('body.scopes');
    expect((await pont.json(`${API}/users`, { headers: dev.headers })).status).toBe(403);
    expect(invited.body.set_password_link).toMatch(/\/portal\/set-password\?token=/);
    expect(invited.body.user.organization_id).toBe('org-a');
  });

  it("answers an invitation of an address that has an account (another organisation's admin) exactly as a new one, and changes nothing", async () => {
    const shape = (body: any) => ({
      keys: Object.keys(body).sort(),
      user: Object.keys(body.user).sort(),
      id: /^pu_[0-9a-f]{24}$/.test(body.user.id),
      org: body.user.organization_id,
      active: body.user.active,
      link: /\/portal\/set-password\?token=[A-Za-z0-9_-]{43}$/.test(body.set_password_link),
    });
    const fresh = await pont.json(`${API}/users`, { method: 'POST', headers: adminB.headers, json: { email: 'fresh@b.example', role: 'admin' } });
    const taken = await pont.json(`${API}/users`, { method: 'POST', headers: adminB.headers, json: { email: 'Admin@A.example', role: 'admin' } });
    expect(fresh.status).toBe(201);
    expect(taken.status, JSON.stringify(taken.body)).toBe(201);
    expect(shape(taken.body)).toEqual(shape(fresh.body));
    expect(taken.body.user).toMatchObject({ email: 'admin@a.example', role: 'admin', organization_id: 'org-b', active: false });
    // The page answers alike too.
    const form = (email: string) =>
      pont.fetch('/portal/users', { method: 'POST', headers: { cookie: adminB.cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ _csrf: adminB.csrf, email, role: 'viewer' }) });
    const [freshPage, takenPage] = [await form('fresh2@b.example'), await form('viewer@a.example')];
    expect(takenPage.status).toBe(freshPage.status);
    expect((await takenPage.text()).replace(/token=[A-Za-z0-9_%-]+/g, '').replace(/viewer@a\.example/g, 'X')).toBe((await freshPage.text()).replace(/token=[A-Za-z0-9_%-]+/g, '').replace(/fresh2@b\.example/g, 'X'));
    // The existing account is A's as before: same organisation and role, same password; B's link does not set it.
    const a = await signIn('admin@a.example');
    expect(a.status).toBe(200);
    expect(a.body.user).toMatchObject({ organization_id: 'org-a', role: 'admin' });
    const token = new URL(taken.body.set_password_link).searchParams.get('token')!;
    const hijack = await pont.fetch('/portal/set-password', { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token, password: 'b owns it now!!', confirm: 'b owns it now!!' }) });
    expect(hijack.status).toBe(410);
    expect((await signIn('admin@a.example', 'b owns it now!!')).status).toBe(401);
    adminA = a;
  });

  it('answers sign-in alike for a wrong password, an unknown address and an account without a password yet', async () => {
    await pont.services.access.portal.create({ organizationId: 'org-a', email: 'no-password@a.example', role: 'viewer' });
    const answers = await Promise.all(['admin@a.example', 'nobody-at-all@a.example', 'no-password@a.example'].map((email) => signIn(email, 'not the password!')));
    expect(answers.map((a) => a.status)).toEqual([401, 401, 401]);
    expect(answers[1]!.body).toEqual(answers[0]!.body);
    expect(answers[2]!.body).toEqual(answers[0]!.body);
    expect(answers.map((a) => a.setCookie)).toEqual(['', '', '']);
  });

  it('shows the organisation only its own audit rows, filtered by Health ID, and as CSV', async () => {
    const client = await createTestClient(pont, ['health_id:verify'], { organizationId: 'org-a' });
    const resolve = await pont.json('/api/v1/connect/patients/resolve', {
      method: 'POST',
      headers: client.headers,
      json: { first_name: 'Ana', last_name: 'Diallo', date_of_birth: '1990-01-01', gender: 'female', purpose: '=cmd|evil' },
    });
    expect(resolve.status).toBeLessThan(300);
    const healthId = resolve.body.health_id as string;
    const a = await pont.json(`${API}/activity?health_id=${healthId}`, { headers: adminA.headers });
    expect(a.status).toBe(200);
    expect(a.body.activity.length).toBeGreaterThan(0);
    expect(a.body.activity.every((r: any) => r.health_id === healthId)).toBe(true);
    const b = await pont.json(`${API}/activity?health_id=${healthId}`, { headers: adminB.headers });
    expect(b.body.activity).toEqual([]);
    const csv = await pont.fetch(`${API}/activity?format=csv&health_id=${healthId}`, { headers: adminA.headers });
    expect(csv.headers.get('content-type')).toMatch(/text\/csv/);
    expect(await csv.text()).toContain(healthId);
    expect((await pont.json(`${API}/activity?from=yesterday`, { headers: adminA.headers })).status).toBe(422);
  });

  // Issue 42: the rotation of a client registered with a key set was answered "No active client" (404), of a client that exists and is active.
  it('answers the secret rotation of a client registered with a key set 409, saying how its keys are rotated; revoked, unknown and other organisations\' clients as before (404)', async () => {
    // Made as `pont clients create --org org-a … --jwks-uri URL` and `… --jwks FILE` make them.
    const keyClient = async (name: string, keys: { jwks?: unknown; jwksUri?: string }) =>
      createKeyClient(pont.services.db, await keyClientInput(true).parseAsync({ name, organizationId: 'org-a', scopes: ['fhir:read'], allPatients: false, ...keys }));
    const { publicKey } = await generateKeyPair('ES384', { extractable: true });
    const byUrl = await keyClient('Hosted keys', { jwksUri: 'http://127.0.0.1:9/jwks.json' });
    const inline = await keyClient('Inline keys', { jwks: { keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES384' }] } });
    const rotate = (signed: Signed, id: string) => pont.json(`${API}/clients/${id}/rotate-secret`, { method: 'POST', headers: signed.headers, json: { overlap: 'now' } });
    const rotatePage = async (signed: Signed, id: string) => {
      const res = await pont.fetch(`/portal/clients/${id}/rotate`, { method: 'POST', headers: { cookie: signed.cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ _csrf: signed.csrf, overlap: 'now' }) });
      return { status: res.status, text: await res.text() };
    };

    const url = await rotate(adminA, byUrl.client_id);
    expect(url.status, JSON.stringify(url.body)).toBe(409);
    expect(url.body).toMatchObject({ status: 'error', error_code: 'CONFLICT' });
    expect(url.body.message).toContain(`Client ${byUrl.client_id} is registered with a key set (jwks_uri http://127.0.0.1:9/jwks.json), not a secret: it has no secret to rotate.`);
    expect(url.body.message).toContain('To rotate its keys, publish the new key (a new kid) at http://127.0.0.1:9/jwks.json beside the old one');
    const inl = await rotate(adminA, inline.client_id);
    expect(inl.status, JSON.stringify(inl.body)).toBe(409);
    expect(inl.body).toMatchObject({ status: 'error', error_code: 'CONFLICT' });
    expect(inl.body.message).toContain(`Client ${inline.client_id} is registered with a key set (inline JWKS), not a secret: it has no secret to rotate.`);
    expect(inl.body.message).toMatch(/To rotate its keys, ask your Pont operator to register it again with the new public keys.*then revoke this one/);
    for (const body of [url.body, inl.body]) expect(body.message).not.toMatch(/No active client|not found/i);
    // The page answers the same.
    const page = await rotatePage(adminA, byUrl.client_id);
    expect(page.status).toBe(409);
    expect(page.text).toContain(`Client ${byUrl.client_id} is registered with a key set (jwks_uri http://127.0.0.1:9/jwks.json)`);
    // Nothing changed: still no secret.
    const listed = (await pont.json(`${API}/clients`, { headers: adminA.headers })).body.clients.filter((c: any) => [byUrl.client_id, inline.client_id].includes(c.client_id));
    expect(listed.map((c: any) => [c.token_endpoint_auth_method, c.previous_secret_expires_at, c.revoked_at])).toEqual([
      ['private_key_jwt', null, null],
      ['private_key_jwt', null, null],
    ]);

    // Another organisation's key-set client is answered as an unknown id is (404), never as a key set.
    const unknown = await rotate(adminB, 'cli_nobody');
    const other = await rotate(adminB, byUrl.client_id);
    expect(other.status).toBe(404);
    expect({ ...other.body, message: other.body.message.replace(byUrl.client_id, 'ID') }).toEqual({ ...unknown.body, message: unknown.body.message.replace('cli_nobody', 'ID') });
    expect(JSON.stringify(other.body)).not.toMatch(/key set|jwks/i);
    const otherPage = await rotatePage(adminB, byUrl.client_id);
    expect(otherPage.status).toBe(404);
    expect(otherPage.text).not.toMatch(/key set|jwks/i);
    expect((await rotate(adminA, 'cli_nobody')).status).toBe(404);

    // A revoked client, with a key set or a secret, keeps its answer.
    const secret = (await pont.json(`${API}/clients`, { method: 'POST', headers: adminA.headers, json: { name: 'Retired', scopes: ['health_id:verify'] } })).body;
    for (const id of [inline.client_id, secret.client_id]) {
      expect((await pont.json(`${API}/clients/${id}/revoke`, { method: 'POST', headers: adminA.headers })).status).toBe(200);
      const revoked = await rotate(adminA, id);
      expect(revoked.status).toBe(404);
      expect(revoked.body).toMatchObject({ status: 'error', error_code: 'NOT_FOUND', message: `No active client ${id} of this organisation` });
    }
  });

  it('shows no "Rotate secret" for a client registered with a key set, but how its keys are rotated', async () => {
    const input = await keyClientInput(true).parseAsync({ name: 'Listed keys', organizationId: 'org-a', scopes: ['fhir:read'], allPatients: false, jwksUri: 'http://127.0.0.1:9/listed.json' });
    const keys = await createKeyClient(pont.services.db, input);
    const secret = (await pont.json(`${API}/clients`, { method: 'POST', headers: adminA.headers, json: { name: 'Listed secret', scopes: ['health_id:verify'] } })).body;
    const page = await (await pont.fetch('/portal/clients', { headers: { cookie: adminA.cookie } })).text();
    const row = (id: string) => page.slice(page.lastIndexOf('<tr>', page.indexOf(`<code>${id}</code>`)), page.indexOf('</tr>', page.indexOf(`<code>${id}</code>`)));
    expect(row(keys.client_id)).not.toContain('Rotate secret');
    expect(row(keys.client_id)).not.toContain(`/portal/clients/${keys.client_id}/rotate`);
    expect(row(keys.client_id)).toContain('To rotate its keys, publish the new key (a new kid) at http://127.0.0.1:9/listed.json beside the old one');
    expect(row(keys.client_id)).toContain('Revoke Listed keys');
    expect(row(secret.client_id)).toContain('Rotate secret of Listed secret');
  });

  it('is documented in the OpenAPI document with SessionAuth', async () => {
    const doc = (await pont.json('/api/openapi.json')).body;
    expect(doc.components.securitySchemes.SessionAuth).toMatchObject({ type: 'apiKey', in: 'cookie', name: 'service_session' });
    expect(doc.paths[`${API}/clients`].get.security).toEqual([{ SessionAuth: [] }]);
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(['PortalClient', 'PortalAgent', 'PortalActivity', 'PortalUser', 'PortalSession']));
    expect(doc.paths[`${API}/users`].post.description ?? doc.paths[`${API}/users`].post.summary).toMatch(/admin/i);
    const rotate = doc.paths[`${API}/clients/{client_id}/rotate-secret`].post;
    expect(rotate.description).toMatch(/key set/);
    expect(rotate.responses['409'].description).toMatch(/key set/);
    expect(rotate.responses['409'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
    expect(rotate.responses['404'].description).toMatch(/revoked/);
  });
});

describe('portal pages', () => {
  it('serve a strict content security policy and keep what was typed next to the problem', async () => {
    const res = await pont.fetch('/portal/clients', {
      method: 'POST',
      headers: { cookie: adminA.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: adminA.csrf, name: 'My <script> client' }),
    });
    expect(res.status).toBe(422);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("form-action 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    const page = await res.text();
    expect(page).toContain('id="scopes-error"');
    expect(page).toContain('value="My &lt;script&gt; client"');
    expect(page).not.toContain('<script> client');
  });

  it('answer hostile forms with a page, never a 500', async () => {
    const client = (await pont.json(`${API}/clients`, { method: 'POST', headers: adminA.headers, json: { name: 'Hostile', scopes: ['health_id:verify'] } })).body;
    const post = (path: string, body: string, type = 'application/x-www-form-urlencoded') =>
      pont.fetch(path, { method: 'POST', headers: { cookie: adminA.cookie, 'content-type': type }, body });
    const csrf = `_csrf=${encodeURIComponent(adminA.csrf)}`;
    expect((await post(`/portal/clients/${client.client_id}/rotate`, `${csrf}&overlap=forever`)).status).toBe(422);
    expect((await post(`/portal/clients/${'x'.repeat(5000)}/revoke`, csrf)).status).toBe(404);
    expect((await post('/portal/clients', `${csrf}&name=${'n'.repeat(100_000)}`)).status).toBe(413);
    expect((await post('/portal/clients', '{"name":"x"}', 'application/json')).status).toBe(415);
    expect((await post('/portal/webhooks/replay-exhausted', `${csrf}&since=yesterday`)).status).toBe(422);
    expect((await pont.fetch('/portal/activity?from=31-12-2026', { headers: { cookie: adminA.cookie } })).status).toBe(422);
    const mine = (await pont.json(`${API}/clients`, { headers: adminA.headers })).body.clients.find((c: any) => c.client_id === client.client_id);
    expect(mine.previous_secret_expires_at).toBeNull();
  });

  it('refuse a form without the CSRF token (403) and change nothing', async () => {
    const before = (await pont.json(`${API}/clients`, { headers: adminA.headers })).body.clients.length;
    const res = await pont.fetch('/portal/clients', {
      method: 'POST',
      headers: { cookie: adminA.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ name: 'x', scopes: 'health_id:verify' }),
    });
    expect(res.status).toBe(403);
    expect((await pont.json(`${API}/clients`, { headers: adminA.headers })).body.clients.length).toBe(before);
  });
});

describe('portal JSON routes, more', () => {
  it('replays every exhausted delivery since a time, for the own organisation only', async () => {
    const sub = (await pont.json(`${API}/webhooks/subscriptions`, { method: 'POST', headers: adminA.headers, json: { callback_url: 'http://127.0.0.1:9/x', subscribed_events: ['consent.granted'] } })).body;
    // A delivery made exhausted as the worker leaves it after its 7th failed attempt.
    const event = (await pont.json(`${API}/webhooks/subscriptions/${sub.id}/test`, { method: 'POST', headers: adminA.headers })).body;
    await pont.services.db.query(`UPDATE webhook_deliveries SET status = 'exhausted', attempts = 7, next_attempt_at = NULL, lease_token = NULL WHERE event_id = $1`, [event.id]);
    await pont.services.db.query(
      `INSERT INTO webhook_delivery_attempts (delivery_id, round, attempt, started_at, duration_ms, status_code, error, succeeded, response_excerpt)
       SELECT id, 1, 7, now(), 5, 500, 'HTTP 500', false, 'down' FROM webhook_deliveries WHERE event_id = $1`,
      [event.id],
    );
    const since = new Date(Date.now() - 60_000).toISOString();
    expect((await pont.json(`${API}/webhooks/replay-exhausted`, { method: 'POST', headers: adminB.headers, json: { since } })).body.replayed).toEqual([]);
    const replayed = await pont.json(`${API}/webhooks/replay-exhausted`, { method: 'POST', headers: adminA.headers, json: { since } });
    expect(replayed.status).toBe(202);
    expect(replayed.body.replayed).toContain(event.id);
    expect((await pont.json(`${API}/webhooks/replay-exhausted`, { method: 'POST', headers: adminA.headers, json: { since: 'last week' } })).status).toBe(422);
  });

  it('sends a test event to the chosen subscription only, and replays it to that one only', async () => {
    const subscribe = async (path: string) =>
      (await pont.json(`${API}/webhooks/subscriptions`, { method: 'POST', headers: adminA.headers, json: { callback_url: `http://127.0.0.1:9/${path}`, subscribed_events: ['encounter.created'] } })).body;
    const chosen = await subscribe('chosen');
    const other = await subscribe('other');
    const event = (await pont.json(`${API}/webhooks/subscriptions/${chosen.id}/test`, { method: 'POST', headers: adminA.headers })).body;
    const deliveriesOf = async (subscriptionId: string) =>
      (await pont.json(`${API}/webhooks/deliveries?subscription_id=${subscriptionId}`, { headers: adminA.headers })).body.deliveries.filter((d: any) => d.event_id === event.id);
    expect(await deliveriesOf(chosen.id)).toHaveLength(1);
    expect(await deliveriesOf(other.id)).toEqual([]);
    const replayed = await pont.json(`${API}/webhooks/events/${event.id}/replay`, { method: 'POST', headers: adminA.headers });
    expect(replayed.body.deliveries.map((d: any) => d.subscription_id)).toEqual([chosen.id]);
    expect(await deliveriesOf(other.id)).toEqual([]);
  });

  it('counts the consents granted to the own organisation only', async () => {
    const client = await createTestClient(pont, ['health_id:verify', 'consents:write'], { organizationId: 'org-a' });
    const granted = async (person: Record<string, string>, consent: Record<string, unknown>) => {
      const patient = await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: client.headers, json: { ...person, gender: 'female' } });
      const grant = await pont.json(`/api/v1/connect/patient/${patient.body.health_id}/consent/grant`, {
        method: 'POST',
        headers: client.headers,
        json: { expires_at: '2099-01-01T00:00:00Z', ...consent },
      });
      expect(grant.status, JSON.stringify(grant.body)).toBeLessThan(300);
    };
    await granted({ first_name: 'Sara', last_name: 'Okafor', date_of_birth: '1985-05-05' }, { consent_type: CONSENT_TYPE });
    // An artefact: research, prescriptions of 2024 only.
    await granted(
      { first_name: 'Rhea', last_name: 'Search', date_of_birth: '1986-06-06' },
      { consent_type: 'prescriptions', purpose_of_use: 'DSRCH', hi_types: ['Prescription'], date_range: { from: '2024-01-01', to: '2024-12-31' } },
    );
    const a = (await pont.json(`${API}/consents`, { headers: adminA.headers })).body.counts;
    expect(a.reduce((n: number, c: any) => n + c.count, 0)).toBeGreaterThan(1);
    expect(a).toContainEqual({ state: 'active', consent_type: 'prescriptions', purpose_of_use: 'DSRCH', count: 1, narrowed: 1 });
    expect(a.filter((c: any) => c.purpose_of_use === 'CAREMGT').every((c: any) => c.narrowed === 0)).toBe(true);
    expect((await pont.json(`${API}/consents`, { headers: adminB.headers })).body.counts).toEqual([]);
  });

  it("keeps the first 1 KB of the receiver's answer with each attempt", async () => {
    const receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(503, { 'content-type': 'text/plain' }).end('é'.repeat(3000)));
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/big`;
      const sub = (await pont.json(`${API}/webhooks/subscriptions`, { method: 'POST', headers: adminA.headers, json: { callback_url: url, subscribed_events: ['lab_result.released'] } })).body;
      await pont.json(`${API}/webhooks/subscriptions/${sub.id}/test`, { method: 'POST', headers: adminA.headers });
      const attempt = async () => (await pont.json(`${API}/webhooks/deliveries?subscription_id=${sub.id}`, { headers: adminA.headers })).body.deliveries[0]?.attempts[0];
      await expect.poll(attempt, { timeout: 20_000 }).toBeDefined();
      const first = await attempt();
      expect(first.status_code).toBe(503);
      expect(Buffer.byteLength(first.response_excerpt)).toBeLessThanOrEqual(1024);
      expect(first.response_excerpt).toBe('é'.repeat(512));
    } finally {
      receiver.close();
    }
  });

  it("shows an agent's last heartbeat, version and clock skew", async () => {
    const agent = (await pont.json(`${API}/agents`, { method: 'POST', headers: adminA.headers, json: { facility_id: 'fac-skew' } })).body;
    const ahead = Math.floor(Date.now() / 1000) + 30;
    const beat = await pont.json('/api/v1/bridge/heartbeat', {
      method: 'POST',
      headers: { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(ahead) },
      json: { agent_id: agent.agent_id, facility_id: 'fac-skew', version: '2.4.1' },
    });
    expect(beat.status).toBe(200);
    const listed = (await pont.json(`${API}/agents`, { headers: adminA.headers })).body.agents.find((a: any) => a.agent_id === agent.agent_id);
    expect(listed).toMatchObject({ last_version: '2.4.1', facility_id: 'fac-skew' });
    expect(listed.clock_skew_seconds).toBeGreaterThanOrEqual(28);
    expect(listed.clock_skew_seconds).toBeLessThanOrEqual(30);
    expect(JSON.stringify(listed)).not.toContain(agent.agent_key);

    // The HL7 v2 agent reports its backlog with its heartbeat (docs/hl7-v2.md): the page shows it on its own.
    const hl7 = await pont.json('/api/v1/bridge/heartbeat', {
      method: 'POST',
      headers: { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)) },
      json: { agent_id: agent.agent_id, facility_id: 'fac-skew', version: 'pont-bridge-agent 0.1.0 hl7v2; backlog 1234' },
    });
    expect(hl7.status).toBe(200);
    const page = await (await pont.fetch('/portal/agents', { headers: { cookie: adminA.cookie } })).text();
    const section = page.slice(page.indexOf(agent.agent_id), page.indexOf('</section>', page.indexOf(agent.agent_id)));
    expect(section).toMatch(/Backlog: 1,234 messages/);
  });

  it('refuses hostile input with the documented shape, never a 500', async () => {
    const cases: Array<[string, unknown]> = [
      [`${API}/clients`, { name: 'x'.repeat(10_000), scopes: ['health_id:verify'] }],
      [`${API}/clients`, { name: 'x', scopes: ['not:a:scope'] }],
      [`${API}/clients`, { name: 'x', scopes: 'health_id:verify' }],
      [`${API}/webhooks/subscriptions`, { callback_url: 'http://10.0.0.1/x', subscribed_events: ['patient.created'] }],
      [`${API}/agents`, { facility_id: '../../etc' }],
      [`${API}/users`, { email: 'a@b.c', role: 'owner' }],
    ];
    for (const [path, json] of cases) {
      const res = await pont.json(path, { method: 'POST', headers: adminA.headers, json });
      expect(res.status, path).toBe(422);
      expect(res.body.status).toBe('error');
    }
    const deep = '['.repeat(5000) + ']'.repeat(5000);
    const res = await pont.json(`${API}/clients`, { method: 'POST', headers: { ...adminA.headers, 'content-type': 'application/json' }, body: deep });
    expect(res.status).toBe(400);
  });
});

describe('pont portal-users create', () => {
  it('prints the person and a one-time set-password link; a bad role is a usage error', async () => {
    const run = promisify(execFile);
    const { env, cleanup } = await commandDatabase();
    try {
      const opts = { env: { ...process.env, ...env, PONT_PUBLIC_URL: 'https://pont.example.org' } };
      const { stdout } = await run(process.execPath, pontCommand('portal-users', 'create', '--org', 'org-1', '--email', 'Ana@Example.org', '--role', 'admin'), opts);
      const printed = JSON.parse(stdout);
      expect(printed).toMatchObject({ organization_id: 'org-1', email: 'ana@example.org', role: 'admin', active: false, link_expires_in_hours: 24 });
      expect(printed.set_password_link).toMatch(/^https:\/\/pont\.example\.org\/portal\/set-password\?token=[A-Za-z0-9_-]{43}$/);
      const bad = await run(process.execPath, pontCommand('portal-users', 'create', '--org', 'org-1', '--email', 'b@example.org', '--role', 'owner'), opts).catch((e) => e);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--role');
    } finally {
      await cleanup();
    }
  }, 300_000);
});

describe('portal helpers', () => {
  it('escapes by default', () => {
    expect(html`<p>${'<b>"x"&\''}</p>`.text).toBe('<p>&lt;b&gt;&quot;x&quot;&amp;&#39;</p>');
    expect(html`<ul>${['<a>', html`<li>ok</li>`]}</ul>`.text).toBe('<ul>&lt;a&gt;<li>ok</li></ul>');
  });
  it('defuses spreadsheet formulas in CSV', () => {
    expect(csvField('=HYPERLINK("x")')).toBe(`"'=HYPERLINK(""x"")"`);
    expect(csvField('plain')).toBe('"plain"');
    expect(csvField(null)).toBe('""');
  });
});
