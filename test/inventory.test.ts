import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgent } from '../src/auth/agents';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/** Facility data: the blood-bank inventory against totals computed independently from the same units. */
let pont: TestServer;
let reader: TestClient;
let writer: TestClient;

const GROUPS = ['A+', 'A-', 'B+', 'B-', 'AB+', 'AB-', 'O+', 'O-'];
const COMPONENTS = ['whole_blood', 'packed_red_cells', 'platelets', 'plasma', 'cryoprecipitate'];
const DAY = 86_400_000;

interface Unit {
  id: string;
  facility: string;
  group: string;
  component: string;
  available: boolean;
  units: number;
  expires: number;
}

const unitResource = (u: Unit) => ({
  resourceType: 'BiologicallyDerivedProduct',
  id: u.id,
  meta: { tag: [{ system: 'https://pont.health/fhir/CodeSystem/facility', code: u.facility }] },
  extension: [{ url: 'https://pont.health/fhir/StructureDefinition/blood-group', valueCode: u.group }],
  productCategory: 'fluid',
  productCode: { coding: [{ system: 'https://pont.health/fhir/CodeSystem/blood-component', code: u.component }] },
  status: u.available ? 'available' : 'unavailable',
  quantity: u.units,
  storage: [{ duration: { end: new Date(u.expires).toISOString() } }],
});

let units: Unit[] = [];

beforeAll(async () => {
  pont = await startTestServer();
  reader = await createTestClient(pont, ['blood:inventory:read'], { organizationId: 'org-reader' });
  writer = await createTestClient(pont, ['fhir:write', 'fhir:read'], { organizationId: 'org-bank', allPatients: true });
  // A seeded spread of units over 3 facilities: some issued, some expired, some expiring soon, some later.
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const now = Date.now();
  units = Array.from({ length: 240 }, (_, i) => ({
    id: `unit-${i}`,
    facility: `fac-${i % 3}`,
    group: GROUPS[Math.floor(rnd() * GROUPS.length)]!,
    component: COMPONENTS[Math.floor(rnd() * COMPONENTS.length)]!,
    available: rnd() > 0.2,
    units: 1 + Math.floor(rnd() * 3),
    expires: now + Math.floor((rnd() * 40 - 5) * DAY), // -5 .. +35 days
  }));
  // Two facilities through their Bridge agent, one through FHIR.
  for (const facility of ['fac-0', 'fac-1']) {
    const agent = await createAgent(pont.services.db, { organizationId: 'org-bank', facilityId: facility });
    const res = await pont.json('/api/v1/bridge/sync', {
      method: 'POST',
      headers: { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)) },
      json: { batch_id: `units-${facility}`, resources: units.filter((u) => u.facility === facility).map(unitResource) },
    });
    expect(res.status).toBe(200);
    expect(res.body.counts.failed).toBe(0);
  }
  for (const u of units.filter((x) => x.facility === 'fac-2')) {
    const res = await pont.json('/api/fhir/R4/BiologicallyDerivedProduct', { method: 'POST', headers: writer.headers, json: { ...unitResource(u), id: undefined } });
    expect(res.status).toBe(201);
  }
});
afterAll(async () => {
  await pont?.close();
});

const inventory = (query = '') => pont.json(`/api/v1/connect/blood-bank/inventory${query}`, { headers: reader.headers });

/** The independent reading: the same totals from the units as written. */
function expected(filter: (u: Unit) => boolean) {
  const now = Date.now();
  const lines = new Map<string, { available: number; expiring: number }>();
  for (const u of units.filter(filter)) {
    const key = `${u.facility}|${u.group}|${u.component}`;
    const line = lines.get(key) ?? { available: 0, expiring: 0 };
    if (u.available && u.expires > now) {
      line.available += u.units;
      if (u.expires <= now + 7 * DAY) line.expiring += u.units;
    }
    lines.set(key, line);
  }
  return [...lines].map(([k, v]) => `${k}|${v.available}|${v.expiring}`).sort();
}
const got = (items: any[]) => items.map((i) => `${i.facility_id}|${i.blood_group}|${i.component}|${i.units_available}|${i.units_expiring_within_7_days}`).sort();

describe('blood-bank inventory', () => {
  it('equals the totals computed from the units, for the network and for each filter', async () => {
    expect(got((await inventory()).body.items)).toEqual(expected(() => true));
    expect(got((await inventory('?facility_id=fac-1')).body.items)).toEqual(expected((u) => u.facility === 'fac-1'));
    expect(got((await inventory(`?blood_group=${encodeURIComponent('O-')}`)).body.items)).toEqual(expected((u) => u.group === 'O-'));
    expect(got((await inventory('?component=platelets&facility_id=fac-2')).body.items)).toEqual(expected((u) => u.component === 'platelets' && u.facility === 'fac-2'));
  });

  it('follows changes: a unit issued leaves the count', async () => {
    const unit = units.find((u) => u.facility === 'fac-2' && u.available && u.expires > Date.now() + DAY)!;
    const search = await pont.json(`/api/fhir/R4/BiologicallyDerivedProduct?_tag=https://pont.health/fhir/CodeSystem/facility|fac-2&_count=200`, { headers: writer.headers });
    const stored = search.body.entry.map((e: any) => e.resource).find((r: any) => r.quantity === unit.units && r.storage[0].duration.end === new Date(unit.expires).toISOString());
    const issued = await pont.json(`/api/fhir/R4/BiologicallyDerivedProduct/${stored.id}`, { method: 'PUT', headers: writer.headers, json: { ...stored, status: 'unavailable' } });
    expect(issued.status).toBe(200);
    unit.available = false;
    expect(got((await inventory('?facility_id=fac-2')).body.items)).toEqual(expected((u) => u.facility === 'fac-2'));
  });

  it('refuses unknown groups and components (422), and a unit it could not count (400)', async () => {
    expect((await inventory('?blood_group=C%2B')).status).toBe(422);
    expect((await inventory('?component=blood')).status).toBe(422);
    const bogus = { ...unitResource({ ...units[0]!, group: 'Z+' }), id: undefined };
    const res = await pont.json('/api/fhir/R4/BiologicallyDerivedProduct', { method: 'POST', headers: writer.headers, json: bogus });
    expect(res.status).toBe(400);
    expect(res.body.issue[0].diagnostics).toMatch(/blood_group/);
  });

  it('needs blood:inventory:read', async () => {
    const other = await createTestClient(pont, ['patients:read'], { organizationId: 'org-other' });
    expect((await pont.json('/api/v1/connect/blood-bank/inventory', { headers: other.headers })).status).toBe(403);
  });
});
