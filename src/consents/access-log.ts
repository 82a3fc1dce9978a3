import type { AuditEvent, Bundle } from '@medplum/fhirtypes';
import type { FhirRepository } from '../fhir/repository';
import { CLIENT_ID_SYSTEM, OPERATION_SYSTEM, ORGANIZATION_ID_SYSTEM } from '../audit/audit';

/** One access to a patient's data, as the patient's app shows it. */
export interface AccessLogEntry {
  at: string;
  /** Who: an organisation's client, the patient (their own app), or Pont itself (an operator's import...). */
  actor: { kind: 'organization' | 'patient' | 'system'; organization_id: string | null; client_id: string | null };
  /** What was done: the operation (e.g. searchPatient, fhirSearch) and its FHIR interaction (read, create...). */
  operation: string | null;
  action: 'read' | 'create' | 'update' | 'delete' | 'execute';
  /** Which kinds of data (FHIR resource types), when known. */
  data_types: string[];
  /** Why, as the caller stated it; for break-glass the emergency reason. */
  purpose: string | null;
  break_glass: boolean;
  outcome: 'allowed' | 'refused';
}

const ACTIONS = { C: 'create', R: 'read', U: 'update', D: 'delete', E: 'execute' } as const;

function entryOf(event: AuditEvent): AccessLogEntry {
  const org = event.agent?.find((a) => a.who?.identifier?.system === ORGANIZATION_ID_SYSTEM)?.who?.identifier?.value ?? null;
  const client = event.agent?.find((a) => a.who?.identifier?.system === CLIENT_ID_SYSTEM)?.who?.identifier?.value ?? null;
  const patientApp = event.agent?.some((a) => a.altId?.startsWith('patient:'));
  const purpose = event.purposeOfEvent?.[0];
  return {
    at: event.recorded,
    actor: { kind: org ? 'organization' : patientApp ? 'patient' : 'system', organization_id: org, client_id: client },
    operation: event.subtype?.find((c) => c.system === OPERATION_SYSTEM)?.code ?? null,
    action: ACTIONS[(event.action ?? 'E') as keyof typeof ACTIONS] ?? 'execute',
    data_types: (event.entity ?? []).filter((e) => e.type?.system === 'http://hl7.org/fhir/resource-types').map((e) => e.type!.code!),
    purpose: purpose?.text ?? null,
    break_glass: !!purpose?.coding?.some((c) => c.code === 'BTG'),
    outcome: event.outcome === '0' ? 'allowed' : 'refused',
  };
}

/**
 * A patient's access log: every recorded access to their data, newest first, from the audit trail. The one
 * way to read the trail by patient for the patient (storage of the trail may change; this stays).
 * `repository` is a system repository (the patient's own token may not search the audit trail itself).
 */
export async function accessLogOf(
  repository: FhirRepository,
  patientId: string,
  page: { limit: number; cursor?: string },
): Promise<{ items: AccessLogEntry[]; next_cursor: string | null }> {
  const query: Record<string, string> = { entity: `Patient/${patientId}`, _sort: '-date', _count: String(page.limit) };
  if (page.cursor) query._cursor = page.cursor;
  const bundle: Bundle<AuditEvent> = await repository.search<AuditEvent>('AuditEvent', query, { audit: false });
  const next = bundle.link?.find((l) => l.relation === 'next')?.url;
  return {
    items: (bundle.entry ?? []).map((e) => entryOf(e.resource!)),
    next_cursor: next ? new URL(next).searchParams.get('_cursor') : null,
  };
}
