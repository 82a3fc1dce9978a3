import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Patient } from '@medplum/fhirtypes';
import { createTestClient, type TestClient, type TestServer } from './harness';
import { startTwoOrganisations, type TwoOrganisations } from './fhir-two-orgs';

/**
 * Conditional delete (`DELETE Type?criteria`, FHIR R4 http.html "Conditional delete", `conditionalDelete: single`):
 * the one match the caller may see is deleted as `DELETE Type/id` would delete it; none deletes nothing; several is a
 * 412 and deletes nothing. Two organisations: A writes, B (same scopes, no consent) may neither see nor delete A's data.
 */
let pont: TestServer, a: TestClient, b: TestClient, fhir: TwoOrganisations['fhir'];
beforeAll(async () => void ({ pont, a, b, fhir } = await startTwoOrganisations()));
afterAll(async () => void (await pont?.close()));

async function patient(who: TestClient, value: string): Promise<Patient & { id: string }> {
  const res = await fhir(who, '/Patient', { method: 'POST', json: { resourceType: 'Patient', identifier: [{ system: 'urn:cd', value }], name: [{ family: 'Delete' }] } });
  expect(res.status).toBe(201);
  return res.body;
}
const remove = (who: TestClient, query: string, headers: Record<string, string> = {}) => fhir(who, `/Patient${query}`, { method: 'DELETE', headers });
const status = async (id: string) => (await fhir(a, `/Patient/${id}`)).status;

