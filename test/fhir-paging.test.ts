import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bundle, BundleLink, Resource } from '@medplum/fhirtypes';
import { startFhirApi, type FhirTestApi } from './fhir-helpers';
import { createTestClient, type TestClient } from './harness';

/**
 * The FHIR niceties of issue 23 (item 5) and the first client's empty answer (item 1): paging both ways as
 * stock clients do it, 405 with Allow, a patient token on a client route told so, and an empty searchset of
 * a consent-bound client that says why it may be empty.
 */
let api: FhirTestApi;
let patientId: string;
const TAG = 'paging-test';

beforeAll(async () => {
  api = await startFhirApi();
  const patient = await api.create({ resourceType: 'Patient', name: [{ family: 'Pager', given: ['Ada'] }] });
  patientId = patient.id;
  // 8 Observations of one patient (families sort them in reverse of creation for the _sort case).
  for (let i = 0; i < 8; i++)
    await api.create({
      resourceType: 'Observation',
      status: 'final',
      code: { coding: [{ system: 'urn:test', code: TAG }], text: `obs ${i}` },
      subject: { reference: `Patient/${patientId}` },
      valueQuantity: { value: 100 - i },
    });
}, 120_000);
afterAll(async () => {
  await api?.close();
});

const linkOf = (bundle: Bundle, ...relations: string[]) => bundle.link?.find((l: BundleLink) => relations.includes(l.relation!))?.url;
const matchIds = (bundle: Bundle) => (bundle.entry ?? []).filter((e) => e.search?.mode === 'match').map((e) => `${e.resource!.resourceType}/${e.resource!.id}`);

