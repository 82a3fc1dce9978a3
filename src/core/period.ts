/**
 * Retention periods (`never`, or a number of days, weeks, months or years) and the calendar months of UTC that
 * partitions and archives are made of.
 */

/** How long rows are kept: `undefined` for ever. */
export type Retention = { amount: number; unit: 'd' | 'w' | 'mo' | 'y' } | undefined;

const PERIOD = /^([1-9]\d{0,3})(d|w|mo|y)$/;

/** `never`, `90d`, `8w`, `18mo`, `10y` -> a Retention, or an error message. */
export function parseRetention(text: string): Retention | string {
  const trimmed = text.trim().toLowerCase();
  if (trimmed === 'never') return undefined;
  const match = PERIOD.exec(trimmed);
  if (!match) return `"${text}" is not a retention period (use never, or e.g. 90d, 8w, 18mo, 10y)`;
  return { amount: Number(match[1]), unit: match[2] as 'd' | 'w' | 'mo' | 'y' };
}

/** The instant before which rows are past `retention` at `now` (calendar arithmetic in UTC); undefined: keep all. */
export function cutoff(retention: Retention, now: Date): Date | undefined {
  if (!retention) return undefined;
  const d = new Date(now);
  const { amount, unit } = retention;
  if (unit === 'd') d.setUTCDate(d.getUTCDate() - amount);
  else if (unit === 'w') d.setUTCDate(d.getUTCDate() - 7 * amount);
  else if (unit === 'mo') d.setUTCMonth(d.getUTCMonth() - amount);
  else d.setUTCFullYear(d.getUTCFullYear() - amount);
  return d;
}

/** A calendar month of UTC, `YYYY-MM`. */
export type Month = string;

const MONTH = /^(\d{4})-(0[1-9]|1[0-2])$/;

export function isMonth(text: string): text is Month {
  return MONTH.test(text);
}

/** The first instant of `month`. */
export function monthStart(month: Month): Date {
  const [, y, m] = MONTH.exec(month)!;
  return new Date(Date.UTC(Number(y), Number(m) - 1, 1));
}

/** The month holding `at`, `offset` months on. */
export function monthOf(at: Date, offset = 0): Month {
  const d = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + offset, 1));
  return `${String(d.getUTCFullYear()).padStart(4, '0')}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** [first instant, first instant of the next month). */
export function monthRange(month: Month): { from: Date; to: Date } {
  const from = monthStart(month);
  return { from, to: monthStart(monthOf(from, 1)) };
}
