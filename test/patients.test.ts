/** The three patient operations over HTTP, with real clients and tokens, on a real database. */
import type { AuditEvent, Bundle, Patient } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend, createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

const CONNECT = '/api/v1/connect';
const HEALTH_ID_SYSTEM = 'https://pont.health/fhir/sid/health-id';

/** An independent ISO 7064 MOD 97-10 check (not the service's code): letters as numbers, remainder 1. */
const mod97Valid = (id: string) =>
  /^[A-Z]{2}\d{12}$/.test(id) && BigInt([...id].map((c) => parseInt(c, 36)).join('')) % 97n === 1n;

let pont: TestServer;
let resolver: TestClient; // health_id:verify, org-clinic, facility fac-1
let reader: TestClient; // patient:profile:read
let auditor: TestClient; // audit:read (operator)
let outsider: TestClient; // a scope that opens none of these routes

beforeAll(async () => {
  // Hundreds of verify calls below: the per-client rate limit must not get in the way.
  pont = await startTestServer({ PONT_RATE_LIMITS: 'default=100000/60' });
  resolver = await createTestClient(pont, ['health_id:verify'], { organizationId: 'org-clinic', facilityId: 'fac-1', name: 'clinic EHR' });
  reader = await createTestClient(pont, ['patient:profile:read'], { organizationId: 'org-clinic' }); // the clinic's own records system: it wrote the patient
  auditor = await createTestClient(pont, ['audit:read'], { organizationId: 'org-operator', allPatients: true });
  outsider = await createTestClient(pont, ['webhooks:manage'], { organizationId: 'org-other' });
});
afterAll(async () => {
  await pont?.close();
});

const as = (client: TestClient, init: RequestInit & { json?: unknown } = {}) => ({ ...init, headers: { ...client.headers, ...init.headers } });
const resolve = (body: unknown, client = resolver, headers: Record<string, string> = {}) =>
  pont.json(`${CONNECT}/patients/resolve`, as(client, { method: 'POST', json: body, headers }));
const verify = (healthId: string, client = resolver) =>
  pont.json(`${CONNECT}/patients/verify/${encodeURIComponent(healthId)}`, as(client));
const profile = (query: string, client = reader) => pont.json(`${CONNECT}/patient/search${query}`, as(client));

/** Distinct people per test, so tests do not find each other's patients. */
let counter = 0;
const person = (extra: Record<string, unknown> = {}) => ({
  first_name: `Amina${++counter}`,
  last_name: 'Ngo Bassa',
  date_of_birth: '1990-04-01',
  sex: 'female',
  ...extra,
});

async function patientsHolding(healthId: string): Promise<Patient[]> {
  return pont.services.fhir.system('test').searchResources<Patient>('Patient', { identifier: `${HEALTH_ID_SYSTEM}|${healthId}` }, { audit: false });
}

async function eventsOf(patientId: string) {
  const { rows } = await pont.services.db.query<{ type: string; data: any; meta: any }>(
    'SELECT type, data, meta FROM events WHERE patient_id = $1 ORDER BY seq',
    [patientId],
  );
  return rows;
}

async function auditEvents(query: string): Promise<AuditEvent[]> {
  const { status, body } = await pont.json<Bundle<AuditEvent>>(`/api/fhir/R4/AuditEvent?${query}`, as(auditor));
  expect(status).toBe(200);
  return (body.entry ?? []).map((e) => e.resource!);
}

