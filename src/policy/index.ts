import type { Principal } from '../core/principal';
import { FHIR_READ_SCOPES, fhirReadScopes, TERMINOLOGY_SCOPE } from '../core/scopes';
import { ApiError, ErrorCode } from '../core/errors';
import { dataClassOf } from '../core/data-classes';
import { and, constant, join, literal, or, param, rowsOf, sql, type Identifier, type Param, type Sql } from '../db/sql';
import { hiTypes, PURPOSE_CODES } from './hi-types';

/**
 * The access policy (docs/security.md "The access policy"): the one place that decides, for a principal, whether it may
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

/**
 * The access rule as a SQL condition on the `fhir_resources` rows of `alias`; undefined when the caller may see every
 * row. `resourceType`: every row is of that type (a search's own rows, a read), which lets the rule name the type's
 * data class as a constant. `patient`: the Patient most rows are about (a search by patient, a compartment): the rule
 * asks once per statement whether that patient's consent covers them, instead of row by row (a hint only: the rule
 * is the same with or without it).
 */
export type RowFilter = (alias: Identifier, resourceType?: string, patient?: string) => Sql | undefined;

/**
 * Directory data (a practitioner, an organisation, a location, a medication): rows about no patient, which any caller
 * reads as the context of a record it may read (the records' references). Never the owner-only types (the audit trail,
 * payments), which only their author reads, about a patient or not.
 */
export function directoryRows(alias: Identifier): Sql {
  return sql`((${alias.col('patients')} = '{}'::text[]) IS TRUE AND ${alias.col('resource_type')} NOT IN ${OWNER_ONLY_SQL})`;
}

/** Above this many types, rowsOfTypes gives the rule of any type: one text however the types vary. */
const TYPED_RULES_AT_MOST = 6;

/**
 * The access rule over rows of `alias` each of one of `types` (a statement reading several types' rows by id): each
 * type's own rule (its class and care date constants) behind a test of the row's type. The rule of any type picks
 * the class and the care date out of the row by CASEs over every type, some 20 KB of SQL that PostgreSQL plans anew
 * on each execution (milliseconds); a few typed rules plan in a fraction of it. Undefined: every row may be seen.
 * `patient`: the Patient most rows are about (RowFilter's hint).
 */
export function rowsOfTypes(rowFilter: RowFilter | undefined, alias: Identifier, types: Iterable<string>, patient?: string): Sql | undefined {
  if (!rowFilter) return undefined;
  const distinct = [...new Set(types)].sort();
  if (!distinct.length) return sql`false`;
  if (distinct.length === 1) return rowFilter(alias, distinct[0], patient);
  if (distinct.length > TYPED_RULES_AT_MOST) return rowFilter(alias, undefined, patient);
  return or(...distinct.map((t) => and(sql`${alias.col('resource_type')} = ${literal(t)}`, rowFilter(alias, t, patient) ?? sql`true`)));
}

/**
 * The decisions of one caller, as the repository and the routes apply them. SQL fragments (src/db/sql.ts) are
 * conditions on a row alias with `patients` (text[]), `author_org` and `resource_type` columns.
 */
export interface AccessPolicy {
  /** May the caller read resources of this type at all (scopes)? */
  canRead(resourceType: string): boolean;
  /** May the caller write resources of this type at all (a token whose SMART scopes name the types it writes)? */
  canWrite(resourceType: string): boolean;
  /** Rows the caller may see (a condition on `fhir_resources`); undefined: every row. */
  rowFilter?: RowFilter;
  /** Rows the caller may update or delete (a condition on `fhir_resources`); undefined: every row. */
  ownerFilter?: (alias: Identifier) => Sql;
  /**
   * May the caller see each patient's data of these classes? As SQL returning the (patient `p`, class `c`) pairs
   * refused (none: allowed), for any number of patients in one statement (a write batch names many). `basis`:
   * `records` also counts data the organisation wrote itself (Connect records read back what a facility pushed);
   * `relationship` counts only consent, registration and break-glass (the full profile, pairing, creating data).
   * Undefined when the caller may see everything.
   */
  patientCheck?: (checks: PatientClasses[], basis?: 'records' | 'relationship') => Sql;
  /** The organisation the rule is about (clients and agents), for break-glass and ownership. */
  organizationId?: string;
  /** May the caller search through the loaded terminology (:below, :above, :in, :not-in)? A client needs terminology:read. */
  readsTerminology: boolean;
  /** Operators and Pont itself: every check passes. */
  operator: boolean;
  /** May the caller write data of this facility (stock, blood units, payments)? */
  mayWriteFacility(facilityId: string | null | undefined): boolean;
  /**
   * A read of these patients' data (src/fhir/repository.ts, at its audit), in one statement: it counts the read against
   * each of the caller's active consents for them that limit how often (`frequency`: one atomic increment per consent
   * and window; with `fetchKey`, the key of a fetch made of several reads, only its first read per consent and window
   * counts), and answers one row: `exceeded`, the consents it exceeds as JSON [{consent_id, retry_after seconds to
   * the window's end}] or NULL (refuse the read with 429 when not NULL), and `purpose`, the purpose of use to audit
   * (AuditEvent.purposeOfEvent): the code the request stated (X-Purpose-Of-Use), else its consent's. Undefined: nothing
   * to count or look up (operators, patients, callers without an organisation).
   */
  readFacts?: (patients: string[], fetchKey?: string) => Sql;
  /** The purpose code the request stated (X-Purpose-Of-Use, when it is one: statedPurpose). */
  statedPurpose?: string;
  /** False when the organisation is known to hold no consent limiting its reads (accessPolicyFor's `readsCounted`). */
  readsCounted?: boolean;
}

