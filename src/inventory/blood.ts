import type { BiologicallyDerivedProduct } from '@medplum/fhirtypes';
import type { Database, Queryable } from '../db/database';
import { periodicJob, type BackgroundWorker } from '../jobs';
import type { Logger } from '../log';
import type { DerivedTable, FhirRepository } from '../fhir/repository';
import { badRequest } from '../core/errors';
import type { MappingSet } from '../mapping/index';
import { facilityIn } from './facility';

export const BLOOD_GROUPS = ['A+', 'A-', 'B+', 'B-', 'AB+', 'AB-', 'O+', 'O-'] as const;
export const BLOOD_COMPONENTS = ['whole_blood', 'packed_red_cells', 'platelets', 'plasma', 'cryoprecipitate'] as const;
const COMPONENT_SYSTEM = 'https://pont.health/fhir/CodeSystem/blood-component';
const BLOOD_GROUP_URL = 'https://pont.health/fhir/StructureDefinition/blood-group';
/** Units expiring within this many days are counted apart (also written in migration 016's trigger). */
export const EXPIRING_DAYS = 7;

/** A BiologicallyDerivedProduct is a blood-bank unit when it carries a blood group or a blood component. */
const isBloodUnit = (p: BiologicallyDerivedProduct) =>
  (p.extension ?? []).some((e) => e.url === BLOOD_GROUP_URL) || (p.productCode?.coding ?? []).some((c) => c.system === COMPONENT_SYSTEM);

/**
 * The blood-bank units table (blood_units), following BiologicallyDerivedProduct writes of every path (FHIR,
 * Bridge sync, the demo). A unit whose group, component, facility or expiry cannot be read is refused (400),
 * so the inventory never silently misses one.
 */
export function bloodUnitsTable(mappings: MappingSet): DerivedTable {
  return {
    resourceType: 'BiologicallyDerivedProduct',
    facilityOf: (r) => (isBloodUnit(r as BiologicallyDerivedProduct) ? facilityIn(mappings.get('blood-unit').readFhir(r).connect) : undefined),
    async sync(sql: Queryable, changes) {
      const removed: string[] = [];
      const kept = new Map<string, unknown[]>(); // by unit id: the last write of a unit wins
      for (const change of changes) {
        const product = change.resource as BiologicallyDerivedProduct;
        if (change.method === 'DELETE' || !isBloodUnit(product)) {
          removed.push(product.id!);
          continue;
        }
        const { connect: unit, unread } = mappings.get('blood-unit').readFhir(product);
        const missing = ['facility_id', 'blood_group', 'component', 'status', 'expires_at'].filter((f) => unit[f] == null || unread.includes(f));
        if (!(BLOOD_GROUPS as readonly unknown[]).includes(unit.blood_group)) missing.push('blood_group');
        if (!(BLOOD_COMPONENTS as readonly unknown[]).includes(unit.component)) missing.push('component');
        if (missing.length)
          throw badRequest(
            `BiologicallyDerivedProduct/${product.id} is a blood-bank unit without a valid ${[...new Set(missing)].join(', ')} (mappings/blood-unit.map.yaml: groups ${BLOOD_GROUPS.join(' ')}; components ${BLOOD_COMPONENTS.join(' ')})`,
          );
        kept.set(product.id!, [product.id, unit.facility_id, unit.blood_group, unit.component, unit.status === 'available', unit.units ?? 1, unit.expires_at]);
      }
      if (removed.length) await sql.query('DELETE FROM blood_units WHERE unit_id = ANY($1::text[])', [removed]);
      // One statement for all the units: the trigger then updates each stock line once (migration 016).
      const units = [...kept.values()];
      if (units.length)
        await sql.query(
          `INSERT INTO blood_units (unit_id, facility_id, blood_group, component, available, units, expires_at, updated_at)
           SELECT u.*, now() FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::boolean[], $6::int[], $7::timestamptz[]) AS u
           ON CONFLICT (unit_id) DO UPDATE SET facility_id = EXCLUDED.facility_id, blood_group = EXCLUDED.blood_group, component = EXCLUDED.component,
             available = EXCLUDED.available, units = EXCLUDED.units, expires_at = EXCLUDED.expires_at, updated_at = now()`,
          [0, 1, 2, 3, 4, 5, 6].map((k) => units.map((u) => u[k])),
        );
    },
    async purge(sql: Queryable, ids) {
      await sql.query('DELETE FROM blood_units WHERE unit_id = ANY($1::text[])', [ids]);
    },
  };
}

export interface BloodInventoryItem {
  facility_id: string;
  blood_group: string;
  component: string;
  units_available: number;
  units_expiring_within_7_days: number;
  updated_at: string;
}

