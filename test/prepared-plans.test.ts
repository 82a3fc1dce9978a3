/**
 * A write's audit row gets a generic plan once PostgreSQL has seen its statement five times on a connection, not a
 * new plan at every write (stop 63: 0.2 ms a write). PostgreSQL only: PGlite has one connection and Pont's prepared
 * statements are PostgreSQL's. The webhook fan-out had the same fault (1.5 ms a write), but only a database of tens
 * of thousands of resources prices its plans so that it shows: its statement's text is held by
 * src/webhooks/entitlement.unit.test.ts, and `bench:profile` lists whatever is planned anew on such a database.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { preparedPlans } from '../bench/planned-anew';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

let pont: TestServer;
let writer: TestClient;

beforeAll(async () => {
  pont = await startTestServer();
  writer = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-plans' });
});
afterAll(async () => {
  await pont?.close();
});

describe('prepared statements of the write path', () => {
  it('the audit row of a write is planned generically after its first executions, not anew at every write', async () => {
    const patient = await pont.json('/api/fhir/R4/Patient', { method: 'POST', headers: writer.headers, json: { resourceType: 'Patient', name: [{ family: 'Plans' }] } });
    expect(patient.status).toBe(201);
    // Enough writes, one at a time, that each connection of the pool (10) runs each statement more than five times.
    for (let i = 0; i < 120; i++) {
      const created = await pont.json('/api/fhir/R4/Observation', {
        method: 'POST',
        headers: writer.headers,
        json: { resourceType: 'Observation', status: 'final', category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] }], code: { coding: [{ system: 'http://loinc.org', code: '718-7' }] }, subject: { reference: `Patient/${patient.body.id}` }, valueQuantity: { value: i, unit: 'g/dL' } },
      });
      expect(created.status).toBe(201);
    }
    const plans = await preparedPlans(pont.services.db);
    const audits = plans.filter((p) => p.statement.includes('INSERT INTO audit_log') && p.custom + p.generic > 5);
    expect(audits.length).toBeGreaterThan(0);
    for (const p of audits) expect({ generic: p.generic > 0, custom: p.custom }).toEqual({ generic: true, custom: 5 });
  });
});
