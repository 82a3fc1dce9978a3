import { isDeepStrictEqual } from 'node:util';
import { randomUUID } from 'node:crypto';
import type { Observation, PractitionerRole, Resource } from '@medplum/fhirtypes';
import type { FhirRepository } from '../fhir/repository';
import { isUcum } from '../core/ucum';
import { isJsonObject } from '../core/json';
import { ApiError, ErrorCode, invalidFields } from '../core/errors';
import { flagsResult } from '../core/lab-flags';
import { registeredPatient, type HealthIdRecord } from '../healthid/registry';
import { codingsWithoutDisplay, MappingValueError, storedReference, textOf, ucumTimeCode, type MappingSet, type ReadContext, type ReadTerminology, type TerminologyQuestions } from '../mapping/index';
import type { Queryable } from '../db/database';
import type { TerminologyService } from '../fhir/term/service';
import { LOINC, SNOMED } from '../fhir/term/release';
import type { WrittenBy } from '../mapping/uses';
import { recordFields, recordType, tagNames, type RecordSource, type RecordType } from '../mapping/record-types';
import { Turns } from '../core/turns';

export type ConnectRecord = Record<string, unknown>;

export interface RecordsQuery {
  /** Record types declared by the maps (recordTypes). */
  types: string[];
  limit: number;
  /** Only what changed after this instant. */
  since?: string;
  cursor?: string;
}

/** An answer and its audit record, under way (HandlerResult.settles): the answer may be sent once that is kept. */
export interface Audited<T> {
  answer: T;
  audited: Promise<void>;
}

export interface RecordsAnswer {
  health_id: string;
  records: Record<string, ConnectRecord[]>;
  /** Single type: where the next page starts (null at the end). */
  next_cursor?: string | null;
  /** Several types: those with more records than `limit` (page them by type). */
  truncated?: string[];
  /** Several types: those no consent of the patient covers for the caller (not read). */
  withheld?: string[];
}

/** How many of each the summary holds (docs/integrators.md "The SDK patient summary"). */
export const SUMMARY_SIZES = { active_medications: 50, active_allergies: 100, recent_labs: 10, recent_visits: 5, active_care_plans: 20, active_goals: 20, recent_procedures: 10, active_devices: 20 };

/** LOINC codes of a blood group: ABO and Rh together, or ABO and Rh apart. */
const BLOOD_GROUP_LOINC = { both: '882-1', abo: '883-9', rh: '10331-7' };
const BLOOD_GROUP_CODES = Object.values(BLOOD_GROUP_LOINC).map((c) => `${LOINC}|${c}`).join(',');
/**
 * The statuses of a result that stands (R4 ObservationStatus): what the summary's blood group is read from. Not one
 * entered in error (it never was the patient's), cancelled or registered (no result), preliminary (may yet change:
 * a blood group shown without its status must be one the laboratory released), or of unknown status.
 */
const RESULTS_THAT_STAND = 'final,amended,corrected';

/** What one page of a record type is asked for: its sources read from `offsets` (one each), newest first. */
interface PageRequest {
  type: string;
  limit: number;
  offsets: number[];
  /** Only what changed after this instant. */
  since?: string;
  /** Search parameters added to every source's (the summary's "active"). */
  query?: Record<string, string>;
}

interface RecordPage {
  records: ConnectRecord[];
  /** What the records show: their resources (in the records' order), then what their references resolved to. */
  resources: Resource[];
  next?: number[];
}

/**
 * The intents of a request or plan that nobody means to carry out yet (R4 `intent` is a modifier): a proposal (a
 * suggestion, decision support's say), an option (one of several to choose from). An order, a plan (a home
 * medication list is written as plans) and the rest are meant to happen.
 */
const NOT_MEANT_TO_HAPPEN = 'proposal,option';

/**
 * Codes of an AllergyIntolerance that says the patient has none, or that nothing is known (the IPS's absent-unknown
 * codes, SNOMED CT's "no known … allergy"): a statement about allergies, not an allergy, so no active allergy of the
 * summary (its record, under records?type=allergies, says what it is).
 */
const IPS_ABSENT = 'http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips';
const NO_ALLERGY_STATEMENTS = [
  ...['no-allergy-info', 'no-known-allergies', 'no-known-medication-allergies', 'no-known-food-allergies', 'no-known-environmental-allergies'].map((c) => `${IPS_ABSENT}|${c}`),
  // No known allergy (and its older concept), drug allergy, food allergy, environmental allergy.
  ...['716186003', '160244002', '409137002', '429625007', '428607008'].map((c) => `${SNOMED}|${c}`),
].join(',');

/**
 * The statuses of an Encounter that is no visit of the patient's: entered in error (it never was), cancelled (it never
 * happened), planned (it has not happened yet).
 */
const NO_VISIT = 'entered-in-error,cancelled,planned';

/**
 * The summary's sections of record types, in its order (recent_visits, after recent_labs, is the visit map's reading
 * of the newest Encounters): medications and allergies that are active, results that stand or may yet, care plans
 * going on, goals agreed or pursued, procedures done or under way. Devices: the active Devices (an implant, with its UDI) and active use statements;
 * the statements have no status search parameter, so a page of twice the size is read and filtered, that a few
 * ended uses do not crowd out the current ones.
 */
