import type { ActivityRow } from './actions';

/**
 * One CSV field (RFC 4180): quoted, quotes doubled. A value a spreadsheet would run as a formula (= + - @, tab,
 * carriage return first) is prefixed with ' (OWASP "CSV injection").
 */
export function csvField(value: unknown): string {
  let text = value === null || value === undefined ? '' : String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return `"${text.replace(/"/g, '""')}"`;
}

export function activityCsv(rows: ActivityRow[]): string {
  const header = ['at', 'who', 'health_id', 'what', 'action', 'purpose', 'break_glass'] as const;
  return [header.join(','), ...rows.map((r) => header.map((h) => csvField(r[h])).join(','))].join('\r\n') + '\r\n';
}
