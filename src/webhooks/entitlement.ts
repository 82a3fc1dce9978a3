import type { Queryable } from '../db/database';

/** What decides who may receive an event. */
export interface EventAudience {
  type: string;
  /** Organisation whose action caused the event. */
  organizationId: string | null;
  /** FHIR Patient id, for events about a patient. */
  patientId: string | null;
  /** The event's data: a consent event names the organisation the consent is granted to. */
  data: Record<string, unknown>;
}

/** Events about a patient's data: they follow consent. */
const PATIENT_EVENT = /^(patient|health_id|encounter|lab_order|lab_result|prescription|document|appointment)\./;

/**
 * The organisations entitled to receive an event: the one rule for fan-out and replay (README "Which
 * subscriptions receive which events").
 *
 * - Consent events go to the organisation the consent is granted to (`data.organization_id`): the
 *   requester hears `consent.granted`/`consent.denied`, the organisation that lost access hears
 *   `consent.revoked` (and, having no consent any more, nothing more about that patient).
 * - Patient events go to the acting organisation and to every organisation holding the patient's
 *   active, unexpired consent, looked up through `q` (the change's own transaction, so fan-out sees the
 *   consent state of the change; a replay sees today's).
 * - Anything else goes to the acting organisation. An event without an organisation goes to nobody.
 */
export async function entitledOrganizations(q: Queryable, event: EventAudience): Promise<string[]> {
  return (await entitledOrganizationsOfEach(q, [event]))[0]!;
}

/** entitledOrganizations of each of many events (a change's, an import batch's), with one query. */
export async function entitledOrganizationsOfEach(q: Queryable, events: EventAudience[]): Promise<string[][]> {
  const aboutPatient = (event: EventAudience) => !event.type.startsWith('consent.') && !!event.patientId && PATIENT_EVENT.test(event.type);
  const patients = [...new Set(events.filter(aboutPatient).map((event) => event.patientId!))];
  const consented = new Map<string, string[]>();
  if (patients.length) {
    const { rows } = await q.query<{ patient_id: string; organization_id: string }>(
      `SELECT DISTINCT patient_id, organization_id FROM consent_access WHERE patient_id = ANY($1::text[]) AND status = 'active'
       AND (granted_at IS NULL OR granted_at <= now()) AND (expires_at IS NULL OR expires_at > now())`,
      [patients],
    );
    for (const row of rows) {
      const orgs = consented.get(row.patient_id);
      if (orgs) orgs.push(row.organization_id);
      else consented.set(row.patient_id, [row.organization_id]);
    }
  }
  return events.map((event) => {
    const orgs = new Set<string>();
    if (event.type.startsWith('consent.')) {
      if (typeof event.data.organization_id === 'string') orgs.add(event.data.organization_id);
      return [...orgs];
    }
    if (event.organizationId) orgs.add(event.organizationId);
    if (aboutPatient(event)) for (const org of consented.get(event.patientId!) ?? []) orgs.add(org);
    return [...orgs];
  });
}
