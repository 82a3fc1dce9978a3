/** The facility a facility-data record (as its map reads it) belongs to: its `facility_id`, or null when it names none. */
export function facilityIn(record: Record<string, unknown>): string | null {
  return typeof record.facility_id === 'string' && record.facility_id ? record.facility_id : null;
}
