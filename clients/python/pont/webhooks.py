"""Webhook helpers (interface section 6.3): usable alone, without a client, a token or the network."""
import hashlib
import hmac
import json
import re
import time
from typing import Any, Dict, Optional, Union

from .errors import WebhookSignatureError

DEFAULT_TOLERANCE = 300
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def verify_signature(raw_body: Union[bytes, str], signature_header: Optional[str], secret: str,
                     tolerance: int = DEFAULT_TOLERANCE, now: Optional[int] = None) -> bool:
    """Checks ``X-Service-Signature`` (``t=<unix>,v1=<hex>``) over the raw body bytes, in constant time.

    Returns True, or raises WebhookSignatureError for a bad, missing, stale or future signature.
    ``now`` (Unix seconds) is for tests.
    """
    if not signature_header:
        raise WebhookSignatureError("Missing X-Service-Signature header")
    timestamp = None
    signatures = []
    for part in signature_header.split(","):
        key, _, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if key == "t":
            timestamp = value
        elif key == "v1" and value:
            signatures.append(value)
    if not timestamp or not timestamp.isdigit() or not signatures:
        raise WebhookSignatureError("Malformed X-Service-Signature header")
    current = int(time.time()) if now is None else now
    if abs(current - int(timestamp)) > tolerance:
        raise WebhookSignatureError("Signature timestamp outside the tolerance (stale, replayed or from the future)")
    body = raw_body.encode("utf-8") if isinstance(raw_body, str) else bytes(raw_body)
    expected = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256).hexdigest()
    if not any(_HEX64.match(s) and hmac.compare_digest(s, expected) for s in signatures):
        raise WebhookSignatureError("Signature does not match the body")
    return True


def parse_event(raw_body: Union[bytes, str], signature_header: Optional[str], secret: str,
                tolerance: int = DEFAULT_TOLERANCE, now: Optional[int] = None) -> Dict[str, Any]:
    """Verifies, then returns the event envelope (interface section 6.2) as a dict."""
    verify_signature(raw_body, signature_header, secret, tolerance, now)
    try:
        return json.loads(raw_body.decode("utf-8") if isinstance(raw_body, bytes) else raw_body)
    except ValueError:
        raise WebhookSignatureError("The signed body is not JSON") from None
