import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { x as extract } from 'tar';
import type { Resource } from '@medplum/fhirtypes';
import { startFhirApi, type FhirTestApi } from './fhir-helpers';

// Mutated copies of real resources: each write must be stored (201) or refused (400), never a 5xx,
// and a refused one must leave no trace.
const repo = fileURLToPath(new URL('..', import.meta.url));
let api: FhirTestApi;
let samples: Resource[];

/** Deterministic pseudo-random numbers (mulberry32), so a failure can be replayed. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Long text that does not compress (PostgreSQL compresses index entries: 'x'.repeat(n) would hide a size limit). */
const incompressible = (n: number) => {
  let text = '';
  for (let i = 0; text.length < n; i++) text += createHash('sha256').update(String(i)).digest('base64').replace(/[^A-Za-z]/g, '');
  return text.slice(0, n);
};
const ODD_VALUES: unknown[] = [null, 42, -1.5e308, true, '', 'x'.repeat(5000), incompressible(8000), `https://example.org/${incompressible(6000)}`, [], {}, [[]], { a: { b: { c: [1] } } }, '2020-13-45', '\u202e\ud83d\ude00', '<script>', "'; DROP TABLE fhir_resources; --"];

function mutate(resource: Resource, rnd: () => number): Resource {
  const copy = JSON.parse(JSON.stringify(resource)) as Record<string, unknown>;
  delete copy.id;
  const paths: Array<[Record<string, unknown> | unknown[], string | number]> = [];
  const walk = (node: unknown) => {
    if (Array.isArray(node)) node.forEach((v, i) => (paths.push([node, i]), walk(v)));
    else if (node && typeof node === 'object') for (const [k, v] of Object.entries(node)) if (k !== 'resourceType') (paths.push([node as Record<string, unknown>, k]), walk(v));
  };
  walk(copy);
  const [parent, key] = paths[Math.floor(rnd() * paths.length)];
  const kind = rnd();
  if (kind < 0.6) (parent as any)[key] = ODD_VALUES[Math.floor(rnd() * ODD_VALUES.length)];
  else if (kind < 0.8 && !Array.isArray(parent)) delete (parent as any)[key];
  else if (!Array.isArray(parent)) (parent as any)[`${String(key)}Extra`] = 'unknown element';
  return copy as unknown as Resource;
}

beforeAll(async () => {
  api = await startFhirApi();
  const dir = mkdtempSync(join(tmpdir(), 'pont-fuzz-'));
  try {
    extract({ file: join(repo, 'samples/synthea-r4-50-patients.tar.gz'), cwd: dir, sync: true });
    const file = readdirSync(dir).filter((f) => f.endsWith('.json')).sort()[0];
    const bundle = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    const seen = new Set<string>();
    samples = bundle.entry.map((e: any) => e.resource).filter((r: Resource) => !seen.has(r.resourceType) && seen.add(r.resourceType));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
afterAll(async () => {
  await api?.close();
});

describe('mutated resources', () => {
  it('are stored or refused with a 400 OperationOutcome, never a 5xx, and refusals leave nothing behind', async () => {
    const rnd = random(20261121);
    let refused = 0;
    for (let i = 0; i < 150; i++) {
      const original = samples[i % samples.length];
      const resource = mutate(original, rnd);
      const before = (await api.call(`/${resource.resourceType}?_summary=count`)).body.total;
      const res = await api.call(`/${resource.resourceType}`, { method: 'POST', json: resource });
      expect([201, 400], `${i}: ${JSON.stringify(res.body).slice(0, 300)}`).toContain(res.status);
      const after = (await api.call(`/${resource.resourceType}?_summary=count`)).body.total;
      if (res.status === 400) {
        refused++;
        expect(res.body.resourceType).toBe('OperationOutcome');
        expect(after).toBe(before);
      } else {
        expect(after).toBe(before + 1);
      }
    }
    expect(refused).toBeGreaterThan(50); // the mutations do break most resources
  }, 300_000);

  it('deeply nested JSON is refused, not a crash', async () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 1000; i++) deep = { extension: [deep] };
    const res = await api.call('/Patient', { method: 'POST', json: { resourceType: 'Patient', extension: [deep] } });
    expect(res.status).toBe(400);
    expect(res.body.resourceType).toBe('OperationOutcome');
  });
});
