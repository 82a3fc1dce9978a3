import { randomUUID } from 'node:crypto';
import { errorFor, NetworkError, PontError, RateLimitError, retryAfterSeconds, TimeoutError, ValidationError } from './errors.js';
import { VERSION } from './version.js';

/** The retry figures of clients/conformance/vectors.json (`retry.defaults`), the same in the three libraries. */
export const RETRY_DEFAULTS = { maxRetries: 3, baseDelayMs: 500, maxDelayMs: 8000, retryAfterCapSeconds: 60, timeoutMs: 30_000, deadlineMs: 120_000 } as const;
/** Statuses worth another try: the server may answer differently soon. */
const RETRY_STATUSES = new Set([429, 500, 502, 503, 504]);
/** Seconds before expiry at which the token is refreshed (interface §8). */
export const REFRESH_BEFORE_SECONDS = 60;

/** Options of one call (every method takes them last). */
export interface CallOptions {
  /** Replaces the Idempotency-Key the library would send; on any write, makes it safe to retry (reuse it after a restart). */
  idempotencyKey?: string;
  /** Milliseconds one attempt may take (default 30000). */
  timeout?: number;
  /** Milliseconds the whole call may take, retries and waits included (default 120000). */
  deadline?: number;
  /** Retries after the first attempt (default 3). */
  maxRetries?: number;
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** X-Purpose-Of-Use: why the data is read (recorded in the audit trail). */
  purposeOfUse?: string;
  /** X-Emergency-Reason: break-glass access without consent, with the stated reason (needs the emergency:access scope). */
  emergencyReason?: string;
  /** Cancels the call (and its retries): the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** What the library knows about an answer: `lastResponse` of every answer object, and the response hook's argument. */
export interface ResponseInfo {
  status: number;
  /** X-Request-ID: quote it to Pont's support. */
  requestId: string | null;
  headers: Headers;
  /** The Idempotency-Key sent, if any. */
  idempotencyKey: string | null;
  /** True when the server replayed the answer of an earlier request with the same Idempotency-Key. */
  replayed: boolean;
  /** 1 for the first attempt. */
  attempt: number;
}

export interface RequestEvent {
  method: string;
  url: string;
  attempt: number;
  idempotencyKey: string | null;
  /** The request headers, the credentials masked. */
  headers: Record<string, string>;
}
export interface ResponseEvent extends RequestEvent {
  durationMs: number;
  /** The answer's status and request id, when one came. */
  response?: ResponseInfo;
  /** The error the attempt ended with (an error answer, or no answer). */
  error?: PontError;
}

/** For logging and metrics: called before every attempt and after it (with its answer or error). */
export interface Hooks {
  request?(event: RequestEvent): void;
  response?(event: ResponseEvent): void;
}

export interface TransportOptions {
  baseUrl: string;
  /** Retries after a failed attempt (default 3). */
  maxRetries?: number;
  /** Default per-attempt timeout, ms (default 30000). */
  timeout?: number;
  /** Default overall deadline of a call, retries and waits included, ms (default 120000). */
  deadline?: number;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  hooks?: Hooks;
  fetch?: typeof fetch;
  /** Test seams: the wait between attempts, the jitter source (0 ≤ x < 1) and the clock (ms). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  random?: () => number;
  now?: () => number;
}

/** How a request authenticates. */
export interface Credentials {
  /** Headers for an attempt; `renew` after a 401 (a client's new token), false when there is nothing to renew. */
  headers(force: boolean): Promise<Record<string, string>>;
  renewable: boolean;
}

export interface Request {
  method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** A path under the base URL, or an absolute URL (a FHIR `next` link). */
  path: string;
  query?: Record<string, unknown>;
  /** JSON (serialised here) or a string sent as it is. */
  body?: unknown;
  contentType?: string;
  accept?: string;
  headers?: Record<string, string>;
  credentials?: Credentials;
  /** A creating call: the library sends an Idempotency-Key unless the caller gave one. */
  idempotencyKey?: 'new' | string;
  /**
   * Whether sending the request twice is harmless. Default: GET and HEAD are, other methods are not. True for a write
   * with no effect to repeat (the token request, a POST search); false for a GET that starts something (a bulk
   * export's kick-off). An Idempotency-Key makes any request repeatable.
   */
  repeatable?: boolean;
  /** Answer the Response with its body unread (a bulk export file, streamed); error answers are read as usual. */
  stream?: boolean;
}

export interface Answer<T> {
  body: T;
  info: ResponseInfo;
}

/**
 * The delay before retry `retry` (1, 2, …) in ms, or null for no retry: full jitter in
 * [0, min(maxDelay, base·2^(retry−1))], or the server's Retry-After when given (up to 60 s; longer: null), and
 * never past the deadline (`remainingMs`).
 */
export function retryDelay(retry: number, retryAfter: string | null, random: () => number, nowMs: number, remainingMs = Infinity): number | null {
  const seconds = retryAfterSeconds(retryAfter, nowMs);
  let delay: number;
  if (seconds !== null) {
    if (seconds > RETRY_DEFAULTS.retryAfterCapSeconds) return null;
    delay = seconds * 1000;
  } else delay = Math.floor(random() * Math.min(RETRY_DEFAULTS.maxDelayMs, RETRY_DEFAULTS.baseDelayMs * 2 ** (retry - 1)));
  return delay < remainingMs ? delay : null;
}

/** Whether a failed attempt may be tried again: the outcome is transient and repeating the request is safe. */
export function mayRetry(method: string, hasIdempotencyKey: boolean, outcome: 'network' | 'timeout' | number, repeatable = method === 'GET' || method === 'HEAD'): boolean {
  const transient = typeof outcome === 'string' || RETRY_STATUSES.has(outcome);
  return transient && (repeatable || hasIdempotencyKey);
}

function checkHeaderValue(name: string, value: string): void {
  // fetch refuses characters beyond Latin-1 with a TypeError; CR/LF would split headers.
  if (!/^[\x20-\x7e\xa0-\xff]*$/.test(value)) throw new ValidationError(`${name} must be printable Latin-1 text on one line`);
}

const defaultSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => (signal?.removeEventListener('abort', onAbort), resolve()), ms);
    const onAbort = () => (clearTimeout(timer), reject(signal!.reason));
    signal?.addEventListener('abort', onAbort, { once: true });
  });

