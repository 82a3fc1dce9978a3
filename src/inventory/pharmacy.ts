import { isDeepStrictEqual } from 'node:util';
import type { Medication, Resource } from '@medplum/fhirtypes';
import type { Queryable } from '../db/database';
import { uuidV5 } from '../core/hash';
import type { DerivedTable, FhirRepository } from '../fhir/repository';
import { badRequest, invalidFields } from '../core/errors';
import type { MappingSet } from '../mapping/index';
import { facilityIn } from './facility';

const ON_HAND_URL = 'https://pont.health/fhir/StructureDefinition/stock-on-hand';
const isStock = (m: Medication) => (m.extension ?? []).some((e) => e.url === ON_HAND_URL);

/** The pharmacy stock table, following Medication writes of every path (stock PUT, Bridge sync, FHIR). */
export function pharmacyStockTable(mappings: MappingSet): DerivedTable {
  return {
    resourceType: 'Medication',
    facilityOf: (r) => (isStock(r as Medication) ? facilityIn(mappings.get('pharmacy-stock').readFhir(r).connect) : undefined),
    async sync(sql: Queryable, changes) {
      for (const change of changes) {
        const medication = change.resource as Medication;
        if (change.method === 'DELETE' || !isStock(medication)) {
          await sql.query('DELETE FROM pharmacy_stock WHERE medication_id = $1', [medication.id]);
          continue;
        }
        const { connect: s, unread } = mappings.get('pharmacy-stock').readFhir(medication);
        const missing = ['facility_id', 'code', 'code_system', 'quantity'].filter((f) => s[f] == null || unread.includes(f));
        if (typeof s.quantity === 'number' && s.quantity < 0) missing.push('quantity (negative)');
        if (typeof s.reorder_level === 'number' && s.reorder_level < 0) missing.push('reorder_level (negative)');
        if (missing.length) throw badRequest(`Medication/${medication.id} is pharmacy stock without a valid ${missing.join(', ')} (mappings/pharmacy-stock.map.yaml)`);
        await sql.query(
          `INSERT INTO pharmacy_stock (medication_id, facility_id, code_system, code, display, lot, expires_on, quantity, unit, reorder_level, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now())
           ON CONFLICT (medication_id) DO UPDATE SET facility_id = $2, code_system = $3, code = $4, display = $5, lot = $6, expires_on = $7,
             quantity = $8, unit = $9, reorder_level = $10, updated_at = now()`,
          [medication.id, s.facility_id, s.code_system, s.code, s.display, s.lot, s.expires_on, s.quantity, s.unit, s.reorder_level],
        );
      }
    },
    async purge(sql: Queryable, ids) {
      await sql.query('DELETE FROM pharmacy_stock WHERE medication_id = ANY($1::text[])', [ids]);
    },
  };
}

export interface StockMedication {
  code: string;
  code_system: string;
  display?: string | null;
}

export interface StockLine {
  medication: StockMedication;
  quantity_on_hand: number;
  unit?: string | null;
  reorder_level?: number | null;
  batches?: Array<{ lot: string; expires_on?: string | null; quantity: number }>;
}

/** Pont's id of a batch's Medication: the same for the same facility, medication and lot. */
const stockId = (facilityId: string, m: StockMedication, lot: string | null) => uuidV5('pharmacy-stock', [facilityId, m.code_system, m.code, lot ?? ''].join('\u0000'));

const comparable = (r: Resource) => JSON.parse(JSON.stringify({ ...r, meta: { ...r.meta, versionId: undefined, lastUpdated: undefined } }));

/**
 * PUT /api/v1/connect/pharmacy/stock: each line replaces that medication's stock at the facility (its batches;
 * batches no longer listed are removed), in one transaction. Applying the same levels again changes nothing.
 */
