import { createHash } from 'node:crypto';
import type { Context } from 'koa';
import type { Queryable } from '../db/database';
import { ApiError, ErrorCode, badRequest } from './errors';
import type { Logger } from '../log';
import { periodicJob, type BackgroundWorker } from '../jobs';
import type { HandlerResult } from './result';
import { decryptSecret, encryptSecret } from '../webhooks/secrets';

/** 1-255 printable ASCII characters (a UUID is the usual choice). */
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
/** Headers of the first answer that a replay repeats. */
const REPLAYED_HEADERS = ['location', 'etag', 'last-modified'];
/** Where the stored headers keep the answer's media type (HandlerResult.contentType). */
const CONTENT_TYPE = 'content-type';

export interface IdempotencyOptions {
  /** How long a key is remembered (PONT_IDEMPOTENCY_TTL). */
  ttlMs: number;
}

/**
 * Top-level fields of a route's answer that hold a secret (a webhook secret, a pairing code, a client secret):
 * the stored answer keeps them encrypted under `key` (the at-rest key, PONT_WEBHOOK_SECRET_KEY), and a replay
 * decrypts them, so it answers exactly what the first request did. Should the key have changed since, the
 * replay answers without those fields and names them in `Idempotent-Replay-Omitted`.
 */
export interface SecretFields {
  fields: readonly string[];
  key: Buffer;
}

/** What the encrypted field is bound to (authenticated data): it decrypts only in this row, in this field. */
const sealContext = (claim: { clientId: string; key: string }, field: string) => JSON.stringify(['idempotency', claim.clientId, claim.key, field]);

/** The bytes an answer's body is sent as (mountRoutes writes a string as it is). */
const serialize = (body: unknown): string => (typeof body === 'string' ? body : JSON.stringify(body));

/**
 * The body as it is kept: the bytes sent, except that each secret field's value is its encryption (a fresh,
 * random string, so it occurs nowhere else in the text and a replay puts the secret back in its place).
 */
function sealed(body: unknown, claim: { clientId: string; key: string }, secrets: SecretFields | undefined): string {
  if (!secrets || !body || typeof body !== 'object' || Array.isArray(body)) return serialize(body);
  const copy = { ...(body as Record<string, unknown>) };
  for (const field of secrets.fields) {
    if (typeof copy[field] === 'string') copy[field] = encryptSecret(secrets.key, sealContext(claim, field), copy[field]);
  }
  return JSON.stringify(copy);
}

/** The bytes of the first answer, and the secret fields that could not be decrypted (left out: the text is re-serialised). */
function unsealed(text: string, claim: { clientId: string; key: string }, secrets: SecretFields | undefined): { body: string; omitted: string[] } {
  if (!secrets || !text.startsWith('{')) return { body: text, omitted: [] };
  const stored = JSON.parse(text) as Record<string, unknown>;
  let body = text;
  const omitted: string[] = [];
  for (const field of secrets.fields) {
    const value = stored[field];
    if (typeof value !== 'string') continue;
    try {
      const secret = decryptSecret(secrets.key, sealContext(claim, field), value);
      body = body.replace(JSON.stringify(value), () => JSON.stringify(secret));
    } catch {
      omitted.push(field);
    }
  }
  if (!omitted.length) return { body, omitted };
  const partial = JSON.parse(body) as Record<string, unknown>;
  for (const field of omitted) delete partial[field];
  return { body: JSON.stringify(partial), omitted };
}

/**
 * Answers stored before replays were byte for byte (body: the answer as a JSON value, its secret fields
 * encrypted in place): decrypted and serialised again.
 */
function unsealedLegacy(body: unknown, claim: { clientId: string; key: string }, secrets: SecretFields | undefined): { body: string | undefined; omitted: string[] } {
  if (body === null || body === undefined) return { body: undefined, omitted: [] };
  return unsealed(JSON.stringify(body), claim, secrets);
}

interface StoredAnswer {
  request_hash: string;
  status: number;
  /** The body's text (a JSON string); older rows: the body as a JSON value. */
  body: unknown;
  headers: Record<string, string>;
  created_at: Date | string;
}

/** The key of a request, or undefined when it sent none; 400 for one that is not 1-255 printable characters. */
export function idempotencyKeyOf(ctx: Context): string | undefined {
  if (!('idempotency-key' in ctx.headers)) return undefined;
  const key = ctx.get('idempotency-key');
  if (!KEY_PATTERN.test(key)) throw badRequest('Idempotency-Key must be 1 to 255 printable ASCII characters (a UUID, for example)');
  return key;
}

