import type { Consent } from '@medplum/fhirtypes';
import type { PatientPrincipal } from '../core/principal';
import type { Queryable } from '../db/database';
import type { FhirRepository } from '../fhir/repository';
import { hashKey } from '../core/hash';
import { ApiError, ErrorCode, validationFailed } from '../core/errors';
import { healthIdsByPatient, registeredPatient } from '../healthid/registry';
import { declaredValues, MappingValueError, type CompiledMap, type MappingSet } from '../mapping/index';
import { consentRecordOf, coveredClasses, type ConsentRecord } from './record';
import { CONSENT_TYPES } from '../core/data-classes';
import { DEFAULT_PURPOSE } from '../policy/hi-types';
import { dataHolders } from '../policy/index';
import { sql as sql_ } from '../db/sql';

/**
 * A consent as the organisation (or the patient) sees it: the consent map's record (mappings/consent.map.yaml), the
 * patient named by Health ID instead of `patient_id`, `scopes` widened to the classes it covers, and a `status` that
 * is the map's or one of DERIVED_STATES.
 */
export type ConsentView = { consent_id: string | null; health_id: string; organization_id: string; status: string; scopes: string[] } & Record<string, unknown>;

/** The consent map's fields an answer leaves out: it names the patient by Health ID, never by their record's id. */
export const HIDDEN_FIELDS: readonly string[] = ['patient_id'];

/**
 * The states an answer adds to the consent map's statuses. Never stored, so they cannot be rows of the map's status
 * table (each row gives FHIR a value): `expired` is an active consent whose expires_at has passed, `none` is no
 * consent on file (or one the map reads no status from, e.g. a draft).
 */
export const DERIVED_STATES = ['expired', 'none'] as const;

/** Every `status` an answer can have: the map's, then the derived ones. */
export function answerStates(map: CompiledMap): string[] {
  return [...declaredValues(map, 'status'), ...DERIVED_STATES];
}

/** A request answered by the patient: the default life of the consent it becomes, unless the request says. */
export const REQUESTED_CONSENT_DAYS = 365;

/** The artefact's fields a grant or request states (issue 43). */
export interface ArtefactInput {
  purpose_of_use?: string;
  hi_types?: string[];
  date_range?: { from: string; to: string };
  erase_at?: string;
  frequency?: { count: number; unit: string };
}

/** What the patient narrows when approving. */
export interface Approval {
  hi_types?: string[];
  date_range?: { from: string; to: string };
  expires_at?: string;
}

/** The artefact's fields of a record, defaults filled in (a consent made before issue 43: care management, no limits). */
function artefactOf(input: ArtefactInput) {
  return {
    purpose_of_use: input.purpose_of_use ?? DEFAULT_PURPOSE,
    hi_types: input.hi_types ?? [],
    date_range: input.date_range ?? null,
    erase_at: input.erase_at ?? null,
    frequency: input.frequency ?? null,
  };
}

const seconds = (iso: string) => new Date(iso).toISOString().replace(/\.\d+Z$/, 'Z');

interface IndexRow {
  consent_id: string;
  organization_id: string;
  status: string;
  granted_at: Date | string | null;
  expires_at: Date | string | null;
}

const consentNotFound = (message: string) => new ApiError(404, 'CONSENT_NOT_FOUND', message);

/** An indexed consent that grants access now (the FHIR statuses the access rule reads). */
function grantsNow(row: IndexRow, now: number): boolean {
  return row.status === 'active' && (row.expires_at === null || new Date(row.expires_at).getTime() > now);
}

/**
 * Consents: grants recorded by a facility, requests answered by the patient, revocations. Each consent is a
 * FHIR Consent written through the repository (mappings/consent.map.yaml); its events (consent.*) come from
 * the Consent's status changes and the consent index follows it, in the same transaction.
 */
/** A line of the portal's consent counts (ConsentService.countsFor). */
export interface ConsentCount {
  state: string;
  consent_type: string;
  purpose_of_use: string;
  count: number;
  narrowed: number;
}

