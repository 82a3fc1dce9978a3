import { z } from 'zod';
import { FHIR_READ_SCOPES } from '../core/scopes';
import { FHIR_JSON } from './fhir';
import { badRequest, invalidFields } from '../http/errors';
import { ErrorSchema } from '../http/openapi';
import { defineRoute, type RouteSpec } from '../http/routes';
import { registeredPatient } from '../healthid/registry';
import type { Services } from '../http/services';
import { CDSS_ALERT, flagOf, organizationOf, RecordsService, SUMMARY_SIZES, type EncounterPush, type LabResultPush } from '../records/service';
import type { MappingSet } from '../mapping/types';
import { DATE_TIME, isFhirDateTime, NOT_A_CALENDAR_DAY } from '../core/fhir-dates';
import { declaredValues } from '../mapping/index';
import { recordType, recordTypes, tagNames, type RecordType } from '../mapping/record-types';

const CONNECT = '/api/v1/connect';
const SDK = '/api/v1/sdk';

const HealthId = z.string().max(64).describe('Health ID (see resolve)');
const Text = (max: number) => z.string().trim().min(1, 'must not be blank').max(max);
const Instant = z.iso.datetime({ offset: true }).describe('ISO 8601 date-time with a zone');
const notFuture = (v: string) => Date.parse(v) <= Date.now() + 5 * 60_000;
/** A FHIR dateTime of any precision (`2026-03-12`, `2026-03`, or to the second with a zone), not in the future. */
const PastDateTime = z
  .string()
  .regex(DATE_TIME, 'must be a FHIR dateTime: YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm:ss with a zone')
  .refine(isFhirDateTime, NOT_A_CALENDAR_DAY)
  .refine(notFuture, 'must not be in the future');

/** The per-patient FHIR helpers of the SDK's `fhir` module: the type and its default search. */
export const SDK_FHIR_TYPES = ['MedicationRequest', 'AllergyIntolerance', 'DiagnosticReport', 'Condition'] as const;

const errors = {
  403: { description: 'Missing scope (FORBIDDEN) or no consent covers the data (CONSENT_REQUIRED)', schema: ErrorSchema },
  404: { description: 'Health ID not registered (HEALTH_ID_NOT_REGISTERED)', schema: ErrorSchema },
  422: { description: 'Malformed Health ID or invalid field (VALIDATION_FAILED, HEALTH_ID_*), every problem listed in `details`', schema: ErrorSchema },
};
const pushErrors = {
  ...errors,
  409: { description: 'This Idempotency-Key was used with a different request (IDEMPOTENCY_CONFLICT)', schema: ErrorSchema },
};

/** The values a map declares for a field it writes (the push's vocabulary is the map's). */
const valuesOf = (maps: MappingSet, map: string, field: string) => declaredValues(maps.get(map), field) as [string, ...string[]];

/**
 * A push's `record`: a record of the type exactly as records retrieval returns it (every field optional; `id` is
 * ignored: a push writes a new resource, and `patient_id`, if given, must be the patient of `health_id`). Written
 * through the same map it was read with (its `source` tag names it), so reading a record and pushing it back
 * writes the same clinical content.
 */
const pushedRecord = (shape: z.ZodObject, type: string) =>
  shape
    .partial()
    .strict()
    .optional()
    .describe(`A ${type} record as records retrieval returns it, pushed back whole instead of the fields below (which must then be left out); \`id\` is ignored, a new resource is written`);

/** A push gives either `record` or the push's own fields (`required` among them): not both, not neither. */
function oneVocabulary(push: Record<string, unknown>, required: string[], ctx: z.RefinementCtx): boolean {
  const own = Object.keys(push).filter((k) => k !== 'health_id' && k !== 'record' && push[k] !== undefined);
  if (push.record !== undefined) {
    for (const field of own) ctx.addIssue({ code: 'custom', path: [field], message: 'leave it out: `record` is pushed whole' });
    return false;
  }
  for (const field of required) if (push[field] === undefined) ctx.addIssue({ code: 'custom', path: [field], message: 'required (or push a whole `record`)' });
  return required.every((f) => push[f] !== undefined);
}

/** FHIR's bookkeeping statuses of an Encounter: a push records an encounter, it neither retracts one nor says nothing. */
const UNPUSHED_VISIT_STATUSES = ['entered-in-error', 'unknown'];

