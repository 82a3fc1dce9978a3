import { isDeepStrictEqual } from 'node:util';
import { flagsResult } from '../core/lab-flags';
import type { CodeableConcept, Resource } from '@medplum/fhirtypes';
import { HEALTH_ID_SYSTEM } from '../healthid/healthid';
import { ORGANIZATION_ID_SYSTEM } from '../audit/audit';
import type { EventType } from './types';

/**
 * Which changes of which resources raise which events (interface §6.1): the one table. The repository
 * applies it to every write in the write's transaction, whatever path made it (FHIR, Connect, SDK,
 * Bridge, import, demo), so each change raises its events exactly once. docs/integrators.md "Which changes raise
 * which events" shows the same table.
 *
 * Not resource changes, and so not here: the types declared with `raisedBy` in src/events/types.ts
 * (`health_id.created`, `health_id.verified`, `bridge_agent.sync_failed`): the code that makes those happen
 * records them through the repository. Every other type has a rule here (test/event-types.unit.test.ts).
 */

/** One write as the rules see it. */
export interface ResourceChange {
  interaction: 'create' | 'update' | 'delete';
  /** The version the write replaced (absent for a create). */
  before?: Resource;
  /** The stored version (absent for a delete). */
  after?: Resource;
}

/** What lab_result.created says of the record: two of its fields (read alone: 2 µs; the whole record takes 33). */
const LAB_EVENT_FIELDS: ReadonlySet<string> = new Set(['test_name', 'flag']);

/** What event data may name beyond the resource itself. */
export interface RuleContext {
  /** The Health ID of a FHIR Patient id, or null. */
  healthIdOf(patientId: string | undefined): string | null;
  /** The facility of the client or agent that made the change, or null. */
  facilityId: string | null;
  /** Fields of a resource read through a map (of its Connect record): event data says what the records say. */
  read(map: 'lab-result', resource: Resource, fields: ReadonlySet<string>): Record<string, unknown>;
}

export interface Rule {
  resource: string;
  event: EventType;
  /** The change in words, for the table of docs/integrators.md. */
  when: string;
  applies(change: ResourceChange): boolean;
  data(change: ResourceChange, context: RuleContext): Record<string, unknown>;
}

type AnyResource = Resource & Record<string, any>;
const statusOf = (r: Resource | undefined) => (r as AnyResource | undefined)?.status as string | undefined;

/** The write leaves the resource in one of `statuses`, and it was not in one of them before. */
const reaches =
  (...statuses: string[]) =>
  (c: ResourceChange) =>
    c.after !== undefined && statuses.includes(statusOf(c.after) ?? '') && !statuses.includes(statusOf(c.before) ?? '');
/** The resource moves from one of `from` to one of `to`. */
const moves = (from: string[], to: string[]) => (c: ResourceChange) =>
  c.before !== undefined && c.after !== undefined && from.includes(statusOf(c.before) ?? '') && to.includes(statusOf(c.after) ?? '');
const created = (c: ResourceChange) => c.interaction === 'create';

const codes = (concepts: CodeableConcept | CodeableConcept[] | undefined) =>
  (Array.isArray(concepts) ? concepts : concepts ? [concepts] : []).flatMap((cc) => (cc.coding ?? []).map((c) => c.code));
const isLaboratory = (r: Resource | undefined) => codes((r as AnyResource | undefined)?.category).includes('laboratory');
/** SNOMED CT 108252007 "Laboratory procedure", the category of a lab order. */
const isLabOrder = (r: Resource | undefined) => codes((r as AnyResource | undefined)?.category).includes('108252007');

/** The patient a resource is about: the Patient itself, or its `subject`/`patient` reference. */
function patientIdOf(r: Resource | undefined): string | undefined {
  if (!r) return undefined;
  if (r.resourceType === 'Patient') return r.id;
  const any = r as AnyResource;
  for (const ref of [any.subject, any.patient, ...(Array.isArray(any.participant) ? any.participant.map((p: any) => p?.actor) : [])]) {
    // A relative reference only: `http://elsewhere/…/Patient/x` names a patient of another server, not ours.
    const m = typeof ref?.reference === 'string' ? /^Patient\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/\d+)?$/.exec(ref.reference) : null;
    if (m) return m[1];
  }
  return undefined;
}