/** A patient, and the classes of their data a caller asks about (AccessPolicy.patientCheck). */
export interface PatientClasses {
  patient: string;
  classes: string[];
}

/** SQL: the (patient, class) pairs of `checks` as rows `k(p, c)`, for patientCheck's `FROM`. */
function pairsOf(checks: PatientClasses[]): Sql {
  const pairs = checks.flatMap(({ patient, classes }) => classes.map((c) => [patient, c] as const));
  return rowsOf('k', [['p', 'text'], ['c', 'text']], pairs);
}

const everything: AccessPolicy = { canRead: () => true, canWrite: () => true, readsTerminology: true, operator: true, mayWriteFacility: () => true };

/** SQL: the data class of the resource type in `type` (src/core/data-classes.ts, from the FHIR scope table), as constants the planner sees. */
const CLASS_WHEN = constant(join(Object.entries(FHIR_READ_SCOPES).map(([t, scope]) => sql`WHEN ${literal(t)} THEN ${literal(scope)}`), ' '));
const CLASS_CASE = (type: Sql) => sql`CASE ${type} ${CLASS_WHEN} ELSE 'fhir:read' END`;

const OWNER_ONLY_SQL = constant(sql`(${join(OWNER_ONLY_TYPES.map(literal), ', ')})`);

/**
 * What the rule knows of an event about a patient's data (webhook fan-out and delivery): the resource types it may be
 * about (text[]) and the ids it names (text[]). A grant naming kinds of record hears it only if they cover one of the
 * types; a grant with a date range hears events about the patient themselves (the subject has no care date), and
 * others when the resource the event is about (the row of one of `types` among the named ids, as it is now) records a
 * date of care inside the range, judged as reads judge that row. No such row, or no date: not told.
 */
export interface EventFacts {
  types: Sql;
  /**
   * Every resource type the events judged in one statement may be about, as code: only their dates of care are
   * written into it (all of hi-types' made the fan-out's statement cost 1.5 ms to plan, at every write).
   */
  typeNames: readonly string[];
  ids: Sql;
  /** The event's patient (a FHIR Patient id). */
  patient: Sql;
}

/**
 * SQL: the event is about care inside [from, to]: the live rows of `facts.types` whose ids it names are there, each
 * one is its patient's and has a date of care (careDateOf) inside. Every one: ids are unique per type only, so a
 * `*_id` naming a record of another type (a dispense's prescription_id) may name a row of the event's type too, of
 * another patient or another date; one outside (or another patient's) and the event is not heard.
 */
function eventCareInside(facts: EventFacts, from: Sql, to: Sql): Sql {
  return sql`coalesce((SELECT bool_and(x.patients @> ARRAY[${facts.patient}]::text[]
          AND coalesce(${careDateOf(facts.typeNames, { type: sql`x.resource_type`, content: sql`x.content` })} BETWEEN ${from} AND ${to}, false))
        FROM fhir_resources x WHERE x.resource_type = ANY(${facts.types}) AND x.id = ANY(${facts.ids}) AND NOT x.deleted), false)`;
}

/** What the rule knows of one row beyond its class: its type and its content (for the date of its care). */
export interface RowFacts {
  type: Sql;
  content: Sql;
}

