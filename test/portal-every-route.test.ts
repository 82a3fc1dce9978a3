import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness';
import { allRoutes } from '../src/app';
import { PORTAL_API } from '../src/routes/portal';
import { PORTAL, portalPages } from '../src/portal/pages';

/**
 * Issue 24, "how this will be checked": every portal route is tried without CSRF, with another organisation's
 * session, and with no session at all. The routes are not listed here: they are read from the code's own tables
 * (the route list the router and the OpenAPI document are built from, and the portal pages' router), so a route
 * added tomorrow is tried too, and fails here if it changes something without the session's CSRF token.
 */
const PASSWORD = 'correct horse battery staple';

interface Signed {
  cookie: string;
  csrf: string;
}

interface Route {
  kind: 'json' | 'page';
  method: string; // upper case
  /** As the table writes it: `/api/v1/portal/clients/{client_id}/revoke`, `/portal/clients/:id/revoke`. */
  template: string;
  /** Path parameters, in order, each with the path segment before it. */
  params: Array<{ name: string; after: string }>;
  /** JSON routes: security kind in the route list. */
  security?: string;
  operationId?: string;
}

const label = (r: Route) => `${r.method} ${r.template}`;
const changes = (r: Route) => !['GET', 'HEAD'].includes(r.method);

/**
 * Which object of A a path parameter names: by its name (JSON routes) or, for a page's `:id`, by the segment before
 * it. A route taking an id of some other kind fails the test until A is given such an object below.
 */
const OBJECT_OF: Record<string, ObjectKind> = {
  client_id: 'client',
  clients: 'client',
  subscription_id: 'subscription',
  subscriptions: 'subscription',
  webhooks: 'subscription', // the pages call a subscription a webhook: /portal/webhooks/:id/…
  event_id: 'event',
  events: 'event',
  agent_id: 'agent',
  agents: 'agent',
};
type ObjectKind = 'client' | 'subscription' | 'event' | 'agent';

/**
 * Bodies that would succeed on A's own objects (so that a route missing its CSRF check would change something):
 * JSON routes by operationId, pages by route. Routes not named here are sent an empty body: a route that changes
 * something without a CSRF check still fails (it answers 2xx or 422 rather than 403).
 */
const since = () => new Date(Date.now() - 3_600_000).toISOString();
const JSON_BODIES: Record<string, () => unknown> = {
  portalCreateClient: () => ({ name: 'probe client', scopes: ['health_id:verify'] }),
  portalRotateClientSecret: () => ({ overlap: 'now' }),
  portalSubscribe: () => ({ callback_url: 'http://127.0.0.1:9/probe', subscribed_events: ['patient.created'] }),
  portalRotateWebhookSecret: () => ({ overlap: 'now' }),
  portalReplayExhausted: () => ({ since: since() }),
  portalCreateAgent: () => ({ facility_id: 'fac-probe' }),
  portalInviteUser: () => ({ email: 'probe@a.example', role: 'viewer' }),
};
const PAGE_BODIES: Record<string, () => Record<string, string | string[]>> = {
  'POST /portal/sign-in': () => ({ email: 'admin@a.example', password: PASSWORD, next: '/portal' }),
  'POST /portal/clients': () => ({ name: 'probe client', scopes: ['health_id:verify'] }),
  'POST /portal/clients/:id/rotate': () => ({ overlap: 'now' }),
  'POST /portal/webhooks': () => ({ callback_url: 'http://127.0.0.1:9/probe', subscribed_events: ['patient.created'] }),
  'POST /portal/webhooks/:id/rotate': () => ({ overlap: 'now' }),
  'POST /portal/webhooks/replay-exhausted': () => ({ since: since().slice(0, 16) }),
  'POST /portal/agents': () => ({ facility_id: 'fac-probe' }),
  'POST /portal/users': () => ({ email: 'probe@a.example', role: 'viewer' }),
};

/**
 * State-changing routes that no session authorises, so no session CSRF token protects them; each is tried below
 * against what protects it instead.
 * - JSON sign-in: JSON only, which a cross-site form or a CORS-simple request cannot send.
 * - The set-password form: the one-time token of the link is what authorises it.
 * (The sign-in form has a token of its own, a double-submit cookie, and is tried as every other route.)
 */
const NO_SESSION_CHANGES = ['POST /api/v1/portal/sign-in', 'POST /portal/set-password'];

