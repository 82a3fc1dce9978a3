import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestClient } from './harness';
import { startTwoOrganisations, type TwoOrganisations } from './fhir-two-orgs';

/**
 * $validate as another organisation's data sees it: mode=delete must report what the delete would answer
 * (found by the attacker's review, reproduced here before the fix).
 */
let t: TwoOrganisations;

beforeAll(async () => {
  t = await startTwoOrganisations();
});
afterAll(async () => t?.pont.close());

describe('$validate mode=delete', () => {
  it('reports what the delete would answer: a patient another organisation\'s data refers to is not "no issues"', async () => {
    // B registers a patient; A, with the patient's consent, records an Observation about them (B cannot see it).
    const registrar = await createTestClient(t.pont, ['health_id:verify', 'fhir:read', 'fhir:write'], { organizationId: 'org-b' });
    const resolved = await t.pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: registrar.headers, json: { first_name: 'Val', last_name: 'Idate', date_of_birth: '1980-02-03' } });
    const healthId = resolved.body.health_id;
    const patientId = (await t.fhir(t.b, `/Patient?identifier=https://pont.health/fhir/sid/health-id|${healthId}`)).body.entry[0].resource.id;
    const granter = await createTestClient(t.pont, ['consents:write'], { organizationId: 'org-a' });
    const grant = await t.pont.json(`/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', headers: granter.headers, json: { consent_type: 'full_record', expires_at: new Date(Date.now() + 86_400_000).toISOString() } });
    expect(grant.status).toBe(201);
    const obs = await t.fhir(t.a, '/Observation', { method: 'POST', json: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: `Patient/${patientId}` } } });
    expect(obs.status).toBe(201);

    const validated = await t.fhir(t.b, `/Patient/${patientId}/$validate?mode=delete`, { method: 'POST' });
    const deleted = await t.fhir(t.b, `/Patient/${patientId}`, { method: 'DELETE' });
    expect(deleted.status).toBe(409);
    // Today: 200 "No issues detected", then the delete is a 409.
    expect(validated.body.issue.some((i: any) => i.severity === 'error'), JSON.stringify(validated.body)).toBe(true);
  });
});
