import type { Queryable } from '../db/database';
import { generateHealthId } from './healthid';

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