export async function putStock(repo: FhirRepository, mappings: MappingSet, facilityId: string, lines: StockLine[]) {
  const problems: Array<{ field: string; message: string }> = [];
  const seen = new Set<string>();
  lines.forEach((line, i) => {
    const key = `${line.medication.code_system}|${line.medication.code}`;
    if (seen.has(key)) problems.push({ field: `body.items.${i}.medication`, message: 'listed twice' });
    seen.add(key);
    const batches = line.batches ?? [];
    if (batches.length && batches.reduce((s, b) => s + b.quantity, 0) !== line.quantity_on_hand)
      problems.push({ field: `body.items.${i}.quantity_on_hand`, message: 'must equal the sum of the batches\' quantities' });
    if (new Set(batches.map((b) => b.lot)).size !== batches.length) problems.push({ field: `body.items.${i}.batches`, message: 'a lot is listed twice' });
  });
  if (problems.length) throw invalidFields(problems);
  const map = mappings.get('pharmacy-stock');
  return repo.transaction(async (sql) => {
    const counts = { created: 0, changed: 0, unchanged: 0 };
    const writes: Array<{ resource: Resource; method: 'PUT' | 'DELETE' }> = [];
    for (const line of lines) {
      const m = line.medication;
      const wanted = (line.batches?.length ? line.batches : [{ lot: null, expires_on: null, quantity: line.quantity_on_hand }]).map((b) =>
        map.toFhir({
          id: stockId(facilityId, m, b.lot),
          facility_id: facilityId,
          code: m.code,
          code_system: m.code_system,
          display: m.display ?? null,
          lot: b.lot,
          expires_on: b.expires_on ?? null,
          quantity: b.quantity,
          unit: line.unit ?? null,
          reorder_level: line.reorder_level ?? null,
        }),
      );
      const { rows } = await sql.query<{ id: string; content: Resource }>(
        `SELECT r.id, r.content FROM pharmacy_stock s JOIN fhir_resources r ON r.resource_type = 'Medication' AND r.id = s.medication_id AND NOT r.deleted
          WHERE s.facility_id = $1 AND s.code_system = $2 AND s.code = $3`,
        [facilityId, m.code_system, m.code],
      );
      const current = new Map(rows.map((r) => [r.id, r.content]));
      const changedHere = wanted.filter((w) => !current.has(w.id!) || !isDeepStrictEqual(comparable(current.get(w.id!)!), comparable(w)));
      const gone = [...current.keys()].filter((id) => !wanted.some((w) => w.id === id));
      writes.push(...changedHere.map((resource) => ({ resource, method: 'PUT' as const })));
      writes.push(...gone.map((id) => ({ resource: { resourceType: 'Medication', id } as Resource, method: 'DELETE' as const })));
      if (!current.size) counts.created++;
      else if (changedHere.length || gone.length) counts.changed++;
      else counts.unchanged++;
    }
    if (writes.length) await repo.writeItems(writes, 'putPharmacyStock');
    return { facility_id: facilityId, lines: lines.length, ...counts };
  });
}

/** GET /api/v1/connect/pharmacy/stock: stock lines (one per facility and medication), with their batches. */
/** Pharmacy stock lines: not patient data, every caller the route admits sees the network's stock. */
export function readStockLines(repo: FhirRepository, filter: Parameters<typeof stockLines>[1]): ReturnType<typeof stockLines> {
  return repo.readFacility(({ sql }) => stockLines(sql, filter));
}

export async function stockLines(sql: Queryable, filter: { facility_id?: string; medication?: string; below_reorder_level?: boolean; limit: number; offset: number }) {
  const { rows } = await sql.query<{
    facility_id: string;
    code_system: string;
    code: string;
    display: string | null;
    quantity: string;
    unit: string | null;
    reorder_level: string | null;
    batches: Array<{ lot: string; expires_on: string | null; quantity: number }>;
    updated_at: Date | string;
    more: boolean;
  }>(
    `WITH line AS (
       SELECT facility_id, code_system, code, max(display) AS display, sum(quantity) AS quantity, max(unit) AS unit, max(reorder_level) AS reorder_level,
              coalesce(jsonb_agg(jsonb_build_object('lot', lot, 'expires_on', expires_on, 'quantity', quantity) ORDER BY expires_on NULLS LAST, lot) FILTER (WHERE lot IS NOT NULL), '[]') AS batches,
              max(updated_at) AS updated_at
         FROM pharmacy_stock
        WHERE ($1::text IS NULL OR facility_id = $1)
          AND ($2::text IS NULL OR code = $2 OR display ILIKE '%' || $2 || '%')
        GROUP BY facility_id, code_system, code)
     SELECT * FROM line WHERE NOT $3::boolean OR (reorder_level IS NOT NULL AND quantity < reorder_level)
      ORDER BY facility_id, code_system, code LIMIT $4 OFFSET $5`,
    [filter.facility_id ?? null, filter.medication ?? null, filter.below_reorder_level ?? false, filter.limit + 1, filter.offset],
  );
  const items = rows.slice(0, filter.limit).map((r) => ({
    facility_id: r.facility_id,
    medication: { code: r.code, code_system: r.code_system, display: r.display },
    quantity_on_hand: Number(r.quantity),
    unit: r.unit,
    reorder_level: r.reorder_level === null ? null : Number(r.reorder_level),
    batches: r.batches.map((b) => ({ lot: b.lot, expires_on: b.expires_on, quantity: Number(b.quantity) })),
    updated_at: new Date(r.updated_at).toISOString(),
  }));
  return { items, next_offset: rows.length > filter.limit ? filter.offset + filter.limit : null };
}
