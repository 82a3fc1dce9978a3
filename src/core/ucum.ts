/**
 * Whether a unit as written is a UCUM expression (https://ucum.org/ucum, its grammar §§ 2-4 and the units of clinical
 * measurement), so that a result pushed with `g/dL` is written as a Quantity FHIR readers can compute with
 * (`system: http://unitsofmeasure.org`, `code`), and one with `x10^9/L` or `cells/uL` stays a unit in words. The check is
 * conservative: the atoms are those of clinical results (mass, volume, amount, enzyme activity, time, pressure,
 * temperature, counts, arbitrary units), with the metric ones' prefixes; a unit outside them is taken as words, never
 * claimed as UCUM. Case-sensitive, as UCUM's `c/s` codes are (`mL` and `ml` are both UCUM; `MG/DL` is not).
 */
export function isUcum(unit: string): boolean {
  if (unit.length === 0 || unit.length > 100 || /\s/.test(unit)) return false;
  let at = 0;
  // A term: `/` first (a reciprocal), then components joined by `.` or `/`.
  if (unit[at] === '/') at++;
  for (;;) {
    const next = component(unit, at);
    if (next === undefined) return false;
    at = next;
    if (at === unit.length) return true;
    if (unit[at] !== '.' && unit[at] !== '/') return false;
    at++;
  }
}

/** The end of the component starting at `at` (an annotated unit with its exponent, a factor, an annotation, a term in brackets), or undefined. */
function component(unit: string, at: number): number | undefined {
  if (unit[at] === '(') {
    const close = unit.indexOf(')', at);
    return close > at + 1 && isUcum(unit.slice(at + 1, close)) ? close + 1 : undefined;
  }
  if (unit[at] === '{') {
    const close = unit.indexOf('}', at);
    return close > at && !unit.slice(at + 1, close).includes('{') ? close + 1 : undefined;
  }
  const factor = /^(10[*^][+-]?\d{1,2}|\d{1,9})/.exec(unit.slice(at))?.[0];
  if (factor) return annotated(unit, at + factor.length);
  for (let end = Math.min(unit.length, at + 12); end > at; end--) {
    const symbol = unit.slice(at, end);
    if (isAtom(symbol)) return annotated(unit, exponent(unit, end));
  }
  return undefined;
}

/** After an exponent (`m2`, `s-1`) if there is one. */
function exponent(unit: string, at: number): number {
  const digits = /^[+-]?\d{1,2}/.exec(unit.slice(at))?.[0];
  return at + (digits?.length ?? 0);
}

/** After an annotation (`{creat}`) if there is one. */
function annotated(unit: string, at: number): number | undefined {
  if (unit[at] !== '{') return at;
  const close = unit.indexOf('}', at);
  return close > at ? close + 1 : undefined;
}

function isAtom(symbol: string): boolean {
  if (ATOMS.has(symbol)) return true;
  for (const prefix of PREFIXES) if (symbol.length > prefix.length && symbol.startsWith(prefix) && METRIC.has(symbol.slice(prefix.length))) return true;
  return false;
}

/** UCUM's prefixes, longest first (`da` before `d`). */
const PREFIXES = ['da', 'Y', 'Z', 'E', 'P', 'T', 'G', 'M', 'k', 'h', 'd', 'c', 'm', 'u', 'n', 'p', 'f', 'a', 'z', 'y'];
/** Metric atoms of clinical measurement (they take prefixes). */
const METRIC = new Set(['g', 'L', 'l', 'mol', 'm', 's', 'eq', 'U', 'kat', 'Pa', 'bar', 'Hz', 'N', 'J', 'W', 'V', 'A', 'Ohm', 'S', 'K', 'Cel', 'osm', 'cal', 'Bq', 'Gy', 'Sv', 'm[Hg]', 'm[H2O]', 'g%', 'ar', 't', 'B', 'dB', '[iU]', '[IU]']);
/** Atoms that take no prefix. */
const ATOMS = new Set([
  ...METRIC,
  'min', 'h', 'd', 'wk', 'mo', 'a', '%', 'deg', '[degF]', '[pH]', '[ppm]', '[ppb]', '[ppth]', '[pptr]', "[arb'U]", '[HPF]', '[LPF]', '[drp]',
  '[lb_av]', '[oz_av]', '[in_i]', '[ft_i]', '[gal_us]', '[foz_us]', '[tsp_us]', '[tbs_us]', '[cup_us]', '[sft_i]', '[sin_i]',
  '[CFU]', '[PFU]', '[FFU]', "[GPL'U]", "[MPL'U]", "[APL'U]", "[USP'U]", "[tb'U]", "[beth'U]", '[kp_C]', '[hp_X]', '[hp_C]', '[S]', '[Lf]',
]);
