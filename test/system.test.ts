import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startTestServer, type TestServer } from './harness';

let pont: TestServer;
beforeAll(async () => {
  pont = await startTestServer();
});
afterAll(async () => {
  await pont?.close();
});

describe('service basics', () => {
  it('answers liveness and readiness', async () => {
    expect(await pont.json('/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect(await pont.json('/readyz')).toMatchObject({ status: 200, body: { status: 'ok', checks: { database: 'ok' } } });
  });

  it('publishes an OpenAPI 3.1 document listing its routes', async () => {
    const { status, body } = await pont.json('/api/openapi.json');
    expect(status).toBe(200);
    expect(body.openapi).toBe('3.1.0');
    expect(body.info.version).toBe('1.2.0');
    expect(body.servers[0].url).toBe(pont.url);
    expect(body.paths['/healthz'].get.operationId).toBe('healthz');
    expect(body.components.schemas.Error.required).toEqual(['status', 'error_code', 'message']);
    const validation = await new Validator().validate(body);
    expect(validation.errors ?? []).toEqual([]);
    expect(validation.valid).toBe(true);
  });

  it('answers unknown routes with the Error shape and a request id', async () => {
    const res = await pont.json('/api/v1/nope', { headers: { 'X-Request-ID': 'abc-123' } });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ status: 'error', error_code: 'NOT_FOUND', message: expect.any(String) });
    expect(res.headers.get('x-request-id')).toBe('abc-123');
  });

  it('answers a wrong method with 405 in the Error shape', async () => {
    const res = await pont.json('/healthz', { method: 'DELETE' });
    expect(res.status).toBe(405);
    expect(res.body.error_code).toBe('METHOD_NOT_ALLOWED');
  });
});

describe('operational hygiene', () => {
  it('answers with security headers and compresses large answers', async () => {
    const pont = await startTestServer();
    try {
      const res = await pont.fetch('/api/openapi.json', { headers: { 'accept-encoding': 'gzip' } });
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(res.headers.get('content-encoding')).toBe('gzip');
      expect(((await res.json()) as { openapi: string }).openapi).toMatch(/^3\.1/);
    } finally {
      await pont.close();
    }
  });
});
