/**
 * `npm run bench:inventory`: the inventory aggregates at network scale: 100 facilities × 10,000 blood units and
 * 1,000 pharmacy stock lines each (two batches per line). The rows are generated in SQL straight into the derived
 * tables the aggregates read (blood_units, pharmacy_stock): writing a million FHIR resources first would take the
 * import's time and measure nothing more here. Figures: HTTP p50/p95 per query, 200 requests each from one
 * connection of the load generator in its own process (bench/load.ts), on PGlite and PostgreSQL; written to
 * bench/results/inventory.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient } from '../src/auth/clients';
import { loadConfig } from '../src/config';
import { startPont } from '../src/server';
import { createScratchDatabase } from '../test/harness';
import { moveBloodStockClock } from '../src/inventory/blood';
import { load } from './load-client';

const FACILITIES = 100;
const UNITS_PER_FACILITY = 10_000;
const LINES_PER_FACILITY = 1_000;
const REQUESTS = 200;
const repoRoot = fileURLToPath(new URL('..', import.meta.url));

async function run(backend: 'pglite' | 'postgres') {
  const scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
  const config = loadConfig({ PORT: '0', LOG_LEVEL: 'error', PONT_RATE_LIMITS: 'default=999999999/60', ...(scratch ? { DATABASE_URL: scratch.url } : {}) });
  if (!scratch) config.dataDir = undefined;
  const pont = await startPont(config);
  try {
    const db = pont.services.db;
    const t = performance.now();
    await db.query(
      `INSERT INTO blood_units (unit_id, facility_id, blood_group, component, available, units, expires_at)
       SELECT 'u' || g, 'fac-' || (g % $1), (ARRAY['A+','A-','B+','B-','AB+','AB-','O+','O-'])[1 + (g / 7) % 8],
              (ARRAY['whole_blood','packed_red_cells','platelets','plasma','cryoprecipitate'])[1 + (g / 3) % 5],
              g % 10 <> 0, 1, now() + make_interval(days => (g % 45) - 5)
         FROM generate_series(1, $2::int) AS g`,
      [FACILITIES, FACILITIES * UNITS_PER_FACILITY],
    );
    await db.query(
      `INSERT INTO pharmacy_stock (medication_id, facility_id, code_system, code, display, lot, expires_on, quantity, unit, reorder_level)
       SELECT 'm' || g || '-' || b, 'fac-' || (g % $1), 'http://www.nlm.nih.gov/research/umls/rxnorm', (100000 + g / $1)::text,
              'Medication ' || (g / $1), 'LOT-' || b, current_date + (g % 400), (g * 7 + b) % 500, 'tablets', 200
         FROM generate_series(1, $2::int) AS g, generate_series(1, 2) AS b`,
      [FACILITIES, FACILITIES * LINES_PER_FACILITY],
    );
    await db.exec('ANALYZE blood_units; ANALYZE pharmacy_stock');
    // As the minute job would: every seeded unit expires at the time of day of the seeding, so right after it the
    // stretch between the stock clock and now holds a whole day's units (an answer reads those itself).
    await moveBloodStockClock(db);
    const seeded = (performance.now() - t) / 1000;
    const client = await createClient(db, { name: 'bench', organizationId: 'org-bench', scopes: ['blood:inventory:read', 'pharmacy:stock:read'] });
    const token = (await (await fetch(`${pont.url}/api/v1/connect/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
    })).json()) as { access_token: string };
    const headers = { authorization: `Bearer ${token.access_token}` };
    const queries: Array<[string, (i: number) => string]> = [
      ['blood, one facility', (i) => `/api/v1/connect/blood-bank/inventory?facility_id=fac-${i % FACILITIES}`],
      ['blood, one facility and group', (i) => `/api/v1/connect/blood-bank/inventory?facility_id=fac-${i % FACILITIES}&blood_group=O-`],
      ['blood, one group and component, network', () => `/api/v1/connect/blood-bank/inventory?blood_group=O-&component=platelets`],
      ['blood, whole network', () => `/api/v1/connect/blood-bank/inventory`],
      ['pharmacy, one facility, first 100 lines', (i) => `/api/v1/connect/pharmacy/stock?facility_id=fac-${i % FACILITIES}`],
      ['pharmacy, one facility, below reorder level', (i) => `/api/v1/connect/pharmacy/stock?facility_id=fac-${i % FACILITIES}&below_reorder_level=true`],
    ];
    const results = [];
    for (const [name, path] of queries) {
      const paths = Array.from({ length: REQUESTS }, (_, i) => path(i));
      let items = 0;
      for (const p of paths.slice(0, 20)) items += ((await (await fetch(pont.url + p, { headers })).json()) as { items: unknown[] }).items.length;
      const spec = { url: pont.url, paths, headers, connections: 1 };
      await load({ ...spec, amount: 20 }); // warm-up
      const s = await load({ ...spec, amount: REQUESTS });
      results.push({ name, p50: s.p50, p95: s.p95, meanItems: items / 20 });
      console.log(`${backend.padEnd(8)} ${name.padEnd(45)} p50 ${s.p50.toFixed(1)} ms  p95 ${s.p95.toFixed(1)} ms  (${(items / 20).toFixed(0)} items)`);
    }
    return { backend, seededSeconds: seeded, bloodUnits: FACILITIES * UNITS_PER_FACILITY, stockRows: FACILITIES * LINES_PER_FACILITY * 2, results };
  } finally {
    await pont.close();
    await scratch?.drop();
  }
}

async function main() {
  const out = [];
  for (const backend of ['postgres', 'pglite'] as const) out.push(await run(backend));
  mkdirSync(join(repoRoot, 'bench', 'results'), { recursive: true });
  writeFileSync(join(repoRoot, 'bench', 'results', 'inventory.json'), JSON.stringify({ at: new Date().toISOString(), node: process.version, requests: REQUESTS, results: out }, null, 2) + '\n');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
