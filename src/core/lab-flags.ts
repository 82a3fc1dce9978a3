/**
 * Does the lab record's `flag` (a v3 ObservationInterpretation code) flag the result? What `flagged` says wherever it
 * is given (the SDK push's answer, `lab_result.released`): every code but those of a result as expected, normal (N),
 * negative (NEG), not detected (ND), non-reactive (NR) or expected (EXP); a positive, reactive, high or low result, an
 * equivocal or a resistant one is flagged.
 */
const AS_EXPECTED: ReadonlySet<string> = new Set(['N', 'NEG', 'ND', 'NR', 'EXP']);

export function flagsResult(flag: string): boolean {
  return !AS_EXPECTED.has(flag);
}
