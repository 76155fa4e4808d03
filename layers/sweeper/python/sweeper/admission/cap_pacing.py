"""A rate that a concurrency cap binds is paced at the cap's throughput, with the burst
tolerance the vendor's rule then leaves.

A cap of C calls at once, each taking the vendor's median latency p50, lets through about
C / p50 calls a second (cap_terms.py; the mean latency of a right-skewed distribution is
above the median, so fewer). A scope's rate paced faster than that buys nothing, and what it
costs is where a call's slot lies: a call gets its lease when another call ends, at no time
the limiter knows, and the scope's next slot may still be ahead (other environments' blocks
stacked on its `tat`). Paced at C / p50 instead, a window of N per T leaves the GCRA the
tolerance `N * I - T - a` (sweeper.pacing_rule, exact: the rule never exceeds the window
whatever the calls do), so a slot up to that far ahead is granted now. A policy that sets its
rate's headroom or burst, an adaptive or learned rate, or a cap with no planned latency is left
as it is.
"""

from __future__ import annotations

import math

from sweeper.config import Policy
from sweeper.config.regimes import RateArm


def cap_paced(policy: Policy) -> Policy:
    """The policy with its scope's rate paced at its tightest cap's throughput, when a cap
    with a planned latency (`action.latency`) binds before the rate; else `policy` itself."""
    quota = policy.quota
    first = policy.limits[0]
    caps = [limit.max_in_flight for limit in policy.further_limits if limit.max_in_flight]
    latency = policy.action.latency
    if (
        not caps
        or latency is None
        or quota.adaptive
        or quota.headroom is not None
        or quota.burst != "derived"
        or first.learn is not None
    ):
        return policy
    throughput = min(caps) / latency[0]
    if throughput >= quota.rate_per_second:
        return policy
    # rounded down to the thousandth, as every headroom is: never above the cap's throughput
    headroom = math.floor(throughput * quota.period_seconds / quota.limit * 1000) / 1000
    if headroom <= 0:
        return policy
    paced = quota.model_copy(update={"headroom": headroom})
    arm = first.arm(RateArm)
    assert arm is not None  # the first limit has a rate (Policy's validation)
    limits = [first.with_arm(arm.model_copy(update={"rate": paced})), *policy.further_limits]
    return policy.model_copy(update={"limits": limits, "quota": paced})
