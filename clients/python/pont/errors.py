"""The exceptions of interface section 7: every error a call raises is a PontError (names shared with the
TypeScript and PHP libraries, clients/conformance/README.md)."""
from __future__ import annotations

import builtins
import email.utils
import time
from typing import Any, Mapping, Optional

#: A Retry-After longer than this is not waited for: the call gives up and the error carries ``retry_after``.
MAX_RETRY_AFTER = 60.0


class PontError(Exception):
    """Base of every error: ``status``, ``error_code``, ``message``, ``request_id`` and the server's ``body``."""

    def __init__(self, message: str, status: Optional[int] = None, error_code: Optional[str] = None,
                 request_id: Optional[str] = None, body: Any = None, headers: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_code = error_code
        self.request_id = request_id
        self.body = body
        self.headers = dict(headers or {})


#: Deprecated name of PontError (before 0.2).
ServiceError = PontError


class AuthenticationError(PontError):
    """401: invalid or expired token or credentials."""


class AuthorizationError(PontError):
    """403: the token lacks a scope."""


class ConsentRequiredError(AuthorizationError):
    """403 CONSENT_REQUIRED: no active consent of the patient covers the access."""


class ValidationError(PontError):
    """400 and 422: the request failed validation (``body['details']`` lists every problem); also a missing
    argument, refused before any request."""


class NotFoundError(PontError):
    """404: no such resource (e.g. an unregistered Health ID)."""


#: Deprecated name of NotFoundError (before 0.2).
NotFoundException = NotFoundError


class ConflictError(PontError):
    """409: the request conflicts with the current state (a reused batch id, a resource still referred to)."""


class IdempotencyConflictError(ConflictError):
    """409 IDEMPOTENCY_CONFLICT: an Idempotency-Key reused with another payload."""


class PreconditionFailedError(PontError):
    """412: an If-Match that no longer holds, or a conditional write matching more than one resource."""


class PayloadTooLargeError(PontError):
    """413: the body or the batch is over the server's limit (split it)."""


class RateLimitError(PontError):
    """429, after the retries: ``retry_after`` is the seconds to wait."""

    def __init__(self, message: str, retry_after: Optional[float] = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ServerError(PontError):
    """5xx after the retries, or an answer that is not JSON."""


class NetworkError(PontError):
    """No answer: the connection failed or was lost. After a lost answer the request may have taken effect."""


class TimeoutError(NetworkError):  # noqa: A001 (pont.TimeoutError, as in the other libraries)
    """No answer within the call's ``timeout`` or overall ``deadline``; the request may have taken effect."""


class CancelledError(PontError):
    """The caller cancelled the call (its ``cancel`` event was set): no attempt starts after that, the wait between
    attempts ends, and an attempt in flight is aborted. If a request had been sent, it may have taken effect. Not a
    NetworkError: nothing failed, and code that retries or alerts on network errors should leave it alone."""


class WebhookSignatureError(PontError):
    """A webhook signature that is invalid, missing, stale or from the future."""


def retry_after_of(body: Any, headers: Mapping[str, str], now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait: the body's ``retry_after``, else the Retry-After header (seconds or an HTTP date)."""
    if isinstance(body, dict) and isinstance(body.get("retry_after"), (int, float)) and not isinstance(body.get("retry_after"), bool):
        return float(body["retry_after"])
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
        return seconds if seconds >= 0 else None  # a negative one means nothing: the backoff applies
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _code_and_message(status: int, body: dict) -> tuple:
    if body.get("resourceType") == "OperationOutcome":  # FHIR routes: our error_code is in the issue's details
        issue = next(iter(body.get("issue") or []), {}) or {}
        coding = next(iter((issue.get("details") or {}).get("coding") or []), {}) or {}
        message = issue.get("diagnostics") or (issue.get("details") or {}).get("text") or f"HTTP {status}"
        return (coding.get("code") if isinstance(coding.get("code"), str) else None), str(message)
    code = body.get("error_code") if isinstance(body.get("error_code"), str) else None
    message = body.get("message") if isinstance(body.get("message"), str) else f"HTTP {status}"
    return code, message


_BY_STATUS = {401: AuthenticationError, 403: AuthorizationError, 404: NotFoundError, 409: ConflictError,
              412: PreconditionFailedError, 413: PayloadTooLargeError, 400: ValidationError, 422: ValidationError}


def error_for(status: int, body: Any, headers: Mapping[str, str]) -> PontError:
    """The exception for an error answer (the rule the TypeScript and PHP libraries share, see the vectors)."""
    request_id = headers.get("x-request-id")
    if not isinstance(body, dict):
        return ServerError(f"HTTP {status}: the answer is not JSON", status=status, request_id=request_id, body=body, headers=headers)
    code, message = _code_and_message(status, body)
    kw = dict(status=status, error_code=code, request_id=request_id, body=body, headers=headers)
    if status == 403 and code == "CONSENT_REQUIRED":
        return ConsentRequiredError(message, **kw)
    if status == 409 and code == "IDEMPOTENCY_CONFLICT":
        return IdempotencyConflictError(message, **kw)
    if status == 429:
        return RateLimitError(message, retry_after=retry_after_of(body, headers), **kw)
    if status >= 500:
        return ServerError(message, **kw)
    return _BY_STATUS.get(status, PontError)(message, **kw)


# The builtin, for code in this package that must catch the socket timeout rather than raise ours.
BuiltinTimeoutError = builtins.TimeoutError
