/** recordAudit: the AuditEvent its row becomes is valid R4, names the caller, and the row lives or dies with its transaction. */
import type { AuditEvent } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordAudit, type AuditRecord } from '../src/audit/audit';
import { validateFhirResource } from '../src/fhir/validate';
import { backend, createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

let pont: TestServer;
let auditor: TestClient;

beforeAll(async () => {
  pont = await startTestServer();
  auditor = await createTestClient(pont, ['audit:read'], { organizationId: 'org-operator', allPatients: true });
});
afterAll(async () => {
  await pont?.close();
});

async function searchAudit(query: string): Promise<AuditEvent[]> {
  const { status, body } = await pont.json(`/api/fhir/R4/AuditEvent?${query}`, { headers: auditor.headers });
  expect(status).toBe(200);
  return (body.entry ?? []).map((e: { resource: AuditEvent }) => e.resource);
}

const record = (over: Partial<AuditRecord>): AuditRecord => ({
  caller: { requestId: 'req-x', address: '127.0.0.1' },
  operation: 'testOperation',
  action: 'R',
  outcome: 'success',
  ...over,
});

describe(`audit (${backend})`, () => {
  it('stores a valid AuditEvent for a client, a bridge agent and an anonymous caller', async () => {
    const callers: AuditRecord['caller'][] = [
      { principal: { kind: 'client', clientId: 'cli_audit_1', organizationId: 'org-a', facilityId: 'fac-a', scopes: [], tokenId: 'jti-1' }, requestId: 'r1' },
      { principal: { kind: 'bridge-agent', agentId: 'agt_audit_1', facilityId: 'fac-b' }, requestId: 'r2' },
      { requestId: 'r3' },
      { principal: { kind: 'patient', patientId: 'pat-1', healthId: 'CM482930174629' }, requestId: 'r4' },
      { principal: { kind: 'system', name: 'import' } },
    ];
    for (const caller of callers) {
      await pont.services.db.transaction((tx) =>
        recordAudit(tx, record({ caller, patient: { healthId: 'CM482930174629' }, purpose: 'treatment', externalReference: 'MRN-1' })),
      );
    }
    // Break-glass, several patients, the kinds of data: every part of a record.
    await pont.services.db.transaction((tx) =>
      recordAudit(tx, record({ caller: callers[0]!, patient: { id: 'p1' }, otherPatients: ['p2', 'p3'], breakGlass: true, purpose: 'unconscious patient', dataTypes: ['Observation', 'Condition'], outcome: 'minor-failure', outcomeDescription: 'refused' })),
    );
    // Materialised AuditEvents are not validated on the way in (they are Pont's own): they must be valid R4.
    for (const event of await searchAudit('subtype=testOperation')) expect(() => validateFhirResource(event)).not.toThrow();
    const [client] = await searchAudit('altid=cli_audit_1');
    expect(client!.agent).toEqual([
      expect.objectContaining({ altId: 'cli_audit_1', requestor: true, policy: ['jti-1'], location: expect.objectContaining({ identifier: expect.objectContaining({ value: 'fac-a' }) }) }),
      expect.objectContaining({ altId: 'org-a', requestor: false }),
    ]);
    expect(client).toMatchObject({ purposeOfEvent: [{ text: 'treatment' }], outcome: '0', action: 'R' });
    const [agent] = await searchAudit('altid=agt_audit_1');
    expect(agent!.agent[0]).toMatchObject({ who: { type: 'Device', identifier: { value: 'agt_audit_1' } } });
    expect(await searchAudit('subtype=testOperation')).toHaveLength(6);
  });

  it('is rolled back with the transaction it belongs to', async () => {
    await expect(
      pont.services.db.transaction(async (tx) => {
        await recordAudit(tx, record({ operation: 'rolledBack' }));
        throw new Error('the operation failed');
      }),
    ).rejects.toThrow('the operation failed');
    expect(await searchAudit('subtype=rolledBack')).toHaveLength(0);
    await pont.services.db.transaction((tx) => recordAudit(tx, record({ operation: 'rolledBack' })));
    expect(await searchAudit('subtype=rolledBack')).toHaveLength(1);
  });
});
