import type { Group } from '@medplum/fhirtypes';
import { z } from 'zod';
import type { Principal } from '../core/principal';
import { FHIR_READ_SCOPES } from '../core/scopes';
import { allResourceTypes } from '../core/fhir-definitions';
import { FHIR_BASE_PATH } from '../fhir/service';
import { readBody } from '../http/body';
import { ApiError, ErrorCode, badRequest, notFound } from '../http/errors';
import { defineRoute, type HandlerInput, type HandlerResult, type RouteSpec } from '../http/routes';
import type { Services } from '../http/services';
import { typeFilterQueries, type ExportLevel, type ExportOwner } from '../bulk/jobs';
import { OUTPUT_FORMATS, parametersResource, parseExportParameters, queryParameters } from '../bulk/params';

const FHIR_JSON = 'application/fhir+json';
export const NDJSON = 'application/fhir+ndjson';
/** The status URL of a job (its files are under it). */
const STATUS_PATH = `${FHIR_BASE_PATH}/$export-status`;
/** Any read scope of the FHIR scope table lets a client ask; what it gets is what those scopes and its consents let it read. */
const READ_SCOPES = [...new Set<string>([...Object.values(FHIR_READ_SCOPES), 'fhir:read'])];
/** Seconds a client is told to wait between status requests. */
const POLL_AFTER_SECONDS = 2;

const tags = ['FHIR Bulk Data'];
type Input = HandlerInput<any, any, any>;

const ManifestSchema = {
  type: 'object',
  required: ['transactionTime', 'request', 'requiresAccessToken', 'output', 'error'],
  properties: {
    transactionTime: { type: 'string', format: 'date-time' },
    request: { type: 'string' },
    requiresAccessToken: { type: 'boolean', const: true },
    output: { type: 'array', items: { type: 'object', properties: { type: { type: 'string' }, url: { type: 'string' }, count: { type: 'integer' } } } },
    error: { type: 'array', items: { type: 'object' } },
  },
};
const OutcomeSchema = { type: 'object', properties: { resourceType: { const: 'OperationOutcome' }, issue: { type: 'array' } } };
const outcome = (description: string) => ({ description, schema: OutcomeSchema, contentType: FHIR_JSON });

function ownerOf(principal: Principal | undefined): ExportOwner {
  if (principal?.kind !== 'client') throw new ApiError(403, ErrorCode.forbidden, 'Bulk exports are run for integration clients');
  return { clientId: principal.clientId, organizationId: principal.organizationId };
}

function information(text: string) {
  return { resourceType: 'OperationOutcome', issue: [{ severity: 'information', code: 'informational', diagnostics: text }] };
}

/** The Patient ids of a Group's active members (local references only). */
function membersOf(group: Group, base: string): string[] {
  const ids = (group.member ?? []).flatMap((m) => {
    if (m.inactive) return [];
    const ref = m.entity?.reference ?? '';
    const local = ref.startsWith(`${base}/`) ? ref.slice(base.length + 1) : ref;
    const match = /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(local);
    return match ? [match[1]!] : [];
  });
  return [...new Set(ids)];
}

