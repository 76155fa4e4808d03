"""A learned scope starts from the vendor's first answer (sweeper.admission.learned).

Until an answer for the scope has been read, a learned limit admits one call per round trip of
the vendor (its stated p95 latency); the first answer sets the rate every consumer reserves
at: the one it states, or the told one when it states nothing.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from typing import Any

import pytest

from sweeper import runtime
from sweeper.config import Policy
from sweeper_local.vendor import VendorSimulator
from tests.conftest import Pipeline
from tests.integration.test_learned_limits import held_rate, learning, run

pytestmark = pytest.mark.integration

#: The vendor's answers take this long (seconds), and the policy states it as its p95.
ROUND_TRIP_SECONDS = 0.6


def with_round_trip(p: Pipeline, monkeypatch: pytest.MonkeyPatch, p95: float) -> Pipeline:
    """The pipeline's policy stating the vendor's p95 latency (`p95` seconds)."""
    data = p.policy.model_dump()
    data["action"].update(latency_p50_seconds=p95 / 2, latency_p95_seconds=p95)
    policy = Policy.model_validate(data)
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    runtime.reset()
    return replace(p, policy=policy)


def test_a_fresh_scope_sends_one_call_per_round_trip_until_the_first_answer(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a vendor answering in 0.6 s and stating 20 calls a second, a policy told 40 (a
    # ceiling) and stating the vendor's p95 latency, four calls at a time
    sim = VendorSimulator(
        quota=(20, 1.0),
        quota_scope="global",
        limit_dialect="ratelimit",
        latency_seconds=ROUND_TRIP_SECONDS,
    )
    with sim as vendor:
        p = learning(pipeline, monkeypatch, vendor, "ratelimit", told=(40, 1.0), parallel_calls=4)
        p = with_round_trip(p, monkeypatch, ROUND_TRIP_SECONDS)
        # When eight jobs of a scope no consumer has paced yet are called
        run(p, 8)
        audit = vendor.audit()
    arrivals = sorted(audit.arrivals)
    # Then the second call waited a round trip (the first answer), not the told interval
    assert arrivals[1] - arrivals[0] >= ROUND_TRIP_SECONDS - 0.05
    # And once answered, calls went closer than a round trip apart: at the learned rate
    answered = arrivals[0] + ROUND_TRIP_SECONDS
    later = [at for at in arrivals if at >= answered]
    gaps = [b - a for a, b in pairwise(later)]
    assert min(gaps) < ROUND_TRIP_SECONDS / 2
    assert held_rate(p) == pytest.approx(20 * p.policy.quota.effective_headroom, abs=0.002)
    assert audit.quota_rejections == 0


def test_a_vendor_stating_nothing_raises_the_scope_to_the_told_rate_at_its_first_answer(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a vendor that states no limit, and a policy told 5 calls a second whose start
    # (one call per stated p95 of 2 s) is half a call a second
    with VendorSimulator() as vendor:
        p = learning(pipeline, monkeypatch, vendor, "ratelimit", told=(5, 1.0))
        p = with_round_trip(p, monkeypatch, 2.0)
        # When four jobs are called, one at a time
        assert run(p, 4) == 4
        arrivals: list[Any] = sorted(vendor.audit().arrivals)
    # Then the scope is held at the told rate from the first answer on, not at the start
    assert held_rate(p) == pytest.approx(p.policy.quota.rate_per_second, abs=0.002)
    assert arrivals[-1] - arrivals[1] < 2.0