const SUMMARY_SECTIONS: Array<{ key: string; type: string; size: number; query?: Record<string, string>; pick?: (page: RecordPage) => Omit<RecordPage, 'next'> }> = [
  // An active order not to give a medication (doNotPerform) is no medication of the patient's (FHIR has no search for it).
  {
    key: 'active_medications',
    type: 'prescriptions',
    size: SUMMARY_SIZES.active_medications,
    query: { status: 'active', 'intent:not': NOT_MEANT_TO_HAPPEN },
    pick: (page) => picked(page, (record) => record.do_not_perform !== true),
  },
  // A refuted allergy was disproven (one entered in error has no clinical status: ait-2); an unconfirmed one still warns.
  // Nor is a statement that there is none ("no known allergies").
  { key: 'active_allergies', type: 'allergies', size: SUMMARY_SIZES.active_allergies, query: { 'clinical-status': 'active', 'verification-status:not': 'refuted', 'code:not': NO_ALLERGY_STATEMENTS } },
  // A result entered in error never was the patient's, a cancelled one gave none: neither is a recent lab (their records say so).
  { key: 'recent_labs', type: 'lab_results', size: SUMMARY_SIZES.recent_labs, query: { 'status:not': 'entered-in-error,cancelled' } },
  { key: 'active_care_plans', type: 'care_plans', size: SUMMARY_SIZES.active_care_plans, query: { status: 'active', 'intent:not': NOT_MEANT_TO_HAPPEN } },
  { key: 'active_goals', type: 'goals', size: SUMMARY_SIZES.active_goals, query: { 'lifecycle-status': 'active,accepted' } },
  { key: 'recent_procedures', type: 'procedures', size: SUMMARY_SIZES.recent_procedures, query: { status: 'completed,in-progress' } },
  {
    key: 'active_devices',
    type: 'devices',
    size: 2 * SUMMARY_SIZES.active_devices,
    pick: (page) => picked(page, (record) => (record.source === 'device' ? record.device_status : record.status) === 'active', SUMMARY_SIZES.active_devices),
  },
];

/** The records of a page that `keep` keeps (at most `size`), with their resources. */
function picked({ records, resources }: RecordPage, keep: (record: ConnectRecord) => boolean, size = records.length): Omit<RecordPage, 'next'> {
  const kept = records.map((record, i) => ({ record, i })).filter(({ record }) => keep(record)).slice(0, size);
  return { records: kept.map((k) => k.record), resources: kept.map((k) => resources[k.i]!) };
}

/** The classes the summary's `withheld` names when no consent covers them (docs/integrators.md "The SDK patient summary"). */
const WITHHELD_IN_SUMMARY = ['prescriptions:read', 'labs:read'];

/** A record type's source's search for one page of the patient's records, newest first. */
function sourceQuery(patientId: string, source: RecordSource, request: PageRequest): Record<string, string> {
  const query: Record<string, string> = { ...source.query, ...request.query, [source.patientParam]: `Patient/${patientId}`, _sort: `-${source.dateParam}`, _count: String(request.limit), _total: 'none' };
  if (request.since) query._lastUpdated = `gt${request.since}`;
  return query;
}

/** The paging position of a single-type read: an offset into each of the type's sources. */
interface RecordsCursor {
  type: string;
  offsets: number[];
}

