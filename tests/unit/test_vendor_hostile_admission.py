"""A learned limit fed a hostile or buggy vendor's answers, from the headers to the gate.

Each answer is read by the policy's own reader (sweeper.vendor_limits) and handed to its
admission (sweeper.admission.learned), as the consumer does after a call. Whatever the vendor
sends (negative, NaN, huge, non-numeric, duplicated values, remaining above the limit, a reset
years away or long past, the wrong kind of reset, a window of 0 s, a cost that is a boolean or
a string): no exception, the pace never above the told ceiling, and no closure past
`MAX_WAIT_SECONDS`; a value left aside is counted and logged by the call's ids, never quoted.
"""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sweeper.actions.answer_match import Answer
from sweeper.admission import Clocks, Permit, admission_for
from sweeper.admission.learned import reader_for
from sweeper.config import Policy
from sweeper.observability import Metric
from sweeper.vendor_limits import unread
from sweeper.vendor_reading import MAX_WAIT_SECONDS
from tests.unit.test_learned_costs import NOW, SCOPE, _job, _PointsItem
from tests.unit.test_vendor_limits_hostile import ANY_TEXT, JSON_VALUES

HOSTILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: The told rate of every policy here: 100 calls (or points) a second.
TOLD = 100

LEARNS: dict[str, Any] = {
    "ratelimit": "ratelimit",
    "x-ratelimit seconds": {"source": "x-ratelimit"},
    "x-ratelimit epoch": {"source": "x-ratelimit", "reset": "epoch"},
    "pattern": {
        "header": "Sforce-Limit-Info",
        "pattern": r"api-usage=(?P<used>\d+)/(?P<quota>\d+);reset=(?P<reset>\d+)",
    },
    "shopify": {"cost": {"reserve": 10, "bucket": "shopify"}},
}


def _policy(learn: object) -> Policy:
    return Policy.model_validate(
        {
            "name": "vendor",
            "limits": [
                {
                    "name": "core",
                    "key": "{tenant_id}",
                    "rate": {"limit": TOLD, "period_seconds": 1},
                    "learn": learn,
                }
            ],
        }
    )


@pytest.fixture(autouse=True)
def _nothing_said_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    # each test is a fresh environment: what another test's answers logged is not known to it
    monkeypatch.setattr(unread, "SAID", unread.Said())


class _Metrics:
    def __init__(self) -> None:
        self.counts: dict[str, float] = {}

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.counts[name] = self.counts.get(name, 0.0) + value


def _answer(
    policy: Policy, item: _PointsItem, metrics: _Metrics, headers: dict[str, str], body: bytes
) -> None:
    """One call of the scope: admitted, its answer read by the policy's reader and handed on."""
    reader = reader_for(policy)
    assert reader is not None
    clocks = Clocks(lambda _: None, lambda: NOW, lambda: 0.0, random.Random(0), metrics)
    batch = admission_for(policy, item, clocks, 1, {SCOPE: 1})
    admission = batch.call(_job(0), {"key": "key-0"})
    assert isinstance(admission.admit(lambda: None), Permit)
    admission.ended(None, reader.read(Answer.of(200, headers, body), NOW))
    admission.done()


#: Numbers as a buggy vendor writes them: negative, huge, past a float, fractions.
NUMBERS = st.integers(-(10**12), 10**40).map(str) | st.sampled_from(
    ["1e308", "NaN", "-0", "0", "0.5", "1" * 400, "2678400", "1700000060", "30, 30"]
)
HEADERS = st.fixed_dictionaries(
    {},
    optional={
        "RateLimit-Policy": st.builds('"core";q={};w={}'.format, NUMBERS, NUMBERS) | ANY_TEXT,
        "RateLimit": st.builds('"core";r={};t={}'.format, NUMBERS, NUMBERS) | ANY_TEXT,
        "x-ratelimit-limit": NUMBERS | ANY_TEXT,
        "x-ratelimit-remaining": NUMBERS | ANY_TEXT,
        "x-ratelimit-reset": NUMBERS | ANY_TEXT,
        "x-ratelimit-used": NUMBERS,
        "Sforce-Limit-Info": st.builds(
            "api-usage={}/{};reset={}".format, NUMBERS, NUMBERS, NUMBERS
        ),
    },
)
COSTS = st.builds(
    lambda requested, actual, level, most, restore: {
        "extensions": {
            "cost": {
                "requestedQueryCost": requested,
                "actualQueryCost": actual,
                "throttleStatus": {
                    "currentlyAvailable": level,
                    "maximumAvailable": most,
                    "restoreRate": restore,
                },
            }
        }
    },
    *(JSON_VALUES | st.sampled_from([0, 0.0, 1e-300, 5e-324, 1e308, 10**9]) for _ in range(5)),
)


