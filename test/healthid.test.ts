import { describe, expect, it } from 'vitest';
import {
  HEALTH_ID_PATTERN,
  HealthIdErrorCode,
  checkDigits,
  generateHealthId,
  healthIdProblem,
  isValidHealthId,
  mod97,
} from '../src/healthid/healthid';

/** An independent ISO 7064 MOD 97-10 check: letters to numbers, one big integer, remainder 1. */
function independentMod97Valid(id: string): boolean {
  const digits = [...id].map((c) => (/[A-Z]/.test(c) ? String(c.charCodeAt(0) - 55) : c)).join('');
  return /^\d+$/.test(digits) && BigInt(digits) % 97n === 1n;
}

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const sample = Array.from({ length: 200 }, (_, i) => generateHealthId(i % 2 ? 'CM' : 'NG'));

describe('Health ID grammar and checksum', () => {
  it('computes ISO 7064 MOD 97-10 as the standard and IBAN do', () => {
    expect(checkDigits('794')).toBe('44'); // the worked example of ISO 7064
    const iban = 'GB82WEST12345698765432';
    expect(mod97(iban.slice(4) + iban.slice(0, 4))).toBe(1); // IBAN check: first four characters moved to the end
    expect(mod97('GB83WEST12345698765432'.slice(4) + 'GB83')).not.toBe(1);
  });

  it('issues IDs of the documented grammar that an independent MOD 97-10 routine accepts', () => {
    for (const id of sample) {
      expect(id).toMatch(HEALTH_ID_PATTERN);
      expect(id).toHaveLength(14);
      expect(independentMod97Valid(id)).toBe(true);
      expect(isValidHealthId(id)).toBe(true);
    }
    expect(sample.filter((id) => id.startsWith('CM'))).toHaveLength(100);
    expect(new Set(sample).size).toBe(sample.length);
  });

  it('refuses every single-character substitution', () => {
    for (const id of sample.slice(0, 50)) {
      for (let i = 0; i < id.length; i++) {
        for (const c of ALPHABET + 'a-é ') {
          if (c === id[i]) continue;
          const changed = id.slice(0, i) + c + id.slice(i + 1);
          expect(isValidHealthId(changed), changed).toBe(false);
          expect(independentMod97Valid(changed) && HEALTH_ID_PATTERN.test(changed), changed).toBe(false);
        }
      }
    }
  });

  it('refuses adjacent and jump transpositions and twin errors', () => {
    for (const id of sample) {
      for (let i = 0; i + 1 < id.length; i++) {
        const swapped = id.slice(0, i) + id[i + 1] + id[i] + id.slice(i + 2);
        if (swapped !== id) expect(isValidHealthId(swapped), swapped).toBe(false);
      }
      for (let i = 0; i + 2 < id.length; i++) {
        const jumped = id.slice(0, i) + id[i + 2] + id[i + 1] + id[i] + id.slice(i + 3);
        if (jumped !== id) expect(isValidHealthId(jumped), jumped).toBe(false);
      }
      for (let i = 2; i + 1 < id.length; i++) {
        if (id[i] !== id[i + 1]) continue;
        for (const d of '0123456789') {
          if (d === id[i]) continue;
          const twin = id.slice(0, i) + d + d + id.slice(i + 2);
          expect(isValidHealthId(twin), twin).toBe(false);
        }
      }
    }
  });

  it('refuses insertions and deletions', () => {
    for (const id of sample.slice(0, 20)) {
      for (let i = 0; i < id.length; i++) {
        expect(isValidHealthId(id.slice(0, i) + id.slice(i + 1))).toBe(false);
        expect(isValidHealthId(id.slice(0, i) + '5' + id.slice(i))).toBe(false);
      }
    }
  });

  it('names what is wrong', () => {
    const id = generateHealthId('CM');
    const badCheck = id.slice(0, 12) + String((Number(id.slice(12)) + 1) % 100).padStart(2, '0');
    expect(healthIdProblem(badCheck)?.code).toBe(HealthIdErrorCode.checksum);
    expect(healthIdProblem(id.toLowerCase())?.code).toBe(HealthIdErrorCode.malformed);
    expect(healthIdProblem(` ${id}`)?.code).toBe(HealthIdErrorCode.malformed);
    expect(healthIdProblem('')?.code).toBe(HealthIdErrorCode.malformed);
    const xx = 'XX1234567890';
    expect(healthIdProblem(xx + checkDigits(xx))?.code).toBe(HealthIdErrorCode.unknownCountry);
    expect(healthIdProblem(id)).toBeUndefined();
  });
});
