/**
 * Rotation with overlap (issue 21, item 7): a client secret and a webhook signing secret are replaced while the
 * old one keeps working until the overlap ends, then stops, in every process. Deliveries made during a webhook
 * overlap carry one `v1` per secret, and every client library's verifier accepts them with either secret.
 */
import { execFile } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseOverlap } from '../src/auth/cli';
import { loadConfig } from '../src/config';
import { recordEvent } from '../src/events/outbox';
import { startPont, type RunningPont } from '../src/server';
import * as tsWebhooks from '../clients/typescript/src/webhooks';
import { backend, createTestClient, startTestServer, type TestClient, type TestServer, pontCommand } from './harness';
import { startReceiver, type Receiver } from './webhooks-support';

const run = promisify(execFile);
const HOUR = 3600;
const WEBHOOKS = '/api/v1/connect/webhooks';
const rotateClientPath = (clientId: string) => `/api/v1/connect/auth/clients/${clientId}/rotate-secret`;
/** Any authenticated route will do: a FHIR search that finds nothing. */
const ROUTE = '/api/fhir/R4/Patient?_count=1';

let pont: TestServer;
/** A second Pont process on the same PostgreSQL database (PGlite is one process's database). */
let second: RunningPont | undefined;
const receivers: Receiver[] = [];

