"""Consent artefacts, verified offline (docs/consent-artefacts.md), with the standard library only.

An artefact is a compact JWS signed RS256 (RSASSA-PKCS1-v1_5 with SHA-256) by Pont's token key. Verifying RS256 needs
no cryptography package: it is one modular exponentiation with the public key of Pont's key set
(``GET /.well-known/jwks.json``) and a constant-time comparison with the expected encoding of the SHA-256 digest.
"""
import base64
import hashlib
import hmac
import json
import time
from typing import Any, Mapping, Optional

from .errors import PontError


class ArtefactVerificationError(PontError):
    """A consent artefact that does not verify: malformed, signed by no key of the set, tampered with, or expired."""


# DER of DigestInfo { sha256, NULL } before the 32-byte digest (RFC 8017 section 9.2, note 1).
_SHA256_DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _int(part: str) -> int:
    return int.from_bytes(_b64(part), "big")


def _rs256_valid(signing_input: bytes, signature: bytes, n: int, e: int) -> bool:
    k = (n.bit_length() + 7) // 8
    if len(signature) != k or n.bit_length() < 2048:
        return False
    s = int.from_bytes(signature, "big")
    if s >= n:
        return False
    em = pow(s, e, n).to_bytes(k, "big")
    t = _SHA256_DIGEST_INFO + hashlib.sha256(signing_input).digest()
    expected = b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t
    return hmac.compare_digest(em, expected)


def verify_consent_artefact(jws: str, jwks: Mapping[str, Any], now: Optional[float] = None, issuer: Optional[str] = None) -> dict:
    """Verifies a consent artefact with Pont's public key set and returns its payload (``payload["consent"]`` holds the
    artefact). Raises ArtefactVerificationError when it is malformed, no RSA key of the set has its ``kid``, the
    signature does not hold over the exact bytes, or ``exp`` has passed. A valid signature says what was granted: check
    ``consents.revoked`` before relying on it."""
    parts = jws.split(".") if isinstance(jws, str) else []
    if len(parts) != 3:
        raise ArtefactVerificationError("Not a compact JWS")
    try:
        header = json.loads(_b64(parts[0]))
        payload = json.loads(_b64(parts[1]))
        signature = _b64(parts[2])
    except (ValueError, TypeError) as err:
        raise ArtefactVerificationError(f"The JWS is not base64url JSON ({err})") from None
    if not isinstance(header, dict) or header.get("alg") != "RS256":
        raise ArtefactVerificationError("Unexpected alg (consent artefacts are RS256)")
    key = next((k for k in (jwks or {}).get("keys", []) if isinstance(k, dict) and k.get("kid") == header.get("kid") and k.get("kty") == "RSA"), None)
    if key is None:
        raise ArtefactVerificationError(f"No RSA key {header.get('kid')!r} in the key set (rotated out or revoked: fetch the artefact again)")
    try:
        valid = _rs256_valid(f"{parts[0]}.{parts[1]}".encode("ascii"), signature, _int(key["n"]), _int(key["e"]))
    except (KeyError, ValueError, TypeError):
        valid = False
    if not valid:
        raise ArtefactVerificationError("The signature does not verify")
    if not isinstance(payload, dict) or not isinstance(payload.get("consent"), dict):
        raise ArtefactVerificationError("No consent in the payload")
    exp = payload.get("exp")
    if isinstance(exp, (int, float)) and exp <= (time.time() if now is None else now):
        raise ArtefactVerificationError("The consent has expired (exp)")
    if issuer is not None and payload.get("iss") != issuer:
        raise ArtefactVerificationError(f"Issued by {payload.get('iss')!r}, not {issuer!r}")
    return payload
