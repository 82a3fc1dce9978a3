#!/usr/bin/env node
// The conformance server: a real Pont on the embedded database (in memory), seeded with the demo, and a webhook
// receiver that keeps what Pont delivers, and a fault-injecting proxy in front of Pont. Each client library's tests
// start it, read its first stdout line ({"base_url", "fault_url", "receiver_url", "demo", …}), run the scenario of README.md beside this file, and end it by closing
// its stdin (or with SIGTERM).
import { createServer, request as forward } from 'node:http';
import { randomUUID } from 'node:crypto';
import { register } from 'tsx/esm/api';

register();
const { loadConfig } = await import('../../src/config.ts');
const { startPont } = await import('../../src/server.ts');
const { checkDigits } = await import('../../src/healthid/healthid.ts');

const deliveries = [];
const receiver = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (req.method === 'POST') {
      deliveries.push({ raw_body: Buffer.concat(chunks).toString('utf8'), signature: req.headers['x-service-signature'] ?? null });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"received":true}');
    } else {
      // GET: what was delivered so far, for the libraries to verify with their own code.
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(deliveries));
    }
  });
});
await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));

// A scratch database on the PostgreSQL server the tests use, when one answers (`npm test` needs it): the embedded
// database runs in WebAssembly in this process, some 5 s of CPU more a library's run, and three of them run beside
// vitest. Without one (a library's tests run on a machine with no PostgreSQL): the embedded database, in memory, from
// the migrated image the tests share (test/migrated.ts). The libraries' tests are the same on both.
const scratch = await (await import('../../test/harness.ts')).createScratchDatabase({ migrated: true }).catch((err) => {
  // None listening is the usual reason; a server that refuses this user (password, CREATEDB) is said, not fatal.
  if (!['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN'].includes(err.code)) process.stderr.write(`conformance server: no scratch database on PostgreSQL (${err.message}): the embedded database instead\n`);
  return undefined;
});
const config = loadConfig({
  PORT: '0',
  HOST: '127.0.0.1',
  LOG_LEVEL: 'error',
  PONT_ENV: 'development',
  PONT_WEBHOOK_RETRY_DELAYS: '1s,1s,1s,1s,1s,1s',
  ...(process.env.PONT_CONFORMANCE_ENV ? JSON.parse(process.env.PONT_CONFORMANCE_ENV) : {}),
  ...(scratch && { DATABASE_URL: scratch.url }),
});
if (!scratch) {
  config.dataDir = undefined;
  config.embeddedImage = await (await import('../../test/migrated.ts')).migratedEmbeddedImage();
}
const pont = await startPont(config);
const demo = await (await fetch(`${pont.url}/api/demo/reset`, { method: 'POST' })).json();
// The scenario also records and revokes consent and reads the audit trail, which the demo's own clients may not
// (a sandbox integrator cannot grant itself consent): its first client is one of the demo organisation's with every scope.
const { createClient } = await import('../../src/auth/clients.ts');
const { SCOPES } = await import('../../src/core/scopes.ts');
const integrator = await createClient(pont.services.db, { name: 'conformance integrator', organizationId: demo.organization_id, facilityId: demo.facility_id, scopes: [...SCOPES] });
demo.clients.unshift({ name: 'conformance integrator', client_id: integrator.client_id, client_secret: integrator.client_secret, scopes: [...SCOPES] });
// A client of another organisation (a clinic with no tie to any patient), for the patient's own app: the app a
// demo organisation paired never approves the demo's own requests, so the request the patient approves is the clinic's.
const clinicClient = await createClient(pont.services.db, { name: 'conformance clinic', organizationId: 'org-conformance-clinic', scopes: ['consents:write', 'patients:read'] });
const clinic = { organization_id: 'org-conformance-clinic', client_id: clinicClient.client_id, client_secret: clinicClient.client_secret };
// A patient of another organisation, with no consent to the demo's (ConsentRequiredError).
const elsewhere = pont.services.fhir.repository({ principal: { kind: 'client', clientId: 'conformance', organizationId: 'org-elsewhere', scopes: [] }, channel: 'connect' });
const foreign = await elsewhere.create({ resourceType: 'Patient', name: [{ use: 'official', family: 'Elsewhere', given: ['Noor'] }], gender: 'female', birthDate: '1985-05-05' });
const foreignHealthId = foreign.identifier.find((i) => i.system === 'https://pont.health/fhir/sid/health-id').value;
// A patient of the demo organisation with PAGING_TOTAL Observations (written by it, so readable without consent), for
// the auto-paging scenario: `paging` in the JSON line is the search that returns exactly them.
const PAGING_TOTAL = 1000;
const demoOrg = pont.services.fhir.repository({ principal: { kind: 'client', clientId: integrator.client_id, organizationId: demo.organization_id, facilityId: demo.facility_id, scopes: [...SCOPES] }, channel: 'connect' });
const pagingPatient = await demoOrg.create({ resourceType: 'Patient', name: [{ use: 'official', family: 'Paging', given: ['Conformance'] }], gender: 'other', birthDate: '1970-01-01' });
const pagingCode = { system: 'https://pont.health/conformance', code: 'paging' };
// One write of them all (as a transaction Bundle writes its entries): a thousand creates one by one took seconds.
await demoOrg.writeItems(
  Array.from({ length: PAGING_TOTAL }, (_, i) => ({
    method: 'POST',
    resource: { resourceType: 'Observation', id: randomUUID(), status: 'final', code: { coding: [pagingCode] }, subject: { reference: `Patient/${pagingPatient.id}` }, valueInteger: i },
  })),
  'create',
);
const paging = { resource_type: 'Observation', params: { patient: `Patient/${pagingPatient.id}`, code: `${pagingCode.system}|${pagingCode.code}` }, total: PAGING_TOTAL };
// A well-formed Health ID that no patient has (NotFoundException).
const unregistered = `CM0000000001${checkDigits('CM0000000001')}`;
const proxy = await startFaultProxy(new URL(pont.url));
process.stdout.write(JSON.stringify({ base_url: pont.url, fault_url: proxy.url, receiver_url: `http://127.0.0.1:${receiver.address().port}/hook`, unregistered_health_id: unregistered, foreign_health_id: foreignHealthId, clinic, paging, demo }) + '\n');