/** GET an absolute link as fhir-kit-client does (its `url`, with the client's credentials). */
async function follow(url: string): Promise<Bundle> {
  expect(url.startsWith(`${api.pont.url}/api/fhir/R4/`)).toBe(true);
  const res = await api.call(url.slice(`${api.pont.url}/api/fhir/R4`.length));
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** Forward with `next` to the last page, then back with `previous` (or `prev`) to the first: the same pages, reversed. */
async function walk(path: string): Promise<{ forward: string[][]; backward: string[][]; firstPage: Bundle; lastPage: Bundle }> {
  const firstPage = (await api.call(path)).body as Bundle;
  expect(linkOf(firstPage, 'previous', 'prev')).toBeUndefined();
  const forward = [matchIds(firstPage)];
  let page = firstPage;
  for (let next = linkOf(page, 'next'); next; next = linkOf(page, 'next')) {
    page = await follow(next);
    forward.push(matchIds(page));
  }
  const lastPage = page;
  const backward = [matchIds(page)];
  for (let previous = linkOf(page, 'previous', 'prev'); previous; previous = linkOf(page, 'previous', 'prev')) {
    page = await follow(previous);
    backward.push(matchIds(page));
    expect(backward.length).toBeLessThan(20);
  }
  return { forward, backward: backward.reverse(), firstPage, lastPage };
}

describe('paging backwards, as fhir-kit-client prevPage does', () => {
  it('default order (keyset): forward to the last page and back to the first, the same entries in the same order', async () => {
    const { forward, backward, firstPage, lastPage } = await walk(`/Observation?code=urn:test|${TAG}&_count=3`);
    expect(forward.map((p) => p.length)).toEqual([3, 3, 2]);
    expect(backward).toEqual(forward);
    expect(new Set(forward.flat()).size).toBe(8);
    // first and last: the first page, and the page that ends with the last match.
    expect(matchIds(await follow(linkOf(lastPage, 'first')!))).toEqual(forward[0]);
    expect(matchIds(await follow(linkOf(firstPage, 'last')!))).toEqual(forward.flat().slice(-3));
    expect(linkOf(lastPage, 'next')).toBeUndefined();
  });

  it('explicit _sort (offset), with _total=accurate: both ways alike, and last is the last page', async () => {
    const path = `/Observation?code=urn:test|${TAG}&_sort=value-quantity&_count=3&_total=accurate`;
    const { forward, backward, firstPage, lastPage } = await walk(path);
    expect(forward.map((p) => p.length)).toEqual([3, 3, 2]);
    expect(backward).toEqual(forward);
    expect(lastPage.total).toBe(8);
    expect(matchIds(await follow(linkOf(firstPage, 'last')!))).toEqual(forward[2]);
    expect(matchIds(await follow(linkOf(lastPage, 'first')!))).toEqual(forward[0]);
  });

  it('a single page has no paging links but self', async () => {
    const one = (await api.call(`/Observation?code=urn:test|${TAG}&_count=50`)).body as Bundle;
    expect(one.link?.map((l) => l.relation)).toEqual(['self']);
  });

  it('a cursor with two positions, or of the other paging kind, is refused (400 OperationOutcome)', async () => {
    const cursor = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    for (const path of [
      `/Observation?_cursor=${cursor({ afterRid: '1', beforeRid: '5' })}`,
      `/Observation?_cursor=${cursor({ beforeRid: '5', offset: 3 })}`,
      `/Observation?_cursor=${cursor({ beforeRid: 'x' })}`,
      `/Observation?_cursor=${cursor({ offset: 3 })}`,
      `/Observation?_sort=date&_cursor=${cursor({ afterRid: '3' })}`,
      `/Observation?_sort=date&_cursor=${cursor({ beforeRid: '3' })}`,
      `/Patient/${patientId}/$everything?_cursor=${cursor({ offset: 3 })}`,
    ]) {
      const res = await api.call(path);
      expect(res.status, path).toBe(400);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
  });

  it('Patient/$everything pages both ways; the patient leads the first page either way; _since stays in the links', async () => {
    const { forward, backward, firstPage } = await walk(`/Patient/${patientId}/$everything?_count=3&_since=2000-01-01T00:00:00Z`);
    expect(forward.map((p) => p.length)).toEqual([4, 3, 2]);
    expect(forward[0]![0]).toBe(`Patient/${patientId}`);
    expect(backward).toEqual(forward);
    for (const l of firstPage.link ?? []) if (l.relation !== 'self') expect(new URL(l.url!).searchParams.get('_since')).toBe('2000-01-01T00:00:00Z');
  });

  it('_history answers one page: a _cursor is refused, not ignored', async () => {
    for (const path of ['/Observation/_history?_cursor=abc', `/Patient/${patientId}/_history?_cursor=abc`]) {
      const res = await api.call(path);
      expect(res.status, path).toBe(400);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
  });
});

describe('405 names the methods the path takes', () => {
  it('DELETE /metadata: 405 with Allow: HEAD, GET', async () => {
    const res = await api.pont.fetch('/api/fhir/R4/metadata', { method: 'DELETE' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')?.split(/,\s*/).sort()).toEqual(['GET', 'HEAD']);
    expect(((await res.json()) as { resourceType: string }).resourceType).toBe('OperationOutcome');
  });

  it('a FHIR resource path, and a Connect path (Error shape)', async () => {
    const fhir = await api.pont.fetch(`/api/fhir/R4/Patient/${patientId}`, { method: 'POST' });
    expect(fhir.status).toBe(405);
    expect(fhir.headers.get('allow')?.split(/,\s*/).sort()).toEqual(['DELETE', 'GET', 'HEAD', 'PATCH', 'PUT']);
    const connect = await api.pont.fetch('/api/v1/connect/auth/token', { method: 'GET' });
    expect(connect.status).toBe(405);
    expect(connect.headers.get('allow')).toBe('POST');
    expect(((await connect.json()) as { error_code: string }).error_code).toBe('METHOD_NOT_ALLOWED');
  });
});

describe("a patient's token on a client route", () => {
  it('is told that patient tokens open only the mobile routes (401 invalid_token), on FHIR and Connect alike', async () => {
    const registrar = await createTestClient(api.pont, ['health_id:verify', 'consents:write'], { organizationId: 'org-paging' });
    const resolved = await api.pont.json('/api/v1/connect/patients/resolve', {
      method: 'POST',
      headers: registrar.headers,
      json: { first_name: 'Tok', last_name: 'Patient', date_of_birth: '1990-05-06', sex: 'male' },
    });
    expect(resolved.status).toBe(201);
    const healthId = resolved.body.health_id as string;
    const code = await api.pont.json(`/api/v1/connect/patient/${healthId}/mobile/pairing-code`, { method: 'POST', headers: registrar.headers });
    expect(code.status).toBe(201);
    const token = await api.pont.json('/api/v1/mobile/auth/token', { method: 'POST', json: { health_id: healthId, code: code.body.code } });
    expect(token.body.access_token).toMatch(/^pat_/);
    const bearer = { authorization: `Bearer ${token.body.access_token}` };
    expect((await api.pont.json('/api/v1/mobile/consents', { headers: bearer })).status).toBe(200);

    for (const path of ['/api/fhir/R4/Patient', `/api/v1/connect/patients/verify/${healthId}`]) {
      const res = await api.pont.json(path, { headers: bearer });
      expect(res.status, path).toBe(401);
      expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
      expect(JSON.stringify(res.body)).toContain('/api/v1/mobile/');
      expect(JSON.stringify(res.body)).not.toMatch(/invalid, expired or revoked/);
    }
  });
});

describe('an empty searchset of a client that sees by consent says why it may be empty', () => {
  let clinic: TestClient;
  beforeAll(async () => {
    clinic = await createTestClient(api.pont, ['fhir:read'], { organizationId: 'org-consent-bound' });
  });
  const search = async (client: TestClient | undefined, path: string): Promise<Bundle> => {
    const res = client ? await api.pont.json(`/api/fhir/R4${path}`, { headers: client.headers }) : await api.call(path);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };
  const notes = (bundle: Bundle) => (bundle.entry ?? []).filter((e) => e.search?.mode === 'outcome').map((e) => e.resource as Resource & { issue: any[] });

  it('whether or not anything is hidden: the same informational OperationOutcome', async () => {
    const hidden = await search(clinic, `/Observation?subject=Patient/${patientId}`);
    const absent = await search(clinic, '/Observation?subject=Patient/no-such-patient');
    for (const bundle of [hidden, absent]) {
      expect(matchIds(bundle)).toEqual([]);
      const [note] = notes(bundle);
      expect(note?.issue).toEqual([{ severity: 'information', code: 'informational', diagnostics: expect.stringContaining('--all-patients') }]);
    }
    const strip = (b: Bundle) => ({ ...b, link: undefined });
    expect(strip(hidden)).toEqual(strip(absent));
    const count = await search(clinic, `/Observation?subject=Patient/${patientId}&_summary=count`);
    expect(count.total).toBe(0);
    expect(notes(count)).toHaveLength(1);
  });

  it('not on an operator’s empty answer, nor on an answer with matches', async () => {
    expect(notes(await search(undefined, '/Observation?subject=Patient/no-such-patient'))).toEqual([]);
    expect(notes(await search(undefined, `/Observation?subject=Patient/${patientId}`))).toEqual([]);
  });
});
