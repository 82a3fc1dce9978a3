import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import type { Context } from 'koa';
import type { HandlerResult } from './result';

/**
 * A JSON document answered to anyone as it is (the OpenAPI document, the CapabilityStatement): its text, its gzip
 * and its ETag, made once per version of what it is built from. Made per request, each cost ~10 ms of CPU
 * (serialising half a megabyte, compressing it) on public routes with no rate limit: an anonymous caller could keep
 * a core busy with 100 requests a second.
 */
export interface PreparedDocument {
  text: string;
  gzip: Buffer;
  etag: string;
}

export function prepareDocument(document: unknown): PreparedDocument {
  const text = JSON.stringify(document);
  return { text, gzip: gzipSync(text), etag: `"${createHash('sha256').update(text).digest('base64url').slice(0, 27)}"` };
}

/**
 * The answer: 304 to an If-None-Match that holds its ETag (or *); else the gzip to a caller that takes it, the text to
 * another (never compressed again per request: the compression middleware is told to leave it).
 */
export function preparedAnswer(ctx: Context, document: PreparedDocument, contentType: string, headers: Record<string, string> = {}): HandlerResult {
  const all = { ...headers, ETag: document.etag, Vary: 'Accept-Encoding' };
  // If-None-Match compares weakly (RFC 9110 13.1.2): W/"x" matches "x", and * any.
  if (ctx.get('if-none-match').split(',').some((tag) => ['*', document.etag].includes(tag.trim().replace(/^W\//, '')))) return { status: 304, headers: all };
  ctx.compress = false;
  return ctx.acceptsEncodings('gzip', 'identity') === 'gzip'
    ? { body: document.gzip, headers: { ...all, 'Content-Encoding': 'gzip' }, contentType }
    : { body: document.text, headers: all, contentType };
}
