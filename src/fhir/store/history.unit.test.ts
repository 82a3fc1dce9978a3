/**
 * The statement that resolves the references a records page or a summary follows (readReferenced), as PostgreSQL is
 * given it: its text decides how soon a prepared statement of it gets a generic plan. What it finds under the access
 * rule is the integration tests' (records, any-writer, policy-doors); here, only what it asks and what it keeps.
 */
import type { Resource } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import type { Queryable } from '../../db/database';
import { sql } from '../../db/sql';
import { readReferenced } from './history';

/** readReferenced of `refs`: the statement it sent, the values bound, and what it kept of `rows` (every pair asked, found). */
async function resolve(refs: string[]): Promise<{ text: string; values: unknown[]; found: Map<string, Resource> }> {
  let text = '';
  let values: unknown[] = [];
  const q = {
    query: async (t: string, v: unknown[]) => {
      [text, values] = [t, v];
      // Every row of the VALUES list found, duplicates included, as PostgreSQL's join returns them.
      const pairs: string[] = [];
      for (let i = 0; i + 1 < v.length; i += 2) if (typeof v[i] === 'string' && typeof v[i + 1] === 'string') pairs.push(`${v[i]}/${v[i + 1]}`);
      const rows = pairs.map((p) => ({ resource_type: p.split('/')[0], id: p.split('/')[1], content: { resourceType: p.split('/')[0], id: p.split('/')[1] } }));
      return { rows, rowCount: rows.length };
    },
  } as unknown as Queryable;
  const found = await readReferenced(q, refs, () => sql`true`);
  return { text, values, found };
}

const refs = (n: number) => Array.from({ length: n }, (_, i) => `Practitioner/p${i}`);

describe('the statement resolving a page’s references', () => {
  it('has one text per power of two up to 16 references, not one per count (five texts, not sixteen)', async () => {
    const texts = new Set<string>();
    for (let n = 1; n <= 16; n++) texts.add((await resolve(refs(n))).text);
    expect(texts.size).toBe(5);
    expect((await resolve(refs(3))).text).toBe((await resolve(refs(4))).text);
    expect((await resolve(refs(5))).text).not.toBe((await resolve(refs(4))).text);
  });

  it('keeps each resource once, the padding’s repeats included, and beyond 16 binds the references as they are', async () => {
    const { found, values } = await resolve(refs(3));
    expect(values.filter((v) => v === 'p2')).toHaveLength(2);
    expect([...found.keys()]).toEqual(['Practitioner/p0', 'Practitioner/p1', 'Practitioner/p2']);
    const many = await resolve(refs(17));
    expect(many.text).toMatch(/unnest\(/);
    expect(many.text).toBe((await resolve(refs(40))).text);
  });
});
