import { describe, expect, it } from 'vitest';
import { isUcum } from './ucum';

describe('isUcum: a unit as written, UCUM or words', () => {
  it.each(['g/dL', 'mg/L', 'mmol/L', 'mmol/l', 'mg/dl', 'U/L', '[iU]/L', 'm[IU]/L', '%', '/uL', '10*3/uL', '10*9/L', '10^9/L', 'fL', 'pg', 'ng/mL', 'umol/L',
    'mL/min/{1.73_m2}', 'kg/m2', 'mm[Hg]', 'cm[H2O]', 'Cel', '[degF]', 'mosm/kg', 'mmol/mol', 's', 'min', 'h', 'd', 'a', '/[HPF]', '{ratio}', 'g.m-2', '[pH]', 'meq/L', 'ug/(kg.min)', 'kU/L', 'L/min'])(
    '%s is UCUM',
    (unit) => expect(isUcum(unit)).toBe(true),
  );

  it.each(['x10^9/L', 'cells/uL', 'IU/L', 'mEq/L', 'mmHg', '°C', 'MG/DL', 'mg / dL', '', 'per HPF', 'g/', '/', 'g//L', 'mg/{', '(mg', '()', 'mmol/L)', 'positive', 'x'.repeat(200)])(
    '%j is no UCUM: kept as words',
    (unit) => expect(isUcum(unit)).toBe(false),
  );
});