export class ConsentService {
  constructor(private readonly mappings: MappingSet) {}

  /**
   * The organisation's consents counted by state, type and purpose of use (the developer portal): counts only, no
   * patient named; `narrowed`: how many of them name kinds of record, a period of care or a frequency (artefacts).
   */
  async countsFor(repo: FhirRepository, organizationId: string): Promise<ConsentCount[]> {
    const { rows } = await repo.transaction((sql) =>
      sql.query<{ state: string; consent_type: string; purpose_of_use: string; count: string; narrowed: string }>(
        `SELECT CASE WHEN status = 'active' AND expires_at IS NOT NULL AND expires_at <= now() THEN 'expired' ELSE status END AS state,
                consent_type, purpose_of_use, count(*) AS count,
                count(*) FILTER (WHERE resource_types IS NOT NULL OR data_from IS NOT NULL OR data_to IS NOT NULL OR frequency_count IS NOT NULL) AS narrowed
         FROM consent_access WHERE organization_id = $1 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
        [organizationId],
      ),
    );
    return rows.map((r) => ({ state: r.state, consent_type: r.consent_type, purpose_of_use: r.purpose_of_use, count: Number(r.count), narrowed: Number(r.narrowed) }));
  }

  /** POST …/consent/grant: the patient, present at the caller's facility, grants consent to the caller's organisation. */
  async grant(
    repo: FhirRepository,
    organizationId: string,
    healthId: string,
    input: { consent_type: string; expires_at: string; purpose?: string; scopes?: string[]; external_reference?: string } & ArtefactInput,
  ): Promise<ConsentView> {
    checkScopes(input.consent_type, input.scopes);
    return repo.transaction(async (sql) => {
      const patient = await registeredPatient(sql, healthId);
      await lockPair(sql, patient.patientId, organizationId);
      // A grant while one is active replaces it (a new grant time, type, classes and expiry): one active consent per pair.
      const [current] = await this.rows(sql, patient.patientId, organizationId, "status = 'active'");
      const record: ConsentRecord = {
        consent_id: current?.consent_id ?? '00000000-0000-4000-8000-000000000000',
        patient_id: patient.patientId,
        organization_id: organizationId,
        consent_type: input.consent_type,
        scopes: input.scopes ?? [],
        status: 'active',
        purpose: input.purpose ?? null,
        granted_at: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
        expires_at: seconds(input.expires_at),
        ...artefactOf({ ...input, erase_at: input.erase_at && seconds(input.erase_at) }),
      };
      const consent = this.toFhir(record);
      const stored = current ? (await repo.update({ ...consent, id: current.consent_id }, { audit: false })).resource : await repo.create(consent, { audit: false });
      await repo.audit({
        operation: 'grantConsent',
        action: current ? 'U' : 'C',
        outcome: 'success',
        outcomeDescription: `granted ${input.consent_type} to ${organizationId}`,
        patient: { id: patient.patientId, healthId },
        purpose: input.purpose,
        externalReference: input.external_reference,
        dataTypes: ['Consent'],
      });
      return this.view(stored, healthId);
    });
  }

  /** GET …/consent: the caller's organisation's consent for the patient, in one word and its details. */
  async status(repo: FhirRepository, organizationId: string, healthId: string): Promise<ConsentView> {
    return repo.transaction(async (sql) => {
      const patient = await registeredPatient(sql, healthId);
      const rows = await this.rows(sql, patient.patientId, organizationId);
      const now = Date.now();
      // The consent that decides: an active one, else a pending request, else the latest that ended.
      const best = rows.find((r) => grantsNow(r, now)) ?? rows.find((r) => r.status === 'proposed') ?? rows[0];
      const result = this.view(best && (await repo.read<Consent>('Consent', best.consent_id, { audit: false })), healthId, organizationId);
      await repo.audit({
        operation: 'consentStatus',
        action: 'R',
        outcome: 'success',
        outcomeDescription: result.status,
        patient: { id: patient.patientId, healthId },
        dataTypes: ['Consent'],
      });
      return result;
    });
  }

  /** POST …/consent/revoke: the patient's revocation of the caller's organisation's consent, recorded by the facility. */
  async revokeFor(repo: FhirRepository, organizationId: string, healthId: string, reason: { purpose?: string; external_reference?: string }): Promise<ConsentView> {
    return repo.transaction(async (sql) => {
      const patient = await registeredPatient(sql, healthId);
      await lockPair(sql, patient.patientId, organizationId);
      const [current] = await this.rows(sql, patient.patientId, organizationId, "status = 'active'");
      if (!current) throw consentNotFound(`No consent of this patient to ${organizationId} is active: nothing to revoke`);
      const revoked = await this.setStatus(repo, current.consent_id, 'revoked');
      await repo.audit({
        operation: 'revokeConsent',
        action: 'U',
        outcome: 'success',
        outcomeDescription: 'revoked',
        patient: { id: patient.patientId, healthId },
        purpose: reason.purpose,
        externalReference: reason.external_reference,
        dataTypes: ['Consent'],
      });
      return this.view(revoked, healthId);
    });
  }

  /** POST /api/v1/sdk/consents/request: asks the patient for consent; they answer in their app. */
  async request(
    repo: FhirRepository,
    organizationId: string,
    input: { health_id: string; purpose: string; requested_scopes: string[]; consent_type?: string; expires_at?: string } & ArtefactInput,
  ) {
    const consentType = input.consent_type ?? 'full_record';
    checkScopes(consentType, input.requested_scopes);
    return repo.transaction(async (sql) => {
      const patient = await registeredPatient(sql, input.health_id);
      const record: ConsentRecord = {
        consent_id: '00000000-0000-4000-8000-000000000000',
        patient_id: patient.patientId,
        organization_id: organizationId,
        consent_type: consentType,
        scopes: input.requested_scopes,
        status: 'pending',
        purpose: input.purpose,
        granted_at: null,
        expires_at: input.expires_at ? seconds(input.expires_at) : null,
        ...artefactOf({ ...input, erase_at: input.erase_at && seconds(input.erase_at) }),
      };
      const stored = await repo.create(this.toFhir(record), { audit: false });
      await repo.audit({
        operation: 'requestConsent',
        action: 'C',
        outcome: 'success',
        outcomeDescription: `requested ${input.requested_scopes.join(' ')}`,
        patient: { id: patient.patientId, healthId: input.health_id },
        purpose: input.purpose,
        dataTypes: ['Consent'],
      });
      return {
        consent_request_id: stored.id!,
        health_id: input.health_id,
        organization_id: organizationId,
        status: 'pending' as const,
        consent_type: consentType,
        requested_scopes: input.requested_scopes,
        purpose: input.purpose,
        created_at: stored.meta!.lastUpdated!,
        purpose_of_use: record.purpose_of_use!,
        hi_types: record.hi_types!,
        date_range: record.date_range ?? null,
        erase_at: record.erase_at ?? null,
        frequency: record.frequency ?? null,
      };
    });
  }

  // ------------------------------------------------------------------ the signed artefact (issue 43)

  /**
   * The artefact of a consent granted to `organizationId`: its facts as the payload of a compact JWS that `sign`
   * makes with Pont's signing key. Another organisation's consent, a request never granted, or an unknown id: the
   * same 404. Audited (it names the patient).
   */
  async artefact(repo: FhirRepository, organizationId: string, consentId: string, sign: (payload: Record<string, unknown>, expiresAt: number | undefined) => Promise<string>): Promise<string> {
    return repo.transaction(async (sql) => {
      const { rows } = await sql.query<{ patient_id: string; granted_at: Date | null }>(
        'SELECT patient_id, granted_at FROM consent_access WHERE consent_id = $1 AND organization_id = $2',
        [consentId, organizationId],
      );
      const row = rows[0];
      if (!row || row.granted_at === null) throw consentNotFound(`No consent ${consentId} granted to your organisation`);
      const healthId = (await healthIdsByPatient(sql, [row.patient_id])).get(row.patient_id) ?? '';
      const view = this.view(await repo.read<Consent>('Consent', consentId, { audit: false }), healthId);
      const holdersSql = dataHolders(sql_`h.org`, sql_`${row.patient_id}`).render();
      const { rows: holders } = await sql.query<{ org: string }>(`${holdersSql.text} ORDER BY 1 LIMIT 100`, holdersSql.values);
      const artefact = {
        consent_id: consentId,
        status: view.status,
        health_id: healthId,
        requester: { organization_id: organizationId },
        holders: holders.map((h) => ({ organization_id: h.org })),
        purpose_of_use: view.purpose_of_use,
        purpose: view.purpose,
        consent_type: view.consent_type,
        scopes: view.scopes,
        hi_types: view.hi_types,
        date_range: view.date_range,
        granted_at: view.granted_at,
        expires_at: view.expires_at,
        erase_at: view.erase_at,
        frequency: view.frequency,
      };
      const expires = typeof view.expires_at === 'string' ? Math.floor(Date.parse(view.expires_at) / 1000) : undefined;
      const jws = await sign({ consent: artefact }, expires);
      await repo.audit({
        operation: 'getConsentArtefact',
        action: 'R',
        outcome: 'success',
        outcomeDescription: `artefact of consent ${consentId}`,
        patient: { id: row.patient_id, healthId },
        dataTypes: ['Consent'],
      });
      return jws;
    });
  }

  /** The consents granted to `organizationId` that were revoked at or after `since`, oldest first (the revocation list). */
  async revokedSince(repo: FhirRepository, organizationId: string, since: string, limit: number): Promise<Array<{ consent_id: string; revoked_at: string }>> {
    const { rows } = await repo.transaction((sql) =>
      sql.query<{ consent_id: string; revoked_at: Date | string }>(
        `SELECT consent_id, revoked_at FROM consent_access WHERE organization_id = $1 AND revoked_at IS NOT NULL AND revoked_at >= $2::timestamptz
         ORDER BY revoked_at, consent_id LIMIT $3`,
        [organizationId, since, limit],
      ),
    );
    return rows.map((r) => ({ consent_id: r.consent_id, revoked_at: new Date(r.revoked_at).toISOString() }));
  }

  // ------------------------------------------------------------------ the patient's side

  /** The patient's consents and pending requests, newest first. */
  async listForPatient(repo: FhirRepository, patientId: string, healthId: string): Promise<ConsentView[]> {
    return repo.transaction(async (sql) => {
      const { rows } = await sql.query<IndexRow>(
        'SELECT consent_id, organization_id, status, granted_at, expires_at FROM consent_access WHERE patient_id = $1 ORDER BY updated_at DESC LIMIT 500',
        [patientId],
      );
      const out: ConsentView[] = [];
      for (const row of rows) out.push(this.view(await repo.read<Consent>('Consent', row.consent_id, { audit: false }), healthId));
      await repo.audit({ operation: 'listMyConsents', action: 'R', outcome: 'success', outcomeDescription: `${out.length} consent(s)`, patient: { id: patientId, healthId }, dataTypes: ['Consent'] });
      return out;
    });
  }

  /** The patient approves (active, for REQUESTED_CONSENT_DAYS unless the request said) or denies a pending request. */
  async answer(repo: FhirRepository, me: PatientPrincipal, requestId: string, answer: 'approve' | 'deny', approval: Approval = {}): Promise<ConsentView> {
    const { patientId, healthId } = me;
    return repo.transaction(async (sql) => {
      const consent = await this.ownConsent(repo, sql, patientId, requestId);
      const record = consentRecordOf(this.mappings, consent)!;
      // An app paired by an organisation could be that organisation's own: it never grants it access.
      if (answer === 'approve' && me.pairedBy && me.pairedBy === record.organization_id)
        throw new ApiError(403, ErrorCode.forbidden, 'This app was paired by the organisation that asks: it cannot approve that organisation\'s request. Approve it from an app paired elsewhere, or in person.');
      await lockPair(sql, patientId, record.organization_id);
      if (consent.status !== 'proposed') throw new ApiError(409, ErrorCode.conflict, `This request was already answered (${record.status})`);
      const granted = answer === 'approve';
      const now = new Date();
      const asked = record.expires_at ?? new Date(now.getTime() + REQUESTED_CONSENT_DAYS * 86_400_000).toISOString().replace(/\.\d+Z$/, 'Z');
      const updated: ConsentRecord = {
        ...record,
        status: granted ? 'active' : 'denied',
        granted_at: granted ? now.toISOString().replace(/\.\d+Z$/, 'Z') : record.granted_at,
        expires_at: granted ? asked : record.expires_at,
        // The grant records what the patient approved, never more than was asked.
        ...(granted && narrowed(record, asked, approval)),
      };
      const stored = (await repo.update({ ...this.toFhir(updated), id: requestId }, { audit: false })).resource;
      await repo.audit({
        operation: granted ? 'approveConsentRequest' : 'denyConsentRequest',
        action: 'U',
        outcome: 'success',
        outcomeDescription: `${granted ? 'approved' : 'denied'} the request of ${record.organization_id}`,
        patient: { id: patientId, healthId },
        dataTypes: ['Consent'],
      });
      return this.view(stored, healthId);
    });
  }

  /** The patient revokes one of their consents (from their app). */
  async revokeByPatient(repo: FhirRepository, patientId: string, healthId: string, consentId: string): Promise<ConsentView> {
    return repo.transaction(async (sql) => {
      const consent = await this.ownConsent(repo, sql, patientId, consentId);
      const record = consentRecordOf(this.mappings, consent)!;
      await lockPair(sql, patientId, record.organization_id);
      if (consent.status !== 'active') throw new ApiError(409, ErrorCode.conflict, `Only an active consent can be revoked; this one is ${record.status}`);
      const revoked = await this.setStatus(repo, consentId, 'revoked');
      await repo.audit({ operation: 'revokeMyConsent', action: 'U', outcome: 'success', outcomeDescription: `revoked the consent of ${record.organization_id}`, patient: { id: patientId, healthId }, dataTypes: ['Consent'] });
      return this.view(revoked, healthId);
    });
  }

  // ------------------------------------------------------------------ helpers

  private async ownConsent(repo: FhirRepository, sql: Queryable, patientId: string, consentId: string): Promise<Consent> {
    const { rows } = await sql.query<{ consent_id: string }>('SELECT consent_id FROM consent_access WHERE consent_id = $1 AND patient_id = $2', [consentId, patientId]);
    if (!rows[0]) throw consentNotFound(`No consent or request ${consentId} of yours`);
    return repo.read<Consent>('Consent', consentId, { audit: false });
  }

  private async setStatus(repo: FhirRepository, consentId: string, status: 'revoked'): Promise<Consent> {
    const current = await repo.read<Consent>('Consent', consentId, { audit: false });
    const record = consentRecordOf(this.mappings, current)!;
    return (await repo.update({ ...this.toFhir({ ...record, status }), id: consentId }, { audit: false })).resource;
  }

  private async rows(sql: Queryable, patientId: string, organizationId: string, where = 'true'): Promise<IndexRow[]> {
    const { rows } = await sql.query<IndexRow>(
      `SELECT consent_id, organization_id, status, granted_at, expires_at FROM consent_access
       WHERE patient_id = $1 AND organization_id = $2 AND ${where} ORDER BY updated_at DESC`,
      [patientId, organizationId],
    );
    return rows;
  }

  private toFhir(record: ConsentRecord): Consent {
    try {
      const { consent_id, ...rest } = record;
      const consent = this.mappings.get('consent').toFhir({ ...rest, consent_id }) as Consent;
      delete consent.id; // the repository assigns ids to new consents
      return consent;
    } catch (err) {
      if (err instanceof MappingValueError) throw validationFailed(err.message);
      throw err;
    }
  }

  /** The answer for a Consent, or for none (no consent of `organizationId` on file): every field of the map but HIDDEN_FIELDS. */
  private view(consent: Consent | undefined, healthId: string, organizationId?: string): ConsentView {
    const map = this.mappings.get('consent');
    const read = consent ? map.readFhir(consent).connect : {};
    const fields = Object.fromEntries(map.fields.filter((f) => !HIDDEN_FIELDS.includes(f)).map((f) => [f, read[f] ?? null]));
    const expired = read.status === 'active' && typeof read.expires_at === 'string' && Date.parse(read.expires_at) <= Date.now();
    return {
      consent_id: consent?.id ?? null,
      health_id: healthId,
      ...fields,
      organization_id: (read.organization_id as string | undefined) ?? organizationId!,
      status: expired ? 'expired' : ((read.status as string | null | undefined) ?? 'none'),
      scopes: read.consent_type ? coveredClasses({ ...read, scopes: (read.scopes as string[] | null) ?? [] } as unknown as ConsentRecord) : [],
    };
  }
}

/**
 * What the patient approves of a request: each of `approval` must be within what was asked (fewer kinds of record, a
 * period inside the asked one, an end no later), else 422 and the request stays as it was.
 */
function narrowed(record: ConsentRecord, askedEnd: string, approval: Approval): Partial<ConsentRecord> {
  const wider: Array<{ field: string; message: string }> = [];
  const out: Partial<ConsentRecord> = {};
  if (approval.hi_types) {
    const asked = record.hi_types ?? [];
    const extra = asked.length ? approval.hi_types.filter((t) => !asked.includes(t)) : [];
    if (extra.length) wider.push({ field: 'hi_types', message: `${extra.join(', ')} not asked for (asked: ${asked.join(', ')})` });
    out.hi_types = approval.hi_types;
  }
  if (approval.date_range) {
    const asked = record.date_range;
    if (asked?.from && approval.date_range.from < asked.from) wider.push({ field: 'date_range.from', message: `before the asked ${asked.from}` });
    if (asked?.to && approval.date_range.to > asked.to) wider.push({ field: 'date_range.to', message: `after the asked ${asked.to}` });
    out.date_range = approval.date_range;
  }
  if (approval.expires_at) {
    if (Date.parse(approval.expires_at) > Date.parse(askedEnd)) wider.push({ field: 'expires_at', message: `after the asked ${askedEnd}` });
    out.expires_at = new Date(approval.expires_at).toISOString().replace(/\.\d+Z$/, 'Z');
  }
  if (wider.length) throw validationFailed(`The approval is wider than the request: ${wider.map((w) => `${w.field} ${w.message}`).join('; ')}`, { extra: { details: wider } });
  return out;
}

/** Scopes narrow the consent type's classes: each must be one of them. */
function checkScopes(consentType: string, scopes: string[] | undefined): void {
  const allowed = CONSENT_TYPES[consentType]?.classes ?? [];
  const outside = (scopes ?? []).filter((s) => !(allowed as readonly string[]).includes(s));
  if (outside.length)
    throw validationFailed(`scopes ${outside.join(', ')} are not covered by consent type ${consentType} (it covers ${allowed.join(', ')})`, {
      extra: { details: outside.map((s) => ({ field: 'scopes', message: `${s} is not a class of ${consentType}` })) },
    });
}

/**
 * Serialises the consent changes of one patient and organisation until the transaction ends, on any number
 * of processes: concurrent grants and revocations apply one after the other, the last committed wins, and
 * their events are recorded in that order.
 */
async function lockPair(sql: Queryable, patientId: string, organizationId: string): Promise<void> {
  await sql.query('SELECT pg_advisory_xact_lock($1::bigint)', [hashKey('consent', patientId, organizationId)]);
}

