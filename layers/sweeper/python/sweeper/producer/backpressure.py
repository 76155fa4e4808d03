"""How much work a policy may leave on its consumers; when an expired lease may be published again.

The limits' formula (`sweeper.producer.claim_bounds`: what the tightest limit over the whole policy
uses in half a lease; a policy whose limits are all per tenant has none, the claim holding each
scope to its own) assumes the consumers keep up with the limits. When they run slower (a slow
vendor, few environments, an emulator), work published on that assumption outlives its lease, is
reclaimed and published again while its first message still waits, and the queue deepens: a
reclaim storm. So each producer run sizes its budget from what the ledger shows is happening:

- **Achieved rate.** The jobs of the policy settled in the last half lease, divided by the time
  between the first and the last of those settlements (never less than a tenth of the window): the
  rate the consumers reach while they have work, not the rate they were offered.
- **Budget** = that rate x half a lease (`LEASE_DRAIN_FRACTION`): what the consumers drain within
  half a lease, so a message queued now is received before its lease runs out. Never above the
  limits' formula, never below the floor.
- **Floor** = one batch per consumer environment, or 1/16 of the limits' formula if larger (of
  one scope's, `Policy.max_in_flight`, when no limit covers the whole policy), and never above it:
  a fresh policy, or one whose consumers were paused or whose work sat in the DLQ (nothing settled
  lately), still starts, and what it starts with is drained within a lease by consumers 32 times
  slower than the quota.
- **Depth** (what the budget is compared with): leased rows the consumers may still hold
  (`Ledger.count_on_consumers`): neither settled nor deferred. A row a consumer sent back to wait
  (throttled, closed gate, no token, retry later) has its `next_attempt_at` ahead and its message
  hidden until then: it is not counted, so throttled or deferred work never holds back due work.

And a reclaim never publishes a row again within one visibility timeout of its last publish
(`republish_delay_seconds`): while the lease is shorter than the queue's visibility timeout, an
expired lease's message may still be in a consumer's hands or hidden, and would come back on its
own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sweeper.config import LEASE_DRAIN_FRACTION, Policy
from sweeper.ledger.rows import Settled
from sweeper.producer.claim_bounds import claim_bounds

#: The floor is at least this share of the limits' formula.
FLOOR_FRACTION = 1 / 16
#: The achieved rate's time span is never taken as shorter than this share of the window, so a
#: handful of settlements in one instant does not read as a huge rate.
MIN_SPAN_FRACTION = 0.1


@dataclass(frozen=True, slots=True)
class Budget:
    """The in-flight budget of one producer run and what set it."""

    limit: int
    reason: str  # "quota": the quota's formula; "achieved": the consumers' rate; "floor"
    rate_per_second: float


def window_seconds(policy: Policy) -> float:
    """How far back settlements are counted: half a lease."""
    return policy.lease_seconds * LEASE_DRAIN_FRACTION


def formula(policy: Policy) -> int:
    """What the limits drain within half a lease: the tightest policy-wide limit's rows
    (sweeper.producer.claim_bounds), or one scope's when no limit covers the whole policy."""
    cap = claim_bounds(policy).policy_cap
    return policy.max_in_flight if cap is None else cap


def floor(policy: Policy) -> int:
    """The least a run may keep in flight (see the module docstring)."""
    per_environment = policy.consumer.environments * policy.consumer.batch_size
    most = formula(policy)
    return min(most, max(1, per_environment, math.ceil(most * FLOOR_FRACTION)))


def achieved_rate(policy: Policy, settled: Settled) -> float:
    """Jobs settled per second while the consumers had work (0 when nothing settled)."""
    if settled.count <= 0 or settled.first is None or settled.last is None:
        return 0.0
    span = (settled.last - settled.first).total_seconds()
    return settled.count / max(span, window_seconds(policy) * MIN_SPAN_FRACTION)


def in_flight_budget(policy: Policy, settled: Settled) -> Budget:
    """The most rows this run may leave on the consumers (see the module docstring)."""
    cap = claim_bounds(policy).policy_cap
    rate = achieved_rate(policy, settled)
    wanted = math.floor(rate * policy.lease_seconds * LEASE_DRAIN_FRACTION)
    least = floor(policy)
    if cap is not None and max(wanted, least) >= cap:
        return Budget(cap, "quota", rate)
    if wanted <= least:
        return Budget(least, "floor", rate)
    return Budget(wanted, "achieved", rate)


def republish_delay_seconds(policy: Policy) -> int:
    """How long after its lease expired a row waits before a reclaim may publish it again.

    A claim publishes the row and leases it for `lease_seconds`; its message, once received,
    stays hidden for the queue's visibility timeout. When that is longer than the lease, the
    reclaim waits the difference, so the last publish is at least one visibility timeout old.
    """
    return max(0, policy.consumer.visibility_timeout_seconds - policy.lease_seconds)
