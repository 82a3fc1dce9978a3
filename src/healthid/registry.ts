import type { Identifier, Patient } from '@medplum/fhirtypes';
import { SqlState, sqlState, type Queryable } from '../db/database';
import { hashKey } from '../core/hash';
import { ApiError, ErrorCode } from '../core/errors';
import { MATCH_RULE_VERSION } from './matching';
import { isCountryCode } from '../core/countries';
import { generateHealthId, HEALTH_ID_SYSTEM, HealthIdErrorCode, healthIdProblem, invalidHealthId } from './healthid';

/** A registered Health ID and the FHIR Patient carrying it. */
export interface HealthIdRecord {
  healthId: string;
  patientId: string;
  countryCode: string;
}

interface Row {
  health_id: string;
  patient_id: string | null;
  country_code: string;
}

const toRecord = (row: Row | undefined): HealthIdRecord | undefined =>
  row?.patient_id ? { healthId: row.health_id, patientId: row.patient_id, countryCode: row.country_code } : undefined;

export async function findByHealthId(db: Queryable, healthId: string): Promise<HealthIdRecord | undefined> {
  const { rows } = await db.query<Row>('SELECT health_id, patient_id, country_code FROM health_ids WHERE health_id = $1', [healthId]);
  return toRecord(rows[0]);
}

/** The registered patient of a Health ID (Connect and SDK paths): 422 when malformed, 404 when unregistered. */
export async function registeredPatient(db: Queryable, healthId: string): Promise<HealthIdRecord> {
  const problem = healthIdProblem(healthId);
  if (problem) throw invalidHealthId(problem);
  const record = await findByHealthId(db, healthId);
  if (!record) throw new ApiError(404, HealthIdErrorCode.notRegistered, `Health ID ${healthId} is valid but not registered`);
  return record;
}

export async function findByMatchKey(db: Queryable, matchKey: string): Promise<HealthIdRecord | undefined> {
  const { rows } = await db.query<Row>('SELECT health_id, patient_id, country_code FROM health_ids WHERE match_key = $1', [matchKey]);
  return toRecord(rows[0]);
}

/** A random 10-digit body collides with probability (IDs issued) / 10^10; a handful of tries is plenty. */
const MAX_ISSUE_ATTEMPTS = 8;

export type Reservation = { reserved: string } | { existing: HealthIdRecord };

/**
 * Reserves a new Health ID for the person with `matchKey`, inside the caller's transaction, or
 * returns the patient who already holds that key.
 *
 * `ON CONFLICT DO NOTHING` is what makes this safe under concurrency: on PostgreSQL an insert that
 * meets an uncommitted row with the same key waits for that transaction; if it commits, the insert
 * is skipped and the next statement sees the winner's row. A conflict on the Health ID itself
 * (two random IDs equal) just draws another one. Call `attachPatient` before committing.
 * `generate` is replaceable so tests can force a collision.
 */