beforeAll(async () => {
  const env = { PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true', PONT_WEBHOOK_POLL_INTERVAL: '50ms', PONT_RATE_LIMITS: 'FHIR=400/60' };
  pont = await startTestServer(env);
  if (backend === 'postgres')
    second = await startPont(loadConfig({ PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: pont.config.databaseUrl, PONT_PUBLIC_URL: pont.config.publicUrl, ...env }));
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await second?.close();
  await pont?.close();
});

const processes = () => [pont as RunningPont, ...(second ? [second] : [])];

async function tokenStatus(url: string, clientId: string, secret: string): Promise<number> {
  const res = await fetch(`${url}/api/v1/connect/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret }),
  });
  return res.status;
}

/** The X-Client-ID/X-Client-Secret pair on an ordinary route (cached per process once verified). */
const pairStatus = async (url: string, clientId: string, secret: string) =>
  (await fetch(url + ROUTE, { headers: { 'x-client-id': clientId, 'x-client-secret': secret } })).status;

/** Token and header pair, on every process. */
async function statusesEverywhere(clientId: string, secret: string): Promise<number[]> {
  const statuses: number[] = [];
  for (const p of processes()) statuses.push(await tokenStatus(p.url, clientId, secret), await pairStatus(p.url, clientId, secret));
  return statuses;
}

/** Every process has heard every change committed so far (the change notifications of the clients table). */
async function everyProcessCaughtUp(): Promise<void> {
  for (const p of processes()) await p.services.db.listenersCaughtUp();
}

function rotateClient(client: TestClient, body: unknown, headers: Record<string, string> = {}) {
  return pont.json(rotateClientPath(client.client_id), { method: 'POST', headers: { ...client.headers, ...headers }, json: body });
}

describe('client secret rotation', () => {
  let orgs = 0;
  const newClient = () => createTestClient(pont, ['fhir:read'], { organizationId: `org-rotate-${++orgs}` });

  it('with an overlap both secrets work on every process; when the overlap ends only the new one', async () => {
    const client = await newClient();
    const old = client.client_secret;
    expect(await statusesEverywhere(client.client_id, old)).toEqual(processes().flatMap(() => [200, 200])); // now cached everywhere
    const { status, body } = await rotateClient(client, { overlap_seconds: HOUR });
    expect(status).toBe(200);
    expect(body).toEqual({ client_id: client.client_id, client_secret: expect.stringMatching(/^pcs_/), previous_secret_expires_at: expect.any(String) });
    const overlapEnds = Date.parse(body.previous_secret_expires_at);
    expect(Math.abs(overlapEnds - (Date.now() + HOUR * 1000))).toBeLessThan(60_000);
    const fresh: string = body.client_secret;
    expect(fresh).not.toBe(old);
    await everyProcessCaughtUp();
    expect(await statusesEverywhere(client.client_id, old)).toEqual(processes().flatMap(() => [200, 200]));
    expect(await statusesEverywhere(client.client_id, fresh)).toEqual(processes().flatMap(() => [200, 200]));
    // Stored as Argon2id hashes only.
    const { rows } = await pont.services.db.query<Record<string, unknown>>('SELECT * FROM oauth_clients WHERE client_id = $1', [client.client_id]);
    expect(rows[0]!.secret_hash).toMatch(/^\$argon2id\$/);
    expect(rows[0]!.previous_secret_hash).toMatch(/^\$argon2id\$/);
    expect(JSON.stringify(rows[0])).not.toContain(fresh.slice(4));
    expect(JSON.stringify(rows[0])).not.toContain(old.slice(4));

    // The overlap ends by itself, with nothing changed in the table: each process's clock passes it.
    for (const p of processes()) p.services.access.clients.now = () => overlapEnds + 1000;
    try {
      expect(await statusesEverywhere(client.client_id, old)).toEqual(processes().flatMap(() => [401, 401]));
      expect(await statusesEverywhere(client.client_id, fresh)).toEqual(processes().flatMap(() => [200, 200]));
    } finally {
      for (const p of processes()) p.services.access.clients.now = Date.now;
    }
  });

  it('an overlap ended early in the table (as an operator would) stops the old secret in every process', async () => {
    const client = await newClient();
    const old = client.client_secret;
    expect(await statusesEverywhere(client.client_id, old)).toEqual(processes().flatMap(() => [200, 200]));
    const { body } = await rotateClient(client, { overlap_seconds: 7 * 24 * HOUR });
    await pont.services.db.query(`UPDATE oauth_clients SET previous_secret_expires_at = now() - interval '1 second' WHERE client_id = $1`, [client.client_id]);
    await everyProcessCaughtUp();
    expect(await statusesEverywhere(client.client_id, old)).toEqual(processes().flatMap(() => [401, 401]));
    expect(await statusesEverywhere(client.client_id, body.client_secret)).toEqual(processes().flatMap(() => [200, 200]));
  });

  it('overlap 0: the old secret is refused at once, on the very next request; tokens already issued live on', async () => {
    for (let round = 0; round < 5; round++) {
      const client = await newClient();
      expect(await pairStatus(pont.url, client.client_id, client.client_secret)).toBe(200); // cached
      const { status, body } = await rotateClient(client, { overlap_seconds: 0 });
      expect(status).toBe(200);
      expect(body.previous_secret_expires_at).toBeNull();
      expect(await pairStatus(pont.url, client.client_id, client.client_secret)).toBe(401);
      expect(await tokenStatus(pont.url, client.client_id, client.client_secret)).toBe(401);
      expect(await pairStatus(pont.url, client.client_id, body.client_secret)).toBe(200);
      // A rotation replaces the secret, not the tokens it got (revoke the client to cut those off).
      expect((await pont.fetch(ROUTE, { headers: client.headers })).status).toBe(200);
      await everyProcessCaughtUp();
      expect(await statusesEverywhere(client.client_id, client.client_secret)).toEqual(processes().flatMap(() => [401, 401]));
    }
  });

  it('a second rotation during an overlap ends the oldest secret at once', async () => {
    const client = await newClient();
    const first = (await rotateClient(client, { overlap_seconds: HOUR })).body.client_secret;
    const second = (await rotateClient(client, { overlap_seconds: HOUR })).body.client_secret;
    expect(await tokenStatus(pont.url, client.client_id, client.client_secret)).toBe(401);
    expect(await tokenStatus(pont.url, client.client_id, first)).toBe(200);
    expect(await tokenStatus(pont.url, client.client_id, second)).toBe(200);
  });

  it('authenticates with the header pair too, defaults to 24 h, and refuses bad overlaps with 422 and nothing changed', async () => {
    const client = await newClient();
    const pair = { 'x-client-id': client.client_id, 'x-client-secret': client.client_secret };
    const bad = [{ overlap_seconds: -1 }, { overlap_seconds: 1.5 }, { overlap_seconds: 31 * 24 * HOUR }, { overlap_seconds: '3600' }, { other: 1 }];
    for (const body of bad) {
      const res = await pont.json(rotateClientPath(client.client_id), { method: 'POST', headers: pair, json: body });
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body).toMatchObject({ status: 'error', error_code: expect.any(String) });
    }
    expect(await tokenStatus(pont.url, client.client_id, client.client_secret)).toBe(200);
    const res = await pont.fetch(rotateClientPath(client.client_id), { method: 'POST', headers: pair });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { previous_secret_expires_at: string };
    expect(Math.abs(Date.parse(body.previous_secret_expires_at) - (Date.now() + 24 * HOUR * 1000))).toBeLessThan(60_000);
  });

  it("another client's secret, of this organisation or another, is 404 and unchanged", async () => {
    const caller = await newClient();
    const sameOrg = await createTestClient(pont, ['fhir:read'], { organizationId: caller.organization_id });
    const otherOrg = await newClient();
    for (const target of [sameOrg, otherOrg, { client_id: 'cli_doesnotexist' }]) {
      const res = await pont.json(rotateClientPath(target.client_id), { method: 'POST', headers: caller.headers, json: { overlap_seconds: 0 } });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ status: 'error', error_code: 'NOT_FOUND' });
    }
    expect(await tokenStatus(pont.url, sameOrg.client_id, sameOrg.client_secret)).toBe(200);
    expect(await tokenStatus(pont.url, otherOrg.client_id, otherOrg.client_secret)).toBe(200);
    expect((await pont.fetch(rotateClientPath(caller.client_id), { method: 'POST' })).status).toBe(401);
  });

  it('an Idempotency-Key replay answers the same secret, which is stored nowhere in clear', async () => {
    const client = await newClient();
    const first = await rotateClient(client, { overlap_seconds: HOUR }, { 'idempotency-key': 'rotate-1' });
    const again = await rotateClient(client, { overlap_seconds: HOUR }, { 'idempotency-key': 'rotate-1' });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.client_secret).toBe(first.body.client_secret);
    const { rows } = await pont.services.db.query<{ body: unknown }>('SELECT body FROM idempotency_keys WHERE client_id = $1', [client.client_id]);
    expect(rows.length).toBe(1);
    expect(JSON.stringify(rows)).not.toContain(first.body.client_secret.slice(4));
    expect(await tokenStatus(pont.url, client.client_id, client.client_secret)).toBe(200); // one rotation, not two
  });

  it('the overlap of `pont clients rotate-secret --overlap`', () => {
    expect(parseOverlap(undefined)).toBe(24 * HOUR);
    expect(parseOverlap('0')).toBe(0);
    expect(parseOverlap('90s')).toBe(90);
    expect(parseOverlap('15m')).toBe(900);
    expect(parseOverlap('1h')).toBe(HOUR);
    expect(parseOverlap('7d')).toBe(7 * 24 * HOUR);
    for (const bad of ['', '1', '-1h', '1.5h', '1w', '31d', 'h']) expect(() => parseOverlap(bad), bad).toThrow(/--overlap/);
  });

  it.runIf(backend === 'postgres')('`pont clients rotate-secret` prints the new secret once; the old one stops in the running service', async () => {
    const client = await newClient();
    expect(await pairStatus(pont.url, client.client_id, client.client_secret)).toBe(200);
    const { stdout } = await run(process.execPath, pontCommand('clients', 'rotate-secret', client.client_id, '--overlap', '0'), {
      env: { ...process.env, DATABASE_URL: pont.config.databaseUrl, LOG_LEVEL: 'error' },
    });
    const printed = JSON.parse(stdout);
    expect(printed).toMatchObject({ client_id: client.client_id, client_secret: expect.stringMatching(/^pcs_/), previous_secret_expires_at: null });
    await everyProcessCaughtUp();
    expect(await pairStatus(pont.url, client.client_id, client.client_secret)).toBe(401);
    expect(await pairStatus(pont.url, client.client_id, printed.client_secret)).toBe(200);
  }, 120_000);
});

/** `v1` of a header, in order. */
const v1s = (header: string) => header.split(',').filter((p) => p.startsWith('v1=')).map((p) => p.slice(3));
const hmac = (secret: string, t: string, body: string) => createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');

/** What each client library's verifier says of a delivery, with each secret: true, or the error's class name. */
async function verdicts(rawBody: string, header: string, secrets: string[]): Promise<Record<string, Array<true | string>>> {
  const input = JSON.stringify({ raw_body: rawBody, header, secrets });
  const ts = secrets.map((s) => {
    try {
      return tsWebhooks.verifySignature(rawBody, header, s);
    } catch (err) {
      return (err as Error).constructor.name;
    }
  });
  const python = `
import json, sys
sys.path.insert(0, "clients/python")
from pont import webhooks
v = json.load(sys.stdin)
out = []
for s in v["secrets"]:
    try:
        out.append(webhooks.verify_signature(v["raw_body"].encode("utf-8"), v["header"], s))
    except Exception as e:
        out.append(type(e).__name__)
print(json.dumps(out))`;
  const php = `
require "clients/php/tests/bootstrap.php";
$v = json_decode(stream_get_contents(STDIN), true);
$out = [];
foreach ($v["secrets"] as $s) {
    try { $out[] = \\Pont\\Webhooks::verifySignature($v["raw_body"], $v["header"], $s); }
    catch (\\Throwable $e) { $out[] = (new \\ReflectionClass($e))->getShortName(); }
}
echo json_encode($out);`;
  const withInput = async (file: string, args: string[]) => {
    const child = run(file, args);
    child.child.stdin!.end(input);
    return JSON.parse((await child).stdout);
  };
  // The integrators' guide's receiver snippets (docs/integrators.md, "Verifying a delivery"), as an integrator would paste them.
  const readme = readFileSync(new URL('../docs/integrators.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('### Verifying a delivery'));
  const jsVerify = new Function('createHmac', 'timingSafeEqual', 'TOLERANCE_SECONDS', `${/^function verify\([\s\S]*?^\}$/m.exec(section)![0]}\nreturn verify;`)(
    createHmac,
    timingSafeEqual,
    300,
  ) as (raw: Buffer, header: string, secret: string) => boolean;
  const pySnippet = /```python\n([\s\S]*?)```/.exec(section)![1]!;
  const readmePython = `${pySnippet}
import json, sys
v = json.load(sys.stdin)
print(json.dumps([verify(v["raw_body"].encode("utf-8"), v["header"], s) or "refused" for s in v["secrets"]]))`;
  return {
    typescript: ts,
    python: await withInput('python3', ['-c', python]),
    php: await withInput('php', ['-r', php]),
    readme_node: secrets.map((s) => jsVerify(Buffer.from(rawBody, 'utf8'), header, s) || 'refused'),
    readme_python: await withInput('python3', ['-c', readmePython]),
  };
}

describe('webhook signing secret rotation', () => {
  let orgs = 0;
  const newClient = () => createTestClient(pont, ['webhooks:manage'], { organizationId: `org-whrotate-${++orgs}` });
  const as = (client: TestClient) => ({ headers: client.headers });
  const record = (organizationId: string) =>
    pont.services.db.transaction((tx) => recordEvent(tx, { type: 'patient.created', organizationId, environment: 'development', data: { patient_id: 'p1' } }));

  async function subscribed(client: TestClient) {
    const receiver = await startReceiver();
    receivers.push(receiver);
    const { status, body } = await pont.json(`${WEBHOOKS}/subscriptions`, {
      method: 'POST',
      ...as(client),
      json: { callback_url: receiver.url, subscribed_events: ['patient.created'], description: 'rotation' },
    });
    expect(status).toBe(201);
    receiver.secret = body.webhook_secret;
    return { receiver, subscription: body as { id: string; webhook_secret: string } };
  }

  const rotate = (client: TestClient, id: string, body: unknown, headers: Record<string, string> = {}) =>
    pont.json(`${WEBHOOKS}/subscriptions/${id}/rotate-secret`, { method: 'POST', headers: { ...client.headers, ...headers }, json: body });

  it('signs with both secrets during the overlap (new first), each library accepts either; after it only the new one', async () => {
    const client = await newClient();
    const { receiver, subscription } = await subscribed(client);
    const old = subscription.webhook_secret;
    const { status, body } = await rotate(client, subscription.id, { overlap_seconds: HOUR });
    expect(status).toBe(200);
    expect(body).toMatchObject({ id: subscription.id, webhook_secret: expect.stringMatching(/^whsec_/), previous_secret_expires_at: expect.any(String) });
    const fresh: string = body.webhook_secret;
    expect(fresh).not.toBe(old);
    receiver.secret = fresh; // the receiver has switched: the old secret's signature is there for those who have not

    await record(client.organization_id);
    const [during] = await receiver.waitFor(1);
    expect(during!.signatureValid).toBe(true);
    const header = String(during!.headers['x-service-signature']);
    const t = /^t=(\d+),/.exec(header)![1]!;
    expect(v1s(header)).toEqual([hmac(fresh, t, during!.rawBody), hmac(old, t, during!.rawBody)]);
    expect(await verdicts(during!.rawBody, header, [fresh, old, `${fresh}x`])).toEqual({
      typescript: [true, true, 'WebhookSignatureError'],
      python: [true, true, 'WebhookSignatureError'],
      php: [true, true, 'WebhookSignatureError'],
      readme_node: [true, true, 'refused'],
      readme_python: [true, true, 'refused'],
    });

    await pont.services.db.query(`UPDATE webhook_subscriptions SET previous_secret_expires_at = now() - interval '1 second' WHERE id = $1`, [subscription.id]);
    await record(client.organization_id);
    const after = (await receiver.waitFor(2))[1]!;
    const afterHeader = String(after.headers['x-service-signature']);
    expect(v1s(afterHeader)).toHaveLength(1);
    expect(after.signatureValid).toBe(true);
    expect(await verdicts(after.rawBody, afterHeader, [fresh, old])).toEqual({
      typescript: [true, 'WebhookSignatureError'],
      python: [true, 'WebhookSignatureError'],
      php: [true, 'WebhookSignatureError'],
      readme_node: [true, 'refused'],
      readme_python: [true, 'refused'],
    });
  }, 60_000);

  it('overlap 0 signs with the new secret alone at once; the secret is stored encrypted, the replayed answer too', async () => {
    const client = await newClient();
    const { receiver, subscription } = await subscribed(client);
    const first = await rotate(client, subscription.id, { overlap_seconds: 0 }, { 'idempotency-key': 'whrotate-1' });
    expect(first.status).toBe(200);
    expect(first.body.previous_secret_expires_at).toBeNull();
    const again = await rotate(client, subscription.id, { overlap_seconds: 0 }, { 'idempotency-key': 'whrotate-1' });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.webhook_secret).toBe(first.body.webhook_secret);
    const fresh: string = first.body.webhook_secret;
    receiver.secret = fresh;
    await record(client.organization_id);
    const [delivery] = await receiver.waitFor(1);
    const header = String(delivery!.headers['x-service-signature']);
    expect(v1s(header)).toEqual([hmac(fresh, /^t=(\d+),/.exec(header)![1]!, delivery!.rawBody)]);
    const { rows } = await pont.services.db.query('SELECT * FROM webhook_subscriptions WHERE id = $1', [subscription.id]);
    const keys = await pont.services.db.query('SELECT body FROM idempotency_keys WHERE client_id = $1', [client.client_id]);
    for (const secret of [fresh, subscription.webhook_secret]) expect(JSON.stringify([rows, keys.rows])).not.toContain(secret.slice(6));
  }, 60_000);

  it("another organisation's subscription, an unsubscribed one and an unknown one are 404; bad overlaps 422", async () => {
    const owner = await newClient();
    const stranger = await newClient();
    const { subscription } = await subscribed(owner);
    expect((await rotate(stranger, subscription.id, { overlap_seconds: 0 })).status).toBe(404);
    expect((await rotate(owner, 'whsub_unknown', { overlap_seconds: 0 })).status).toBe(404);
    for (const body of [{ overlap_seconds: -1 }, { overlap_seconds: 31 * 24 * HOUR }, { overlap_seconds: 'soon' }])
      expect((await rotate(owner, subscription.id, body)).status).toBe(422);
    const { rows } = await pont.services.db.query<{ previous_secret_encrypted: string | null }>(
      'SELECT previous_secret_encrypted FROM webhook_subscriptions WHERE id = $1',
      [subscription.id],
    );
    expect(rows[0]!.previous_secret_encrypted).toBeNull(); // nothing rotated
    expect((await pont.fetch(`${WEBHOOKS}/subscriptions/${subscription.id}`, { method: 'DELETE', headers: owner.headers })).status).toBe(204);
    const gone = await rotate(owner, subscription.id, { overlap_seconds: 0 });
    expect(gone.status).toBe(404);
    expect(gone.body).toMatchObject({ status: 'error', error_code: 'NOT_FOUND' });
  });
});

describe('OpenAPI', () => {
  it('documents both rotations, with the secrets they answer', async () => {
    const { body } = await pont.json('/api/openapi.json');
    const client = body.paths['/api/v1/connect/auth/clients/{client_id}/rotate-secret'].post;
    const webhook = body.paths[`${WEBHOOKS}/subscriptions/{subscription_id}/rotate-secret`].post;
    expect(client.operationId).toBe('rotateClientSecret');
    expect(webhook.operationId).toBe('rotateWebhookSecret');
    expect(webhook.security).toContainEqual({ BearerAuth: ['webhooks:manage'] });
    expect(JSON.stringify(client.responses['200'])).toContain('ClientSecretRotation');
    expect(JSON.stringify(webhook.responses['200'])).toContain('WebhookSecretRotation');
  });
});