describe(`resolve with demographics (${backend})`, () => {
  it('creates a patient with a new Health ID (201), then finds the same one', async () => {
    const amina = person({ phone_number: '+237677123456', external_reference: 'EHR-1', purpose: 'registration' });
    const created = await resolve(amina);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      status: 'created',
      patient: { first_name: amina.first_name, last_name: 'Ngo Bassa', date_of_birth: '1990-04-01', sex: 'female', country_code: 'CM' },
    });
    const healthId: string = created.body.health_id;
    expect(healthId).toMatch(/^CM\d{12}$/);
    expect(mod97Valid(healthId)).toBe(true);
    expect(created.body.patient.health_id).toBe(healthId);
    expect(created.body.patient).not.toHaveProperty('phone_number'); // summaries carry no contact details

    const again = await resolve(person({ ...amina, phone_number: '+237699000000' }));
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ status: 'found', health_id: healthId });

    const [patient, ...others] = await patientsHolding(healthId);
    expect(others).toHaveLength(0);
    expect(patient!.telecom).toEqual([{ system: 'phone', value: '+237677123456' }]); // stored only on creation
    expect(patient!.identifier).toContainEqual({ system: HEALTH_ID_SYSTEM, value: healthId });
  });

  it('matches on normalised names: case, accents, hyphens and spacing do not make a new patient', async () => {
    const base = { first_name: `Jean-Pierre${++counter}`, last_name: "N'Dongo", date_of_birth: '1985-12-31', sex: 'male' };
    const created = await resolve(base);
    expect(created.status).toBe(201);
    for (const variant of [
      { first_name: ` jean pierre${counter} `, last_name: 'n dongo' },
      { first_name: `JÉAN—PIERRE${counter}`, last_name: "N'DONGO" },
    ]) {
      const found = await resolve({ ...base, ...variant });
      expect(found.status, JSON.stringify(variant)).toBe(200);
      expect(found.body.health_id).toBe(created.body.health_id);
    }
  });

  it('a different date of birth, sex or last name is another person', async () => {
    const base = person();
    const first = await resolve(base);
    expect(first.status).toBe(201);
    for (const change of [{ date_of_birth: '1990-04-02' }, { sex: 'male' }, { last_name: 'Ngo' }, { last_name: null }]) {
      const other = await resolve({ ...base, ...change });
      expect(other.status, JSON.stringify(change)).toBe(201);
      expect(other.body.health_id).not.toBe(first.body.health_id);
    }
  });

  it('issues the Health ID with the requested country prefix', async () => {
    const { status, body } = await resolve(person({ country_code: 'ng' }));
    expect(status).toBe(201);
    expect(body.health_id).toMatch(/^NG\d{12}$/);
    expect(mod97Valid(body.health_id)).toBe(true);
    expect(body.patient.country_code).toBe('NG');
  });

  it('twenty concurrent identical requests yield one patient and one Health ID', async () => {
    const same = person();
    const results = await Promise.all(Array.from({ length: 20 }, () => resolve(same)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(19);
    const ids = new Set(results.map((r) => r.body.health_id));
    expect(ids.size).toBe(1);
    const [healthId] = [...ids] as string[];
    expect(await patientsHolding(healthId!)).toHaveLength(1);
    const named = await pont.services.fhir.system('test').searchResources<Patient>('Patient', { given: same.first_name }, { audit: false });
    expect(named).toHaveLength(1);
    const events = await eventsOf(named[0]!.id!);
    expect(events.map((e) => e.type)).toEqual(['patient.created', 'health_id.created']);
  });

  it('records patient.created and health_id.created in the shape of section 6.2', async () => {
    const { body } = await resolve(person(), resolver, { 'x-request-id': 'req-events-1' });
    const [patient] = await patientsHolding(body.health_id);
    const events = await eventsOf(patient!.id!);
    expect(events).toHaveLength(2);
    const meta = { organization_id: 'org-clinic', facility_id: 'fac-1', environment: pont.config.environment, request_id: 'req-events-1' };
    expect(events[0]).toMatchObject({ type: 'patient.created', data: { patient_id: patient!.id, health_id: body.health_id }, meta });
    expect(events[1]).toMatchObject({
      type: 'health_id.created',
      data: { health_id: body.health_id, patient_id: patient!.id, country_code: 'CM' },
      meta,
    });
  });

  it('writes nothing when any part of a creation fails', async () => {
    const caller = await createTestClient(pont, ['health_id:verify'], { organizationId: 'org-doomed' });
    // A real database failure at the last write of the transaction (the health_id.created event). A trigger on the
    // partitioned events table locks the table, then every partition. All of them are locked first, in one statement
    // that takes the table before its partitions, as every reader of the table does: taken one by one, a partition
    // the server's outbox was reading could wait for one the test held, and the test for it (a deadlock).
    await pont.services.db.exec(`BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE;
      CREATE FUNCTION test_fail_health_id_event() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.type = 'health_id.created' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER test_fail_health_id_event BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION test_fail_health_id_event(); COMMIT;`);
    const doomed = person();
    try {
      const { status, body } = await resolve(doomed, caller);
      expect(status).toBe(500);
      expect(body).toMatchObject({ status: 'error', error_code: 'INTERNAL_ERROR' });
    } finally {
      await pont.services.db.exec(`BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE;
        DROP TRIGGER test_fail_health_id_event ON events; DROP FUNCTION test_fail_health_id_event(); COMMIT;`);
    }
    expect(await pont.services.fhir.system('test').searchResources('Patient', { given: doomed.first_name }, { audit: false })).toHaveLength(0);
    expect((await pont.services.db.query('SELECT 1 FROM health_ids WHERE patient_id IS NULL')).rows).toHaveLength(0);
    expect((await pont.services.db.query(`SELECT 1 FROM events WHERE meta->>'organization_id' = 'org-doomed'`)).rows).toHaveLength(0);
    expect(await auditEvents(`altid=${caller.client_id}`)).toHaveLength(0);
    // The same person registers normally afterwards, with all of it.
    const retried = await resolve(doomed, caller);
    expect(retried.status).toBe(201);
    expect(await patientsHolding(retried.body.health_id)).toHaveLength(1);
    expect((await pont.services.db.query(`SELECT 1 FROM events WHERE meta->>'organization_id' = 'org-doomed'`)).rows).toHaveLength(2);
    expect(await auditEvents(`altid=${caller.client_id}`)).toHaveLength(1);
  });

  it('a birth date known only to the year or month is registered as such and matched at that precision', async () => {
    const about = person({ date_of_birth: '1960' });
    const created = await resolve(about);
    expect(created.status).toBe(201);
    expect(created.body.patient.date_of_birth).toBe('1960');
    expect((await patientsHolding(created.body.health_id))[0]!.birthDate).toBe('1960');
    const again = await resolve(about);
    expect(again.body).toMatchObject({ status: 'found', health_id: created.body.health_id });
    // A day is another date of birth: not this patient, whose day nobody knows.
    expect((await resolve({ ...about, date_of_birth: '1960-07-01' })).body.health_id).not.toBe(created.body.health_id);
    const month = person({ date_of_birth: '1975-03' });
    const byMonth = await resolve(month);
    expect(byMonth.status).toBe(201);
    expect((await resolve(month)).body).toMatchObject({ status: 'found', health_id: byMonth.body.health_id });
  });

  it('a birth date on 29 February of a leap year (2000, 2024) is registered', async () => {
    for (const date_of_birth of ['2000-02-29', '2024-02-29']) {
      const created = await resolve(person({ date_of_birth }));
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      expect((await patientsHolding(created.body.health_id))[0]!.birthDate).toBe(date_of_birth);
    }
  });

  it('refuses bad input with 4xx in the Error shape', async () => {
    const cases: Array<[unknown, number]> = [
      [{}, 422],
      [{ last_name: 'Ngo' }, 422],
      [{ first_name: '' }, 422],
      [{ first_name: '---' }, 422],
      [{ first_name: 'A'.repeat(101) }, 422],
      [{ first_name: 42 }, 422],
      [person({ date_of_birth: '1990-02-30' }), 422],
      [person({ date_of_birth: '2023-02-29' }), 422],
      [person({ date_of_birth: '1900-02-29' }), 422],
      [person({ date_of_birth: '01/04/1990' }), 422],
      [person({ date_of_birth: '2999-01-01' }), 422],
      [person({ date_of_birth: '2999' }), 422],
      [person({ date_of_birth: '1879' }), 422],
      [person({ date_of_birth: '1990-13' }), 422],
      [person({ date_of_birth: '199' }), 422],
      [person({ date_of_birth: '1990-1-5' }), 422],
      [person({ sex: 'unknown' }), 422],
      [person({ country_code: 'XX' }), 422],
      [person({ country_code: 'CMR' }), 422],
      [person({ phone_number: 'call me' }), 422],
      [[], 422],
      ['text', 422],
    ];
    for (const [body, expected] of cases) {
      const res = await resolve(body);
      expect(res.status, JSON.stringify(body)).toBe(expected);
      expect(res.body).toMatchObject({ status: 'error', error_code: expect.any(String), message: expect.any(String) });
    }
    const broken = await pont.json(`${CONNECT}/patients/resolve`, as(resolver, { method: 'POST', body: '{"first_name":', headers: { 'content-type': 'application/json' } }));
    expect(broken.status).toBe(400);
    expect(broken.body.status).toBe('error');
  });
});

