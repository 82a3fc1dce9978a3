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

export function dateRange(value: string): InstantRange | undefined {
  const m = DATE_TIME.exec(value);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const year = Number(y);
  const month = mo ? Number(mo) : 1;
  const day = d ? Number(d) : 1;
  if (month < 1 || month > 12 || day < 1 || day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return undefined;
  if ((h && Number(h) > 23) || (mi && Number(mi) > 59) || (s && Number(s) > 60)) return undefined;
  let offsetMs = 0;
  if (zone && zone !== 'Z') {
    const sign = zone[0] === '-' ? -1 : 1;
    offsetMs = sign * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6))) * 60_000;
  }
  const ms = frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0;
  const start = Date.UTC(year, month - 1, day, Number(h ?? 0), Number(mi ?? 0), Number(s ?? 0), ms) - offsetMs;
  let end: number;
  if (!mo) end = Date.UTC(year + 1, 0, 1) - offsetMs;
  else if (!d) end = Date.UTC(year, month, 1) - offsetMs;
  else if (!h) end = Date.UTC(year, month - 1, day + 1) - offsetMs;
  else if (!mi) end = start + 3_600_000;
  else if (!s) end = start + 60_000;
  else if (!frac) end = start + 1000;
  else end = start + Math.max(1, 10 ** (3 - Math.min(frac.length, 3)));
  return { low: new Date(start).toISOString(), high: new Date(end - 1).toISOString() };
}