/**
 * SQL: the date of the care a row of `type` records (YYYY-MM-DD as text; NULL when it records none or only part of
 * a date), from the elements mappings/tables/hi-types.yaml names per type. Constants only: the planner sees them.
 * `type`: the row's type, or the types it may be of (undefined: any).
 */
function careDateOf(type: string | readonly string[] | undefined, row: RowFacts): Sql {
  const of = (t: string) => {
    const paths = hiTypes.careDates[t];
    if (!paths?.length) return sql`NULL::text`;
    return sql`COALESCE(${join(paths.map((p) => sql`${row.content} #>> ${literal(`{${p.join(',')}}`)}`), ', ')})`;
  };
  let value: Sql;
  if (typeof type === 'string') value = of(type);
  else {
    const dated = Object.keys(hiTypes.careDates).filter((t) => type === undefined || type.includes(t));
    value = dated.length ? sql`CASE ${row.type} ${join(dated.map((t) => sql`WHEN ${literal(t)} THEN ${of(t)}`), ' ')} END` : sql`NULL::text`;
  }
  // Its first ten characters when it has ten: the value written once (a CASE over many types is costly to plan).
  return sql`substring(${value} from '^.{10}')`;
}

/**
 * SQL: `select` from the active, unexpired consent grants (alias `g`) of `org` (any organisation when undefined)
 * for the patient matched by `patient` (`= x` or `= ANY(x)`) covering `dataClass`. The one definition of
 * "consent covers this", for reads, writes and the webhook fan-out. `row`: a row of data is judged by the grant's
 * kinds of record (their resource types) and its date range too; without it, the class alone decides (may this
 * organisation see some of this class of the patient's data: the gates of the Connect routes, whose reads then
 * pass the row rule). `type`: the row's type when known as a constant.
 */
export function activeGrants(select: Sql, org: Sql | undefined, patient: Sql, dataClass: Sql, row?: RowFacts | EventFacts, type?: string, only: GrantsOnly = {}): Sql {
  const { purpose, unlimited, plain } = only;
  const artefact = row && 'types' in row
    ? sql` AND (g.resource_types IS NULL OR g.resource_types && ${row.types})
      AND (g.data_from IS NULL AND g.data_to IS NULL OR ${literal(hiTypes.subject)} = ANY(${row.types})
        OR ${eventCareInside(row, sql`coalesce(g.data_from, '0000-01-01')`, sql`coalesce(g.data_to, '9999-12-31')`)})`
    : row
    ? sql` AND (g.resource_types IS NULL OR ${row.type} = ANY(g.resource_types))
${type === hiTypes.subject ? sql`` : sql`
      AND (g.data_from IS NULL AND g.data_to IS NULL${type ? sql`` : sql` OR ${row.type} = ${literal(hiTypes.subject)}`} OR ${careDateOf(type, row)} BETWEEN coalesce(g.data_from, '0000-01-01') AND coalesce(g.data_to, '9999-12-31'))`}`
    : sql``;
  return sql`SELECT ${select} FROM consent_access g WHERE ${org ? sql`g.organization_id = ${org} AND ` : sql``}g.patient_id ${patient} AND g.status = 'active'
      AND (g.granted_at IS NULL OR g.granted_at <= now()) AND (g.expires_at IS NULL OR g.expires_at > now()) AND ${dataClass} = ANY(g.classes)${artefact}${purpose ? sql` AND g.purpose_of_use = ${literal(purpose)}` : sql``}${unlimited ? sql` AND g.frequency_count IS NULL` : sql``}${plain ? sql` AND ${PLAIN}` : sql``}`;
}

/** SQL: consent_access row `g` is a plain grant: it names no kinds of record and no period of care. */
const PLAIN = constant(sql`g.resource_types IS NULL AND g.data_from IS NULL AND g.data_to IS NULL`);

/**
 * Which of an organisation's grants a request may use: `purpose`, those of the purpose it stated (X-Purpose-Of-Use);
 * `unlimited`, those with no frequency, when its process knows the organisation holds no consent limiting how often
 * it reads (ReadLimits): such reads are not counted, so a limited consent granted since (in another process, not
 * heard of yet) must not open data to them.
 */
export interface GrantsOnly {
  purpose?: string;
  unlimited?: boolean;
  /**
   * Only plain grants (no kinds, no period), when the process knows the organisation holds no other (ReadLimits): the
   * rule then asks nothing of the row but its patient and class. A scoped grant made since in another process, not
   * heard of yet, opens nothing until it is.
   */
  plain?: boolean;
}