/** Pages that answer without a session (they are how one gets a session), with what they answer without one. */
const PUBLIC_PAGES: Record<string, number> = {
  'GET /portal/assets/portal.css': 200,
  'GET /portal/assets/portal.js': 200,
  'GET /portal/sign-in': 200,
  'POST /portal/sign-in': 403, // no token of the sign-in form
  'GET /portal/set-password': 410, // no link token
  'POST /portal/set-password': 410,
};

let pont: TestServer;
let adminA: Signed;
let adminB: Signed;
let routes: Route[];
const objectsOfA = {} as Record<ObjectKind, string>;
let invitedToken: string;

/** A portal person with a password (the set-password link used at once). */
async function person(org: string, email: string, role: 'admin' | 'developer' | 'viewer'): Promise<void> {
  const created = await pont.services.access.portal.create({ organizationId: org, email, role });
  if (created === 'exists' || !(await pont.services.access.portal.setPassword(created.setPasswordToken, PASSWORD))) throw new Error(`no portal account ${email}`);
}

async function signIn(email: string): Promise<Signed> {
  const res = await pont.json(`${PORTAL_API}/sign-in`, { method: 'POST', json: { email, password: PASSWORD } });
  expect(res.status, email).toBe(200);
  const cookie = /service_session=[^;]*/.exec(res.headers.get('set-cookie') ?? '')?.[0] ?? '';
  return { cookie, csrf: res.body.csrf_token as string };
}

/** Every portal route, from the route list (JSON) and the pages' router, checked against the OpenAPI document served. */
async function enumerate(): Promise<Route[]> {
  const json: Route[] = allRoutes(pont.services)
    .filter((r) => r.path === PORTAL_API || r.path.startsWith(`${PORTAL_API}/`))
    .map((r) => ({
      kind: 'json',
      method: r.method.toUpperCase(),
      template: r.path,
      params: [...r.path.matchAll(/\/([^/]+)\/\{([^}]+)\}/g)].map((m) => ({ after: m[1]!, name: m[2]! })),
      security: r.security.kind,
      operationId: r.operationId,
    }));
  // The document the app serves names the same routes, each with SessionAuth unless public.
  const doc = (await pont.json('/api/openapi.json')).body;
  const documented: string[] = [];
  for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
    if (!path.startsWith(PORTAL_API)) continue;
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'put', 'post', 'patch', 'delete'].includes(method)) continue;
      documented.push(`${method.toUpperCase()} ${path}`);
      const route = json.find((r) => r.method === method.toUpperCase() && r.template === path);
      expect(op.security, `${method} ${path}`).toEqual(route?.security === 'public' ? [] : [{ SessionAuth: [] }]);
    }
  }
  expect(documented.sort()).toEqual(json.map(label).sort());

  const pages: Route[] = [];
  for (const layer of portalPages(pont.services).stack) {
    const path = String(layer.path);
    for (const method of layer.methods.filter((m) => m !== 'HEAD')) {
      pages.push({ kind: 'page', method, template: path, params: [...path.matchAll(/\/([^/]+)\/:([A-Za-z0-9_]+)/g)].map((m) => ({ after: m[1]!, name: m[2]! })) });
    }
  }
  return [...json, ...pages];
}

/** The route's path with A's objects in its parameters. */
function pathOf(route: Route): string {
  let path = route.template;
  for (const p of route.params) {
    const kind = OBJECT_OF[p.name] ?? OBJECT_OF[p.after];
    if (!kind) throw new Error(`${label(route)}: the test has no object of A for parameter ${p.name}; give A one`);
    path = path.replace(route.kind === 'json' ? `{${p.name}}` : `:${p.name}`, encodeURIComponent(objectsOfA[kind]));
  }
  return path;
}

