import { describe, expect, it } from 'vitest';
import { textOf } from './runtime';

/** Issue 39: toText() of the parts the new record types read as text. */
describe('toText() of questionnaire answers, planned activities and relatives\' conditions', () => {
  it('a questionnaire item: its question, linkId and every answer; a group its items; nothing answered, nothing', () => {
    expect(textOf({ linkId: '44250-9', text: 'Little interest or pleasure in doing things', answer: [{ valueCoding: { system: 'http://loinc.org', code: 'LA6569-3', display: 'Several days' } }] })).toBe(
      'Little interest or pleasure in doing things [44250-9]: Several days',
    );
    expect(textOf({ linkId: '44261-6', answer: [{ valueInteger: 11 }] })).toBe('[44261-6]: 11');
    expect(textOf({ linkId: 'allergies', answer: [{ valueString: 'dust' }, { valueString: 'cats' }] })).toBe('[allergies]: dust, cats');
    expect(textOf({ linkId: 'g', text: 'General', item: [{ linkId: 'g.1', text: 'Sex', answer: [{ valueCoding: { code: 'M', display: 'Male' } }] }, { linkId: 'g.2', text: 'Born', answer: [{ valueDate: '1960-03-13' }] }] })).toBe(
      'Sex [g.1]: Male; Born [g.2]: 1960-03-13',
    );
    expect(textOf({ linkId: 'smoke', text: 'Do you smoke?', answer: [{ valueBoolean: true, item: [{ linkId: 'smoke.1', text: 'How many a day?', answer: [{ valueInteger: 10 }] }] }] })).toBe(
      'Do you smoke? [smoke]: true; How many a day? [smoke.1]: 10',
    );
    expect(textOf({ linkId: 'x', text: 'Unanswered' })).toBeUndefined();
  });

  it('a planned activity: what, and its status; its description when it has no code', () => {
    expect(textOf({ code: { coding: [{ system: 'http://snomed.info/sct', code: '229070002', display: 'Stretching exercises' }] }, status: 'completed' })).toBe('Stretching exercises (completed)');
    expect(textOf({ description: 'Eve will review photos of high and low density foods', status: 'not-started' })).toBe('Eve will review photos of high and low density foods (not-started)');
  });

  it("a relative's condition: what, its onset, its outcome, whether it contributed to death", () => {
    expect(textOf({ code: { text: 'Heart Attack' }, contributedToDeath: true, onsetAge: { value: 74, unit: 'yr' } })).toBe('Heart Attack (onset 74 yr; contributed to death)');
    expect(textOf({ code: { coding: [{ system: 'http://snomed.info/sct', code: '22298006' }] }, outcome: { text: 'Deceased' } })).toBe('22298006 (Deceased)');
  });

  it('leaves the other kinds as they were: a coding, a concept, a component', () => {
    expect(textOf({ system: 'http://snomed.info/sct', code: '1', display: 'One' })).toBe('One');
    expect(textOf({ coding: [{ code: 'A' }], text: 'Concept' })).toBe('Concept');
    expect(textOf({ code: { text: 'Systolic' }, valueQuantity: { value: 120, unit: 'mm[Hg]' } })).toBe('Systolic: 120 mm[Hg]');
  });
});