const stop = async () => {
  receiver.close();
  proxy.server.close();
  await pont.close();
  await scratch?.drop();
  process.exit(0);
};
process.stdin.on('end', stop);
process.stdin.resume();
process.on('SIGTERM', stop);

/**
 * The fault-injecting proxy (README.md, "Fault proxy"): forwards every request to Pont unchanged, except the FIRST one
 * with a given `X-Conformance-Fault: <mode>; id=<token>`, which it answers with the fault. It counts, per id, what
 * it received and forwarded and the Idempotency-Key of each request, for the libraries to check what they sent.
 */
async function startFaultProxy(target) {
  const MODES = new Set(['lose-answer', 'reset', 'status-503', 'status-429', 'slow']);
  const seen = new Map(); // id -> { received, forwarded, idempotency_keys }
  const errorBody = (error_code, message, extra = {}) => JSON.stringify({ status: 'error', error_code, message, ...extra });

  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://proxy');
    if (url.pathname === '/__conformance/requests') {
      const stats = seen.get(url.searchParams.get('id') ?? '') ?? { received: 0, forwarded: 0, idempotency_keys: [] };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats));
      return;
    }
    const header = req.headers['x-conformance-fault'];
    let mode = null;
    let stats = null;
    if (header !== undefined) {
      const parsed = /^\s*([a-z0-9-]+)\s*;\s*id=([^\s;]+)\s*$/i.exec(String(header));
      if (!parsed || !MODES.has(parsed[1].toLowerCase())) {
        res.writeHead(400, { 'content-type': 'application/json' }).end(errorBody('VALIDATION_FAILED', `X-Conformance-Fault must be "<mode>; id=<token>" with mode one of ${[...MODES].join(', ')}`));
        return;
      }
      const id = parsed[2];
      stats = seen.get(id);
      if (!stats) seen.set(id, (stats = { received: 0, forwarded: 0, idempotency_keys: [] }));
      mode = stats.received === 0 ? parsed[1].toLowerCase() : null; // the fault applies to the first request only
      stats.received++;
      stats.idempotency_keys.push(req.headers['idempotency-key'] ?? null);
      delete req.headers['x-conformance-fault'];
    }

    // The body is read whole first, so a request forwarded late (slow) or whose caller is gone is still whole.
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('error', () => {});
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const pass = ({ loseAnswer = false } = {}) => {
        if (stats) stats.forwarded++;
        const upstream = forward({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
          if (loseAnswer || res.destroyed) {
            // The call took effect; the caller never hears of it.
            answer.resume();
            answer.on('end', () => req.socket.destroy());
            return;
          }
          res.writeHead(answer.statusCode, answer.rawHeaders);
          answer.pipe(res);
        });
        upstream.on('error', () => req.socket.destroy());
        upstream.end(body);
      };
      switch (mode) {
        case 'lose-answer':
          return pass({ loseAnswer: true });
        case 'reset':
          return void req.socket.destroy();
        case 'status-503':
          return void res.writeHead(503, { 'content-type': 'application/json' }).end(errorBody('SERVICE_UNAVAILABLE', 'Injected by the conformance fault proxy'));
        case 'status-429':
          return void res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' }).end(errorBody('RATE_LIMITED', 'Injected by the conformance fault proxy', { retry_after: 1 }));
        case 'slow':
          // Forwarded even when the caller gave up meanwhile, as a slow server would still apply it.
          return void setTimeout(pass, 2000);
        default:
          return pass();
      }
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}` };
}
