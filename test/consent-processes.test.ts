import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../src/auth/clients';
import { openDatabase } from '../src/db/open';
import { backend, createScratchDatabase, createTestClient, startTestServer, type TestServer } from './harness';
import { loadConfig } from '../src/config';
import { createSubscription } from '../src/webhooks/subscriptions';
import { eventually } from './eventually';
import { bearerFrom, pendingDeliveries, startPontProcess, startReceiver, stopPontProcess, type PontProcess, type Receiver } from './webhooks-support';

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

describe.runIf(backend === 'postgres')('expiry and revocation across two server processes: the next request, and both sides told once', () => {
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
  let db: Awaited<ReturnType<typeof openDatabase>>;
  const processes: PontProcess[] = [];
  const receivers: Receiver[] = [];
  let holder: Record<string, string>;
  let requester: Record<string, string>;
  /** A webhook receiver subscribed, for `organizationId`, to `type`. */
  const listen = async (organizationId: string, type: 'consent.expired' | 'consent.revoked') => {
    const receiver = await startReceiver();
    receivers.push(receiver);
    const secretKey = loadConfig({}).webhooks.secretKey; // the development key, as the children use
    const subscription = await createSubscription(db, secretKey, { organizationId }, { callback_url: receiver.url, subscribed_events: [type] });
    receiver.secret = subscription.webhook_secret;
    return Object.assign(receiver, { subscriptionId: subscription.id });
  };
  /** A patient the holder registers, with a prescription of 2024 it writes (so it holds the patient's data). */
  const patientWithPrescription = async (url: string, name: string) => {
    const healthId = ((await (await fetch(`${url}/api/v1/connect/patients/resolve`, { method: 'POST', headers: holder, body: JSON.stringify({ first_name: name, last_name: 'Expiry' }) })).json()) as { health_id: string }).health_id;
    const pid = ((await (await fetch(`${url}/api/fhir/R4/Patient?identifier=https://pont.health/fhir/sid/health-id|${healthId}`, { headers: holder })).json()) as any).entry[0].resource.id as string;
    const rx = (await (await fetch(`${url}/api/fhir/R4/MedicationRequest`, {
      method: 'POST',
      headers: { ...holder, 'content-type': 'application/fhir+json' },
      body: JSON.stringify({ resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Atenolol' }, subject: { reference: `Patient/${pid}` }, authoredOn: '2024-04-04' }),
    })).json()) as { id: string };
    return { healthId, pid, rx: rx.id };
  };
  const read = (url: string, p: { rx: string }) => fetch(`${url}/api/fhir/R4/MedicationRequest/${p.rx}`, { headers: requester }).then((r) => r.status);
  const search = (url: string, p: { pid: string }) =>
    fetch(`${url}/api/fhir/R4/MedicationRequest?patient=${p.pid}`, { headers: requester }).then(async (r) => ((await r.json()) as { entry?: Array<{ search?: { mode?: string } }> }).entry?.filter((e) => e.search?.mode === 'match').length ?? 0);

  beforeAll(async () => {
    scratch = await createScratchDatabase({ migrated: true });
    const env = { PONT_PUBLIC_URL: 'http://pont.test', PONT_WEBHOOK_POLL_INTERVAL: '50ms' };
    processes.push(await startPontProcess(scratch.url, env), await startPontProcess(scratch.url, env));
    db = await openDatabase({ databaseUrl: scratch.url });
    holder = await bearerFrom(processes[0]!.url, await createClient(db, { name: 'holder', organizationId: 'org-holder', scopes: ['health_id:verify', 'fhir:write', 'fhir:read'] }));
    requester = await bearerFrom(processes[1]!.url, await createClient(db, { name: 'requester', organizationId: 'org-requester', scopes: ['health_id:verify', 'consents:write', 'consents:read', 'fhir:read'] }));
  }, 120_000);
  afterAll(async () => {
    for (const p of processes) await stopPontProcess(p, 'SIGTERM');
    for (const r of receivers) await r.close();
    await db?.close();
    await scratch?.drop();
  });

  it('stops reads on the next request in both processes and notifies requester and holder once each, though both run the job', async () => {
    const [a, b] = processes.map((p) => p.url) as [string, string];
    const holderHears = await listen('org-holder', 'consent.expired');
    const requesterHears = await listen('org-requester', 'consent.expired');

    // Three patients, each with a prescription the holder wrote and a consent of the requester's (one with an artefact's
    // kinds and period): three notices due at once, so both processes' jobs have several to claim.
    const patients: Array<{ healthId: string; pid: string; rx: string; consentId: string }> = [];
    for (const name of ['Una', 'Dos', 'Tres']) {
      const p = await patientWithPrescription(a, name);
      const artefact = name === 'Una' ? { hi_types: ['Prescription'], date_range: { from: '2024-01-01', to: '2024-12-31' } } : {};
      const grant = await fetch(`${b}/api/v1/connect/patient/${p.healthId}/consent/grant`, { method: 'POST', headers: requester, body: JSON.stringify({ consent_type: 'prescriptions', expires_at: inAYear(), ...artefact }) });
      expect(grant.status).toBe(201);
      patients.push({ ...p, consentId: ((await grant.json()) as { consent_id: string }).consent_id });
    }
    for (const p of patients) for (const url of [a, b]) {
      await eventually(async () => expect(await read(url, p)).toBe(200)); // an artefact's scope reaches the other process milliseconds after the commit
      expect(await search(url, p)).toBe(1);
    }
    const consentIds = patients.map((p) => p.consentId);
    const expiredEvents = async () =>
      (await db.query<{ id: string; n: number }>(`SELECT data->>'consent_id' AS id, count(*)::int AS n FROM events WHERE type = 'consent.expired' AND data->>'consent_id' = ANY($1::text[]) GROUP BY 1 ORDER BY 1`, [consentIds])).rows;
    expect(await expiredEvents()).toEqual([]);

    // Time passes: to the database, a consent's expiry has passed when its expires_at (and its notice's due time) is before now().
    // The processes' clocks are real; the notice job compares due_at with its clock, the policy compares expires_at with now().
    await db.transaction(async (tx) => {
      await tx.query(`UPDATE consent_access SET expires_at = now() - interval '1 second' WHERE consent_id = ANY($1::text[])`, [consentIds]);
      await tx.query(`UPDATE consent_notices SET due_at = now() - interval '1 second' WHERE kind = 'expired' AND consent_id = ANY($1::text[])`, [consentIds]);
    });
    // The next request, on either process, sees nothing: no read, no search hit.
    for (const p of patients) for (const url of [a, b]) {
      expect(await read(url, p)).toBe(404);
      expect(await search(url, p)).toBe(0);
    }

    // Both processes run the notice job every 2 s; each consent's consent.expired is recorded once and delivered once to each side.
    await eventually(async () => expect((await expiredEvents()).map((r) => r.id)).toEqual([...consentIds].sort()));
    for (const receiver of [holderHears, requesterHears]) {
      const got = await receiver.waitFor(consentIds.length);
      expect(got.every((r) => r.signatureValid)).toBe(true);
      expect(got.map((r) => r.body.data.consent_id).sort()).toEqual([...consentIds].sort());
      for (const r of got) {
        const p = patients.find((x) => x.consentId === r.body.data.consent_id)!;
        expect(r.body.type).toBe('consent.expired');
        expect(r.body.data).toMatchObject({ artefact_id: p.consentId, organization_id: 'org-requester', health_id: p.healthId, status: 'expired' });
      }
    }
    // A barrier for "and never again" (no fixed wait): a fourth patient's consent, due only now, fires on a later run of a job; every
    // run since the first three fired could have claimed them again, and they are still recorded and delivered once each.
    const fourth = await patientWithPrescription(a, 'Cuatro');
    const late = await fetch(`${a}/api/v1/connect/patient/${fourth.healthId}/consent/grant`, { method: 'POST', headers: requester, body: JSON.stringify({ consent_type: 'documents', expires_at: inAYear() }) });
    expect(late.status).toBe(201);
    const lateId = ((await late.json()) as { consent_id: string }).consent_id;
    await db.query(`UPDATE consent_notices SET due_at = now() - interval '1 second' WHERE kind = 'expired' AND consent_id = $1`, [lateId]);
    for (const receiver of [holderHears, requesterHears]) await eventually(async () => expect(receiver.received.map((r) => r.body.data.consent_id)).toContain(lateId));
    expect((await expiredEvents()).map((r) => r.n)).toEqual(consentIds.map(() => 1));
    for (const receiver of [holderHears, requesterHears]) {
      await eventually(async () => expect(await pendingDeliveries(db, receiver.subscriptionId)).toBe(0));
      expect(receiver.received).toHaveLength(consentIds.length + 1);
      expect(new Set(receiver.received.map((r) => r.body.id)).size).toBe(consentIds.length + 1);
    }
  }, 120_000);

  it('revocation: stops reads on the next request in the other process and notifies requester and holder once each', async () => {
    const [a, b] = processes.map((p) => p.url) as [string, string];
    const holderHears = await listen('org-holder', 'consent.revoked');
    const requesterHears = await listen('org-requester', 'consent.revoked');
    const p = await patientWithPrescription(b, 'Revoca');
    const grant = await fetch(`${b}/api/v1/connect/patient/${p.healthId}/consent/grant`, {
      method: 'POST', headers: requester, body: JSON.stringify({ consent_type: 'prescriptions', expires_at: inAYear(), hi_types: ['Prescription'], date_range: { from: '2024-01-01', to: '2024-12-31' } }),
    });
    expect(grant.status).toBe(201);
    const consentId = ((await grant.json()) as { consent_id: string }).consent_id;
    await eventually(async () => expect(await read(a, p)).toBe(200));
    expect(await read(b, p)).toBe(200);
    expect((await fetch(`${a}/api/v1/connect/patient/${p.healthId}/consent/revoke`, { method: 'POST', headers: requester, body: '{}' })).status).toBe(200);
    for (const url of [b, a]) {
      expect(await read(url, p)).toBe(404);
      expect(await search(url, p)).toBe(0);
    }
    for (const receiver of [holderHears, requesterHears]) {
      const [got] = await receiver.waitFor(1);
      expect(got!.signatureValid).toBe(true);
      expect(got!.body).toMatchObject({ type: 'consent.revoked', data: { consent_id: consentId, artefact_id: consentId, organization_id: 'org-requester', health_id: p.healthId } });
    }
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE type = 'consent.revoked' AND data->>'consent_id' = $1`, [consentId]);
    expect(rows[0]!.n).toBe(1);
    // Nothing left to deliver: nothing more arrives.
    for (const receiver of [holderHears, requesterHears]) {
      await eventually(async () => expect(await pendingDeliveries(db, receiver.subscriptionId)).toBe(0));
      expect(receiver.received).toHaveLength(1);
    }
  }, 60_000);
});
