import type { Context } from 'koa';
import { randomUUID } from 'node:crypto';
import type { AuditEvent, AuditEventAgent, AuditEventEntity } from '@medplum/fhirtypes';
import type { Principal } from '../core/principal';
import type { Queryable } from '../db/database';
import { HEALTH_ID_SYSTEM } from '../healthid/healthid';
import { constant, rowsOf, sql as SQL } from '../db/sql';
import { consentPurposeOf } from '../policy/index';

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
  /** The purpose of use as a v3 ActReason code (X-Purpose-Of-Use when it is one, else the consent's own purpose). */
  purposeCode?: string;
  /**
   * A read under consent that stated no purpose: `purposeCode` is its consent's, looked up as the row is written
   * (insertAuditRows; not kept in the row).
   */
  purposeFromConsent?: boolean;
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
  if (principal.kind === 'portal-user') {
    // A person signed in to the developer portal, acting for their organisation.
    return [
      { who: { display: principal.email }, altId: `portal:${principal.userId}`, requestor: true, network },
      {
        type: { text: 'organization of the portal user' },
        who: { type: 'Organization', identifier: { system: ORGANIZATION_ID_SYSTEM, value: principal.organizationId }, display: principal.organizationId },
        altId: principal.organizationId,
        requestor: false,
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

/** The FHIR AuditEvent of a record made at `recorded` (how the trail is shown to its readers). */
export function buildAuditEvent(record: AuditRecord, recorded: Date): AuditEvent {
  return {
    resourceType: 'AuditEvent',
    type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest', display: 'RESTful Operation' },
    subtype: [
      { system: 'http://hl7.org/fhir/restful-interaction', code: INTERACTION_BY_ACTION[record.action] },
      { system: OPERATION_SYSTEM, code: record.operation },
    ],
    action: record.action,
    recorded: recorded.toISOString(),
    outcome: OUTCOME_CODES[record.outcome],
    ...(record.outcomeDescription ? { outcomeDesc: record.outcomeDescription } : {}),
    ...(record.breakGlass
      ? { purposeOfEvent: [{ coding: [{ system: ACT_REASON, code: 'BTG', display: 'break the glass' }], text: record.purpose }] }
      : record.purposeCode
        ? { purposeOfEvent: [{ coding: [{ system: ACT_REASON, code: record.purposeCode }], ...(record.purpose ? { text: record.purpose } : {}) }] }
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

/** A row of the audit trail as `audit_log` stores it (src/fhir/audit-trail.ts): the record, and its columns for queries. */
export interface AuditRow {
  id: string;
  recorded: Date;
  record: AuditRecord;
}

export function auditRow(record: AuditRecord): AuditRow {
  return { id: randomUUID(), recorded: new Date(), record };
}

const ROW_COLUMNS = constant(SQL`id, recorded, action, outcome, operation, actor, organization_id, patients, purpose, request_id, record`);
/** insertAuditRows's rows: the columns, the patients as a JSON array, and whether to look up the consent's purpose. */
const ROW_TYPES = [
  ['id', 'uuid'],
  ['recorded', 'timestamptz'],
  ['action', 'text'],
  ['outcome', 'text'],
  ['operation', 'text'],
  ['actor', 'text'],
  ['org', 'text'],
  ['patients', 'jsonb'],
  ['purpose', 'text'],
  ['request_id', 'text'],
  ['record', 'jsonb'],
  ['consent_purpose', 'boolean'],
] as const;

/** The principal as the trail names it: who, not what they were allowed (scopes are not kept). */
function withoutGrants(principal: Principal | undefined): Principal | undefined {
  if (principal?.kind !== 'client') return principal;
  const { scopes: _scopes, tokenExpiresAt: _expires, allPatients: _all, ...who } = principal;
  return { ...who, scopes: [] };
}

/** The consent's purpose of a read that stated none (purposeFromConsent), over the columns of insertAuditRows's rows. */
const CONSENT_PURPOSE = constant(consentPurposeOf(SQL`u.org`, SQL`u.patient_ids`));

/** Who acted, as one string: a client id, `agent:…`, `patient:…`, `system:…`, or null (anonymous). */
function actorOf(principal: Principal | undefined): string | null {
  if (!principal) return null;
  switch (principal.kind) {
    case 'client':
      return principal.clientId;
    case 'bridge-agent':
      return `agent:${principal.agentId}`;
    case 'patient':
      return `patient:${principal.patientId}`;
    case 'system':
      return `system:${principal.name}`;
    case 'portal-user':
      return `portal:${principal.userId}`;
  }
}

/**
 * The statement's own transaction commits without waiting for its WAL to reach the disk (PostgreSQL's
 * asynchronous commit, set for that transaction alone): see insertAuditRows.
 */
const ASYNC_COMMIT = constant(SQL`, (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit`);

/**
 * Appends rows to the audit trail in one statement: the one place it is written. In a write's own
 * transaction, the rows exist exactly when the write's effects do. Outside one (the reads' group commit),
 * `asyncCommit` commits the statement asynchronously: when it returns, its rows are committed and seen by
 * every reader, and survive a crash of Pont; only a crash of the PostgreSQL server within its WAL writer's
 * delay (3 × wal_writer_delay, 600 ms by default), or a failover to a synchronous standby it had not yet
 * reached, could lose them. That saves a disk flush per group (0.2 ms at p50, 1 ms at p95 on the development
 * machine). Never inside a write's transaction, whose commit it would make asynchronous too.
 */
export async function insertAuditRows(sql: Queryable, rows: AuditRow[], asyncCommit = false): Promise<void> {
  if (!rows.length) return;
  const values = rows.map((r) => {
    const { purposeFromConsent, ...record } = r.record;
    const p = record.caller.principal;
    return [
      r.id,
      r.recorded.toISOString(),
      record.action,
      record.outcome,
      record.operation,
      actorOf(p),
      p && (p.kind === 'client' || p.kind === 'bridge-agent' || p.kind === 'portal-user') ? (p.organizationId ?? null) : null,
      JSON.stringify([record.patient?.id, ...(record.otherPatients ?? [])].filter(Boolean)),
      record.purpose ?? null,
      record.caller.requestId ?? null,
      JSON.stringify({ ...record, caller: { ...record.caller, principal: withoutGrants(p) } }),
      purposeFromConsent === true,
    ];
  });
  // The consent's purpose only in a statement that has a row to look it up for. Otherwise a custom plan of one row
  // folds the lookup away and a generic plan keeps it: priced higher, the generic plan never won, and every write's
  // audit row was planned anew (~0.6 ms).
  const record = rows.some((r) => r.record.purposeFromConsent === true)
    ? SQL`CASE WHEN u.consent_purpose THEN u.record || jsonb_strip_nulls(jsonb_build_object('purposeCode', ${CONSENT_PURPOSE})) ELSE u.record END`
    : SQL`u.record`;
  const { text, values: bound } = SQL`INSERT INTO audit_log (${ROW_COLUMNS})
     SELECT u.id, u.recorded, u.action, u.outcome, u.operation, u.actor, u.org, u.patient_ids, u.purpose, u.request_id, ${record}
     FROM (SELECT *, ARRAY(SELECT jsonb_array_elements_text(t.patients)) AS patient_ids FROM ${rowsOf('t', ROW_TYPES, values)}) u${asyncCommit ? ASYNC_COMMIT : SQL``}`.render();
  await sql.query(text, bound);
}

/** Records one operation on patient data in `tx`, the operation's own transaction (see insertAuditRows). */
export async function recordAudit(tx: Queryable, record: AuditRecord): Promise<AuditRow> {
  const row = auditRow(record);
  await insertAuditRows(tx, [row]);
  return row;
}
