import type { Context } from 'koa';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import { z } from 'zod';
import { FHIR_WRITE_SCOPE, fhirReadScopes, TERMINOLOGY_SCOPE } from '../core/scopes';
import type { Principal } from '../core/principal';
import { mediaType, readBody } from '../http/body';
import { ApiError, ErrorCode, badRequest } from '../http/errors';
import { prepareDocument, preparedAnswer, type PreparedDocument } from '../http/prepared-document';
import { defineRoute, type HandlerInput, type HandlerResult, type RouteSpec } from '../http/routes';
import type { Services } from '../http/services';
import { processBundle } from '../fhir/bundle';
import { capabilityStatement } from '../fhir/capability';
import { indexedParams } from '../fhir/indexer';
import { JSON_PATCH, MAX_PATCH_OPERATIONS, parsePatch, type Patch } from '../fhir/patch';
import { present } from '../fhir/present';
import type { QueryParams } from '../fhir/search/parse';
import { FHIR_BASE_PATH as FHIR_BASE } from '../fhir/service';
import { checkType } from '../fhir/store';
import { isTerminologyType, type TerminologyType } from '../fhir/term/resources';
import { validateInput, validateOperation } from '../fhir/validate-operation';
export const FHIR_JSON = 'application/fhir+json';

/** Types given their own documented read and search operations (the rest share `/{type}`). */
const DOCUMENTED_TYPES = [
  'AllergyIntolerance', 'AuditEvent', 'Condition', 'Consent', 'Coverage', 'DiagnosticReport', 'DocumentReference',
  'Encounter', 'MedicationRequest', 'Observation', 'Organization', 'Patient', 'Practitioner',
];

const ResourceSchema = { type: 'object', required: ['resourceType'], properties: { resourceType: { type: 'string' }, id: { type: 'string' } } };
const BundleSchema = { type: 'object', required: ['resourceType', 'type'], properties: { resourceType: { const: 'Bundle' }, type: { type: 'string' }, total: { type: 'integer' }, link: { type: 'array' }, entry: { type: 'array' } } };
const PatchSchema = {
  oneOf: [
    { type: 'array', maxItems: MAX_PATCH_OPERATIONS, items: { type: 'object', required: ['op', 'path'], properties: { op: { enum: ['add', 'remove', 'replace', 'move', 'copy', 'test'] }, path: { type: 'string' }, from: { type: 'string' }, value: {} } } },
    { type: 'object', required: ['resourceType', 'parameter'], properties: { resourceType: { const: 'Parameters' }, parameter: { type: 'array', maxItems: MAX_PATCH_OPERATIONS } } },
  ],
};
const ok = (description: string, schema: Record<string, unknown> = ResourceSchema) => ({ description, schema, contentType: FHIR_JSON });

const TypeParam = z.string().describe('FHIR resource type, e.g. Patient');
const IdParam = z.string().describe('Logical id');

function fhirResult(body: unknown, status = 200, headers: Record<string, string> = {}): HandlerResult {
  return { status, body, headers, contentType: FHIR_JSON };
}

function versionHeaders(resource: Resource): Record<string, string> {
  const meta = resource.meta;
  return meta?.versionId
    ? { ETag: `W/"${meta.versionId}"`, ...(meta.lastUpdated ? { 'Last-Modified': new Date(meta.lastUpdated).toUTCString() } : {}) }
    : {};
}

/** Media ranges that take FHIR JSON. */
const JSON_RANGES = new Set([FHIR_JSON, 'application/json', 'application/json+fhir', 'application/*', '*/*']);

/**
 * JSON only: `_format` or an Accept header that excludes JSON gets 406. A `fhirVersion` parameter
 * (`application/fhir+json; fhirVersion=4.0`) must name R4 (4.0 or 4.0.x).
 */
