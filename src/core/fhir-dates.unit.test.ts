import { describe, expect, it } from 'vitest';
import { fhirDateProblem, isFhirDate, isFhirDateTime, isFhirInstant } from './fhir-dates';

describe('isFhirDate', () => {
  it('takes the three precisions R4 allows, and the years 0001-9999', () => {
    for (const v of ['2024', '2024-02', '2024-02-29', '0001', '0001-01-01', '9999-12-31', '1987-06']) expect(isFhirDate(v), v).toBe(true);
  });
  it('29 February only in a leap year: every 4th, not a century unless it is a 400th (1900 no, 2000 yes)', () => {
    expect(isFhirDate('2024-02-29')).toBe(true);
    expect(isFhirDate('2000-02-29')).toBe(true);
    expect(isFhirDate('1600-02-29')).toBe(true);
    expect(isFhirDate('2023-02-29')).toBe(false);
    expect(isFhirDate('1900-02-29')).toBe(false);
    expect(isFhirDate('2100-02-29')).toBe(false);
    expect(isFhirDate('2023-02-28')).toBe(true);
  });
  it('refuses days the month does not have, month 13, day and month 00, year 0000', () => {
    for (const v of ['2023-02-30', '2024-02-30', '2023-04-31', '2023-06-31', '2023-09-31', '2023-11-31', '2023-13-01', '2023-13', '2023-00', '2023-01-00', '2023-01-32', '0000', '0000-01-01'])
      expect(isFhirDate(v), v).toBe(false);
    for (const v of ['2023-01-31', '2023-03-31', '2023-05-31', '2023-07-31', '2023-08-31', '2023-10-31', '2023-12-31', '2023-04-30']) expect(isFhirDate(v), v).toBe(true);
  });
  it('refuses other forms: a time, short parts, separators, whitespace, non-strings', () => {
    for (const v of ['2023-01-01T10:00:00Z', '2023-1-5', '23', '199', '20230101', '2023/01/01', ' 2023', '2023-01-01 ', '', 12, null, undefined]) expect(isFhirDate(v), String(v)).toBe(false);
  });
});

describe('isFhirDateTime', () => {
  it('takes a date of any precision, or a day with a time to the second and a zone', () => {
    for (const v of ['2024', '2024-02', '2024-02-29', '2024-02-29T10:00:00Z', '2024-02-29T23:59:59.123456789+14:00', '2024-02-29T00:00:00-12:30', '2016-12-31T23:59:60Z'])
      expect(isFhirDateTime(v), v).toBe(true);
  });
  it('refuses an impossible day whatever the time, and what R4 regex refuses (24:00, no seconds, no zone, +15:00)', () => {
    for (const v of ['2023-02-29T10:00:00Z', '1900-02-29T00:00:00Z', '2023-04-31T10:00:00+01:00', '2024-02-29T24:00:00Z', '2024-02-29T10:00Z', '2024-02-29T10:00:00', '2024-02-29T10', '2024-02-29T10:00:00+15:00', '2024-02-29T10:60:00Z', '2024-02-29T10:00:61Z', '2024-02Z'])
      expect(isFhirDateTime(v), v).toBe(false);
  });
});

describe('isFhirInstant', () => {
  it('needs the day, the time to the second and a zone; the day a real one', () => {
    expect(isFhirInstant('2024-02-29T10:00:00Z')).toBe(true);
    expect(isFhirInstant('2024-02-29T10:00:00.5-05:00')).toBe(true);
    for (const v of ['2024-02-29', '2024', '2023-02-29T10:00:00Z', '2024-02-29T10:00:00']) expect(isFhirInstant(v), v).toBe(false);
  });
});

describe('fhirDateProblem', () => {
  it('says whether the form or the day is wrong', () => {
    expect(fhirDateProblem('2024-02-29', 'date')).toBeUndefined();
    expect(fhirDateProblem('2023-02-29', 'date')).toBe('is not a day of the calendar (2023-02 has 28 days)');
    expect(fhirDateProblem('2023-04-31T10:00:00Z', 'dateTime')).toBe('is not a day of the calendar (2023-04 has 30 days)');
    expect(fhirDateProblem('2023-13-01', 'date')).toMatch(/^is not a FHIR date \(YYYY, YYYY-MM or YYYY-MM-DD\)$/);
    expect(fhirDateProblem('2023-01-01', 'instant')).toMatch(/^is not a FHIR instant/);
  });
});
