import type { Principal } from '../auth/principal';
import { FHIR_READ_SCOPES, fhirReadScopes } from '../auth/scopes';
import { ApiError, ErrorCode } from '../http/errors';
import { dataClassOf } from '../consents/types';
import type { RowFilter } from '../fhir/store/types';

/**
 * The access policy (README "Who may do what"): the one place that decides, for a principal, whether it may
 * read, create, update, delete or be told about a piece of clinical or facility data. The repository applies
 * it to every read and write (as SQL, so searches, includes, history and counts filter in the query), the
 * webhook fan-out and delivery ask it who hears an event, and the Connect, consent, inventory and audit
 * routes ask it their questions. Nothing else decides.
 *
 * The rules:
 * - **Operators** (Pont itself, `pont clients create --all-patients`) may do everything.
 * - **Read**: data about no patient is readable with the scope of its type, except facility-owned and audit
 *   data (OWNER_ONLY_TYPES), which only the organisation that wrote it reads; patient data is readable by
 *   the organisation that wrote it, or when every patient it is about has an active, unexpired consent for
 *   the organisation covering its class, or an open break-glass window.
 * - **Update and delete** an existing resource (every version, deleted ones too): its owner only, the
 *   organisation that created it (`author_org`; for a Patient's demographics, the registering organisation).
 *   Anyone else is answered as if it did not exist.
 * - **Create** data about a patient: consent covering the class, or the treating relationship (the
 *   organisation registered the patient), or an open break-glass window.
 * - **Notify**: an event about a patient goes to the organisation that caused it and to organisations whose
 *   consent covers the event's class, checked again at delivery.
 * - **Facility data** (stock, blood units, payments) is written only by clients and agents bound to the
 *   facility.
 */

/** Where a request came in. FHIR clients are held to the FHIR scope table; Connect/SDK routes declare their own scopes. */
export type Channel = 'fhir' | 'connect' | 'sdk' | 'bridge' | 'mobile' | 'system';

/** How long one break-glass declaration lets an organisation read a patient without consent. */
export const EMERGENCY_WINDOW_HOURS = 4;

/**
 * The patient of data Pont cannot place in a compartment (a contained Patient, a patient named only by an
 * identifier, patient data inside a stored Bundle): nobody has consent for it, so only its author and
 * operators read it. Non-operators may not write such data at all (422).
 */
export const UNPLACED_PATIENT = 'urn:pont:unplaced-patient';

/**
 * Types whose rows only the organisation that wrote them reads, whatever patient they concern: the audit
 * trail (an organisation reads its own accesses; its AuditEvents are authored by the organisation audited)
 * and a facility's payments (the Connect reconciliation route shows the caller's organisation only).
 */
export const OWNER_ONLY_TYPES = ['AuditEvent', 'PaymentReconciliation', 'PaymentNotice'] as const;

type Sql = { add(value: unknown): string };

/**
 * The decisions of one caller, as the repository and the routes apply them. SQL fragments are conditions
 * on a row alias with `patients` (text[]), `author_org` and `resource_type` columns.
 */
export interface AccessPolicy {
  /** May the caller read resources of this type at all (scopes)? */
  canRead(resourceType: string): boolean;
  /** Rows the caller may see (a condition on `fhir_resources`); undefined: every row. */
  rowFilter?: RowFilter;
  /** Rows the caller may update or delete (a condition on `fhir_resources`); undefined: every row. */
  ownerFilter?: (alias: string, q: Sql) => string;
  /**
   * May the caller see `patientId`'s data of these classes? As SQL returning the classes refused (none:
   * allowed). `basis`: `records` also counts data the organisation wrote itself (Connect records read back
   * what a facility pushed); `relationship` counts only consent, registration and break-glass (the full
   * profile, pairing, creating data). Undefined when the caller may see everything.
   */
  patientCheck?: (patientId: string, classes: string[], q: Sql, basis?: 'records' | 'relationship') => string;
  /** The organisation the rule is about (clients and agents), for break-glass and ownership. */
  organizationId?: string;
  /** Operators and Pont itself: every check passes. */
  operator: boolean;
  /** May the caller write data of this facility (stock, blood units, payments)? */
  mayWriteFacility(facilityId: string | null | undefined): boolean;
}

const everything: AccessPolicy = { canRead: () => true, operator: true, mayWriteFacility: () => true };

/** SQL: the data class of the resource type in `typeSql` (src/consents/types.ts, from the FHIR scope table). */
const CLASS_CASE = (typeSql: string) =>
  `CASE ${typeSql} ${Object.entries(FHIR_READ_SCOPES)
    .map(([type, scope]) => `WHEN '${type}' THEN '${scope}'`)
    .join(' ')} ELSE 'fhir:read' END`;

const OWNER_ONLY_SQL = `(${OWNER_ONLY_TYPES.map((t) => `'${t}'`).join(', ')})`;

/**
 * SQL: `select` from the active, unexpired consent grants (alias `g`) of `org` (any organisation when undefined)
 * for the patient matched by `patient` (`= x` or `= ANY(x)`) covering `dataClass`. The one definition of
 * "consent covers this", for reads, writes and the webhook fan-out.
 */
