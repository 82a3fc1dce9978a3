import type { Consent, Resource } from '@medplum/fhirtypes';
import type { Queryable } from '../db/database';
import type { DerivedTable } from '../fhir/repository';
import type { MappingSet } from '../mapping/index';
import { classesOf } from '../core/data-classes';
import { classesOfHiTypes, DEFAULT_PURPOSE, typesOfHiTypes } from '../policy/hi-types';
import type { ReadLimits } from '../policy/read-limits';

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
  // The artefact (issue 43): absent on a consent made before it.
  purpose_of_use?: string | null;
  hi_types?: string[];
  date_range?: { from?: string | null; to?: string | null } | null;
  erase_at?: string | null;
  frequency?: { count?: number | null; unit?: string | null } | null;
}

/**
 * The classes a consent covers: its type's, narrowed by its scopes, and by its kinds of record (hi_types) when it
 * names any (a prescriptions-only artefact of a full-record consent covers prescriptions:read only).
 */
export function coveredClasses(record: ConsentRecord): string[] {
  const classes = classesOf(record.consent_type, record.scopes);
  if (!record.hi_types?.length) return classes;
  const kinds = classesOfHiTypes(record.hi_types);
  return classes.filter((c) => kinds.has(c));
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
export function consentIndex(mappings: MappingSet, readLimits: ReadLimits): DerivedTable {
  return {
    resourceType: 'Consent',
    async sync(sql: Queryable, changes) {
      // Every change, before and after (bulk export files read before it are withheld: consentChangedSince).
      await recordChanges(sql, changes.map((c) => c.resource.id!));
      const gone = changes.filter((c) => c.method === 'DELETE').map((c) => c.resource.id!);
      if (gone.length) await sql.query('DELETE FROM consent_access WHERE consent_id = ANY($1::text[])', [gone]);
      if (gone.length) await sql.query('DELETE FROM consent_notices WHERE consent_id = ANY($1::text[]) AND fired_at IS NULL', [gone]);
      for (const change of changes) {
        if (change.method === 'DELETE') continue;
        const consent = change.resource as Consent;
        const record = consentRecordOf(mappings, consent);
        if (!record) {
          await sql.query('DELETE FROM consent_access WHERE consent_id = $1', [consent.id]);
          continue;
        }
        const scope = { types: typesOfHiTypes(record.hi_types) ?? null, from: record.date_range?.from ?? null, to: record.date_range?.to ?? null };
        await sql.query(
          `INSERT INTO consent_access (consent_id, patient_id, organization_id, consent_type, classes, status, granted_at, expires_at, updated_at,
             purpose_of_use, resource_types, data_from, data_to, erase_at, frequency_count, frequency_unit, revoked_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), $9, $10, $11, $12, $13, $14, $15, CASE WHEN $6 = 'inactive' THEN now() END)
           ON CONFLICT (consent_id) DO UPDATE SET patient_id = $2, organization_id = $3, consent_type = $4, classes = $5, status = $6,
             granted_at = $7, expires_at = $8, updated_at = now(), purpose_of_use = $9, resource_types = $10, data_from = $11, data_to = $12,
             erase_at = $13, frequency_count = $14, frequency_unit = $15,
             revoked_at = CASE WHEN $6 <> 'inactive' THEN NULL ELSE coalesce(consent_access.revoked_at, now()) END`,
          [
            consent.id,
            record.patient_id,
            record.organization_id,
            record.consent_type,
            coveredClasses(record),
            consent.status,
            record.granted_at,
            record.expires_at,
            record.purpose_of_use ?? DEFAULT_PURPOSE,
            scope.types,
            scope.from,
            scope.to,
            record.erase_at ?? null,
            record.frequency?.count ?? null,
            record.frequency?.unit ?? null,
          ],
        );
        // A limit on how often its organisation reads, or a scope (kinds of record, a period): this process counts that
        // organisation's reads, and judges its rows by its grants' kinds and dates, from the commit on.
        if (record.frequency?.count != null || scope.types || scope.from || scope.to) readLimits.changing(record.organization_id);
        await scheduleNotices(sql, consent.id!, consent.status, record);
      }
      await recordChanges(sql, changes.filter((c) => c.method !== 'DELETE').map((c) => c.resource.id!));
    },
    async purge(sql: Queryable, ids) {
      await recordChanges(sql, ids);
      await sql.query('DELETE FROM consent_notices WHERE consent_id = ANY($1::text[])', [ids]);
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

/**
 * The notices a consent is due (consent_notices; the job in ./notices.ts fires them): `expired` at expires_at while it
 * is active, `erase_due` at erase_at once it was granted (revoked too: the copies must still go). A changed due time
 * is due again; a notice no longer due (revoked before it expired, erase_at removed) is dropped unless fired.
 */
async function scheduleNotices(sql: Queryable, consentId: string, status: string | undefined, record: ConsentRecord): Promise<void> {
  const due: Array<[string, string | null | undefined]> = [
    ['expired', status === 'active' ? record.expires_at : null],
    ['erase_due', status === 'active' || status === 'inactive' ? record.erase_at : null],
  ];
  for (const [kind, at] of due) {
    if (!at) {
      await sql.query('DELETE FROM consent_notices WHERE consent_id = $1 AND kind = $2 AND fired_at IS NULL', [consentId, kind]);
      continue;
    }
    await sql.query(
      `INSERT INTO consent_notices (consent_id, kind, due_at) VALUES ($1, $2, $3)
       ON CONFLICT (consent_id, kind) DO UPDATE SET due_at = $3, fired_at = CASE WHEN consent_notices.due_at = $3::timestamptz THEN consent_notices.fired_at END`,
      [consentId, kind, at],
    );
  }
}

/** A notice claimed by claimDueNotices. */
export interface DueNotice {
  consent_id: string;
  kind: 'expired' | 'erase_due';
  due_at: Date | string;
  organization_id: string;
  patient_id: string;
  status: string;
}

/**
 * Claims up to `limit` notices due by `at` and marks them fired, in the caller's transaction: FOR UPDATE SKIP LOCKED,
 * so processes claiming side by side take different ones, and a claim that does not commit fires nothing.
 */
export async function claimDueNotices(tx: Queryable, at: string, limit: number): Promise<DueNotice[]> {
  const { rows } = await tx.query<DueNotice>(
    `UPDATE consent_notices n SET fired_at = $1::timestamptz FROM (
       SELECT d.consent_id, d.kind FROM consent_notices d WHERE d.fired_at IS NULL AND d.due_at <= $1::timestamptz
       ORDER BY d.due_at LIMIT $2 FOR UPDATE SKIP LOCKED) k, consent_access a
     WHERE n.consent_id = k.consent_id AND n.kind = k.kind AND a.consent_id = n.consent_id
     RETURNING n.consent_id, n.kind, n.due_at, a.organization_id, a.patient_id, a.status`,
    [at, limit],
  );
  return rows;
}