function encodeRecordsCursor(cursor: RecordsCursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

function decodeRecordsCursor(raw: string, { name: type, sources: { length: sources } }: RecordType): number[] {
  let cursor: RecordsCursor | undefined;
  try {
    cursor = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as RecordsCursor;
  } catch {
    cursor = undefined;
  }
  const ok = cursor?.type === type && Array.isArray(cursor.offsets) && cursor.offsets.length === sources && cursor.offsets.every((o) => Number.isSafeInteger(o) && o >= 0);
  if (!ok) throw invalidFields([{ field: 'cursor', message: `not a cursor of type=${type} issued by this server` }]);
  return cursor!.offsets;
}

/**
 * Records answers (records retrieval, the summary) built at once in a process; the others wait their turn holding
 * nothing. Each holds its patient's pages while it is built, and waits for its next statement behind the others'
 * (the embedded database's one connection serves them in turn): 32 at once on 500,000 resources took the server to
 * 513 MiB (bench:memory). Eight keep the two cores and the connections busy (docs/benchmarks.md, round 35).
 */
const ANSWERS_AT_ONCE = 8;

/** A date for ordering merged lists: the instant, or -Infinity when there is none (last). */
const timeOf = (value: unknown) => (typeof value === 'string' ? Date.parse(value) || -Infinity : -Infinity);

/**
 * Clinical records in the Connect shapes (records retrieval, the SDK summary) and the SDK's pushes. Every read
 * and write goes through the request's repository: the access rule, the audit record and the events are its.
 * The translation is the mapping files' (their `record:` sections say which map reads which resources).
 */
export class RecordsService {
  private readonly answering = new Turns(ANSWERS_AT_ONCE);

  /** `terminology`: what the maps read of the loaded terminology (displays, memberOf()); without it, none is read. */
  constructor(
    private readonly mappings: MappingSet,
    private readonly terminology?: Pick<TerminologyService, 'forReading'>,
  ) {}

  /** GET …/patient/{health_id}/records: the types asked for, newest first, one audit record for the request. */
  async records(repo: FhirRepository, healthId: string, query: RecordsQuery): Promise<Audited<RecordsAnswer>> {
    return this.answering.run(() => this.readRecords(repo, healthId, query));
  }

  private readRecords(repo: FhirRepository, healthId: string, query: RecordsQuery): Promise<Audited<RecordsAnswer>> {
    return repo.reading(async (sql) => {
      const patient = await registeredPatient(sql, healthId);
      const single = query.types.length === 1;
      const types = new Map(query.types.map((t) => [t, this.type(t)]));
      const classOf = (t: string) => types.get(t)!.dataClass;
      const offsets = (type: string) => (single && query.cursor !== undefined ? decodeRecordsCursor(query.cursor, types.get(type)!) : this.start(type));
      // The classes no consent covers, asked beside the pages (another connection, one round trip fewer): the pages
      // are read under the same rule, so a refused type's is empty, and it is left out all the same.
      const [refusedClasses, { pages: read }] = await Promise.all([
        repo.refusedClasses(patient.patientId, [...new Set(query.types.map(classOf))]),
        this.pages(repo, sql, patient.patientId, query.types.map((type) => ({ type, limit: query.limit, since: query.since, offsets: offsets(type) }))),
      ]);
      const refused = new Set(refusedClasses);
      const readable = query.types.filter((t) => !refused.has(classOf(t)));
      // A single type, or none of several, that no consent covers: the refusal of the access rule (403, audited).
      if (!readable.length) await repo.requirePatientAccess(patient.patientId, [...refused]);
      const pages = read.filter((_, i) => !refused.has(classOf(query.types[i]!)));
      const answer: RecordsAnswer = { health_id: healthId, records: {} };
      readable.forEach((type, i) => {
        const page = pages[i]!;
        answer.records[type] = page.records;
        if (single) answer.next_cursor = page.next ? encodeRecordsCursor({ type, offsets: page.next }) : null;
        else if (page.next) (answer.truncated ??= []).push(type);
      });
      if (!single) {
        answer.truncated ??= [];
        answer.withheld = query.types.filter((t) => refused.has(classOf(t)));
      }
      return { answer, audited: this.auditRead(repo, patient, pages.flatMap((p) => p.resources), `records ${readable.join(', ')}`) };
    });
  }

  /** GET /api/v1/sdk/patients/{health_id}/summary (docs/integrators.md "The SDK patient summary"): the patient, then what of their record consent covers. */
  async summary(repo: FhirRepository, healthId: string): Promise<Audited<Record<string, unknown>>> {
    return this.answering.run(() => this.readSummary(repo, healthId));
  }

  private readSummary(repo: FhirRepository, healthId: string): Promise<Audited<Record<string, unknown>>> {
    return repo.reading(async (sql) => {
      const patient = await registeredPatient(sql, healthId);
      // Each section's class is its record type's (the maps'), asked in one statement with patients:read, the
      // patient's own, which the summary requires (refused: the access rule's 403, audited).
      const classes = new Set(['patients:read', ...SUMMARY_SECTIONS.map((s) => this.type(s.type).dataClass), ...WITHHELD_IN_SUMMARY]);
      const patientRef = `Patient/${patient.patientId}`;
      const searches: Array<{ type: string; query: Record<string, string> }> = [
        { type: 'Encounter', query: { patient: patientRef, 'status:not': NO_VISIT, _sort: '-date', _count: String(SUMMARY_SIZES.recent_visits), _total: 'none' } },
        { type: 'Observation', query: { patient: patientRef, code: BLOOD_GROUP_CODES, status: RESULTS_THAT_STAND, _sort: '-date', _count: '20', _total: 'none' } },
      ];
      // The refusals beside every section's page, the searches and the Patient (another connection, one round trip
      // fewer): all are read under the same rule, so what a refused class would show is empty, and it is left out
      // all the same.
      const [refusedClasses, found] = await Promise.all([
        repo.refusedClasses(patient.patientId, [...classes]),
        this.pages(repo, sql, patient.patientId, SUMMARY_SECTIONS.map(({ type, size, query }) => ({ type, limit: size, offsets: this.start(type), query })), { readPatient: true, searches }),
      ]);
      const refused = new Set(refusedClasses);
      if (refused.has('patients:read')) await repo.requirePatientAccess(patient.patientId, ['patients:read']);
      const sections = SUMMARY_SECTIONS.filter((s) => !refused.has(this.type(s.type).dataClass));
      const pages = found.pages.filter((_, i) => sections.includes(SUMMARY_SECTIONS[i]!));
      const labs = !refused.has('labs:read');
      const { terminology } = found;
      const searched = labs ? found.searched : [found.searched[0]!, []];
      // Not found with the rest (not readable, deleted): the read's own answer (403, 404, 410).
      const fhirPatient = found.patient ?? (await repo.read('Patient', patient.patientId, { audit: false }));
      // The block is the summary map's fields (mappings/patient-summary.map.yaml), each null when the Patient lacks it.
      const shown = this.mappings.get('patient-summary');
      const fields = shown.readFhir(fhirPatient).connect;
      const patientBlock: Record<string, unknown> = Object.fromEntries(shown.fields.map((f) => [f, fields[f] ?? null]));
      const [encounters = [], observations = []] = searched;
      const read: Resource[] = [fhirPatient, ...encounters, ...observations];
      // A blood group a laboratory measured wins over the one the Patient records.
      const measured = labs ? this.bloodGroup(observations as Observation[]) : null;
      if (measured) patientBlock.blood_group = measured;
      const summary: Record<string, unknown> = { health_id: healthId, patient: patientBlock };
      for (const section of SUMMARY_SECTIONS) {
        const i = sections.indexOf(section);
        const page = i < 0 ? { records: [], resources: [] } : section.pick ? section.pick(pages[i]!) : pages[i]!;
        read.push(...page.resources);
        summary[section.key] = page.records;
        if (section.key === 'recent_labs') summary.recent_visits = encounters.map((r) => this.mappings.get('visit').readFhir(r, { terminology, localBase: repo.baseUrl }).connect);
      }
      summary.withheld = WITHHELD_IN_SUMMARY.filter((c) => refused.has(c));
      return { answer: summary, audited: this.auditRead(repo, patient, read, 'patient summary') };
    });
  }

  /**
   * POST /api/v1/sdk/records/encounters: an Encounter (visit.map.yaml) and, for a decision-support alert, the
   * DetectedIssue it raised (cdss-alert.map.yaml), written together, the pushing organisation their author.
   */
  async pushEncounter(repo: FhirRepository, push: EncounterPush): Promise<Record<string, unknown>> {
    return repo.transaction(async (sql) => {
      const patient = await registeredPatient(sql, push.health_id);
      const now = new Date().toISOString();
      const encounterId = randomUUID();
      const organization = organizationOf(repo);
      const resources = [
        this.toFhir('visit', {
          id: encounterId,
          patient_id: patient.patientId,
          type: push.encounter_type,
          class: push.class ?? 'AMB',
          status: push.status ?? 'finished',
          reason: push.reason ?? null,
          provider_id: null,
          facility_id: null,
          // A visit pushed with no time is taken as now; one given its start and no end has none (not the push's time).
          started_at: push.started_at ?? now,
          ended_at: push.ended_at ?? (push.started_at === undefined && (push.status ?? 'finished') === 'finished' ? now : null),
          note: push.clinical_note ?? null,
        }),
      ];
      const issueId = push.encounter_type === CDSS_ALERT ? randomUUID() : null;
      if (issueId)
        resources.push(
          this.toFhir('cdss-alert', {
            id: issueId,
            patient_id: patient.patientId,
            encounter_id: encounterId,
            alert_type: push.alert_type,
            status: 'final',
            severity: push.severity ?? null,
            cdss_rule_id: push.cdss_rule_id ?? null,
            detail: push.clinical_note ?? null,
            identified_at: now,
          }),
        );
      await repo.writeItems(resources.map((resource) => ({ resource, method: 'POST' as const })), 'create');
      return { health_id: push.health_id, encounter_id: encounterId, detected_issue_id: issueId, organization_id: organization ?? null, created_at: now };
    });
  }

  /**
   * POST /api/v1/sdk/records/lab-results: the result as an Observation (lab-result.map.yaml) and the report that
   * issues it (lab-report.map.yaml), written together; `lab_result.released` follows from the final Observation.
   */
  async pushLabResult(repo: FhirRepository, push: LabResultPush): Promise<Record<string, unknown>> {
    const flagLevel = flagLevelOf(push);
    return repo.transaction(async (sql) => {
      const patient = await registeredPatient(sql, push.health_id);
      const now = new Date().toISOString();
      const resultId = randomUUID();
      const reportId = randomUUID();
      const numeric = numericValue(push.result_value);
      if (!numeric && push.unit !== undefined) {
        // The unit would be dropped with a text result: "5,6" is refused rather than stored as words.
        throw invalidFields([{ field: 'result_value', message: `${JSON.stringify(push.result_value)} is not a number (e.g. 5.6, <5, >=200), which a result with a unit must be` }]);
      }
      const status = push.status ?? 'final';
      // A unit that is UCUM is written as one (system and code: what FHIR readers compute with); any other stays words.
      const unitCode = push.unit !== undefined && isUcum(push.unit) ? push.unit : null;
      const observation = this.toFhir('lab-result', {
        id: resultId,
        patient_id: patient.patientId,
        visit_id: null,
        test_name: push.test_name,
        loinc_code: push.loinc_code ?? null,
        value: numeric ? null : push.result_value,
        value_numeric: numeric?.value ?? null,
        comparator: numeric?.comparator ?? null,
        value_precision: numeric?.precision ?? null,
        unit: push.unit ?? null,
        unit_code: unitCode,
        value_coded: null,
        // The range is in the result's unit, on each limit given (one limit alone too).
        reference_ranges:
          push.reference_low !== undefined || push.reference_high !== undefined
            ? [{ low: push.reference_low ?? null, high: push.reference_high ?? null, unit: push.unit ?? null, unit_code: unitCode }]
            : [],
        // The level's code is the map's (its `flag_level` table).
        flag: null,
        flag_level: flagLevel,
        interpretation: push.interpretation ?? null,
        status,
        effective_at: push.effective_at ?? now,
        issued_at: now,
      });
      const report = this.toFhir('lab-report', {
        id: reportId,
        patient_id: patient.patientId,
        visit_id: null,
        test_name: push.test_name,
        loinc_code: push.loinc_code ?? null,
        value: push.interpretation ?? null,
        value_coded: null,
        result_ids: [resultId],
        status,
        effective_at: push.effective_at ?? now,
        issued_at: now,
      });
      await repo.writeItems([observation, report].map((resource) => ({ resource, method: 'POST' as const })), 'create');
      const { flag } = this.mappings.get('lab-result').readFhir(observation).connect;
      return { health_id: push.health_id, lab_result_id: resultId, diagnostic_report_id: reportId, ...flagOf(flag), created_at: now };
    });
  }

  /**
   * POST …/records/{lab-results,encounters} with `record`: a record as records retrieval returns it, written back
   * through the map it was read with (its source's tag names the map), as a new resource of the patient of the
   * Health ID, the pushing organisation its author. `written`: the record read back from what was written.
   */
  async pushRecord(repo: FhirRepository, healthId: string, type: string, pushed: ConnectRecord): Promise<{ id: string; resourceType: string; createdAt: string; written: ConnectRecord; notWritten: string[] }> {
    const { sources } = this.type(type);
    const tags = tagNames(this.type(type));
    const source = sources.find((s) => tags.every((t) => pushed[t] == null || pushed[t] === s.tag?.[t]));
    // A tag no source of the type has (`source: "bogus"`) says the record is not one records retrieval gave.
    if (!source) {
      const given = tags.filter((t) => pushed[t] != null);
      throw invalidFields(given.map((t) => ({ field: `record.${t}`, message: `${JSON.stringify(pushed[t])} is not one of ${JSON.stringify([...new Set(sources.map((s) => s.tag?.[t]).filter((v) => v !== undefined))])}` })));
    }
    return repo.transaction(async (sql) => {
      const patient = await registeredPatient(sql, healthId);
      if (pushed.patient_id != null && pushed.patient_id !== patient.patientId) {
        throw invalidFields([{ field: 'record.patient_id', message: `${JSON.stringify(pushed.patient_id)} is not the patient of health_id ${healthId}` }]);
      }
      const id = randomUUID();
      const fields = withAgeUnitCodes(Object.fromEntries(Object.entries(pushed).filter(([k]) => !tags.includes(k))));
      const map = this.mappings.get(source.map);
      const record = { ...fields, id, patient_id: patient.patientId };
      // Written again knowing what its references name, as the pusher may read it: a value that is their name (a
      // visit's reason given by reference alone, read as the Condition's name) is then not written beside them too.
      const first = written(() => map.toFhir(record), 'record.');
      const refs = map.referencesOf(first, { localBase: repo.baseUrl });
      const resolved = refs.length ? await repo.resolveReferences(refs, patient.patientId) : undefined;
      const resource = resolved?.size ? written(() => map.toFhir(record, { resolved, localBase: repo.baseUrl }), 'record.') : first;
      try {
        await repo.writeItems([{ resource, method: 'POST' }], 'create');
      } catch (err) {
        // The record makes FHIR that FHIR refuses (a period that ends before it starts): the record's fault, as a
        // field's would be (422), named by the FHIR it made.
        if (err instanceof ApiError && err.status === 400 && err.code === ErrorCode.validationFailed) throw invalidFields([{ field: 'record', message: err.message }]);
        // A reference the record gives that names nothing the pusher may see, or another patient's visit: the field's
        // fault too, named as the record names it (`record.visit_id`).
        const named = err instanceof ApiError && err.status === 400 ? /refers to ([A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})/.exec(err.message) : undefined;
        // A conditional reference (`Condition?code=…`): a push is no transaction, so nothing resolves it.
        const conditional = err instanceof ApiError && err.status === 400 ? /refers to (.+), a conditional reference: only a transaction/.exec(err.message)?.[1] : undefined;
        const field = named ? fieldNaming(fields, named[2]!, `${named[1]}/${named[2]}`, repo.baseUrl) : conditional ? fieldNaming(fields, conditional, conditional, repo.baseUrl) : undefined;
        if (field) throw invalidFields([{ field: `record.${field}`, message: (err as ApiError).message }]);
        throw err;
      }
      const readBack = map.readFhir(resource).connect;
      // What the record gave that the FHIR written does not hold as given (a field read only: a name Pont reads from
      // another resource, a code system's words): said, so that a record pushed back is not taken as written whole.
      // An object's read-only parts (a note's author named through its reference) are not what the push writes.
      const notWritten = Object.keys(fields).filter((f) => f !== 'id' && f !== 'patient_id' && given(fields[f]) && !isDeepStrictEqual(map.writtenPart(f, fields[f]) ?? fields[f], map.writtenPart(f, readBack[f] ?? null) ?? readBack[f] ?? null));
      return { id, resourceType: resource.resourceType, createdAt: new Date().toISOString(), written: readBack, notWritten };
    });
  }

  /**
   * Pages of record types, read together: one statement for every source's page, or two at once (searchPages), and
   * for `searches` (plain sorted searches of the patient's data read beside them); one for the references the maps follow (a performer's name,
   * a specimen's note), and (on `sql`, the request's transaction) one for what the maps read of the loaded terminology
   * (the displays of codings without one, memberOf()), unless the process's cache has it all; each page merged newest
   * first across its type's sources. `searched`: the searches' matches; `terminology`: the answers, for reading them.
   */
  private async pages(
    repo: FhirRepository,
    sql: Queryable,
    patientId: string,
    requests: PageRequest[],
    options: { readPatient?: boolean; searches?: Array<{ type: string; query: Record<string, string> }> } = {},
  ): Promise<{ pages: RecordPage[]; searched: Resource[][]; terminology?: ReadTerminology; patient?: Resource }> {
    const plans = requests.map((request) => ({ request, sources: this.type(request.type).sources, fields: this.fieldsOf(request.type) }));
    // A map may choose by the patient (the reference range for their sex): when a map reads it (or the caller shows it:
    // `readPatient`), it is read in the pages' statement as a search by _id under the caller's rule (a reader who may
    // not read it gets none, and the range by unit, learning nothing of the patient).
    const readsPatient = repo.access.canRead('Patient') && (options.readPatient || plans.some(({ sources }) => sources.some((s) => this.mappings.get(s.map).readsPatient)));
    // A reference under this server's own base is one of ours; another server's is not (storedReference).
    const localBase = repo.baseUrl;
    const searches = options.searches ?? [];
    const found = await repo.searchPages(patientId, [
      ...plans.flatMap(({ request, sources }) => sources.map((source, i) => ({ type: source.resourceType, query: sourceQuery(patientId, source, request), offset: request.offsets[i]!, except: source.except }))),
      ...searches.map((search) => ({ ...search, offset: 0 })),
      ...(readsPatient ? [{ type: 'Patient', query: { _id: patientId, _sort: '_id', _count: '1', _total: 'none' }, offset: 0 }] : []),
    ]);
    const patient = readsPatient ? found.at(-1)!.resources[0] : undefined;
    let at = 0;
    const bySource = plans.map(({ sources }) =>
      sources.map((source) => {
        const { resources, more } = found[at++]!;
        return { source, resources, more, refs: resources.map((r) => this.mappings.get(source.map).referencesOf(r, { patient, localBase })) };
      }),
    );
    const wanted = [...new Set(bySource.flat().flatMap((s) => s.refs.flat()))];
    const resolved = wanted.length ? await this.withTheirPractitioners(repo, await repo.resolveReferences(wanted, patientId), patientId, localBase) : undefined;
    const searched = found.slice(at, at + searches.length).map((f) => f.resources);
    // What the page's maps ask of the loaded terminology, answered at once: the displays of the codings without one (in
    // the resources, what their references resolved to and the searches' matches), the codes memberOf() tests.
    const asked: TerminologyQuestions = { codings: [], members: [] };
    for (const sources of bySource) for (const { source, resources } of sources) for (const r of resources) this.mappings.get(source.map).terminologyOf(r, { patient, resolved, localBase }, asked);
    for (const r of [...(resolved?.values() ?? []), ...searched.flat()]) codingsWithoutDisplay(r, asked.codings);
    const terminology = await this.terminology?.forReading(sql, asked);
    const pages = plans.map(({ request, fields }, p) => this.merged(request, fields, bySource[p]!, { patient, resolved, terminology, localBase }));
    return { pages, searched, terminology, patient };
  }

  /**
   * What references resolved to, each PractitionerRole whose practitioner is named by reference alone (no display)
   * given the name of the Practitioner it names, read as the references were (one more statement, only when there
   * is such a role): the maps read a role as the person in it (textOf), the name a reader wants of a prescriber.
   */
  private async withTheirPractitioners(repo: FhirRepository, resolved: Map<string, Resource>, patientId: string, localBase: string): Promise<Map<string, Resource>> {
    const roles = [...resolved].flatMap(([ref, r]) => {
      const person = r.resourceType === 'PractitionerRole' && !r.practitioner?.display && r.practitioner?.reference ? storedReference(r.practitioner.reference, localBase) : undefined;
      return person ? [{ ref, role: r as PractitionerRole, person }] : [];
    });
    if (!roles.length) return resolved;
    const missing = [...new Set(roles.map((r) => r.person))].filter((ref) => !resolved.has(ref));
    const found = missing.length ? await repo.resolveReferences(missing, patientId) : undefined;
    const out = new Map(resolved);
    for (const { ref, role, person } of roles) {
      const name = textOf(found?.get(person) ?? resolved.get(person));
      if (name) out.set(ref, { ...role, practitioner: { ...role.practitioner, display: name } });
    }
    return out;
  }

  /**
   * One page of a record type from its sources' pages (each newest first): the newest first across them, at most
   * `limit`. `next`: the offsets of the following page, or undefined at the end.
   */
  private merged(
    request: PageRequest,
    fields: string[],
    sources: Array<{ source: RecordSource; resources: Resource[]; more: boolean; refs: string[][] }>,
    context: Omit<ReadContext, 'resolved'> & { resolved?: Map<string, Resource> },
  ): RecordPage {
    // Each source's resources are read (mapped) only when they come to the head of the merge: those past the page and
    // those another source gave first are never mapped (a lab result is in up to three sources of its type).
    const taken = sources.map(() => 0);
    const heads: Array<{ resource: Resource; record: ConnectRecord; used: Resource[]; time: number } | undefined> = sources.map(() => undefined);
    // A resource two sources of the type select (a result both categorised and listed by a report) is read once.
    const seen = new Set<string>();
    const keyOf = (r: Resource) => `${r.resourceType}/${r.id}`;
    const head = (i: number) => {
      const { source, resources, refs } = sources[i]!;
      // A head read before another source gave the same resource is passed over.
      if (heads[i] && seen.has(keyOf(heads[i]!.resource))) {
        heads[i] = undefined;
        taken[i]!++;
      }
      while (!heads[i] && taken[i]! < resources.length) {
        const resource = resources[taken[i]!]!;
        if (seen.has(keyOf(resource))) {
          taken[i]!++;
          continue;
        }
        const { record } = this.recordOf(request.type, source, resource, fields, context);
        const used = refs[taken[i]!]!.flatMap((ref) => context.resolved?.get(ref) ?? []);
        heads[i] = { resource, record, used, time: timeOf(record[source.dateField]) };
      }
      return heads[i];
    };
    const out: Array<{ resource: Resource; record: ConnectRecord; used: Resource[] }> = [];
    // Merge: repeatedly take the newest head among the sources (each is already newest first).
    while (out.length < request.limit) {
      let best = -1;
      for (let i = 0; i < sources.length; i++) {
        const h = head(i);
        if (h && (best < 0 || h.time > heads[best]!.time)) best = i;
      }
      if (best < 0) break;
      const item = heads[best]!;
      heads[best] = undefined;
      taken[best]!++;
      seen.add(keyOf(item.resource));
      out.push(item);
    }
    // What the page gave is passed over in every source, so that the next page (which starts at the offsets) does not
    // give it again: a resource two sources select has one date, so it is at or near each one's head.
    sources.forEach(({ resources }, i) => {
      while (taken[i]! < resources.length && seen.has(keyOf(resources[taken[i]!]!))) taken[i]!++;
    });
    const more = sources.some((f, i) => f.more || taken[i]! < f.resources.length);
    return {
      records: out.map((o) => o.record),
      // Audited as read: the resources (first, in the records' order) and what of their references the records show.
      resources: [...out.map((o) => o.resource), ...new Set(out.flatMap((o) => o.used))],
      next: more ? request.offsets.map((o, i) => o + taken[i]!) : undefined,
    };
  }

  /**
   * The record of one resource of a type's source: the shape's fields (null when not read), the source's tags,
   * and the fields whose FHIR value the map could not express (`unread`). `context`: the Patient it is about, for
   * maps that read it, and the resources its references resolve to.
   */
  recordOf(type: string, source: RecordSource, resource: Resource, fields = this.fieldsOf(type), context: ReadContext = {}): { record: ConnectRecord; unread: string[] } {
    const { connect, unread } = this.mappings.get(source.map).readFhir(resource, context);
    const record: ConnectRecord = {};
    for (const f of fields) record[f] = connect[f] ?? null;
    return { record: Object.assign(record, source.tag), unread };
  }

  /** The fields of a record type's shape: its first map's, then its sources' tags. */
  fieldsOf(type: string): string[] {
    return recordFields(this.mappings, this.type(type));
  }

  /** A record type the maps declare. */
  private type(name: string): RecordType {
    return recordType(this.mappings, name);
  }

  /** The offsets of a type's first page: 0 in each of its sources. */
  private start(type: string): number[] {
    return this.type(type).sources.map(() => 0);
  }

  /**
   * The blood group (e.g. `A+`) from the newest ABO/Rh Observation among `observations` (newest first), or null.
   * Its result is read as the Observation's lab record (lab-result.map.yaml: `value_coded`, else `value`), so the
   * summary and the record agree.
   */
  private bloodGroup(observations: Observation[]): string | null {
    const resultOf = (code: string) => {
      const newest = observations.find((o) => o.code?.coding?.some((c) => c.system === LOINC && c.code === code));
      if (!newest) return undefined;
      const record = this.mappings.get('lab-result').readFhir(newest).connect;
      return (record.value_coded ?? record.value ?? undefined) as string | undefined;
    };
    const both = resultOf(BLOOD_GROUP_LOINC.both);
    const abo = aboOf(both) ?? aboOf(resultOf(BLOOD_GROUP_LOINC.abo));
    const rh = rhOf(both) ?? rhOf(resultOf(BLOOD_GROUP_LOINC.rh));
    return abo && rh ? `${abo}${rh}` : null;
  }

  private toFhir<M extends 'visit' | 'cdss-alert' | 'lab-result' | 'lab-report'>(map: M, connect: WrittenBy<M>): Resource {
    return written(() => this.mappings.get(map).toFhir(connect));
  }

  /**
   * One audit record for a Connect or SDK read: what was read, of which patient, by whom and why. Begun, not awaited:
   * the route serialises the answer meanwhile and sends it once the record is kept (HandlerResult.settles); a
   * consent's limit on how often it reads (429) refuses it then.
   */
  private auditRead(repo: FhirRepository, patient: HealthIdRecord, read: Resource[], what: string): Promise<void> {
    const audited = repo.audit({
      operation: repo.context.operation ?? 'readRecords',
      action: 'R',
      outcome: 'success',
      outcomeDescription: `${what}: ${read.length} resource(s)`,
      patient: { id: patient.patientId, healthId: patient.healthId },
      purpose: repo.context.purpose,
      externalReference: repo.context.externalReference,
      dataTypes: [...new Set(read.map((r) => r.resourceType))],
    });
    // Awaited by the route; marked handled here, as it may fail before the route reaches it.
    audited.catch(() => undefined);
    return audited;
  }
}

/** A value a record gives: not null, not an empty list. */
const given = (value: unknown) => value !== null && value !== undefined && !(Array.isArray(value) && value.length === 0);

export const CDSS_ALERT = 'cdss_alert';

/**
 * Where a pushed record gives a reference the store refused: the field (`visit_id`, `diagnoses[0].condition_reference`)
 * whose value is the id (an `_id` field) or the reference itself (a `_reference` field, in a list of objects too).
 */
function fieldNaming(fields: Record<string, unknown>, id: string, reference: string, localBase: string): string | undefined {
  const walk = (value: unknown, at: string): string | undefined => {
    if (value === id && !at.endsWith('.id')) return at;
    // The reference as the record wrote it: `Type/id`, versioned, or under this server's own base.
    if (typeof value === 'string' && storedReference(value, localBase) === reference) return at;
    if (Array.isArray(value)) return value.map((v, i) => walk(v, `${at}[${i}]`)).find((f) => f !== undefined);
    if (value && typeof value === 'object') return Object.entries(value).map(([k, v]) => walk(v, `${at}.${k}`)).find((f) => f !== undefined);
    return undefined;
  };
  return Object.entries(fields).map(([k, v]) => (k === 'id' ? undefined : walk(v, k))).find((f) => f !== undefined);
}

/** What a lab push answers of the interpretation stored: its code, and whether it flags the result (null: none). */
export function flagOf(flag: unknown): { flagged: boolean | null; flag: string | null } {
  return typeof flag === 'string' ? { flagged: flagsResult(flag), flag } : { flagged: null, flag: null };
}

/**
 * A pushed record's ages in a unit of time without its UCUM code (a reference range's `age_unit: "a"`, or its words
 * `"years"`; a component's ranges too) given the code, as pushLabResult gives a UCUM unit of the result its code: an
 * age FHIR readers can compute with (system and code), the unit as written beside it. An age_unit_code given is kept;
 * words not in the table of units of time (`yrs`) stay words. The maps cannot say it: a field's value table has a
 * row per value, and an age's unit is any words.
 */
function withAgeUnitCodes<T>(value: T): T {
  if (Array.isArray(value)) return value.map(withAgeUnitCodes) as T;
  if (!isJsonObject(value)) return value;
  const out: Record<string, unknown> = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withAgeUnitCodes(v)]));
  const code = typeof out.age_unit === 'string' && out.age_unit_code == null ? ucumTimeCode(out.age_unit) : undefined;
  if (code !== undefined) out.age_unit_code = code;
  return out as T;
}

