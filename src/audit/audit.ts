import type { Context } from 'koa';
import { randomUUID } from 'node:crypto';
import type { AuditEvent, AuditEventAgent, AuditEventEntity } from '@medplum/fhirtypes';
import type { Principal } from '../auth/principal';
import type { Queryable } from '../db/database';
import { HEALTH_ID_SYSTEM } from '../healthid/healthid';
import { writeMany } from '../fhir/store/writes';

/** Identifier systems of the parties an AuditEvent names (search them with `AuditEvent?altid=<client id>`). */
export const CLIENT_ID_SYSTEM = 'https://pont.health/fhir/sid/client-id';
export const ORGANIZATION_ID_SYSTEM = 'https://pont.health/fhir/sid/organization-id';
export const FACILITY_ID_SYSTEM = 'https://pont.health/fhir/sid/facility-id';
export const BRIDGE_AGENT_ID_SYSTEM = 'https://pont.health/fhir/sid/bridge-agent-id';
export const REQUEST_ID_SYSTEM = 'https://pont.health/fhir/sid/request-id';
export const OPERATION_SYSTEM = 'https://pont.health/fhir/CodeSystem/operation';

/** Who made the request being audited. */
export interface AuditCaller {
  principal?: Principal;
  requestId?: string;
  /** Network address of the caller. */
  address?: string;
}

export function auditCaller(ctx: Context): AuditCaller {
  return { principal: ctx.state.principal as Principal | undefined, requestId: ctx.state.requestId as string | undefined, address: ctx.ip };
}

export type AuditOutcome = 'success' | 'minor-failure' | 'serious-failure';
const OUTCOME_CODES = { success: '0', 'minor-failure': '4', 'serious-failure': '8' } as const;
const INTERACTION_BY_ACTION = { C: 'create', R: 'read', U: 'update', D: 'delete', E: 'operation' } as const;

/** C create, R read (a search too), U update, D delete, E execute (e.g. verify). */
export type AuditAction = 'C' | 'R' | 'U' | 'D' | 'E';

export interface AuditRecord {
  caller: AuditCaller;
  /** The route's operationId, e.g. `resolvePatient`. */
  operation: string;
  action: AuditAction;
  outcome: AuditOutcome;
  /** Short result in words, e.g. `found`, `created`, `not_found`. */
  outcomeDescription?: string;
  /** The patient concerned: by FHIR id when known, by Health ID always when given. */
  patient?: { id?: string; healthId?: string };
  /** Further patients concerned, by FHIR id (a FHIR search may touch several). */
  otherPatients?: string[];
  /** The caller's stated reason (resolve `purpose`). */
  purpose?: string;
  /** The caller's own patient id (resolve `external_reference`). */
  externalReference?: string;
  /** Break-glass: read without consent under emergency access (purpose of use BTG); `purpose` holds the reason. */
  breakGlass?: boolean;
  /** The kinds of data read or written (FHIR resource types), for the patient's access log. */
  dataTypes?: string[];
}

const ACT_REASON = 'http://terminology.hl7.org/CodeSystem/v3-ActReason';

function agentsOf(caller: AuditCaller): AuditEventAgent[] {
  const network = caller.address ? { address: caller.address, type: '2' as const } : undefined;
  const principal = caller.principal;
  if (!principal) return [{ requestor: true, name: 'anonymous', network }];
  if (principal.kind === 'system') return [{ requestor: true, name: `Pont (${principal.name})`, altId: `system:${principal.name}`, network }];
  if (principal.kind === 'patient') {
    // The patient, through their app (a pat_ token).
    return [{ who: { reference: `Patient/${principal.patientId}` }, altId: `patient:${principal.healthId}`, requestor: true, network }];
  }
  if (principal.kind === 'bridge-agent') {
    return [
      {
        type: { coding: [{ system: 'http://dicom.nema.org/resources/ontology/DCM', code: '110150', display: 'Application' }] },
        who: { type: 'Device', identifier: { system: BRIDGE_AGENT_ID_SYSTEM, value: principal.agentId }, display: principal.agentId },
        altId: principal.agentId,
        requestor: true,
        location: { identifier: { system: FACILITY_ID_SYSTEM, value: principal.facilityId } },
        network,
      },
    ];
  }
  return [
    {
      type: { coding: [{ system: 'http://dicom.nema.org/resources/ontology/DCM', code: '110150', display: 'Application' }] },
      who: { type: 'Device', identifier: { system: CLIENT_ID_SYSTEM, value: principal.clientId }, display: principal.clientId },
      altId: principal.clientId,
      requestor: true,
      ...(principal.facilityId ? { location: { identifier: { system: FACILITY_ID_SYSTEM, value: principal.facilityId } } } : {}),
      ...(principal.tokenId ? { policy: [principal.tokenId] } : {}),
      network,
    },
    {
      type: { text: 'organization of the client' },
      who: { type: 'Organization', identifier: { system: ORGANIZATION_ID_SYSTEM, value: principal.organizationId }, display: principal.organizationId },
      altId: principal.organizationId,
      requestor: false,
    },
  ];
}

