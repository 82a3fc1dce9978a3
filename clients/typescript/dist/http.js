import { randomUUID } from 'node:crypto';
import { errorFor, NetworkError, RateLimitError, retryAfterSeconds, TimeoutError, ValidationError } from './errors.js';
import { VERSION } from './version.js';
/** The retry figures of clients/conformance/vectors.json (`retry.defaults`), the same in the three libraries. */
export const RETRY_DEFAULTS = { maxRetries: 3, baseDelayMs: 500, maxDelayMs: 8000, retryAfterCapSeconds: 60, timeoutMs: 30_000, deadlineMs: 120_000 };
/** Statuses worth another try: the server may answer differently soon. */
const RETRY_STATUSES = new Set([429, 500, 502, 503, 504]);
/** Seconds before expiry at which the token is refreshed (interface §8). */
export const REFRESH_BEFORE_SECONDS = 60;
/**
 * The delay before retry `retry` (1, 2, …) in ms, or null for no retry: full jitter in
 * [0, min(maxDelay, base·2^(retry−1))], or the server's Retry-After when given (up to 60 s; longer: null), and
 * never past the deadline (`remainingMs`).
 */
export function retryDelay(retry, retryAfter, random, nowMs, remainingMs = Infinity) {
    const seconds = retryAfterSeconds(retryAfter, nowMs);
    let delay;
    if (seconds !== null) {
        if (seconds > RETRY_DEFAULTS.retryAfterCapSeconds)
            return null;
        delay = seconds * 1000;
    }
    else
        delay = Math.floor(random() * Math.min(RETRY_DEFAULTS.maxDelayMs, RETRY_DEFAULTS.baseDelayMs * 2 ** (retry - 1)));
    return delay < remainingMs ? delay : null;
}
/** Whether a failed attempt may be tried again: the outcome is transient and repeating the request is safe. */
export function mayRetry(method, hasIdempotencyKey, outcome, repeatable = method === 'GET' || method === 'HEAD') {
    const transient = typeof outcome === 'string' || RETRY_STATUSES.has(outcome);
    return transient && (repeatable || hasIdempotencyKey);
}
function checkHeaderValue(name, value) {
    // fetch refuses characters beyond Latin-1 with a TypeError; CR/LF would split headers.
    if (!/^[\x20-\x7e\xa0-\xff]*$/.test(value))
        throw new ValidationError(`${name} must be printable Latin-1 text on one line`);
}
const defaultSleep = (ms, signal) => new Promise((resolve, reject) => {
    if (signal?.aborted)
        return reject(signal.reason);
    const timer = setTimeout(() => (signal?.removeEventListener('abort', onAbort), resolve()), ms);
    const onAbort = () => (clearTimeout(timer), reject(signal.reason));
    signal?.addEventListener('abort', onAbort, { once: true });
});
const MASKED = new Set(['authorization', 'x-bridge-agent-key', 'x-client-secret']);
/** The HTTP side shared by every module: URL building, headers, retries, deadlines, hooks and the error mapping. */
export class Transport {
    baseUrl;
    fetchImpl;
    sleep;
    random;
    now;
    // A #private field: util.inspect and console.log never show it (it may hold the caller's credentials).
    #options;
    constructor(options) {
        this.#options = options;
        this.baseUrl = options.baseUrl.replace(/\/+$/, '');
        this.fetchImpl = options.fetch ?? ((...args) => fetch(...args));
        this.sleep = options.sleep ?? defaultSleep;
        this.random = options.random ?? Math.random;
        this.now = options.now ?? Date.now;
    }
    url(path, query) {
        let url = /^https?:\/\//.test(path) ? path : `${this.baseUrl}${path}`;
        if (query) {
            const q = new URLSearchParams();
            for (const [k, v] of Object.entries(query)) {
                if (v === undefined || v === null)
                    continue;
                for (const one of Array.isArray(v) ? v : [v])
                    q.append(k, String(one));
            }
            const text = q.toString();
            if (text)
                url += `${url.includes('?') ? '&' : '?'}${text}`;
        }
        return url;
    }
    async request(req, call = {}) {
        const url = this.url(req.path, req.query);
        const idempotencyKey = call.idempotencyKey ?? (req.idempotencyKey === 'new' ? randomUUID() : req.idempotencyKey) ?? null;
        const maxRetries = call.maxRetries ?? this.#options.maxRetries ?? RETRY_DEFAULTS.maxRetries;
        const timeout = call.timeout ?? this.#options.timeout ?? RETRY_DEFAULTS.timeoutMs;
        const deadlineAt = this.now() + (call.deadline ?? this.#options.deadline ?? RETRY_DEFAULTS.deadlineMs);
        const fixed = {
            accept: req.accept ?? 'application/json',
            'user-agent': `pont-typescript/${VERSION}`,
            ...this.#options.headers,
            ...req.headers,
            ...call.headers,
        };
        if (req.body !== undefined)
            fixed['content-type'] = req.contentType ?? 'application/json';
        if (idempotencyKey)
            fixed['idempotency-key'] = idempotencyKey;
        if (call.purposeOfUse !== undefined)
            fixed['x-purpose-of-use'] = call.purposeOfUse;
        if (call.emergencyReason !== undefined)
            fixed['x-emergency-reason'] = call.emergencyReason;
        for (const [name, value] of Object.entries(fixed))
            checkHeaderValue(name, value);
        const body = req.body === undefined ? undefined : typeof req.body === 'string' ? req.body : JSON.stringify(req.body);
        let renewed = false;
        for (let attempt = 1, retry = 0;; attempt++) {
            call.signal?.throwIfAborted();
            const headers = { ...fixed, ...(await req.credentials?.headers(false)) };
            const event = { method: req.method, url, attempt, idempotencyKey, headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, MASKED.has(k.toLowerCase()) ? '***' : v])) };
            this.#options.hooks?.request?.(event);
            const started = this.now();
            const outcome = await this.attempt(req.method, url, headers, body, Math.min(timeout, deadlineAt - started), call.signal, req.stream);
            let error;
            let retryAfter = null;
            if ('error' in outcome)
                error = outcome.error;
            else {
                const info = {
                    status: outcome.res.status,
                    requestId: outcome.res.headers.get('x-request-id'),
                    headers: outcome.res.headers,
                    idempotencyKey,
                    replayed: outcome.res.headers.get('idempotent-replayed') === 'true',
                    attempt,
                };
                if (outcome.res.ok && req.stream) {
                    this.#options.hooks?.response?.({ ...event, durationMs: this.now() - started, response: info });
                    return { body: outcome.res, info };
                }
                const parsed = parseJson(outcome.text);
                if (outcome.res.ok && (parsed.ok || !outcome.text)) {
                    this.#options.hooks?.response?.({ ...event, durationMs: this.now() - started, response: info });
                    return { body: (parsed.ok ? parsed.value : undefined), info };
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
            if ('error' in outcome)
                this.#options.hooks?.response?.({ ...event, durationMs: this.now() - started, error });
            const kind = 'error' in outcome ? (error instanceof TimeoutError ? 'timeout' : 'network') : error.status;
            if (retry >= maxRetries || !mayRetry(req.method, idempotencyKey !== null, kind, req.repeatable))
                throw error;
            const delay = retryDelay(retry + 1, retryAfter, this.random, this.now(), deadlineAt - this.now());
            if (delay === null)
                throw error;
            retry++;
            await this.sleep(delay, call.signal);
        }
    }
    /** One attempt: the answer and its whole body, or the error of no answer. */
    async attempt(method, url, headers, body, timeoutMs, signal, stream = false) {
        const controller = new AbortController();
        let timedOut = false;
        const timer = setTimeout(() => ((timedOut = true), controller.abort()), Math.max(0, timeoutMs));
        const onAbort = () => controller.abort(signal.reason);
        signal?.addEventListener('abort', onAbort, { once: true });
        let streaming = false;
        try {
            const res = await this.fetchImpl(url, { method, headers, body, signal: controller.signal });
            // A streamed body is read by the caller after this attempt: the timeout stops here, the caller's signal does not.
            streaming = stream && res.ok;
            return { res, text: streaming ? '' : await res.text() };
        }
        catch (err) {
            if (signal?.aborted)
                throw signal.reason;
            const where = `${method} ${new URL(url).pathname}`;
            if (timedOut)
                return { error: new TimeoutError(`${where}: no answer within ${Math.max(0, timeoutMs)} ms`, { cause: err }) };
            const reason = err?.cause;
            return { error: new NetworkError(`${where}: no answer (${reason?.code ?? reason?.message ?? err.message})`, { cause: err }) };
        }
        finally {
            clearTimeout(timer);
            if (!streaming)
                signal?.removeEventListener('abort', onAbort);
        }
    }
}
function parseJson(text) {
    try {
        return { ok: true, value: JSON.parse(text) };
    }
    catch {
        return { ok: false };
    }
}
