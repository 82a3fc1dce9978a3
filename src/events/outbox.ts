import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db/database';
import type { Environment } from '../config';
import { isEventType, type EventType } from './types';
import type { ResourceChange } from './rules';

/** The envelope of section 6.2, exactly as subscribers receive it. */
export interface EventEnvelope {
  id: string;
  type: EventType;
  version: '1.0';
  created_at: string;
  data: Record<string, unknown>;
  meta: {
    organization_id: string | null;
    facility_id: string | null;
    environment: Environment;
    request_id: string | null;
  };
}

export interface NewEvent {
  type: EventType;
  data: Record<string, unknown>;
  /** Organisation whose action caused the event. */
  organizationId?: string;
  facilityId?: string;
  environment: Environment;
  requestId?: string;
  /** FHIR Patient id when the event concerns a patient (routes it to organisations entitled to that patient). */
  patientId?: string;
}

/** A recorded event as what it starts sees it: the webhook deliveries use its audience (organisation, patient, data). */
export interface RecordedEvent {
  id: string;
  type: EventType;
  /** ISO 8601: with the id, the event's key (events is partitioned by it; deliveries carry it). */
  createdAt: string;
  organizationId: string | null;
  patientId: string | null;
  data: Record<string, unknown>;
}

/** What recording events also does in their transaction: the features register it at composition (src/services.ts). */
export type EventsRecorded = (tx: Queryable, events: RecordedEvent[]) => Promise<unknown>;
const whenRecorded = new Set<EventsRecorded>();

/** Registers what recording events starts (webhooks: queue their deliveries); the same function once. */
export function onEventsRecorded(then: EventsRecorded): void {
  whenRecorded.add(then);
}

/** What a write's resource changes also start in its transaction (FHIR Subscriptions: number the topics they fire). */
export type ResourcesChanged = (tx: Queryable, changes: ResourceChange[]) => Promise<unknown>;
const whenChanged = new Set<ResourcesChanged>();

/** Registers what a write's changes start, beside its events (src/services.ts); the same function once. */
export function onResourcesChanged(then: ResourcesChanged): void {
  whenChanged.add(then);
}

/** Runs what onResourcesChanged registered, in the write's transaction (src/fhir/repository.ts, after its events). */
export async function resourcesChanged(tx: Queryable, changes: ResourceChange[]): Promise<void> {
  if (!changes.length) return;
  for (const then of whenChanged) await then(tx, changes);
}

export function newEventId(): string {
  return `evt_${randomBytes(16).toString('hex')}`;
}

/**
 * Records a domain event in the outbox. Call it with the transaction that makes the change:
 * the event exists if and only if the change commits, and so do its webhook deliveries, which
 * are queued here (one per entitled, subscribed subscription) by what src/services.ts registered (onEventsRecorded).
 */
export async function recordEvent(tx: Queryable, event: NewEvent): Promise<EventEnvelope> {
  const [envelope] = await recordEvents(tx, [event]);
  return envelope!;
}

/** Records several events with two statements (the events, then their deliveries): a write's events, or an import's. */
export async function recordEvents(tx: Queryable, events: NewEvent[]): Promise<EventEnvelope[]> {
  if (!events.length) return [];
  for (const event of events) if (!isEventType(event.type)) throw new Error(`Unknown event type: ${event.type}`);
  const createdAt = new Date().toISOString();
  const envelopes: EventEnvelope[] = events.map((event) => ({
    id: newEventId(),
    type: event.type,
    version: '1.0',
    created_at: createdAt,
    data: event.data,
    meta: {
      organization_id: event.organizationId ?? null,
      facility_id: event.facilityId ?? null,
      environment: event.environment,
      request_id: event.requestId ?? null,
    },
  }));
  await tx.query(
    `INSERT INTO events (id, type, version, created_at, data, meta, organization_id, patient_id)
     SELECT e.id, e.type, '1.0', $1, e.data::jsonb, e.meta::jsonb, e.org, e.patient
     FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS e(id, type, data, meta, org, patient)`,
    [
      createdAt,
      envelopes.map((e) => e.id),
      envelopes.map((e) => e.type),
      envelopes.map((e) => JSON.stringify(e.data)),
      envelopes.map((e) => JSON.stringify(e.meta)),
      events.map((e) => e.organizationId ?? null),
      events.map((e) => e.patientId ?? null),
    ],
  );
  const recorded = envelopes.map((e, i) => ({ id: e.id, type: e.type, createdAt, organizationId: events[i]!.organizationId ?? null, patientId: events[i]!.patientId ?? null, data: e.data }));
  for (const then of whenRecorded) await then(tx, recorded);
  return envelopes;
}

export interface EventRow {
  id: string;
  type: EventType;
  version: '1.0';
  created_at: Date | string;
  data: Record<string, unknown>;
  meta: EventEnvelope['meta'];
}

/** The stored event as subscribers receive it (same id and created_at at every attempt and replay). */
export function envelopeFromRow(row: EventRow): EventEnvelope {
  return {
    id: row.id,
    type: row.type,
    version: row.version,
    created_at: new Date(row.created_at).toISOString(),
    data: row.data,
    meta: {
      organization_id: row.meta.organization_id,
      facility_id: row.meta.facility_id,
      environment: row.meta.environment,
      request_id: row.meta.request_id,
    },
  };
}
