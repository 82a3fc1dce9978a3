import { PontError } from './errors.js';
/** The retry figures of clients/conformance/vectors.json (`retry.defaults`), the same in the three libraries. */
export declare const RETRY_DEFAULTS: {
    readonly maxRetries: 3;
    readonly baseDelayMs: 500;
    readonly maxDelayMs: 8000;
    readonly retryAfterCapSeconds: 60;
    readonly timeoutMs: 30000;
    readonly deadlineMs: 120000;
};
/** Seconds before expiry at which the token is refreshed (interface §8). */
export declare const REFRESH_BEFORE_SECONDS = 60;
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
export declare function retryDelay(retry: number, retryAfter: string | null, random: () => number, nowMs: number, remainingMs?: number): number | null;
/** Whether a failed attempt may be tried again: the outcome is transient and repeating the request is safe. */
export declare function mayRetry(method: string, hasIdempotencyKey: boolean, outcome: 'network' | 'timeout' | number, repeatable?: boolean): boolean;
/** The HTTP side shared by every module: URL building, headers, retries, deadlines, hooks and the error mapping. */
export declare class Transport {
    #private;
    readonly baseUrl: string;
    private readonly fetchImpl;
    private readonly sleep;
    private readonly random;
    readonly now: () => number;
    constructor(options: TransportOptions);
    url(path: string, query?: Record<string, unknown>): string;
    request<T>(req: Request, call?: CallOptions): Promise<Answer<T>>;
    /** One attempt: the answer and its whole body, or the error of no answer. */
    private attempt;
}
