import type { Queryable } from '../db/database';

/** What decides who may receive an event. */
export interface EventAudience {
  /** Organisation whose action caused the event. */
  organizationId: string | null;
  /** FHIR Patient id, for events about a patient. */
  patientId: string | null;
}

/**
 * The organisations entitled to receive an event: the one rule for fan-out and replay.
 *
 * Today that is the organisation whose action caused it, and nobody else: consents do not exist
 * yet, so patient events also go to the acting organisation only. When consents arrive, patient
 * events (`patientId` set) add the organisations holding that patient's active, unexpired consent,
 * looked up here through `q` (the caller's transaction, so fan-out sees the same consent state as
 * the change). An event without an organisation goes to nobody.
 */
export async function entitledOrganizations(_q: Queryable, event: EventAudience): Promise<string[]> {
  return event.organizationId ? [event.organizationId] : [];
}