/** The encounter push's body: its `status` values are visit.map.yaml's (but UNPUSHED_VISIT_STATUSES), an alert's `severity` values cdss-alert.map.yaml's. */
const encounterPush = (maps: MappingSet, record: z.ZodObject) =>
  z
    .object({
      health_id: HealthId,
      record: pushedRecord(record, 'visits'),
      encounter_type: Text(64).optional().describe(`What kind of encounter, e.g. consultation, or ${CDSS_ALERT} for a decision-support alert (required without \`record\`)`),
      clinical_note: Text(20_000).optional(),
      status: z
        .enum(valuesOf(maps, 'visit', 'status').filter((v) => !UNPUSHED_VISIT_STATUSES.includes(v)) as [string, ...string[]])
        .optional()
        .describe('Default finished'),
      // The visit map declares no class values (it reads any v3 ActCode class): these are the push's own.
      class: z.enum(['AMB', 'EMER', 'IMP', 'VR', 'HH']).optional().describe('v3 ActCode: AMB ambulatory (default), EMER emergency, IMP inpatient, VR virtual, HH home health'),
      reason: Text(500).optional(),
      started_at: PastDateTime.optional().describe('A FHIR dateTime (the day alone when that is all that is known); default now'),
      ended_at: PastDateTime.optional().describe('Default now for a finished encounter pushed with no started_at; none when started_at is given'),
      alert_type: Text(64).optional().describe(`Required for ${CDSS_ALERT}: e.g. drug_interaction, duplicate_therapy, contraindication, dose_range, allergy_alert`),
      severity: z.enum(valuesOf(maps, 'cdss-alert', 'severity')).optional().describe(`Required for ${CDSS_ALERT}`),
      cdss_rule_id: Text(128).optional().describe('The decision-support rule that raised the alert'),
    })
    .strict()
    .superRefine((push, ctx) => {
      if (push.started_at && push.ended_at && Date.parse(push.ended_at) < Date.parse(push.started_at)) ctx.addIssue({ code: 'custom', path: ['ended_at'], message: 'must not be before started_at' });
      if (!oneVocabulary(push, ['encounter_type'], ctx)) return;
      if (push.encounter_type !== CDSS_ALERT) {
        for (const field of ['alert_type', 'severity', 'cdss_rule_id'] as const)
          if (push[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message: `only for encounter_type ${CDSS_ALERT}` });
        return;
      }
      for (const field of ['alert_type', 'severity'] as const)
        if (push[field] === undefined) ctx.addIssue({ code: 'custom', path: [field], message: `required for encounter_type ${CDSS_ALERT}` });
    })
    .meta({ id: 'EncounterPush' });

const NotWritten = z.array(z.string()).optional().describe("For a pushed `record`: its fields with a value that the FHIR written does not hold as given (a field read only, such as a name Pont reads from another resource or a visit's admission source), so read the record back for what was kept; empty when all was written");

const EncounterPushed = z
  .object({
    health_id: z.string(),
    encounter_id: z.string().describe('The FHIR Encounter'),
    detected_issue_id: z.string().nullable().describe(`The FHIR DetectedIssue of a ${CDSS_ALERT}, else null`),
    organization_id: z.string().nullable().describe('Recorded as the author'),
    created_at: z.string(),
    not_written: NotWritten,
  })
  .meta({ id: 'EncounterPushed' });

/** The lab push's body: its `flag_level` values are lab-result.map.yaml's (the table of its `flag_level` field). */
const labResultPush = (maps: MappingSet, record: z.ZodObject) =>
  z
    .object({
      health_id: HealthId,
      record: pushedRecord(record, 'lab_results'),
      test_name: Text(200).optional(),
      result_value: Text(1000)
        .optional().describe('A decimal number, or a limit such as "<5" or ">=200", is stored as a quantity (with `unit` and the comparator); anything else (e.g. "positive") as text, and then `unit` is refused (422)'),
      flagged: z.boolean().optional().describe('Outside the normal range; leave it out when the result has no interpretation (none is written)'),
      flag_level: z
        .enum(valuesOf(maps, 'lab-result', 'flag_level'))
        .optional()
        .describe('How far out, each level an interpretation code (mappings/lab-result.map.yaml, `flag_level`); default abnormal when flagged, normal when not flagged, none without `flagged`'),
      interpretation: Text(2000).optional().describe("The result in words; the report's conclusion"),
      unit: Text(50).optional().describe('Unit of a numeric result, e.g. g/dL: a UCUM unit is written as one (system and code), any other as words'),
      loinc_code: z.string().regex(/^\d{1,7}-\d$/, 'must be a LOINC code such as 718-7').optional(),
      reference_low: z.number().finite().optional(),
      reference_high: z.number().finite().optional(),
      // Every status a lab record can show can be pushed back (a corrected result stays corrected).
      status: z.enum(valuesOf(maps, 'lab-result', 'status')).optional().describe('Default final (a final result raises lab_result.released)'),
      effective_at: PastDateTime.optional().describe('When the specimen was taken (a FHIR dateTime: the day alone when that is all that is known); default now'),
    })
    .strict()
    .superRefine((push, ctx) => {
      if (!oneVocabulary(push, ['test_name', 'result_value'], ctx)) return;
      if (push.reference_low !== undefined && push.reference_high !== undefined && push.reference_low > push.reference_high)
        ctx.addIssue({ code: 'custom', path: ['reference_high'], message: 'must not be below reference_low' });
    })
    .meta({ id: 'LabResultPush' });

