import type { OperationOutcome, OperationOutcomeIssue } from '@medplum/fhirtypes';

// Pont's one error type, independent of HTTP: the store, the policy and the features throw it; src/http/errors.ts
// renders it in one place (the Error shape there, an OperationOutcome with operationOutcome below). `status` is the HTTP status it is answered with.

/** Machine codes of the Error shape (section 2.9). One list, so clients can switch on them. */
export const ErrorCode = {
  badRequest: 'BAD_REQUEST',
  validationFailed: 'VALIDATION_FAILED',
  unauthenticated: 'UNAUTHENTICATED',
  forbidden: 'FORBIDDEN',
  consentRequired: 'CONSENT_REQUIRED',
  notFound: 'NOT_FOUND',
  methodNotAllowed: 'METHOD_NOT_ALLOWED',
  notAcceptable: 'NOT_ACCEPTABLE',
  conflict: 'CONFLICT',
  idempotencyConflict: 'IDEMPOTENCY_CONFLICT',
  gone: 'GONE',
  preconditionFailed: 'PRECONDITION_FAILED',
  payloadTooLarge: 'PAYLOAD_TOO_LARGE',
  unsupportedMediaType: 'UNSUPPORTED_MEDIA_TYPE',
  rateLimited: 'RATE_LIMITED',
  internal: 'INTERNAL_ERROR',
  unavailable: 'SERVICE_UNAVAILABLE',
} as const;
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode] | (string & {});

export interface ApiErrorOptions {
  /** Extra fields merged into the Error body (e.g. `retry_after`, OAuth `error`). */
  extra?: Record<string, unknown>;
  headers?: Record<string, string>;
  /** Detailed FHIR issues (validation); rendered on FHIR routes, summarised elsewhere. */
  issues?: OperationOutcomeIssue[];
}

/** The one error type: thrown anywhere, rendered in one place (Error shape or OperationOutcome). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCodeValue,
    message: string,
    readonly options: ApiErrorOptions = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const badRequest = (message: string, options?: ApiErrorOptions) =>
  new ApiError(400, ErrorCode.badRequest, message, options);
export const validationFailed = (message: string, options?: ApiErrorOptions) =>
  new ApiError(422, ErrorCode.validationFailed, message, options);
/**
 * The most fields one answer names, and the most characters of a field's name and of its message (a bounded answer to
 * any request); a message may list every choice of its field whole (the 41 record types of `type` and `all`: ~750 characters).
 */
const MAX_DETAILS = 20;
const MAX_FIELD_CHARS = 300;
const MAX_MESSAGE_CHARS = 1000;
const cut = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text);

/** FHIR issues as one line of text, each with where it is: `Observation.status is required (Observation.status); …`. */
export const issuesText = (issues: OperationOutcomeIssue[]): string =>
  issues.map((i) => `${i.details?.text ?? i.diagnostics}${i.expression?.length ? ` (${i.expression.join(', ')})` : ''}`).join('; ');

/**
 * 422 naming the fields at fault, in the shape request validation uses (`details: [{field, message}]`): the first
 * MAX_DETAILS, each cut short, and how many more there were (10,000 unknown keys of a megabyte each are not echoed).
 */
export const invalidFields = (all: Array<{ field: string; message: string }>) => {
  const details = all.slice(0, MAX_DETAILS).map((d) => ({ field: cut(d.field, MAX_FIELD_CHARS), message: cut(d.message, MAX_MESSAGE_CHARS) }));
  const more = all.length > MAX_DETAILS ? `; and ${all.length - MAX_DETAILS} more` : '';
  return validationFailed(details.map((d) => `${d.field}: ${d.message}`).join('; ') + more, { extra: { details } });
};
export const notFound = (message: string) => new ApiError(404, ErrorCode.notFound, message);

/** A value a message names, bounded whatever the input: at most `max` characters of it, and its length when longer. */
export const clipped = (text: string, max = 100): string => (text.length > max ? `${text.slice(0, max)}… (${text.length} characters)` : text);

const issueCodeByStatus: Record<number, OperationOutcomeIssue['code']> = {
  400: 'invalid',
  401: 'login',
  403: 'forbidden',
  404: 'not-found',
  405: 'not-supported',
  406: 'not-supported',
  409: 'conflict',
  410: 'deleted',
  412: 'conflict',
  413: 'too-costly',
  415: 'not-supported',
  422: 'processing',
  429: 'throttled',
  503: 'transient',
};

export const ERROR_CODE_SYSTEM = 'https://pont.health/fhir/CodeSystem/error-code';

/** The same error as a FHIR OperationOutcome; the issue carries our error_code in `details`. */
export function operationOutcome(err: ApiError): OperationOutcome {
  const details = { coding: [{ system: ERROR_CODE_SYSTEM, code: err.code }], text: err.message };
  const issues = err.options.issues?.length
    ? err.options.issues.map((issue, i) => ({ ...issue, details: issue.details ?? details, diagnostics: issue.diagnostics ?? (i === 0 ? err.message : undefined) }))
    : [
        {
          severity: 'error' as const,
          code: issueCodeByStatus[err.status] ?? (err.status >= 500 ? 'exception' : 'processing'),
          details,
          diagnostics: err.message,
        },
      ];
  return { resourceType: 'OperationOutcome', issue: issues };
}
