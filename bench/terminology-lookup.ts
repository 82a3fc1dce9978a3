/**
 * What the maps' reading of the loaded terminology costs a records page (issue 46 (4), src/fhir/term/lookup.ts):
 * `npx tsx bench/terminology-lookup.ts`. A page's questions, 400 codings without a display and 200 memberOf() codes,
 * against a loaded 20,000-concept code system and a 2,000-code value set, on a scratch PostgreSQL database: answered
 * by the statement (the cache emptied of both, as a reload does) and from the process's cache. Prints p50 and p95 ms.
 */
import { openMigratedDatabase } from '../src/db/open';
import { TerminologyLoader } from '../src/fhir/term/load';
import { loadResource } from '../src/fhir/term/files';
import { TerminologyLookup } from '../src/fhir/term/lookup';
import { createScratchDatabase } from '../test/harness';
import { stats } from './stats';

const scratch = await createScratchDatabase();
const { db } = await openMigratedDatabase({ databaseUrl: scratch.url } as any);
try {
  const CS = 'http://example.org/cs';
  const concept = Array.from({ length: 20_000 }, (_, i) => ({ code: `c${i}`, display: `Concept ${i}` }));
  const loader = new TerminologyLoader(db);
  await loadResource(loader, { resourceType: 'CodeSystem', id: 'cs', url: CS, version: '1', status: 'active', content: 'complete', concept } as any);
  await loadResource(loader, { resourceType: 'ValueSet', id: 'vs', url: 'http://example.org/vs', status: 'active', compose: { include: [{ system: CS, concept: concept.slice(0, 2000).map((c) => ({ code: c.code })) }] } } as any);
  const page = (k: number) => ({
    codings: Array.from({ length: 400 }, (_, i) => ({ system: CS, code: `c${(k * 400 + i) % 20000}` })),
    members: Array.from({ length: 200 }, (_, i) => ({ valueSet: 'http://example.org/vs', system: CS, code: `c${(k * 200 + i * 7) % 20000}` })),
  });
  const lookup = new TerminologyLookup(db);
  await lookup.answers(db, page(0));
  await new Promise((r) => setTimeout(r, 500)); // listening
  await lookup.answers(db, page(0));
  const uncached: number[] = [];
  for (let k = 0; k < 60; k++) {
    // What the cache kept of the code system and value set forgotten (as a reload does), which urls are loaded kept.
    (lookup as any).cache.forget(`cs:${CS}`);
    (lookup as any).cache.forget('vs:http://example.org/vs');
    const t = performance.now();
    await lookup.answers(db, page(k));
    uncached.push(performance.now() - t);
  }
  const cached: number[] = [];
  for (let k = 0; k < 60; k++) {
    const t = performance.now();
    await lookup.answers(db, page(0));
    cached.push(performance.now() - t);
  }
  const [u, c] = [stats(uncached.slice(10)), stats(cached.slice(10))];
  console.log(JSON.stringify({ uncached: { p50: u.p50, p95: u.p95 }, cached: { p50: c.p50, p95: c.p95 } }));
} finally {
  await db.close();
  await scratch.drop();
}
process.exit(0);
