export class PontError extends Error {
    /** The HTTP status; undefined when no answer came (NetworkError, TimeoutError) or before any request. */
    status;
    errorCode;
    /** X-Request-ID of the answer, to quote to Pont's support; null when no answer came. */
    requestId;
    body;
    constructor(message, details = {}) {
        super(message, details.cause === undefined ? undefined : { cause: details.cause });
        this.name = new.target.name;
        this.status = details.status;
        this.errorCode = details.errorCode ?? null;
        this.requestId = details.requestId ?? null;
        this.body = details.body;
    }
}
/** @deprecated The earlier name of PontError. */
export const ServiceError = PontError;
/** 401: invalid or expired token or credentials. */
export class AuthenticationError extends PontError {
}
/** 403: the token lacks a scope. */
export class AuthorizationError extends PontError {
}
/** 403 CONSENT_REQUIRED: no active consent of the patient covers the access. */
export class ConsentRequiredError extends AuthorizationError {
}
/** 400 and 422: the request failed validation (`body.details` lists every problem); also a missing argument, before any request. */
export class ValidationError extends PontError {
}
/** 404: no such resource (e.g. an unregistered Health ID), or one the caller may not see. */
export class NotFoundError extends PontError {
}
/** @deprecated The earlier name of NotFoundError. */
export const NotFoundException = NotFoundError;
/** 409: the request conflicts with the current state (a reference that blocks a delete, a reused batch_id…). */
export class ConflictError extends PontError {
}
/** 409 IDEMPOTENCY_CONFLICT: an Idempotency-Key reused with another request. */
export class IdempotencyConflictError extends ConflictError {
}
/** 412: If-Match (or another precondition) does not hold: read again, then retry your change. */
export class PreconditionFailedError extends PontError {
}
/** 413: the body or batch is larger than the server accepts. */
export class PayloadTooLargeError extends PontError {
}
/** 429, after the retries: `retryAfter` is the seconds to wait. */
export class RateLimitError extends PontError {
    retryAfter;
    constructor(message, details = {}) {
        super(message, details);
        this.retryAfter = details.retryAfter ?? null;
    }
}
/** 5xx after the retries, or an answer that is not JSON. */
export class ServerError extends PontError {
}
/** No answer: the connection was refused, reset or lost. The call may have taken effect. */
export class NetworkError extends PontError {
}
/** No answer within the call's timeout or deadline. The call may have taken effect. */
export class TimeoutError extends NetworkError {
}
/** A webhook signature that is invalid, missing, stale or from the future. */
export class WebhookSignatureError extends PontError {
}
const ERROR_CODE_SYSTEM = 'https://pont.health/fhir/CodeSystem/error-code';
/** The code and message of an Error body, or of a FHIR OperationOutcome (whose first issue carries them). */
function describe(json) {
    if (json.resourceType === 'OperationOutcome') {
        const issue = Array.isArray(json.issue) ? json.issue[0] : undefined;
        const coding = issue?.details?.coding?.find?.((c) => c?.system === ERROR_CODE_SYSTEM) ?? issue?.details?.coding?.[0];
        const message = issue?.details?.text ?? issue?.diagnostics;
        return { errorCode: typeof coding?.code === 'string' ? coding.code : null, message: typeof message === 'string' ? message : null };
    }
    return { errorCode: typeof json.error_code === 'string' ? json.error_code : null, message: typeof json.message === 'string' ? json.message : null };
}
/** The number of seconds of a Retry-After header (seconds or an HTTP date), or null. */
export function retryAfterSeconds(header, nowMs) {
    if (header === null || header === undefined)
        return null;
    const text = header.trim();
    if (/^\d+$/.test(text))
        return Number(text);
    if (!/[a-z]/i.test(text))
        return null; // "-3", "1.5": not a valid Retry-After
    const date = Date.parse(text);
    return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - nowMs) / 1000));
}
/** The exception for an error answer (the one rule, shared with the Python and PHP libraries' vectors). */
export function errorFor(status, body, headers, nowMs = Date.now()) {
    const json = body && typeof body === 'object' && !Array.isArray(body) ? body : undefined;
    const { errorCode, message: text } = json ? describe(json) : { errorCode: null, message: null };
    const message = text ?? `HTTP ${status}`;
    const details = { status, errorCode, requestId: headers.get('x-request-id'), body };
    if (!json)
        return new ServerError(`HTTP ${status}: the answer is not JSON`, details);
    if (status === 401)
        return new AuthenticationError(message, details);
    if (status === 403)
        return errorCode === 'CONSENT_REQUIRED' ? new ConsentRequiredError(message, details) : new AuthorizationError(message, details);
    if (status === 404)
        return new NotFoundError(message, details);
    if (status === 409)
        return errorCode === 'IDEMPOTENCY_CONFLICT' ? new IdempotencyConflictError(message, details) : new ConflictError(message, details);
    if (status === 412)
        return new PreconditionFailedError(message, details);
    if (status === 413)
        return new PayloadTooLargeError(message, details);
    if (status === 400 || status === 422)
        return new ValidationError(message, details);
    if (status === 429) {
        const retryAfter = typeof json.retry_after === 'number' ? json.retry_after : retryAfterSeconds(headers.get('retry-after'), nowMs);
        return new RateLimitError(message, { ...details, retryAfter });
    }
    if (status >= 500)
        return new ServerError(message, details);
    return new PontError(message, details);
}