/** A map's writing, a value it cannot take answered as 422 naming the field (`at`: where the fields sit in the body). */
function written(toFhir: () => Resource, at = ''): Resource {
  try {
    return toFhir();
  } catch (error) {
    if (error instanceof MappingValueError) throw invalidFields([{ field: at + error.field, message: error.message }]);
    throw error;
  }
}

/** The organisation a push records as the author (the caller's). */
export const organizationOf = (repo: FhirRepository): string | null => (repo.context.principal as { organizationId?: string }).organizationId ?? null;

export interface EncounterPush {
  health_id: string;
  encounter_type: string;
  clinical_note?: string;
  status?: string;
  class?: string;
  reason?: string;
  started_at?: string;
  ended_at?: string;
  alert_type?: string;
  severity?: string;
  cdss_rule_id?: string;
}

export interface LabResultPush {
  health_id: string;
  test_name: string;
  result_value: string;
  flagged?: boolean;
  /** One of lab-result.map.yaml's `flag_level` values (the route checks it). */
  flag_level?: string;
  interpretation?: string;
  unit?: string;
  loinc_code?: string;
  reference_low?: number;
  reference_high?: number;
  /** One of lab-result.map.yaml's statuses (the route checks it). */
  status?: string;
  effective_at?: string;
}

/**
 * The pushed `flag_level`, by default abnormal or normal as `flagged` says, none when neither is given; 422 when
 * they disagree. The levels and
 * their interpretation codes are lab-result.map.yaml's (`flag_level`); every level but normal flags the result.
 */
