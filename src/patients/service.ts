import type { Patient } from '@medplum/fhirtypes';
import type { Config } from '../config';
import type { FhirRepository } from '../fhir/repository';
import { ApiError, validationFailed } from '../core/errors';
import { HealthIdErrorCode, healthIdProblem, invalidHealthId } from '../healthid/healthid';
import { findByHealthId, findByMatchKey, lockMatchKey, type HealthIdRecord } from '../healthid/registry';
import type { AuditRecord } from '../audit/audit';
import { MappingValueError, type CompiledMap } from '../mapping/index';
import { matchKey } from '../healthid/matching';

export interface PatientServiceDeps {
  config: Pick<Config, 'matchKeySecret'>;
  /** The mapping engine's `patient-profile` map (mappings/patient-profile.map.yaml): Connect profile <-> FHIR Patient. */
  profileMapping: () => CompiledMap;
  /** The `patient-demographics` map: what resolve and verify show of the patient (mappings/patient-demographics.map.yaml). */
  demographicsMapping: () => CompiledMap;
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

/** What resolve and verify show of a patient: the Health ID and the fields of the demographics map. */
export type PatientSummary = { health_id: string } & Record<string, unknown>;

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

type Audit = Omit<AuditRecord, 'caller'>;

/**
 * The three patient operations of the Connect layer. Each runs in one repository transaction that
 * also holds its events and its audit record: everything is written, or nothing. Translation between
 * the Connect shape and the FHIR Patient is the mapping engine's, never done by hand here; the Health ID
 * registry follows the Patient through the repository, whatever path writes it.
 */
export class PatientService {
  constructor(private readonly deps: PatientServiceDeps) {}

  /** POST /patients/resolve with a Health ID: look it up, never create. */
  async resolveByHealthId(repo: FhirRepository, healthId: string, reason: StatedReason): Promise<ResolveResult> {
    const found = await this.lookUp(repo, { operation: 'resolvePatient', action: 'R', reason }, healthId, async (record, patient) => ({
      outcomeDescription: 'found',
      result: { status: 'found' as const, health_id: record.healthId, patient: this.summaryOf(record.healthId, patient) },
    }));
    return found ?? { status: 'not_found', health_id: healthId };
  }

  /**
   * POST /patients/resolve with demographics: the registered patient with the same match key
   * (src/healthid/matching.ts), or a new Patient (the repository issues its Health ID).
   */
  async resolveByDemographics(repo: FhirRepository, person: Demographics, reason: StatedReason): Promise<ResolveResult> {
    const key = matchKey(person, this.deps.config.matchKeySecret);
    return repo.transaction(async (sql) => {
      // Concurrent identical resolves wait here: the first creates, the others find it.
      await lockMatchKey(sql, key);
      const base = { operation: 'resolvePatient', ...this.reasonOf(reason) };
      const existing = await findByMatchKey(sql, key);
      if (existing) {
        const patient = await this.patientOf(repo, existing);
        await repo.audit({ ...base, action: 'R', outcome: 'success', outcomeDescription: 'found', patient: auditPatient(existing) });
        return { status: 'found', health_id: existing.healthId, patient: this.summaryOf(existing.healthId, patient) };
      }
      const mapping = this.deps.profileMapping();
      const patient = await repo.create(patientFrom(mapping, { ...person }), { audit: false });
      const healthId = String(mapping.fromFhir(patient).health_id);
      await repo.audit({ ...base, action: 'C', outcome: 'success', outcomeDescription: 'created', patient: { id: patient.id, healthId } });
      return { status: 'created', health_id: healthId, patient: this.summaryOf(healthId, patient) };
    });
  }

