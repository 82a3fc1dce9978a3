import { randomUUID } from 'node:crypto';
import type { Bundle, BundleEntry, BundleEntryResponse, OperationOutcome, Resource } from '@medplum/fhirtypes';
import { ApiError, ErrorCode, badRequest, clipped, operationOutcome } from '../core/errors';
import { CONDITIONAL_REFERENCE } from './compartment';
import { patchOfEntry, type Patch } from './patch';
import type { FhirRepository } from './repository';
import { checkType, ID_PATTERN } from './store/types';
import type { WriteMethod, WriteResult } from './store/writes';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
const METHODS = new Set<Method>(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);
export const MAX_BUNDLE_ENTRIES = 10_000;

interface ParsedEntry {
  index: number;
  method: Method;
  resourceType: string;
  id?: string;
  versionId?: string;
  /** Search query of a conditional update or a GET search. */
  query?: URLSearchParams;
  resource?: Resource;
  /** A PATCH entry's patch (its Binary or Parameters resource). */
  patch?: Patch;
  ifMatch?: string;
  ifNoneExist?: string;
  fullUrl?: string;
}

function parseEntry(entry: BundleEntry, index: number, base: string): ParsedEntry {
  const where = `entry[${index}]`;
  const request = entry?.request;
  if (!request || typeof request.url !== 'string' || !request.method) throw badRequest(`${where}: request.method and request.url are required`);
  const method = request.method as Method;
  if (!METHODS.has(method)) throw badRequest(`${where}: method ${request.method} is not supported (GET, POST, PUT, PATCH, DELETE)`);
  let url = request.url;
  if (url.startsWith(base + '/')) url = url.slice(base.length + 1);
  const [path, search] = url.split('?', 2);
  const parts = path.replace(/^\//, '').split('/');
  const resourceType = parts[0];
  try {
    checkType(resourceType);
  } catch {
    throw badRequest(`${where}: unknown resource type in url "${request.url}"`);
  }
  const parsed: ParsedEntry = {
    index,
    method,
    resourceType,
    id: parts[1],
    versionId: parts[2] === '_history' ? parts[3] : undefined,
    query: search !== undefined ? new URLSearchParams(search) : undefined,
    resource: entry.resource,
    ifMatch: request.ifMatch,
    ifNoneExist: request.ifNoneExist,
    fullUrl: entry.fullUrl,
  };
  if (parsed.id !== undefined && !ID_PATTERN.test(parsed.id)) throw badRequest(`${where}: invalid id in url "${request.url}"`);
  if (method === 'POST' || method === 'PUT') {
    const r = entry.resource;
    if (!r || typeof r !== 'object') throw badRequest(`${where}: ${method} needs a resource`);
    if (r.resourceType !== resourceType) throw badRequest(`${where}: resource type ${r.resourceType} does not match url ${request.url}`);
    if (method === 'PUT' && parsed.id === undefined && !parsed.query) throw badRequest(`${where}: PUT needs Type/id or Type?search`);
    if (method === 'PUT' && parsed.id !== undefined && r.id !== undefined && r.id !== parsed.id)
      throw badRequest(`${where}: resource id ${r.id} does not match url ${request.url}`);
  }
  if (method === 'PATCH') {
    if (parsed.id === undefined && !parsed.query) throw badRequest(`${where}: PATCH needs Type/id or Type?search`);
    try {
      parsed.patch = patchOfEntry(entry.resource);
    } catch (err) {
      throw errorAt(index, err);
    }
  }
  if (method === 'DELETE' && parsed.id === undefined) throw badRequest(`${where}: conditional delete is not supported`);
  return parsed;
}

/** The conditional references (`Type?search`) anywhere in `value`, contained resources too, each once. */
function conditionalReferences(value: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const v of value) conditionalReferences(v, out);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === 'reference' && typeof v === 'string' && CONDITIONAL_REFERENCE.test(v)) out.add(v);
      else conditionalReferences(v, out);
    }
  }
  return out;
}

/** Replaces references to bundle-local fullUrls (urn:uuid:…, or ours) and resolved conditional references with the ids they were given. */
function rewriteReferences(value: unknown, ids: Map<string, string>): unknown {
  if (Array.isArray(value)) return value.map((v) => rewriteReferences(v, ids));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = k === 'reference' && typeof v === 'string' && ids.has(v) ? ids.get(v) : rewriteReferences(v, ids);
    }
    return out;
  }
  return value;
}

function responseOf(status: string, resource?: Resource, base?: string): BundleEntryResponse {
  return {
    status,
    ...(resource?.meta?.versionId
      ? {
          location: `${base}/${resource.resourceType}/${resource.id}/_history/${resource.meta.versionId}`,
          etag: `W/"${resource.meta.versionId}"`,
          lastModified: resource.meta.lastUpdated,
        }
      : {}),
  };
}

