import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend, createTestClient, startTestServer, type TestClient, type TestServer } from './harness';
import { loadConfig } from '../src/config';
import { startPont } from '../src/server';
import { buildAuditEvent } from '../src/audit/audit';
import { eventually } from './eventually';

/**
 * Attacks on the consent artefacts' guarantees (issue 43) after the read-limit cache (658d417), the bulk export's
 * fetch key (b9ccc47) and the export snapshot filter (9a02068): frequency counted on every door and in every process,
 * the AuditEvent's purpose of use, other organisations' consents, hostile input. Every test asserts the correct
 * behaviour; a guarantee found broken is kept as `it.fails` with the finding named.
 */
let pont: TestServer;
let hospital: TestClient;

const call = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
  pont.json(path, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
const fhir = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) => call(client, `/api/fhir/R4${path}`, init);
const connect = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) => call(client, `/api/v1/connect${path}`, init);
const inDays = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString();
let seq = 0;

async function patientWithPrescription(first: string) {
  const resolved = await connect(hospital, '/patients/resolve', { method: 'POST', json: { first_name: first, last_name: `Attack${++seq}`, date_of_birth: '1975-04-04', sex: 'female' } });
  expect(resolved.status, JSON.stringify(resolved.body)).toBeLessThan(300);
  const hid = resolved.body.health_id as string;
  const pid = (await fhir(hospital, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${hid}`)).body.entry[0].resource.id as string;
  const rx = await fhir(hospital, '/MedicationRequest', {
    method: 'POST',
    json: { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Aspirin' }, subject: { reference: `Patient/${pid}` }, authoredOn: '2025-02-02' },
  });
  expect(rx.status).toBe(201);
  return { hid, pid, rxId: rx.body.id as string };
}

const READER_SCOPES = ['health_id:verify', 'consents:write', 'consents:read', 'prescriptions:read', 'patients:read', 'patient:profile:read', 'patient:diagnostics:read', 'fhir:read', 'fhir:write'] as const;
const reader = (org: string) => createTestClient(pont, [...READER_SCOPES] as any, { organizationId: org });
const grant = async (client: TestClient, hid: string, fields: Record<string, unknown>) => {
  const res = await connect(client, `/patient/${hid}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(30), ...fields } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { consent_id: string };
};

async function auditRecords(requestId: string) {
  const { rows } = await pont.services.db.query<{ record: any; recorded: Date }>('SELECT record, recorded FROM audit_log WHERE request_id = $1', [requestId]);
  return rows.map((r) => buildAuditEvent(r.record, new Date(r.recorded)));
}
const codes = (e: { purposeOfEvent?: Array<{ coding?: Array<{ code?: string }> }> }) => (e.purposeOfEvent ?? []).flatMap((p) => (p.coding ?? []).map((c) => c.code));

beforeAll(async () => {
  pont = await startTestServer();
  hospital = await createTestClient(pont, ['health_id:verify', 'fhir:read', 'fhir:write', 'consents:write', 'consents:read'], { organizationId: 'org-hospital' });
});
afterAll(async () => {
  await pont?.close();
});

/** `n` Patients of `org`'s own (its own data: no consent involved), written ten at a time. */
async function ownPatients(org: TestClient, n: number, family: string): Promise<void> {
  for (let i = 0; i < n; i += 10)
    await Promise.all(
      Array.from({ length: Math.min(10, n - i) }, (_, j) => fhir(org, '/Patient', { method: 'POST', json: { resourceType: 'Patient', name: [{ family: `${family}${i + j}` }] } }).then((r) => expect(r.status).toBe(201))),
    );
}

describe('frequency: every door counts', () => {
  it('FHIR read, search with _include and Connect records each spend a fetch (3 a day: then every door is 429)', async () => {
    const org = await reader('org-doors');
    const { hid, pid, rxId } = await patientWithPrescription('Doors');
    await grant(org, hid, { frequency: { count: 3, unit: 'day' } });
    const doors: Array<[string, () => Promise<number>]> = [
      ['read', () => fhir(org, `/MedicationRequest/${rxId}`).then((r) => r.status)],
      ['search _include', () => fhir(org, `/MedicationRequest?patient=${pid}&_include=MedicationRequest:subject`).then((r) => r.status)],
      ['connect records', () => connect(org, `/patient/${hid}/records?type=prescriptions`).then((r) => r.status)],
    ];
    for (const [name, door] of doors) expect(await door(), name).toBe(200);
    for (const [name, door] of doors) expect(await door(), `${name} after 3 fetches`).toBe(429);
    for (const path of [`/MedicationRequest/${rxId}/_history/1`, `/MedicationRequest/_history`, `/Patient/${pid}/MedicationRequest`]) {
      const res = await fhir(org, path);
      const leaked = res.status === 200 && JSON.stringify(res.body).includes(rxId);
      expect(leaked, `${path}: ${res.status}`).toBe(false);
    }
    const summary = await pont.json(`/api/v1/sdk/patients/${hid}/summary`, { headers: org.headers });
    expect(summary.status === 200 && JSON.stringify(summary.body).includes('Aspirin'), `sdk summary ${summary.status}`).toBe(false);
  });

  it('$everything spends a fetch (full record, once a day: the next read and $everything are 429)', async () => {
    const org = await reader('org-everything');
    const { hid, pid, rxId } = await patientWithPrescription('Everything');
    await grant(org, hid, { consent_type: 'full_record', frequency: { count: 1, unit: 'day' } });
    const first = await fhir(org, `/Patient/${pid}/$everything`);
    expect(first.status, JSON.stringify(first.body).slice(0, 200)).toBe(200);
    expect((await fhir(org, `/MedicationRequest/${rxId}`)).status).toBe(429);
    expect((await fhir(org, `/Patient/${pid}/$everything`)).status).toBe(429);
  });

  // Found in review: a FHIR search (or _include/$everything page) that returned the data of more than 50 patients
  // counted only the 50 its audit record names; a consented patient ordered after 50 others was read uncounted, as
  // often as the client liked. Every patient of a read is counted now (repository.auditAccess).
  it('a search returning 51 patients counts the 51st: a spent consent does not show its patient (found: only the first 50 patients of a search were counted)', async () => {
    const org = await reader('org-many');
    const { hid, pid } = await patientWithPrescription('Fiftyfirst');
    await grant(org, hid, { consent_type: 'full_record', frequency: { count: 1, unit: 'day' } });
    // 50 patients of its own (its own data: no consent involved), written after the consented one.
    await ownPatients(org, 50, 'Own');
    expect((await fhir(org, `/Patient/${pid}`)).status).toBe(200); // the one fetch of the day
    expect((await fhir(org, `/Patient/${pid}`)).status).toBe(429);
    for (let i = 0; i < 3; i++) {
      const page = await fhir(org, '/Patient?_count=100&_sort=-_lastUpdated');
      const shown = page.status === 200 ? (page.body.entry ?? []).map((e: any) => e.resource.id) : [];
      // Correct: 429, or at least the spent patient's data is not in the answer.
      expect(page.status === 429 || !shown.includes(pid), `status ${page.status}, ${shown.length} patients, spent one at #${shown.indexOf(pid) + 1}`).toBe(true);
    }
  });

  it('a bulk export whose file holds 51 patients counts the 51st: a spent consent does not export its patient', async () => {
    const org = await reader('org-many-export');
    const { hid, pid } = await patientWithPrescription('ExportFiftyfirst');
    await grant(org, hid, { consent_type: 'full_record', frequency: { count: 1, unit: 'day' } });
    await ownPatients(org, 50, 'OwnExport');
    expect((await fhir(org, `/Patient/${pid}`)).status).toBe(200);
    expect((await fhir(org, `/Patient/${pid}`)).status).toBe(429);
    const kick = await pont.fetch('/api/fhir/R4/Patient/$export?_type=Patient', { headers: { ...org.headers, prefer: 'respond-async' } });
    expect(kick.status).toBe(202);
    const status = kick.headers.get('content-location')!;
    await (pont.services.workers.find((w) => w.name === 'bulk-export') as unknown as { drain(): Promise<void> }).drain();
    const manifest = await pont.json(status.slice(status.indexOf('/api/fhir')), { headers: org.headers });
    const got: string[] = [];
    for (const file of manifest.body.output ?? []) {
      const text = await (await pont.fetch(file.url.slice(file.url.indexOf('/api/fhir')), { headers: org.headers })).text();
      for (const line of text.split('\n').filter(Boolean)) got.push(JSON.parse(line).id);
    }
    expect(got, `export ${manifest.status}`).not.toContain(pid);
  });

  it('a batch or transaction Bundle of GETs counts each read: under "3 a day" at most 3 entries show the resource', async () => {
    const org = await reader('org-batch');
    const { hid, pid, rxId } = await patientWithPrescription('Batched');
    await grant(org, hid, { frequency: { count: 3, unit: 'day' } });
    let shown = 0;
    for (const type of ['batch', 'transaction']) {
      const entry = Array.from({ length: 4 }, (_, i) => ({ request: { method: 'GET', url: i % 2 ? `MedicationRequest/${rxId}` : `MedicationRequest?patient=${pid}` } }));
      const res = await fhir(org, '', { method: 'POST', headers: { 'content-type': 'application/fhir+json' }, json: { resourceType: 'Bundle', type, entry } });
      expect(res.status, `${type}: ${JSON.stringify(res.body).slice(0, 300)}`).toBeLessThan(500);
      if (res.status === 200) shown += (JSON.stringify(res.body).match(new RegExp(`"id":"${rxId}"`, 'g')) ?? []).length;
    }
    expect(shown).toBeLessThanOrEqual(3);
  });

  it('a bulk export cannot be made to share a key with another export: two exports spend two fetches', async () => {
    const org = await reader('org-exports');
    const { hid, rxId } = await patientWithPrescription('Twice');
    await grant(org, hid, { frequency: { count: 2, unit: 'day' } });
    const exportOnce = async (requestId: string) => {
      const kick = await pont.fetch('/api/fhir/R4/Patient/$export?_type=MedicationRequest', { headers: { ...org.headers, prefer: 'respond-async', 'x-request-id': requestId } });
      expect(kick.status, await kick.clone().text()).toBe(202);
      const status = kick.headers.get('content-location')!;
      await (pont.services.workers.find((w) => w.name === 'bulk-export') as unknown as { drain(): Promise<void> }).drain();
      return pont.json(status.slice(status.indexOf('/api/fhir')), { headers: org.headers });
    };
    const first = await exportOnce('bulk-export:same');
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const second = await exportOnce('bulk-export:same');
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    expect((await fhir(org, `/MedicationRequest/${rxId}`)).status).toBe(429);
  });
});

describe("subscriptions: a full-resource notification is a read and counts", () => {
  it('$events with full resources spends the fetch; once spent, the resource is withheld (numbered, naming nothing)', async () => {
    const org = await reader('org-subscriber');
    const { hid, pid } = await patientWithPrescription('Subscribed');
    await grant(org, hid, { consent_type: 'full_record', frequency: { count: 1, unit: 'day' } });
    const topics = await pont.json('/api/fhir/R4/SubscriptionTopic');
    const topicUrl = topics.body.entry.map((e: any) => e.fullUrl as string).find((u: string) => u.endsWith('/encounter-finished'))!;
    const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
    const created = await fhir(org, '/Subscription', {
      method: 'POST',
      headers: { 'content-type': 'application/fhir+json' },
      json: {
        resourceType: 'Subscription', meta: { profile: [`${BACKPORT}/backport-subscription`] }, status: 'requested', reason: 'attack', criteria: topicUrl,
        channel: { type: 'websocket', payload: 'application/fhir+json', _payload: { extension: [{ url: `${BACKPORT}/backport-payload-content`, valueCode: 'full-resource' }] } },
      },
    });
    expect(created.status, JSON.stringify(created.body).slice(0, 300)).toBe(201);
    const enc = await fhir(hospital, '/Encounter', {
      method: 'POST',
      json: { resourceType: 'Encounter', status: 'in-progress', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: `Patient/${pid}` } },
    });
    expect(enc.status).toBe(201);
    expect((await fhir(hospital, `/Encounter/${enc.body.id}`, { method: 'PUT', json: { ...enc.body, status: 'finished' } })).status).toBe(200);
    const withResource = async () => {
      const res = await fhir(org, `/Subscription/${created.body.id}/$events`);
      expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(200);
      return (res.body.entry ?? []).filter((e: any) => e.resource?.resourceType === 'Encounter').length as number;
    };
    await eventually(async () => {
      const res = await fhir(org, `/Subscription/${created.body.id}/$status`);
      expect(JSON.stringify(res.body)).toMatch(/"events-since-subscription-start","valueString":"[1-9]/);
    });
    const got = [await withResource(), await withResource(), await withResource()];
    expect(got, 'the first shows the Encounter (the one fetch), the others withhold it').toEqual([1, 0, 0]);
  });
});

describe('bulk export and the stated purpose of use', () => {
  // Found in review: a bulk export forgot the X-Purpose-Of-Use of its kick-off (the worker built the export's
  // repository from the principal alone): an organisation holding only a CAREMGT consent that kicked off an export
  // stating DSRCH got the patient's data, which every other door refuses under that purpose. The job keeps the purpose
  // now (migration 041) and the export reads under it.
  it('an export stating a purpose the organisation holds no consent for exports none of the patient\'s data (found: the export ignored X-Purpose-Of-Use)', async () => {
    const org = await reader('org-export-purpose');
    const { hid, pid, rxId } = await patientWithPrescription('ExportPurpose');
    await grant(org, hid, { purpose_of_use: 'CAREMGT' });
    // Every other door: nothing under DSRCH.
    expect((await fhir(org, `/MedicationRequest/${rxId}`, { headers: { 'x-purpose-of-use': 'DSRCH' } })).status).toBe(404);
    expect((await fhir(org, `/MedicationRequest?patient=${pid}`, { headers: { 'x-purpose-of-use': 'DSRCH' } })).body.total ?? 0).toBe(0);
    const kick = await pont.fetch('/api/fhir/R4/Patient/$export?_type=Patient,MedicationRequest', { headers: { ...org.headers, prefer: 'respond-async', 'x-purpose-of-use': 'DSRCH' } });
    if (kick.status !== 202) {
      expect(kick.status).toBeLessThan(500); // refusing the purpose outright is correct too
      return;
    }
    const status = kick.headers.get('content-location')!;
    await (pont.services.workers.find((w) => w.name === 'bulk-export') as unknown as { drain(): Promise<void> }).drain();
    const manifest = (await (await pont.fetch(status.slice(status.indexOf('/api/fhir')), { headers: org.headers })).json()) as { output?: Array<{ url: string }> };
    const got: string[] = [];
    for (const file of manifest.output ?? []) {
      const text = await (await pont.fetch(file.url.slice(file.url.indexOf('/api/fhir')), { headers: org.headers })).text();
      for (const line of text.split('\n').filter(Boolean)) got.push(`${JSON.parse(line).resourceType}/${JSON.parse(line).id}`);
    }
    expect(got).not.toContain(`MedicationRequest/${rxId}`);
    expect(got).not.toContain(`Patient/${pid}`);
  });
});

describe.runIf(backend === 'postgres')('frequency across two processes: the read-limit cache', () => {
  let second: Awaited<ReturnType<typeof startPont>>;
  beforeAll(async () => {
    second = await startPont(loadConfig({ PORT: '0', LOG_LEVEL: 'error', DATABASE_URL: pont.config.databaseUrl, PONT_PUBLIC_URL: pont.config.publicUrl }));
  });
  afterAll(async () => {
    await second?.close();
  });
  const readAt = (server: { url: string }, client: TestClient, rxId: string) => fetch(`${server.url}/api/fhir/R4/MedicationRequest/${rxId}`, { headers: client.headers }).then((r) => r.status);

  // Found in review: a process that had cached "this organisation is not limited" (ReadLimits) served reads of a
  // consent granted in another process uncounted until it heard the NOTIFY: its data query already saw the committed
  // consent (seen: 3 answers under "2 an hour"). Now a process that knows an organisation holds no limited consent
  // reads under its grants without a frequency only: a limit granted elsewhere opens nothing until it is heard of,
  // then every read under it is counted. The race is a window of milliseconds: the attack is repeated, a fresh
  // patient each round.
  it('reads hammering process B through a grant made in process A get at most `count` answers (found: uncounted reads between commit and NOTIFY)', async () => {
    const org = await reader('org-race');
    const unlimited = await patientWithPrescription('RaceFree');
    await grant(org, unlimited.hid, {});
    for (const s of [pont, second]) expect(await readAt(s, org, unlimited.rxId)).toBe(200); // both cache "not limited"
    for (let round = 0; round < 10; round++) {
      const limited = await patientWithPrescription(`RaceLimited${round}`);
      let stop = false;
      const statuses: number[] = [];
      const loop = async () => {
        while (!stop) statuses.push(await readAt(second, org, limited.rxId));
      };
      const loops = Array.from({ length: 8 }, loop);
      await grant(org, limited.hid, { frequency: { count: 2, unit: 'hour' } });
      await Promise.all([pont, second].map((s) => s.services.db.listenersCaughtUp()));
      // Every loop reads a few times more once B has heard of the limit.
      const heard = statuses.length;
      await eventually(() => expect(statuses.length).toBeGreaterThan(heard + 24));
      stop = true;
      await Promise.all(loops);
      const ok = statuses.filter((s) => s === 200).length;
      expect(ok, `round ${round}, statuses: ${JSON.stringify(statuses.reduce<Record<number, number>>((m, s) => ((m[s] = (m[s] ?? 0) + 1), m), {}))}`).toBeLessThanOrEqual(2);
      // B must be told again that the organisation is not limited... it is, now: the next round's consent is another
      // patient's, so B's cache is true from here on unless forgotten; make B forget by a change it hears (a fresh
      // unlimited grant does not notify). Revoke the limited consent: B re-reads "limited?" -> false only when none is left.
      expect((await connect(org, `/patient/${limited.hid}/consent/revoke`, { method: 'POST', json: {} })).status).toBe(200);
      await Promise.all([pont, second].map((s) => s.services.db.listenersCaughtUp()));
      expect(await readAt(second, org, unlimited.rxId)).toBe(200); // B caches "not limited" again
    }
  }, 120_000);

  it('a burst split over both processes right after the grant in one of them gets exactly `count` answers', async () => {
    const org = await reader('org-burst2');
    const unlimited = await patientWithPrescription('BurstFree');
    await grant(org, unlimited.hid, {});
    for (const s of [pont, second]) expect(await readAt(s, org, unlimited.rxId)).toBe(200);
    const limited = await patientWithPrescription('BurstLimited');
    await grant(org, limited.hid, { frequency: { count: 3, unit: 'hour' } });
    const statuses = await Promise.all(Array.from({ length: 16 }, (_, i) => readAt(i % 2 ? pont : second, org, limited.rxId)));
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
  });

  it('a revocation in A stops reads in B at once; a lowered frequency in A counts in B', async () => {
    const org = await reader('org-revoke2');
    const p = await patientWithPrescription('Revoked');
    await grant(org, p.hid, { frequency: { count: 5, unit: 'hour' } });
    expect(await readAt(second, org, p.rxId)).toBe(200);
    expect((await connect(org, `/patient/${p.hid}/consent/revoke`, { method: 'POST', json: {} })).status).toBe(200);
    expect(await readAt(second, org, p.rxId)).toBe(404);
    // A new consent for the same patient with a tighter limit, granted in A: B counts it at once.
    await grant(org, p.hid, { frequency: { count: 1, unit: 'hour' } });
    const statuses = [await readAt(second, org, p.rxId), await readAt(second, org, p.rxId), await readAt(pont, org, p.rxId)];
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
  });

  // The same cache says which organisations hold a grant naming kinds of record or a period: the others are read
  // under their plain grants only (the shorter rule). A period granted in A while B holds "no such grant" must open,
  // in B, nothing outside the period: not before B hears of it (then it opens nothing), not after.
  it('a grant with a period made in A opens in B only that period, before and after B hears of it', async () => {
    const org = await reader('org-period');
    const free = await patientWithPrescription('PeriodFree');
    await grant(org, free.hid, {});
    for (const s of [pont, second]) expect(await readAt(s, org, free.rxId)).toBe(200); // both cache "no scoped grant"
    const p = await patientWithPrescription('Period'); // authored 2025-02-02
    const old = await fhir(hospital, '/MedicationRequest', {
      method: 'POST',
      json: { resourceType: 'MedicationRequest', status: 'active', intent: 'order', medicationCodeableConcept: { text: 'Old' }, subject: { reference: `Patient/${p.pid}` }, authoredOn: '2019-03-03' },
    });
    expect(old.status).toBe(201);
    let stop = false;
    const outside: number[] = [];
    const loop = async () => {
      while (!stop) outside.push(await readAt(second, org, old.body.id as string));
    };
    const loops = Array.from({ length: 4 }, loop);
    await grant(org, p.hid, { date_range: { from: '2025-01-01', to: '2025-12-31' } });
    await Promise.all([pont, second].map((s) => s.services.db.listenersCaughtUp()));
    const heard = outside.length;
    await eventually(() => expect(outside.length).toBeGreaterThan(heard + 8));
    stop = true;
    await Promise.all(loops);
    expect(outside.filter((s) => s !== 404)).toEqual([]);
    for (const s of [pont, second]) {
      expect(await readAt(s, org, p.rxId)).toBe(200);
      expect(await readAt(s, org, old.body.id as string)).toBe(404);
      expect(await readAt(s, org, free.rxId)).toBe(200);
    }
  });

  it('a grant that fails (rolled back) in A leaves nothing cached wrongly: a later grant counts in both', async () => {
    const org = await reader('org-rollback');
    const p = await patientWithPrescription('Rollback');
    // Refused grants (validation) after the organisation is cached as not limited.
    const free = await patientWithPrescription('RollbackFree');
    await grant(org, free.hid, {});
    for (const s of [pont, second]) expect(await readAt(s, org, free.rxId)).toBe(200);
    const bad = await connect(org, `/patient/${p.hid}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(30), frequency: { count: 1, unit: 'fortnight' } } });
    expect(bad.status).toBe(422);
    expect(await readAt(pont, org, p.rxId)).toBe(404);
    await grant(org, p.hid, { frequency: { count: 2, unit: 'hour' } });
    await Promise.all([pont, second].map((s) => s.services.db.listenersCaughtUp()));
    const statuses = [await readAt(second, org, p.rxId), await readAt(pont, org, p.rxId), await readAt(second, org, p.rxId), await readAt(pont, org, p.rxId)];
    expect(statuses).toEqual([200, 200, 429, 429]);
  });
});

describe('the AuditEvent purposeOfEvent', () => {
  let org: TestClient;
  let p: { hid: string; pid: string; rxId: string };
  let ownPid: string;
  beforeAll(async () => {
    org = await reader('org-purpose');
    p = await patientWithPrescription('Purposeful');
    await grant(org, p.hid, { purpose_of_use: 'DSRCH' });
    const own = await fhir(org, '/Patient', { method: 'POST', json: { resourceType: 'Patient', name: [{ family: 'OwnPurpose' }] } });
    expect(own.status).toBe(201);
    ownPid = own.body.id;
  });
  const read = (path: string, requestId: string, purpose?: string) =>
    fhir(org, path, { headers: { 'x-request-id': requestId, ...(purpose !== undefined && { 'x-purpose-of-use': purpose }) } });

  it("a read stating no purpose is audited with the consent's purpose (no frequency: looked up as the row is written)", async () => {
    expect((await read(`/MedicationRequest/${p.rxId}`, 'atk-purpose-none')).status).toBe(200);
    const events = await auditRecords('atk-purpose-none');
    expect(events).toHaveLength(1);
    expect(codes(events[0]!)).toEqual(['DSRCH']);
  });

  it("a code the organisation's consent does not hold reads nothing, and no success is audited under it", async () => {
    for (const code of ['CAREMGT', 'HPAYMT', 'PUBHLTH', 'BTG', 'PATRQT']) {
      const res = await read(`/MedicationRequest/${p.rxId}`, `atk-purpose-${code}`, code);
      expect(res.status, code).toBe(404);
      const events = await auditRecords(`atk-purpose-${code}`);
      expect(events.filter((e) => e.outcome === '0' && codes(e).includes(code)), code).toEqual([]);
    }
    const search = await read(`/MedicationRequest?patient=${p.pid}`, 'atk-purpose-search-treat', 'CAREMGT');
    expect(search.body.total ?? search.body.entry?.length ?? 0).toBe(0);
  });

  it('free text, lower case, a list of codes or a code with spaces is not a code: audited with the consent\'s purpose, never the text as a code', async () => {
    const values = ['TREAT', 'ETREAT', 'dsrch', 'TREAT, DSRCH', 'DSRCH,TREAT', ' TREAT', 'TREAT ', 'TREAT\tx', 'x'.repeat(5000)];
    for (const [i, value] of values.entries()) {
      const res = await read(`/MedicationRequest/${p.rxId}`, `atk-purpose-text-${i}`, value);
      expect(res.status, JSON.stringify(value).slice(0, 40)).toBeLessThan(500);
      if (res.status !== 200) continue;
      for (const e of await auditRecords(`atk-purpose-text-${i}`)) expect(codes(e), JSON.stringify(value).slice(0, 40)).toEqual(['DSRCH']);
    }
  });

  it("a search of several patients is audited with the purpose of the consent changed last among theirs; one patient's, with that patient's", async () => {
    const q = await patientWithPrescription('PurposeSecond');
    await grant(org, q.hid, { purpose_of_use: 'PUBHLTH' }); // after p's DSRCH
    expect((await read(`/MedicationRequest?patient=${p.pid},${q.pid}`, 'atk-purpose-two')).status).toBe(200);
    const two = await auditRecords('atk-purpose-two');
    expect(two).toHaveLength(1);
    expect(two[0]!.entity?.filter((e) => e.what?.reference?.startsWith('Patient/')).length).toBe(2);
    expect(codes(two[0]!)).toEqual(['PUBHLTH']);
    expect((await read(`/MedicationRequest?patient=${p.pid}`, 'atk-purpose-first')).status).toBe(200);
    expect(codes((await auditRecords('atk-purpose-first'))[0]!)).toEqual(['DSRCH']);
  });

  it('a read of its own data about a patient it holds no consent for is audited with no purpose code', async () => {
    expect((await read(`/Patient/${ownPid}`, 'atk-purpose-own')).status).toBe(200);
    const events = await auditRecords('atk-purpose-own');
    expect(events.length).toBeGreaterThan(0);
    for (const e of events) expect(codes(e)).toEqual([]);
  });

  it("a frequency-limited organisation's reads get the same purpose (counted path)", async () => {
    const limited = await reader('org-purpose-limited');
    const q = await patientWithPrescription('PurposeLimited');
    await grant(limited, q.hid, { purpose_of_use: 'HPAYMT', frequency: { count: 10, unit: 'day' } });
    expect((await fhir(limited, `/MedicationRequest/${q.rxId}`, { headers: { 'x-request-id': 'atk-purpose-limited' } })).status).toBe(200);
    const events = await auditRecords('atk-purpose-limited');
    expect(events).toHaveLength(1);
    expect(codes(events[0]!)).toEqual(['HPAYMT']);
  });
});

describe('an organisation without rights, and hostile consent input: a 4xx in the documented shape, never a 500', () => {
  let victimConsent: string;
  let attacker: TestClient;
  let p: { hid: string; pid: string; rxId: string };
  beforeAll(async () => {
    const victim = await reader('org-victim');
    attacker = await reader('org-attacker');
    p = await patientWithPrescription('Victim');
    victimConsent = (await grant(victim, p.hid, { frequency: { count: 3, unit: 'day' }, purpose_of_use: 'CAREMGT' })).consent_id;
  });
  const errorShape = (res: { status: number; body: any }, what: string) => {
    expect(res.status, `${what}: ${JSON.stringify(res.body).slice(0, 200)}`).toBeGreaterThanOrEqual(400);
    expect(res.status, what).toBeLessThan(500);
    expect(res.body, what).toMatchObject({ status: 'error', error_code: expect.any(String), message: expect.any(String) });
  };

  it("another organisation's consent artefact is the same 404 as an unknown id; hostile ids are 4xx", async () => {
    const other = await connect(attacker, `/consents/${victimConsent}/artefact`);
    const unknown = await connect(attacker, `/consents/${victimConsent.replace(/.$/, (c) => (c === '0' ? '1' : '0'))}/artefact`);
    expect(other.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(other.body.error_code).toBe(unknown.body.error_code);
    expect(JSON.stringify(other.body)).not.toContain('org-victim');
    for (const id of ['x'.repeat(10_000), '%00', '..%2F..%2Fadmin', "1'%20OR%20'1'='1", '%C0%AF', '%FF%FE', encodeURIComponent('☃'.repeat(300))]) {
      const res = await connect(attacker, `/consents/${id}/artefact`);
      expect(res.status, id.slice(0, 30)).toBeGreaterThanOrEqual(400);
      expect(res.status, id.slice(0, 30)).toBeLessThan(500);
    }
  });

  it("the revoked list never shows another organisation's revocation; hostile `since` values are 4xx", async () => {
    const since = new Date(Date.now() - 3_600_000).toISOString();
    expect((await connect(hospital, `/patient/${p.hid}/consent/revoke`, { method: 'POST', json: {} })).status).toBeLessThan(500);
    const listed = await connect(attacker, `/consents/revoked?since=${encodeURIComponent(since)}`);
    expect(listed.status).toBe(200);
    expect(listed.body.items.map((i: { consent_id: string }) => i.consent_id)).not.toContain(victimConsent);
    for (const s of ['yesterday', '9999999-01-01', '-infinity', 'infinity', '2024-13-45T99:99:99Z', 'x'.repeat(10_000), '%00', "2024-01-01'--"]) {
      const res = await connect(attacker, `/consents/revoked?since=${encodeURIComponent(s)}`);
      expect(res.status, s.slice(0, 30)).toBeLessThan(500);
      if (res.status >= 400) errorShape(res, s.slice(0, 30));
    }
  });

  const hostileGrants: Array<[string, unknown]> = [
    ['frequency count as a string', { frequency: { count: '2', unit: 'day' } }],
    ['frequency count huge', { frequency: { count: 1e20, unit: 'day' } }],
    ['frequency count 2^31', { frequency: { count: 2 ** 31, unit: 'day' } }],
    ['frequency count negative', { frequency: { count: -1, unit: 'day' } }],
    ['frequency unit upper case', { frequency: { count: 1, unit: 'DAY' } }],
    ['frequency unit SQL', { frequency: { count: 1, unit: "day'); DROP TABLE consent_access;--" } }],
    ['frequency unit an interval', { frequency: { count: 1, unit: '1 second' } }],
    ['frequency unit microseconds', { frequency: { count: 1, unit: 'microseconds' } }],
    ['frequency null count', { frequency: { count: null, unit: 'day' } }],
    ['frequency a list', { frequency: [1, 'day'] }],
    ['frequency a number', { frequency: 3 }],
    ['frequency with an extra field', { frequency: { count: 1, unit: 'day', per: 'patient' } }],
    ['purpose an object', { purpose_of_use: { code: 'CAREMGT' } }],
    ['purpose a list', { purpose_of_use: ['CAREMGT', 'TREAT'] }],
    ['purpose huge', { purpose_of_use: 'A'.repeat(1_000_000) }],
    ['purpose with NUL', { purpose_of_use: 'CAREMGT\u0000' }],
    ['purpose lone surrogate', { purpose_of_use: 'CAREMGT\ud800' }],
    ['hi_types huge strings', { hi_types: ['P'.repeat(200_000)] }],
    ['hi_types nested', { hi_types: [['Prescription']] }],
    ['hi_types with NUL', { hi_types: ['Prescription\u0000'] }],
    ['date_range a string', { date_range: '2024-01-01/2024-12-31' }],
    ['date_range year 0', { date_range: { from: '0000-01-01', to: '2024-12-31' } }],
    ['date_range year 99999', { date_range: { from: '2024-01-01', to: '99999-12-31' } }],
    ['date_range numbers', { date_range: { from: 20240101, to: 20241231 } }],
    ['expires_at a number', { expires_at: 1e15 }],
    ['expires_at year 275760', { expires_at: '+275760-09-13T00:00:00.000Z' }],
    ['consent_type an object', { consent_type: { $ne: null } }],
    ['consent_type huge', { consent_type: 'x'.repeat(100_000) }],
    ['__proto__ pollution', JSON.parse('{"__proto__": {"frequency": {"count": 1, "unit": "day"}}, "constructor": {"prototype": {"x": 1}}}')],
  ];
  for (const [name, fields] of hostileGrants)
    it(`grant: ${name}`, async () => {
      const res = await connect(attacker, `/patient/${p.hid}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(30), ...(fields as object) } });
      if (name === '__proto__ pollution') {
        expect(res.status).toBeLessThan(500);
        return;
      }
      errorShape(res, name);
    });

  it('a grant or request body that is not JSON, invalid UTF-8, or a JSON array/string is a 4xx in the documented shape', async () => {
    const bodies: Array<[string, string | Uint8Array]> = [
      ['invalid UTF-8', new Uint8Array([0x7b, 0x22, 0x63, 0x6f, 0x6e, 0x73, 0x65, 0x6e, 0x74, 0x5f, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc0, 0xaf, 0x22, 0x7d])],
      ['truncated JSON', '{"consent_type": "prescriptions", "frequency": {"count": 1'],
      ['a JSON array', '[{"consent_type":"prescriptions"}]'],
      ['a JSON string', '"prescriptions"'],
      ['JSON null', 'null'],
      ['deep nesting', '{"frequency":' + '['.repeat(100_000) + ']'.repeat(100_000) + '}'],
    ];
    for (const [what, body] of bodies) {
      for (const path of [`/api/v1/connect/patient/${p.hid}/consent/grant`, '/api/v1/sdk/consents/request']) {
        const res = await pont.fetch(path, { method: 'POST', headers: { ...attacker.headers, 'content-type': 'application/json' }, body });
        const text = await res.text();
        let json: any;
        try {
          json = JSON.parse(text);
        } catch {
          json = text;
        }
        errorShape({ status: res.status, body: json }, `${what} on ${path}`);
      }
    }
  });

  it('the hostile values of the new fields are a 4xx in the documented shape on all three routes that take them; an approval refused leaves the request pending', async () => {
    const MB = 'x'.repeat(1_048_576);
    const deep = (levels: number): unknown => (levels ? { from: deep(levels - 1) } : '2024-01-01');
    const hostile: Array<[string, Record<string, unknown>]> = [
      ['dates reversed', { date_range: { from: '2024-12-31', to: '2024-01-01' } }],
      ['an unknown purpose', { purpose_of_use: 'MARKETING' }],
      ['a purpose in lower case', { purpose_of_use: 'caremgt' }],
      ['10,000 hi_types', { hi_types: Array.from({ length: 10_000 }, () => 'Prescription') }],
      ['10,000 different unknown hi_types', { hi_types: Array.from({ length: 10_000 }, (_, i) => `Kind${i}`) }],
      ['a megabyte purpose', { purpose_of_use: MB }],
      ['a megabyte kind', { hi_types: [MB] }],
      ['a megabyte date', { date_range: { from: MB, to: '2024-12-31' } }],
      ['a megabyte expiry', { expires_at: MB }],
      ['a megabyte erasure date', { erase_at: MB }],
      ['a megabyte frequency unit', { frequency: { count: 1, unit: MB } }],
      ['hi_types a string', { hi_types: 'Prescription' }],
      ['hi_types an object', { hi_types: { 0: 'Prescription' } }],
      ['date_range a list', { date_range: ['2024-01-01', '2024-12-31'] }],
      ['date_range a number', { date_range: 2024 }],
      ['expires_at a boolean', { expires_at: true }],
      ['erase_at an object', { erase_at: { at: '2030-01-01T00:00:00Z' } }],
      ['frequency a string', { frequency: '3/day' }],
      ['purpose_of_use null', { purpose_of_use: null }],
      ['hi_types nested', { hi_types: [[['Prescription']]] }],
      ['date_range nested', { date_range: { from: { from: '2024-01-01' }, to: '2024-12-31' } }],
      ['frequency nested', { frequency: { count: { count: 1 }, unit: 'day' } }],
      ['date_range nested 1,000 deep', { date_range: { from: deep(1_000), to: '2024-12-31' } }],
    ];
    const requester = await reader('org-hostile-requester');
    const q = await patientWithPrescription('Hostile');
    const request = (fields: Record<string, unknown>) =>
      call(requester, '/api/v1/sdk/consents/request', { method: 'POST', json: { health_id: q.hid, purpose: 'care', requested_scopes: ['prescriptions:read'], hi_types: ['Prescription'], date_range: { from: '2024-01-01', to: '2024-12-31' }, expires_at: inDays(60), ...fields } });
    const asked = await request({});
    expect(asked.status, JSON.stringify(asked.body)).toBe(201);
    const code = await connect(hospital, `/patient/${q.hid}/mobile/pairing-code`, { method: 'POST' });
    const token = (await pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: q.hid, code: code.body.code } })).body.access_token as string;
    const approve = (fields: Record<string, unknown>) =>
      pont.json(`/api/v1/mobile/consent-requests/${asked.body.consent_request_id}/approve`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, json: fields });
    const routes: Array<[string, (fields: Record<string, unknown>) => Promise<{ status: number; body: any }>]> = [
      ['request', request],
      ['grant', (fields) => connect(requester, `/patient/${q.hid}/consent/grant`, { method: 'POST', json: { consent_type: 'prescriptions', expires_at: inDays(30), ...fields } })],
      ['approve', approve],
    ];
    for (const [route, send] of routes) for (const [name, fields] of hostile) errorShape(await send(fields), `${route}: ${name}`);
    // Bodies no field can be read from (the other two routes: the test below). A JSON null, like an empty body, narrows nothing
    // (src/http/routes.ts reads either as {}): on approve that is the patient approving as asked, so it is not among them.
    for (const [what, body] of [['deep nesting', '{"hi_types":' + '['.repeat(100_000) + ']'.repeat(100_000) + '}'], ['a JSON array', '[{"hi_types":["Prescription"]}]'], ['a JSON string', '"Prescription"'], ['truncated JSON', '{"hi_types": ["Pres']]) {
      const res = await pont.fetch(`/api/v1/mobile/consent-requests/${asked.body.consent_request_id}/approve`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
      const text = await res.text();
      errorShape({ status: res.status, body: JSON.parse(text) }, `approve: ${what}`);
    }
    // Nothing was stored: the request is still pending and no consent was granted; then the patient approves it as asked.
    expect((await connect(requester, `/patient/${q.hid}/consent`)).body.status).toBe('pending');
    expect((await fhir(requester, `/MedicationRequest/${q.rxId}`)).status).toBe(404);
    expect((await approve({ hi_types: ['Prescription'] })).status).toBe(200);
    expect((await fhir(requester, `/MedicationRequest/${q.rxId}`)).status).toBe(404); // authored in 2025, outside the approved 2024
  });

  it("the attacker's own reads never spend the victim's frequency", async () => {
    for (let i = 0; i < 5; i++) expect((await fhir(attacker, `/MedicationRequest/${p.rxId}`)).status).toBe(404);
    const { rows } = await pont.services.db.query<{ fetches: number }>('SELECT coalesce(sum(fetches), 0)::int AS fetches FROM consent_fetches WHERE consent_id = $1', [victimConsent]);
    expect(rows[0]!.fetches).toBe(0);
  });
});
