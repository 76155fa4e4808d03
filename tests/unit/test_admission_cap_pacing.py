"""A rate that a concurrency cap binds is paced at the cap's throughput, with the burst
tolerance the vendor's window rule then leaves (sweeper.admission.cap_pacing).

A call gets its lease when another call ends, at no time the limiter knows; its scope's `tat`
may by then be ahead of now (other environments' blocks). Paced at the cap's throughput, the
rate leaves a tolerance that grants such a call its slot now instead of after them.
"""

from __future__ import annotations

import random

from sweeper.admission import Clocks, admission_for
from sweeper.admission.cap_pacing import cap_paced
from sweeper.config import LimitConfig, Policy, Quota
from sweeper.limiter import Grant
from tests.unit.test_admission_burst import NOW, _GcraWithTolerance, _Sink

#: Scenario (c) of `sweeper bench rate --only limits`: 100/1 s, at most 10 in flight, p50 0.3 s.
RATE = Quota(limit=100, period_seconds=1.0, slack_seconds=0.5)


def _policy(
    rate: Quota = RATE, cap: int | None = 10, p50: float | None = 0.3, **action: object
) -> Policy:
    limits = [LimitConfig(name="scope", key="vendor:{tenant_id}", rate=rate)]
    if cap is not None:
        limits.append(LimitConfig(name="vendor", key="vendor", max_in_flight=cap))
    fields: dict[str, object] = {
        "kind": "python",
        "callable": "acme.cleanup:run",
        "package_path": "pkg",
        **action,
    }
    if p50 is not None:
        fields["latency_p50_seconds"] = p50
    return Policy.model_validate({"name": "c", "limits": limits, "action": fields})


def test_a_call_with_its_lease_does_not_wait_for_a_slot_ahead_within_the_tolerance() -> None:
    # Given scenario (c)'s policy, its scope's tat 0.3 s ahead of now (other environments'
    # blocks, 19 slots at the rate's default headroom)
    limiter = _GcraWithTolerance()
    limiter.tat["s"] = NOW + 0.3
    clocks = Clocks(lambda _: None, lambda: limiter.now, lambda: 0.0, random.Random(0), _Sink())
    batch = admission_for(_policy(), limiter, clocks, 10, {"s": 40})  # type: ignore[arg-type]
    interval = batch._policy.quota.interval_seconds
    # When a call that just got its lease takes its scope's next slot
    _, decision = batch.slots.reserve("s", interval, 5.0, object())
    # Then the slot is now: the tolerance covers the slots ahead, the call does not wait
    assert isinstance(decision, Grant)
    assert decision.slot_at == NOW


def test_the_rate_is_paced_at_the_caps_throughput_with_the_tolerance_the_window_leaves() -> None:
    # Given (c): the rate allows 64/s at its default headroom, the cap 10 / 0.3 s = 33.3/s
    assert RATE.rate_per_second > 10 / 0.3
    # When the policy is paced under its cap
    quota = cap_paced(_policy()).quota
    # Then the rate is the cap's throughput (rounded down), the tolerance N*I - T - a:
    # more than 40 calls' worth
    assert quota.rate_per_second <= 10 / 0.3
    assert quota.rate_per_second > 10 / 0.3 * 0.99
    pacing = quota.pacing()
    room = 100 * pacing.interval_seconds - 1.0 - RATE.arrival_budget_seconds
    assert abs(pacing.tolerance_seconds - room) < 1e-5  # the interval in whole µs
    assert pacing.burst_calls >= 40


def test_a_cap_that_does_not_bind_or_has_no_latency_leaves_the_rate_as_it_is() -> None:
    # a cap whose throughput is above the rate, a cap without a planned latency, no cap
    for policy in (_policy(cap=30), _policy(p50=None), _policy(cap=None)):
        assert cap_paced(policy).quota == policy.quota


def test_a_rate_whose_headroom_or_burst_is_set_is_left_as_set() -> None:
    # the user's own headroom or burst, or an adaptive rate, is not re-derived
    for rate in (
        RATE.model_copy(update={"headroom": 0.5}),
        Quota(limit=100, period_seconds=1.0, burst=0),
        Quota(limit=100, period_seconds=1.0, adaptive=True),
    ):
        policy = _policy(rate)
        assert cap_paced(policy).quota == policy.quota
