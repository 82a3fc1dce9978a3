import type { Principal } from '../auth/principal';
import { FHIR_READ_SCOPES, fhirReadScopes } from '../auth/scopes';
import { ApiError, ErrorCode } from '../http/errors';
import { dataClassOf } from '../consents/types';
import type { RowFilter } from './store/types';

/** Where a request came in. FHIR clients are held to the FHIR scope table; Connect/SDK routes declare their own scopes. */
export type Channel = 'fhir' | 'connect' | 'sdk' | 'bridge' | 'mobile' | 'system';

/** How long one break-glass declaration lets an organisation read a patient without consent. */
export const EMERGENCY_WINDOW_HOURS = 4;

/**
 * The access rule, as the repository applies it to every read (architecture §9): which resource types the
 * caller may read at all, and which rows of patient data it may see, as a SQL condition, so that searches,
 * includes, chains, counts, history and $everything all filter in the query (paging and totals stay right)
 * and point reads get the same verdict.
 */
export interface AccessPolicy {
  /** May the caller read resources of this type at all (scopes)? */
  canRead(resourceType: string): boolean;
  /** Rows the caller may see (a condition on `fhir_resources`); undefined: every row. */
  rowFilter?: RowFilter;
  /**
   * The same rule for data not yet read: may the caller see `patientId`'s data of these classes? As SQL
   * returning the classes refused (none: allowed). Undefined when the caller may see everything.
   */
  patientCheck?: (patientId: string, classes: string[], q: { add(value: unknown): string }) => string;
  /** The organisation the rule is about (clients and agents), for break-glass. */
  organizationId?: string;
}

const everything: AccessPolicy = { canRead: () => true };

/** SQL: the data class of the resource type in `typeSql` (src/consents/types.ts, from the FHIR scope table). */
const CLASS_CASE = (typeSql: string) =>
  `CASE ${typeSql} ${Object.entries(FHIR_READ_SCOPES)
    .map(([type, scope]) => `WHEN '${type}' THEN '${scope}'`)
    .join(' ')} ELSE 'fhir:read' END`;

/**
 * The consent rule in SQL, over any "row": `patients` (text[] of FHIR Patient ids), `author` (the
 * organisation that wrote it) and `dataClass`. Allowed when the data concerns no patient, when the
 * organisation wrote it, or when every patient it concerns has an active, unexpired consent for the
 * organisation that covers its class (or, under break-glass, an open emergency window).
 * Most rows concern one patient: that case is an EXISTS on (organisation, patient), which PostgreSQL runs
 * as one hash of the organisation's consents per query or an index probe per row, whichever is cheaper
 * (a lookup by `= ANY(patients)` is planned as a scan of every consent of the organisation per row).
 */
function consentRule(org: string, emergency: boolean, q: { add(value: unknown): string }, row: { patients: string; author: string; dataClass: string }): string {
  const o = q.add(org);
  const grants = (patient: string) =>
    `SELECT g.patient_id FROM consent_access g WHERE g.organization_id = ${o} AND g.patient_id ${patient} AND g.status = 'active'
      AND (g.granted_at IS NULL OR g.granted_at <= now()) AND (g.expires_at IS NULL OR g.expires_at > now()) AND ${row.dataClass} = ANY(g.classes)`;
  const windows = (patient: string) => `SELECT e.patient_id FROM emergency_access e WHERE e.organization_id = ${o} AND e.patient_id ${patient} AND e.expires_at > now()`;
  const one = `= (${row.patients})[1]`;
  const any = `= ANY(${row.patients})`;
  const onePatient = `EXISTS (${grants(one)})${emergency ? ` OR EXISTS (${windows(one)})` : ''}`;
  const allPatients = `${row.patients} <@ ARRAY(${grants(any)}${emergency ? ` UNION ALL ${windows(any)}` : ''})`;
  // Never NULL (a NULL would turn into "allowed" under a NOT): unknown patients (NULL) are nobody's to see.
  return `((${row.patients} = '{}'::text[]) IS TRUE OR ${row.author} IS NOT DISTINCT FROM ${o}
    OR (${row.patients} IS NOT NULL AND (cardinality(${row.patients}) = 1 AND (${onePatient}) OR cardinality(${row.patients}) > 1 AND ${allPatients})))`;
}

/** The policy of one caller on one channel; `emergencyReason` is the X-Emergency-Reason the request stated. */
export function accessPolicyFor(principal: Principal, channel: Channel, emergencyReason?: string): AccessPolicy {
  if (emergencyReason !== undefined && !(principal.kind === 'client' && principal.scopes.includes('emergency:access')))
    throw new ApiError(403, ErrorCode.forbidden, 'X-Emergency-Reason needs the scope emergency:access', { extra: { required_scopes: ['emergency:access'] } });
  if (principal.kind === 'system') return everything;
  if (principal.kind === 'patient') {
    // A patient reaches their own data only.
    const own: RowFilter = (alias, q) => `${q.add(principal.patientId)} = ANY(${alias}.patients)`;
    return { canRead: () => true, rowFilter: own, patientCheck: (patientId, classes, q) => (patientId === principal.patientId ? `SELECT NULL WHERE false` : `SELECT unnest(${q.add(classes)}::text[])`) };
  }
  const scopes = new Set<string>(principal.kind === 'client' ? principal.scopes : []);
  const canRead = channel === 'fhir' && principal.kind === 'client' ? (type: string) => fhirReadScopes(type).some((s) => scopes.has(s)) : () => true;
  if (principal.kind === 'client' && principal.allPatients) return { canRead };
  const org = principal.organizationId;
  // A caller with no organisation (an agent created before agents had one) sees no patient data.
  if (!org) return { canRead, rowFilter: (alias) => `${alias}.patients = '{}'::text[]`, patientCheck: (_p, classes, q) => `SELECT unnest(${q.add(classes)}::text[])` };
  const emergency = emergencyReason !== undefined;
  return {
    canRead,
    organizationId: org,
    rowFilter: (alias, q, type) =>
      consentRule(org, emergency, q, { patients: `${alias}.patients`, author: `${alias}.author_org`, dataClass: type ? q.add(dataClassOf(type)) : CLASS_CASE(`${alias}.resource_type`) }),
    // Refused classes: those no consent covers and of which the organisation wrote nothing for this patient.
    patientCheck: (patientId, classes, q) => {
      const p = q.add(patientId);
      return `SELECT c FROM unnest(${q.add(classes)}::text[]) AS k(c)
        WHERE NOT ${consentRule(org, emergency, q, { patients: `ARRAY[${p}]::text[]`, author: 'NULL::text', dataClass: 'k.c' })}
          AND NOT EXISTS (SELECT 1 FROM fhir_resources x WHERE x.author_org = ${q.add(org)} AND x.patients @> ARRAY[${p}]::text[]
                          AND NOT x.deleted AND ${CLASS_CASE('x.resource_type')} = k.c)`;
    },
  };
}
