import type { Patient, Resource } from '@medplum/fhirtypes';
import { ApiError } from '../../core/errors';
import type { Database } from '../../db/database';
import { MATCH_RULE_VERSION } from '../../healthid/matching';
import type { Logger } from '../../log';
import { updateMatchKey } from '../../healthid/registry';
import { accessPatients, linksOf } from '../compartment';
import type { FhirService } from '../service';
import { insertIndexRows } from './writes';

const BATCH = 500;

/**
 * Brings data written before the repository (migration 006) up to what it maintains on every write:
 * the access columns and links of each resource, a Health ID for every Patient, match keys under the
 * current rule. Idempotent and cheap when there is nothing to do; run at start, after the migrations.
 * A Patient the store refuses is logged and left (it has no Health ID until corrected). Returns how many rows it touched.
 */
export async function backfill(db: Database, fhir: FhirService, log: Logger): Promise<number> {
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
  // Patients stored before Health IDs followed every write: issue theirs through the repository, in batches, in
  // the order of their ids. One the store now refuses (stored by an older version under looser rules, or by hand)
  // must not stop the start: a refused batch is written again one Patient per transaction, and the refused ones are
  // logged and left as they are. The next batch starts after the last id seen, so none is picked twice in a run.
  const repo = fhir.system('upgrade');
  const write = (patients: Patient[]) =>
    repo.transaction(() => repo.writeItems(patients.map((resource) => ({ resource, method: 'PUT' as const })), 'upgrade', { deferReferenceCheck: true }));
  for (let after = ''; ; ) {
    const { rows } = await db.query<{ id: string; content: Patient }>(
      `SELECT r.id, r.content FROM fhir_resources r WHERE r.resource_type = 'Patient' AND NOT r.deleted AND r.id > $1
       AND NOT EXISTS (SELECT 1 FROM health_ids h WHERE h.patient_id = r.id) ORDER BY r.id LIMIT $2`,
      [after, BATCH],
    );
    if (!rows.length) break;
    after = rows[rows.length - 1]!.id;
    // Written under the row's id: a content that names another id would otherwise write that one instead.
    const patients = rows.map((r) => ({ ...r.content, id: r.id }));
    try {
      await write(patients);
      touched += patients.length;
      continue;
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
    }
    for (const patient of patients)
      try {
        await write([patient]);
        touched++;
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        // The element and the error code, not the message: a message quotes the values (patient data, src/log.ts).
        const elements = (err.options.issues ?? []).flatMap((i) => i.expression ?? []);
        log.warn('a Patient stored without a Health ID is refused by the store: left without one (correct it; the next start tries again)', {
          resource_type: 'Patient',
          id: patient.id,
          status: err.status,
          reason: `${err.code}${elements.length ? ` at ${elements.join(', ')}` : ''}`,
        });
      }
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
