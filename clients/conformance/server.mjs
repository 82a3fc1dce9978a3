#!/usr/bin/env node
// The conformance server: a real Pont on the embedded database (in memory), seeded with the demo, and a webhook
// receiver that keeps what Pont delivers. Each client library's tests start it, read its first stdout line
// ({"base_url", "receiver_url", "demo"}), run the scenario of README.md beside this file, and end it by closing
// its stdin (or with SIGTERM).
import { createServer } from 'node:http';
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

const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'error', PONT_ENV: 'development', PONT_WEBHOOK_RETRY_DELAYS: '1s,1s,1s,1s,1s,1s', ...(process.env.PONT_CONFORMANCE_ENV ? JSON.parse(process.env.PONT_CONFORMANCE_ENV) : {}) });
config.dataDir = undefined; // in memory
const pont = await startPont(config);
const demo = await (await fetch(`${pont.url}/api/demo/reset`, { method: 'POST' })).json();
// The scenario also records and revokes consent and reads the audit trail, which the demo's own clients may not
// (a sandbox integrator cannot grant itself consent): its first client is one of the demo organisation's with every scope.
const { createClient } = await import('../../src/auth/clients.ts');
const { SCOPES } = await import('../../src/auth/scopes.ts');
const integrator = await createClient(pont.services.db, { name: 'conformance integrator', organizationId: demo.organization_id, facilityId: demo.facility_id, scopes: [...SCOPES] });
demo.clients.unshift({ name: 'conformance integrator', client_id: integrator.client_id, client_secret: integrator.client_secret, scopes: [...SCOPES] });
// A patient of another organisation, with no consent to the demo's (ConsentRequiredError).
const elsewhere = pont.services.fhir.repository({ principal: { kind: 'client', clientId: 'conformance', organizationId: 'org-elsewhere', scopes: [] }, channel: 'connect' });
const foreign = await elsewhere.create({ resourceType: 'Patient', name: [{ use: 'official', family: 'Elsewhere', given: ['Noor'] }], gender: 'female', birthDate: '1985-05-05' });
const foreignHealthId = foreign.identifier.find((i) => i.system === 'https://pont.health/fhir/sid/health-id').value;
// A well-formed Health ID that no patient has (NotFoundException).
const unregistered = `CM0000000001${checkDigits('CM0000000001')}`;
process.stdout.write(JSON.stringify({ base_url: pont.url, receiver_url: `http://127.0.0.1:${receiver.address().port}/hook`, unregistered_health_id: unregistered, foreign_health_id: foreignHealthId, demo }) + '\n');

const stop = async () => {
  receiver.close();
  await pont.close();
  process.exit(0);
};
process.stdin.on('end', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
