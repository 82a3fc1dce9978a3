import type { ApiError } from '../core/errors';

// The core error type (src/core/errors.ts), re-exported for the HTTP layer, and its Error shape.
export {
  ApiError,
  ERROR_CODE_SYSTEM,
  ErrorCode,
  badRequest,
  invalidFields,
  notFound,
  operationOutcome,
  validationFailed,
  type ApiErrorOptions,
  type ErrorCodeValue,
} from '../core/errors';

/** The Error shape of section 2.9. */
export function errorBody(err: ApiError): Record<string, unknown> {
  return { status: 'error', error_code: err.code, message: err.message, ...err.options.extra };
}
