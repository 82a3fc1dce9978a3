import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { ApiError, ErrorCode, badRequest } from './errors';

const JSON_TYPES = ['application/json', 'application/fhir+json', 'application/json-patch+json'];
const FORM_TYPE = 'application/x-www-form-urlencoded';

export function mediaType(ctx: Context): string {
  return (ctx.get('content-type').split(';')[0] ?? '').trim().toLowerCase();
}

/** Reads the raw body, refusing more than `limit` bytes with 413. */
export async function readRawBody(ctx: Context, limit: number): Promise<Buffer> {
  const declared = Number(ctx.get('content-length'));
  if (declared > limit) throw payloadTooLarge(limit);
  try {
    return await getRawBody(ctx.req, { limit, length: ctx.get('content-length') || undefined });
  } catch (err) {
    const type = (err as { type?: string }).type;
    if (type === 'entity.too.large') throw payloadTooLarge(limit);
    throw badRequest(`Could not read the request body: ${(err as Error).message}`);
  }
}

function payloadTooLarge(limit: number): ApiError {
  return new ApiError(413, ErrorCode.payloadTooLarge, `Request body is larger than the limit of ${limit} bytes`);
}

/**
 * Parses a JSON (or, where `allowForm`, form-encoded) body. Returns undefined for an empty body.
 * Malformed JSON is a 400; an unsupported media type is a 415.
 */
export async function readBody(ctx: Context, limit: number, allowForm = false): Promise<unknown> {
  const raw = await readRawBody(ctx, limit);
  if (raw.length === 0) return undefined;
  const type = mediaType(ctx);
  if (allowForm && type === FORM_TYPE) {
    const form = [...new URLSearchParams(raw.toString('utf8'))];
    // Decoded (%00 becomes NUL): the same rule as for JSON bodies and URLs.
    if (form.some(([k, v]) => k.includes('\u0000') || v.includes('\u0000'))) throw badRequest('NUL characters are not allowed in the body');
    return Object.fromEntries(form);
  }
  if (type !== '' && !JSON_TYPES.includes(type)) {
    throw new ApiError(
      415,
      ErrorCode.unsupportedMediaType,
      `Content-Type ${type} is not supported; send ${allowForm ? `application/json or ${FORM_TYPE}` : 'application/json'}`,
    );
  }
  const text = raw.toString('utf8');
  // PostgreSQL cannot store NUL in text or jsonb; refuse it here rather than fail later.
  if (text.includes('\u0000') || text.includes('\\u0000')) throw badRequest('NUL characters are not allowed in the body');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw badRequest(`Malformed JSON body: ${(err as Error).message}`);
  }
  // An escaped lone surrogate (\ud800) parses, but is no Unicode text and PostgreSQL refuses it.
  if (/\\u[dD][89a-fA-F]/.test(text) && hasLoneSurrogate(value)) throw badRequest('The body has an unpaired UTF-16 surrogate escape');
  return value;
}

function hasLoneSurrogate(value: unknown): boolean {
  if (typeof value === 'string') return !value.isWellFormed();
  if (Array.isArray(value)) return value.some(hasLoneSurrogate);
  if (value && typeof value === 'object') return Object.entries(value).some(([k, v]) => !k.isWellFormed() || hasLoneSurrogate(v));
  return false;
}
