import type { Patient } from '@medplum/fhirtypes';
import type { Config } from '../config';
import type { Database, Queryable } from '../db/database';
import { recordEvent } from '../events/outbox';
import { ApiError, validationFailed } from '../http/errors';
import { HealthIdErrorCode, healthIdProblem, invalidHealthId } from '../healthid/healthid';
import { attachPatient, findByHealthId, findByMatchKey, reserveHealthId, type HealthIdRecord } from '../healthid/registry';
import { recordAudit, type AuditCaller, type AuditRecord } from '../audit/audit';
import type { FhirStore } from '../fhir/store';
import { MappingValueError, type CompiledMap } from '../mapping/index';
import { matchKey } from './matching';

export interface PatientServiceDeps {
  config: Pick<Config, 'environment'>;
  db: Database;
  store: Pick<FhirStore, 'create' | 'read'>;
  /** The mapping engine's `patient-profile` map (mappings/patient-profile.map.yaml): Connect profile <-> FHIR Patient. */
  profileMapping: () => CompiledMap;
}

/** Demographics of a resolve request, already validated (country code defaulted). */
export interface Demographics {
  first_name: string;
  last_name?: string;
  date_of_birth?: string;
  sex?: 'male' | 'female' | 'other';
  country_code: string;
  phone_number?: string;
}

/** Why the caller looked the patient up: written to the audit trail, never stored elsewhere. */
export interface StatedReason {
  purpose?: string;
  external_reference?: string;
}

/** Fields of the Connect profile that every patient operation may show: no contact details. */
export const SUMMARY_FIELDS = ['health_id', 'first_name', 'last_name', 'date_of_birth', 'sex', 'country_code'] as const;
export type PatientSummary = Record<(typeof SUMMARY_FIELDS)[number], string | null>;

export type ResolveResult =
  | { status: 'found' | 'created'; health_id: string; patient: PatientSummary }
  | { status: 'not_found'; health_id: string };

export interface VerifyResult {
  valid: true;
  health_id: string;
  patient: PatientSummary;
}

const notRegistered = (healthId: string) =>
  new ApiError(404, HealthIdErrorCode.notRegistered, `Health ID ${healthId} is valid but not registered`);

/**
 * The three patient operations of the Connect layer. Each runs in one transaction that also holds
 * its events and its AuditEvent: everything is written, or nothing. Translation between the
 * Connect shape and the FHIR Patient is the mapping engine's, never done by hand here.
 */
export class PatientService {
  constructor(private readonly deps: PatientServiceDeps) {}

  /** POST /patients/resolve with a Health ID: look it up, never create. */
  async resolveByHealthId(caller: AuditCaller, healthId: string, reason: StatedReason): Promise<ResolveResult> {
    const found = await this.lookUp({ caller, operation: 'resolvePatient', action: 'R', reason }, healthId, async (_tx, record, profile) => ({
      outcomeDescription: 'found',
      result: { status: 'found' as const, health_id: record.healthId, patient: summaryOf(profile) },
    }));
    return found ?? { status: 'not_found', health_id: healthId };
  }

  /**
   * POST /patients/resolve with demographics: the registered patient with the same match key
   * (src/patients/matching.ts), or a new Patient with a newly issued Health ID.
   */
  async resolveByDemographics(caller: AuditCaller, person: Demographics, reason: StatedReason): Promise<ResolveResult> {
    const key = matchKey(person);
    return this.deps.db.transaction(async (tx) => {
      let existing = await findByMatchKey(tx, key);
      let reservedHealthId: string | undefined;
      if (!existing) {
        const reservation = await reserveHealthId(tx, person.country_code, key);
        if ('existing' in reservation) existing = reservation.existing;
        else reservedHealthId = reservation.reserved;
      }
      const base = { caller, operation: 'resolvePatient', ...this.reasonOf(reason) };
      if (existing) {
        const profile = await this.profileOf(tx, existing);
        await this.audit(tx, { ...base, action: 'R', outcome: 'success', outcomeDescription: 'found', patient: this.auditPatient(existing) });
        return { status: 'found', health_id: existing.healthId, patient: summaryOf(profile) };
      }
      const healthId = reservedHealthId!;
      const mapping = this.deps.profileMapping();
      const patient = await this.deps.store.create(patientFrom(mapping, { ...person, health_id: healthId }), { tx });
      const record: HealthIdRecord = { healthId, patientId: patient.id!, countryCode: person.country_code };
      await attachPatient(tx, healthId, record.patientId);
      const eventBase = this.eventBase(caller, record.patientId);
      await recordEvent(tx, { ...eventBase, type: 'patient.created', data: { patient_id: record.patientId, health_id: healthId } });
      await recordEvent(tx, {
        ...eventBase,
        type: 'health_id.created',
        data: { health_id: healthId, patient_id: record.patientId, country_code: person.country_code },
      });
      await this.audit(tx, { ...base, action: 'C', outcome: 'success', outcomeDescription: 'created', patient: this.auditPatient(record) });
      return { status: 'created', health_id: healthId, patient: summaryOf(mapping.fromFhir(patient)) };
    });
  }

