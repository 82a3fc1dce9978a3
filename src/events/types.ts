/** The closed list of event types (section 6.1). Anything else is refused at compile time and at runtime. */
export const EVENT_TYPES = [
  'patient.created',
  'patient.updated',
  'health_id.created',
  'health_id.verified',
  'consent.requested',
  'consent.granted',
  'consent.denied',
  'consent.revoked',
  'encounter.created',
  'encounter.closed',
  'lab_order.created',
  'lab_result.released',
  'lab_result.amended',
  'prescription.issued',
  'prescription.cancelled',
  'prescription.dispensed',
  'appointment.created',
  'appointment.checked_in',
  'appointment.cancelled',
  'document.issued',
  'document.verified',
  'bridge_agent.sync_failed',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

export function isEventType(value: string): value is EventType {
  return (EVENT_TYPES as readonly string[]).includes(value);
}