describe(`resolve with a Health ID (${backend})`, () => {
  it('found when registered, not_found when valid but unregistered, never creating', async () => {
    const { body: created } = await resolve(person());
    const found = await resolve({ health_id: created.health_id });
    expect(found.status).toBe(200);
    expect(found.body).toEqual({ status: 'found', health_id: created.health_id, patient: created.patient });

    const unregistered = 'CM0000000000' + String(98 - Number(BigInt('1222000000000000') % 97n)).padStart(2, '0');
    expect(mod97Valid(unregistered)).toBe(true);
    const notFound = await resolve({ health_id: unregistered, ...person() });
    expect(notFound.status).toBe(200);
    expect(notFound.body).toEqual({ status: 'not_found', health_id: unregistered });
    expect(await patientsHolding(unregistered)).toHaveLength(0);
  });

  it('422 with a clear error_code for a bad checksum or format', async () => {
    const { body: created } = await resolve(person());
    const id: string = created.health_id;
    const typo = id.slice(0, 5) + ((Number(id[5]) + 1) % 10) + id.slice(6);
    expect((await resolve({ health_id: typo })).body).toMatchObject({ status: 'error', error_code: 'HEALTH_ID_CHECKSUM_INVALID' });
    for (const bad of [id.toLowerCase(), id.slice(1), `${id}0`, '', 'CM-1234']) {
      const res = await resolve({ health_id: bad });
      expect(res.status, bad).toBe(422);
      expect(res.body.error_code, bad).toBe('HEALTH_ID_MALFORMED');
    }
  });
});

