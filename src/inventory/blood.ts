import type { BiologicallyDerivedProduct } from '@medplum/fhirtypes';
import type { Queryable } from '../db/database';
import type { DerivedTable } from '../fhir/repository';
import { badRequest } from '../http/errors';
import type { MappingSet } from '../mapping/index';

export const BLOOD_GROUPS = ['A+', 'A-', 'B+', 'B-', 'AB+', 'AB-', 'O+', 'O-'] as const;
export const BLOOD_COMPONENTS = ['whole_blood', 'packed_red_cells', 'platelets', 'plasma', 'cryoprecipitate'] as const;
const COMPONENT_SYSTEM = 'https://pont.health/fhir/CodeSystem/blood-component';
const BLOOD_GROUP_URL = 'https://pont.health/fhir/StructureDefinition/blood-group';
/** Units expiring within this many days are counted apart. */
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
    async sync(sql: Queryable, changes) {
      for (const change of changes) {
        const product = change.resource as BiologicallyDerivedProduct;
        if (change.method === 'DELETE' || !isBloodUnit(product)) {
          await sql.query('DELETE FROM blood_units WHERE unit_id = $1', [product.id]);
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
        await sql.query(
          `INSERT INTO blood_units (unit_id, facility_id, blood_group, component, available, units, expires_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, now())
           ON CONFLICT (unit_id) DO UPDATE SET facility_id = $2, blood_group = $3, component = $4, available = $5, units = $6, expires_at = $7, updated_at = now()`,
          [product.id, unit.facility_id, unit.blood_group, unit.component, unit.status === 'available', unit.units ?? 1, unit.expires_at],
        );
      }
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

/** The inventory: per facility, group and component, the available unexpired units and those expiring within 7 days. */
export async function bloodInventory(sql: Queryable, filter: { facility_id?: string; blood_group?: string; component?: string }): Promise<BloodInventoryItem[]> {
  const { rows } = await sql.query<{ facility_id: string; blood_group: string; component: string; available: number; expiring: number; updated_at: Date | string }>(
    `SELECT facility_id, blood_group, component,
            coalesce(sum(units) FILTER (WHERE available AND expires_at > now()), 0)::int AS available,
            coalesce(sum(units) FILTER (WHERE available AND expires_at > now() AND expires_at <= now() + make_interval(days => $4)), 0)::int AS expiring,
            max(updated_at) AS updated_at
       FROM blood_units
      WHERE ($1::text IS NULL OR facility_id = $1) AND ($2::text IS NULL OR blood_group = $2) AND ($3::text IS NULL OR component = $3)
      GROUP BY facility_id, blood_group, component
      ORDER BY facility_id, blood_group, component`,
    [filter.facility_id ?? null, filter.blood_group ?? null, filter.component ?? null, EXPIRING_DAYS],
  );
  return rows.map((r) => ({
    facility_id: r.facility_id,
    blood_group: r.blood_group,
    component: r.component,
    units_available: r.available,
    units_expiring_within_7_days: r.expiring,
    updated_at: new Date(r.updated_at).toISOString(),
  }));
}
