import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildOpenApi } from '../src/http/openapi';
import type { RouteSpec } from '../src/http/routes';

const route = (path: string, schema: z.ZodType): RouteSpec => ({
  method: 'get',
  path,
  operationId: path.slice(1),
  summary: path,
  tags: ['Test'],
  security: { kind: 'public' },
  responses: { 200: { description: 'ok', schema } },
  handler: async () => undefined,
} as unknown as RouteSpec);

describe('OpenAPI component names', () => {
  it('refuses two different schemas under one name (one of them would be published for both)', () => {
    const a = z.object({ first_name: z.string() }).meta({ id: 'Summary' });
    const b = z.object({ active_medications: z.array(z.string()) }).meta({ id: 'Summary' });
    expect(() => buildOpenApi([route('/a', a), route('/b', b)], 'http://x')).toThrow(/Two different schemas are named Summary/);
  });

  it('accepts one schema used by several routes', () => {
    const a = z.object({ first_name: z.string() }).meta({ id: 'Summary' });
    const doc = buildOpenApi([route('/a', a), route('/b', a)], 'http://x') as { components: { schemas: Record<string, unknown> } };
    expect(Object.keys(doc.components.schemas)).toContain('Summary');
  });
});
