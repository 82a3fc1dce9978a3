import { randomInt } from 'node:crypto';
import { ApiError } from '../core/errors';
import { isCountryCode } from '../core/countries';

/**
 * Health ID grammar:  CC DDDDDDDDDD KK
 *   CC  ISO 3166-1 alpha-2 country code, upper case (the country that issued it)
 *   D   10 digits, random (they reveal nothing about the patient or how many IDs exist)
 *   KK  2 check digits, ISO 7064 MOD 97-10 over the whole ID
 * Example: CM482930174629. Letters count as numbers IBAN-style (A=10 … Z=35), so the whole ID read
 * as one number is ≡ 1 (mod 97). That detects every single-character substitution, every adjacent
 * and jump transposition and every twin error, and any ISO 7064 / IBAN mod-97 routine can check it.
 */
export const HEALTH_ID_SYSTEM = 'https://pont.health/fhir/sid/health-id';
export const HEALTH_ID_BODY_DIGITS = 10;
export const HEALTH_ID_PATTERN = /^[A-Z]{2}[0-9]{12}$/;
export const HEALTH_ID_LENGTH = 2 + HEALTH_ID_BODY_DIGITS + 2;

export const HealthIdErrorCode = {
  malformed: 'HEALTH_ID_MALFORMED',
  checksum: 'HEALTH_ID_CHECKSUM_INVALID',
  unknownCountry: 'HEALTH_ID_UNKNOWN_COUNTRY',
  /** Valid, but no patient holds it (404). */
  notRegistered: 'HEALTH_ID_NOT_REGISTERED',
} as const;

/** Remainder mod 97 of the ID read as a number, letters as two-digit numbers (A=10 … Z=35). */
export function mod97(text: string): number {
  let remainder = 0;
  for (const ch of text) {
    const value = Number.parseInt(ch, 36);
    if (Number.isNaN(value)) throw new Error(`Not alphanumeric: ${JSON.stringify(ch)}`);
    remainder = (remainder * (value < 10 ? 10 : 100) + value) % 97;
  }
  return remainder;
}

/** The two check digits that make `prefix + body + KK` ≡ 1 (mod 97), as ISO 7064 MOD 97-10 defines them. */
export function checkDigits(withoutCheck: string): string {
  const check = 98 - mod97(withoutCheck + '00');
  return String(check).padStart(2, '0');
}

/** A fresh random Health ID for `country` (uniqueness is the registry's job). */
export function generateHealthId(country: string): string {
  if (!isCountryCode(country)) throw new Error(`Not an ISO 3166-1 alpha-2 code: ${country}`);
  let body = '';
  for (let i = 0; i < HEALTH_ID_BODY_DIGITS; i++) body += String(randomInt(10));
  return country + body + checkDigits(country + body);
}

export type HealthIdProblem = { code: string; message: string };

/** Why `value` is not a Health ID, or undefined when it is one (format, country and checksum all good). */
export function healthIdProblem(value: string): HealthIdProblem | undefined {
  if (!HEALTH_ID_PATTERN.test(value)) {
    return {
      code: HealthIdErrorCode.malformed,
      message: `A Health ID is 2 upper-case country letters followed by ${HEALTH_ID_BODY_DIGITS + 2} digits (${HEALTH_ID_LENGTH} characters, e.g. CM482930174629)`,
    };
  }
  if (!isCountryCode(value.slice(0, 2))) {
    return { code: HealthIdErrorCode.unknownCountry, message: `Health ID prefix ${value.slice(0, 2)} is not an ISO 3166-1 country code` };
  }
  if (mod97(value) !== 1) {
    return { code: HealthIdErrorCode.checksum, message: 'Health ID check digits do not match (ISO 7064 MOD 97-10): it was probably mistyped' };
  }
  return undefined;
}

export function isValidHealthId(value: string): boolean {
  return healthIdProblem(value) === undefined;
}

/** The 422 Error for an invalid Health ID, naming what is wrong in `error_code`. */
export function invalidHealthId(problem: HealthIdProblem): ApiError {
  return new ApiError(422, problem.code, problem.message);
}
