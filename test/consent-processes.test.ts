import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../src/auth/clients';
import { openDatabase } from '../src/db/open';
import { backend, createScratchDatabase, createTestClient, startTestServer, type TestServer } from './harness';
import { bearerFrom, startPontProcess, stopPontProcess, type PontProcess } from './webhooks-support';

const inAYear = () => new Date(Date.now() + 365 * 86_400_000).toISOString();

describe('concurrent grants and revocations', () => {
  let pont: TestServer;
  beforeAll(async () => {
    pont = await startTestServer();
  });
  afterAll(async () => {
    await pont?.close();
  });

  it('apply one after the other: the last committed wins, and the events say so in the same order', async () => {
    const clinic = await createTestClient(pont, ['health_id:verify', 'consents:write', 'consents:read'], { organizationId: 'org-race' });
    const healthId = (await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: clinic.headers, json: { first_name: 'Race', last_name: 'Consent' } })).body.health_id;
    const call = (action: 'grant' | 'revoke') =>
      pont.json(`/api/v1/connect/patient/${healthId}/consent/${action}`, {
        method: 'POST',
        headers: clinic.headers,
        json: action === 'grant' ? { consent_type: 'full_record', expires_at: inAYear() } : {},
      });
    await call('grant');
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => call(i % 2 ? 'revoke' : 'grant')));
    for (const r of results) expect([200, 201, 404]).toContain(r.status); // a revoke may find nothing left to revoke
    const { rows } = await pont.services.db.query<{ type: string }>(
      `SELECT type FROM events WHERE type LIKE 'consent.%' AND data->>'organization_id' = 'org-race' ORDER BY seq`,
    );
    const last = rows[rows.length - 1]!.type;
    const status = (await pont.json(`/api/v1/connect/patient/${healthId}/consent`, { headers: clinic.headers })).body.status;
    expect(status).toBe(last === 'consent.granted' ? 'active' : 'revoked');
    // Grants and revocations alternate in the event stream: never two revocations of one consent.
    for (let i = 1; i < rows.length; i++) if (rows[i]!.type === 'consent.revoked') expect(rows[i - 1]!.type).toBe('consent.granted');
  });
});

describe.runIf(backend === 'postgres')('revocation across two server processes', () => {
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
  const processes: PontProcess[] = [];
  let headers: Record<string, string>;

  beforeAll(async () => {
    scratch = await createScratchDatabase({ migrated: true });
    const env = { PONT_PUBLIC_URL: 'http://pont.test' };
    processes.push(await startPontProcess(scratch.url, env), await startPontProcess(scratch.url, env));
    const db = await openDatabase({ databaseUrl: scratch.url });
    const client = await createClient(db, { name: 'two', organizationId: 'org-two', scopes: ['health_id:verify', 'consents:write', 'fhir:read', 'fhir:write'] });
    await db.close();
    headers = await bearerFrom(processes[0]!.url, client);
  }, 120_000);
  afterAll(async () => {
    for (const p of processes) await stopPontProcess(p, 'SIGTERM');
    await scratch?.drop();
  });

  it('takes effect on the next request in the other process', async () => {
    const [a, b] = processes.map((p) => p.url) as [string, string];
    // An operator-free setup: another organisation registers the patient and writes a record.
    const db = await openDatabase({ databaseUrl: scratch.url });
    const writer = await createClient(db, { name: 'writer', organizationId: 'org-writer', scopes: ['health_id:verify', 'fhir:write', 'fhir:read'] });
    await db.close();
    const w = await bearerFrom(a, writer);
    const healthId = ((await (await fetch(`${a}/api/v1/connect/patients/resolve`, { method: 'POST', headers: w, body: JSON.stringify({ first_name: 'Two', last_name: 'Procs' }) })).json()) as { health_id: string }).health_id;
    const patient = ((await (await fetch(`${a}/api/fhir/R4/Patient?identifier=https://pont.health/fhir/sid/health-id|${healthId}`, { headers: w })).json()) as any).entry[0].resource;
    const read = (url: string) => fetch(`${url}/api/fhir/R4/Patient/${patient.id}`, { headers }).then((r) => r.status);

    expect(await read(b)).toBe(404);
    const grant = await fetch(`${a}/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', headers, body: JSON.stringify({ consent_type: 'full_record', expires_at: inAYear() }) });
    expect(grant.status).toBe(201);
    expect(await read(b)).toBe(200);
    const revoke = await fetch(`${a}/api/v1/connect/patient/${healthId}/consent/revoke`, { method: 'POST', headers, body: '{}' });
    expect(revoke.status).toBe(200);
    expect(await read(b)).toBe(404);
    expect(await read(a)).toBe(404);
  }, 60_000);
});
