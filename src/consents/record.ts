import type { Consent, Resource } from '@medplum/fhirtypes';
import type { Queryable } from '../db/database';
import type { DerivedTable } from '../fhir/repository';
import type { MappingSet } from '../mapping/index';
import { classesOf } from '../core/data-classes';

/** A consent in the Connect shape of mappings/consent.map.yaml. */
export interface ConsentRecord {
  consent_id: string;
  patient_id: string;
  organization_id: string;
  consent_type: string;
  scopes: string[];
  status: 'pending' | 'active' | 'revoked' | 'denied' | null;
  purpose: string | null;
  granted_at: string | null;
  expires_at: string | null;
}

/** A Consent read through its map; undefined for a Consent that is not Pont's shape (it grants nothing). */
export function consentRecordOf(mappings: MappingSet, consent: Resource): ConsentRecord | undefined {
  try {
    const record = mappings.get('consent').fromFhir(consent) as unknown as ConsentRecord;
    return record.organization_id && record.patient_id ? record : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The consent index the access rule reads (consent_access): one row per Consent that names a patient and a
 * Pont organisation, kept in step with the Consent in the write's transaction, whatever wrote it.
 */
export function consentIndex(mappings: MappingSet): DerivedTable {
  return {
    resourceType: 'Consent',
    async sync(sql: Queryable, changes) {
      // Every change, before and after (bulk export files read before it are withheld: consentChangedSince).
      await recordChanges(sql, changes.map((c) => c.resource.id!));
      const gone = changes.filter((c) => c.method === 'DELETE').map((c) => c.resource.id!);
      if (gone.length) await sql.query('DELETE FROM consent_access WHERE consent_id = ANY($1::text[])', [gone]);
      for (const change of changes) {
        if (change.method === 'DELETE') continue;
        const consent = change.resource as Consent;
        const record = consentRecordOf(mappings, consent);
        if (!record) {
          await sql.query('DELETE FROM consent_access WHERE consent_id = $1', [consent.id]);
          continue;
        }
        await sql.query(
          `INSERT INTO consent_access (consent_id, patient_id, organization_id, consent_type, classes, status, granted_at, expires_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now())
           ON CONFLICT (consent_id) DO UPDATE SET patient_id = $2, organization_id = $3, consent_type = $4, classes = $5, status = $6,
             granted_at = $7, expires_at = $8, updated_at = now()`,
          [
            consent.id,
            record.patient_id,
            record.organization_id,
            record.consent_type,
            classesOf(record.consent_type, record.scopes),
            consent.status,
            record.granted_at,
            record.expires_at,
          ],
        );
      }
      await recordChanges(sql, changes.filter((c) => c.method !== 'DELETE').map((c) => c.resource.id!));
    },
    async purge(sql: Queryable, ids) {
      await recordChanges(sql, ids);
      await sql.query('DELETE FROM consent_access WHERE consent_id = ANY($1::text[])', [ids]);
    },
  };
}

/** The (organisation, patient) of these consents as the index holds them now, as changed by this transaction. */
async function recordChanges(sql: Queryable, consentIds: string[]): Promise<void> {
  if (!consentIds.length) return;
  await sql.query('INSERT INTO consent_changes (organization_id, patient_id) SELECT organization_id, patient_id FROM consent_access WHERE consent_id = ANY($1::text[])', [
    consentIds,
  ]);
}
