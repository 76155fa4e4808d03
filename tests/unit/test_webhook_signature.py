"""The webhook signature: HMAC-SHA256 over "<t>.<raw body>", with a timestamp tolerance."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from sweeper.errors import SignatureError
from sweeper.intake.signature import verify
from sweeper_local.webhook import sign

SECRET = "s3cret-for-tests"
BODY = b'{"tenant_id":"t1","object_id":"o1"}'
T = 1_800_000_000


def _reason(header: str | None, body: bytes = BODY, now: float = T, secret: str = SECRET) -> str:
    with pytest.raises(SignatureError) as caught:
        verify(header, body, (secret,), now=now, tolerance_seconds=300)
    return caught.value.reason


def test_a_signature_made_as_documented_verifies() -> None:
    digest = hmac.new(SECRET.encode(), f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()

    verified = verify(f"t={T},v1={digest}", BODY, (SECRET,), now=T + 10, tolerance_seconds=300)

    assert (verified.timestamp, verified.digest) == (T, digest)
    assert sign(SECRET, T, BODY) == f"t={T},v1={digest}"


def test_a_changed_body_is_a_mismatch() -> None:
    assert _reason(sign(SECRET, T, BODY), body=BODY + b" ") == "signature_mismatch"


def test_another_secret_is_a_mismatch() -> None:
    assert _reason(sign("other", T, BODY)) == "signature_mismatch"


def test_a_signed_timestamp_changed_afterwards_is_a_mismatch() -> None:
    digest = sign(SECRET, T, BODY).split("v1=")[1]
    assert _reason(f"t={T + 1},v1={digest}") == "signature_mismatch"


@pytest.mark.parametrize("skew", [301, -301, 10_000])
def test_a_timestamp_outside_the_tolerance_is_stale(skew: int) -> None:
    assert _reason(sign(SECRET, T, BODY), now=T + skew) == "stale_timestamp"


@pytest.mark.parametrize("skew", [300, -300, 0])
def test_a_timestamp_at_the_tolerance_is_accepted(skew: int) -> None:
    verify(sign(SECRET, T, BODY), BODY, (SECRET,), now=T + skew, tolerance_seconds=300)


def test_one_matching_signature_among_several_verifies() -> None:
    good = sign(SECRET, T, BODY).split("v1=")[1]
    bad = sign("old-secret", T, BODY).split("v1=")[1]

    verified = verify(f"t={T},v1={bad},v1={good}", BODY, (SECRET,), now=T, tolerance_seconds=300)

    assert verified.digest == good


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "missing_signature"),
        ("", "missing_signature"),
        ("v1=" + "0" * 64, "malformed_signature"),  # no timestamp
        (f"t={T}", "malformed_signature"),  # no signature
        (f"t={T},v1=zz", "malformed_signature"),
        (f"t=-5,v1={'0' * 64}", "malformed_signature"),
        (f"t=1e9,v1={'0' * 64}", "malformed_signature"),
        (f"t={T},t={T},v1={'0' * 64}", "malformed_signature"),
        (f"t={T},garbage,v1={'0' * 64}", "malformed_signature"),
        (f"t={T}," + ",".join([f"v1={'0' * 64}"] * 5), "malformed_signature"),
        ("t=" + "9" * 2000, "malformed_signature"),
        (f"t={T},v0=abc,v1={'0' * 64}", "signature_mismatch"),  # unknown schemes are ignored
    ],
)
def test_malformed_headers_are_refused_by_reason(header: str | None, reason: str) -> None:
    assert _reason(header) == reason


def test_the_error_never_carries_the_secret_or_the_header() -> None:
    header = sign("other", T, BODY)
    with pytest.raises(SignatureError) as caught:
        verify(header, BODY, (SECRET,), now=T, tolerance_seconds=300)
    assert SECRET not in str(caught.value)
    assert header not in str(caught.value)