/** Sends the route's request as its client would (JSON with X-CSRF-Token; a page's form with _csrf), never following a redirect. */
async function send(route: Route, as: { cookie?: string; csrf?: string }): Promise<{ status: number; location: string | null; text: string; setCookie: string }> {
  const path = pathOf(route);
  const headers: Record<string, string> = as.cookie ? { cookie: as.cookie } : {};
  let body: string | undefined;
  if (route.kind === 'json') {
    if (as.csrf !== undefined) headers['x-csrf-token'] = as.csrf;
    if (changes(route)) {
      const sample = JSON_BODIES[route.operationId!];
      if (sample || route.method !== 'DELETE') {
        headers['content-type'] = 'application/json';
        body = JSON.stringify(sample ? sample() : {});
      }
    }
  } else if (changes(route)) {
    const form = new URLSearchParams();
    for (const [name, value] of Object.entries(PAGE_BODIES[label(route)]?.() ?? {})) for (const v of [value].flat()) form.append(name, v);
    if (as.csrf !== undefined) form.set('_csrf', as.csrf);
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = form.toString();
  }
  const res = await pont.fetch(path, { method: route.method, headers, body, redirect: 'manual' });
  return { status: res.status, location: res.headers.get('location'), text: await res.text(), setCookie: res.headers.get('set-cookie') ?? '' };
}

/** What A has, as A's own JSON routes show it, and the secrets and sessions behind it (which the lists never show). */
async function stateOfA() {
  const get = async (path: string) => {
    const res = await pont.json(`${PORTAL_API}${path}`, { headers: { cookie: adminA.cookie } });
    expect(res.status, `A's GET ${path}`).toBe(200);
    return res.body;
  };
  const db = pont.services.db;
  const rows = async (sql: string) => (await db.query(sql, ['org-a'])).rows;
  return {
    session: (await get('/session')).user,
    clients: (await get('/clients')).clients.map(({ last_used_at: _, ...c }: any) => c),
    subscriptions: (await get('/webhooks/subscriptions')).subscriptions,
    deliveries: (await get('/webhooks/deliveries')).deliveries.map((d: any) => ({ id: d.id, event_id: d.event_id, subscription_id: d.subscription_id, status: d.status, round: d.round })),
    agents: (await get('/agents')).agents,
    users: (await get('/users')).users,
    clientSecrets: await rows('SELECT client_id, secret_hash, previous_secret_hash FROM oauth_clients WHERE organization_id = $1 ORDER BY client_id'),
    webhookSecrets: await rows('SELECT id, secret_encrypted, previous_secret_encrypted, deleted_at FROM webhook_subscriptions WHERE organization_id = $1 ORDER BY id'),
    agentKeys: await rows('SELECT agent_id, key_sha256, revoked_at FROM bridge_agents WHERE organization_id = $1 ORDER BY agent_id'),
    events: await rows('SELECT id FROM events WHERE organization_id = $1 ORDER BY id'),
    accounts: await rows('SELECT id, email, role, password_hash FROM portal_users WHERE organization_id = $1 ORDER BY id'),
    sessions: await rows('SELECT count(*)::int AS n FROM portal_sessions s JOIN portal_users u ON u.id = s.user_id WHERE u.organization_id = $1'),
  };
}

