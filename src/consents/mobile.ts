import { createHash, randomBytes, randomInt } from 'node:crypto';
import type { Database, Queryable } from '../db/database';
import type { PatientPrincipal } from '../core/principal';

/** Pairing codes: 8 characters of Crockford's base32 (no I, L, O, U: nothing to misread), 40 bits. */
const CODE_ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CODE_LENGTH = 8;
/** A pairing code is good for this long, and for this many wrong guesses; then it is dead. */
export const PAIRING_CODE_TTL_SECONDS = 10 * 60;
export const PAIRING_CODE_MAX_ATTEMPTS = 5;
/** A patient token is good for this long (the app pairs again after). */
export const PATIENT_TOKEN_TTL_SECONDS = 30 * 24 * 3600;
export const PATIENT_TOKEN_PREFIX = 'pat_';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
/** Codes are compared without regard to case, spaces or hyphens (read aloud, typed on a phone). */
const normalizeCode = (code: string) => code.toUpperCase().replace(/[\s-]/g, '');

/**
 * Locks the Health ID's live pairing codes, in one order (code_hash) for every transaction that touches them, and
 * answers them: issuing a code and exchanging one both start here, so concurrent requests for one Health ID queue
 * on the same rows in the same order and never deadlock.
 */
async function lockLiveCodes(sql: Queryable, healthId: string) {
  const { rows } = await sql.query<{ code_hash: string; patient_id: string; issued_by_org: string | null; usable: boolean }>(
    `SELECT code_hash, patient_id, issued_by_org, (expires_at > now() AND attempts < $2) AS usable FROM mobile_pairing_codes
     WHERE health_id = $1 AND used_at IS NULL ORDER BY code_hash FOR UPDATE`,
    [healthId, PAIRING_CODE_MAX_ATTEMPTS],
  );
  return rows;
}

/** A new pairing code for a patient; only its hash is stored. Earlier unused codes of the patient stop working. */
export async function issuePairingCode(sql: Queryable, patient: { patientId: string; healthId: string }, issuedBy: { clientId: string; organizationId: string }): Promise<{ code: string; expires_at: string }> {
  let code = '';
  for (let i = 0; i < CODE_LENGTH; i++) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  const expiresAt = new Date(Date.now() + PAIRING_CODE_TTL_SECONDS * 1000).toISOString();
  const live = await lockLiveCodes(sql, patient.healthId);
  if (live.length) await sql.query('UPDATE mobile_pairing_codes SET used_at = now() WHERE code_hash = ANY($1::text[])', [live.map((c) => c.code_hash)]);
  await sql.query(
    'INSERT INTO mobile_pairing_codes (code_hash, patient_id, health_id, issued_by, issued_by_org, expires_at) VALUES ($1, $2, $3, $4, $5, $6)',
    [sha256(`${patient.healthId}:${code}`), patient.patientId, patient.healthId, issuedBy.clientId, issuedBy.organizationId, expiresAt],
  );
  return { code: `${code.slice(0, 4)}-${code.slice(4)}`, expires_at: expiresAt };
}

/**
 * Exchanges a pairing code for a patient token: single use, before it expires, within its attempts. Every
 * failure looks the same (no hint whether the Health ID exists); a wrong code counts against the Health ID's
 * live codes. Returns undefined on failure. The Health ID's live codes are locked first (lockLiveCodes), so of
 * concurrent exchanges of one code exactly one gets the token and the others find it used.
 */
export async function exchangePairingCode(sql: Queryable, healthId: string, code: string): Promise<{ token: string; expiresIn: number } | undefined> {
  const live = await lockLiveCodes(sql, healthId);
  const hash = sha256(`${healthId}:${normalizeCode(code)}`);
  const match = live.find((c) => c.code_hash === hash && c.usable);
  if (!match) {
    if (live.length) await sql.query('UPDATE mobile_pairing_codes SET attempts = attempts + 1 WHERE code_hash = ANY($1::text[])', [live.map((c) => c.code_hash)]);
    return undefined;
  }
  await sql.query('UPDATE mobile_pairing_codes SET used_at = now() WHERE code_hash = $1', [match.code_hash]);
  const token = `${PATIENT_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
  await sql.query(
    `INSERT INTO mobile_tokens (token_hash, patient_id, health_id, paired_by_org, expires_at) VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))`,
    [sha256(token), match.patient_id, healthId, match.issued_by_org, PATIENT_TOKEN_TTL_SECONDS],
  );
  return { token, expiresIn: PATIENT_TOKEN_TTL_SECONDS };
}

/** The patient a live `pat_` token belongs to, or undefined. */
export async function authenticatePatient(db: Queryable, token: string): Promise<PatientPrincipal | undefined> {
  if (!token.startsWith(PATIENT_TOKEN_PREFIX) || token.length > 128) return undefined;
  const { rows } = await db.query<{ patient_id: string; health_id: string; paired_by_org: string | null }>(
    'SELECT patient_id, health_id, paired_by_org FROM mobile_tokens WHERE token_hash = $1 AND revoked_at IS NULL AND expires_at > now()',
    [sha256(token)],
  );
  return rows[0] && { kind: 'patient', patientId: rows[0].patient_id, healthId: rows[0].health_id, pairedBy: rows[0].paired_by_org ?? undefined };
}

/** Revokes a patient token (the app signs out). */
export async function revokePatientToken(db: Queryable, token: string): Promise<void> {
  await db.query('UPDATE mobile_tokens SET revoked_at = now() WHERE token_hash = $1 AND revoked_at IS NULL', [sha256(token)]);
}

/** Pairing codes and patient tokens as the access layer and the mobile routes use them. */
export class PatientTokens {
  constructor(private readonly db: Database) {}

  /** exchangePairingCode, in a transaction of its own. */
  exchange(healthId: string, code: string): Promise<{ token: string; expiresIn: number } | undefined> {
    return this.db.transaction((tx) => exchangePairingCode(tx, healthId, code));
  }

  authenticate(token: string): Promise<PatientPrincipal | undefined> {
    return authenticatePatient(this.db, token);
  }

  revoke(token: string): Promise<void> {
    return revokePatientToken(this.db, token);
  }
}
