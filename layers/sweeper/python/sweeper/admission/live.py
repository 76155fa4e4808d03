"""Live limits in admission: an operator's pause or rate, in force without a redeploy (a wrapper).

The operators' changes are read from the limiter table (sweeper.limiter.live) at most once per
LIVE_READ_SECONDS per environment. A call under a paused limit is not admitted: its record goes
back for PAUSED_RECHECK_SECONDS with the reason "paused" (the ledger's code `wait_paused`).
A limit given another rate is paced at it: the batch's admission (the facade, `rated`) takes a
copy of the policy whose limit has that rate, so every regime (rate.py, composed.py, the paired
limits, an adaptive or learned rate's cap) reserves at the live rate, on the same shared item,
with no hook of its own. Without a live change, the admission is the wrapped one unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

from sweeper.admission.around import Around
from sweeper.admission.base import Abilities, Admission, Clocks, Deferral, Permit, TimeLeft
from sweeper.admission.ticket import Ticket
from sweeper.config import LimitConfig, Policy, Quota
from sweeper.config.regimes import RateArm
from sweeper.errors import ConfigError, OperatorError
from sweeper.limiter.live import LiveLimit
from sweeper.observability import Metric

#: A record under a paused limit comes back this often to look again: a resume is in force
#: for queued records within it (plus LIVE_READ_SECONDS).
PAUSED_RECHECK_SECONDS = 30.0


def live_quota(told: Quota, change: LiveLimit) -> Quota:
    """The told quota at the live change's rate (its algorithm and headroom kept)."""
    if change.rate_limit is None or change.rate_period_seconds is None:
        return told
    return told.model_copy(
        update={"limit": change.rate_limit, "period_seconds": change.rate_period_seconds}
    )


def told_of(limit: LimitConfig) -> dict[str, object]:
    """What the deployed config tells of `limit`, as `sweeper limits show` prints it."""
    rate = limit.rate
    told = None if rate is None else f"{rate.limit}/{rate.period_seconds:g}s"
    return {"told_rate": told, "max_in_flight": limit.max_in_flight}


def checked_rate(limit: LimitConfig, text: str, above_told: bool) -> tuple[int, float]:
    """An operator's live rate `text` (N/T) for `limit`: refused (OperatorError) on a limit
    with no rate, on bad text, and above the told rate unless `above_told`."""
    told = limit.rate
    if told is None:
        raise OperatorError(f"limit {limit.name!r} has no rate (only max_in_flight): no --rate")
    try:
        rate = Quota.parse(text)
    except ConfigError as exc:
        raise OperatorError(f"--rate: {exc}") from exc
    if rate.limit / rate.period_seconds > told.limit / told.period_seconds and not above_told:
        raise OperatorError(
            f"--rate {text} is above the told {told_of(limit)['told_rate']} of limit "
            f"{limit.name!r}: pass --above-told if the vendor allows it"
        )
    return rate.limit, rate.period_seconds


def live_policy(policy: Policy, changes: Mapping[str, LiveLimit]) -> Policy:
    """The policy with each limit given a live rate at that rate (the first limit's is also
    the policy's `quota`, the scope's)."""
    limits: list[LimitConfig] = []
    for limit in policy.limits:
        change = changes.get(limit.name)
        arm = limit.arm(RateArm)
        if change is None or arm is None or change.rate_limit is None:
            limits.append(limit)
            continue
        # the rate's own arm, its cost per call kept, at the live rate
        limits.append(limit.with_arm(arm.model_copy(update={"rate": live_quota(arm.rate, change)})))
    update: dict[str, object] = {"limits": limits}
    first = limits[0].rate
    if first is not None:
        update["quota"] = first
    return policy.model_copy(update=update)


def _changes(policy: Policy, abilities: Abilities, clocks: Clocks) -> dict[str, LiveLimit]:
    """The policy's live changes, by limit name, through the limiter's cached read (none on a
    limiter that holds no live limits)."""
    source = abilities.live
    if source is None:
        return {}
    names = [limit.name for limit in policy.limits]
    return source.live().current(policy.name, names, clocks.monotonic)


class LiveLimits(Around):
    """`inner`'s admission, under the operators' live changes to the policy's limits."""

    @staticmethod
    def rated(policy: Policy, abilities: Abilities, clocks: Clocks) -> Policy:
        """The batch's policy, each limit given a live rate at it (the facade's, once per
        batch: its slots, adaptive or learned rate's cap and paired limits follow from it)."""
        changes = _changes(policy, abilities, clocks)
        if not any(change.rate_limit is not None for change in changes.values()):
            return policy
        return live_policy(policy, changes)

    @classmethod
    def around(cls, inner: Admission, ticket: Ticket) -> Admission:
        """`inner` deferred while a limit of the call is paused live, else `inner` itself."""
        changes = _changes(ticket.policy, ticket.abilities, ticket.clocks)
        paused = sorted(name for name, change in changes.items() if change.paused)
        return cls(inner, ticket, paused) if paused else inner

    def __init__(self, inner: Admission, ticket: Ticket, paused: list[str]) -> None:
        super().__init__(inner)
        self._ticket = ticket
        self.paused = paused

    def admit(self, time_left: TimeLeft) -> Permit | Deferral:
        self._ticket.clocks.metrics.add_metric(Metric.GATE_DEFERRALS, "Count", 1)
        return Deferral(PAUSED_RECHECK_SECONDS, "paused")