function flagLevelOf(push: LabResultPush): string | null {
  // Neither: the result has no interpretation, and none is made up.
  if (push.flagged === undefined && push.flag_level === undefined) return null;
  const level = push.flag_level ?? (push.flagged ? 'abnormal' : 'normal');
  if (push.flagged !== undefined && (level !== 'normal') !== push.flagged)
    throw invalidFields([{ field: 'flag_level', message: `flag_level ${level} contradicts flagged: ${push.flagged} (normal is the only level of an unflagged result)` }]);
  return level;
}

/**
 * A result value that is a decimal number (FHIR decimal), with a comparator when it is a limit (`<5`: below 5),
 * else undefined: `positive`, `1e3`, `5,6` stay text.
 */
function numericValue(value: string): { value: number; comparator: string | null; precision: number | null } | undefined {
  const m = /^(<=|>=|<|>)?\s*(-?(0|[1-9]\d{0,17})(\.\d{1,18})?)$/.exec(value.trim());
  if (!m) return undefined;
  // "1.10": the trailing zero is significant and a number drops it; its digits after the point are kept apart.
  const decimals = m[4] ? m[4].length - 1 : 0;
  return { value: Number(m[2]), comparator: m[1] ?? null, precision: m[4]?.endsWith('0') ? decimals : null };
}

function aboOf(text: string | undefined): string | undefined {
  return text?.match(/\b(AB|A|B|O)\b/i)?.[1]?.toUpperCase();
}

function rhOf(text: string | undefined): string | undefined {
  if (!text) return undefined;
  if (/neg|Rh\s*\(?D\)?\s*-|\b(AB|A|B|O)\s*-|^\s*-\s*$/i.test(text)) return '-';
  if (/pos|Rh\s*\(?D\)?\s*\+|\b(AB|A|B|O)\s*\+|^\s*\+\s*$/i.test(text)) return '+';
  return undefined;
}