  /** GET /patients/verify/{health_id}: checksum, then registration; records `health_id.verified`. */
  async verify(repo: FhirRepository, healthId: string, reason: StatedReason): Promise<VerifyResult> {
    const verified = await this.lookUp(repo, { operation: 'verifyHealthId', action: 'E', reason }, healthId, async (record, patient) => {
      const principal = repo.context.principal;
      const facility = principal.kind === 'client' || principal.kind === 'bridge-agent' ? (principal.facilityId ?? null) : null;
      await repo.recordEvent({
        type: 'health_id.verified',
        patientId: record.patientId,
        data: { health_id: record.healthId, patient_id: record.patientId, facility_id: facility },
      });
      return { outcomeDescription: 'verified', result: { valid: true as const, health_id: record.healthId, patient: this.summaryOf(record.healthId, patient) } };
    });
    if (!verified) throw notRegistered(healthId);
    return verified;
  }

  /** GET /patient/search?health_id=: the patient's whole profile in the Connect shape (patient data: consent applies). */
  async profile(repo: FhirRepository, healthId: string, reason: StatedReason): Promise<Record<string, unknown>> {
    const profile = await this.lookUp(repo, { operation: 'searchPatient', action: 'R', reason }, healthId, async (record, patient) => {
      // The full profile (contact details): consent covering patients:read or registration, never "wrote a record".
      await repo.requirePatientAccess(record.patientId, ['patients:read'], 'searchPatient', 'relationship');
      return { outcomeDescription: 'found', result: { health_id: record.healthId, ...this.deps.profileMapping().fromFhir(patient) } };
    });
    if (!profile) throw notRegistered(healthId);
    return profile;
  }

  /**
   * The shared part of every operation on a given Health ID: check it, find the patient, read its
   * Patient, run `onFound` and audit, all in one transaction. Resolves undefined when the ID is valid
   * but unregistered. Refused and unregistered IDs are audited too (outcome 4): who probes for
   * patients is worth knowing. Their audit record is committed before the caller turns the outcome
   * into an error.
   */
  private async lookUp<T>(
    repo: FhirRepository,
    what: { operation: string; action: 'R' | 'E'; reason: StatedReason },
    healthId: string,
    onFound: (record: HealthIdRecord, patient: Patient) => Promise<{ result: T; outcomeDescription: string }>,
  ): Promise<T | undefined> {
    const base: Pick<Audit, 'operation' | 'action' | 'purpose' | 'externalReference'> = { operation: what.operation, action: what.action, ...this.reasonOf(what.reason) };
    const problem = healthIdProblem(healthId);
    if (problem) {
      await repo.audit({ ...base, outcome: 'minor-failure', outcomeDescription: problem.code, patient: { healthId: healthId.slice(0, 64) } });
      throw invalidHealthId(problem);
    }
    return repo.transaction(async (sql) => {
      const record = await findByHealthId(sql, healthId);
      if (!record) {
        await repo.audit({ ...base, outcome: 'minor-failure', outcomeDescription: 'not_found', patient: { healthId } });
        return undefined;
      }
      const { result, outcomeDescription } = await onFound(record, await this.patientOf(repo, record));
      await repo.audit({ ...base, outcome: 'success', outcomeDescription, patient: auditPatient(record) });
      return result;
    });
  }

  /**
   * The registered patient's Patient, read as an identity look-up (no consent needed to find a patient: the
   * operations show its demographics only, except the profile, which checks consent); the operation
   * records its own audit record.
   */
  private patientOf(repo: FhirRepository, record: HealthIdRecord): Promise<Patient> {
    return repo.read<Patient>('Patient', record.patientId, { audit: false, identity: true });
  }

  /** What resolve and verify show: the registry's Health ID, then every field of the demographics map (null when absent). */
  private summaryOf(healthId: string, patient: Patient): PatientSummary {
    const map = this.deps.demographicsMapping();
    const read = map.readFhir(patient).connect;
    return { health_id: healthId, ...Object.fromEntries(map.fields.map((f) => [f, read[f] ?? null])) };
  }

  private reasonOf(reason: StatedReason) {
    return { purpose: reason.purpose, externalReference: reason.external_reference };
  }
}

function auditPatient(record: HealthIdRecord) {
  return { id: record.patientId, healthId: record.healthId };
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