/** Available units whose expiry lies between `from` and `to` (the clock and now), and those entering the 7-day window. */
const CROSSINGS = (from: string, to: string, filters: string) => `
  SELECT facility_id, blood_group, component,
         coalesce(sum(units) FILTER (WHERE expires_at > ${from} AND expires_at <= ${to}), 0) AS expired,
         coalesce(sum(units) FILTER (WHERE expires_at > ${from} + interval '${EXPIRING_DAYS} days' AND expires_at <= ${to} + interval '${EXPIRING_DAYS} days'), 0) AS entering
    FROM blood_units
   WHERE available AND (expires_at > ${from} AND expires_at <= ${to} OR expires_at > ${from} + interval '${EXPIRING_DAYS} days' AND expires_at <= ${to} + interval '${EXPIRING_DAYS} days')${filters}
   GROUP BY 1, 2, 3`;

/**
 * The inventory: per facility, group and component, the available unexpired units and those expiring within 7 days,
 * exact as of now: the line's counts at the clock's time (migration 016), less the units that expired since, plus
 * those that came within 7 days since. A line per facility, group and component that has units, whatever their status.
 */
/** Blood-bank inventory: an aggregate, not patient data; every caller the route admits sees the network's stock. */
export function readBloodInventory(repo: FhirRepository, filter: Parameters<typeof bloodInventory>[1]): Promise<BloodInventoryItem[]> {
  return repo.readFacility(({ sql, now }) => bloodInventory(sql, filter, now));
}

export async function bloodInventory(sql: Queryable, filter: { facility_id?: string; blood_group?: string; component?: string }, now = Date.now()): Promise<BloodInventoryItem[]> {
  const where = (alias: string) =>
    ` AND ($1::text IS NULL OR ${alias}facility_id = $1) AND ($2::text IS NULL OR ${alias}blood_group = $2) AND ($3::text IS NULL OR ${alias}component = $3)`;
  // The items come as one JSON value: thousands of rows cost more to read one by one (on PGlite, several times the query).
  const { rows } = await sql.query<{ items: BloodInventoryItem[] | null }>(
    `WITH c AS (SELECT as_of FROM blood_stock_clock),
     d AS (${CROSSINGS('(SELECT as_of FROM c)', 'to_timestamp($4::float8 / 1000)', where(''))})
     SELECT json_agg(json_build_object(
              'facility_id', s.facility_id, 'blood_group', s.blood_group, 'component', s.component,
              'units_available', s.available - coalesce(d.expired, 0),
              'units_expiring_within_7_days', s.expiring - coalesce(d.expired, 0) + coalesce(d.entering, 0),
              'updated_at', to_char(s.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
            ORDER BY s.facility_id, s.blood_group, s.component) AS items
       FROM blood_stock s LEFT JOIN d USING (facility_id, blood_group, component)
      WHERE s.recorded > 0${where('s.')}`,
    [filter.facility_id ?? null, filter.blood_group ?? null, filter.component ?? null, now],
  );
  return rows[0]?.items ?? [];
}

/** How often the blood-stock clock moves to the present (an answer corrects for the time since; see bloodInventory). */
const CLOCK_MS = 60_000;

/**
 * Moves the blood-stock clock to `now` (ms since the epoch), counting the units that expired or came within 7 days
 * since it last moved. Never backwards: what expired before the clock's time is already counted.
 */
export async function moveBloodStockClock(db: Database, now = Date.now()): Promise<void> {
  await db.transaction(async (tx) => {
    const { rows } = await tx.query<{ as_of: Date }>('SELECT as_of FROM blood_stock_clock FOR UPDATE');
    const from = rows[0]!.as_of;
    const to = 'to_timestamp($2::float8 / 1000)';
    await tx.query(
      `UPDATE blood_stock s SET available = s.available - d.expired, expiring = s.expiring - d.expired + d.entering
         FROM (${CROSSINGS('$1::timestamptz', to, '')}) d
        WHERE s.facility_id = d.facility_id AND s.blood_group = d.blood_group AND s.component = d.component`,
      [from, now],
    );
    await tx.query(`UPDATE blood_stock_clock SET as_of = greatest(as_of, ${to.replace('$2', '$1')})`, [now]);
  });
}

/** The job that moves the blood-stock clock every CLOCK_MS; `now`: the service's clock (FhirService.now). */
export function bloodStockClock(db: Database, log: Logger, now: () => number = Date.now): BackgroundWorker {
  return periodicJob('blood-stock-clock', CLOCK_MS, () => moveBloodStockClock(db, now()), log);
}
