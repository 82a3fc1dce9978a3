import { createHmac } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeyClient, keyClientInput } from '../src/auth/clients';
import { setPasswordLink } from '../src/portal/cli';
import { startTestServer, type TestServer } from './harness';

/**
 * The portal in a real browser (Debian's chromium, headless): from the set-password link an operator's
 * `pont portal-users create` prints, through sign-in, a client and its token, a webhook whose receiver fails, the
 * failed delivery and its replay, rotations and a revocation; axe-core on every page. Screenshots go to a scratch directory, or to docs/portal (docs/integrators.md shows them) with
 * `npm run docs:screenshots`, so a test run leaves the work tree as it was.
 */
const SHOTS = process.env.PONT_SCREENSHOTS_DIR ?? join(tmpdir(), 'pont-portal-screenshots');
const PASSWORD = 'a long portal password';

let pont: TestServer;
let browser: Browser;
let receiver: Server;
let receiverUrl: string;
/** The receiver answers 500 while this is true (a receiver not ready yet), then 200. */
let receiverFails = true;
const received: Array<{ body: string; signature: string }> = [];

/** axe-core, loaded into every page of the context before the page's own scripts (see newContext below): injecting it
 * anew for each check, as @axe-core/playwright does, cost 1.5 s a page against 0.25 s for the check itself. */
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
type AxeViolation = { id: string; nodes: Array<{ target: string[] }> };

