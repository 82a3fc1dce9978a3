/**
 * The fan-out's statement (entitledOrganizationsOfEach) as PostgreSQL is given it: its text decides whether a
 * prepared statement of it gets a generic plan (stop 63: over unnest() and with the dates of care of every type it
 * was planned anew at every write, 1.5 ms). The organisations it finds are the integration tests' (webhooks, consent
 * artefacts); here, only what it asks.
 */
import { describe, expect, it } from 'vitest';
import type { Queryable } from '../db/database';
import { entitledOrganizationsOfEach, type EventAudience } from './entitlement';

/** The statements a fan-out sends, answered with no rows. */
async function statementsOf(events: EventAudience[]): Promise<string[]> {
  const texts: string[] = [];
  const q = { query: async (text: string) => (texts.push(text), { rows: [], rowCount: 0 }) } as unknown as Queryable;
  await entitledOrganizationsOfEach(q, events);
  return texts;
}

const lab = (patient: string): EventAudience => ({ type: 'lab_result.released', organizationId: 'org-lab', patientId: patient, data: { lab_result_id: `obs-${patient}` } });

describe('the webhook fan-out statement', () => {
  it('binds a few keys as a VALUES list (one text per power of two, which a generic plan serves), many as arrays', async () => {
    const [few] = await statementsOf([lab('p1'), lab('p2')]);
    expect(few).toMatch(/FROM \(VALUES \(/);
    expect(few).not.toMatch(/unnest\(/);
    const [three] = await statementsOf([lab('p1'), lab('p2'), lab('p3')]);
    const [four] = await statementsOf([lab('p1'), lab('p2'), lab('p3'), lab('p4')]);
    expect(three).toBe(four);
    const [many] = await statementsOf(Array.from({ length: 40 }, (_, i) => lab(`p${i}`)));
    expect(many).toMatch(/unnest\(/);
  });

  it('writes the dates of care of the types its events may be about, not of every type', async () => {
    const [labs] = await statementsOf([lab('p1')]);
    expect(labs).toContain("'{effectiveDateTime}'");
    for (const other of ['MedicationRequest', 'Immunization', 'Appointment']) expect(labs).not.toContain(`'${other}'`);
    const [mixed] = await statementsOf([lab('p1'), { type: 'prescription.issued', organizationId: 'org-rx', patientId: 'p2', data: { prescription_id: 'rx-1' } }]);
    expect(mixed).toContain("'MedicationRequest'");
    expect(mixed).not.toContain("'Immunization'");
  });
});
