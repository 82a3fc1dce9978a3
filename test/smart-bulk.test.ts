/**
 * A population export as a FHIR-native backend service does it, from the specifications alone (SMART Backend
 * Services + Bulk Data Access 2.0): discover the token endpoint, sign a client assertion with its own key (jose),
 * get a system-scoped token, kick off `$export`, poll the status URL, read every ndjson file with the token. Each
 * line must be valid R4, and the set must be exactly what the same token finds by searching: no more (consent,
 * ownership, the scope's types), no less.
 */
import { randomUUID } from 'node:crypto';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeyClient, keyClientInput } from '../src/auth/clients';
import type { BulkExportWorker } from '../src/bulk/worker';
import { validateFhirResource } from '../src/fhir/validate';
import { createTestClient, startTestServer, type TestServer } from './harness';

const FHIR = '/api/fhir/R4';
const ORG = 'org-backend';

let pont: TestServer;
let clientId: string;
let privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
let tokenEndpoint: string;

/** The SMART token request: a signed assertion (iss = sub = client id, aud = token endpoint, exp ≤ 5 min, new jti). */
async function systemToken(scope: string): Promise<{ status: number; body: any }> {
  const now = Math.floor(Date.now() / 1000);
  const assertion = await new SignJWT({ jti: randomUUID() })
    .setProtectedHeader({ alg: 'ES384', kid: 'backend-1', typ: 'JWT' })
    .setIssuer(clientId)
    .setSubject(clientId)
    .setAudience(tokenEndpoint)
    .setExpirationTime(now + 240)
    .sign(privateKey);
  const res = await fetch(tokenEndpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      scope,
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: assertion,
    }),
  });
  return { status: res.status, body: await res.json() };
}

async function bearer(scope: string): Promise<Record<string, string>> {
  const { status, body } = await systemToken(scope);
  expect(status, JSON.stringify(body)).toBe(200);
  return { authorization: `Bearer ${body.access_token}` };
}

const get = (url: string, headers: Record<string, string>) => fetch(url.startsWith('http') ? url : `${pont.url}${url}`, { headers });
const keys = (resources: Resource[]) => resources.map((r) => `${r.resourceType}/${r.id}`).sort();

/** Every match of a search, page by page. */
async function searchAll(headers: Record<string, string>, type: string): Promise<Resource[]> {
  const out: Resource[] = [];
  let next: string | undefined = `${FHIR}/${type}?_count=500`;
  while (next) {
    const res = await get(next, headers);
    expect(res.status).toBe(200);
    const bundle = (await res.json()) as Bundle;
    out.push(...(bundle.entry ?? []).filter((e) => e.search?.mode === 'match').map((e) => e.resource!));
    next = bundle.link?.find((l) => l.relation === 'next')?.url;
  }
  return out;
}

/** Kick-off, poll as the IG says (202 + X-Progress while running), then every file of the manifest. */
async function exportAll(headers: Record<string, string>, query = ''): Promise<{ manifest: { error: unknown[]; requiresAccessToken: boolean; output: Array<{ type: string; url: string }> }; resources: Resource[] }> {
  const kickOff = await fetch(`${pont.url}${FHIR}/$export${query}`, { headers: { ...headers, accept: 'application/fhir+json', prefer: 'respond-async' } });
  expect(kickOff.status, await kickOff.clone().text()).toBe(202);
  const status = kickOff.headers.get('content-location')!;
  let res = await get(status, headers);
  while (res.status === 202) {
    expect(res.headers.get('x-progress')).toBeTruthy();
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    // Instead of waiting Retry-After seconds: let this process's export worker run what is queued.
    await (pont.services.workers.find((w) => w.name === 'bulk-export') as BulkExportWorker).drain();
    res = await get(status, headers);
  }
  expect(res.status, await res.clone().text()).toBe(200);
  const manifest = (await res.json()) as Awaited<ReturnType<typeof exportAll>>['manifest'];
  expect(manifest.requiresAccessToken).toBe(true);
  const resources: Resource[] = [];
  for (const file of manifest.output) {
    expect((await get(file.url, {})).status).toBe(401); // the files need the token
    const body = await (await get(file.url, headers)).text();
    for (const line of body.split('\n').filter(Boolean)) {
      const resource = JSON.parse(line) as Resource;
      expect(resource.resourceType).toBe(file.type);
      validateFhirResource(resource);
      resources.push(resource);
    }
  }
  return { manifest, resources };
}

beforeAll(async () => {
  pont = await startTestServer();
  // The organisation's own records, another organisation's patient (no consent), both written over FHIR.
  const writer = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: ORG });
  const stranger = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-elsewhere' });
  for (const [client, family] of [[writer, 'Own'], [writer, 'Own2'], [stranger, 'Foreign']] as const) {
    const patient = await pont.json(`${FHIR}/Patient`, { method: 'POST', headers: client.headers, json: { resourceType: 'Patient', name: [{ family }] } });
    expect(patient.status).toBe(201);
    const subject = { reference: `Patient/${patient.body.id}` };
    for (const r of [
      { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '718-7' }] }, subject, valueQuantity: { value: 13.5, unit: 'g/dL' } },
      { resourceType: 'Condition', subject, code: { text: `${family} condition` } },
    ]) {
      expect((await pont.json(`${FHIR}/${r.resourceType}`, { method: 'POST', headers: client.headers, json: r })).status).toBe(201);
    }
  }

  // Discovery, then registration with the service's public key (what `pont clients create --jwks FILE` does).
  const discovery = await pont.json('/.well-known/smart-configuration');
  expect(discovery.status).toBe(200);
  expect(discovery.body.token_endpoint_auth_methods_supported).toContain('private_key_jwt');
  tokenEndpoint = discovery.body.token_endpoint;
  const pair = await generateKeyPair('ES384', { extractable: true });
  privateKey = pair.privateKey;
  const jwks = { keys: [{ ...(await exportJWK(pair.publicKey)), kid: 'backend-1', alg: 'ES384' }] };
  const input = await keyClientInput(true).parseAsync({ name: 'backend export', organizationId: ORG, scopes: ['fhir:read'], jwks });
  clientId = (await createKeyClient(pont.services.db, input)).client_id;
});

afterAll(async () => {
  await pont?.close();
});

describe('a SMART backend service exports the population it may read', () => {
  it('system/*.rs: the export equals its own searches, type by type, and holds nothing of another organisation', async () => {
    const headers = await bearer('system/*.rs');
    const { manifest, resources } = await exportAll(headers);
    expect(manifest.error).toEqual([]);
    const expected: Resource[] = [];
    for (const type of ['Patient', 'Observation', 'Condition']) expected.push(...(await searchAll(headers, type)));
    expect(expected.length).toBe(6); // the organisation's two patients and their records
    expect(keys(resources)).toEqual(keys(expected));
    expect(JSON.stringify(resources)).not.toContain('Foreign');
  });

  it('system/Observation.rs: only Observations are exported, and asking for Patients is refused before a job starts', async () => {
    const headers = await bearer('system/Observation.rs');
    const { resources } = await exportAll(headers);
    expect(new Set(resources.map((r) => r.resourceType))).toEqual(new Set(['Observation']));
    expect(resources.length).toBe(2);
    const refused = await fetch(`${pont.url}${FHIR}/$export?_type=Patient`, { headers: { ...headers, prefer: 'respond-async' } });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('content-location')).toBeNull();
  });

  it('a scope the client was not given (writes) is invalid_scope', async () => {
    const foreign = await systemToken('system/*.cruds');
    expect(foreign.status).toBe(400);
    expect(foreign.body.error).toBe('invalid_scope');
  });
});