const LabResultPushed = z
  .object({
    health_id: z.string(),
    lab_result_id: z.string().describe('The FHIR resource written: the Observation (a record from a report: its DiagnosticReport)'),
    diagnostic_report_id: z.string().nullable().describe('The FHIR DiagnosticReport that issues it (a pushed `record` from a report: that report, also lab_result_id; of an Observation: none)'),
    flagged: z.boolean().nullable().describe('Whether an interpretation other than normal was stored; null when none was'),
    flag: z.string().nullable().describe('The interpretation code stored, null when none'),
    created_at: z.string(),
    not_written: NotWritten,
  })
  .meta({ id: 'LabResultPushed' });

const idempotencyHeader = {
  'Idempotent-Replayed': { description: 'true when this is the stored answer to an earlier request with the same Idempotency-Key', schema: { type: 'string' } },
};

/**
 * What the records routes validate and publish, from the record types the maps declare (their `record:` sections):
 * the `type` values, each type's shape, the answers holding them.
 */
function recordSchemas(maps: MappingSet) {
  const types = recordTypes(maps);
  const typeNames = [...types.keys()];
  const shapeOf = (type: RecordType) =>
    maps.get(type.sources[0]!.map).shape().extend(Object.fromEntries(tagNames(type).map((k) => [k, z.string()]))).meta({ id: type.shape });
  const shapes = new Map(typeNames.map((t) => [t, shapeOf(types.get(t)!)]));
  /** The shape of a record type the code itself uses (src/mapping/uses.ts names them); throws when no map declares it. */
  const shape = (name: string) => shapes.get(recordType(maps, name).name)!;
  const RecordsQuery = z
    .object({
      type: z.enum([...typeNames, 'all']).default('all'),
      limit: z.coerce.number().int().min(1).max(1000).default(100),
      cursor: z.string().max(500).optional().describe('next_cursor of the previous page (same type)'),
      since: Instant.optional().describe('Only records changed after this instant'),
    })
    .strict();
  const RecordsAnswer = z
    .object({
      health_id: z.string(),
      type: z.string(),
      records: z.object(Object.fromEntries(typeNames.map((t) => [t, z.array(shapes.get(t)!).optional()]))).describe('Only the types asked for, newest first'),
      next_cursor: z.string().nullable().optional().describe('A single type: the `cursor` of the next page, null at the end'),
      truncated: z.array(z.string()).optional().describe('type=all: the types with more than `limit` records (page them by type)'),
      withheld: z.array(z.string()).optional().describe('type=all: the types no consent covers for the caller (not read)'),
    })
    .meta({ id: 'PatientRecords' });
  // The patient block is the summary map's shape; the code gives its blood group (uses.ts) from the laboratory.
  const patientBlock = maps.get('patient-summary').shape();
  const Summary = z
    .object({
      health_id: z.string(),
      patient: patientBlock
        .extend({ blood_group: patientBlock.shape.blood_group!.describe('ABO and Rh, e.g. A+, from the newest LOINC 882-1 (or 883-9 with 10331-7) Observation (read as its lab record), else the Patient\'s') })
        .describe('mappings/patient-summary.map.yaml'),
      active_medications: z.array(shape('prescriptions')).describe(`Active MedicationRequests, newest first, at most ${SUMMARY_SIZES.active_medications}`),
      active_allergies: z.array(shape('allergies')).describe(`Active allergies, newest first, at most ${SUMMARY_SIZES.active_allergies}`),
      recent_labs: z.array(shape('lab_results')).describe(`The ${SUMMARY_SIZES.recent_labs} newest lab results`),
      recent_visits: z.array(shape('visits')).describe(`The ${SUMMARY_SIZES.recent_visits} newest encounters`),
      active_care_plans: z.array(shape('care_plans')).describe(`Active care plans, newest first, at most ${SUMMARY_SIZES.active_care_plans}`),
      active_goals: z.array(shape('goals')).describe(`Goals active or accepted, newest first, at most ${SUMMARY_SIZES.active_goals}`),
      recent_procedures: z.array(shape('procedures')).describe(`The ${SUMMARY_SIZES.recent_procedures} newest procedures completed or in progress`),
      active_devices: z.array(shape('devices')).describe(`The patient's active devices (implants with their UDI) and devices in use, newest first, at most ${SUMMARY_SIZES.active_devices}`),
      withheld: z.array(z.string()).describe('Data classes no consent covers for the caller: their sections are empty'),
    })
    .meta({ id: 'PatientSummary' });
  return { typeNames, RecordsQuery, RecordsAnswer, Summary, EncounterPush: encounterPush(maps, shape('visits')), LabResultPush: labResultPush(maps, shape('lab_results')) };
}

