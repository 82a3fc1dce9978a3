import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { eventually } from './eventually';

/**
 * The conformance check of issue 44, written from the text of the Subscriptions R5 Backport IG, STU 1.1 (v1.1.0,
 * http://hl7.org/fhir/uv/subscriptions-backport/) alone, as a FHIR app that knows nothing of Pont would use it. No npm
 * client speaks the IG (the registry has none for R4 topic-based subscriptions; @medplum/core's SubscriptionManager speaks
 * Medplum's own websocket messages), so the client is here: what it sends and what it expects cite the IG's page.
 * Nothing here reads Pont's code or database.
 */

const IG = 'http://hl7.org/fhir/uv/subscriptions-backport';
const SD = `${IG}/StructureDefinition`;
const FHIR_JSON = 'application/fhir+json';

interface Endpoint {
  url: string;
  received: Array<{ bundle: any; contentType: string | undefined; answered: number }>;
  /** The HTTP status it answers a notification with (200 unless a test says otherwise). */
  answer: (bundle: any) => number;
  close(): Promise<void>;
}
/** A rest-hook endpoint (channels.html "REST-Hook"): answers every POST (200 by default) and keeps it. */
async function startEndpoint(): Promise<Endpoint> {
  const endpoint: Endpoint = { url: '', received: [], answer: () => 200, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const bundle = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const answered = endpoint.answer(bundle);
      endpoint.received.push({ bundle, contentType: req.headers['content-type'], answered });
      res.writeHead(answered).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return Object.assign(endpoint, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/notifications`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

/** The R4 SubscriptionStatus (profile backport-subscription-status-r4): a Parameters, read by parameter name. */
function statusOf(bundle: any) {
  const params = bundle.entry[0].resource;
  const one = (name: string) => params.parameter.filter((p: any) => p.name === name);
  return {
    params,
    one: (name: string) => one(name)[0],
    type: one('type')[0]?.valueCode as string,
    status: one('status')[0]?.valueCode as string,
    events: one('notification-event').map((p: any) => ({
      number: p.part.find((x: any) => x.name === 'event-number')?.valueString as string,
      timestamp: p.part.find((x: any) => x.name === 'timestamp')?.valueInstant as string | undefined,
      focus: p.part.find((x: any) => x.name === 'focus')?.valueReference?.reference as string | undefined,
    })),
  };
}

let pont: TestServer;
let base: string;
let owner: TestClient;
let stranger: TestClient;
let endpoint: Endpoint;
let topic: string;
let patient: string;

const fhir = (who: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(`/api/fhir/R4${path}`, { ...init, headers: { ...who.headers, 'content-type': FHIR_JSON, ...(init.headers as Record<string, string>) } });

/** A Subscription as the IG's example BackportSubscriptionExampleAdmission has it (StructureDefinition-backport-subscription). */
function backportSubscription(channel: { type: string; endpoint?: string; content: string; payload?: string; heartbeat?: number }, filters: string[] = [`Encounter?patient=Patient/${patient}`]) {
  return {
    resourceType: 'Subscription',
    status: 'requested',
    reason: 'IG conformance check',
    criteria: topic,
    ...(filters.length && { _criteria: { extension: filters.map((f) => ({ url: `${SD}/backport-filter-criteria`, valueString: f })) } }),
    channel: {
      type: channel.type,
      ...(channel.endpoint && { endpoint: channel.endpoint }),
      extension: [
        ...(channel.heartbeat ? [{ url: `${SD}/backport-heartbeat-period`, valueUnsignedInt: channel.heartbeat }] : []),
        { url: `${SD}/backport-timeout`, valueUnsignedInt: 60 },
        { url: `${SD}/backport-max-count`, valuePositiveInt: 20 },
      ],
      payload: channel.payload ?? FHIR_JSON,
      _payload: { extension: [{ url: `${SD}/backport-payload-content`, valueCode: channel.content }] },
    },
  };
}

const finishEncounter = async (who: TestClient, subject = patient) => {
  const created = await fhir(who, '/Encounter', {
    method: 'POST',
    json: { resourceType: 'Encounter', status: 'in-progress', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: `Patient/${subject}` } },
  });
  expect(created.status).toBe(201);
  expect((await fhir(who, `/Encounter/${created.body.id}`, { method: 'PUT', json: { ...created.body, status: 'finished' } })).status).toBe(200);
  return created.body.id as string;
};

const ofSubscription = (id: string) => (b: any) => statusOf(b).one('subscription')?.valueReference?.reference?.endsWith(`/Subscription/${id}`);

beforeAll(async () => {
  pont = await startTestServer({ PONT_ENV: 'development', PONT_WEBHOOK_RETRY_DELAYS: '1s,1s,1s,1s,1s,1s' });
  base = `${pont.url}/api/fhir/R4`;
  owner = await createTestClient(pont, ['fhir:read', 'fhir:write', 'patients:read'], { organizationId: 'org-ig-owner' });
  stranger = await createTestClient(pont, ['fhir:read', 'fhir:write', 'patients:read'], { organizationId: 'org-ig-stranger' });
  endpoint = await startEndpoint();
  const made = await fhir(owner, '/Patient', { method: 'POST', json: { resourceType: 'Patient', name: [{ family: 'Checker' }], gender: 'male', birthDate: '1980-02-02' } });
  expect(made.status).toBe(201);
  patient = made.body.id;
  // components.html "Subscription Topics in R4": topics are discovered through the CapabilityStatement's
  // capabilitystatement-subscriptiontopic-canonical extension on the Subscription resource entry.
  const metadata = await pont.json('/api/fhir/R4/metadata');
  const entry = metadata.body.rest[0].resource.find((r: any) => r.type === 'Subscription');
  topic = entry.extension.filter((e: any) => e.url === `${SD}/capabilitystatement-subscriptiontopic-canonical`).map((e: any) => e.valueCanonical).find((u: string) => /encounter-finished$/.test(u));
  expect(topic).toBeTruthy();
});
afterAll(async () => {
  await endpoint?.close();
  await pont?.close();
});

describe('conformance.html: the CapabilityStatement', () => {
  it('instantiates the R4 server statement, names the backport-subscription profile and the operations', async () => {
    const { body } = await pont.json('/api/fhir/R4/metadata');
    expect(body.instantiates).toContain(`${IG}/CapabilityStatement/backport-subscription-server-r4`);
    const entry = body.rest[0].resource.find((r: any) => r.type === 'Subscription');
    expect(entry.supportedProfile).toContain(`${SD}/backport-subscription`);
    expect(entry.operation.map((o: any) => o.definition)).toEqual(
      expect.arrayContaining([`${IG}/OperationDefinition/backport-subscription-status`, `${IG}/OperationDefinition/backport-subscription-events`, `${IG}/OperationDefinition/backport-subscription-get-ws-binding-token`]),
    );
  });
});

describe('the topic at its canonical URL', () => {
  // STU 1.1 leaves R4 topic definitions out of scope (components.html "Subscription Topics in R4"); Pont also serves a
  // Basic there, the shape of the IG's later R4 example (r4-encounter-complete, 1.2.0 ballot). It must claim no profile
  // the IG does not define, and SubscriptionTopic.status, a modifier in R5, rides in modifierExtension as in that example.
  it('is a Basic that claims no undefined profile, with status as a modifierExtension', async () => {
    const res = await pont.json(new URL(topic).pathname);
    expect(res.status).toBe(200);
    expect(res.body.resourceType).toBe('Basic');
    for (const profile of res.body.meta?.profile ?? []) expect(profile).not.toBe(`${SD}/backport-subscription-topic`);
    const x = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
    expect(res.body.modifierExtension).toEqual([{ url: `${x}status`, valueCode: 'active' }]);
    expect(res.body.extension.find((e: any) => e.url === `${x}status`)).toBeUndefined();
    expect(res.body.extension.find((e: any) => e.url === `${x}url`).valueUri).toBe(topic);
  });
});

describe('channels.html "REST-Hook" and notifications.html', () => {
  let id: string;

  it('requested at creation; the handshake (status requested, 0 events) is POSTed as application/fhir+json; then active', async () => {
    const created = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'rest-hook', endpoint: endpoint.url, content: 'id-only' }) });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.status).toBe('requested');
    id = created.body.id;
    await eventually(() => expect(endpoint.received.filter((r) => ofSubscription(id)(r.bundle))).toHaveLength(1));
    const { bundle, contentType } = endpoint.received.find((r) => ofSubscription(id)(r.bundle))!;
    expect(contentType).toMatch(/^application\/fhir\+json/); // "SHALL match the MIME type on the Subscription"
    expect(bundle.resourceType).toBe('Bundle');
    expect(bundle.type).toBe('history');
    expect(bundle.entry).toHaveLength(1);
    // Example r4-notification-handshake: urn:uuid fullUrl, the status Parameters, GET .../$status, 200.
    const [first] = bundle.entry;
    expect(first.fullUrl).toMatch(/^urn:uuid:/);
    expect(first.resource.resourceType).toBe('Parameters');
    expect(first.resource.meta.profile).toContain(`${SD}/backport-subscription-status-r4`);
    expect(first.request).toEqual({ method: 'GET', url: `${base}/Subscription/${id}/$status` });
    expect(first.response.status).toBe('200');
    const status = statusOf(bundle);
    expect(status.type).toBe('handshake');
    // "Status of the subscription when this notification was generated": it is requested until the handshake succeeds.
    expect(status.status).toBe('requested');
    expect(status.one('events-since-subscription-start')).toEqual({ name: 'events-since-subscription-start', valueString: '0' });
    expect(status.one('subscription').valueReference.reference).toBe(`${base}/Subscription/${id}`);
    expect(status.one('topic').valueCanonical).toBe(topic);
    await eventually(async () => expect((await fhir(owner, `/Subscription/${id}`)).body.status).toBe('active'));
  });

  it('id-only: one event-notification per finished Encounter, numbered in a string, a focus reference, an entry with fullUrl and request', async () => {
    const encounter = await finishEncounter(owner);
    const events = () => endpoint.received.filter((r) => ofSubscription(id)(r.bundle) && statusOf(r.bundle).type === 'event-notification');
    await eventually(() => expect(events()).toHaveLength(1));
    const { bundle } = events()[0]!;
    const status = statusOf(bundle);
    expect(status.status).toBe('active');
    expect(status.one('events-since-subscription-start').valueString).toBe('1');
    expect(status.events).toEqual([{ number: '1', timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/), focus: `${base}/Encounter/${encounter}` }]);
    // payloads.html "Id Only": each entry has the resource URL in fullUrl and request, and no resource.
    expect(bundle.entry).toHaveLength(2);
    expect(bundle.entry[1].fullUrl).toBe(`${base}/Encounter/${encounter}`);
    expect(bundle.entry[1].resource).toBeUndefined();
    expect(bundle.entry[1].request).toEqual({ method: 'PUT', url: `Encounter/${encounter}` });
  });

  it('$status, instance and type level (OperationDefinition backport-subscription-status): searchset Bundles of the status Parameters', async () => {
    const instance = await fhir(owner, `/Subscription/${id}/$status`);
    expect(instance.status).toBe(200);
    expect(instance.body.type).toBe('searchset');
    expect(statusOf(instance.body).type).toBe('query-status');
    expect(statusOf(instance.body).one('events-since-subscription-start').valueString).toBe('1');
    // Type level: the ids asked for, or every subscription of the caller.
    const byId = await fhir(owner, `/Subscription/$status?id=${id}`);
    expect(byId.status, JSON.stringify(byId.body)).toBe(200);
    expect(byId.body.type).toBe('searchset');
    expect(byId.body.entry.map((e: any) => statusOf({ entry: [e] }).one('subscription').valueReference.reference)).toEqual([`${base}/Subscription/${id}`]);
    const posted = await fhir(owner, '/Subscription/$status', { method: 'POST', json: { resourceType: 'Parameters', parameter: [{ name: 'id', valueId: id }] } });
    expect(posted.status).toBe(200);
    expect(posted.body.entry).toHaveLength(1);
    const all = await fhir(owner, '/Subscription/$status');
    expect(all.status).toBe(200);
    expect(all.body.entry.length).toBeGreaterThanOrEqual(1);
    const active = await fhir(owner, '/Subscription/$status?status=off');
    expect(active.body.entry ?? []).toHaveLength(0);
    // Another organisation's subscription is not among them.
    expect(((await fhir(stranger, `/Subscription/$status?id=${id}`)).body.entry ?? []).length).toBe(0);
  });

  it('$events (OperationDefinition backport-subscription-events): numbers as strings in a Parameters; content is a hint the server MAY ignore', async () => {
    const second = await finishEncounter(owner);
    await eventually(async () => expect(statusOf((await fhir(owner, `/Subscription/${id}/$status`)).body).one('events-since-subscription-start').valueString).toBe('2'));
    const replay = await fhir(owner, `/Subscription/${id}/$events`, {
      method: 'POST',
      json: { resourceType: 'Parameters', parameter: [{ name: 'eventsSinceNumber', valueString: '2' }, { name: 'eventsUntilNumber', valueString: '2' }] },
    });
    expect(replay.status).toBe(200);
    expect(replay.body.type).toBe('history');
    expect(statusOf(replay.body).type).toBe('query-event');
    expect(statusOf(replay.body).events.map((e: any) => [e.number, e.focus])).toEqual([['2', `${base}/Encounter/${second}`]]);
    // Asking for more than the subscription was made for: a hint, not an error; what comes back is what it may have.
    const more = await fhir(owner, `/Subscription/${id}/$events?content=full-resource`);
    expect(more.status, JSON.stringify(more.body)).toBe(200);
    expect(more.body.entry.slice(1).every((e: any) => e.resource === undefined)).toBe(true);
  });

  it('search by url (SHALL in the IG\'s R4 CapabilityStatement) and status (SHOULD), declared in the CapabilityStatement', async () => {
    const byUrl = await fhir(owner, `/Subscription?url=${encodeURIComponent(endpoint.url)}`);
    expect(byUrl.status, JSON.stringify(byUrl.body)).toBe(200);
    expect(byUrl.body.entry.map((e: any) => e.resource.id)).toContain(id);
    expect(byUrl.body.entry.every((e: any) => e.resource.channel.endpoint === endpoint.url)).toBe(true);
    expect((await fhir(owner, `/Subscription?url=${encodeURIComponent('https://elsewhere.example/hook')}`)).body.entry ?? []).toEqual([]);
    expect((await fhir(owner, '/Subscription?status=active')).body.entry.map((e: any) => e.resource.id)).toContain(id);
    expect((await fhir(owner, '/Subscription?status=error,requested')).body.entry?.map((e: any) => e.resource.id) ?? []).not.toContain(id);
    expect((await fhir(owner, '/Subscription?criteria=x')).status).toBe(400); // not a parameter it has: refused, not ignored
    const { body } = await pont.json('/api/fhir/R4/metadata');
    const entry = body.rest[0].resource.find((r: any) => r.type === 'Subscription');
    expect(entry.searchParam.map((p: any) => p.name)).toEqual(expect.arrayContaining(['url', 'status']));
  });

  it('a refused handshake makes it error at once (channels.html: SHALL); nothing is pushed to the endpoint before a handshake is accepted, then active', async () => {
    const hook = await startEndpoint();
    try {
      hook.answer = () => 503;
      const created = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'rest-hook', endpoint: hook.url, content: 'id-only' }) });
      expect(created.status).toBe(201);
      const sub = created.body.id;
      await eventually(() => expect(hook.received.length).toBeGreaterThanOrEqual(1));
      await eventually(async () => expect((await fhir(owner, `/Subscription/${sub}`)).body.status).toBe('error'));
      expect(hook.received.length).toBeLessThan(7); // at the first refusal, not once the 7 attempts are spent
      const status = statusOf((await fhir(owner, `/Subscription/${sub}/$status`)).body);
      expect(status.status).toBe('error');
      expect(status.one('error').valueCodeableConcept).toBeTruthy();
      // An event while the endpoint has not accepted a handshake: numbered, not POSTed to it.
      await finishEncounter(owner);
      await eventually(async () => expect(statusOf((await fhir(owner, `/Subscription/${sub}/$status`)).body).one('events-since-subscription-start').valueString).toBe('1'));
      await new Promise((resolve) => setTimeout(resolve, 1500)); // a retry of the handshake comes and is refused meanwhile
      expect(hook.received.map((r) => statusOf(r.bundle).type).filter((t) => t !== 'handshake')).toEqual([]);
      // The endpoint answers now: the next handshake makes it active, and what happens from then on is sent.
      hook.answer = () => 200;
      await eventually(async () => expect((await fhir(owner, `/Subscription/${sub}`)).body.status).toBe('active'));
      const encounter = await finishEncounter(owner);
      await eventually(() => expect(hook.received.filter((r) => statusOf(r.bundle).type === 'event-notification')).toHaveLength(1));
      expect(statusOf(hook.received.find((r) => statusOf(r.bundle).type === 'event-notification')!.bundle).events).toEqual([
        expect.objectContaining({ number: '2', focus: `${base}/Encounter/${encounter}` }),
      ]);
      await fhir(owner, `/Subscription/${sub}`, { method: 'DELETE' });
    } finally {
      await hook.close();
    }
  });

  it('a non-owner cannot read, delete, $status or $events it', async () => {
    for (const [method, path] of [
      ['GET', `/Subscription/${id}`],
      ['DELETE', `/Subscription/${id}`],
      ['GET', `/Subscription/${id}/$status`],
      ['GET', `/Subscription/${id}/$events`],
    ] as const) expect((await fhir(stranger, path, { method })).status, `${method} ${path}`).toBe(404);
    expect((await fhir(owner, `/Subscription/${id}`)).body.status).toBe('active');
  });
});

describe('payloads.html', () => {
  it('empty: no focus, no entry but the status, and no topic (SHOULD NOT be present with empty)', async () => {
    const created = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'rest-hook', endpoint: endpoint.url, content: 'empty' }) });
    expect(created.status).toBe(201);
    const id = created.body.id;
    await eventually(async () => expect((await fhir(owner, `/Subscription/${id}`)).body.status).toBe('active'));
    await finishEncounter(owner);
    const events = () => endpoint.received.filter((r) => ofSubscription(id)(r.bundle) && statusOf(r.bundle).type === 'event-notification');
    await eventually(() => expect(events()).toHaveLength(1));
    const { bundle } = events()[0]!;
    expect(bundle.entry).toHaveLength(1);
    expect(statusOf(bundle).events).toEqual([{ number: '1', timestamp: expect.any(String), focus: undefined }]);
    expect(statusOf(bundle).one('topic')).toBeUndefined();
    await fhir(owner, `/Subscription/${id}`, { method: 'DELETE' });
  });

  it('full-resource: the resource follows the status; an Encounter created finished is a POST to its type (example r4-notification-full-resource)', async () => {
    const created = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'rest-hook', endpoint: endpoint.url, content: 'full-resource' }) });
    expect(created.status).toBe(201);
    const id = created.body.id;
    await eventually(async () => expect((await fhir(owner, `/Subscription/${id}`)).body.status).toBe('active'));
    const made = await fhir(owner, '/Encounter', {
      method: 'POST',
      json: { resourceType: 'Encounter', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' }, subject: { reference: `Patient/${patient}` } },
    });
    expect(made.status).toBe(201);
    const events = () => endpoint.received.filter((r) => ofSubscription(id)(r.bundle) && statusOf(r.bundle).type === 'event-notification');
    await eventually(() => expect(events()).toHaveLength(1));
    const { bundle } = events()[0]!;
    expect(statusOf(bundle).one('topic').valueCanonical).toBe(topic); // SHOULD be present with full-resource
    expect(bundle.entry[1].fullUrl).toBe(`${base}/Encounter/${made.body.id}`);
    expect(bundle.entry[1].resource).toMatchObject({ resourceType: 'Encounter', id: made.body.id, status: 'finished' });
    expect(bundle.entry[1].request).toEqual({ method: 'POST', url: 'Encounter' });
    expect(bundle.entry[1].response.status).toBe('201');
    await fhir(owner, `/Subscription/${id}`, { method: 'DELETE' });
  });
});

describe('components.html "Subscriptions": what a server takes and refuses', () => {
  it('channel.payload with a fhirVersion MIME parameter: 4.0 (R4, what the server speaks) is taken, 4.3 (R4B) refused', async () => {
    const r4 = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'websocket', content: 'id-only', payload: 'application/fhir+json; fhirVersion=4.0' }) });
    expect(r4.status, JSON.stringify(r4.body)).toBe(201);
    await fhir(owner, `/Subscription/${r4.body.id}`, { method: 'DELETE' });
    const r4b = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'websocket', content: 'id-only', payload: 'application/fhir+json; fhirVersion=4.3' }) });
    expect(r4b.status).toBe(400);
    expect(r4b.body.resourceType).toBe('OperationOutcome');
  });

  it('filter criteria in each format the IG lists (filterParameter=value, Type?…, Type.filterParameter=value) are applied', async () => {
    const other = (await fhir(owner, '/Patient', { method: 'POST', json: { resourceType: 'Patient', name: [{ family: 'Other' }], gender: 'female', birthDate: '1990-03-03' } })).body.id;
    for (const filter of [`patient=Patient/${patient}`, `Encounter.patient=Patient/${patient}`, `Encounter?patient=Patient/${patient}`]) {
      const created = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'websocket', content: 'id-only' }, [filter]) });
      expect(created.status, `${filter}: ${JSON.stringify(created.body)}`).toBe(201);
      await finishEncounter(owner, other); // not this subscription's patient
      const mine = await finishEncounter(owner);
      await eventually(async () => {
        const events = statusOf((await fhir(owner, `/Subscription/${created.body.id}/$events`)).body).events;
        expect(events.map((e: any) => e.focus)).toEqual([`${base}/Encounter/${mine}`]);
      });
      await fhir(owner, `/Subscription/${created.body.id}`, { method: 'DELETE' });
    }
    // A filter parameter the topic does not define, or a modifier it cannot apply: rejected (conformance.html).
    for (const filter of ['Encounter?location=Location/1', `Encounter?patient:missing=true`]) {
      const refused = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'websocket', content: 'id-only' }, [filter]) });
      expect(refused.status, filter).toBe(400);
    }
  });

  it('a custom channel (backport-channel-type on channel.type) the server does not support is rejected (conformance.html: SHALL)', async () => {
    const body = backportSubscription({ type: 'rest-hook', endpoint: endpoint.url, content: 'id-only' });
    const zulip = { ...body, channel: { ...body.channel, _type: { extension: [{ url: `${SD}/backport-channel-type`, valueCoding: { system: 'http://example.org/subscription-channel-type', code: 'zulip' } }] } } };
    const res = await fhir(owner, '/Subscription', { method: 'POST', json: zulip });
    expect(res.status).toBe(400);
    expect(res.body.resourceType).toBe('OperationOutcome');
  });
});

/** A websocket client as channels.html "Websockets" describes it. */
async function connect(url: string) {
  const socket = new WebSocket(url);
  const messages: any[] = [];
  socket.on('message', (data) => {
    const text = data.toString('utf8');
    try {
      messages.push(JSON.parse(text));
    } catch {
      messages.push(text);
    }
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
  return { socket, messages, closed };
}
const bundles = (messages: any[], type: string, id?: string) =>
  messages.filter((m) => m?.resourceType === 'Bundle' && statusOf(m).type === type && (!id || ofSubscription(id)(m)));

describe('channels.html "Websockets"', () => {
  it('$get-ws-binding-token, bind-with-token, a handshake, then each event once; heartbeats at the heartbeat period', async () => {
    const created = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'websocket', content: 'id-only', heartbeat: 10 }) });
    expect(created.status).toBe(201);
    const id = created.body.id;
    const token = await fhir(owner, `/Subscription/${id}/$get-ws-binding-token`);
    expect(token.status).toBe(200);
    const param = (name: string) => token.body.parameter.find((p: any) => p.name === name);
    expect(typeof param('token').valueString).toBe('string');
    expect(Date.parse(param('expiration').valueDateTime)).toBeGreaterThan(Date.now());
    expect(param('subscription').valueString).toMatch(new RegExp(`Subscription/${id}$`));
    const client = await connect(param('websocket-url').valueUrl);
    // The IG's websocket diagram sends "bind-with-token token-abc" (and, later, "bind-with-token: token-def").
    client.socket.send(`bind-with-token ${param('token').valueString}`);
    await eventually(() => expect(bundles(client.messages, 'handshake', id)).toHaveLength(1));
    const encounter = await finishEncounter(owner);
    await eventually(() => expect(bundles(client.messages, 'event-notification', id)).toHaveLength(1));
    expect(statusOf(bundles(client.messages, 'event-notification', id)[0]).events[0]).toMatchObject({ number: '1', focus: `${base}/Encounter/${encounter}` });
    // backport-heartbeat-period: "a 'heartbeat' notification is sent via this channel with an interval period equal to this value".
    const started = Date.now();
    await eventually(() => expect(bundles(client.messages, 'heartbeat', id).length).toBeGreaterThanOrEqual(1), { timeoutMs: 20_000, intervalMs: 100 });
    expect(Date.now() - started).toBeLessThan(15_000);
    // A token is used once: another socket cannot bind with it.
    const again = await connect(param('websocket-url').valueUrl);
    again.socket.send(`bind-with-token: ${param('token').valueString}`);
    expect(await again.closed).toBe(4401);
    client.socket.close();
    await fhir(owner, `/Subscription/${id}`, { method: 'DELETE' });
  }, 40_000);

  it('binding again on the same connection with a fresh token (before the first expires, as the IG\'s flow does) sends each event once', async () => {
    const created = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'websocket', content: 'id-only' }) });
    const id = created.body.id;
    const tokenOf = async () => (await fhir(owner, `/Subscription/${id}/$get-ws-binding-token`)).body.parameter;
    const first = await tokenOf();
    const client = await connect(first.find((p: any) => p.name === 'websocket-url').valueUrl);
    for (let i = 1; i <= 3; i++) {
      const params = i === 1 ? first : await tokenOf();
      client.socket.send(`bind-with-token: ${params.find((p: any) => p.name === 'token').valueString}`);
      await eventually(() => expect(bundles(client.messages, 'handshake', id)).toHaveLength(i)); // a handshake per bind
    }
    const encounter = await finishEncounter(owner);
    await eventually(() => expect(bundles(client.messages, 'event-notification', id).length).toBeGreaterThanOrEqual(1));
    await new Promise((resolve) => setTimeout(resolve, 500)); // any duplicate would have come by now
    const sent = bundles(client.messages, 'event-notification', id).flatMap((b) => statusOf(b).events);
    expect(sent).toEqual([expect.objectContaining({ number: '1', focus: `${base}/Encounter/${encounter}` })]);
    client.socket.close();
    await fhir(owner, `/Subscription/${id}`, { method: 'DELETE' });
  });

  it('a type-level $get-ws-binding-token for several ids binds one socket to each (a handshake per subscription)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) ids.push((await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'websocket', content: 'empty' }) })).body.id);
    const token = await fhir(owner, '/Subscription/$get-ws-binding-token', { method: 'POST', json: { resourceType: 'Parameters', parameter: ids.map((id) => ({ name: 'id', valueId: id })) } });
    expect(token.status, JSON.stringify(token.body)).toBe(200);
    expect(token.body.parameter.filter((p: any) => p.name === 'subscription')).toHaveLength(2);
    const param = (name: string) => token.body.parameter.find((p: any) => p.name === name);
    const client = await connect(param('websocket-url').valueUrl);
    client.socket.send(`bind-with-token: ${param('token').valueString}`);
    await eventually(() => expect(bundles(client.messages, 'handshake')).toHaveLength(2));
    // A token for a subscription of another organisation is not given.
    const theirs = await fhir(stranger, '/Subscription/$get-ws-binding-token', { method: 'POST', json: { resourceType: 'Parameters', parameter: [{ name: 'id', valueId: ids[0] }] } });
    expect(theirs.status).toBe(404);
    client.socket.close();
    for (const id of ids) await fhir(owner, `/Subscription/${id}`, { method: 'DELETE' });
  });
});

describe('as an attacker', () => {
  it('another organisation filtering on a patient it has no consent for hears nothing, and cannot tell whether events happened', async () => {
    const hooks = await startEndpoint();
    try {
      const ids: string[] = [];
      for (const content of ['empty', 'id-only', 'full-resource']) {
        const created = await fhir(stranger, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'rest-hook', endpoint: hooks.url, content, heartbeat: 10 }) });
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        ids.push(created.body.id);
      }
      await eventually(async () => {
        for (const id of ids) expect((await fhir(stranger, `/Subscription/${id}`)).body.status).toBe('active');
      });
      // The owner's finished encounters of that patient; the owner's own subscription proves they were numbered.
      const witness = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'websocket', content: 'empty' }) });
      await finishEncounter(owner);
      await finishEncounter(owner);
      await eventually(async () => expect(statusOf((await fhir(owner, `/Subscription/${witness.body.id}/$status`)).body).one('events-since-subscription-start').valueString).toBe('2'));
      for (const id of ids) {
        const status = statusOf((await fhir(stranger, `/Subscription/${id}/$status`)).body);
        expect(status.one('events-since-subscription-start').valueString).toBe('0');
        expect(statusOf((await fhir(stranger, `/Subscription/${id}/$events`)).body).events).toEqual([]);
      }
      expect(hooks.received.filter((r) => statusOf(r.bundle).type === 'event-notification')).toEqual([]);
      await fhir(owner, `/Subscription/${witness.body.id}`, { method: 'DELETE' });
      for (const id of ids) await fhir(stranger, `/Subscription/${id}`, { method: 'DELETE' });
    } finally {
      await hooks.close();
    }
  });

  it('a binding token binds only the subscription it was given for; hostile websocket messages do not bind or break the socket', async () => {
    const mine = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'websocket', content: 'id-only' }) });
    const other = await fhir(owner, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'websocket', content: 'id-only' }) });
    const theirs = await fhir(stranger, '/Subscription', { method: 'POST', json: backportSubscription({ type: 'websocket', content: 'empty' }, []) });
    const params = (await fhir(owner, `/Subscription/${mine.body.id}/$get-ws-binding-token`)).body.parameter;
    const client = await connect(params.find((p: any) => p.name === 'websocket-url').valueUrl);
    for (const junk of ['bind-with-token', 'bind-with-token: ', '{"type":"bind-with-token","payload":{}}', 'x'.repeat(4000), Buffer.from([0, 1, 2])]) client.socket.send(junk);
    await eventually(() => expect(client.messages.filter((m) => m?.resourceType === 'OperationOutcome')).toHaveLength(5)); // told, not closed
    // A token the server did not give closes the socket that tried it (Pont's choice: no guessing on one connection).
    const guesser = await connect(params.find((p: any) => p.name === 'websocket-url').valueUrl);
    guesser.socket.send(`bind-with-token: ${'x'.repeat(32)}`);
    expect(await guesser.closed).toBe(4401);
    // A token for another subscription of the organisation, or of another organisation, is not this one's: only its own binds.
    client.socket.send(`bind-with-token: ${params.find((p: any) => p.name === 'token').valueString}`);
    await eventually(() => expect(bundles(client.messages, 'handshake')).toHaveLength(1));
    expect(ofSubscription(mine.body.id)(bundles(client.messages, 'handshake')[0])).toBe(true);
    await finishEncounter(owner);
    await eventually(() => expect(bundles(client.messages, 'event-notification', mine.body.id)).toHaveLength(1));
    await eventually(async () => expect(statusOf((await fhir(owner, `/Subscription/${other.body.id}/$status`)).body).one('events-since-subscription-start').valueString).toBe('1'));
    expect(client.messages.filter((m) => m?.resourceType === 'Bundle' && (ofSubscription(other.body.id)(m) || ofSubscription(theirs.body.id)(m)))).toEqual([]);
    client.socket.close();
    await fhir(owner, `/Subscription/${mine.body.id}`, { method: 'DELETE' });
    await fhir(owner, `/Subscription/${other.body.id}`, { method: 'DELETE' });
    await fhir(stranger, `/Subscription/${theirs.body.id}`, { method: 'DELETE' });
  });

  it('hostile Subscription bodies: a 4xx OperationOutcome, never a 5xx', async () => {
    const good = backportSubscription({ type: 'rest-hook', endpoint: endpoint.url, content: 'id-only' });
    const bodies: Array<[string, unknown]> = [
      ['array', [good]],
      ['criteria a number', { ...good, criteria: 5 }],
      ['criteria of 1 MB', { ...good, criteria: `${topic}${'x'.repeat(1_000_000)}` }],
      ['filter of 1 MB', { ...good, _criteria: { extension: [{ url: `${SD}/backport-filter-criteria`, valueString: `Encounter?patient=${'x'.repeat(1_000_000)}` }] } }],
      ['_criteria a string', { ...good, _criteria: 'x' }],
      ['_criteria.extension an object', { ...good, _criteria: { extension: { url: 'x' } } }],
      ['filter valueString a number', { ...good, _criteria: { extension: [{ url: `${SD}/backport-filter-criteria`, valueString: 7 }] } }],
      ['channel a string', { ...good, channel: 'rest-hook' }],
      ['channel an array', { ...good, channel: [good.channel] }],
      ['channel.type a number', { ...good, channel: { ...good.channel, type: 1 } }],
      ['channel.type email', { ...good, channel: { ...good.channel, type: 'email', endpoint: 'mailto:x@example.org' } }],
      ['channel.endpoint an object', { ...good, channel: { ...good.channel, endpoint: { url: endpoint.url } } }],
      ['channel.payload a number', { ...good, channel: { ...good.channel, payload: 3 } }],
      ['_payload an array', { ...good, channel: { ...good.channel, _payload: [1] } }],
      ['_payload.extension null', { ...good, channel: { ...good.channel, _payload: { extension: null } } }],
      ['content unknown', { ...good, channel: { ...good.channel, _payload: { extension: [{ url: `${SD}/backport-payload-content`, valueCode: 'everything' }] } } }],
      ['_type a string', { ...good, channel: { ...good.channel, _type: 'zulip' } }],
      ['_type.extension an object', { ...good, channel: { ...good.channel, _type: { extension: { url: 'x' } } } }],
      ['heartbeat a string', { ...good, channel: { ...good.channel, extension: [{ url: `${SD}/backport-heartbeat-period`, valueUnsignedInt: '10' }] } }],
      ['heartbeat huge', { ...good, channel: { ...good.channel, extension: [{ url: `${SD}/backport-heartbeat-period`, valueUnsignedInt: 1e300 }] } }],
      ['maxCount negative', { ...good, channel: { ...good.channel, extension: [{ url: `${SD}/backport-max-count`, valuePositiveInt: -1 }] } }],
      ['channel.extension a string', { ...good, channel: { ...good.channel, extension: 'x' } }],
      ['header a string', { ...good, channel: { ...good.channel, header: 'Authorization: x' } }],
      ['reason an object', { ...good, reason: { toString: 1 } }],
      ['resourceType Patient', { ...good, resourceType: 'Patient' }],
    ];
    for (const [what, body] of bodies) {
      const res = await fhir(stranger, '/Subscription', { method: 'POST', json: body });
      expect(res.status, `${what}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`).toBeGreaterThanOrEqual(400);
      expect(res.status, what).toBeLessThan(500);
      expect(res.body?.resourceType, what).toBe('OperationOutcome');
    }
    // Deeply nested JSON (100,000 levels), where the body has a string, an object and an extension list.
    const deep = (inner: string) => `${'{"a":['.repeat(100_000)}${inner}${']}'.repeat(100_000)}`;
    const goodText = JSON.stringify(good);
    const nested = [
      goodText.replace('"reason":"IG conformance check"', `"reason":${deep('1')}`),
      goodText.replace(/"_criteria":\{/, `"_criteria":{"x":${deep('1')},`),
      goodText.replace('"channel":{', `"channel":{"extension2":${deep('null')},`),
      deep(goodText),
    ];
    for (const raw of ['{"resourceType":"Subscription",', '[[[[[[[[[[', 'null', '"Subscription"', '', ...nested]) {
      const res = await fhir(stranger, '/Subscription', { method: 'POST', body: raw });
      expect(res.status, raw.slice(0, 100)).toBeGreaterThanOrEqual(400);
      expect(res.status, raw.slice(0, 100)).toBeLessThan(500);
      expect(res.body?.resourceType, raw.slice(0, 100)).toBe('OperationOutcome');
    }
    // Hostile operation parameters.
    for (const path of ['/Subscription/x/$events?eventsSinceNumber=1e400', '/Subscription/$status?id=' + 'x'.repeat(5000), '/Subscription/$status?status=bogus']) {
      const res = await fhir(stranger, path);
      expect(res.status, path).toBeLessThan(500);
    }
  });
});