describe(`verify (${backend})`, () => {
  it('returns the summary of a registered Health ID and records health_id.verified', async () => {
    const { body: created } = await resolve(person());
    const res = await verify(created.health_id);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ valid: true, health_id: created.health_id, patient: created.patient });
    const [patient] = await patientsHolding(created.health_id);
    const verified = (await eventsOf(patient!.id!)).filter((e) => e.type === 'health_id.verified');
    expect(verified).toHaveLength(1);
    expect(verified[0]).toMatchObject({ data: { health_id: created.health_id, patient_id: patient!.id, facility_id: 'fac-1' }, meta: { organization_id: 'org-clinic' } });
  });

  it('refuses every single-character change of an issued Health ID with 422', async () => {
    const { body: created } = await resolve(person());
    const id: string = created.health_id;
    const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';
    const changes: string[] = [];
    for (let i = 0; i < id.length; i++) {
      for (const c of alphabet) if (c !== id[i]) changes.push(id.slice(0, i) + c + id.slice(i + 1));
    }
    const results = await Promise.all(changes.map(async (changed) => [changed, (await verify(changed)).status] as const));
    expect(results.filter(([, status]) => status !== 422)).toEqual([]);
    expect(changes.length).toBe(14 * 35);
  });

  it('404 for a valid unregistered Health ID, 422 for a malformed one', async () => {
    const unregistered = 'NG1234567890' + String(98 - Number(BigInt('2316123456789000') % 97n)).padStart(2, '0');
    expect(mod97Valid(unregistered)).toBe(true);
    const missing = await verify(unregistered);
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ status: 'error', error_code: 'HEALTH_ID_NOT_REGISTERED' });
    const malformed = await verify('not-a-health-id');
    expect(malformed.status).toBe(422);
    expect(malformed.body.error_code).toBe('HEALTH_ID_MALFORMED');
  });
});