function errorAt(index: number, err: unknown): ApiError {
  if (err instanceof ApiError) return new ApiError(err.status, err.code, `entry[${index}]: ${err.message}`, err.options);
  throw err;
}

export interface BundleOptions {
  /** Prefer: return=representation puts each written resource in its response entry. */
  returnResources: boolean;
  /**
   * Check the references of the written resources later, all at once (`pont import`: files may refer to
   * each other in any order), and resolve no conditional reference (stored as written). Everything else checks them
   * in the write's transaction.
   */
  deferReferenceCheck?: boolean;
}

/** Processes a `transaction` (all or nothing) or `batch` (each entry alone) Bundle through the repository. */
export async function processBundle(repo: FhirRepository, input: unknown, options: BundleOptions): Promise<Bundle> {
  const bundle = input as Bundle;
  if (!bundle || typeof bundle !== 'object' || bundle.resourceType !== 'Bundle') throw badRequest('Body must be a Bundle');
  if (bundle.type !== 'transaction' && bundle.type !== 'batch') throw badRequest('Bundle.type must be transaction or batch');
  const entries = bundle.entry ?? [];
  if (!Array.isArray(entries)) throw badRequest('Bundle.entry must be an array');
  if (entries.length > MAX_BUNDLE_ENTRIES) throw new ApiError(413, ErrorCode.payloadTooLarge, `A Bundle may hold at most ${MAX_BUNDLE_ENTRIES} entries`);
  return bundle.type === 'transaction' ? processTransaction(repo, entries, options) : processBatch(repo, entries, options);
}

async function processTransaction(repo: FhirRepository, entries: BundleEntry[], options: BundleOptions): Promise<Bundle> {
  const base = repo.baseUrl;
  const parsed = entries.map((e, i) => parseEntry(e, i, base));
  const seen = new Set<string>();
  for (const p of parsed) {
    if (p.id === undefined || p.method === 'GET') continue;
    const key = `${p.resourceType}/${p.id}`;
    if (seen.has(key)) throw badRequest(`entry[${p.index}]: ${key} appears twice in the transaction`);
    seen.add(key);
  }
  const responses: BundleEntry[] = new Array(parsed.length);
  await repo.transaction(async () => {
    // 1. Resolve ids: new ids for creates, matches for conditional creates/updates (state before any write).
    const ids = new Map<string, string>();
    const skip = new Set<number>();
    for (const p of parsed) {
      try {
        if (p.method === 'POST') {
          const existing = p.ifNoneExist ? await repo.matchOne(p.resourceType, p.ifNoneExist, 'ifNoneExist') : undefined;
          if (existing) {
            skip.add(p.index);
            responses[p.index] = { response: responseOf('200 OK', existing, base), ...(options.returnResources ? { resource: existing } : {}) };
          }
          p.id = existing?.id ?? randomUUID();
        } else if (p.method === 'PATCH') {
          // The patched resource is computed here, from the state before any write (each resource appears once).
          if (p.id === undefined) p.id = (await repo.matchOne(p.resourceType, p.query!.toString(), 'conditional patch'))?.id;
          if (p.id === undefined) throw new ApiError(404, ErrorCode.notFound, `conditional patch: no ${p.resourceType} the caller may see matches the criteria`);
          const item = await repo.patched(p.resourceType, p.id, p.patch!, p.ifMatch);
          p.resource = item.resource;
          p.ifMatch = item.ifMatch;
        } else if (p.method === 'PUT' && p.id === undefined && p.query) {
          const match = await repo.matchOne(p.resourceType, p.query.toString(), 'conditional update');
          if (match && p.resource?.id !== undefined && p.resource.id !== match.id)
            throw badRequest(`the resource id ${p.resource.id} is not the id of the resource the criteria match (${match.id})`);
          p.id = match?.id ?? p.resource?.id ?? randomUUID();
        }
      } catch (err) {
        throw errorAt(p.index, err);
      }
      if (p.fullUrl && p.id && p.method !== 'GET' && p.method !== 'DELETE') ids.set(p.fullUrl, `${p.resourceType}/${p.id}`);
    }
    // 1b. Conditional references (`Patient?identifier=…`): each the one resource its search matches before any write,
    // as the caller may see it (FHIR http.html "Transactions"); none, or several (412), fail the transaction. An import
    // (its references checked once it is done: files in any order) resolves none, as a later file may load the match:
    // they are stored as written, as before.
    for (const p of options.deferReferenceCheck ? [] : parsed) {
      if (p.method === 'GET' || p.method === 'DELETE' || skip.has(p.index)) continue;
      for (const reference of conditionalReferences(p.resource)) {
        if (ids.has(reference)) continue;
        try {
          const [, type, criteria] = CONDITIONAL_REFERENCE.exec(reference)!;
          const match = await repo.matchOne(type!, criteria!, `the conditional reference ${clipped(reference)}`);
          if (!match) throw badRequest(`the conditional reference ${clipped(reference)} matches no ${type} the caller may see: it must match exactly one`);
          ids.set(reference, `${type}/${match.id}`);
        } catch (err) {
          throw errorAt(p.index, err);
        }
      }
    }
    // 2. Every write in one batch, references rewritten; then reads, which see the writes.
    const writes = parsed.filter((p) => p.method !== 'GET' && !skip.has(p.index));
    const results = await repo.writeItems(
      writes.map((p) => ({
        resource: p.method === 'DELETE' ? ({ resourceType: p.resourceType, id: p.id } as Resource) : { ...(rewriteReferences(p.resource, ids) as Resource), id: p.id },
        method: writeMethod(p.method),
        ifMatch: p.ifMatch,
        label: `entry[${p.index}]`,
      })),
      'transaction',
      { deferReferenceCheck: options.deferReferenceCheck },
    );
    writes.forEach((p, i) => (responses[p.index] = writeResponse(p.method, results[i]!, base, options)));
    for (const p of parsed) if (p.method === 'GET') responses[p.index] = await readEntry(repo, p);
  });
  return { resourceType: 'Bundle', type: 'transaction-response', entry: responses };
}