async function checkPage(page: Page, shot: string): Promise<void> {
  // A string, not a function: the tests compile without the DOM's types.
  const violations = await page.evaluate<AxeViolation[]>("axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations)");
  expect(violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`), `axe on ${shot}`).toEqual([]);
  await page.screenshot({ path: `${SHOTS}/${shot}.png`, fullPage: true });
}

const token = (clientId: string, clientSecret: string) =>
  pont.json('/api/v1/connect/auth/token', { method: 'POST', json: { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret } });

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push({ body, signature: String(req.headers['x-service-signature'] ?? '') });
      res.writeHead(receiverFails ? 500 : 200, { 'content-type': 'application/json' });
      res.end(receiverFails ? '{"error":"receiver not ready"}' : '{"received":true}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
  // Retries 50 ms apart: a delivery to a failing receiver is exhausted within a second.
  pont = await startTestServer({ PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true', PONT_WEBHOOK_RETRY_DELAYS: '50ms,50ms,50ms,50ms,50ms,50ms' });
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

afterAll(async () => {
  await browser?.close();
  await pont?.close();
  receiver?.close();
});

describe('the developer portal in a browser', () => {
  it('goes from the set-password link to a verified, replayed delivery, rotations and a revocation', async () => {
    // What `pont portal-users create --org org-portal --email ana@example.org --role admin` does and prints.
    const created = await pont.services.access.portal.create({ organizationId: 'org-portal', email: 'ana@example.org', role: 'admin' });
    if (created === 'exists') throw new Error('exists');
    const link = setPasswordLink(pont.config.publicUrl, created.setPasswordToken);

    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    await context.addInitScript({ path: AXE });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (m) => /Content Security Policy|Refused to/i.test(m.text()) && errors.push(m.text())); // our own pages break no CSP rule

    await page.goto(link);
    await checkPage(page, 'set-password');
    await page.getByLabel('New password').fill(PASSWORD);
    await page.getByLabel('The same password again').fill(PASSWORD + ' typo');
    await page.getByRole('button', { name: 'Set password' }).click();
    await expect.poll(() => page.locator('#confirm-error').textContent()).toContain('differ');
    await page.getByLabel('New password').fill(PASSWORD);
    await page.getByLabel('The same password again').fill(PASSWORD);
    await page.getByRole('button', { name: 'Set password' }).click();

    await page.waitForURL(/\/portal\/sign-in/);
    await page.getByLabel('E-mail').fill('ana@example.org');
    await page.getByLabel('Password').fill('wrong password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Wrong e-mail or password');
    expect(await page.getByLabel('E-mail').inputValue()).toBe('ana@example.org'); // kept; the password is not
    expect(await page.getByLabel('Password').inputValue()).toBe('');
    await checkPage(page, 'sign-in');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/portal$/);
    await checkPage(page, 'overview');

    // A client registered with a key set, as `pont clients create --org org-portal … --jwks-uri URL` makes it: no secret to rotate.
    await createKeyClient(pont.services.db, await keyClientInput(true).parseAsync({ name: 'Bulk app', organizationId: 'org-portal', scopes: ['fhir:read'], allPatients: false, jwksUri: 'http://127.0.0.1:9/jwks.json' }));

    // A client, and its secret gets a real token.
    await page.getByRole('navigation').getByRole('link', { name: 'Clients', exact: true }).click();
    const keySetRow = page.getByRole('row').filter({ hasText: 'Bulk app' });
    await expect.poll(() => keySetRow.textContent()).toContain('To rotate its keys, publish the new key (a new kid) at http://127.0.0.1:9/jwks.json');
    expect(await keySetRow.getByRole('button', { name: /Rotate secret/ }).count()).toBe(0);
    await page.getByLabel('Name', { exact: true }).fill('Lab system');
    await page.getByLabel('webhooks:manage').check();
    await page.getByLabel('health_id:verify').check();
    await checkPage(page, 'clients');
    await page.getByRole('button', { name: 'Create client' }).click();
    const clientId = (await page.locator('#client-id').textContent())!.trim();
    const secret = (await page.locator('#secret').textContent())!.trim();
    await checkPage(page, 'client-secret');
    expect((await token(clientId, secret)).status).toBe(200);

    // Rotate with no overlap: the old secret stops working, the new one works.
    await page.getByRole('link', { name: 'Done' }).click();
    await page.getByLabel('Old secret stays valid').selectOption('now');
    await page.getByRole('button', { name: 'Rotate secret of Lab system' }).click();
    const rotated = (await page.locator('#secret').textContent())!.trim();
    expect((await token(clientId, secret)).status).toBe(401);
    expect((await token(clientId, rotated)).status).toBe(200);

    // A webhook to a receiver that fails at first.
    await page.goto(`${pont.url}/portal/webhooks`);
    await page.getByLabel('Callback URL').fill(receiverUrl);
    await page.getByLabel('patient.created').check();
    await checkPage(page, 'webhooks');
    await page.getByRole('button', { name: 'Subscribe' }).click();
    const webhookSecret = (await page.locator('#secret').textContent())!.trim();
    await page.getByRole('link', { name: 'Done' }).click();
    await page.getByRole('button', { name: `Send test event to ${receiverUrl}` }).click();
    await page.waitForURL(/deliveries/);

    // Seven failed attempts: exhausted, with the receiver's answer.
    await page.getByLabel('Status').selectOption('exhausted');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/status=exhausted/);
    await expect.poll(async () => (await page.reload(), page.locator('section.delivery[data-status=exhausted]').count()), { timeout: 20_000 }).toBe(1);
    expect(received.length).toBe(7);
    expect(await page.locator('main').textContent()).toContain('receiver not ready');
    await checkPage(page, 'deliveries');

    // The receiver is fixed; replay; delivered, signed with the secret shown once.
    receiverFails = false;
    await page.getByRole('button', { name: /^Replay event evt_/ }).click();
    await page.waitForURL(/done=replayed/);
    await expect.poll(async () => (await page.reload(), page.locator('section.delivery[data-status=delivered]').count()), { timeout: 20_000 }).toBe(1);
    const last = received.at(-1)!;
    const [, t, v1] = /^t=(\d+),v1=([0-9a-f]+)/.exec(last.signature)!;
    expect(createHmac('sha256', webhookSecret).update(`${t}.${last.body}`).digest('hex')).toBe(v1);
    expect(JSON.parse(last.body).data.subscription_id).toMatch(/^whsub_/);

    // Rotate the webhook secret with a 24 h overlap.
    await page.goto(`${pont.url}/portal/webhooks`);
    await page.getByRole('button', { name: `Rotate secret of ${receiverUrl}` }).click();
    expect((await page.locator('#secret').textContent())!.trim()).not.toBe(webhookSecret);
    await checkPage(page, 'webhook-secret');

    // A Bridge agent.
    await page.goto(`${pont.url}/portal/agents`);
    await page.getByLabel('Facility').fill('fac-1');
    await page.getByRole('button', { name: 'Create agent' }).click();
    const agentKey = (await page.locator('#secret').textContent())!.trim();
    expect(agentKey).toMatch(/^pak_/);
    // The agent checks in and syncs a batch with one bad resource: the page shows both.
    const agentId = (await page.locator('main code').first().textContent())!.trim();
    const agentHeaders = { 'x-bridge-agent-id': agentId, 'x-bridge-agent-key': agentKey, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000) - 4) };
    expect((await pont.json('/api/v1/bridge/heartbeat', { method: 'POST', headers: agentHeaders, json: { agent_id: agentId, facility_id: 'fac-1', version: '2.4.1' } })).status).toBe(200);
    const sync = await pont.json('/api/v1/bridge/sync', {
      method: 'POST',
      headers: agentHeaders,
      json: { batch_id: 'batch-1', resources: [{ resourceType: 'Patient', id: 'p-1', name: [{ family: 'Diallo' }] }, { resourceType: 'Observation', id: 'o-1' }] },
    });
    expect(sync.body.counts.failed).toBe(1);
    await page.getByRole('link', { name: 'Done' }).click();
    expect(await page.locator('main').textContent()).toContain('version 2.4.1');
    await checkPage(page, 'agents');

    // Activity, consents, users.
    for (const [name, shot] of [['Activity', 'activity'], ['Consents', 'consents'], ['Users', 'users']] as const) {
      await page.getByRole('navigation').getByRole('link', { name, exact: true }).click();
      await checkPage(page, shot);
    }
    await page.getByLabel('E-mail').fill('not an address');
    await page.getByRole('button', { name: 'Invite' }).click();
    expect(await page.locator('#email-error').textContent()).toContain('e-mail');
    expect(await page.getByLabel('E-mail').inputValue()).toBe('not an address');

    // Revoke the client: its secret stops working at once.
    await page.getByRole('navigation').getByRole('link', { name: 'Clients', exact: true }).click();
    await page.getByRole('button', { name: 'Revoke Lab system' }).click();
    await page.waitForURL(/done=revoked/);
    expect((await token(clientId, rotated)).status).toBe(401);

    // Readable on a phone.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${pont.url}/portal/webhooks/deliveries`);
    await checkPage(page, 'phone-deliveries');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/sign-in/);
    await page.goto(`${pont.url}/portal/clients`);
    await page.waitForURL(/sign-in\?next=%2Fportal%2Fclients/);
    expect(errors).toEqual([]);
    await context.close();
  }, 180_000); // a whole journey through every page: about 20 s alone, three times that beside the rest of the suite
});