/** The identifiers every patient event carries: metadata only (§6.2), never clinical content. */
function ids(change: ResourceChange, context: RuleContext, idName: string): Record<string, unknown> {
  const r = change.after ?? change.before!;
  const patientId = patientIdOf(r);
  return { [idName]: r.id, patient_id: patientId ?? null, health_id: context.healthIdOf(patientId), status: statusOf(r) ?? null };
}

/** The demographics whose change is `patient.updated` (the Health ID is Pont's and never changes). */
function demographics(p: Resource | undefined): unknown[] {
  const a = (p ?? {}) as AnyResource;
  return [
    a.name, a.birthDate, a.gender, a.telecom, a.address, a.deceasedBoolean, a.deceasedDateTime, a.maritalStatus,
    (a.identifier ?? []).filter((i: { system?: string }) => i.system !== HEALTH_ID_SYSTEM),
  ];
}

/** The organisation a Consent is granted to (provision.actor), by Pont organisation id. */
export function consentOrganization(consent: Resource | undefined): string | null {
  const actors = ((consent as AnyResource | undefined)?.provision?.actor ?? []) as Array<{ reference?: { reference?: string; identifier?: { system?: string; value?: string } } }>;
  for (const a of actors) {
    if (a.reference?.identifier?.system === ORGANIZATION_ID_SYSTEM && a.reference.identifier.value) return a.reference.identifier.value;
  }
  return null;
}

function consentData(change: ResourceChange, context: RuleContext) {
  const r = (change.after ?? change.before)!;
  // The consent is its artefact (docs/consent-artefacts.md): `artefact_id` names what GET …/consents/{id}/artefact signs.
  return { ...ids(change, context, 'consent_id'), artefact_id: r.id, organization_id: consentOrganization(r) };
}

