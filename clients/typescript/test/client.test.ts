import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The package as it ships (dist/, built from src/ by `npm run build`).
import * as client from '../dist/index.js';
import { Pont, webhooks } from '../dist/index.js';

const conformance = fileURLToPath(new URL('../../conformance/', import.meta.url));
const vectors = JSON.parse(readFileSync(`${conformance}vectors.json`, 'utf8'));

describe('conformance vectors', () => {
  it.each(vectors.signatures.map((v: any) => [v.name, v]))('signature: %s', (_name, v: any) => {
    const verify = () => webhooks.verifySignature(v.raw_body, v.header, vectors.secret, vectors.tolerance, vectors.now);
    if (v.valid) {
      expect(verify()).toBe(true);
      expect(webhooks.parseEvent(Buffer.from(v.raw_body, 'utf8'), v.header, vectors.secret, vectors.tolerance, vectors.now).type).toBe('lab_result.released');
    } else expect(verify).toThrow(client.WebhookSignatureError);
  });

  it.each(vectors.errors.map((v: any) => [v.name, v]))('error answer: %s', async (_name, v: any) => {
    const token = { access_token: 'tok', token_type: 'Bearer', expires_in: 3600 };
    const fetchFake = (async (url: string) =>
      String(url).endsWith('/auth/token')
        ? new Response(JSON.stringify(token), { status: 200 })
        : new Response(typeof v.body === 'string' ? v.body : JSON.stringify(v.body), { status: v.status, headers: v.headers })) as typeof fetch;
    const pont = await Pont.create({ clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: 'http://pont.invalid', fetch: fetchFake, maxRetries: 0 });
    const error = await pont.healthIds.verify('CM482930174629').catch((e: unknown) => e);
    expect(error).toBeInstanceOf((client as any)[v.exception]);
    expect(error).toBeInstanceOf(client.ServiceError);
    expect(error.status).toBe(v.status);
    expect(error.errorCode).toBe(v.error_code);
    expect(error.requestId).toBe(v.headers['x-request-id'] ?? null);
    if (v.retry_after !== undefined) expect(error.retryAfter).toBe(v.retry_after);
    expect(String(error.message)).not.toContain('pcs_x');
  });
});

describe('retries, tokens and idempotency keys', () => {
  it('retries 429 (after retry_after) and 503 with the same Idempotency-Key, refreshes an expired token, never retries a 422', async () => {
    const calls: Array<{ url: string; key: string | null; auth: string | null }> = [];
    const answers = [429, 503, 201];
    let tokens = 0;
    const fetchFake = (async (url: string, init: RequestInit) => {
      const headers = new Headers(init.headers);
      if (String(url).endsWith('/auth/token')) return new Response(JSON.stringify({ access_token: `tok-${++tokens}`, expires_in: tokens === 1 ? 30 : 3600 }), { status: 200 });
      calls.push({ url: String(url), key: headers.get('idempotency-key'), auth: headers.get('authorization') });
      const status = answers.shift() ?? 422;
      const body = status === 429 ? { status: 'error', error_code: 'RATE_LIMITED', message: 'slow down', retry_after: 0 } : status === 201 ? { lab_result_id: 'x' } : { status: 'error', error_code: 'X', message: 'x' };
      return new Response(JSON.stringify(body), { status });
    }) as typeof fetch;
    const pont = await Pont.create({ clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: 'http://pont.invalid', fetch: fetchFake, backoffMs: 1 });
    const pushed = await pont.records.pushLabResult({ health_id: 'CM482930174629', test_name: 'K', result_value: '4', flagged: false });
    expect(pushed).toEqual({ lab_result_id: 'x' });
    expect(calls).toHaveLength(3);
    expect(new Set(calls.map((c) => c.key)).size).toBe(1);
    expect(calls[0]!.key).toMatch(/^[0-9a-f-]{36}$/);
    // The first token expired within 60 s: the client fetched a new one before the first call.
    expect(calls[0]!.auth).toBe('Bearer tok-2');
    await expect(pont.records.pushLabResult({ health_id: 'CM482930174629', test_name: 'K', result_value: '4', flagged: false })).rejects.toBeInstanceOf(client.ValidationError);
    expect(calls).toHaveLength(4);
  });

  it('asks for its next tokens with the new secret once it rotated it', async () => {
    const secretsUsed: string[] = [];
    const fetchFake = (async (url: string, init: RequestInit) => {
      const body = JSON.parse(String(init.body ?? '{}'));
      // Tokens that expire within 60 s: every call asks for a new one.
      if (String(url).endsWith('/auth/token')) return secretsUsed.push(body.client_secret), new Response(JSON.stringify({ access_token: 't', expires_in: 30 }), { status: 200 });
      if (String(url).endsWith('/api/v1/connect/auth/clients/cli_x/rotate-secret'))
        return new Response(JSON.stringify({ client_id: 'cli_x', client_secret: 'pcs_new', previous_secret_expires_at: null, overlap: body.overlap_seconds }), { status: 200 });
      return new Response('{}', { status: 200 });
    }) as typeof fetch;
    const pont = await Pont.create({ clientId: 'cli_x', clientSecret: 'pcs_old', baseUrl: 'http://pont.invalid', fetch: fetchFake });
    expect(await pont.auth.rotateClientSecret(0)).toMatchObject({ client_secret: 'pcs_new', overlap: 0 });
    await pont.webhooks.list();
    expect(secretsUsed).toEqual(['pcs_old', 'pcs_old', 'pcs_new']);
  });

  it('refuses a missing argument before any request', async () => {
    let requests = 0;
    const fetchFake = (async () => (requests++, new Response(JSON.stringify({ access_token: 't', expires_in: 3600 }), { status: 200 }))) as typeof fetch;
    const pont = await Pont.create({ clientId: 'cli_x', clientSecret: 'pcs_x', baseUrl: 'http://pont.invalid', fetch: fetchFake });
    expect(() => pont.patients.getSummary('')).toThrow(/healthId is required/);
    expect(() => pont.records.pushLabResult({ health_id: 'CM482930174629' } as any)).toThrow(/test_name is required/);
    expect(requests).toBe(1); // the token only
  });
});

