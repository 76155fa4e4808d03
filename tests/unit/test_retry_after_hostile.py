"""A Retry-After is a vendor's word: whatever it says, the wait read from it is bounded.

A wait past `MAX_WAIT_SECONDS` (an hour, sweeper.vendor_reading) would close a scope's gate
for as long, and one past a few thousand years cannot even be added to the ledger's time: one
wrong answer would stall a policy for good, or fail the record it answered. The gate's closure
(`limiter.backoff.close_delay`) keeps the bound too, for a wait no header carried (a Lambda's).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sweeper.actions.contract import Answer
from sweeper.actions.retry_after import parse_retry_after
from sweeper.limiter import close_delay
from sweeper.models import OutcomeClass
from sweeper.vendor_reading import MAX_WAIT_SECONDS

NOW = datetime(2026, 1, 1, tzinfo=UTC)
HOSTILE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

HOSTILE_WAITS = st.sampled_from(
    [
        "99999999999",  # three thousand years
        "9" * 40,  # 10**40: a float, finite
        "9" * 400,  # past a float: infinite, read as the bound
        "1e40",
        "-1",
        "NaN",
        "inf",
        "5, 5",  # the header sent twice, joined
        "Fri, 31 Dec 9999 23:59:59 GMT",  # the last date there is
        "Mon, 01 Jan 1900 00:00:00 GMT",  # long past
        "\u0663",  # an Arabic-Indic three: a digit to `\d`, not to HTTP
        "3" * 70_000,  # larger than a header line may be
    ]
)


@HOSTILE
@given(HOSTILE_WAITS | st.text(max_size=60))
@example("Fri, 31 Dec 9999 23:59:59 GMT")
@example("99999999999")
def test_any_retry_after_is_no_wait_or_a_wait_within_the_bound(value: str) -> None:
    # Given any text a vendor may send as Retry-After
    # When it is read
    wait = parse_retry_after(value, now=NOW)
    # Then it is no wait at all, or one within [0, MAX_WAIT_SECONDS]: a gate it closes, and the
    # ledger's next attempt it sets, stay within the bound
    assert wait is None or 0.0 <= wait <= MAX_WAIT_SECONDS
    if wait is not None:
        assert NOW + timedelta(seconds=wait) > NOW - timedelta(seconds=1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("99999999999", MAX_WAIT_SECONDS),
        ("9" * 400, MAX_WAIT_SECONDS),  # past a float, as long as any wait too long: the bound
        ("3" * 70_000, MAX_WAIT_SECONDS),
        ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_WAIT_SECONDS),
        ("Thu, 01 Jan 2026 00:20:00 GMT", 1200.0),  # within the bound: as said
        ("\u0663", None),
    ],
)
def test_a_wait_past_the_bound_is_read_as_the_bound(value: str, expected: float | None) -> None:
    assert parse_retry_after(value, now=NOW) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1500", 1.5),
        ("5000000", MAX_WAIT_SECONDS),  # 83 minutes of milliseconds: bounded after scaling
        ("99999999999999", MAX_WAIT_SECONDS),
        ("9" * 400, MAX_WAIT_SECONDS),
        ("Thu, 01 Jan 2026 00:00:30 GMT", 30.0),  # a date is a date, whatever the unit
    ],
)
def test_a_wait_in_milliseconds_is_bounded_once_in_seconds(value: str, expected: float) -> None:
    # Given a vendor's own wait header, configured in milliseconds
    # Then the bound applies to the wait in seconds (bounded first, 5,000,000 ms would be 3.6 s)
    assert parse_retry_after(value, now=NOW, unit_seconds=0.001) == expected


@HOSTILE
@given(st.floats(0.0, 86_400.0), st.floats(0.0, 5.0), st.integers(0, 2**32 - 1))
def test_a_lambda_actions_own_wait_closes_a_gate_for_an_hour_at_most(
    asked: float, jitter: float, seed: int
) -> None:
    # Given the team's code answering a throttle with its own wait (the contract allows a day)
    answer = Answer(outcome=OutcomeClass.THROTTLED, retry_after_seconds=asked)
    # When the throttle closes its scope's gate
    delay = close_delay(
        answer.result().retry_after_seconds,
        None,
        None,
        0.0,
        base=1.0,
        cap=300.0,
        jitter=jitter,
        rng=random.Random(seed),
    )
    # Then as a vendor's Retry-After: never shorter than asked within the bound, never longer
    # than the bound (plus the jitter), so one answer cannot hold the policy for a day
    kept = min(asked, MAX_WAIT_SECONDS)
    assert kept <= delay <= kept + jitter