export const EVENT_RULES: Rule[] = [
  { resource: 'Patient', event: 'patient.created', when: 'created', applies: created, data: (c, x) => ids(c, x, 'patient_id') },
  {
    resource: 'Patient',
    event: 'patient.updated',
    when: 'updated with other demographics (name, birth date, gender, telecom, address, deceased, marital status, identifiers)',
    // Compared as values: the stored JSON may order keys differently (jsonb sorts them).
    applies: (c) => c.interaction === 'update' && c.after !== undefined && !isDeepStrictEqual(demographics(c.before), demographics(c.after)),
    data: (c, x) => ids(c, x, 'patient_id'),
  },
  { resource: 'Consent', event: 'consent.requested', when: 'created `proposed`', applies: (c) => created(c) && statusOf(c.after) === 'proposed', data: consentData },
  {
    resource: 'Consent',
    event: 'consent.granted',
    when: 'reaches `active`, or is granted again while active (a new `dateTime`)',
    applies: (c) => reaches('active')(c) || (moves(['active'], ['active'])(c) && (c.before as AnyResource).dateTime !== (c.after as AnyResource).dateTime),
    data: consentData,
  },
  { resource: 'Consent', event: 'consent.denied', when: '`proposed` → `rejected`', applies: moves(['proposed'], ['rejected']), data: consentData },
  {
    resource: 'Consent',
    event: 'consent.revoked',
    when: '`active` → `inactive`, or an active one deleted',
    applies: (c) => moves(['active'], ['inactive'])(c) || (c.interaction === 'delete' && statusOf(c.before) === 'active'),
    data: consentData,
  },
  { resource: 'Encounter', event: 'encounter.created', when: 'created', applies: created, data: (c, x) => ids(c, x, 'encounter_id') },
  { resource: 'Encounter', event: 'encounter.closed', when: 'reaches `finished` (also when created finished)', applies: reaches('finished'), data: (c, x) => ids(c, x, 'encounter_id') },
  {
    resource: 'ServiceRequest',
    event: 'lab_order.created',
    when: 'created with category laboratory (SNOMED CT 108252007)',
    applies: (c) => created(c) && isLabOrder(c.after),
    data: (c, x) => ids(c, x, 'lab_order_id'),
  },
  {
    resource: 'Observation',
    event: 'lab_result.released',
    when: 'category `laboratory` reaches `final` (also when created final); DiagnosticReports raise nothing: their Observations do',
    applies: (c) => isLaboratory(c.after) && reaches('final')(c),
    // Exactly the fields of interface §6.2; the test and its flag as the Observation's lab record has them.
    data: (c, x) => {
      const o = c.after!;
      const record = x.read('lab-result', o, LAB_EVENT_FIELDS);
      return {
        health_id: x.healthIdOf(patientIdOf(o)),
        lab_result_id: o.id,
        test_name: record.test_name ?? null,
        flagged: typeof record.flag === 'string' && flagsResult(record.flag),
        facility_id: x.facilityId,
      };
    },
  },
  {
    resource: 'Observation',
    event: 'lab_result.amended',
    when: 'category `laboratory` moves from `final` to `amended` or `corrected`',
    applies: (c) => isLaboratory(c.after) && moves(['final'], ['amended', 'corrected'])(c),
    data: (c, x) => ids(c, x, 'lab_result_id'),
  },
  { resource: 'MedicationRequest', event: 'prescription.issued', when: 'reaches `active` (also when created active)', applies: reaches('active'), data: (c, x) => ids(c, x, 'prescription_id') },
  { resource: 'MedicationRequest', event: 'prescription.cancelled', when: 'reaches `cancelled`', applies: (c) => c.interaction === 'update' && reaches('cancelled')(c), data: (c, x) => ids(c, x, 'prescription_id') },
  {
    resource: 'MedicationDispense',
    event: 'prescription.dispensed',
    when: 'reaches `completed` (also when created completed)',
    applies: reaches('completed'),
    data: (c, x) => {
      const d = c.after as AnyResource;
      const prescription = /MedicationRequest\/([A-Za-z0-9\-.]{1,64})$/.exec(d.authorizingPrescription?.[0]?.reference ?? '')?.[1] ?? null;
      return { ...ids(c, x, 'dispense_id'), prescription_id: prescription };
    },
  },
  { resource: 'Appointment', event: 'appointment.created', when: 'created', applies: created, data: (c, x) => ids(c, x, 'appointment_id') },
  { resource: 'Appointment', event: 'appointment.checked_in', when: 'reaches `checked-in` or `arrived`', applies: reaches('checked-in', 'arrived'), data: (c, x) => ids(c, x, 'appointment_id') },
  { resource: 'Appointment', event: 'appointment.cancelled', when: 'reaches `cancelled`', applies: (c) => c.interaction === 'update' && reaches('cancelled')(c), data: (c, x) => ids(c, x, 'appointment_id') },
  { resource: 'DocumentReference', event: 'document.issued', when: 'created `current`', applies: (c) => created(c) && statusOf(c.after) === 'current', data: (c, x) => ids(c, x, 'document_id') },
  { resource: 'Composition', event: 'document.issued', when: 'reaches `final`', applies: reaches('final'), data: (c, x) => ids(c, x, 'document_id') },
  {
    resource: 'DocumentReference',
    event: 'document.verified',
    when: 'updated to name an `authenticator` it did not have (the document was checked, e.g. by its QR code)',
    applies: (c) => c.interaction === 'update' && !(c.before as AnyResource)?.authenticator && !!(c.after as AnyResource | undefined)?.authenticator,
    data: (c, x) => ids(c, x, 'document_id'),
  },
];

const byResource = new Map<string, Rule[]>();
for (const rule of EVENT_RULES) byResource.set(rule.resource, [...(byResource.get(rule.resource) ?? []), rule]);

/** The events one change raises, with the patient each concerns (for routing). */
export function eventsOf(change: ResourceChange, context: RuleContext): Array<{ type: EventType; data: Record<string, unknown>; patientId?: string }> {
  const resource = change.after ?? change.before;
  if (!resource) return [];
  return (byResource.get(resource.resourceType) ?? [])
    .filter((rule) => rule.applies(change))
    .map((rule) => ({ type: rule.event, data: rule.data(change, context), patientId: patientIdOf(resource) }));
}

/** The Patient ids the events of these changes may name (looked up once, before the rules run). */
export function patientIdsOf(changes: ResourceChange[]): string[] {
  return [...new Set(changes.map((c) => patientIdOf(c.after ?? c.before)).filter((id): id is string => id !== undefined))];
}

/** The table above as Markdown rows, for docs/integrators.md. */
export function eventRulesTable(): string {
  return EVENT_RULES.map((r) => `| \`${r.event}\` | ${r.resource} | ${r.when} |`).join('\n');
}
