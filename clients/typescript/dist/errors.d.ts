/** The exceptions of interface §7: every error a call raises is a ServiceError. */
export interface ErrorDetails {
    status?: number;
    errorCode?: string | null;
    requestId?: string | null;
    /** The Error body the server sent (or its text when it was not JSON). */
    body?: unknown;
}
export declare class ServiceError extends Error {
    readonly status: number | undefined;
    readonly errorCode: string | null;
    readonly requestId: string | null;
    readonly body: unknown;
    constructor(message: string, details?: ErrorDetails);
}
/** 401: invalid or expired token or credentials (also at construction, on bad credentials). */
export declare class AuthenticationError extends ServiceError {
}
/** 403: the token lacks a scope. */
export declare class AuthorizationError extends ServiceError {
}
/** 403 CONSENT_REQUIRED: no active consent of the patient covers the access. */
export declare class ConsentRequiredError extends AuthorizationError {
}
/** 400 and 422: the request failed validation (`body.details` lists every problem). */
export declare class ValidationError extends ServiceError {
}
/** 404: no such resource (e.g. an unregistered Health ID). */
export declare class NotFoundException extends ServiceError {
}
/** 409 IDEMPOTENCY_CONFLICT: an Idempotency-Key reused with another payload. */
export declare class IdempotencyConflictError extends ServiceError {
}
/** 429, after the retries: `retryAfter` is the seconds to wait. */
export declare class RateLimitError extends ServiceError {
    readonly retryAfter: number | null;
    constructor(message: string, details?: ErrorDetails & {
        retryAfter?: number | null;
    });
}
/** 5xx after the retries, a network failure, or an answer that is not JSON. */
export declare class ServerError extends ServiceError {
}
/** A webhook signature that is invalid, missing, stale or from the future. */
export declare class WebhookSignatureError extends ServiceError {
}
/** The exception for an error answer (the one rule, shared with the Python and PHP libraries' vectors). */
export declare function errorFor(status: number, body: unknown, headers: {
    get(name: string): string | null;
}): ServiceError;