describe('DELETE Type?criteria', () => {
  it('deletes the one match, as DELETE Type/id does: its reads then answer 410, its history keeps the deletion', async () => {
    const p = await patient(a, 'one');
    expect((await remove(a, '?identifier=urn:cd|one')).status).toBe(204);
    expect(await status(p.id)).toBe(410);
    const history = await fhir(a, `/Patient/${p.id}/_history`);
    expect(history.body.entry).toHaveLength(2);
    expect(history.body.entry[0].request.method).toBe('DELETE');
  });

  it('deletes nothing when nothing matches (204, as a delete of what is absent), and several matches are a 412 that deletes none', async () => {
    expect((await remove(a, '?identifier=urn:cd|none')).status).toBe(204);
    const [x, y] = [await patient(a, 'two'), await patient(a, 'two')];
    const several = await remove(a, '?identifier=urn:cd|two');
    expect(several.status).toBe(412);
    expect(several.body.resourceType).toBe('OperationOutcome');
    expect([await status(x.id), await status(y.id)]).toEqual([200, 200]);
  });

  it('needs criteria: no query, or only control parameters, is a 400; an unknown parameter is the 400 of a search', async () => {
    const p = await patient(a, 'kept');
    // An empty or bare value selects nothing either (an attacker's review: `?name=` deleted a caller's only Location),
    // nor do the parameters that page or shape an answer (`_include:iterate`, `_cursor`, `_summary`).
    const only = ['?name=', '?identifier', '?=', '?_id=', '?name=&_count=1', '?_include:iterate=Patient:link', '?_revinclude:iterate=Encounter:subject', '?_summary=count', '?_cursor=eyJhZnRlclJpZCI6IjAifQ'];
    for (const query of ['', '?', '?_count=1', '?_sort=-_lastUpdated', '?nonsense=1', '?identifier=urn:cd|kept&nonsense=1', ...only]) {
      const res = await remove(a, query);
      expect(res.status, query).toBe(400);
      expect(res.body.resourceType, query).toBe('OperationOutcome');
    }
    expect(await status(p.id)).toBe(200);
    // The same rule for every conditional write: `_count=1` alone would have made any one Patient the one to update.
    const update = await fhir(a, '/Patient?_count=1', { method: 'PUT', json: { resourceType: 'Patient', name: [{ family: 'Overwritten' }] } });
    expect(update.status).toBe(400);
    expect((await fhir(a, `/Patient/${p.id}`)).body.name[0].family).toBe('Delete');
  });

  it('a cursor or _summary beside the criteria changes nothing of what they select: several stay a 412 (audited), a match stays a match', async () => {
    const [x, y] = [await patient(a, 'paged'), await patient(a, 'paged')];
    const page = await fhir(a, '/Patient?identifier=urn:cd|paged&_count=1');
    const next = new URL(page.body.link.find((l: { relation: string }) => l.relation === 'next').url).searchParams.get('_cursor')!;
    const before = await pont.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM audit_log WHERE organization_id = 'org-a' AND action = 'R'`);
    expect((await remove(a, `?identifier=urn:cd|paged&_cursor=${encodeURIComponent(next)}`)).status).toBe(412);
    expect((await remove(a, '?identifier=urn:cd|paged&_count=1&_sort=_id')).status).toBe(412);
    expect([await status(x.id), await status(y.id)]).toEqual([200, 200]);
    const after = await pont.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM audit_log WHERE organization_id = 'org-a' AND action = 'R'`);
    expect(after.rows[0]!.n).toBeGreaterThan(before.rows[0]!.n);
    const one = await patient(a, 'counted');
    expect((await remove(a, '?identifier=urn:cd|counted&_summary=count')).status).toBe(204);
    expect(await status(one.id)).toBe(410);
  });

  it('criteria written differently but selecting alike are one lock: a burst of conditional updates creates once', async () => {
    const spellings = ['', '&_pretty=true', '&_format=json', '&_count=1', '&_total=none', '&_elements=id', '&name=', '&_summary=true'];
    const answers = await Promise.all(
      spellings.map((extra) => fhir(a, `/Patient?identifier=urn:cd|spelled${extra}`, { method: 'PUT', json: { resourceType: 'Patient', identifier: [{ system: 'urn:cd', value: 'spelled' }] } })),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect((await fhir(a, '/Patient?identifier=urn:cd|spelled')).body.entry).toHaveLength(1);
  });

  it('honours If-Match: another version is a 412 and deletes nothing', async () => {
    const p = await patient(a, 'versioned');
    expect((await remove(a, '?identifier=urn:cd|versioned', { 'if-match': 'W/"7"' })).status).toBe(412);
    expect(await status(p.id)).toBe(200);
    expect((await remove(a, '?identifier=urn:cd|versioned', { 'if-match': 'W/"1"' })).status).toBe(204);
    expect(await status(p.id)).toBe(410);
  });

  it("another organisation's criteria find nothing of A's: 204 and nothing deleted; what B may read but not change is refused as DELETE Type/id refuses it", async () => {
    const p = await patient(a, 'only-a');
    expect((await remove(b, '?identifier=urn:cd|only-a')).status).toBe(204);
    expect(await status(p.id)).toBe(200);
    // An Organization is directory data every client reads; only its author may delete it.
    const org = await fhir(a, '/Organization', { method: 'POST', json: { resourceType: 'Organization', name: 'Clinique Delete' } });
    const direct = await fhir(b, `/Organization/${org.body.id}`, { method: 'DELETE' });
    const conditional = await fhir(b, `/Organization?name=${encodeURIComponent('Clinique Delete')}`, { method: 'DELETE' });
    expect(conditional.status).toBe(direct.status);
    expect(conditional.status).toBeGreaterThanOrEqual(400);
    expect((await fhir(a, `/Organization/${org.body.id}`)).status).toBe(200);
  });

  it('a type no client writes (Consent, AuditEvent) is a 403 whether or not something matches', async () => {
    for (const type of ['Consent', 'AuditEvent']) {
      const res = await fhir(b, `/${type}?_id=none-such`, { method: 'DELETE' });
      expect(res.status, type).toBe(403);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
  });

  it('needs fhir:write', async () => {
    const reader = await createTestClient(pont, ['fhir:read'], { organizationId: 'org-a' });
    const p = await patient(a, 'reader');
    expect((await remove(reader, '?identifier=urn:cd|reader')).status).toBe(403);
    expect(await status(p.id)).toBe(200);
  });

  it('a burst of the same conditional delete deletes once: every answer 204, one deletion in the history', async () => {
    const p = await patient(a, 'burst');
    const answers = await Promise.all(Array.from({ length: 8 }, () => remove(a, '?identifier=urn:cd|burst')));
    expect(answers.map((r) => r.status)).toEqual(Array(8).fill(204));
    const history = await fhir(a, `/Patient/${p.id}/_history`);
    expect(history.body.entry.filter((e: { request: { method: string } }) => e.request.method === 'DELETE')).toHaveLength(1);
  });

  it('the CapabilityStatement says single: one match at a time', async () => {
    const res = await pont.json('/api/fhir/R4/metadata');
    const patientEntry = res.body.rest[0].resource.find((r: { type: string }) => r.type === 'Patient');
    expect(patientEntry.conditionalDelete).toBe('single');
  });
});
