export class ServiceError extends Error {
    status;
    errorCode;
    requestId;
    body;
    constructor(message, details = {}) {
        super(message);
        this.name = new.target.name;
        this.status = details.status;
        this.errorCode = details.errorCode ?? null;
        this.requestId = details.requestId ?? null;
        this.body = details.body;
    }
}
/** 401: invalid or expired token or credentials (also at construction, on bad credentials). */
export class AuthenticationError extends ServiceError {
}
/** 403: the token lacks a scope. */
export class AuthorizationError extends ServiceError {
}
/** 403 CONSENT_REQUIRED: no active consent of the patient covers the access. */
export class ConsentRequiredError extends AuthorizationError {
}
/** 400 and 422: the request failed validation (`body.details` lists every problem). */
export class ValidationError extends ServiceError {
}
/** 404: no such resource (e.g. an unregistered Health ID). */
export class NotFoundException extends ServiceError {
}
/** 409 IDEMPOTENCY_CONFLICT: an Idempotency-Key reused with another payload. */
export class IdempotencyConflictError extends ServiceError {
}
/** 429, after the retries: `retryAfter` is the seconds to wait. */
export class RateLimitError extends ServiceError {
    retryAfter;
    constructor(message, details = {}) {
        super(message, details);
        this.retryAfter = details.retryAfter ?? null;
    }
}
/** 5xx after the retries, a network failure, or an answer that is not JSON. */
export class ServerError extends ServiceError {
}
/** A webhook signature that is invalid, missing, stale or from the future. */
export class WebhookSignatureError extends ServiceError {
}
/** The exception for an error answer (the one rule, shared with the Python and PHP libraries' vectors). */
export function errorFor(status, body, headers) {
    const json = body && typeof body === 'object' ? body : undefined;
    const errorCode = typeof json?.error_code === 'string' ? json.error_code : null;
    const message = typeof json?.message === 'string' ? json.message : `HTTP ${status}`;
    const details = { status, errorCode, requestId: headers.get('x-request-id'), body };
    if (!json)
        return new ServerError(`HTTP ${status}: the answer is not JSON`, details);
    if (status === 401)
        return new AuthenticationError(message, details);
    if (status === 403)
        return errorCode === 'CONSENT_REQUIRED' ? new ConsentRequiredError(message, details) : new AuthorizationError(message, details);
    if (status === 404)
        return new NotFoundException(message, details);
    if (status === 409 && errorCode === 'IDEMPOTENCY_CONFLICT')
        return new IdempotencyConflictError(message, details);
    if (status === 400 || status === 422)
        return new ValidationError(message, details);
    if (status === 429) {
        const retryAfter = typeof json.retry_after === 'number' ? json.retry_after : Number(headers.get('retry-after')) || null;
        return new RateLimitError(message, { ...details, retryAfter });
    }
    if (status >= 500)
        return new ServerError(message, details);
    return new ServiceError(message, details);
}
