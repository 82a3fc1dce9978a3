import type { Bundle, Resource } from '@medplum/fhirtypes';
import { createTestClient, startTestServer, type TestServer } from './harness';

export interface FhirTestApi {
  pont: TestServer;
  /** JSON request to `/api/fhir/R4<path>` with a token holding fhir:read and fhir:write. */
  call<T = any>(path: string, init?: RequestInit & { json?: unknown }): Promise<{ status: number; body: T; headers: Headers }>;
  create<T extends Resource>(resource: T): Promise<T & { id: string }>;
  /** Follows next links; returns every match. */
  searchAll(path: string): Promise<Resource[]>;
  close(): Promise<void>;
}

/**
 * A server and an operator client of the deploying institution (all-patient access: the FHIR store's own
 * tests are not about consent; test/consent-*.test.ts are).
 */
export async function startFhirApi(env: Record<string, string> = {}): Promise<FhirTestApi> {
  const pont = await startTestServer(env);
  const client = await createTestClient(pont, ['fhir:read', 'fhir:write', 'audit:read'], { allPatients: true });
  const call: FhirTestApi['call'] = (path, init = {}) =>
    pont.json(`/api/fhir/R4${path}`, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
  return {
    pont,
    call,
    async create(resource) {
      const res = await call(`/${resource.resourceType}`, { method: 'POST', json: resource });
      if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
    async searchAll(path) {
      const out: Resource[] = [];
      let next: string | undefined = path;
      while (next) {
        const res: { status: number; body: Bundle } = await call(next);
        if (res.status !== 200) throw new Error(`search failed: ${res.status} ${JSON.stringify(res.body)}`);
        out.push(...(res.body.entry ?? []).filter((e) => e.search?.mode === 'match').map((e) => e.resource!));
        const url = res.body.link?.find((l) => l.relation === 'next')?.url;
        next = url ? url.slice(url.indexOf('/api/fhir/R4') + '/api/fhir/R4'.length) : undefined;
      }
      return out;
    },
    close: () => pont.close(),
  };
}

export const ids = (resources: Resource[]): string[] => resources.map((r) => r.id ?? '').sort();
