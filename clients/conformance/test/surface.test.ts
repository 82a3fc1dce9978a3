import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config';
import { openApiDocument } from '../../../src/server';

/**
 * surface.json names, for every operation of the OpenAPI document the server publishes, the method of each library
 * (or why none): strict both ways, so a new route without a client method, or a stale entry, fails here.
 */
type Entry = { typescript: string; python: string; php: string } | { excluded: string };
const surface = JSON.parse(readFileSync(new URL('../surface.json', import.meta.url), 'utf8')) as { library: Record<string, Entry>; operations: Record<string, Entry> };

// The document /api/openapi.json serves, built from the same routes and maps without starting a service
// (test/auth.test.ts checks the two are equal).
const doc = openApiDocument(loadConfig({ LOG_LEVEL: 'error', PONT_ENV: 'development' })) as { paths: Record<string, Record<string, { operationId?: string }>> };
const operationIds = Object.values(doc.paths).flatMap((item) => Object.values(item).flatMap((op) => (op && typeof op === 'object' && op.operationId ? [op.operationId] : [])));

describe('clients/conformance/surface.json', () => {
  it('names every operation of the live OpenAPI document, and nothing else', () => {
    expect(operationIds.length).toBeGreaterThan(50);
    expect(Object.keys(surface.operations).sort()).toEqual([...new Set(operationIds)].sort());
  });

  it('gives each operation a method in all three languages, or a reason to leave it out', () => {
    for (const [operationId, entry] of Object.entries(surface.operations)) {
      if ('excluded' in entry) expect(entry.excluded.length, operationId).toBeGreaterThan(20);
      else for (const language of ['typescript', 'python', 'php'] as const) expect(entry[language], `${operationId} ${language}`).toMatch(/^[A-Za-z_]+\.[A-Za-z_]+$/);
    }
  });

  it('names the eager constructor and the paging of a list in all three languages, beside the operations', () => {
    expect(Object.keys(surface.library).sort()).toEqual(['create', 'paging']);
    for (const [name, entry] of Object.entries(surface.library)) {
      expect('excluded' in entry, name).toBe(false);
      for (const language of ['typescript', 'python', 'php'] as const) expect((entry as Record<string, string>)[language], `${name} ${language}`).toMatch(/^[A-Za-z_]+\.[A-Za-z_]+$/);
    }
    expect(surface.library.create).toEqual({ typescript: 'Pont.create', python: 'Pont.create', php: 'Pont.create' });
  });
});