/**
 * SQL: the organisations holding data of the patient matched by `patient` (`= x`): those that wrote any of it (the
 * data's holders, an exchange's HIPs), who are told of every change of a consent about that patient (`select` over
 * alias `h`, column `org`).
 */
export function dataHolders(select: Sql, patient: Sql): Sql {
  return sql`SELECT ${select} FROM (SELECT DISTINCT x.author_org AS org FROM fhir_resources x
      WHERE x.patients @> ARRAY[${patient}]::text[] AND NOT x.deleted AND x.author_org IS NOT NULL AND x.resource_type <> 'Consent') h`;
}

/**
 * SQL: whether a consent of `org` about one of `patients` (text[]) changed (granted, narrowed, revoked, deleted) in a
 * transaction that `snapshot` (a pg_snapshot) does not see, or ended between `since` and `now`: what was read in
 * that snapshot may no longer be the organisation's to keep (bulk export files, src/bulk). The changes are those
 * consent_changes keeps (src/consents/record.ts).
 */
export function consentChangedSince(org: Sql, patients: Sql, snapshot: Sql, since: Sql, now: Sql): Sql {
  return sql`(EXISTS (SELECT 1 FROM consent_changes c WHERE c.organization_id = ${org} AND c.patient_id = ANY (${patients})
      AND NOT pg_visible_in_snapshot(c.changed_xid, ${snapshot}))
    OR EXISTS (SELECT 1 FROM consent_access c WHERE c.organization_id = ${org} AND c.patient_id = ANY (${patients})
      AND c.expires_at > ${since} AND c.expires_at <= ${now}))`;
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
function consentRule(org: Param, emergency: boolean, row: { patients: Sql; author: Sql; dataClass: Sql; facts?: RowFacts; type?: string }, only: GrantsOnly, knownPatient?: string): Sql {
  const rowFacts = only.plain ? undefined : row.facts;
  // `facts` undefined: the grants of the class whatever the row (no default here: an explicit undefined would take it).
  const grants = (patient: Sql, facts: RowFacts | undefined) => activeGrants(sql`g.patient_id`, sql`${org}`, patient, row.dataClass, facts, row.type, only);
  const windows = (patient: Sql) => sql`SELECT e.patient_id FROM emergency_access e WHERE e.organization_id = ${org} AND e.patient_id ${patient} AND e.expires_at > now()`;
  // A grant naming no kinds and no period (every consent before artefacts) covers every row of its classes: asked
  // apart, with nothing of the row in it but its patient, it is one hash per statement; the artefacts' grants, whose
  // kinds and period depend on the row, are probed per row only for rows the plain ones do not cover.
  const plainly = (patient: Sql) => sql`EXISTS (${grants(patient, undefined)}${rowFacts ? sql` AND ${PLAIN}` : sql``})${emergency ? sql` OR EXISTS (${windows(patient)})` : sql``}`;
  const one = sql`= (${row.patients})[1]`;
  const any = sql`= ANY(${row.patients})`;
  const onePatient = rowFacts ? sql`${plainly(one)} OR EXISTS (${grants(one, rowFacts)} AND NOT (${PLAIN}))` : plainly(one);
  const allPatients = sql`${row.patients} <@ ARRAY(${grants(any, rowFacts)}${emergency ? sql` UNION ALL ${windows(any)}` : sql``})`;
  // The rows of the known patient alone that a plain grant or an open window covers, asked once per statement (the
  // test names no column of the row): a case of onePatient, tested first so that most rows need nothing else.
  // IS TRUE: a row whose patients are NULL must leave the rule false, not NULL (never NULL, below).
  const known = knownPatient === undefined ? sql`` : sql`(${row.patients} = ARRAY[${knownPatient}]::text[]) IS TRUE AND (${plainly(sql`= ${knownPatient}`)}) OR `;
  // Never NULL (a NULL would turn into "allowed" under a NOT): unknown patients (NULL) are nobody's to see.
  return sql`((${row.patients} = '{}'::text[]) IS TRUE OR ${row.author} IS NOT DISTINCT FROM ${org}
    OR ${known}(${row.patients} IS NOT NULL AND (cardinality(${row.patients}) = 1 AND (${onePatient}) OR cardinality(${row.patients}) > 1 AND ${allPatients})))`;
}

/** SQL: consent_access row `g` is in force now: active, begun, not expired. */
const IN_FORCE = constant(sql`g.status = 'active' AND (g.granted_at IS NULL OR g.granted_at <= now()) AND (g.expires_at IS NULL OR g.expires_at > now())`);

/**
 * SQL: the purpose of use of the consent in force of `org` (text) about one of `patients` (text[]) changed last, or
 * NULL: what a read of their data under consent is audited with when the request stated none.
 */
export function consentPurposeOf(org: Sql, patients: Sql): Sql {
  // One lookup, whatever the number of patients: an equality for one patient beside `= ANY` for several, chosen by a
  // CASE, planned both and (under the audit insert's null test) ran the lookup twice: ~50 µs more per audited read.
  return sql`(SELECT g.purpose_of_use FROM consent_access g WHERE g.organization_id = ${org} AND g.patient_id = ANY(${patients}) AND ${IN_FORCE}
    ORDER BY g.updated_at DESC LIMIT 1)`;
}

/**
 * The purpose a request states (X-Purpose-Of-Use) when it is one of the codes of consent artefacts: reads count only
 * consents of that purpose. Free text (what clients sent before artefacts) states no code: it is audited as text and
 * every consent counts, as before.
 */
export function statedPurpose(header: string | undefined): string | undefined {
  return header !== undefined && (PURPOSE_CODES as readonly string[]).includes(header) ? header : undefined;
}

/**
 * The policy of one caller on one channel; `emergencyReason` is the X-Emergency-Reason the request stated, `purpose`
 * its X-Purpose-Of-Use (a consent counts only if its purpose_of_use is the stated code, statedPurpose).
 * `readsCounted` false: the caller's process knows its organisation holds no consent limiting how often it reads
 * (ReadLimits): its reads are not counted, and only grants without a frequency open data (GrantsOnly). `scopedGrants`
 * false: it knows the organisation holds no grant naming kinds of record or a period: only plain grants open data.
 */
export function accessPolicyFor(principal: Principal, channel: Channel, emergencyReason?: string, purpose?: string, readsCounted = true, scopedGrants = true): AccessPolicy {
  if (emergencyReason !== undefined && !(principal.kind === 'client' && principal.scopes.includes('emergency:access')))
    throw new ApiError(403, ErrorCode.forbidden, 'X-Emergency-Reason needs the scope emergency:access', { extra: { required_scopes: ['emergency:access'] } });
  if (principal.kind === 'system') return everything;
  const nothing = () => sql`false`;
  const refuseAll = (checks: PatientClasses[]) => sql`SELECT k.p, k.c FROM ${pairsOf(checks)}`;
  if (principal.kind === 'patient') {
    // A patient reaches their own data only, through the mobile routes (which write nothing through FHIR).
    const own: RowFilter = (alias) => sql`${principal.patientId} = ANY(${alias.col('patients')})`;
    return {
      canRead: () => true,
      canWrite: () => true,
      readsTerminology: true,
      rowFilter: own,
      ownerFilter: nothing,
      operator: false,
      mayWriteFacility: () => false,
      patientCheck: (checks) => sql`SELECT k.p, k.c FROM ${pairsOf(checks)} WHERE k.p <> ${principal.patientId}`,
    };
  }
  const scopes = new Set<string>(principal.kind === 'client' ? principal.scopes : []);
  const byScope = channel === 'fhir' && principal.kind === 'client' ? (type: string) => fhirReadScopes(type).some((s) => scopes.has(s)) : () => true;
  // A token whose SMART scopes name types (system/Observation.rs) reads and writes those types only, on every channel.
  const limits = principal.kind === 'client' ? principal.typeLimits : undefined;
  const canRead = (type: string) => byScope(type) && (!limits?.read || limits.read.includes(type));
  const canWrite = (type: string) => !limits?.write || limits.write.includes(type);
  // The terminology search modifiers read the loaded hierarchy and value sets: a client needs the terminology scope.
  const readsTerminology = principal.kind !== 'client' || scopes.has(TERMINOLOGY_SCOPE);
  if (principal.kind === 'client' && principal.allPatients) return { ...everything, canRead, canWrite, readsTerminology };
  const org = principal.organizationId;
  const facility = principal.kind === 'portal-user' ? undefined : principal.facilityId; // portal people write no facility data
  // Facility data: only a caller bound to that facility (clients without a facility write none).
  const mayWriteFacility = (facilityId: string | null | undefined) => !!facility && facilityId === facility;
  // A caller with no organisation (an agent created before agents had one) sees no patient data and owns nothing.
  if (!org)
    return {
      canRead,
      canWrite,
      readsTerminology,
      operator: false,
      mayWriteFacility,
      ownerFilter: nothing,
      rowFilter: directoryRows,
      patientCheck: refuseAll,
    };
  const emergency = emergencyReason !== undefined;
  const stated = statedPurpose(purpose);
  const only: GrantsOnly = { purpose: stated, unlimited: !readsCounted, plain: !scopedGrants };
  // The organisation binds once per fragment: every use of it in one condition shares its `$n`.
  const owned = (alias: Identifier, o: Param) => sql`${alias.col('author_org')} = ${o}`;
  return {
    canRead,
    canWrite,
    readsTerminology,
    operator: false,
    organizationId: org,
    mayWriteFacility,
    ownerFilter: (alias) => owned(alias, param(org)),
    rowFilter: (alias, type, patient) => {
      const o = param(org);
      if (type && (OWNER_ONLY_TYPES as readonly string[]).includes(type)) return owned(alias, o);
      const rule = consentRule(o, emergency, {
        patients: alias.col('patients'),
        author: alias.col('author_org'),
        dataClass: type ? sql`${dataClassOf(type)}` : CLASS_CASE(alias.col('resource_type')),
        facts: { type: type ? literal(type) : alias.col('resource_type'), content: alias.col('content') },
        type,
      }, only, patient);
      return type ? rule : sql`(CASE WHEN ${alias.col('resource_type')} IN ${OWNER_ONLY_SQL} THEN ${owned(alias, o)} ELSE ${rule} END)`;
    },
    // Refused classes: those no consent covers; for `records`, also not those of which the organisation wrote
    // something for this patient; for `relationship`, not when it registered the patient.
    patientCheck: (checks, basis = 'records') => {
      const o = param(org);
      const own =
        basis === 'records'
          ? sql`EXISTS (SELECT 1 FROM fhir_resources x WHERE x.author_org = ${o} AND x.patients @> ARRAY[k.p]::text[] AND NOT x.deleted AND ${CLASS_CASE(sql`x.resource_type`)} = k.c)`
          : sql`EXISTS (SELECT 1 FROM fhir_resources x WHERE x.resource_type = 'Patient' AND x.id = k.p AND x.author_org = ${o})`;
      return sql`SELECT k.p, k.c FROM ${pairsOf(checks)}
        WHERE NOT ${consentRule(o, emergency, { patients: sql`ARRAY[k.p]::text[]`, author: sql`NULL::text`, dataClass: sql`k.c` }, only)} AND NOT ${own}`;
    },
    statedPurpose: stated,
    readsCounted,
    readFacts: (patients, fetchKey) => sql`WITH a AS (
        SELECT g.consent_id, g.purpose_of_use, g.frequency_count AS n, g.frequency_unit AS unit, g.updated_at FROM consent_access g
        WHERE g.organization_id = ${org} AND g.patient_id = ANY(${patients}::text[]) AND ${IN_FORCE}${stated ? sql` AND g.purpose_of_use = ${literal(stated)}` : sql``}),
      limited AS (SELECT a.consent_id, a.n, a.unit, date_trunc(a.unit, now()) AS w FROM a WHERE a.n IS NOT NULL),${
        fetchKey === undefined
          ? sql`
      f AS (SELECT * FROM limited),`
          : sql`
      first_of_fetch AS (INSERT INTO consent_fetch_keys (consent_id, window_start, fetch_key) SELECT consent_id, w, ${fetchKey} FROM limited
        ON CONFLICT DO NOTHING RETURNING consent_id),
      f AS (SELECT * FROM limited WHERE consent_id IN (SELECT consent_id FROM first_of_fetch)),`
      }
      spent AS (INSERT INTO consent_fetches (consent_id, window_start, fetches) SELECT f.consent_id, f.w, 1 FROM f
        ON CONFLICT (consent_id, window_start) DO UPDATE SET fetches = consent_fetches.fetches + 1 RETURNING consent_id, fetches)
      SELECT ${stated ? sql`${literal(stated)}::text` : sql`(SELECT a.purpose_of_use FROM a ORDER BY a.updated_at DESC LIMIT 1)`} AS purpose,
        (SELECT json_agg(json_build_object('consent_id', f.consent_id, 'retry_after', greatest(1, ceil(extract(epoch FROM f.w + ('1 ' || f.unit)::interval - now())))::int))
         FROM spent JOIN f ON f.consent_id = spent.consent_id WHERE spent.fetches > f.n) AS exceeded`,
  };
}
