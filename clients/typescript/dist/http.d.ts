export interface TransportOptions {
    clientId: string;
    clientSecret: string;
    baseUrl: string;
    /** Retries of a failed call (network error, 429, 5xx); default 3. */
    maxRetries?: number;
    /** Per-request timeout in ms; default 30000. */
    timeoutMs?: number;
    /** First backoff delay in ms (doubled each retry, with jitter); default 500. */
    backoffMs?: number;
    fetch?: typeof fetch;
}
export interface RequestOptions {
    query?: Record<string, string | number | boolean | undefined | null>;
    body?: unknown;
    /** A creating call: sends one Idempotency-Key, the same on every retry. */
    idempotent?: boolean;
    /** An absolute URL (a FHIR next link) instead of path + query. */
    url?: string;
}
/** Seconds before expiry at which the token is refreshed (interface §8). */
export declare const REFRESH_BEFORE_SECONDS = 60;
/** The HTTP side: the token (fetched, cached, refreshed once at a time), retries, and the error mapping. */
export declare class Transport {
    private readonly options;
    private token?;
    private refreshing?;
    private readonly fetchImpl;
    private clientSecret;
    constructor(options: TransportOptions);
    get clientId(): string;
    /** After a rotation of the client's secret: later tokens are asked for with the new one. */
    useClientSecret(secret: string): void;
    /** A valid token: the cached one, or a new one (concurrent callers share one refresh). */
    accessToken(force?: boolean): Promise<string>;
    private fetchToken;
    request<T = any>(method: string, path: string, options?: RequestOptions): Promise<T>;
    private send;
    private backoff;
}
