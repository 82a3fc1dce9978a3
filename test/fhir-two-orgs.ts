import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

export const FHIR_JSON = 'application/fhir+json';

/** A request's options: `json` is sent as `type` (default application/fhir+json), `raw` as it is. */
export type FhirInit = RequestInit & { json?: unknown; raw?: string | Buffer; type?: string };

/** A test server with two organisations, A and B, each a client with fhir:read and fhir:write (no consent between them). */
export interface TwoOrganisations {
  pont: TestServer;
  a: TestClient;
  b: TestClient;
  /** A request to `/api/fhir/R4<path>` as `who`. */
  fhir(who: TestClient, path: string, init?: FhirInit): Promise<{ status: number; body: any; headers: Headers }>;
}

export async function startTwoOrganisations(): Promise<TwoOrganisations> {
  const pont = await startTestServer();
  const a = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-a' });
  const b = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-b' });
  const fhir: TwoOrganisations['fhir'] = (who, path, init = {}) => {
    const { json, raw, type, ...rest } = init;
    const body = raw ?? (json !== undefined ? JSON.stringify(json) : undefined);
    const headers = { ...who.headers, ...(body !== undefined ? { 'content-type': type ?? FHIR_JSON } : {}), ...(rest.headers as Record<string, string>) };
    return pont.json(`/api/fhir/R4${path}`, { ...rest, headers, body: body as RequestInit['body'] });
  };
  return { pont, a, b, fhir };
}