function entitiesOf(record: AuditRecord): AuditEventEntity[] {
  const entities: AuditEventEntity[] = [];
  const { patient, externalReference } = record;
  if (patient?.id || patient?.healthId || externalReference) {
    entities.push({
      what: {
        ...(patient?.id ? { reference: `Patient/${patient.id}` } : {}),
        ...(patient?.healthId ? { identifier: { system: HEALTH_ID_SYSTEM, value: patient.healthId } } : {}),
      },
      type: { system: 'http://terminology.hl7.org/CodeSystem/audit-entity-type', code: '1', display: 'Person' },
      role: { system: 'http://terminology.hl7.org/CodeSystem/object-role', code: '1', display: 'Patient' },
      ...(externalReference ? { detail: [{ type: 'external_reference', valueString: externalReference }] } : {}),
    });
  }
  for (const id of record.otherPatients ?? []) {
    entities.push({
      what: { reference: `Patient/${id}` },
      type: { system: 'http://terminology.hl7.org/CodeSystem/audit-entity-type', code: '1', display: 'Person' },
      role: { system: 'http://terminology.hl7.org/CodeSystem/object-role', code: '1', display: 'Patient' },
    });
  }
  for (const type of record.dataTypes ?? []) {
    // The kind of data: an entity of the resource type (audit-entity-type allows FHIR resource types).
    entities.push({ type: { system: 'http://hl7.org/fhir/resource-types', code: type }, role: { system: 'http://terminology.hl7.org/CodeSystem/object-role', code: '4', display: 'Domain Resource' } });
  }
  if (record.caller.requestId) {
    // The IHE Basic Audit Log Patterns' way of carrying the X-Request-ID.
    entities.push({
      what: { identifier: { system: REQUEST_ID_SYSTEM, value: record.caller.requestId } },
      type: { system: 'https://profiles.ihe.net/ITI/BALP/CodeSystem/BasicAuditEntityType', code: 'XrequestId' },
    });
  }
  return entities;
}

export function buildAuditEvent(record: AuditRecord): AuditEvent {
  return {
    resourceType: 'AuditEvent',
    type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest', display: 'RESTful Operation' },
    subtype: [
      { system: 'http://hl7.org/fhir/restful-interaction', code: INTERACTION_BY_ACTION[record.action] },
      { system: OPERATION_SYSTEM, code: record.operation },
    ],
    action: record.action,
    recorded: new Date().toISOString(),
    outcome: OUTCOME_CODES[record.outcome],
    ...(record.outcomeDescription ? { outcomeDesc: record.outcomeDescription } : {}),
    ...(record.breakGlass
      ? { purposeOfEvent: [{ coding: [{ system: ACT_REASON, code: 'BTG', display: 'break the glass' }], text: record.purpose }] }
      : record.purpose
        ? { purposeOfEvent: [{ text: record.purpose }] }
        : {}),
    agent: agentsOf(record.caller),
    source: {
      observer: { display: 'Pont' },
      type: [{ system: 'http://terminology.hl7.org/CodeSystem/security-source-type', code: '4', display: 'Application Server' }],
    },
    entity: entitiesOf(record),
  };
}

/**
 * Writes the AuditEvent of one operation on patient data: the one place the audit trail is stored.
 * Call it with the transaction of the operation itself, so the record exists exactly when the
 * operation's effects do. `base` is the FHIR base URL (for the store's index of references).
 */
export async function recordAudit(tx: Queryable, base: string, record: AuditRecord): Promise<AuditEvent> {
  const [written] = await writeMany(tx, base, [{ resource: { ...buildAuditEvent(record), id: randomUUID() }, method: 'POST' }]);
  return written!.resource as AuditEvent;
}
