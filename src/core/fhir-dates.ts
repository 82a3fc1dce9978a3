/**
 * FHIR R4's date, dateTime and instant, as every door of Pont judges them (FHIR validation, the maps' Connect fields,
 * the patient resolve route): R4's regular expressions (datatypes.html), and a real day of the calendar. R4's regex
 * allows 2023-02-30 (its day is any of 01-31); HAPI refuses it, and so does Pont: `Date.parse` would roll it over to
 * 2 March. Kept as the regex allows: years 0001-9999, hours 00-23, second 60 (a leap second), offsets -14:00 to +14:00.
 */
const YEAR = '([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)';
const TIME = 'T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?(Z|(\\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))';

/** R4's forms alone (for a published `pattern`); a value also needs a real day: isFhirDate / isFhirDateTime. */
export const DATE = new RegExp(`^${YEAR}(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2][0-9]|3[0-1]))?)?$`);
export const DATE_TIME = new RegExp(`^${YEAR}(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2][0-9]|3[0-1])(${TIME})?)?)?$`);
const INSTANT = new RegExp(`^${YEAR}-(0[1-9]|1[0-2])-(0[1-9]|[1-2][0-9]|3[0-1])${TIME}$`);

export type FhirDateType = 'date' | 'dateTime' | 'instant';

const FORMS: Record<FhirDateType, RegExp> = { date: DATE, dateTime: DATE_TIME, instant: INSTANT };

/** Days in a month of the proleptic Gregorian calendar (R4's dates are ISO 8601's): 1900 was not a leap year, 2000 was. */
function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** A day the calendar has, when the value names one (`2023`, `2023-02` name none and pass). Called after a form's regex. */
function realDay(value: string): boolean {
  if (value.length < 10) return true;
  return Number(value.slice(8, 10)) <= daysIn(Number(value.slice(0, 4)), Number(value.slice(5, 7)));
}

/** True when `value` is an R4 value of `type`: its form, and a real day (2024-02-29 is, 2023-02-29 and 2023-04-31 are not). */
export function isFhirDateValue(value: unknown, type: FhirDateType): value is string {
  return typeof value === 'string' && FORMS[type].test(value) && realDay(value);
}

/** An R4 `date`: YYYY, YYYY-MM or YYYY-MM-DD, a real day. */
export const isFhirDate = (value: unknown): value is string => isFhirDateValue(value, 'date');
/** An R4 `dateTime`: a date of any precision, or a day with a time to the second and a zone. */
export const isFhirDateTime = (value: unknown): value is string => isFhirDateValue(value, 'dateTime');
/** An R4 `instant`: a day with a time to the second and a zone. */
export const isFhirInstant = (value: unknown): value is string => isFhirDateValue(value, 'instant');

/** Why `value` is not an R4 value of `type`, in a few words for an error message; undefined when it is one. */
export function fhirDateProblem(value: string, type: FhirDateType): string | undefined {
  if (!FORMS[type].test(value)) return `is not a FHIR ${type} (${FORM_TEXT[type]})`;
  if (!realDay(value)) return `is not a day of the calendar (${value.slice(0, 7)} has ${daysIn(Number(value.slice(0, 4)), Number(value.slice(5, 7)))} days)`;
  return undefined;
}

/** The message of a value of R4's form on a day the calendar does not have (2023-02-30). */
export const NOT_A_CALENDAR_DAY = 'must be a day of the calendar (2023-02-29 and 2023-04-31 are not)';

const FORM_TEXT: Record<FhirDateType, string> = {
  date: 'YYYY, YYYY-MM or YYYY-MM-DD',
  dateTime: 'YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm:ss with a zone, Z or ±hh:mm',
  instant: 'YYYY-MM-DDThh:mm:ss with a zone, Z or ±hh:mm',
};