export async function reserveHealthId(
  tx: Queryable,
  countryCode: string,
  matchKey: string | null,
  generate: (countryCode: string) => string = generateHealthId,
): Promise<Reservation> {
  for (let attempt = 0; attempt < MAX_ISSUE_ATTEMPTS; attempt++) {
    const candidate = generate(countryCode);
    const { rowCount } = await tx.query(
      `INSERT INTO health_ids (health_id, country_code, match_key) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
      [candidate, countryCode, matchKey],
    );
    if (rowCount === 1) return { reserved: candidate };
    if (matchKey !== null) {
      const existing = await findByMatchKey(tx, matchKey);
      if (existing) return { existing };
    }
  }
  throw new Error(`No free Health ID after ${MAX_ISSUE_ATTEMPTS} attempts`);
}

export async function attachPatient(tx: Queryable, healthId: string, patientId: string): Promise<void> {
  await tx.query('UPDATE health_ids SET patient_id = $2 WHERE health_id = $1', [healthId, patientId]);
}

/**
 * A Patient's identifiers, or undefined when they are not an array of objects with string Health ID values. The
 * registry reads them before validation, so this takes any JSON.
 */
function identifiersOf(patient: Patient | undefined): Identifier[] | undefined {
  const list: unknown = patient?.identifier;
  if (list === undefined) return [];
  if (!Array.isArray(list)) return undefined;
  const wellFormed = list.every(
    (i: unknown) => i !== null && typeof i === 'object' && !Array.isArray(i) && ((i as Identifier).system !== HEALTH_ID_SYSTEM || typeof (i as Identifier).value === 'string'),
  );
  return wellFormed ? (list as Identifier[]) : undefined;
}

/** The Health ID identifiers a Patient carries (none when its identifiers are malformed). */
export function healthIdsOf(patient: Patient | undefined): string[] {
  return [...new Set((identifiersOf(patient) ?? []).filter((i) => i.system === HEALTH_ID_SYSTEM).map((i) => i.value!))];
}

/** A Health ID the registry took on for a Patient write (the `health_id.created` event). */
export interface Registered {
  healthId: string;
  patientId: string;
  countryCode: string;
}

const conflict = (message: string) => new ApiError(409, ErrorCode.conflict, message);
const refused = (message: string) => new ApiError(400, ErrorCode.badRequest, message, {
  issues: [{ severity: 'error', code: 'business-rule', details: { text: message }, expression: ['Patient.identifier'] }],
});

/**
 * The Patient as it must be stored, with its Health ID: the Health ID is Pont's to manage. An update
 * keeps the ID the patient has (a body that leaves it out gets it back; one that changes it is refused);
 * a new Patient without one is issued one (country from its first address when that is an ISO code,
 * else CM), and one with a valid, free ID is registered under it. Runs in the write's transaction;
 * `registered` is set when the registry took on an ID.
 */
export async function withHealthId(
  tx: Queryable,
  patient: Patient,
  previous: Patient | undefined,
): Promise<{ patient: Patient; registered?: Registered }> {
  const identifiers = identifiersOf(patient);
  if (!identifiers) throw refused('Patient.identifier must be an array of Identifier objects (a Health ID value is a string)');
  const given = healthIdsOf(patient);
  const kept = healthIdsOf(previous)[0] ?? (await heldFor(tx, patient.id!));
  return creating(previous, () => registerFor(tx, patient, identifiers, given, kept));
}

async function registerFor(tx: Queryable, patient: Patient, identifiers: Identifier[], given: string[], kept: string | undefined): Promise<{ patient: Patient; registered?: Registered }> {
  const withId = (healthId: string): Patient => ({
    ...patient,
    identifier: [...identifiers.filter((i) => i.system !== HEALTH_ID_SYSTEM), { system: HEALTH_ID_SYSTEM, value: healthId }],
  });
  if (kept) {
    if (given.length === 0) return { patient: withId(kept) };
    if (given.length === 1 && given[0] === kept) return { patient };
    throw refused(`Patient/${patient.id} holds Health ID ${kept}, which Pont issued: it cannot be changed or replaced`);
  }
  if (given.length > 1) throw refused('A Patient holds at most one Health ID');
  if (given.length === 1) {
    const healthId = given[0]!;
    const problem = healthIdProblem(healthId);
    if (problem) throw refused(`Patient.identifier: ${healthId} is not a valid Health ID: ${problem.message}`);
    const { rows } = await tx.query<Row>('SELECT health_id, patient_id, country_code FROM health_ids WHERE health_id = $1 FOR UPDATE', [healthId]);
    const holder = rows[0]?.patient_id;
    if (holder && holder !== patient.id) throw conflict(`Health ID ${healthId} belongs to another patient`);
    if (rows[0]) {
      await tx.query('UPDATE health_ids SET patient_id = $2 WHERE health_id = $1', [healthId, patient.id]);
      return { patient };
    }
    const countryCode = healthId.slice(0, 2);
    await tx.query('INSERT INTO health_ids (health_id, country_code, patient_id) VALUES ($1, $2, $3)', [healthId, countryCode, patient.id]);
    return { patient, registered: { healthId, patientId: patient.id!, countryCode } };
  }
  const country = patient.address?.[0]?.country;
  const countryCode = country && isCountryCode(country) ? country : 'CM';
  const reservation = await reserveHealthId(tx, countryCode, null);
  const healthId = (reservation as { reserved: string }).reserved;
  await attachPatient(tx, healthId, patient.id!);
  return { patient: withId(healthId), registered: { healthId, patientId: patient.id!, countryCode } };
}

/**
 * With no stored Patient to keep the Health ID from, the one the registry still holds for its id (a Patient deleted
 * and created again keeps its ID, as an update would).
 */
async function heldFor(tx: Queryable, patientId: string): Promise<string | undefined> {
  const { rows } = await tx.query<{ health_id: string }>('SELECT health_id FROM health_ids WHERE patient_id = $1', [patientId]);
  return rows[0]?.health_id;
}

/**
 * A create (no stored Patient) that breaks health_ids' unique indexes lost to a concurrent create of the same Patient
 * id (two PUTs at once: both issued an ID, the later waited on the earlier's row and broke the one-ID-a-patient
 * index): it is told as a serialization failure, so its transaction runs again (retryContention) and, seeing the
 * earlier's committed Patient, writes as an update keeping its ID. Not an advisory lock per created id, as
 * ce2fe8e took: a transaction Bundle creates up to 10,000 Patients, and three such at once held 30,000 locks, past
 * PostgreSQL's shared lock table (64 x max_connections by default): 'out of shared memory' for them and for every
 * other session wanting a lock meanwhile.
 */
async function creating<T>(previous: Patient | undefined, work: () => Promise<T>): Promise<T> {
  return previous ? work() : lostToConcurrentWrite(work, 'A concurrent create of this Patient id registered it first');
}

/**
 * Runs `work`; a violation of health_ids' unique indexes in it is what a concurrent write of the same registry row
 * meeting it looks like, told as a serialization failure so that retryContention runs the whole transaction again
 * (which then sees the other's committed row). The registry takes no lock per row: a Bundle writes 10,000 of them.
 */
async function lostToConcurrentWrite<T>(work: () => Promise<T>, what: string): Promise<T> {
  try {
    return await work();
  } catch (err) {
    const constraint = (err as { constraint?: unknown }).constraint;
    if (sqlState(err) !== SqlState.uniqueViolation || typeof constraint !== 'string' || !constraint.startsWith('health_ids_')) throw err;
    throw Object.assign(new Error(`${what} (${constraint})`), { code: SqlState.serializationFailure });
  }
}

/**
 * Keeps the match key of a registered patient in step with the Patient as stored (or clears it when
 * the Patient is deleted). A key another patient already holds is left to that patient (two people
 * with identical demographics: resolve finds the first). `key` null: nothing to match on.
 *
 * No lock on the key: a write of many Patients (a Bundle of 10,000) would hold one advisory lock each, past
 * PostgreSQL's shared lock table ('out of shared memory' for every session). Two writes giving one key to two
 * patients at once meet on health_ids' unique index instead: the later one's violation is raised as a serialization
 * failure, so its transaction runs again and, seeing the earlier's key, leaves its patient without it (a resolve,
 * which holds the key's lock, then finds the earlier's patient).
 */
export async function updateMatchKey(tx: Queryable, patientId: string, key: string | null): Promise<void> {
  await lostToConcurrentWrite(
    () =>
      tx.query(
        `UPDATE health_ids SET match_key_version = $3,
           match_key = CASE WHEN $2::text IS NULL OR EXISTS (SELECT 1 FROM health_ids o WHERE o.match_key = $2 AND o.patient_id IS DISTINCT FROM $1) THEN NULL ELSE $2 END
         WHERE patient_id = $1`,
        [patientId, key, MATCH_RULE_VERSION],
      ),
    'A concurrent write gave this match key to another patient first',
  );
}

/**
 * Serialises everything done for one match key until the transaction ends (resolve's look-up-or-create,
 * a Patient write that takes the key), on any number of processes.
 */
export async function lockMatchKey(tx: Queryable, key: string): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1::bigint)', [hashKey('match-key', key)]);
}

/** Health IDs of FHIR Patient ids (those that have one). */
export async function healthIdsByPatient(db: Queryable, patientIds: string[]): Promise<Map<string, string>> {
  if (!patientIds.length) return new Map();
  const { rows } = await db.query<{ patient_id: string; health_id: string }>(
    'SELECT patient_id, health_id FROM health_ids WHERE patient_id = ANY($1::text[])',
    [patientIds],
  );
  return new Map(rows.map((r) => [r.patient_id, r.health_id]));
}
