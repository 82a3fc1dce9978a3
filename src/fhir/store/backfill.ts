import type { Patient, Resource } from '@medplum/fhirtypes';
import type { Database } from '../../db/database';
import { MATCH_RULE_VERSION } from '../../healthid/matching';
import { updateMatchKey } from '../../healthid/registry';
import { accessPatients, linksOf } from '../compartment';
import type { FhirService } from '../service';
import { insertIndexRows } from './writes';

const BATCH = 500;

/**
 * Brings data written before the repository (migration 006) up to what it maintains on every write:
 * the access columns and links of each resource, a Health ID for every Patient, match keys under the
 * current rule. Idempotent and cheap when there is nothing to do; run at start, after the migrations.
 * Returns how many rows it touched.
 */
export async function backfill(db: Database, fhir: FhirService): Promise<number> {
  let touched = 0;
  const base = fhir.baseUrl;
  for (;;) {
    const n = await db.transaction(async (tx) => {
      const { rows } = await tx.query<{ rid: string; deleted: boolean; content: Resource | null }>(
        // A deleted resource is filed under the patients of its last version.
        `SELECT r.rid, r.deleted, COALESCE(r.content, (SELECT v.content FROM fhir_resource_versions v WHERE v.rid = r.rid AND v.content IS NOT NULL
           ORDER BY v.version_id DESC LIMIT 1)) AS content FROM fhir_resources r WHERE r.patients IS NULL ORDER BY r.rid LIMIT $1 FOR UPDATE OF r`,
        [BATCH],
      );
      if (!rows.length) return 0;
      const live = rows.filter((r) => !r.deleted && r.content);
      await tx.query(
        `UPDATE fhir_resources r SET patients = ARRAY(SELECT jsonb_array_elements_text(u.p::jsonb))
         FROM unnest($1::bigint[], $2::text[]) AS u(rid, p) WHERE r.rid = u.rid`,
        [rows.map((r) => r.rid), rows.map((r) => JSON.stringify(r.content ? accessPatients(r.content, base) : []))],
      );
      await insertIndexRows(tx, live.map((r) => ({ rid: r.rid, rows: { token: [], string: [], date: [], number: [], quantity: [], reference: [], uri: [] }, links: linksOf(r.content!, base).links })));
      return rows.length;
    });
    touched += n;
    if (n < BATCH) break;
  }
  // Patients stored before Health IDs followed every write: issue theirs through the repository.
  const repo = fhir.system('upgrade');
  for (;;) {
    const { rows } = await db.query<{ content: Patient }>(
      `SELECT r.content FROM fhir_resources r WHERE r.resource_type = 'Patient' AND NOT r.deleted
       AND NOT EXISTS (SELECT 1 FROM health_ids h WHERE h.patient_id = r.id) LIMIT $1`,
      [BATCH],
    );
    if (!rows.length) break;
    await repo.transaction(() => repo.writeItems(rows.map((r) => ({ resource: r.content, method: 'PUT' as const })), 'upgrade', { deferReferenceCheck: true }));
    touched += rows.length;
  }
  // Match keys of an earlier rule.
  for (;;) {
    const n = await db.transaction(async (tx) => {
      const { rows } = await tx.query<{ patient_id: string; content: Patient }>(
        `SELECT h.patient_id, r.content FROM health_ids h JOIN fhir_resources r ON r.resource_type = 'Patient' AND r.id = h.patient_id
         WHERE h.match_key_version < $1 AND NOT r.deleted LIMIT $2`,
        [MATCH_RULE_VERSION, BATCH],
      );
      for (const row of rows) await updateMatchKey(tx, row.patient_id, fhir.matchKeyOf(row.content));
      return rows.length;
    });
    touched += n;
    if (n < BATCH) break;
  }
  return touched;
}