export function bulkExportRoutes(services: Services): RouteSpec[] {
  const base = () => `${services.config.publicUrl}${FHIR_BASE_PATH}`;
  const exports = services.bulkExports;

  /** Kick-off (IG "Bulk Data Kick-off Request"): checks everything a job needs, queues it, answers 202 + Content-Location. */
  const kickOff = (level: ExportLevel) => async (input: Input) => {
    const { ctx, params, principal } = input;
    const prefer = ctx.get('prefer');
    if (!/\brespond-async\b/i.test(prefer)) throw badRequest('A bulk export runs asynchronously: send Prefer: respond-async');
    if ('x-emergency-reason' in ctx.headers) throw badRequest('Break-glass reads one patient: a bulk export takes no X-Emergency-Reason');
    const repo = input.repo; // built after the check above: its policy would refuse X-Emergency-Reason on its own terms
    ownerOf(principal); // a client: exports are kept per client
    const raw = ctx.method === 'POST' ? parametersResource(await readBody(ctx, services.config.maxBodyBytes)) : queryParameters(ctx.query);
    const asked = parseExportParameters(raw, { lenient: /\bhandling\s*=\s*lenient\b/i.test(prefer), patientAllowed: level !== 'system' });
    // 403 before any job: a type asked for (or filtered) that the caller may not read.
    for (const type of [...(asked.types ?? []), ...asked.typeFilters.map((f) => f.type)])
      if (!repo.access.canRead(type)) throw new ApiError(403, ErrorCode.forbidden, `No read access to ${type}: leave it out of _type and _typeFilter`);
    const readable = asked.types ?? allResourceTypes().filter((t) => repo.access.canRead(t));
    // A task per type with anything stored (the others have nothing to export, now or at transactionTime).
    const stored = await repo.typesInStore(readable);
    const types = readable.filter((t) => stored.has(t));
    // The filters as the worker will run them: a bad one is a 400 now, not a failed job later.
    const until = new Date().toISOString();
    for (const type of new Set(asked.typeFilters.map((f) => f.type)))
      await repo.exportPageQuery(type, { afterRid: '0', limit: 1, until, typeFilters: typeFilterQueries(asked.typeFilters.map((f) => f.text), type) });
    let members = asked.patients;
    if (level === 'group') {
      const groupMembers = membersOf(await repo.read<Group>('Group', String(params.id)), base());
      members = members ? members.filter((m) => groupMembers.includes(m)) : groupMembers;
    }
    const job = await exports.create({
      principal: principal as Extract<Principal, { kind: 'client' }>,
      request: `${services.config.publicUrl}${ctx.originalUrl}`,
      level,
      members,
      types,
      since: asked.since,
      typeFilters: asked.typeFilters,
      purpose: repo.context.purpose,
    });
    await repo.audit({
      operation: ctx.method === 'POST' ? 'bulkExportKickOffPost' : 'bulkExportKickOff',
      action: 'E',
      outcome: 'success',
      outcomeDescription: `bulk export ${job.id} queued: ${level} level${level === 'group' ? ` (Group/${params.id}, ${members!.length} patient(s))` : ''}, ${asked.types ? asked.types.join(',') : 'every readable type'}${asked.since ? ` since ${asked.since}` : ''}`,
      dataTypes: asked.types,
    });
    return {
      status: 202,
      headers: { 'Content-Location': `${base()}/$export-status/${job.id}` },
      body: information(`Export ${job.id} accepted; poll the Content-Location URL`),
      contentType: FHIR_JSON,
    };
  };

  const kickOffDocs = {
    tags,
    fhir: true,
    group: 'fhir',
    security: { kind: 'client' as const, scope: READ_SCOPES },
    extraQueryDocs: [
      { name: '_outputFormat', description: `${OUTPUT_FORMATS.join(', ')} (all give ${NDJSON})`, schema: { type: 'string' } },
      { name: '_since', description: 'Only resources changed after this FHIR instant', schema: { type: 'string', format: 'date-time' } },
      { name: '_type', description: 'Comma-separated resource types (default: every type the client may read); a type it may not read: 403', schema: { type: 'string' } },
      { name: '_typeFilter', description: 'Comma-separated Type?search criteria (FHIR search parameters; OR-ed per type)', schema: { type: 'string' } },
    ],
    responses: {
      202: { ...outcome('Accepted: poll the status URL'), headers: { 'Content-Location': { description: 'The status URL', schema: { type: 'string' } } } },
      400: outcome('No Prefer: respond-async, or a bad parameter'),
      403: outcome('A type the client may not read'),
      429: { ...outcome('This client already has an export in progress'), headers: { 'Retry-After': { description: 'Seconds', schema: { type: 'integer' } } } },
    },
  };
  /**
   * The status URL and the files: a read scope, as the kick-off; only the client that kicked the export off finds it
   * (404 otherwise), and only with a token that may read every type it holds (403 otherwise: `ownExport`).
   */
  const ownerOnly = { tags, fhir: true, group: 'fhir', security: { kind: 'client' as const, scope: READ_SCOPES } };
  /**
   * The export `id` of the caller's client, if this token may read every type of it: a token of the same client with
   * narrower scopes (system/Observation.rs, say) must not download, see or cancel more than it could export.
   */
  const ownExport = async ({ params, principal, repo }: Input) => {
    const job = await exports.find(params.id, ownerOf(principal));
    if (!job) throw notFound(`No bulk export ${params.id}`);
    const unreadable = job.types.filter((type) => !repo.access.canRead(type));
    if (unreadable.length)
      throw new ApiError(403, ErrorCode.forbidden, `This token may not read ${unreadable.join(', ')}, which bulk export ${params.id} holds: use a token with the scopes of its kick-off`);
    return job;
  };
  const ParametersBody = { schema: { type: 'object', properties: { resourceType: { const: 'Parameters' }, parameter: { type: 'array' } } }, contentTypes: [FHIR_JSON, 'application/json'], required: false };
  const GroupId = z.object({ id: z.string().describe('Group id') });

  const levels: Array<{ level: ExportLevel; path: string; name: string; summary: string }> = [
    { level: 'system', path: `${FHIR_BASE_PATH}/$export`, name: 'System', summary: 'Bulk export of everything the client may read' },
    { level: 'patient', path: `${FHIR_BASE_PATH}/Patient/$export`, name: 'Patient', summary: "Bulk export of the data of every patient the client may read" },
    { level: 'group', path: `${FHIR_BASE_PATH}/Group/{id}/$export`, name: 'Group', summary: "Bulk export of the data of a Group's member patients" },
  ];

  return [
    ...levels.flatMap(({ level, path, name, summary }) => [
      defineRoute({
        ...kickOffDocs,
        method: 'get',
        path,
        operationId: `bulkExport${name}`,
        summary,
        description: 'Bulk Data Access IG 2.0 kick-off: needs Prefer: respond-async; answers 202 with the status URL in Content-Location (docs/fhir.md "Bulk Data export").',
        params: level === 'group' ? GroupId : undefined,
        handler: kickOff(level),
      }),
      defineRoute({
        ...kickOffDocs,
        method: 'post',
        path,
        operationId: `bulkExport${name}Post`,
        summary: `${summary} (parameters in a Parameters resource)`,
        params: level === 'group' ? GroupId : undefined,
        idempotent: false,
        rawBody: ParametersBody,
        handler: kickOff(level),
      }),
    ]),
    defineRoute({
      method: 'get',
      path: `${STATUS_PATH}/{id}`,
      operationId: 'bulkExportStatus',
      summary: 'Status of a bulk export: 202 while it runs, 200 with the manifest when done',
      description: 'Only the client that asked (same client and organisation) sees it; anyone else, and an expired or cancelled export: 404. A token of that client that may not read every type of the export (narrower scopes than its kick-off): 403. A failed export: 500 with an OperationOutcome.',
      ...ownerOnly,
      params: z.object({ id: z.string() }),
      responses: {
        200: { description: 'The manifest', schema: ManifestSchema, headers: { Expires: { description: 'When the files go', schema: { type: 'string' } } } },
        202: {
          description: 'In progress',
          headers: { 'X-Progress': { description: 'Progress in words', schema: { type: 'string' } }, 'Retry-After': { description: 'Seconds', schema: { type: 'integer' } } },
        },
        403: outcome('This token may not read every type the export holds'),
        404: outcome('No such export for this client'),
        500: outcome('The export failed'),
      },
      handler: async (input): Promise<HandlerResult> => {
        const job = await ownExport(input);
        if (job.status === 'failed') throw new ApiError(500, ErrorCode.internal, `The export failed: ${job.error}`);
        if (job.status === 'running') {
          const open = await exports.openAtKickOff(job.id);
          const progress = open
            ? `waiting for ${open} write(s) still open at the kick-off: what they write up to transactionTime is in this export`
            : `${job.exported} resource(s) exported; ${job.typesDone} of ${job.types.length} type(s) done`;
          return { status: 202, headers: { 'X-Progress': progress, 'Retry-After': String(POLL_AFTER_SECONDS) } };
        }
        const files = await exports.files(job.id);
        return {
          status: 200,
          headers: { Expires: new Date(job.expiresAt!).toUTCString() },
          body: {
            transactionTime: job.transactionTime,
            request: job.request,
            requiresAccessToken: true,
            output: files.map((f) => ({ type: f.type, url: `${base()}/$export-status/${job.id}/file/${f.part}`, count: f.count })),
            error: [],
          },
        };
      },
    }),
    defineRoute({
      method: 'delete',
      path: `${STATUS_PATH}/{id}`,
      operationId: 'bulkExportCancel',
      summary: 'Cancel a bulk export (or delete a finished one) and its files',
      ...ownerOnly,
      params: z.object({ id: z.string() }),
      responses: { 202: outcome('Cancelled; its status URL now answers 404'), 403: outcome('This token may not read every type the export holds'), 404: outcome('No such export for this client') },
      handler: async (input) => {
        const { params, principal } = input;
        await ownExport(input);
        if (!(await exports.cancel(params.id, ownerOf(principal)))) throw notFound(`No bulk export ${params.id}`);
        return { status: 202, body: information(`Export ${params.id} cancelled; its files are deleted`), contentType: FHIR_JSON };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${STATUS_PATH}/{id}/file/{part}`,
      operationId: 'bulkExportFile',
      summary: 'One file of a completed bulk export (ndjson, one resource per line), streamed',
      description: 'Only the client that asked (same client and organisation), with a token that may read every type of the export (403 otherwise); anyone else, and an expired export: 404.',
      ...ownerOnly,
      params: z.object({ id: z.string(), part: z.string() }),
      responses: { 200: { description: 'ndjson', contentType: NDJSON, schema: { type: 'string' } }, 403: outcome('This token may not read every type the export holds'), 404: outcome('No such file for this client'), 410: outcome('Withheld: a consent of a patient in the file changed after it was written (export again)') },
      handler: async (input) => {
        const { ctx, params, principal, repo } = input;
        const job = await ownExport(input);
        const part = /^[1-9]\d{0,8}$/.test(params.part) ? Number(params.part) : undefined;
        const file = part && (await exports.openFile(job, part, ownerOf(principal)));
        if (!file) throw notFound(`No file ${params.part} of bulk export ${params.id}`);
        if (file === 'withheld')
          throw new ApiError(410, ErrorCode.gone, `File ${part} of bulk export ${params.id} is withheld: a consent of a patient in it changed after it was written. Export again.`);
        // Its row is committed and its file is not here whole: every serving process must share PONT_BULK_EXPORT_DIR.
        if (file === 'missing') throw new Error(`bulk export ${params.id} file ${part} is missing from the export directory (PONT_BULK_EXPORT_DIR)`);
        // Each download of patient data is an access of its own (the file's writing named its patients).
        await repo.audit({ operation: 'bulkExportFile', action: 'R', outcome: 'success', outcomeDescription: `file ${part} of bulk export ${params.id} downloaded` });
        ctx.status = 200;
        ctx.type = NDJSON;
        ctx.length = file.bytes;
        ctx.body = file.body;
      },
    }),
  ];
}
