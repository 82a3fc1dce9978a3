import type { DataClass } from '../core/data-classes';

/**
 * What an event type is, declared once with the type: who receives it (src/webhooks/entitlement.ts, docs/integrators.md "Which
 * subscriptions receive which events") and what a metadata-only delivery keeps of its data (src/webhooks/payload.ts).
 */
interface EventTraits {
  /**
   * Fields of `data` the published interface (§6.2) lists for the type beyond its identifiers (`id`, `*_id`, which
   * every delivery keeps): delivered whatever the subscription's payload setting. Nothing clinical.
   */
  published?: readonly string[];
  /**
   * For an event that is no resource change, so has no rule in src/events/rules.ts: the operation that records it.
   * Every other type must be raised by a rule (test/event-types.unit.test.ts).
   */
  raisedBy?: string;
}

export type EventDeclaration = EventTraits &
  (
    | /** About a patient's data: to the acting organisation and every organisation whose consent covers `dataClass`. */
    { about: 'patient'; dataClass: DataClass }
    | /** About a consent: to the organisation it is granted to (`data.organization_id`) and those holding the patient's data. */
    { about: 'consent' }
    | /** Anything else: to the acting organisation. */
    { about: 'organization' }
  );

/**
 * The closed list of event types (section 6.1), each with what it needs: the one place to add one (docs/contributors.md "Adding an
 * event type"). Anything else is refused at compile time and at runtime. The order is the published one (OpenAPI).
 */
export const EVENTS = {
  'patient.created': { about: 'patient', dataClass: 'patients:read' },
  'patient.updated': { about: 'patient', dataClass: 'patients:read' },
  'health_id.created': { about: 'patient', dataClass: 'patients:read', raisedBy: 'the Health ID registry, when a Patient write registers an ID (src/fhir/repository.ts)' },
  'health_id.verified': { about: 'patient', dataClass: 'patients:read', raisedBy: 'the verify operation (src/patients/service.ts)' },
  'consent.requested': { about: 'consent' },
  'consent.granted': { about: 'consent' },
  'consent.denied': { about: 'consent' },
  'consent.revoked': { about: 'consent' },
  'consent.expired': { about: 'consent', published: ['artefact_id', 'status', 'expires_at'], raisedBy: 'the consent notice job, at the consent\'s expires_at (src/consents/notices.ts)' },
  'consent.erase_due': { about: 'consent', published: ['artefact_id', 'status', 'erase_at'], raisedBy: 'the consent notice job, at the consent\'s erase_at (src/consents/notices.ts)' },
  'encounter.created': { about: 'patient', dataClass: 'patients:read' },
  'encounter.closed': { about: 'patient', dataClass: 'patients:read' },
  'lab_order.created': { about: 'patient', dataClass: 'labs:read' },
  'lab_result.released': { about: 'patient', dataClass: 'labs:read', published: ['health_id', 'lab_result_id', 'test_name', 'flagged', 'facility_id'] },
  'lab_result.amended': { about: 'patient', dataClass: 'labs:read' },
  'prescription.issued': { about: 'patient', dataClass: 'prescriptions:read' },
  'prescription.cancelled': { about: 'patient', dataClass: 'prescriptions:read' },
  'prescription.dispensed': { about: 'patient', dataClass: 'prescriptions:read' },
  'appointment.created': { about: 'patient', dataClass: 'appointments:read' },
  'appointment.checked_in': { about: 'patient', dataClass: 'appointments:read' },
  'appointment.cancelled': { about: 'patient', dataClass: 'appointments:read' },
  'document.issued': { about: 'patient', dataClass: 'documents:read' },
  'document.verified': { about: 'patient', dataClass: 'documents:read' },
  // How many items of the batch failed holds no patient data; the errors may (they quote the resources).
  'bridge_agent.sync_failed': { about: 'organization', published: ['agent_id', 'facility_id', 'batch_id', 'counts'], raisedBy: 'Bridge sync (src/bridge/sync.ts)' },
} as const satisfies Record<string, EventDeclaration>;

export type EventType = keyof typeof EVENTS;

export const EVENT_TYPES = Object.keys(EVENTS) as [EventType, ...EventType[]];

export function isEventType(value: string): value is EventType {
  return Object.hasOwn(EVENTS, value);
}

/** The declaration of an event type; undefined for a string that is none. */
export function eventDeclaration(type: string): EventDeclaration | undefined {
  return isEventType(type) ? EVENTS[type] : undefined;
}

/** The data class an event about a patient tells of (the classes consents cover); undefined for other events. */
export function eventClassOf(type: string): DataClass | undefined {
  const declaration = eventDeclaration(type);
  return declaration?.about === 'patient' ? declaration.dataClass : undefined;
}
