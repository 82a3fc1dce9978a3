"""Pont's official Python client (standard library only).

    from pont import Pont
    pont = Pont.create(client_id="cli_...", client_secret="pcs_...", environment="sandbox")  # checks the credentials now
    # (Pont(...) with the same arguments is lazy: no request until the first call)
    pont.health_ids.resolve({"first_name": "Ama", "last_name": "Mensah", "date_of_birth": "1991-02-03"})

Webhook receivers need no client: ``from pont import webhooks; webhooks.verify_signature(raw, header, secret)``.
"""
from . import artefacts, webhooks
from .artefacts import ArtefactVerificationError, verify_consent_artefact
from ._http import VERSION as __version__
from ._http import ApiDict, ApiList, RequestInfo, RequestOptions, ResponseInfo
from .client import ENVIRONMENTS, BridgeAgent, Page, PatientApp, Pont
from .errors import (AuthenticationError, AuthorizationError, CancelledError, ConflictError, ConsentRequiredError, IdempotencyConflictError,
                     NetworkError, NotFoundError, NotFoundException, PayloadTooLargeError, PreconditionFailedError,
                     PontError, RateLimitError, ServerError, ServiceError, TimeoutError, ValidationError, WebhookSignatureError)

__all__ = [
    "Pont", "BridgeAgent", "PatientApp", "ENVIRONMENTS", "webhooks", "artefacts", "verify_consent_artefact", "ArtefactVerificationError", "Page", "ApiDict", "ApiList", "RequestOptions",
    "RequestInfo", "ResponseInfo", "PontError", "ServiceError", "AuthenticationError", "AuthorizationError", "ConsentRequiredError",
    "ValidationError", "NotFoundError", "NotFoundException", "ConflictError", "IdempotencyConflictError",
    "PreconditionFailedError", "PayloadTooLargeError", "RateLimitError", "ServerError", "NetworkError", "TimeoutError",
    "CancelledError", "WebhookSignatureError", "__version__",
]
