import { describe, expect, it } from 'vitest';
import { loadMappings, MappingValueError } from './index';

/** A map's date and date-time fields hold days of the calendar (src/core/fhir-dates.ts), as FHIR validation does. */
describe('date fields of the maps', () => {
  const maps = loadMappings();
  const lab = maps.get('lab-result');
  const patient = maps.get('patient-demographics');
  const result = { id: '0b0a3c57-0d55-4b2e-9a39-6f3f2b9a1c03', patient_id: '5d9f1a2e-8c4b-4f6e-9d3a-2b7c1e0f4a11', test_name: 'Hb', status: 'final' };

  it('refuses a date-time on a day the month does not have, naming the field (Date.parse rolls 2023-02-29 over to 1 March)', () => {
    for (const effective_at of ['2023-02-29T10:00:00Z', '1900-02-29', '2023-04-31T00:00:00+01:00'])
      expect(() => lab.toFhir({ ...result, effective_at }), effective_at).toThrow(new MappingValueError('lab-result', 'effective_at', `"${effective_at}" is not a valid date-time`));
  });

  it('refuses such a date, and takes 29 February of a leap year and partial dates', () => {
    expect(() => patient.toFhir({ id: 'p-1', date_of_birth: '2023-02-30' })).toThrow(new MappingValueError('patient-demographics', 'date_of_birth', '"2023-02-30" is not a valid date'));
    for (const date_of_birth of ['2024-02-29', '2000-02-29', '1987', '1987-06']) expect(patient.toFhir({ id: 'p-1', date_of_birth }), date_of_birth).toMatchObject({ birthDate: date_of_birth });
    expect(lab.toFhir({ ...result, effective_at: '2024-02-29T10:00:00Z' })).toMatchObject({ effectiveDateTime: '2024-02-29T10:00:00Z' });
  });

  it('the published shape of a map (a pushed record) refuses it too', () => {
    const shape = lab.shape().partial();
    const refused = shape.safeParse({ effective_at: '2023-02-29T10:00:00Z' });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([['effective_at', expect.stringMatching(/calendar/)]]);
    expect(shape.safeParse({ effective_at: '2024-02-29T10:00:00Z' }).success).toBe(true);
    expect(patient.shape().partial().safeParse({ date_of_birth: '1900-02-29' }).success).toBe(false);
  });
});