/** The store's write of an entry: a PATCH is an update of the patched resource. */
function writeMethod(method: Method): WriteMethod {
  return method === 'PATCH' ? 'PUT' : (method as WriteMethod);
}

function writeResponse(method: Method, result: WriteResult, base: string, options: BundleOptions): BundleEntry {
  if (method === 'DELETE') return { response: { status: '204 No Content' } };
  return {
    response: responseOf(result.created ? '201 Created' : '200 OK', result.resource, base),
    ...(options.returnResources ? { resource: result.resource } : {}),
  };
}

async function readEntry(repo: FhirRepository, p: ParsedEntry): Promise<BundleEntry> {
  try {
    if (p.id !== undefined) {
      const resource = p.versionId ? await repo.vread(p.resourceType, p.id, p.versionId) : await repo.read(p.resourceType, p.id);
      return { resource, response: responseOf('200 OK', resource, repo.baseUrl) };
    }
    const result = await repo.search(p.resourceType, Object.fromEntries(p.query ?? []));
    return { resource: result, response: { status: '200 OK' } };
  } catch (err) {
    return failed(err);
  }
}

function failed(err: unknown): BundleEntry {
  if (!(err instanceof ApiError)) throw err;
  const outcome: OperationOutcome = operationOutcome(err);
  return { response: { status: String(err.status), outcome } };
}

async function processBatch(repo: FhirRepository, entries: BundleEntry[], options: BundleOptions): Promise<Bundle> {
  const out: BundleEntry[] = [];
  const base = repo.baseUrl;
  for (let i = 0; i < entries.length; i++) {
    try {
      const p = parseEntry(entries[i]!, i, base);
      if (p.method === 'GET') {
        out.push(await readEntry(repo, p));
        continue;
      }
      if ((p.method === 'PUT' || p.method === 'PATCH') && p.id === undefined) throw badRequest(`conditional ${p.method === 'PUT' ? 'update' : 'patch'} is supported in transactions only`);
      out.push(
        await repo.transaction(async () => {
          if (p.method === 'POST') {
            const existing = p.ifNoneExist ? await repo.matchOne(p.resourceType, p.ifNoneExist, 'ifNoneExist') : undefined;
            if (existing) return { response: responseOf('200 OK', existing, base), ...(options.returnResources ? { resource: existing } : {}) };
            p.id = randomUUID();
          }
          if (p.method === 'PATCH') ({ resource: p.resource, ifMatch: p.ifMatch } = await repo.patched(p.resourceType, p.id!, p.patch!, p.ifMatch));
          const resource = p.method === 'DELETE' ? ({ resourceType: p.resourceType, id: p.id } as Resource) : { ...p.resource!, id: p.id };
          const [result] = await repo.writeItems([{ resource, method: writeMethod(p.method), ifMatch: p.ifMatch }], 'batch', {
            deferReferenceCheck: options.deferReferenceCheck,
          });
          return writeResponse(p.method, result!, base, options);
        }),
      );
    } catch (err) {
      out.push(failed(err));
    }
  }
  return { resourceType: 'Bundle', type: 'batch-response', entry: out };
}
