import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgent } from '../src/auth/agents';
import { moveBloodStockClock } from '../src/inventory/blood';
import { createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/** Facility data: the blood-bank inventory against totals computed independently from the same units. */
let pont: TestServer;
let reader: TestClient;
let writer: TestClient;

const GROUPS = ['A+', 'A-', 'B+', 'B-', 'AB+', 'AB-', 'O+', 'O-'];
const COMPONENTS = ['whole_blood', 'packed_red_cells', 'platelets', 'plasma', 'cryoprecipitate'];
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

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

/** The independent reading: the same totals from the units as written, at `now`. */
function expected(filter: (u: Unit) => boolean, now = Date.now()) {
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
    // A unit deleted leaves the count too.
    const other = units.find((u) => u.facility === 'fac-2' && u.available && u.expires > Date.now() + DAY && u !== unit)!;
    const gone = search.body.entry.map((e: any) => e.resource).find((r: any) => r.quantity === other.units && r.storage[0].duration.end === new Date(other.expires).toISOString());
    expect((await pont.json(`/api/fhir/R4/BiologicallyDerivedProduct/${gone.id}`, { method: 'DELETE', headers: writer.headers })).status).toBe(204);
    units.splice(units.indexOf(other), 1);
    expect(got((await inventory('?facility_id=fac-2')).body.items)).toEqual(expected((u) => u.facility === 'fac-2'));
  });

  it('follows a Bridge batch that changes many units at once', async () => {
    const agent = await createAgent(pont.services.db, { organizationId: 'org-bank', facilityId: 'fac-0' });
    const changed = units.filter((u) => u.facility === 'fac-0');
    for (const [i, u] of changed.entries()) {
      u.available = !u.available;
      if (i % 3 === 0) u.group = 'AB-';
      if (i % 4 === 0) u.units += 1;
    }
    const res = await pont.json('/api/v1/bridge/sync', {
      method: 'POST',
      headers: { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)) },
      json: { batch_id: 'units-fac-0-again', resources: changed.map(unitResource) },
    });
    expect(res.status).toBe(200);
    expect(res.body.counts.updated).toBe(changed.length);
    expect(got((await inventory('?facility_id=fac-0')).body.items)).toEqual(expected((u) => u.facility === 'fac-0'));
    expect(got((await inventory()).body.items)).toEqual(expected(() => true));
  });

  it('stays exact as time passes, before and after the stock clock moves: units expire, others come within 7 days', async () => {
    // fac-3 only: two units that cross a boundary within the next hour.
    const soon = Date.now() + HOUR;
    const add = [
      { id: 'unit-expiring', facility: 'fac-3', group: 'A+', component: 'plasma', available: true, units: 2, expires: soon },
      { id: 'unit-entering', facility: 'fac-3', group: 'A+', component: 'plasma', available: true, units: 3, expires: soon + 7 * DAY },
    ];
    for (const u of add) {
      const res = await pont.json('/api/fhir/R4/BiologicallyDerivedProduct', { method: 'POST', headers: writer.headers, json: { ...unitResource(u), id: undefined } });
      expect(res.status).toBe(201);
      units.push(u);
    }
    const fac3 = () => inventory('?facility_id=fac-3').then((r) => got(r.body.items));
    expect(await fac3()).toEqual(['fac-3|A+|plasma|5|2']);
    const later = Date.now() + 2 * HOUR;
    pont.services.fhir.now = () => later; // two hours pass (the service's clock; the rest of this file is later)
    expect(await fac3()).toEqual(expected((u) => u.facility === 'fac-3', later));
    expect(await fac3()).toEqual(['fac-3|A+|plasma|3|3']);
    await moveBloodStockClock(pont.services.db, later);
    expect(await fac3()).toEqual(['fac-3|A+|plasma|3|3']);
    expect(got((await inventory()).body.items)).toEqual(expected(() => true, later));
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

describe('payment reconciliation', () => {
  interface Pay {
    facility: string;
    method: string;
    amount: number;
    currency: string;
    due?: number;
    reference?: string;
    status: string;
    at: string;
  }
  const pays: Pay[] = [
    // 2026-11-21 in Douala (UTC+1) runs from 2026-11-20T23:00Z to 2026-11-21T23:00Z.
    { facility: 'fac-0', method: 'cash', amount: 2500, currency: 'XAF', due: 2500, status: 'active', at: '2026-11-20T23:30:00Z' },
    { facility: 'fac-0', method: 'mobile_money', amount: 15000, currency: 'XAF', due: 15000, reference: 'MP-1', status: 'active', at: '2026-11-21T09:00:00Z' },
    { facility: 'fac-0', method: 'mobile_money', amount: 9000, currency: 'XAF', due: 10000, reference: 'MP-2', status: 'active', at: '2026-11-21T10:00:00Z' },
    { facility: 'fac-1', method: 'card', amount: 40.5, currency: 'EUR', due: 40.5, status: 'active', at: '2026-11-21T12:00:00Z' },
    { facility: 'fac-1', method: 'insurance', amount: 30000, currency: 'XAF', due: 30000, reference: 'INS-9', status: 'cancelled', at: '2026-11-21T13:00:00Z' },
    { facility: 'fac-1', method: 'cash', amount: 1000, currency: 'XAF', status: 'active', at: '2026-11-21T22:59:59Z' },
    // The next local day, and the day before.
    { facility: 'fac-0', method: 'cash', amount: 700, currency: 'XAF', status: 'active', at: '2026-11-21T23:00:00Z' },
    { facility: 'fac-0', method: 'cash', amount: 800, currency: 'XAF', status: 'active', at: '2026-11-20T22:59:59Z' },
  ];
  const resourceOf = (p: Pay) => ({
    resourceType: 'PaymentReconciliation',
    meta: { tag: [{ system: 'https://pont.health/fhir/CodeSystem/facility', code: p.facility }] },
    status: p.status,
    created: p.at,
    paymentDate: p.at.slice(0, 10),
    paymentAmount: { value: p.amount, currency: p.currency },
    ...(p.reference ? { paymentIdentifier: { value: p.reference } } : {}),
    detail: [{ type: { coding: [{ system: 'https://pont.health/fhir/CodeSystem/payment-method', code: p.method }] }, ...(p.due !== undefined ? { amount: { value: p.due, currency: p.currency } } : {}) }],
  });
  let accountant: TestClient;

  beforeAll(async () => {
    for (const p of pays) {
      const res = await pont.json('/api/fhir/R4/PaymentReconciliation', { method: 'POST', headers: writer.headers, json: resourceOf(p) });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
    }
    accountant = await createTestClient(pont, ['payments:read'], { organizationId: 'org-bank' });
  });

  it("lists the day's payments in the facility's time zone, with totals and the ones that do not reconcile", async () => {
    const res = await pont.json('/api/v1/connect/payments/reconciliation?date=2026-11-21', { headers: accountant.headers });
    expect(res.status).toBe(200);
    expect(res.body.time_zone).toBe('Africa/Douala');
    const day = pays.slice(0, 6);
    expect(res.body.payments.map((p: any) => p.paid_at)).toEqual(day.map((p) => new Date(p.at).toISOString()));
    // Independent totals of the active payments.
    const active = day.filter((p) => p.status === 'active');
    const byCurrency = new Map<string, number>();
    for (const p of active) byCurrency.set(p.currency, (byCurrency.get(p.currency) ?? 0) + p.amount);
    expect(Object.fromEntries(res.body.totals.by_currency.map((t: any) => [t.currency, t.amount]))).toEqual(Object.fromEntries(byCurrency));
    expect(res.body.totals.by_method.find((t: any) => t.method === 'mobile_money')).toEqual({ method: 'mobile_money', currency: 'XAF', count: 2, amount: 24000 });
    const problems = Object.fromEntries(res.body.payments.filter((p: any) => !p.reconciled).map((p: any) => [p.reference ?? p.method, p.problems]));
    expect(problems).toEqual({ 'MP-2': ['amount_mismatch'], card: ['missing_reference'] });
    expect(res.body.unreconciled).toBe(2);
  });

  it('filters by facility and honours another time zone', async () => {
    const fac = await pont.json('/api/v1/connect/payments/reconciliation?date=2026-11-21&facility_id=fac-1', { headers: accountant.headers });
    expect(fac.body.payments).toHaveLength(3);
    const utc = await pont.json('/api/v1/connect/payments/reconciliation?date=2026-11-21&time_zone=UTC', { headers: accountant.headers });
    expect(utc.body.payments.map((p: any) => p.paid_at)).toEqual(pays.filter((p) => p.at.startsWith('2026-11-21')).map((p) => new Date(p.at).toISOString()).sort());
  });

  it("shows nothing of another organisation's payments", async () => {
    const stranger = await createTestClient(pont, ['payments:read'], { organizationId: 'org-stranger' });
    expect((await pont.json('/api/v1/connect/payments/reconciliation?date=2026-11-21', { headers: stranger.headers })).body.payments).toEqual([]);
  });

  it('refuses impossible dates, unknown zones, non-ISO currencies and negative amounts', async () => {
    for (const q of ['date=2026-02-30', 'date=0000-01-01', 'date=yesterday', 'date=2026-11-21&time_zone=Mars/Olympus', '']) {
      expect((await pont.json(`/api/v1/connect/payments/reconciliation?${q}`, { headers: accountant.headers })).status, q).toBe(422);
    }
    for (const bad of [{ ...pays[0]!, currency: 'XXY' }, { ...pays[0]!, amount: -5 }, { ...pays[0]!, method: 'barter' }]) {
      const res = await pont.json('/api/fhir/R4/PaymentReconciliation', { method: 'POST', headers: writer.headers, json: resourceOf(bad) });
      expect(res.status, JSON.stringify(bad)).toBe(400);
    }
  });
});

describe('pharmacy stock', () => {
  let pharmacy: TestClient;
  let viewer: TestClient;
  const RX = 'http://www.nlm.nih.gov/research/umls/rxnorm';
  const amoxicillin = { code: '308182', code_system: RX, display: 'Amoxicillin 250 MG Oral Capsule' };
  const paracetamol = { code: '198440', code_system: RX, display: 'Acetaminophen 500 MG Oral Tablet' };
  const put = (client: TestClient, body: unknown) => pont.json('/api/v1/connect/pharmacy/stock', { method: 'PUT', headers: client.headers, json: body });
  const get = (query = '') => pont.json(`/api/v1/connect/pharmacy/stock${query}`, { headers: viewer.headers });
  const levels = {
    facility_id: 'fac-pharm',
    items: [
      { medication: amoxicillin, quantity_on_hand: 400, unit: 'capsules', reorder_level: 200, batches: [{ lot: 'A1', expires_on: '2027-06-30', quantity: 300 }, { lot: 'A2', expires_on: '2027-01-31', quantity: 100 }] },
      { medication: paracetamol, quantity_on_hand: 50, unit: 'tablets', reorder_level: 100 },
    ],
  };

  beforeAll(async () => {
    pharmacy = await createTestClient(pont, ['pharmacy:write'], { organizationId: 'org-pharm', facilityId: 'fac-pharm' });
    viewer = await createTestClient(pont, ['pharmacy:stock:read'], { organizationId: 'org-viewer' });
  });

  it('stores a facility\'s levels in bulk and answers them by facility, medication and reorder level', async () => {
    const first = await put(pharmacy, levels);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toEqual({ facility_id: 'fac-pharm', lines: 2, created: 2, changed: 0, unchanged: 0 });
    const all = await get('?facility_id=fac-pharm');
    expect(all.body.items).toHaveLength(2);
    const amox = all.body.items.find((i: any) => i.medication.code === '308182');
    expect(amox).toMatchObject({ facility_id: 'fac-pharm', medication: amoxicillin, quantity_on_hand: 400, unit: 'capsules', reorder_level: 200 });
    expect(amox.batches).toEqual([{ lot: 'A2', expires_on: '2027-01-31', quantity: 100 }, { lot: 'A1', expires_on: '2027-06-30', quantity: 300 }]);
    expect((await get('?below_reorder_level=true')).body.items.map((i: any) => i.medication.code)).toEqual(['198440']);
    expect((await get('?medication=amoxi')).body.items.map((i: any) => i.medication.code)).toEqual(['308182']);
  });

  it('is idempotent: the same levels again change nothing; a change replaces the line\'s batches', async () => {
    const again = await put(pharmacy, levels);
    expect(again.body).toMatchObject({ created: 0, changed: 0, unchanged: 2 });
    const medications = async () => (await pont.json('/api/fhir/R4/Medication?_tag=https://pont.health/fhir/CodeSystem/facility|fac-pharm&_summary=count', { headers: writer.headers })).body.total;
    expect(await medications()).toBe(3); // two batches and one line without lots
    const used = await put(pharmacy, { facility_id: 'fac-pharm', items: [{ ...levels.items[0], quantity_on_hand: 250, batches: [{ lot: 'A1', expires_on: '2027-06-30', quantity: 250 }] }] });
    expect(used.body).toMatchObject({ created: 0, changed: 1, unchanged: 0 });
    expect(await medications()).toBe(2);
    const amox = (await get('?medication=308182')).body.items[0];
    expect(amox.quantity_on_hand).toBe(250);
    expect(amox.batches).toEqual([{ lot: 'A1', expires_on: '2027-06-30', quantity: 250 }]);
  });

  it('refuses negative quantities, impossible dates, inconsistent batches (422, every problem), and another facility (403)', async () => {
    const bad = await put(pharmacy, {
      facility_id: 'fac-pharm',
      items: [
        { medication: amoxicillin, quantity_on_hand: -1 },
        { medication: paracetamol, quantity_on_hand: 10, batches: [{ lot: 'P1', expires_on: '2027-02-30', quantity: 10 }] },
      ],
    });
    expect(bad.status).toBe(422);
    expect(bad.body.details.map((d: any) => d.field).sort()).toEqual(['body.items.0.quantity_on_hand', 'body.items.1.batches.0.expires_on']);
    const sum = await put(pharmacy, { facility_id: 'fac-pharm', items: [{ medication: amoxicillin, quantity_on_hand: 10, batches: [{ lot: 'X', quantity: 3 }] }] });
    expect(sum.status).toBe(422);
    expect((await put(pharmacy, { ...levels, facility_id: 'fac-other' })).status).toBe(403);
  });
});
