import type { Context } from 'koa';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import type { Queryable } from '../db/database';
import type { Principal } from '../auth/principal';
import { auditFhirAccess } from './audit';
import { z } from 'zod';
import { FHIR_WRITE_SCOPE, fhirReadScopes } from '../auth/scopes';
import { readBody } from '../http/body';
import { ApiError, ErrorCode, badRequest } from '../http/errors';
import { defineRoute, type HandlerResult, type RouteSpec } from '../http/routes';
import type { Services } from '../services';
import { processBundle } from './bundle';
import { capabilityStatement } from './capability';
import { indexedParams } from './indexer';
import { present } from './present';
import type { QueryParams } from './search/parse';
import { checkType } from './store';

export const FHIR_BASE = '/api/fhir/R4';
const FHIR_JSON = 'application/fhir+json';

/** Types given their own documented read and search operations (the rest share `/{type}`). */
const DOCUMENTED_TYPES = [
  'AllergyIntolerance', 'AuditEvent', 'Condition', 'Consent', 'Coverage', 'DiagnosticReport', 'DocumentReference',
  'Encounter', 'MedicationRequest', 'Observation', 'Organization', 'Patient', 'Practitioner',
];

const ResourceSchema = { type: 'object', required: ['resourceType'], properties: { resourceType: { type: 'string' }, id: { type: 'string' } } };
const BundleSchema = { type: 'object', required: ['resourceType', 'type'], properties: { resourceType: { const: 'Bundle' }, type: { type: 'string' }, total: { type: 'integer' }, link: { type: 'array' }, entry: { type: 'array' } } };
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

/** JSON only: `_format` or an Accept header that excludes JSON gets 406. */
function checkFormat(ctx: Context): void {
  const format = ctx.query._format;
  if (typeof format === 'string' && !/json/i.test(format)) throw new ApiError(406, ErrorCode.notAcceptable, 'Only JSON is supported');
  const accept = ctx.get('accept');
  if (accept && !ctx.accepts(FHIR_JSON, 'application/json')) throw new ApiError(406, ErrorCode.notAcceptable, `Cannot produce ${accept}; this server speaks ${FHIR_JSON}`);
}

async function resourceBody(ctx: Context, services: Services): Promise<Resource> {
  const body = await readBody(ctx, services.config.maxBodyBytes);
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('Body must be a FHIR resource (a JSON object)');
  return body as Resource;
}

/** The audit trail is written by Pont alone: no client may create, change or delete an AuditEvent. */
function refuseAuditWrite(resourceType: string | undefined): void {
  if (resourceType === 'AuditEvent') throw new ApiError(403, ErrorCode.forbidden, 'AuditEvents are written by Pont only');
}

/** The resource types the caller's scopes let it read. */
function readableBy(ctx: Context): (resourceType: string) => boolean {
  const principal = ctx.state.principal as Principal | undefined;
  const scopes = new Set(principal?.kind === 'client' ? principal.scopes : []);
  return (type) => fhirReadScopes(type).some((s) => scopes.has(s));
}

function queryOf(ctx: Context): QueryParams {
  return ctx.query as QueryParams;
}

const typeFromPath = (ctx: Context) => String(ctx.params.type);
const readScopeOfPathType = (ctx: Context) => fhirReadScopes(typeFromPath(ctx));