const MASKED = new Set(['authorization', 'x-bridge-agent-key', 'x-client-secret']);

/** The HTTP side shared by every module: URL building, headers, retries, deadlines, hooks and the error mapping. */
export class Transport {
  readonly baseUrl: string;
  private readonly fetchImpl: typeof fetch;
  private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  private readonly random: () => number;
  readonly now: () => number;

  // A #private field: util.inspect and console.log never show it (it may hold the caller's credentials).
  readonly #options: TransportOptions;

  constructor(options: TransportOptions) {
    this.#options = options;
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.fetchImpl = options.fetch ?? ((...args) => fetch(...args));
    this.sleep = options.sleep ?? defaultSleep;
    this.random = options.random ?? Math.random;
    this.now = options.now ?? Date.now;
  }

  url(path: string, query?: Record<string, unknown>): string {
    let url = /^https?:\/\//.test(path) ? path : `${this.baseUrl}${path}`;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v === undefined || v === null) continue;
        for (const one of Array.isArray(v) ? v : [v]) q.append(k, String(one));
      }
      const text = q.toString();
      if (text) url += `${url.includes('?') ? '&' : '?'}${text}`;
    }
    return url;
  }

  async request<T>(req: Request, call: CallOptions = {}): Promise<Answer<T>> {
    const url = this.url(req.path, req.query);
    const idempotencyKey = call.idempotencyKey ?? (req.idempotencyKey === 'new' ? randomUUID() : req.idempotencyKey) ?? null;
    const maxRetries = call.maxRetries ?? this.#options.maxRetries ?? RETRY_DEFAULTS.maxRetries;
    const timeout = call.timeout ?? this.#options.timeout ?? RETRY_DEFAULTS.timeoutMs;
    const deadlineAt = this.now() + (call.deadline ?? this.#options.deadline ?? RETRY_DEFAULTS.deadlineMs);
    const fixed: Record<string, string> = {
      accept: req.accept ?? 'application/json',
      'user-agent': `pont-typescript/${VERSION}`,
      ...this.#options.headers,
      ...req.headers,
      ...call.headers,
    };
    if (req.body !== undefined) fixed['content-type'] = req.contentType ?? 'application/json';
    if (idempotencyKey) fixed['idempotency-key'] = idempotencyKey;
    if (call.purposeOfUse !== undefined) fixed['x-purpose-of-use'] = call.purposeOfUse;
    if (call.emergencyReason !== undefined) fixed['x-emergency-reason'] = call.emergencyReason;
    for (const [name, value] of Object.entries(fixed)) checkHeaderValue(name, value);
    const body = req.body === undefined ? undefined : typeof req.body === 'string' ? req.body : JSON.stringify(req.body);

    let renewed = false;
    for (let attempt = 1, retry = 0; ; attempt++) {
      call.signal?.throwIfAborted();
      const headers = { ...fixed, ...(await req.credentials?.headers(false)) };
      const event: RequestEvent = { method: req.method, url, attempt, idempotencyKey, headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, MASKED.has(k.toLowerCase()) ? '***' : v])) };
      this.#options.hooks?.request?.(event);
      const started = this.now();
      const outcome = await this.attempt(req.method, url, headers, body, Math.min(timeout, deadlineAt - started), call.signal, req.stream);
      let error: PontError;
      let retryAfter: string | null = null;
      if ('error' in outcome) error = outcome.error;
      else {
        const info: ResponseInfo = {
          status: outcome.res.status,
          requestId: outcome.res.headers.get('x-request-id'),
          headers: outcome.res.headers,
          idempotencyKey,
          replayed: outcome.res.headers.get('idempotent-replayed') === 'true',
          attempt,
        };
        if (outcome.res.ok && req.stream) {
          this.#options.hooks?.response?.({ ...event, durationMs: this.now() - started, response: info });
          return { body: outcome.res as T, info };
        }
        const parsed = parseJson(outcome.text);
        if (outcome.res.ok && (parsed.ok || !outcome.text)) {
          this.#options.hooks?.response?.({ ...event, durationMs: this.now() - started, response: info });
          return { body: (parsed.ok ? parsed.value : undefined) as T, info };
        }
        error = errorFor(outcome.res.status, parsed.ok ? parsed.value : outcome.text, outcome.res.headers, this.now());
        this.#options.hooks?.response?.({ ...event, durationMs: this.now() - started, response: info, error });
        // An expired or revoked token: one new token, the call once more (a 401 had no effect).
        if (outcome.res.status === 401 && req.credentials?.renewable && !renewed) {
          renewed = true;
          await req.credentials.headers(true);
          continue;
        }
        retryAfter = outcome.res.headers.get('retry-after') ?? (error instanceof RateLimitError && error.retryAfter !== null ? String(error.retryAfter) : null);
      }
      if ('error' in outcome) this.#options.hooks?.response?.({ ...event, durationMs: this.now() - started, error });
      const kind = 'error' in outcome ? (error instanceof TimeoutError ? 'timeout' : 'network') : error.status!;
      if (retry >= maxRetries || !mayRetry(req.method, idempotencyKey !== null, kind, req.repeatable)) throw error;
      const delay = retryDelay(retry + 1, retryAfter, this.random, this.now(), deadlineAt - this.now());
      if (delay === null) throw error;
      retry++;
      await this.sleep(delay, call.signal);
    }
  }

  /** One attempt: the answer and its whole body, or the error of no answer. */
  private async attempt(method: string, url: string, headers: Record<string, string>, body: string | undefined, timeoutMs: number, signal?: AbortSignal, stream = false): Promise<{ res: Response; text: string } | { error: PontError }> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => ((timedOut = true), controller.abort()), Math.max(0, timeoutMs));
    const onAbort = () => controller.abort(signal!.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    let streaming = false;
    try {
      const res = await this.fetchImpl(url, { method, headers, body, signal: controller.signal });
      // A streamed body is read by the caller after this attempt: the timeout stops here, the caller's signal does not.
      streaming = stream && res.ok;
      return { res, text: streaming ? '' : await res.text() };
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      const where = `${method} ${new URL(url).pathname}`;
      if (timedOut) return { error: new TimeoutError(`${where}: no answer within ${Math.max(0, timeoutMs)} ms`, { cause: err }) };
      const reason = (err as { cause?: { code?: string; message?: string } })?.cause;
      return { error: new NetworkError(`${where}: no answer (${reason?.code ?? reason?.message ?? (err as Error).message})`, { cause: err }) };
    } finally {
      clearTimeout(timer);
      if (!streaming) signal?.removeEventListener('abort', onAbort);
    }
  }
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}