  /** GET /patients/verify/{health_id}: checksum, then registration; records `health_id.verified`. */
  async verify(caller: AuditCaller, healthId: string, reason: StatedReason): Promise<VerifyResult> {
    const verified = await this.lookUp({ caller, operation: 'verifyHealthId', action: 'E', reason }, healthId, async (tx, record, profile) => {
      await recordEvent(tx, {
        ...this.eventBase(caller, record.patientId),
        type: 'health_id.verified',
        data: { health_id: record.healthId, patient_id: record.patientId, facility_id: facilityOf(caller) ?? null },
      });
      return { outcomeDescription: 'verified', result: { valid: true as const, health_id: record.healthId, patient: summaryOf(profile) } };
    });
    if (!verified) throw notRegistered(healthId);
    return verified;
  }

  /** GET /patient/search?health_id=: the patient's whole profile in the Connect shape. */
  async profile(caller: AuditCaller, healthId: string, reason: StatedReason): Promise<Record<string, unknown>> {
    const profile = await this.lookUp({ caller, operation: 'searchPatient', action: 'R', reason }, healthId, async (_tx, _record, found) => ({
      outcomeDescription: 'found',
      result: found,
    }));
    if (!profile) throw notRegistered(healthId);
    return profile;
  }

  /**
   * The shared part of every operation on a given Health ID: check it, find the patient, read its
   * profile, run `onFound` and audit, all in one transaction. Resolves undefined when the ID is valid
   * but unregistered. Refused and unregistered IDs are audited too (outcome 4): who probes for
   * patients is worth knowing. Their AuditEvent is committed before the caller turns the outcome
   * into an error.
   */
  private async lookUp<T>(
    what: { caller: AuditCaller; operation: string; action: 'R' | 'E'; reason: StatedReason },
    healthId: string,
    onFound: (tx: Queryable, record: HealthIdRecord, profile: Record<string, unknown>) => Promise<{ result: T; outcomeDescription: string }>,
  ): Promise<T | undefined> {
    const base = { caller: what.caller, operation: what.operation, action: what.action, ...this.reasonOf(what.reason) };
    const problem = healthIdProblem(healthId);
    if (problem) {
      await this.deps.db.transaction((tx) =>
        this.audit(tx, { ...base, outcome: 'minor-failure', outcomeDescription: problem.code, patient: { healthId: healthId.slice(0, 64) } }),
      );
      throw invalidHealthId(problem);
    }
    return this.deps.db.transaction(async (tx) => {
      const record = await findByHealthId(tx, healthId);
      if (!record) {
        await this.audit(tx, { ...base, outcome: 'minor-failure', outcomeDescription: 'not_found', patient: { healthId } });
        return undefined;
      }
      const { result, outcomeDescription } = await onFound(tx, record, await this.profileOf(tx, record));
      await this.audit(tx, { ...base, outcome: 'success', outcomeDescription, patient: this.auditPatient(record) });
      return result;
    });
  }

  private async profileOf(tx: Queryable, record: HealthIdRecord): Promise<Record<string, unknown>> {
    const patient = await this.deps.store.read<Patient>('Patient', record.patientId, { tx });
    return { health_id: record.healthId, ...this.deps.profileMapping().fromFhir(patient) };
  }

  private audit(tx: Queryable, record: AuditRecord) {
    return recordAudit(tx, this.deps.store, record);
  }

  private auditPatient(record: HealthIdRecord) {
    return { id: record.patientId, healthId: record.healthId };
  }

  private reasonOf(reason: StatedReason) {
    return { purpose: reason.purpose, externalReference: reason.external_reference };
  }

  private eventBase(caller: AuditCaller, patientId: string) {
    return {
      organizationId: caller.principal?.kind === 'client' ? caller.principal.organizationId : undefined,
      facilityId: facilityOf(caller),
      environment: this.deps.config.environment,
      requestId: caller.requestId,
      patientId,
    };
  }
}

/** The map refuses values it cannot take (e.g. after someone narrows a value table): the caller's input, so a 422. */
function patientFrom(mapping: CompiledMap, profile: Record<string, unknown>): Patient {
  try {
    return mapping.toFhir(profile) as Patient;
  } catch (err) {
    if (err instanceof MappingValueError) throw validationFailed(err.message);
    throw err;
  }
}

function facilityOf(caller: AuditCaller): string | undefined {
  return caller.principal?.facilityId;
}

/** The profile's summary fields, each present (null when the patient has no value). */
export function summaryOf(profile: Record<string, unknown>): PatientSummary {
  const entries = SUMMARY_FIELDS.map((field) => [field, typeof profile[field] === 'string' ? profile[field] : null]);
  return Object.fromEntries(entries) as PatientSummary;
}
