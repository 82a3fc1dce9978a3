/**
 * Every error a call raises is a PontError (the same names in the Python and PHP libraries:
 * clients/conformance/README.md). Server answers map to a class by status; NetworkError and TimeoutError mean no
 * answer came, so the call may or may not have taken effect (see the retry rules).
 */
export interface ErrorDetails {
    status?: number;
    errorCode?: string | null;
    requestId?: string | null;
    /** The Error body (or OperationOutcome) the server sent, or its text when it was not JSON. */
    body?: unknown;
    cause?: unknown;
}
export declare class PontError extends Error {
    /** The HTTP status; undefined when no answer came (NetworkError, TimeoutError) or before any request. */
    readonly status: number | undefined;
    readonly errorCode: string | null;
    /** X-Request-ID of the answer, to quote to Pont's support; null when no answer came. */
    readonly requestId: string | null;
    readonly body: unknown;
    constructor(message: string, details?: ErrorDetails);
}
/** @deprecated The earlier name of PontError. */
export declare const ServiceError: typeof PontError;
/** @deprecated The earlier name of PontError. */
export type ServiceError = PontError;
/** 401: invalid or expired token or credentials. */
export declare class AuthenticationError extends PontError {
}
/** 403: the token lacks a scope. */
export declare class AuthorizationError extends PontError {
}
/** 403 CONSENT_REQUIRED: no active consent of the patient covers the access. */
export declare class ConsentRequiredError extends AuthorizationError {
}
/** 400 and 422: the request failed validation (`body.details` lists every problem); also a missing argument, before any request. */
export declare class ValidationError extends PontError {
}
/** 404: no such resource (e.g. an unregistered Health ID), or one the caller may not see. */
export declare class NotFoundError extends PontError {
}
/** @deprecated The earlier name of NotFoundError. */
export declare const NotFoundException: typeof NotFoundError;
/** @deprecated The earlier name of NotFoundError. */
export type NotFoundException = NotFoundError;
/** 409: the request conflicts with the current state (a reference that blocks a delete, a reused batch_id…). */
export declare class ConflictError extends PontError {
}
/** 409 IDEMPOTENCY_CONFLICT: an Idempotency-Key reused with another request. */
export declare class IdempotencyConflictError extends ConflictError {
}
/** 412: If-Match (or another precondition) does not hold: read again, then retry your change. */
export declare class PreconditionFailedError extends PontError {
}
/** 413: the body or batch is larger than the server accepts. */
export declare class PayloadTooLargeError extends PontError {
}
/** 429, after the retries: `retryAfter` is the seconds to wait. */
export declare class RateLimitError extends PontError {
    readonly retryAfter: number | null;
    constructor(message: string, details?: ErrorDetails & {
        retryAfter?: number | null;
    });
}
/** 5xx after the retries, or an answer that is not JSON. */
export declare class ServerError extends PontError {
}
/** No answer: the connection was refused, reset or lost. The call may have taken effect. */
export declare class NetworkError extends PontError {
}
/** No answer within the call's timeout or deadline. The call may have taken effect. */
export declare class TimeoutError extends NetworkError {
}
/** A webhook signature that is invalid, missing, stale or from the future. */
export declare class WebhookSignatureError extends PontError {
}
/** The number of seconds of a Retry-After header (seconds or an HTTP date), or null. */
export declare function retryAfterSeconds(header: string | null | undefined, nowMs: number): number | null;
/** The exception for an error answer (the one rule, shared with the Python and PHP libraries' vectors). */
export declare function errorFor(status: number, body: unknown, headers: {
    get(name: string): string | null;
}, nowMs?: number): PontError;
