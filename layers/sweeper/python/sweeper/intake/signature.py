"""The webhook's signature: `Sweeper-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`.

`v1` is HMAC-SHA256 over `"<t>.<raw body>"` with the policy's webhook secret. The timestamp
binds the signature to a moment (a replay outside the tolerance is stale); the replay markers
(sweeper.intake.replay) refuse a second use inside it. Several `v1` entries may be sent (a
sender mid-rotation signs with both secrets); unknown keys are ignored, for later schemes. The
receiver accepts a signature made with any of the secrets it is given: during a rotation, the
current one and the previous one (sweeper.intake.secrets).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from sweeper.errors import SignatureError

SIGNATURE_HEADER = "sweeper-signature"
SCHEME = "v1"
#: Bounds on what is parsed at all: more is refused unread.
MAX_HEADER_LENGTH = 1024
MAX_SIGNATURES = 4
_HEX_DIGEST_LENGTH = 64
_MAX_TIMESTAMP_DIGITS = 12


@dataclass(frozen=True, slots=True)
class VerifiedSignature:
    timestamp: int
    #: The v1 value that matched: with the timestamp, it names this exact request.
    digest: str


def digest(secret: str, timestamp: int, body: bytes) -> str:
    """The v1 value of `body` at `timestamp` under `secret` (what a sender signs with)."""
    message = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def verify(
    header: str | None,
    body: bytes,
    secrets: tuple[str, ...],
    *,
    now: float,
    tolerance_seconds: int,
) -> VerifiedSignature:
    """Check the header against `body` signed with any of `secrets`; raise SignatureError with a
    reason code otherwise.

    The comparison is constant-time. A timestamp further than `tolerance_seconds` from `now`,
    in either direction, is stale even when the digest matches.
    """
    if not header:
        raise SignatureError("missing_signature")
    if len(header) > MAX_HEADER_LENGTH:
        raise SignatureError("malformed_signature")
    timestamp: int | None = None
    digests: list[str] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            raise SignatureError("malformed_signature")
        if key == "t":
            if timestamp is not None or not (
                value.isascii() and value.isdigit() and len(value) <= _MAX_TIMESTAMP_DIGITS
            ):
                raise SignatureError("malformed_signature")
            timestamp = int(value)
        elif key == SCHEME:
            if len(value) != _HEX_DIGEST_LENGTH or not _is_hex(value):
                raise SignatureError("malformed_signature")
            digests.append(value.lower())
    if timestamp is None or not digests or len(digests) > MAX_SIGNATURES:
        raise SignatureError("malformed_signature")
    if abs(now - timestamp) > tolerance_seconds:
        raise SignatureError("stale_timestamp")
    # Compare every candidate with every secret, always: the time taken does not say which
    # one matched.
    matched = [
        expected
        for expected in (digest(secret, timestamp, body) for secret in secrets)
        for d in digests
        if hmac.compare_digest(d, expected)
    ]
    if not matched:
        raise SignatureError("signature_mismatch")
    return VerifiedSignature(timestamp, matched[0])


def _is_hex(value: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in value)