function checkFormat(ctx: Context): void {
  const format = ctx.query._format;
  if (typeof format === 'string' && !/json/i.test(format)) throw new ApiError(406, ErrorCode.notAcceptable, 'Only JSON is supported');
  const accept = ctx.get('accept');
  if (!accept) return;
  const acceptable = accept.split(',').some((range) => {
    const [type, ...params] = range.split(';').map((p) => p.trim().toLowerCase());
    const version = params.find((p) => p.startsWith('fhirversion='))?.slice('fhirversion='.length).replace(/"/g, '');
    const quality = params.find((p) => p.startsWith('q='));
    return JSON_RANGES.has(type!) && (version === undefined || /^4\.0(\.\d+)?$/.test(version)) && quality !== 'q=0';
  });
  if (!acceptable) throw new ApiError(406, ErrorCode.notAcceptable, `Cannot produce ${accept}; this server speaks ${FHIR_JSON}; fhirVersion=4.0`);
}

/**
 * `_format`, `_pretty`, `_summary` and `_elements`, read alike on every read that returns resources (read, vread,
 * history; search parses the same through parseSearch): a bad value is a 400, never ignored.
 */
function presentation(ctx: Context): { elements?: string[]; summary?: string } {
  checkFormat(ctx);
  const one = (name: string) => {
    const v = ctx.query[name];
    if (Array.isArray(v)) throw badRequest(`${name} may be given once`);
    return v;
  };
  const pretty = one('_pretty');
  if (pretty !== undefined && pretty !== 'true' && pretty !== 'false') throw badRequest('_pretty must be true or false');
  const summary = one('_summary');
  if (summary !== undefined && !['true', 'false', 'text', 'data'].includes(summary)) throw badRequest('_summary must be true, false, text or data');
  const elements = one('_elements')?.split(',').map((e) => e.trim());
  if (elements?.some((e) => !/^[A-Za-z][A-Za-z0-9]*(\[x\])?$/.test(e))) throw badRequest('_elements is a comma-separated list of element names');
  return { elements, summary };
}

/** `_history` answers one page (newest first, up to `_count`): a `_cursor` is refused rather than ignored. */
function historyPresentation(ctx: Context): { elements?: string[]; summary?: string } {
  if (ctx.query._cursor !== undefined)
    throw badRequest('_history answers one page of up to _count (at most 1000) versions, newest first: narrow it with _since; _cursor pages searches only');
  return presentation(ctx);
}

/** A history Bundle with each entry's resource shaped as `presentation` asks. */
function presentBundle(bundle: Bundle, shape: { elements?: string[]; summary?: string }): Bundle {
  if (!shape.elements && !shape.summary) return bundle;
  return { ...bundle, entry: bundle.entry?.map((e) => (e.resource ? { ...e, resource: present(e.resource, shape) } : e)) };
}

/** What a write answers, by `Prefer: return=…` (FHIR RESTful API, "Managing Return Content"). */
type ReturnPreference = 'minimal' | 'representation' | 'OperationOutcome';
function preferredReturn(ctx: Context): ReturnPreference {
  const m = /return\s*=\s*"?(minimal|representation|OperationOutcome)"?/i.exec(ctx.get('prefer'));
  const value = m?.[1]?.toLowerCase();
  return value === 'minimal' ? 'minimal' : value === 'operationoutcome' ? 'OperationOutcome' : 'representation';
}

/**
 * Conditional read: 304 when the client's copy is current (If-None-Match names this version, or
 * If-Modified-Since is not before the last update).
 */
function notModified(ctx: Context, resource: Resource): boolean {
  const etag = resource.meta?.versionId ? `W/"${resource.meta.versionId}"` : undefined;
  const match = ctx.get('if-none-match');
  if (match) return !!etag && match.split(',').some((t) => t.trim() === '*' || t.trim().replace(/^W\//, '') === etag.replace(/^W\//, ''));
  const since = Date.parse(ctx.get('if-modified-since'));
  const updated = resource.meta?.lastUpdated ? Math.floor(Date.parse(resource.meta.lastUpdated) / 1000) * 1000 : NaN;
  return !Number.isNaN(since) && !Number.isNaN(updated) && updated <= since;
}

async function resourceBody(ctx: Context, services: Services): Promise<Resource> {
  const body = await readBody(ctx, services.config.maxBodyBytes);
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('Body must be a FHIR resource (a JSON object)');
  return body as Resource;
}

/** A PATCH body: a JSON Patch (application/json-patch+json) or a FHIRPath Patch (a Parameters resource). */
async function patchBody(ctx: Context, services: Services): Promise<Patch> {
  const body = await readBody(ctx, services.config.maxBodyBytes);
  if (body === undefined) throw badRequest('PATCH needs a body: a JSON Patch or a FHIRPath Patch (Parameters)');
  return parsePatch(mediaType(ctx), body);
}

function queryOf(ctx: Context): QueryParams {
  return ctx.query as QueryParams;
}

const typeFromPath = (ctx: Context) => String(ctx.params.type);
const readScopeOfPathType = (ctx: Context) => fhirReadScopes(typeFromPath(ctx));
/**
 * Read and search of CodeSystem, ValueSet and ConceptMap: the loaded terminology's for a client holding
 * terminology:read (docs/fhir.md "Terminology"), the FHIR store's otherwise; either scope opens them.
 */
const readOrTerminologyScopes = (ctx: Context) => {
  const type = typeFromPath(ctx);
  return isTerminologyType(type) ? [...fhirReadScopes(type), TERMINOLOGY_SCOPE] : fhirReadScopes(type);
};
const readsLoadedTerminology = (type: string, principal: Principal | undefined): type is TerminologyType =>
  isTerminologyType(type) && principal?.kind === 'client' && principal.scopes.includes(TERMINOLOGY_SCOPE);

type Input = HandlerInput<any, any, any>;

export function fhirRoutes(services: Services): RouteSpec[] {
  /** The CapabilityStatement answered, with what it was made from (the public URL, the published topics). */
  let capability: { made: string; document: PreparedDocument; lastModified: string } | undefined;
  const base = () => `${services.config.publicUrl}${FHIR_BASE}`;

  const search = (type: (ctx: Context) => string) => async ({ ctx, repo, principal }: Input) => {
    checkFormat(ctx);
    const t = type(ctx);
    if (readsLoadedTerminology(t, principal)) return fhirResult(await services.terminology.search(t, queryOf(ctx), base()));
    return fhirResult(await repo.searchJson(t, queryOf(ctx), { selfQuery: ctx.querystring }));
  };
  /** The loaded terminology resource, else (a client that may read the store's too) the store's; else its 404. */
  const readLoaded = async (type: TerminologyType, id: string, repo: Input['repo']): Promise<Resource> => {
    try {
      return await services.terminology.read(type, id);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 404) throw err;
      try {
        return await repo.read(type, id);
      } catch (storeErr) {
        if (storeErr instanceof ApiError && storeErr.status === 403) throw err;
        throw storeErr;
      }
    }
  };
  const read = (type: (ctx: Context) => string) => async ({ ctx, repo, principal }: Input) => {
    const shape = presentation(ctx);
    const t = type(ctx);
    const resource = readsLoadedTerminology(t, principal) ? await readLoaded(t, String(ctx.params.id), repo) : await repo.read(t, String(ctx.params.id));
    if (notModified(ctx, resource)) return { status: 304, headers: versionHeaders(resource) };
    return fhirResult(present(resource, shape), 200, versionHeaders(resource));
  };
  const written = (ctx: Context, resource: Resource, created: boolean) => {
    const headers = versionHeaders(resource);
    const location = `${base()}/${resource.resourceType}/${resource.id}/_history/${resource.meta!.versionId}`;
    if (created) headers.Location = location;
    const status = created ? 201 : 200;
    switch (preferredReturn(ctx)) {
      case 'minimal':
        return { status, headers };
      case 'OperationOutcome':
        return fhirResult(
          { resourceType: 'OperationOutcome', issue: [{ severity: 'information', code: 'informational', details: { text: `${created ? 'Created' : 'Updated'} ${location}` } }] },
          status,
          headers,
        );
      default:
        return fhirResult(resource, status, headers);
    }
  };
  const searchDocs = (type: string) =>
    [...indexedParams(type).values()].map((p) => ({
      name: p.code,
      description: `${p.type} search parameter: ${p.definition.description?.split('\n')[0] ?? ''}`.trim(),
      schema: { type: 'string' },
    }));

  const perType: RouteSpec[] = DOCUMENTED_TYPES.flatMap((type) => [
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/${type}`,
      operationId: `fhirSearch${type}`,
      summary: `Search ${type}`,
      description: 'FHIR R4 search. Modifiers, prefixes, chaining, _include/_revinclude, _sort, _count, _total, _summary, _elements: see docs/fhir.md. Unknown parameters give 400.',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: fhirReadScopes(type) },
      group: 'fhir',
      extraQueryDocs: [
        { name: '_id', description: 'Logical id (comma = OR)', schema: { type: 'string' } },
        { name: '_lastUpdated', description: 'Date with prefix (eq ne gt lt ge le sa eb ap)', schema: { type: 'string' } },
        ...searchDocs(type),
        { name: '_count', description: 'Page size (default 20, at most 1000)', schema: { type: 'integer' } },
      ],
      responses: { 200: ok('searchset Bundle', BundleSchema) },
      handler: search(() => type),
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/${type}/{id}`,
      operationId: `fhirRead${type}`,
      summary: `Read ${type}`,
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: fhirReadScopes(type) },
      group: 'fhir',
      params: z.object({ id: IdParam }),
      responses: { 200: ok(type), 404: ok('Not found', {}), 410: ok('Deleted', {}) },
      handler: read(() => type),
    }),
  ]);

  return [
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/metadata`,
      operationId: 'fhirCapabilities',
      summary: 'CapabilityStatement: what this FHIR server supports (mode=terminology: the TerminologyCapabilities)',
      extraQueryDocs: [{ name: 'mode', description: 'full (default) or normative: the CapabilityStatement; terminology: the TerminologyCapabilities of the loaded code systems', schema: { type: 'string', enum: ['full', 'normative', 'terminology'] } }],
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'public' },
      responses: { 200: ok('CapabilityStatement'), 304: { description: 'Not modified: If-None-Match holds its ETag' } },
      handler: async ({ ctx }) => {
        checkFormat(ctx);
        // R4 `mode`: full (and normative, answered alike) is the CapabilityStatement; terminology the
        // TerminologyCapabilities of what is loaded (docs/fhir.md "Terminology"), read at each request, not cached.
        const mode = ctx.query.mode;
        if (mode !== undefined && (typeof mode !== 'string' || !['full', 'normative', 'terminology'].includes(mode)))
          throw badRequest('mode is full, normative or terminology (once)');
        if (mode === 'terminology') return fhirResult(await services.terminology.capabilities(base()), 200, { 'Cache-Control': 'no-cache' });
        // Made again only when the published topics change (a reload); validators, so a client checks its copy for a 304.
        const topics = services.subscriptions.topicUrls();
        const made = [services.config.publicUrl, ...topics].join('\n');
        if (capability?.made !== made) {
          const statement = capabilityStatement(services.config.publicUrl, topics);
          capability = { made, document: prepareDocument(statement), lastModified: new Date(statement.date!).toUTCString() };
        }
        return preparedAnswer(ctx, capability.document, FHIR_JSON, { 'Cache-Control': 'public, max-age=3600', 'Last-Modified': capability.lastModified });
      },
    }),
    defineRoute({
      method: 'post',
      path: FHIR_BASE,
      operationId: 'fhirTransaction',
      summary: 'Process a transaction (atomic) or batch Bundle',
      description: 'Transaction entries run in one database transaction: all succeed or none is kept. urn:uuid references are rewritten; ifNoneExist and conditional update are honoured. Prefer: return=representation includes the stored resources.',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: FHIR_WRITE_SCOPE },
      group: 'fhir',
      rawBody: { schema: BundleSchema, contentTypes: [FHIR_JSON, 'application/json'] },
      responses: { 200: ok('transaction-response or batch-response Bundle', BundleSchema) },
      handler: async ({ ctx, repo }) => {
        const body = await readBody(ctx, services.config.maxBodyBytes);
        const returnResources = preferredReturn(ctx) === 'representation' && /return/i.test(ctx.get('prefer'));
        return fhirResult(await processBundle(repo, body, { returnResources }));
      },
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/{type}/_history`,
      operationId: 'fhirTypeHistory',
      summary: 'History of every resource of a type, newest first',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: readScopeOfPathType },
      group: 'fhir',
      params: z.object({ type: TypeParam }),
      query: z.object({ _count: z.coerce.number().int().min(1).max(1000).optional(), _since: z.iso.datetime({ offset: true }).optional() }).loose(),
      responses: { 200: ok('history Bundle', BundleSchema) },
      handler: async ({ ctx, params, query, repo }) => {
        const shape = historyPresentation(ctx);
        return fhirResult(presentBundle(await repo.history(params.type, undefined, { count: query._count, since: query._since }), shape));
      },
    }),
    // After _history: `Patient/_history` is the type's history, not the Patient with id `_history`.
    ...perType,
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/{type}`,
      operationId: 'fhirSearch',
      summary: 'Search any resource type',
      description: 'Same search as the per-type operations, for every R4 resource type. CodeSystem, ValueSet and ConceptMap with terminology:read: the loaded terminology (url, version, name, title, status, _id; docs/fhir.md "Terminology").',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: readOrTerminologyScopes },
      group: 'fhir',
      params: z.object({ type: TypeParam }),
      responses: { 200: ok('searchset Bundle', BundleSchema) },
      handler: search(typeFromPath),
    }),
    defineRoute({
      method: 'post',
      path: `${FHIR_BASE}/{type}/_search`,
      operationId: 'fhirSearchPost',
      summary: 'Search with parameters in a form-encoded body',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: readOrTerminologyScopes },
      group: 'fhir',
      params: z.object({ type: TypeParam }),
      rawBody: { schema: { type: 'object', additionalProperties: { type: 'string' } }, contentTypes: ['application/x-www-form-urlencoded'], required: false },
      responses: { 200: ok('searchset Bundle', BundleSchema) },
      handler: async ({ ctx, params, repo, principal }) => {
        checkFormat(ctx);
        const form = (await readBody(ctx, services.config.maxBodyBytes, true)) ?? {};
        if (typeof form !== 'object' || Array.isArray(form) || ctx.get('content-type').includes('json'))
          throw new ApiError(415, ErrorCode.unsupportedMediaType, 'POST _search takes application/x-www-form-urlencoded parameters');
        const merged: QueryParams = { ...queryOf(ctx) };
        for (const [k, v] of Object.entries(form as Record<string, string>)) merged[k] = merged[k] === undefined ? v : ([] as string[]).concat(merged[k]!, v);
        const self = new URLSearchParams();
        for (const [k, v] of Object.entries(merged)) for (const one of ([] as string[]).concat(v ?? [])) self.append(k, one);
        if (readsLoadedTerminology(params.type, principal)) return fhirResult(await services.terminology.search(params.type, merged, base()));
        return fhirResult(await repo.searchJson(params.type, merged, { selfQuery: self.toString() }));
      },
    }),
    defineRoute({
      method: 'post',
      path: `${FHIR_BASE}/{type}`,
      operationId: 'fhirCreate',
      summary: 'Create a resource (server-assigned id); If-None-Exist makes it conditional',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: FHIR_WRITE_SCOPE },
      group: 'fhir',
      params: z.object({ type: TypeParam }),
      rawBody: { schema: ResourceSchema, contentTypes: [FHIR_JSON, 'application/json'] },
      responses: { 201: ok('Created'), 200: ok('Conditional create: an existing match'), 412: ok('Conditional create matched several', {}) },
      handler: async ({ ctx, params, repo }) => {
        checkType(params.type);
        const resource = await resourceBody(ctx, services);
        if (resource.resourceType !== params.type) throw badRequest(`Body is a ${resource.resourceType}, url says ${params.type}`);
        const condition = ctx.get('if-none-exist');
        const outcome = condition ? await repo.conditionalCreate(resource, condition) : { resource: await repo.create(resource), created: true };
        return written(ctx, outcome.resource, outcome.created);
      },
    }),
    defineRoute({
      method: 'put',
      path: `${FHIR_BASE}/{type}`,
      operationId: 'fhirConditionalUpdate',
      summary: 'Conditional update: PUT Type?criteria updates the one match, or creates when there is none',
      description: 'The criteria are FHIR search parameters in the query string. Several matches: 412. Concurrent conditional writes with the same criteria are serialised: exactly one creates.',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: FHIR_WRITE_SCOPE },
      group: 'fhir',
      params: z.object({ type: TypeParam }),
      rawBody: { schema: ResourceSchema, contentTypes: [FHIR_JSON, 'application/json'] },
      responses: { 200: ok('Updated'), 201: ok('Created'), 412: ok('The criteria matched several resources', {}) },
      handler: async ({ ctx, params, repo }) => {
        checkType(params.type);
        const resource = await resourceBody(ctx, services);
        if (resource.resourceType !== params.type) throw badRequest(`Body is a ${resource.resourceType}, url says ${params.type}`);
        if (!ctx.querystring) throw badRequest('A conditional update needs search criteria in the query string (PUT Type?criteria), or use PUT Type/id');
        const outcome = await repo.conditionalUpdate(resource, ctx.querystring);
        return written(ctx, outcome.resource, outcome.created);
      },
    }),
    defineRoute({
      method: 'patch',
      path: `${FHIR_BASE}/{type}`,
      operationId: 'fhirConditionalPatch',
      summary: 'Conditional patch: PATCH Type?criteria patches the one match (none: 404, several: 412)',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: FHIR_WRITE_SCOPE },
      group: 'fhir',
      params: z.object({ type: TypeParam }),
      rawBody: { schema: PatchSchema, contentTypes: [JSON_PATCH, FHIR_JSON, 'application/json'] },
      responses: { 200: ok('Patched'), 404: ok('No match', {}), 412: ok('The criteria matched several resources, or version conflict', {}), 422: ok('The patch cannot be applied, or its result is invalid', {}) },
      handler: async ({ ctx, params, repo }) => {
        checkType(params.type);
        if (!ctx.querystring) throw badRequest('A conditional patch needs search criteria in the query string (PATCH Type?criteria), or use PATCH Type/id');
        const patch = await patchBody(ctx, services);
        return written(ctx, await repo.conditionalPatch(params.type, ctx.querystring, patch, { ifMatch: ctx.get('if-match') || undefined }), false);
      },
    }),
    defineRoute({
      method: 'post',
      path: `${FHIR_BASE}/{type}/$validate`,
      operationId: 'fhirValidate',
      summary: '$validate a new resource (mode create): the store\'s validator, nothing stored',
      description: 'Body: the resource, or a Parameters with `resource` (and `mode`, `profile`: a profile is not checked, and says so). Answers 200 with an OperationOutcome: the issues, or one information "No issues detected". Needs the type\'s read scope or fhir:write.',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: (ctx) => [...readScopeOfPathType(ctx), FHIR_WRITE_SCOPE] },
      group: 'fhir',
      params: z.object({ type: TypeParam }),
      query: z.object({ mode: z.string().optional().describe('create, update or delete') }).loose(),
      rawBody: { schema: ResourceSchema, contentTypes: [FHIR_JSON, 'application/json'] },
      responses: { 200: ok('OperationOutcome') },
      handler: async ({ ctx, params, query, repo }) => {
        const input = validateInput(params.type, await readBody(ctx, services.config.maxBodyBytes), query.mode, undefined);
        return fhirResult(await validateOperation(repo, params.type, undefined, input, (r) => services.terminology.checkBindings(r)));
      },
    }),
    defineRoute({
      method: 'post',
      path: `${FHIR_BASE}/{type}/{id}/$validate`,
      operationId: 'fhirValidateInstance',
      summary: '$validate against a stored resource: mode update (the default) or delete; nothing stored',
      description: 'The stored resource is read as a read reads it (404 when the caller may not see it, 410 when deleted); one the caller may not change is reported as an error issue. Needs the type\'s read scope.',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: readScopeOfPathType },
      group: 'fhir',
      params: z.object({ type: TypeParam, id: IdParam }),
      query: z.object({ mode: z.string().optional().describe('create, update or delete') }).loose(),
      rawBody: { schema: ResourceSchema, contentTypes: [FHIR_JSON, 'application/json'], required: false },
      responses: { 200: ok('OperationOutcome'), 404: ok('Not found', {}), 410: ok('Deleted', {}) },
      handler: async ({ ctx, params, query, repo }) => {
        const input = validateInput(params.type, await readBody(ctx, services.config.maxBodyBytes), query.mode, params.id);
        return fhirResult(await validateOperation(repo, params.type, params.id, input, (r) => services.terminology.checkBindings(r)));
      },
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/Patient/{id}/$everything`,
      operationId: 'patientEverything',
      summary: "Everything in a patient's record: the patient, their compartment and what it references",
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: ['patients:read', 'fhir:read'] },
      group: 'fhir',
      params: z.object({ id: IdParam }),
      query: z.object({
        _count: z.coerce.number().int().min(1).max(1000).optional(),
        _since: z.iso.datetime({ offset: true }).optional(),
        _cursor: z.string().optional(),
      }),
      responses: { 200: ok('searchset Bundle', BundleSchema) },
      handler: async ({ ctx, params, query, repo }) => {
        checkFormat(ctx);
        return fhirResult(await repo.everything(params.id, { count: query._count, since: query._since, cursor: query._cursor }));
      },
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/{type}/{id}`,
      operationId: 'fhirRead',
      summary: 'Read the current version',
      description: 'CodeSystem, ValueSet and ConceptMap with terminology:read: the loaded resource (a code system of more than 1000 concepts without them); docs/fhir.md "Terminology".',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: readOrTerminologyScopes },
      group: 'fhir',
      params: z.object({ type: TypeParam, id: IdParam }),
      responses: { 200: ok('The resource'), 404: ok('Not found', {}), 410: ok('Deleted', {}) },
      handler: read(typeFromPath),
    }),
    defineRoute({
      method: 'put',
      path: `${FHIR_BASE}/{type}/{id}`,
      operationId: 'fhirUpdate',
      summary: 'Update (or create with this id); If-Match: W/"n" makes it a version-checked update',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: FHIR_WRITE_SCOPE },
      group: 'fhir',
      params: z.object({ type: TypeParam, id: IdParam }),
      rawBody: { schema: ResourceSchema, contentTypes: [FHIR_JSON, 'application/json'] },
      responses: { 200: ok('Updated'), 201: ok('Created'), 412: ok('Version conflict', {}) },
      handler: async ({ ctx, params, repo }) => {
        checkType(params.type);
        const resource = await resourceBody(ctx, services);
        if (resource.resourceType !== params.type) throw badRequest(`Body is a ${resource.resourceType}, url says ${params.type}`);
        if (resource.id !== params.id) throw badRequest(`Body id "${resource.id ?? ''}" must equal the url id "${params.id}"`);
        const outcome = await repo.update(resource, { ifMatch: ctx.get('if-match') || undefined });
        return written(ctx, outcome.resource, outcome.created);
      },
    }),
    defineRoute({
      method: 'patch',
      path: `${FHIR_BASE}/{type}/{id}`,
      operationId: 'fhirPatch',
      summary: 'Patch: a JSON Patch (application/json-patch+json) or a FHIRPath Patch (Parameters); If-Match: W/"n" makes it version-checked',
      description: `The result is validated and written as an update (owner only). Malformed patch: 400; a failing test, a path that is not there or an invalid result: 422, nothing stored; resourceType, id and meta are the server's. At most ${MAX_PATCH_OPERATIONS} operations.`,
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: FHIR_WRITE_SCOPE },
      group: 'fhir',
      params: z.object({ type: TypeParam, id: IdParam }),
      rawBody: { schema: PatchSchema, contentTypes: [JSON_PATCH, FHIR_JSON, 'application/json'] },
      responses: { 200: ok('Patched'), 404: ok('Not found', {}), 412: ok('Version conflict', {}), 422: ok('The patch cannot be applied, or its result is invalid', {}) },
      handler: async ({ ctx, params, repo }) => {
        checkType(params.type);
        const patch = await patchBody(ctx, services);
        return written(ctx, await repo.patch(params.type, params.id, patch, { ifMatch: ctx.get('if-match') || undefined }), false);
      },
    }),
    defineRoute({
      method: 'delete',
      path: `${FHIR_BASE}/{type}/{id}`,
      operationId: 'fhirDelete',
      summary: 'Delete (history is kept; a read then answers 410)',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: FHIR_WRITE_SCOPE },
      group: 'fhir',
      params: z.object({ type: TypeParam, id: IdParam }),
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ ctx, params, repo }) => {
        await repo.delete(params.type, params.id, { ifMatch: ctx.get('if-match') || undefined });
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'delete',
      path: `${FHIR_BASE}/{type}`,
      operationId: 'fhirConditionalDelete',
      summary: 'Conditional delete: DELETE Type?criteria deletes the one match (none: nothing deleted, 204; several: 412)',
      description: 'The criteria are FHIR search parameters in the query string, evaluated over what the caller may read; at least one must select (`_count`, `_sort` and the like alone are a 400). The match is deleted as DELETE Type/id deletes it (If-Match honoured). Concurrent conditional deletes with the same criteria delete once.',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: FHIR_WRITE_SCOPE },
      group: 'fhir',
      params: z.object({ type: TypeParam }),
      responses: { 204: { description: 'Deleted, or nothing matched' }, 412: ok('The criteria matched several resources, or version conflict', {}) },
      handler: async ({ ctx, params, repo }) => {
        checkType(params.type);
        if (!ctx.querystring) throw badRequest('A conditional delete needs search criteria in the query string (DELETE Type?criteria), or use DELETE Type/id');
        await repo.conditionalDelete(params.type, ctx.querystring, { ifMatch: ctx.get('if-match') || undefined });
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/{type}/{id}/_history`,
      operationId: 'fhirInstanceHistory',
      summary: 'Every version of one resource, newest first',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: readScopeOfPathType },
      group: 'fhir',
      params: z.object({ type: TypeParam, id: IdParam }),
      query: z.object({ _count: z.coerce.number().int().min(1).max(1000).optional(), _since: z.iso.datetime({ offset: true }).optional() }).loose(),
      responses: { 200: ok('history Bundle', BundleSchema) },
      handler: async ({ ctx, params, query, repo }) => {
        const shape = historyPresentation(ctx);
        return fhirResult(presentBundle(await repo.history(params.type, params.id, { count: query._count, since: query._since }), shape));
      },
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/{type}/{id}/_history/{vid}`,
      operationId: 'fhirVread',
      summary: 'Read one version',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: readScopeOfPathType },
      group: 'fhir',
      params: z.object({ type: TypeParam, id: IdParam, vid: z.string().describe('Version id') }),
      responses: { 200: ok('That version'), 404: ok('Not found', {}), 410: ok('That version is a deletion', {}) },
      handler: async ({ ctx, params, repo }) => {
        const shape = presentation(ctx);
        const resource = await repo.vread(params.type, params.id, params.vid);
        return fhirResult(present(resource, shape), 200, versionHeaders(resource));
      },
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/Patient/{id}/{type}`,
      operationId: 'fhirPatientCompartmentSearch',
      summary: "Compartment search: the type's resources in the patient's compartment (R4 CompartmentDefinition Patient)",
      description: 'Any search parameter of the type may narrow it, as on /{type}. A type outside the Patient compartment finds nothing but the Patient itself.',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: readScopeOfPathType },
      group: 'fhir',
      params: z.object({ id: IdParam, type: TypeParam }),
      responses: { 200: ok('searchset Bundle', BundleSchema) },
      handler: async ({ ctx, params, repo }) => {
        checkFormat(ctx);
        checkType(params.type);
        const linkBase = `${base()}/Patient/${params.id}/${params.type}`;
        return fhirResult(await repo.searchJson(params.type, queryOf(ctx), { selfQuery: ctx.querystring, linkBase, compartmentPatient: params.id }));
      },
    }),
  ];
}
