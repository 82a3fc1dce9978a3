import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { ApiError, ErrorCode, badRequest } from './errors';
import { decodeUtf8, formFields, parseJsonText } from '../core/body-text';

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
 * Malformed JSON, invalid UTF-8 and nesting deeper than MAX_BODY_DEPTH are 400s; an unsupported media type is a 415.
 */
export async function readBody(ctx: Context, limit: number, allowForm = false): Promise<unknown> {
  const raw = await readRawBody(ctx, limit);
  if (raw.length === 0) return undefined;
  const type = mediaType(ctx);
  if (allowForm && type === FORM_TYPE) return parseForm(decodeUtf8(raw));
  if (type !== '' && !JSON_TYPES.includes(type)) {
    throw new ApiError(
      415,
      ErrorCode.unsupportedMediaType,
      `Content-Type ${type} is not supported; send ${allowForm ? `application/json or ${FORM_TYPE}` : 'application/json'}`,
    );
  }
  return parseJsonText(decodeUtf8(raw));
}

function parseForm(text: string): Record<string, string> {
  return Object.fromEntries(formFields(text));
}