describe('the live scenario against a real Pont', () => {
  let server: ChildProcess;
  let info: { base_url: string; receiver_url: string; unregistered_health_id: string; foreign_health_id: string; demo: any };
  beforeAll(async () => {
    server = spawn(process.execPath, [`${conformance}server.mjs`], { stdio: ['pipe', 'pipe', 'inherit'] });
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: server.stdout! }).once('line', resolve);
      server.once('exit', (code) => reject(new Error(`conformance server exited ${code}`)));
    });
    info = JSON.parse(line);
  }, 120_000);
  afterAll(() => {
    server?.stdin?.end();
  });

  it('runs every method', async () => {
    const [full] = info.demo.clients;
    await expect(Pont.create({ clientId: full.client_id, clientSecret: 'pcs_wrong', baseUrl: info.base_url })).rejects.toBeInstanceOf(client.AuthenticationError);
    const pont = await Pont.create({ clientId: full.client_id, clientSecret: full.client_secret, baseUrl: info.base_url });
    const hid = info.demo.patients[0].health_id;

    expect((await pont.healthIds.resolve({ health_id: hid })).status).toBe('found');
    const created = await pont.healthIds.resolve({ first_name: 'Ama', last_name: 'Conformance', date_of_birth: '1991-02-03', sex: 'female' });
    expect(created.status).toBe('created');
    expect((await pont.healthIds.verify(hid)).valid).toBe(true);

    expect((await pont.consents.status(hid)).status).toBe('active');
    const newHid = created.health_id!;
    expect((await pont.consents.grant(newHid, { consent_type: 'full_record', expires_at: new Date(Date.now() + 86_400_000).toISOString() })).status).toBe('active');
    expect((await pont.consents.revoke(newHid)).status).toBe('revoked');
    expect((await pont.consents.request({ health_id: newHid, purpose: 'follow-up', requested_scopes: ['labs:read'] })).status).toBe('pending');

    const summary = await pont.patients.getSummary(hid);
    expect(summary.patient.first_name).toBe(info.demo.patients[0].first_name);
    expect((await pont.patients.search(hid)).health_id).toBe(hid);
    expect(Array.isArray((await pont.records.get(hid, { type: 'diagnoses' })).records.diagnoses)).toBe(true);

    const sub = await pont.webhooks.subscribe(info.receiver_url, ['lab_result.released'], 'conformance');
    expect(sub.webhook_secret).toMatch(/^whsec_/);
    const lab = await pont.records.pushLabResult({ health_id: hid, test_name: 'Hemoglobin', result_value: '6.1', unit: 'g/dL', flagged: true, flag_level: 'critical_low' });
    expect(lab.flag).toBe('LL');
    const enc = await pont.records.pushEncounter({ health_id: hid, encounter_type: 'cdss_alert', alert_type: 'drug_interaction', severity: 'high', clinical_note: 'check INR' });
    expect(enc.detected_issue_id).toBeTruthy();

    for (const bundle of [
      await pont.fhir.medicationRequests(hid, { status: 'active' }),
      await pont.fhir.allergyIntolerances(hid),
      await pont.fhir.diagnosticReports(hid),
      await pont.fhir.conditions(hid, { 'clinical-status': 'active' }),
      await pont.fhir.patientEverything(hid, { _count: 20 }),
    ])
      expect(bundle.resourceType).toBe('Bundle');
    const observations = await pont.fhir.search('Observation', { _count: 10, patient: `Patient/${info.demo.patients[0].patient_id}` });
    expect(observations.entry!.length).toBeGreaterThan(10); // every page, not the first 10
    expect((await pont.fhir.read('Patient', info.demo.patients[0].patient_id)).resourceType).toBe('Patient');

    // The delivery Pont made, verified by this library.
    const deliveryOf = async (labResultId: string) => {
      let delivery: { raw_body: string; signature: string } | undefined;
      for (let i = 0; i < 100 && !delivery; i++) {
        delivery = ((await (await fetch(info.receiver_url)).json()) as any[]).find((d) => JSON.parse(d.raw_body).data.lab_result_id === labResultId);
        if (!delivery) await new Promise((r) => setTimeout(r, 100));
      }
      return delivery!;
    };
    const delivery = await deliveryOf(lab.lab_result_id);
    expect(pont.webhooks.verifySignature(delivery!.raw_body, delivery!.signature, sub.webhook_secret)).toBe(true);
    const event = pont.webhooks.parseEvent(delivery!.raw_body, delivery!.signature, sub.webhook_secret);
    expect(event.data).toMatchObject({ health_id: hid, lab_result_id: lab.lab_result_id, flagged: true });
    expect((await pont.webhooks.list()).subscriptions.map((s) => s.id)).toContain(sub.id);
    expect((await pont.webhooks.replay(event.id)).event_id).toBe(event.id);
    // A rotation with overlap: the next delivery is signed with both secrets, and either verifies it.
    const rotated = await pont.webhooks.rotateSecret(sub.id, 3600);
    expect(rotated.webhook_secret).toMatch(/^whsec_/);
    expect(rotated.previous_secret_expires_at).toBeTruthy();
    const lab2 = await pont.records.pushLabResult({ health_id: hid, test_name: 'Potassium', result_value: '6.9', unit: 'mmol/L', flagged: true, flag_level: 'critical_high' });
    const during = await deliveryOf(lab2.lab_result_id);
    expect(during.signature.match(/v1=/g)).toHaveLength(2);
    for (const secret of [rotated.webhook_secret, sub.webhook_secret]) expect(pont.webhooks.verifySignature(during.raw_body, during.signature, secret)).toBe(true);
    await pont.webhooks.unsubscribe(sub.id);

    expect((await pont.inventory.bloodInventory({ facility_id: 'fac-demo' })).items.length).toBeGreaterThan(0);
    expect((await pont.inventory.pharmacyStock({ facility_id: 'fac-demo', below_reorder_level: true })).items.map((i) => i.medication.code)).toEqual(['198440']);
    expect((await pont.payments.reconciliation(info.demo.seeded.payments_date)).payments.length).toBe(5);

    await expect(pont.records.get(info.unregistered_health_id)).rejects.toBeInstanceOf(client.NotFoundException);
    await expect(pont.healthIds.verify(hid.slice(0, -2) + (hid.endsWith('00') ? '01' : '00'))).rejects.toBeInstanceOf(client.ValidationError);
    await expect(pont.records.pushLabResult({ health_id: hid, test_name: 'K', result_value: '4', flagged: true, flag_level: 'normal' })).rejects.toBeInstanceOf(client.ValidationError);
    await expect(pont.patients.getSummary(info.foreign_health_id)).rejects.toBeInstanceOf(client.ConsentRequiredError);

    // The client's own secret, rotated with an overlap: both secrets get tokens until it ends.
    const newSecret = await pont.auth.rotateClientSecret(3600);
    expect(newSecret.client_secret).toMatch(/^pcs_/);
    for (const secret of [newSecret.client_secret, full.client_secret]) await Pont.create({ clientId: full.client_id, clientSecret: secret, baseUrl: info.base_url });
  }, 120_000);
});