export function activeGrants(select: string, org: string | undefined, patient: string, dataClass: string): string {
  return `SELECT ${select} FROM consent_access g WHERE ${org ? `g.organization_id = ${org} AND ` : ''}g.patient_id ${patient} AND g.status = 'active'
      AND (g.granted_at IS NULL OR g.granted_at <= now()) AND (g.expires_at IS NULL OR g.expires_at > now()) AND ${dataClass} = ANY(g.classes)`;
}

/**
 * The consent rule in SQL, over any "row": `patients` (text[] of FHIR Patient ids), `author` (the
 * organisation that wrote it) and `dataClass`. Allowed when the data concerns no patient, when the
 * organisation wrote it, or when every patient it concerns has an active, unexpired consent for the
 * organisation that covers its class (or, under break-glass, an open emergency window).
 * Most rows concern one patient: that case is an EXISTS on (organisation, patient), which PostgreSQL runs
 * as one hash of the organisation's consents per query or an index probe per row, whichever is cheaper
 * (a lookup by `= ANY(patients)` is planned as a scan of every consent of the organisation per row).
 */
function consentRule(org: string, emergency: boolean, q: Sql, row: { patients: string; author: string; dataClass: string }): string {
  const o = q.add(org);
  const grants = (patient: string) => activeGrants('g.patient_id', o, patient, row.dataClass);
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
  const nothing = (_alias: string) => 'false';
  if (principal.kind === 'patient') {
    // A patient reaches their own data only, through the mobile routes (which write nothing through FHIR).
    const own: RowFilter = (alias, q) => `${q.add(principal.patientId)} = ANY(${alias}.patients)`;
    return {
      canRead: () => true,
      rowFilter: own,
      ownerFilter: nothing,
      operator: false,
      mayWriteFacility: () => false,
      patientCheck: (patientId, classes, q) => (patientId === principal.patientId ? `SELECT NULL WHERE false` : `SELECT unnest(${q.add(classes)}::text[])`),
    };
  }
  const scopes = new Set<string>(principal.kind === 'client' ? principal.scopes : []);
  const canRead = channel === 'fhir' && principal.kind === 'client' ? (type: string) => fhirReadScopes(type).some((s) => scopes.has(s)) : () => true;
  if (principal.kind === 'client' && principal.allPatients) return { ...everything, canRead };
  const org = principal.organizationId;
  const facility = principal.facilityId;
  // Facility data: only a caller bound to that facility (clients without a facility write none).
  const mayWriteFacility = (facilityId: string | null | undefined) => !!facility && facilityId === facility;
  // A caller with no organisation (an agent created before agents had one) sees no patient data and owns nothing.
  if (!org)
    return {
      canRead,
      operator: false,
      mayWriteFacility,
      ownerFilter: nothing,
      rowFilter: (alias) => `(${alias}.patients = '{}'::text[] AND ${alias}.resource_type NOT IN ${OWNER_ONLY_SQL})`,
      patientCheck: (_p, classes, q) => `SELECT unnest(${q.add(classes)}::text[])`,
    };
  const emergency = emergencyReason !== undefined;
  return {
    canRead,
    operator: false,
    organizationId: org,
    mayWriteFacility,
    ownerFilter: (alias, q) => `${alias}.author_org = ${q.add(org)}`,
    rowFilter: (alias, q, type) => {
      if (type && (OWNER_ONLY_TYPES as readonly string[]).includes(type)) return `${alias}.author_org = ${q.add(org)}`;
      const rule = consentRule(org, emergency, q, { patients: `${alias}.patients`, author: `${alias}.author_org`, dataClass: type ? q.add(dataClassOf(type)) : CLASS_CASE(`${alias}.resource_type`) });
      return type ? rule : `(CASE WHEN ${alias}.resource_type IN ${OWNER_ONLY_SQL} THEN ${alias}.author_org = ${q.add(org)} ELSE ${rule} END)`;
    },
    // Refused classes: those no consent covers; for `records`, also not those of which the organisation wrote
    // something for this patient; for `relationship`, not when it registered the patient.
    patientCheck: (patientId, classes, q, basis = 'records') => {
      const p = q.add(patientId);
      const o = q.add(org);
      const own =
        basis === 'records'
          ? `EXISTS (SELECT 1 FROM fhir_resources x WHERE x.author_org = ${o} AND x.patients @> ARRAY[${p}]::text[] AND NOT x.deleted AND ${CLASS_CASE('x.resource_type')} = k.c)`
          : `EXISTS (SELECT 1 FROM fhir_resources x WHERE x.resource_type = 'Patient' AND x.id = ${p} AND x.author_org = ${o})`;
      return `SELECT c FROM unnest(${q.add(classes)}::text[]) AS k(c)
        WHERE NOT ${consentRule(org, emergency, q, { patients: `ARRAY[${p}]::text[]`, author: 'NULL::text', dataClass: 'k.c' })} AND NOT ${own}`;
    },
  };
}

/** The data class an event about a patient tells of (the same classes consents cover), by its type's prefix. */
export const EVENT_CLASSES: Record<string, string> = {
  patient: 'patients:read',
  health_id: 'patients:read',
  encounter: 'patients:read',
  lab_order: 'labs:read',
  lab_result: 'labs:read',
  prescription: 'prescriptions:read',
  appointment: 'appointments:read',
  document: 'documents:read',
};

/** The class of an event about a patient, or undefined for events about no patient's data. */
export function eventClassOf(type: string): string | undefined {
  return EVENT_CLASSES[type.slice(0, type.indexOf('.'))];
}
