"""The exceptions of interface section 7: every error a call raises is a ServiceError."""
from typing import Any, Mapping, Optional


class ServiceError(Exception):
    """Base of every error: ``status``, ``error_code``, ``message``, ``request_id`` and the server's ``body``."""

    def __init__(self, message: str, status: Optional[int] = None, error_code: Optional[str] = None,
                 request_id: Optional[str] = None, body: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_code = error_code
        self.request_id = request_id
        self.body = body


class AuthenticationError(ServiceError):
    """401: invalid or expired token or credentials (also at construction, on bad credentials)."""


class AuthorizationError(ServiceError):
    """403: the token lacks a scope."""


class ConsentRequiredError(AuthorizationError):
    """403 CONSENT_REQUIRED: no active consent of the patient covers the access."""


class ValidationError(ServiceError):
    """400 and 422: the request failed validation (``body['details']`` lists every problem)."""


class NotFoundException(ServiceError):
    """404: no such resource (e.g. an unregistered Health ID)."""


class IdempotencyConflictError(ServiceError):
    """409 IDEMPOTENCY_CONFLICT: an Idempotency-Key reused with another payload."""


class RateLimitError(ServiceError):
    """429, after the retries: ``retry_after`` is the seconds to wait."""

    def __init__(self, message: str, retry_after: Optional[float] = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ServerError(ServiceError):
    """5xx after the retries, a network failure, or an answer that is not JSON."""


class WebhookSignatureError(ServiceError):
    """A webhook signature that is invalid, missing, stale or from the future."""


def error_for(status: int, body: Any, headers: Mapping[str, str]) -> ServiceError:
    """The exception for an error answer (the rule the TypeScript and PHP libraries share, see the vectors)."""
    request_id = headers.get("x-request-id")
    if not isinstance(body, dict):
        return ServerError(f"HTTP {status}: the answer is not JSON", status=status, request_id=request_id, body=body)
    code = body.get("error_code") if isinstance(body.get("error_code"), str) else None
    message = body.get("message") if isinstance(body.get("message"), str) else f"HTTP {status}"
    kw = dict(status=status, error_code=code, request_id=request_id, body=body)
    if status == 401:
        return AuthenticationError(message, **kw)
    if status == 403:
        return ConsentRequiredError(message, **kw) if code == "CONSENT_REQUIRED" else AuthorizationError(message, **kw)
    if status == 404:
        return NotFoundException(message, **kw)
    if status == 409 and code == "IDEMPOTENCY_CONFLICT":
        return IdempotencyConflictError(message, **kw)
    if status in (400, 422):
        return ValidationError(message, **kw)
    if status == 429:
        retry_after = body.get("retry_after")
        if not isinstance(retry_after, (int, float)):
            try:
                retry_after = float(headers.get("retry-after") or "")
            except ValueError:
                retry_after = None
        return RateLimitError(message, retry_after=retry_after, **kw)
    if status >= 500:
        return ServerError(message, **kw)
    return ServiceError(message, **kw)
