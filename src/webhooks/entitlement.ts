import type { Queryable } from '../db/database';
import { paddedRows, rowsOf, sql } from '../db/sql';
import { eventClassOf, eventDeclaration } from '../events/types';
import { activeGrants, dataHolders } from '../policy/index';
import { EVENT_RULES } from '../events/rules';

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

/**
 * The organisations entitled to receive an event: the one rule for fan-out, delivery and replay (docs/integrators.md "Which
 * subscriptions receive which events"), from the access policy (src/policy).
 *
 * - Consent events go to the organisation the consent is granted to (`data.organization_id`): the
 *   requester hears `consent.granted`/`consent.denied`, the organisation that lost access hears
 *   `consent.revoked` (and, having no consent any more, nothing more about that patient); and to the organisations
 *   holding the patient's data (those that wrote some of it), as an exchange notifies its data holders.
 * - Patient events go to the acting organisation and to every organisation holding the patient's active,
 *   unexpired consent covering the event's class (a documents-only consent hears `document.*`, not
 *   `lab_result.*`), looked up through `q` (the change's own transaction, so fan-out sees the consent state
 *   of the change; a delivery or replay sees today's).
 * - Anything else goes to the acting organisation. An event without an organisation goes to nobody.
 */
export async function entitledOrganizations(q: Queryable, event: EventAudience): Promise<string[]> {
  return (await entitledOrganizationsOfEach(q, [event]))[0]!;
}

/** The rows of the fan-out's keys: a patient, a data class, the resource types (an array's text) and ids, the key's ordinal. */
const AUDIENCE_COLUMNS = [
  ['p', 'text'],
  ['c', 'text'],
  ['t', 'text'],
  ['i', 'text'],
  ['n', 'int'],
] as const;

/** entitledOrganizations of each of many events (a change's, an import batch's), with one query. */
export async function entitledOrganizationsOfEach(q: Queryable, events: EventAudience[]): Promise<string[][]> {
  // Who hears a type is declared with it (src/events/types.ts, `about`).
  const classOf = (event: EventAudience) => (event.patientId ? eventClassOf(event.type) : undefined);
  // The key of an event's audience: its patient, class and the resource types it may be about (consent artefacts name kinds of
  // record), and the ids it names, where a grant with a date range finds the resource it is about (policy EventFacts).
  const keyOf = (event: EventAudience) => `${event.patientId}\u0000${classOf(event)}\u0000${event.type}\u0000${idsOf(event)}`;
  const pairs = new Map<string, { patient: string; dataClass: string; types: string; ids: string }>();
  /** Every resource type the keys' events may be about (EventFacts.typeNames). */
  const typeNames = new Set<string>();
  for (const event of events) {
    const dataClass = classOf(event);
    if (!dataClass) continue;
    const types = resourceTypesOf(event.type);
    for (const t of types) typeNames.add(t);
    pairs.set(keyOf(event), { patient: event.patientId!, dataClass, types: `{${types.join(',')}}`, ids: idsOf(event) });
  }
  const consented = new Map<string, string[]>();
  if (pairs.size) {
    const keys = [...pairs.keys()];
    const list = [...pairs.values()];
    // The usual few keys as a VALUES list (rowsOf; padded, a repeated key adding nothing to DISTINCT), and only the dates
    // of care of their events' types (typeNames): PostgreSQL then keeps a generic plan of the statement. Over unnest()
    // (a generic plan assumes 10 rows) and with every type's dates it planned it anew at every write: 1.5 ms of planning
    // for 0.3 ms of execution, the costliest statement of a FHIR create (docs/benchmarks.md, thirteenth round).
    const keyRows = paddedRows(list.map((x, n) => [x.patient, x.dataClass, x.types, x.ids, n + 1]));
    const { text, values } = sql`SELECT DISTINCT k.n, g.organization_id FROM ${rowsOf('k', AUDIENCE_COLUMNS, keyRows)}
       CROSS JOIN LATERAL (${activeGrants(sql`g.organization_id`, undefined, sql`= k.p`, sql`k.c`, { types: sql`k.t::text[]`, typeNames: [...typeNames].sort(), ids: sql`k.i::text[]`, patient: sql`k.p` })}) g`.render();
    const { rows } = await q.query<{ n: number; organization_id: string }>(text, values);
    for (const row of rows) {
      const key = keys[Number(row.n) - 1]!;
      consented.set(key, [...(consented.get(key) ?? []), row.organization_id]);
    }
  }
  // A consent's change is told to the organisations holding the patient's data too (src/policy dataHolders).
  const holders = new Map<string, string[]>();
  const consentPatients = [...new Set(events.filter((e) => e.patientId && eventDeclaration(e.type)?.about === 'consent').map((e) => e.patientId!))];
  if (consentPatients.length) {
    const { text, values } = sql`SELECT k.p, h.org FROM ${rowsOf('k', [['p', 'text']], consentPatients.map((p) => [p]))} CROSS JOIN LATERAL (${dataHolders(sql`h.org`, sql`k.p`)}) h`.render();
    const { rows } = await q.query<{ p: string; org: string }>(text, values);
    for (const row of rows) holders.set(row.p, [...(holders.get(row.p) ?? []), row.org]);
  }
  return events.map((event) => {
    const orgs = new Set<string>();
    if (eventDeclaration(event.type)?.about === 'consent') {
      if (typeof event.data.organization_id === 'string') orgs.add(event.data.organization_id);
      for (const org of holders.get(event.patientId ?? '') ?? []) orgs.add(org);
      return [...orgs];
    }
    if (event.organizationId) orgs.add(event.organizationId);
    const dataClass = classOf(event);
    if (dataClass) for (const org of consented.get(keyOf(event)) ?? []) orgs.add(org);
    return [...orgs];
  });
}

/**
 * The FHIR ids an event's data names (`*_id` values that are FHIR ids), as a text[] literal: one of them is its resource's.
 * Not its patient's, Health ID or facility: those name no record of the event's type (Patient events need no date).
 */
function idsOf(event: EventAudience): string {
  const ids = Object.entries(event.data)
    .filter(([key, value]) => /(^|_)id$/.test(key) && !NOT_THE_RESOURCE.has(key) && typeof value === 'string' && FHIR_ID.test(value))
    .map(([, value]) => value as string);
  return `{${[...new Set(ids)].join(',')}}`;
}
const FHIR_ID = /^[A-Za-z0-9\-.]{1,64}$/;
const NOT_THE_RESOURCE = new Set(['patient_id', 'health_id', 'facility_id']);

/** The resource types an event type is about (its rules' resources; Patient for the events no rule raises, the Health ID's). */
function resourceTypesOf(type: string): string[] {
  const types = [...new Set(EVENT_RULES.filter((r) => r.event === type).map((r) => r.resource))];
  return types.length ? types : ['Patient'];
}
