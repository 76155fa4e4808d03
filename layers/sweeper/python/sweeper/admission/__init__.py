"""Admission: every limit a vendor call is under, behind one protocol.

Split as Powertools splits its idempotency persistence: `base` holds the contract (`Admission`:
admit, ended, close, done; `Permit`, `Deferral`, `Closure`), one module per regime implements
it (`rate`: one rate, slots banked per batch in `bank`; `concurrency`: `max_in_flight` caps,
leases handed on in `handoff`; `composed`: several limits, paired on one item in `pairing`;
`adaptive`: a rate found from 429s, a wrapper; `learned`: a rate the vendor states, a
wrapper; `budget`: calls per day spread evenly, a wrapper; `limit_gates`: the gate of a limit
with no rate that a 429 can name, a wrapper), and this facade picks them from
the policy's limits, once per batch (`admission_for`): slot banking and lease hand-off are
the batch's state, shared by its threads. The consumer asks `BatchAdmission.call` for each record's
admission and never which regime it got.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sweeper.admission.adaptive import AdaptiveRate
from sweeper.admission.bank import BankedFirst, BatchSlots, GateLook
from sweeper.admission.base import (
    BLOCK_SHARE_OF_THREADS,
    BLOCK_SPAN_SECONDS,
    GATE_READ_LEAD_SECONDS,
    GATE_RECHECK_LEAD_SECONDS,
    IN_FLIGHT_BOUND_SECONDS,
    MIN_CALL_SECONDS,
    Abilities,
    Admission,
    Clocks,
    Closure,
    Deferral,
    Permit,
    TimeLeft,
)
from sweeper.admission.budget import BudgetPaced
from sweeper.admission.composed import EveryLimit
from sweeper.admission.concurrency import Capped
from sweeper.admission.costs import slot_units
from sweeper.admission.learned import LearnedRate, learned_spec
from sweeper.admission.limit_gates import LimitGates
from sweeper.admission.live import LiveLimits
from sweeper.admission.pairing import PairedLimits
from sweeper.admission.rate import OneRate
from sweeper.admission.ticket import Ticket, TicketAdmission
from sweeper.config import Policy
from sweeper.limiter import Limiter
from sweeper.models import ActionCall

#: The regimes that wrap a call's admission when its policy uses them (each returns the
#: admission as it was otherwise), innermost first. A wrapping regime is its module and a line.
WRAPPERS: tuple[Callable[[Admission, Ticket], Admission], ...] = (
    AdaptiveRate.around,
    LearnedRate.around,
    BudgetPaced.around,
    LiveLimits.around,
)


class BatchAdmission:
    """The admission of one batch's calls: its regime, picked from the policy's limits, and
    the batch's shared state (`slots`: banked slots, looks at the gates, leases handed on)."""

    def __init__(
        self,
        policy: Policy,
        limiter: Limiter,
        clocks: Clocks,
        parallel_calls: int,
        calls_by_scope: Mapping[str, int],
    ) -> None:
        self._limiter = limiter
        self._clocks = clocks
        self._abilities = Abilities.of(limiter)  # the one place that asks
        # An operator's live rates (live.py): the batch reserves at them as at told ones.
        policy = self._policy = LiveLimits.rated(policy, self._abilities, clocks)
        quota = policy.quota
        paired = PairedLimits.of(policy, self._abilities.paired)
        further = policy.further_limits
        #: Several rates not paired on one item: one slot of each, a call at a time.
        self._every_limit = paired is None and any(limit.rate is not None for limit in further)
        # a call's slot weighs its cost in the bank's own writes (costs.py), not in paired or
        # several limits' writes
        costs = None if paired is not None or self._every_limit else self._abilities.costs
        self.slots = BatchSlots(
            limiter,
            parallel_calls,
            calls_by_scope,
            clocks.now,
            clocks.metrics,
            learned_spec(policy) or quota.adaptive_spec,  # a learned rate is held as one is
            paired,
            quota.slack_seconds,
            quota.pacing().tolerance_seconds,
            None if costs is None else (costs, slot_units(policy)),
        )
        #: Only concurrency caps beside the scope's rate.
        self._capped = paired is None and bool(further) and not self._every_limit
        #: The gates of limits with no rate that a 429 can name, looked at for the batch.
        self._gates = LimitGates(policy, limiter, self._abilities.gates, clocks)

    @property
    def used(self) -> int:
        """Slots taken and called in (a slot let go unused does not count)."""
        return self.slots.used

    def order(self, records: Sequence[Mapping[str, Any]], scopes: Mapping[str, str]) -> BankedFirst:
        """The order the batch's threads take its records in (`scopes`: message id -> scope):
        a record whose scope has a banked slot first (BankedFirst)."""
        return BankedFirst(records, scopes, self.slots)

    def call(self, job: ActionCall, ids: Mapping[str, object]) -> Admission:
        """The admission of one record's call (`ids`: its delivery's, for log lines)."""
        ticket = Ticket(
            job, self._policy, self._limiter, self.slots, self._clocks, ids, self._abilities
        )
        admission: TicketAdmission
        if self._every_limit:
            admission = EveryLimit(ticket)
        else:
            rate = OneRate(ticket)
            if self.slots.paired is not None:
                rate.on_full = EveryLimit(ticket).take
            admission = Capped(rate) if self._capped else rate
        wrapped = self._gates.around(admission, ticket)  # innermost: obeyed after a permit
        for around in WRAPPERS:
            wrapped = around(wrapped, ticket)
        return wrapped


#: The admission of one batch (its threads share it).
admission_for = BatchAdmission


__all__ = [
    "BLOCK_SHARE_OF_THREADS",
    "BLOCK_SPAN_SECONDS",
    "GATE_READ_LEAD_SECONDS",
    "GATE_RECHECK_LEAD_SECONDS",
    "IN_FLIGHT_BOUND_SECONDS",
    "MIN_CALL_SECONDS",
    "Admission",
    "BankedFirst",
    "BatchAdmission",
    "BatchSlots",
    "Clocks",
    "Closure",
    "Deferral",
    "GateLook",
    "PairedLimits",
    "Permit",
    "TimeLeft",
    "admission_for",
]