/** The same request: method, path (with query) and body, the body's keys sorted. */
export function requestHash(ctx: Context, body: unknown): string {
  const canonical = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(canonical) : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical((v as Record<string, unknown>)[k])])) : v;
  return createHash('sha256').update(JSON.stringify([ctx.method, ctx.path, ctx.querystring, canonical(body ?? null)])).digest('hex');
}

/**
 * Runs a creating request once per (client, key), architecture §9: the key's row is claimed in the request's
 * transaction (the caller opens it around the handler), so the change, its events, its audit record and the
 * stored answer commit together, or none of them does (a failed request keeps no key). The same key arriving
 * while the first is running waits on its row (PostgreSQL: the insert waits for the other transaction), then
 * replays the stored answer, byte for byte (body, status, media type and the REPLAYED_HEADERS), with `Idempotent-Replayed: true`, or 409 IDEMPOTENCY_CONFLICT when the payload
 * differs. A key older than the TTL is forgotten. The route's `secrets` fields are never stored in clear.
 */
export async function runIdempotent(
  sql: Queryable,
  claim: { clientId: string; key: string; hash: string },
  options: IdempotencyOptions,
  run: () => Promise<HandlerResult | void>,
  secrets?: SecretFields,
): Promise<HandlerResult | void> {
  await sql.query(`DELETE FROM idempotency_keys WHERE client_id = $1 AND key = $2 AND created_at < now() - make_interval(secs => $3)`, [
    claim.clientId,
    claim.key,
    options.ttlMs / 1000,
  ]);
  const { rowCount } = await sql.query(
    `INSERT INTO idempotency_keys (client_id, key, request_hash, status) VALUES ($1, $2, $3, 0) ON CONFLICT (client_id, key) DO NOTHING`,
    [claim.clientId, claim.key, claim.hash],
  );
  if (!rowCount) {
    const { rows } = await sql.query<StoredAnswer>('SELECT request_hash, status, body, headers, created_at FROM idempotency_keys WHERE client_id = $1 AND key = $2', [
      claim.clientId,
      claim.key,
    ]);
    const stored = rows[0]!;
    if (stored.request_hash !== claim.hash)
      throw new ApiError(409, ErrorCode.idempotencyConflict, 'This Idempotency-Key was used with a different request: use a new key for a new request');
    const { body, omitted } = typeof stored.body === 'string' ? unsealed(stored.body, claim, secrets) : unsealedLegacy(stored.body, claim, secrets);
    const { [CONTENT_TYPE]: contentType, ...replayed } = stored.headers;
    const headers: Record<string, string> = { ...replayed, 'Idempotent-Replayed': 'true' };
    if (omitted.length) headers['Idempotent-Replay-Omitted'] = omitted.join(', ');
    return { status: stored.status, body, headers, ...(contentType ? { contentType } : {}) };
  }
  const result = (await run()) ?? { status: 204 };
  // Serialised once, here: the first answer is these bytes, and a replay answers the same bytes.
  const sent = result.body === undefined ? undefined : serialize(result.body);
  const headers = Object.fromEntries(Object.entries(result.headers ?? {}).filter(([k]) => REPLAYED_HEADERS.includes(k.toLowerCase())));
  if (result.contentType) headers[CONTENT_TYPE] = result.contentType;
  await sql.query('UPDATE idempotency_keys SET status = $3, body = $4, headers = $5 WHERE client_id = $1 AND key = $2', [
    claim.clientId,
    claim.key,
    result.status ?? 200,
    // A JSON string holding the text: jsonb keeps a string's characters as they are (an object's keys it reorders).
    sent === undefined ? null : JSON.stringify(sealed(result.body, claim, secrets)),
    JSON.stringify(headers),
  ]);
  return sent === undefined ? result : { ...result, body: sent };
}

/** Forgets keys older than the TTL (a background job of every process). */
export async function forgetExpiredKeys(db: Queryable, ttlMs: number): Promise<number> {
  const { rowCount } = await db.query('DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1)', [ttlMs / 1000]);
  return rowCount;
}

/** The background job that forgets expired keys, hourly (a replay checks the TTL itself, so this only frees space). */
export function createIdempotencyJanitor(db: Queryable, ttlMs: number, log: Logger): BackgroundWorker {
  return periodicJob('idempotency-janitor', 3_600_000, () => forgetExpiredKeys(db, ttlMs), log);
}