describe(`patient profile search (${backend})`, () => {
  it("returns the patient's profile in the Connect shape", async () => {
    const { body: created } = await resolve(person({ phone_number: '+237 6 77 12 34 56' }));
    const res = await profile(`?health_id=${created.health_id}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ...created.patient, phone_number: '+237 6 77 12 34 56' });
  });

  it('a patient another system wrote, its country by name and its phone with no system (as OpenMRS does): the country as its ISO code, the phone read', async () => {
    const writer = await createTestClient(pont, ['fhir:write', 'fhir:read'], { organizationId: 'org-clinic' });
    for (const [country, code] of [['Kenya', 'KE'], ['Cameroun', 'CM'], ['Sénégal', 'SN'], ['ke', 'KE'], ['Ruritania', 'Ruritania']]) {
      const id = `omrs-${code.toLowerCase()}-${counter++}`;
      const written = await pont.json(`/api/fhir/R4/Patient/${id}`, {
        ...as(writer),
        method: 'PUT',
        json: { resourceType: 'Patient', id, name: [{ family: 'Otieno', given: ['Akinyi', 'Grace'] }], gender: 'female', birthDate: '1988', telecom: [{ value: '+254 712 345678' }], address: [{ city: 'Kisumu', country }] },
      });
      expect(written.status, JSON.stringify(written.body)).toBe(201);
      const healthId = written.body.identifier.find((i: { system: string }) => i.system === HEALTH_ID_SYSTEM).value;
      const res = await profile(`?health_id=${healthId}`);
      expect(res.body, country).toMatchObject({ country_code: code, phone_number: '+254 712 345678', date_of_birth: '1988' });
      expect((await verify(healthId)).body.patient.country_code).toBe(code);
    }
  });

  it('404 when unknown, 422 when the query is missing or malformed', async () => {
    const unregistered = 'CM0000000000' + String(98 - Number(BigInt('1222000000000000') % 97n)).padStart(2, '0');
    expect((await profile(`?health_id=${unregistered}`)).status).toBe(404);
    for (const query of ['', '?health_id=', '?health_id=CM123', '?other=1']) {
      const res = await profile(query);
      expect(res.status, query).toBe(422);
      expect(res.body.status).toBe('error');
    }
  });
});

describe(`access (${backend})`, () => {
  it('401 without a token, 403 without the scope', async () => {
    expect((await pont.json(`${CONNECT}/patients/resolve`, { method: 'POST', json: person() })).status).toBe(401);
    expect((await resolve(person(), outsider)).status).toBe(403);
    expect((await resolve(person(), reader)).status).toBe(403);
    expect((await verify('CM482930174629', outsider)).status).toBe(403);
    expect((await profile('?health_id=CM482930174629', resolver)).status).toBe(403);
    expect((await profile('?health_id=CM482930174629', outsider)).body).toMatchObject({ status: 'error', error_code: 'FORBIDDEN' });
  });
});

describe(`audit trail (${backend})`, () => {
  it('every operation leaves an AuditEvent naming the caller, its organisation, the patient and the request', async () => {
    const caller = await createTestClient(pont, ['health_id:verify', 'patient:profile:read'], { organizationId: 'org-audited' });
    const call = (init: RequestInit & { json?: unknown }, requestId: string) => as(caller, { ...init, headers: { 'x-request-id': requestId } });
    const created = await pont.json(`${CONNECT}/patients/resolve`, call({ method: 'POST', json: person({ purpose: 'admission', external_reference: 'MRN-77' }) }, 'req-a1'));
    const healthId = created.body.health_id;
    await pont.json(`${CONNECT}/patients/resolve`, call({ method: 'POST', json: { health_id: healthId, purpose: 'follow-up' } }, 'req-a2'));
    await pont.json(`${CONNECT}/patients/verify/${healthId}`, call({}, 'req-a3'));
    await pont.json(`${CONNECT}/patient/search?health_id=${healthId}&purpose=lab`, call({}, 'req-a4'));
    const unregistered = 'CM0000000000' + String(98 - Number(BigInt('1222000000000000') % 97n)).padStart(2, '0');
    await pont.json(`${CONNECT}/patients/verify/${unregistered}`, call({}, 'req-a5'));
    await pont.json(`${CONNECT}/patients/verify/CM1`, call({}, 'req-a6')); // malformed: refused, and audited
    await pont.json(`${CONNECT}/patient/search`, call({}, 'req-a7')); // no Health ID at all: nothing about a patient

    const events = await auditEvents(`altid=${caller.client_id}&_count=100`);
    const byRequest = new Map(events.map((e) => [requestIdOf(e), e]));
    expect([...byRequest.keys()].sort()).toEqual(['req-a1', 'req-a2', 'req-a3', 'req-a4', 'req-a5', 'req-a6']);
    const [patient] = await patientsHolding(healthId);

    for (const event of events) {
      const [client, organization] = event.agent;
      expect(client).toMatchObject({ altId: caller.client_id, requestor: true, who: { identifier: { value: caller.client_id } } });
      expect(organization).toMatchObject({ altId: 'org-audited', who: { type: 'Organization', identifier: { value: 'org-audited' } } });
    }
    expect(byRequest.get('req-a1')).toMatchObject({
      action: 'C',
      outcome: '0',
      outcomeDesc: 'created',
      purposeOfEvent: [{ text: 'admission' }],
      subtype: expect.arrayContaining([expect.objectContaining({ code: 'resolvePatient' })]),
    });
    const patientEntity = byRequest.get('req-a1')!.entity!.find((e) => e.role?.code === '1');
    expect(patientEntity).toMatchObject({
      what: { reference: `Patient/${patient!.id}`, identifier: { system: HEALTH_ID_SYSTEM, value: healthId } },
      detail: [{ type: 'external_reference', valueString: 'MRN-77' }],
    });
    expect(byRequest.get('req-a2')).toMatchObject({ action: 'R', outcome: '0', outcomeDesc: 'found', purposeOfEvent: [{ text: 'follow-up' }] });
    expect(byRequest.get('req-a3')).toMatchObject({ action: 'E', outcome: '0', outcomeDesc: 'verified' });
    expect(byRequest.get('req-a4')).toMatchObject({ action: 'R', outcome: '0', purposeOfEvent: [{ text: 'lab' }] });
    expect(byRequest.get('req-a5')).toMatchObject({ action: 'E', outcome: '4', outcomeDesc: 'not_found' });
    expect(byRequest.get('req-a5')!.entity![0]!.what).toEqual({ identifier: { system: HEALTH_ID_SYSTEM, value: unregistered } });
    expect(byRequest.get('req-a6')).toMatchObject({ action: 'E', outcome: '4', outcomeDesc: 'HEALTH_ID_MALFORMED' });

    // Operators find a patient's audit trail by the patient too.
    const aboutPatient = await auditEvents(`entity=Patient/${patient!.id}&_count=100`);
    expect(aboutPatient.map(requestIdOf).sort()).toEqual(['req-a1', 'req-a2', 'req-a3', 'req-a4']);
  });

  it('the audit trail is for audit:read only', async () => {
    const { status } = await pont.json('/api/fhir/R4/AuditEvent', as(resolver));
    expect(status).toBe(403);
  });
});

function requestIdOf(event: AuditEvent): string | undefined {
  return event.entity?.find((e) => e.type?.code === 'XrequestId')?.what?.identifier?.value;
}