def _body(document: object) -> bytes:
    try:
        return json.dumps(document).encode()
    except ValueError:  # NaN is not JSON; send it the way a careless server would
        return json.dumps(document, allow_nan=True).encode()


@HOSTILE
@given(
    st.sampled_from(sorted(LEARNS)),
    st.lists(st.tuples(HEADERS, COSTS), min_size=1, max_size=6),
)
def test_any_answers_never_raise_never_pace_above_the_ceiling_never_close_past_the_bound(
    learn: str, answers: list[tuple[dict[str, str], object]]
) -> None:
    # Given a learned limit told 100 a second, and any sequence of its vendor's answers
    policy = _policy(LEARNS[learn])
    item, metrics = _PointsItem(), _Metrics()
    for headers, document in answers:
        item.closed_until = None  # each call is admitted: what its answer does is the property
        # When each is read and handed to the admission, it raises nothing
        _answer(policy, item, metrics, headers, _body(document))
        # Then the pace held is never above the told ceiling
        assert item.rate is None or item.rate <= TOLD
        # And a gate closed by the answer reopens within the bound
        assert item.closed_until is None or item.closed_until <= NOW + MAX_WAIT_SECONDS


@pytest.mark.parametrize(
    ("learn", "headers", "body"),
    [
        ("x-ratelimit seconds", {"x-ratelimit-limit": "10", "x-ratelimit-reset": "1700000060"}, {}),
        ("x-ratelimit epoch", {"x-ratelimit-limit": "10", "x-ratelimit-reset": "30"}, {}),
        ("ratelimit", {"RateLimit-Policy": '"core";q=10;w=0'}, {}),
        ("shopify", {}, {"extensions": {"cost": {"actualQueryCost": "1700000060"}}}),
    ],
)
def test_a_value_left_aside_is_counted_and_logged_by_the_calls_ids_never_quoted(
    learn: str,
    headers: dict[str, str],
    body: dict[str, object],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given an answer with one value that cannot be read (an epoch reset where seconds are
    # configured, seconds where an epoch is, a window of 0 s, a cost that is a string)
    policy = _policy(LEARNS[learn])
    item, metrics = _PointsItem(), _Metrics()
    # When it is handed to the admission
    with caplog.at_level(logging.WARNING):
        _answer(policy, item, metrics, headers, json.dumps(body).encode())
    # Then it closes nothing, and it is counted ...
    assert item.closed_until is None
    assert metrics.counts.get(Metric.VENDOR_VALUES_IGNORED) == 1
    # ... and logged once, by the call's ids and the fields' codes, never with what was sent
    (record,) = [r for r in caplog.records if r.getMessage().startswith("vendor values ignored")]
    assert record.__dict__["key"] == "key-0"
    assert record.__dict__["code"] == "vendor_values_ignored"
    assert record.__dict__["ignored"]
    assert "1700000060" not in json.dumps(record.__dict__, default=str)
    assert "30" not in json.dumps(record.__dict__["ignored"])


def test_a_reset_past_the_stated_window_closes_the_gate_one_window_at_most() -> None:
    # Given a vendor that states 10 calls per 60 s, none remaining, and a reset in 3,000 s
    policy = _policy("ratelimit")
    item, metrics = _PointsItem(), _Metrics()
    headers = {"RateLimit-Policy": '"core";q=10;w=60', "RateLimit": '"core";r=0;t=3000'}
    # When its answer is handed to the admission
    _answer(policy, item, metrics, headers, b"")
    # Then the gate closes (the window is over), until the window has turned, not 50 of them
    assert item.closed_until == NOW + 60


def test_many_answers_with_the_same_bad_header_are_each_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a policy configured for a reset in seconds whose vendor sends an epoch time, as
    # every one of its answers will (a misconfiguration, at a hundred calls a second)
    policy = _policy(LEARNS["x-ratelimit seconds"])
    item, metrics = _PointsItem(), _Metrics()
    headers = {"x-ratelimit-limit": "10", "x-ratelimit-reset": "1700000060"}
    # When fifty of its answers are handed to the admission within the same second
    with caplog.at_level(logging.WARNING):
        for _ in range(50):
            _answer(policy, item, metrics, headers, b"")
    # Then each is counted ...
    assert metrics.counts.get(Metric.VENDOR_VALUES_IGNORED) == 50
    # ... and the diagnostic is logged once, by a call's ids and its code
    said = [r for r in caplog.records if r.getMessage().startswith("vendor values ignored")]
    assert len(said) == 1
    assert said[0].__dict__["code"] == "vendor_values_ignored"
    assert said[0].__dict__["key"] == "key-0"
