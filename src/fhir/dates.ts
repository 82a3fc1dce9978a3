/**
 * FHIR dates as the instant range they cover: `2020` is the whole year, `2020-02` all of February,
 * `2020-02-03T10:05` one minute. A dateTime without a zone is taken as UTC. Returns undefined
 * for anything that is not a real date.
 */
const DATE_TIME =
  /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2})(?::(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/;

export interface InstantRange {
  low: string;
  high: string;
}

/** The instants both databases store: 0001-01-01 to 9999-12-31 UTC (a zone can push a valid date past them). */
const MIN_MS = new Date('0001-01-01T00:00:00.000Z').getTime();
const MAX_MS = new Date('9999-12-31T23:59:59.999Z').getTime();

/** True when both databases can store this instant (ms since the epoch). */
export const isStorableInstant = (ms: number): boolean => ms >= MIN_MS && ms <= MAX_MS;

/** An instant as ISO 8601, clamped to what the databases store (JavaScript writes year 10000 as +010000-…). */
export function isoInstant(ms: number): string {
  return new Date(Math.min(MAX_MS, Math.max(MIN_MS, ms))).toISOString();
}

/** Date.UTC for any year: Date.UTC maps years 0-99 to 1900-1999 (2000 years on, the calendar is the same). */
function utc(year: number, month: number, day: number, h = 0, mi = 0, s = 0, ms = 0): number {
  if (year >= 100) return Date.UTC(year, month, day, h, mi, s, ms);
  const date = new Date(Date.UTC(year + 2000, month, day, h, mi, s, ms));
  date.setUTCFullYear(date.getUTCFullYear() - 2000);
  return date.getTime();
}

export function dateRange(value: string): InstantRange | undefined {
  const m = DATE_TIME.exec(value);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const year = Number(y);
  const month = mo ? Number(mo) : 1;
  const day = d ? Number(d) : 1;
  if (month < 1 || month > 12 || day < 1 || day > new Date(utc(year, month, 0)).getUTCDate()) return undefined;
  if ((h && Number(h) > 23) || (mi && Number(mi) > 59) || (s && Number(s) > 60)) return undefined;
  let offsetMs = 0;
  if (zone && zone !== 'Z') {
    const sign = zone[0] === '-' ? -1 : 1;
    offsetMs = sign * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6))) * 60_000;
  }
  const ms = frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0;
  const start = utc(year, month - 1, day, Number(h ?? 0), Number(mi ?? 0), Number(s ?? 0), ms) - offsetMs;
  let end: number;
  if (!mo) end = utc(year + 1, 0, 1) - offsetMs;
  else if (!d) end = utc(year, month, 1) - offsetMs;
  else if (!h) end = utc(year, month - 1, day + 1) - offsetMs;
  else if (!mi) end = start + 3_600_000;
  else if (!s) end = start + 60_000;
  else if (!frac) end = start + 1000;
  else end = start + Math.max(1, 10 ** (3 - Math.min(frac.length, 3)));
  return { low: isoInstant(start), high: isoInstant(end - 1) };
}
