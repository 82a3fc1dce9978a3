"""Pont's official Python client (standard library only).

    from pont import Pont
    pont = Pont(client_id="cli_...", client_secret="pcs_...", environment="sandbox")
    pont.health_ids.resolve({"first_name": "Ama", "last_name": "Mensah", "date_of_birth": "1991-02-03"})

Webhook receivers need no client: ``from pont import webhooks; webhooks.verify_signature(raw, header, secret)``.
"""
from . import webhooks
from .client import ENVIRONMENTS, Pont
from .errors import (AuthenticationError, AuthorizationError, ConsentRequiredError, IdempotencyConflictError,
                     NotFoundException, RateLimitError, ServerError, ServiceError, ValidationError,
                     WebhookSignatureError)

__all__ = [
    "Pont", "ENVIRONMENTS", "webhooks", "ServiceError", "AuthenticationError", "AuthorizationError",
    "ConsentRequiredError", "ValidationError", "NotFoundException", "IdempotencyConflictError", "RateLimitError",
    "ServerError", "WebhookSignatureError",
]