export function fhirRoutes(services: Services): RouteSpec[] {
  const { store } = services;
  const base = () => `${services.config.publicUrl}${FHIR_BASE}`;
  const selfQuery = (ctx: Context) => ctx.querystring;

  const audited = async (ctx: Context, operation: string, bundle: Bundle) => {
    await auditFhirAccess(store, ctx, operation, 'R', (bundle.entry ?? []).flatMap((e) => (e.resource ? [e.resource] : [])));
    return fhirResult(bundle);
  };
  const search = (type: (ctx: Context) => string) => async ({ ctx }: { ctx: Context }) => {
    checkFormat(ctx);
    return audited(ctx, 'search', await store.search(type(ctx), queryOf(ctx), { selfQuery: selfQuery(ctx), canRead: readableBy(ctx) }));
  };
  /** A write and its AuditEvent in one transaction. */
  const auditedWrite = <T>(ctx: Context, operation: string, action: 'C' | 'U' | 'D', write: (tx: Queryable) => Promise<{ result: T; resources: Resource[] }>) =>
    store.db.transaction(async (tx) => {
      const { result, resources } = await write(tx);
      await auditFhirAccess(store, ctx, operation, action, resources, tx);
      return result;
    });
  const read = (type: (ctx: Context) => string) => async ({ ctx }: { ctx: Context }) => {
    checkFormat(ctx);
    const resource = await store.read(type(ctx), String(ctx.params.id));
    await auditFhirAccess(store, ctx, 'read', 'R', [resource]);
    const shaped = present(resource, { elements: typeof ctx.query._elements === 'string' ? ctx.query._elements.split(',') : undefined, summary: typeof ctx.query._summary === 'string' ? ctx.query._summary : undefined });
    return fhirResult(shaped, 200, versionHeaders(resource));
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
      operationId: `search${type}`,
      summary: `Search ${type}`,
      description: 'FHIR R4 search. Modifiers, prefixes, chaining, _include/_revinclude, _sort, _count, _total, _summary, _elements: see the README. Unknown parameters give 400.',
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
      operationId: `read${type}`,
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
      summary: 'CapabilityStatement: what this FHIR server supports',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'public' },
      responses: { 200: ok('CapabilityStatement') },
      handler: async ({ ctx }) => {
        checkFormat(ctx);
        return fhirResult(capabilityStatement(services.config.publicUrl));
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
      handler: async ({ ctx }) => {
        const body = (await readBody(ctx, services.config.maxBodyBytes)) as Bundle | undefined;
        for (const entry of Array.isArray(body?.entry) ? body.entry : []) refuseAuditWrite(entry?.request?.method !== 'GET' ? entry?.request?.url?.split(/[/?]/)[0] : undefined);
        const returnResources = /return=representation/.test(ctx.get('prefer'));
        return fhirResult(
          await processBundle(store, body, {
            returnResources,
            audit: (tx, written) => auditFhirAccess(store, ctx, 'transaction', 'U', written, tx),
          }),
        );
      },
    }),
    ...perType,
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
      handler: async ({ ctx, params, query }) => audited(ctx, 'history', await store.history(params.type, undefined, { count: query._count, since: query._since })),
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/{type}`,
      operationId: 'fhirSearch',
      summary: 'Search any resource type',
      description: 'Same search as the per-type operations, for every R4 resource type.',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: readScopeOfPathType },
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
      security: { kind: 'client', scope: readScopeOfPathType },
      group: 'fhir',
      params: z.object({ type: TypeParam }),
      rawBody: { schema: { type: 'object', additionalProperties: { type: 'string' } }, contentTypes: ['application/x-www-form-urlencoded'], required: false },
      responses: { 200: ok('searchset Bundle', BundleSchema) },
      handler: async ({ ctx, params }) => {
        checkFormat(ctx);
        const form = (await readBody(ctx, services.config.maxBodyBytes, true)) ?? {};
        if (typeof form !== 'object' || Array.isArray(form) || ctx.get('content-type').includes('json'))
          throw new ApiError(415, ErrorCode.unsupportedMediaType, 'POST _search takes application/x-www-form-urlencoded parameters');
        const merged: QueryParams = { ...queryOf(ctx) };
        for (const [k, v] of Object.entries(form as Record<string, string>)) merged[k] = merged[k] === undefined ? v : ([] as string[]).concat(merged[k]!, v);
        const self = new URLSearchParams();
        for (const [k, v] of Object.entries(merged)) for (const one of ([] as string[]).concat(v ?? [])) self.append(k, one);
        return audited(ctx, 'search', await store.search(params.type, merged, { selfQuery: self.toString(), canRead: readableBy(ctx) }));
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
      handler: async ({ ctx, params }) => {
        checkType(params.type);
        refuseAuditWrite(params.type);
        const resource = await resourceBody(ctx, services);
        if (resource.resourceType !== params.type) throw badRequest(`Body is a ${resource.resourceType}, url says ${params.type}`);
        const condition = ctx.get('if-none-exist');
        const outcome = await auditedWrite<{ existing?: Resource; created?: Resource }>(ctx, 'create', 'C', async (tx) => {
          if (condition) {
            const matches = await store.searchResources(params.type, Object.fromEntries(new URLSearchParams(condition.replace(/^[^?]*\?/, ''))), { tx });
            if (matches.length > 1) throw new ApiError(412, ErrorCode.preconditionFailed, `If-None-Exist matched ${matches.length} resources`);
            if (matches.length === 1) return { result: { existing: matches[0] }, resources: [] };
          }
          const created = await store.create(resource, { tx });
          return { result: { created }, resources: [created] };
        });
        if (outcome.existing) return fhirResult(outcome.existing, 200, versionHeaders(outcome.existing));
        const created = outcome.created!;
        return fhirResult(created, 201, { ...versionHeaders(created), Location: `${base()}/${created.resourceType}/${created.id}/_history/${created.meta!.versionId}` });
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
      handler: async ({ ctx, params, query }) => {
        checkFormat(ctx);
        return audited(ctx, 'everything', await store.everything(params.id, { count: query._count, since: query._since, cursor: query._cursor }));
      },
    }),
    defineRoute({
      method: 'get',
      path: `${FHIR_BASE}/{type}/{id}`,
      operationId: 'fhirRead',
      summary: 'Read the current version',
      tags: ['FHIR'],
      fhir: true,
      security: { kind: 'client', scope: readScopeOfPathType },
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
      handler: async ({ ctx, params }) => {
        checkType(params.type);
        refuseAuditWrite(params.type);
        const resource = await resourceBody(ctx, services);
        if (resource.resourceType !== params.type) throw badRequest(`Body is a ${resource.resourceType}, url says ${params.type}`);
        if (resource.id !== params.id) throw badRequest(`Body id "${resource.id ?? ''}" must equal the url id "${params.id}"`);
        const ifMatch = ctx.get('if-match') || undefined;
        const { resource: stored, created } = await auditedWrite(ctx, 'update', 'U', async (tx) => {
          const result = await store.updateWithOutcome(resource, { ifMatch, tx });
          return { result, resources: [result.resource] };
        });
        const headers = versionHeaders(stored);
        if (created) headers.Location = `${base()}/${stored.resourceType}/${stored.id}/_history/${stored.meta!.versionId}`;
        return fhirResult(stored, created ? 201 : 200, headers);
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
      handler: async ({ ctx, params }) => {
        checkType(params.type);
        refuseAuditWrite(params.type);
        await auditedWrite(ctx, 'delete', 'D', async (tx) => {
          const before = await store.read(params.type, params.id, { tx }).catch(() => undefined);
          await store.delete(params.type, params.id, { ifMatch: ctx.get('if-match') || undefined, tx });
          return { result: undefined, resources: before ? [before] : [] };
        });
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
      handler: async ({ ctx, params, query }) => audited(ctx, 'history', await store.history(params.type, params.id, { count: query._count, since: query._since })),
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
      handler: async ({ ctx, params }) => {
        const resource = await store.vread(params.type, params.id, params.vid);
        await auditFhirAccess(store, ctx, 'vread', 'R', [resource]);
        return fhirResult(resource, 200, versionHeaders(resource));
      },
    }),
  ];
}