export function recordRoutes(services: Services): RouteSpec[] {
  const records = new RecordsService(services.mappings, services.terminology);
  // The maps of the request (a reload changes them): a record type added by a map is served, validated and
  // published from the next request on, on every process that reloads.
  const live = services.mappings.derived(recordSchemas);

  const fhirHelpers = SDK_FHIR_TYPES.map((type) =>
    defineRoute({
      method: 'get',
      path: `${SDK}/patients/{health_id}/fhir/${type}`,
      operationId: `sdkPatient${type}`,
      summary: `The patient's ${type} resources (FHIR search)`,
      description: `A FHIR searchset Bundle from the same search as /api/fhir/R4/${type}, for the patient of the Health ID: any ${type} search parameter but the patient's own (e.g. ${type === 'Condition' ? '`clinical-status=active`' : type === 'MedicationRequest' ? '`status=active`' : '`_count=50`'}), paged with the Bundle's next link. Consent-gated.`,
      tags: ['SDK', 'FHIR'],
      security: { kind: 'client', scope: [FHIR_READ_SCOPES[type]!, 'fhir:read'] },
      params: z.object({ health_id: HealthId }),
      query: z.object({}).loose(),
      responses: { 200: { description: 'searchset Bundle', schema: { type: 'object' }, contentType: FHIR_JSON }, ...errors },
      async handler({ ctx, params, repo }) {
        const query = { ...(ctx.query as Record<string, string | string[]>) };
        for (const name of ['patient', 'subject', '_has'])
          if (name in query) throw badRequest(`${name} is set by the Health ID of the path`);
        const bundle = await repo.transaction(async (sql) => {
          const patient = await registeredPatient(sql, params.health_id);
          await repo.requirePatientAccess(patient.patientId, [FHIR_READ_SCOPES[type]!]);
          return repo.search(type, { ...query, patient: `Patient/${patient.patientId}` }, { selfQuery: ctx.querystring, linkBase: `${services.config.publicUrl}${ctx.path}` });
        });
        return { body: bundle, contentType: FHIR_JSON };
      },
    }),
  );

  return [
    defineRoute({
      method: 'get',
      path: `${CONNECT}/patient/{health_id}/records`,
      operationId: 'getPatientRecords',
      summary: "The patient's clinical records in the Connect shapes",
      description:
        'Records of one type, or of all (`type=all`: each list holds at most `limit`; `truncated` names the types with more, `withheld` those no consent covers). Newest first. A single type pages with `cursor` (`next_cursor`). `since` returns what changed after an instant. Requires an active consent covering the types read (403 CONSENT_REQUIRED otherwise); one audit record per request.',
      tags: ['Connect', 'Records'],
      security: { kind: 'client', scope: 'patient:diagnostics:read' },
      params: z.object({ health_id: HealthId }),
      get query() {
        return live().RecordsQuery;
      },
      get responses() {
        return { 200: { description: 'The records', schema: live().RecordsAnswer }, ...errors };
      },
      async handler({ params, query, repo }) {
        if (query.cursor && query.type === 'all') throw invalidFields([{ field: 'query.cursor', message: 'a cursor pages one type: ask for that type' }]);
        const asked = query.type === 'all' ? live().typeNames : [query.type];
        const { answer, audited } = await records.records(repo, params.health_id, { types: asked, limit: query.limit, cursor: query.cursor, since: query.since });
        return { body: { type: query.type, ...answer }, settles: audited };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${SDK}/patients/{health_id}/summary`,
      operationId: 'getPatientSummary',
      summary: "The patient's summary: demographics, blood group, active medications and allergies, recent labs and visits, care plans, goals, procedures and devices",
      description: 'Needs a consent covering patients:read; sections of classes no consent covers (prescriptions:read, labs:read) are empty and named in `withheld`. One audit record per request.',
      tags: ['SDK', 'Records'],
      security: { kind: 'client', scope: 'patients:read' },
      params: z.object({ health_id: HealthId }),
      get responses() {
        return { 200: { description: 'The summary', schema: live().Summary }, ...errors };
      },
      async handler({ params, repo }) {
        const { answer, audited } = await records.summary(repo, params.health_id);
        return { body: answer, settles: audited };
      },
    }),
    defineRoute({
      method: 'post',
      path: `${SDK}/records/encounters`,
      operationId: 'pushEncounter',
      summary: 'Push an encounter (a decision-support alert: with its DetectedIssue)',
      description:
        `Writes a FHIR Encounter (mappings/visit.map.yaml) and, for encounter_type ${CDSS_ALERT}, the DetectedIssue it raised (mappings/cdss-alert.map.yaml), implicating the Encounter; the caller's organisation is their author. Event encounter.created (and encounter.closed for a finished one). Send an Idempotency-Key to make retries safe.`,
      tags: ['SDK', 'Records'],
      security: { kind: 'client', scope: 'encounters:write' },
      get body() {
        return live().EncounterPush;
      },
      responses: { 201: { description: 'Created', schema: EncounterPushed, headers: idempotencyHeader }, ...pushErrors },
      async handler({ body, repo }) {
        if (body.record) {
          const { id, createdAt, notWritten } = await records.pushRecord(repo, body.health_id, 'visits', body.record);
          return { status: 201, body: { health_id: body.health_id, encounter_id: id, detected_issue_id: null, organization_id: organizationOf(repo), created_at: createdAt, not_written: notWritten } };
        }
        return { status: 201, body: await records.pushEncounter(repo, body as EncounterPush) };
      },
    }),
    defineRoute({
      method: 'post',
      path: `${SDK}/records/lab-results`,
      operationId: 'pushLabResult',
      summary: 'Push a lab result: an Observation and the DiagnosticReport that issues it',
      description:
        'Writes a FHIR Observation (mappings/lab-result.map.yaml; a numeric result_value as a Quantity, flag_level as the interpretation code) and its DiagnosticReport (mappings/lab-report.map.yaml); the caller\'s organisation is their author. A final result raises lab_result.released. `flagged` and `flag_level` must agree (422). Send an Idempotency-Key to make retries safe.',
      tags: ['SDK', 'Records'],
      security: { kind: 'client', scope: 'labs:write' },
      get body() {
        return live().LabResultPush;
      },
      responses: { 201: { description: 'Created', schema: LabResultPushed, headers: idempotencyHeader }, ...pushErrors },
      async handler({ body, repo }) {
        if (body.record) {
          const { id, resourceType, createdAt, written, notWritten } = await records.pushRecord(repo, body.health_id, 'lab_results', body.record);
          // A record read from a report is written as the report: the result is the report that issues it.
          const report = resourceType === 'DiagnosticReport' ? id : null;
          return { status: 201, body: { health_id: body.health_id, lab_result_id: id, diagnostic_report_id: report, ...flagOf(written.flag), created_at: createdAt, not_written: notWritten } };
        }
        return { status: 201, body: await records.pushLabResult(repo, body as LabResultPush) };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${SDK}/patients/{health_id}/fhir/$everything`,
      operationId: 'sdkPatientEverything',
      summary: "Everything in the patient's record that the caller may see (FHIR Patient/$everything)",
      description: 'The same Bundle as /api/fhir/R4/Patient/{id}/$everything, for the patient of the Health ID, paged with its next link. Needs a consent covering patients:read.',
      tags: ['SDK', 'FHIR'],
      security: { kind: 'client', scope: ['patients:read', 'fhir:read'] },
      params: z.object({ health_id: HealthId }),
      query: z.object({
        _count: z.coerce.number().int().min(1).max(1000).optional(),
        _since: Instant.optional(),
        _cursor: z.string().max(500).optional(),
      }),
      responses: { 200: { description: 'searchset Bundle', schema: { type: 'object' }, contentType: FHIR_JSON }, ...errors },
      async handler({ ctx, params, query, repo }) {
        const bundle = await repo.transaction(async (sql) => {
          const patient = await registeredPatient(sql, params.health_id);
          await repo.requirePatientAccess(patient.patientId, ['patients:read']);
          return repo.everything(patient.patientId, { count: query._count, since: query._since, cursor: query._cursor, linkBase: `${services.config.publicUrl}${ctx.path}` });
        });
        return { body: bundle, contentType: FHIR_JSON };
      },
    }),
    ...fhirHelpers,
  ];
}