beforeAll(async () => {
  // The portal's rate limit (600 requests a minute per person) is not what is tried here.
  pont = await startTestServer({ PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true', PONT_RATE_LIMITS: 'portal=1000000/60' });
  await person('org-a', 'admin@a.example', 'admin');
  await person('org-b', 'admin@b.example', 'admin');
  const invited = await pont.services.access.portal.create({ organizationId: 'org-a', email: 'invited@a.example', role: 'developer' });
  if (invited === 'exists') throw new Error('exists');
  invitedToken = invited.setPasswordToken;
  adminA = await signIn('admin@a.example');
  adminB = await signIn('admin@b.example');

  // A's objects, made through A's own routes.
  const asA = (path: string, json?: unknown) =>
    pont.json(`${PORTAL_API}${path}`, { method: 'POST', headers: { cookie: adminA.cookie, 'x-csrf-token': adminA.csrf }, json });
  const client = await asA('/clients', { name: 'A client', scopes: ['health_id:verify'] });
  const sub = await asA('/webhooks/subscriptions', { callback_url: 'http://127.0.0.1:9/a', subscribed_events: ['patient.created'] });
  const agent = await asA('/agents', { facility_id: 'fac-a' });
  expect([client.status, sub.status, agent.status]).toEqual([201, 201, 201]);
  const event = await asA(`/webhooks/subscriptions/${sub.body.id}/test`);
  expect(event.status).toBe(202);
  Object.assign(objectsOfA, { client: client.body.client_id, subscription: sub.body.id, agent: agent.body.agent_id, event: event.body.id });
  // Its delivery left exhausted, as the worker leaves it after the 7th failed attempt: something a replay would change.
  await pont.services.db.query(`UPDATE webhook_deliveries SET status = 'exhausted', attempts = 7, next_attempt_at = NULL, lease_token = NULL WHERE event_id = $1`, [event.body.id]);
  await pont.services.db.query(
    `INSERT INTO webhook_delivery_attempts (delivery_id, round, attempt, started_at, duration_ms, status_code, error, succeeded, response_excerpt)
     SELECT id, 1, 7, now(), 5, 500, 'HTTP 500', false, 'down' FROM webhook_deliveries WHERE event_id = $1`,
    [event.body.id],
  );
  routes = await enumerate();
});
afterAll(async () => pont?.close());

describe('every portal route, from the code\'s own tables', () => {
  it('is a list worth trying: JSON routes and pages, many that change something, several that take an id', () => {
    const stateChanging = routes.filter(changes);
    const withIds = routes.filter((r) => r.params.length);
    expect(routes.filter((r) => r.kind === 'json').length).toBeGreaterThanOrEqual(15);
    expect(routes.filter((r) => r.kind === 'page').length).toBeGreaterThanOrEqual(15);
    expect(stateChanging.filter((r) => r.kind === 'json').length).toBeGreaterThanOrEqual(10);
    expect(stateChanging.filter((r) => r.kind === 'page').length).toBeGreaterThanOrEqual(10);
    expect(withIds.filter((r) => r.kind === 'json').length).toBeGreaterThanOrEqual(5);
    expect(withIds.filter((r) => r.kind === 'page').length).toBeGreaterThanOrEqual(5);
    // Every exemption below names a route that exists (none goes stale), and no other portal route is public.
    const labels = routes.map(label);
    for (const exempt of [...NO_SESSION_CHANGES, ...Object.keys(PUBLIC_PAGES)]) expect(labels).toContain(exempt);
    for (const key of Object.keys(PAGE_BODIES)) expect(labels).toContain(key);
    const operations = routes.map((r) => r.operationId);
    for (const key of Object.keys(JSON_BODIES)) expect(operations).toContain(key);
    expect(routes.filter((r) => r.kind === 'json' && r.security === 'public').map(label)).toEqual(NO_SESSION_CHANGES.filter((l) => l.includes(` ${PORTAL_API}/`)));
    console.info(`portal routes: ${routes.length} (${stateChanging.length} state-changing, ${withIds.length} with an id)`);
  });
});

describe('CSRF: every state-changing route, with A\'s own admin session', () => {
  it('answers 403 without the CSRF token, with a forged one and with another session\'s, and changes nothing', async () => {
    const tried = routes.filter((r) => changes(r) && !NO_SESSION_CHANGES.includes(label(r)));
    expect(tried.length).toBeGreaterThanOrEqual(20);
    let before = await stateOfA();
    for (const route of tried) {
      for (const [how, csrf] of [
        ['no token', undefined],
        ['an empty token', ''],
        ['a forged token', randomBytes(32).toString('base64url')],
        ["B's token", adminB.csrf],
      ] as const) {
        const res = await send(route, { cookie: adminA.cookie, csrf });
        expect.soft(res.status, `${label(route)} with ${how}: ${res.text.slice(0, 200)}`).toBe(403);
        expect.soft(res.setCookie, `${label(route)} with ${how} sets no session`).not.toMatch(/service_session=[^;]/);
      }
      const after = await stateOfA();
      expect.soft(after, `${label(route)} changed A's objects`).toEqual(before);
      before = after;
    }
  });

  it('the JSON sign-in takes JSON only: a body a cross-site page can send without a preflight signs no one in', async () => {
    const credentials = { email: 'admin@a.example', password: PASSWORD };
    const before = await stateOfA();
    for (const [type, body] of [
      ['application/x-www-form-urlencoded', new URLSearchParams(credentials).toString()],
      ['text/plain', JSON.stringify(credentials)],
      ['multipart/form-data; boundary=x', `--x\r\nContent-Disposition: form-data; name="email"\r\n\r\nadmin@a.example\r\n--x--\r\n`],
      [undefined, JSON.stringify(credentials)], // fetch(…, { mode: 'no-cors', body: new Blob([json]) }) sends no Content-Type
    ] as const) {
      const res = await pont.fetch(`${PORTAL_API}/sign-in`, { method: 'POST', headers: type ? { 'content-type': type } : {}, body: type ? body : new TextEncoder().encode(body) });
      expect.soft(res.status, `sign-in with ${type ?? 'no content type'}`).not.toBe(200);
      expect.soft(res.headers.get('set-cookie') ?? '', `sign-in with ${type ?? 'no content type'}`).not.toMatch(/service_session=[^;]/);
    }
    expect(await stateOfA()).toEqual(before);
  });

  it('the set-password form, authorised by its link\'s token, refuses a missing or forged token even with a session, and sets nothing', async () => {
    const before = await stateOfA();
    for (const token of [undefined, '', randomBytes(32).toString('base64url'), invitedToken.slice(0, -2)]) {
      const form = new URLSearchParams({ password: 'a new password here', confirm: 'a new password here', _csrf: adminA.csrf });
      if (token !== undefined) form.set('token', token);
      const res = await pont.fetch('/portal/set-password', { method: 'POST', redirect: 'manual', headers: { cookie: adminA.cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: form });
      expect.soft(res.status, `token ${token}`).toBe(410);
    }
    expect(await stateOfA()).toEqual(before);
    expect(before.users.find((u: any) => u.email === 'invited@a.example')).toMatchObject({ active: false });
  });
});

describe("another organisation's session: every route that takes an id, on A's objects", () => {
  it('answers 404 to B (valid session and CSRF token), and A\'s objects stay as they were', async () => {
    const tried = routes.filter((r) => r.params.length);
    expect(tried.length).toBeGreaterThanOrEqual(10);
    const before = await stateOfA();
    for (const route of tried) {
      const res = await send(route, adminB);
      expect.soft(res.status, `${label(route)} by B on ${pathOf(route)}: ${res.text.slice(0, 200)}`).toBe(404);
    }
    expect(await stateOfA()).toEqual(before);
  });

  it("shows B none of A's objects on any read, even asked for them by id in the query", async () => {
    const doc = (await pont.json('/api/openapi.json')).body;
    const reads = routes.filter((r) => r.method === 'GET' && !r.params.length && (r.kind === 'json' ? r.security !== 'public' : !(label(r) in PUBLIC_PAGES)));
    expect(reads.length).toBeGreaterThanOrEqual(10);
    for (const route of reads) {
      const query = new URLSearchParams();
      if (route.kind === 'json') {
        for (const p of doc.paths[route.template].get.parameters ?? []) if (p.in === 'query' && OBJECT_OF[p.name]) query.set(p.name, objectsOfA[OBJECT_OF[p.name]!]);
      }
      const path = `${pathOf(route)}${query.toString() ? `?${query}` : ''}`;
      const res = await pont.fetch(path, { headers: { cookie: adminB.cookie }, redirect: 'manual' });
      expect.soft(res.status, path).toBe(200);
      const text = await res.text();
      for (const id of [...Object.values(objectsOfA), 'admin@a.example', 'invited@a.example']) expect.soft(text, `${path} shows B ${id}`).not.toContain(id);
    }
  });
});

describe('no session: every route', () => {
  it('answers 401 on the JSON routes and sends the pages to sign-in (and back to the page), changing nothing', async () => {
    const before = await stateOfA();
    for (const route of routes) {
      const key = label(route);
      for (const cookie of [undefined, 'service_session=forged-session-id']) {
        const res = await send(route, { cookie, csrf: cookie ? adminA.csrf : undefined });
        const what = `${key} ${cookie ? 'with a forged session cookie' : 'without a session'}`;
        if (route.kind === 'json') {
          if (route.security === 'public') continue; // sign-in: tried above
          expect.soft(res.status, `${what}: ${res.text.slice(0, 200)}`).toBe(401);
        } else if (key in PUBLIC_PAGES) {
          expect.soft(res.status, what).toBe(PUBLIC_PAGES[key]);
        } else {
          expect.soft(res.status, what).toBe(302);
          // A page returns to itself after sign-in; a form to the page it was sent from (none here: the overview).
          const next = route.method === 'GET' ? pathOf(route) : PORTAL;
          if (key === `POST ${PORTAL}/sign-out`) expect.soft(res.location, what).toBe(`${PORTAL}/sign-in?done=signed-out`);
          else expect.soft(res.location, what).toBe(`${PORTAL}/sign-in?next=${encodeURIComponent(next)}`);
        }
      }
    }
    expect(await stateOfA()).toEqual(before);
  });
});
