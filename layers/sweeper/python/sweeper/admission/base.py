"""The admission contract: what a consumer asks before each call, and hands back after it.

As Powertools' idempotency keeps its provider contract in `persistence/base.py`, this module
holds `Admission`, the one protocol a delivery speaks for every limit its call is under, and
what it exchanges: a `Permit` (the call may go now) or a `Deferral` (come back later, and why),
and a `Closure` (what a 429 or an auth failure closed). One module per regime implements it:
rate.py (one rate, its slots banked per batch: bank.py), concurrency.py (`max_in_flight`
caps: leases, handed on within the batch: handoff.py), composed.py (several limits on one
call, one at a time or paired on one item: pairing.py) and adaptive.py (a rate found from the
vendor's 429s, a wrapper). The facade (`sweeper.admission`) picks them from the policy's
limits; the consumer never asks which it got.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sweeper.adaptive_rate import Adaptive
from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS
from sweeper.errors import SweeperError
from sweeper.limiter import (
    MAX_GATES_PER_READ,
    Denial,
    GateReader,
    Grant,
    Limiter,
    Reason,
    ScopeState,
)
from sweeper.limiter.budget import BudgetSource
from sweeper.limiter.held import HeldRate
from sweeper.limiter.live import LiveSource
from sweeper.limiter.paired import PairedSource
from sweeper.limiter.several import LeaseSource, SlotSource, ThrottleNotes
from sweeper.limiter.spend import SpendSource
from sweeper.models import OutcomeClass
from sweeper.observability import MetricSink
from sweeper.vendor_reading import VendorReading

#: A slot further than this after the batch's last look at an open gate (a gate read, or a
#: granted reservation) is looked at again before it. With the late-slot tolerance, a call is
#: sent at most IN_FLIGHT_BOUND_SECONDS after its consumer last saw the gate open: calls past
#: that last look are in flight, all others obey a closure.
GATE_RECHECK_LEAD_SECONDS = 0.1
IN_FLIGHT_BOUND_SECONDS = GATE_RECHECK_LEAD_SECONDS + LATE_SLOT_TOLERANCE_SECONDS
#: The look at the gate that GATE_RECHECK_LEAD_SECONDS calls for is made this long before its
#: slot: the read has this long, and the late-slot tolerance, to answer (a strongly consistent
#: GetItem takes milliseconds). Made later than GATE_RECHECK_LEAD_SECONDS before the slot, one
#: look also covers the slots of its scope that follow within the rest of that lead, whichever
#: of the batch's threads holds them: the next few slots of a block at 100/s, so about one read
#: per block rather than one per call; and, read in the same request, the slots of the batch's
#: other scopes within that lead (several scopes at 10/s).
GATE_READ_LEAD_SECONDS = 0.05
#: A slot block covers at least this share of a batch's threads (rounded up: 3 of 10). Threads
#: in a call finish one every latency / threads seconds, so some ask before the block's slots
#: pass. Measured at 100/s, 4 environments x 10 threads, vendor p50 150 ms (docs/decisions.md):
#: free threads only made 0.8 limiter writes per job; at least 3 made 0.4 with no late slot.
BLOCK_SHARE_OF_THREADS = 0.3
#: A block spans at most this long from its first slot to its last: its threads hold their slots
#: until then, and are not free for the batch's other scopes meanwhile (two slots at 10/s with
#: the headroom's spacing of 0.106 s, ten at 50/s). Measured at ten scopes of 10/s
#: (docs/decisions.md): 0.22 s and 0.25 s cost more calls than the writes they saved.
BLOCK_SPAN_SECONDS = 0.2
#: Below this much Lambda time, a record is not called but returned at once.
MIN_CALL_SECONDS = 1.0

#: The Lambda time left for the call (seconds; None: no bound), asked again at each wait.
TimeLeft = Callable[[], float | None]


def read_gates(
    limiter: Limiter, reader: GateReader | None, keys: Sequence[str]
) -> dict[str, ScopeState]:
    """The gates of `keys`: several in one request when the limiter reads them at once (a
    GateReader; a key it leaves unread, or more keys than one read takes, read alone)."""
    states: dict[str, ScopeState] = {}
    if reader is not None and 1 < len(keys) <= MAX_GATES_PER_READ:
        states = reader.states(keys)
    for key in keys:
        if key not in states:
            states[key] = limiter.state(key)
    return states


@dataclass(frozen=True, slots=True)
class Permit:
    """The call may go now; `timeout` is the time left for it (None: no bound)."""

    timeout: float | None


@dataclass(frozen=True, slots=True)
class Deferral:
    """No call now: the record comes back in `wait` seconds, for `reason` (None: the Lambda
    has no time left for a call; it comes back at once)."""

    wait: float
    reason: Reason | None


@dataclass(frozen=True, slots=True)
class Closure:
    """What a 429 or an auth failure closed: `closed` limits at `at`, for `delay` seconds, the
    last reopening `until` (epoch seconds); with an adaptive rate, the rate it was cut to."""

    at: float
    delay: float
    until: float
    closed: int
    rate_per_second: float | None = None


@dataclass(frozen=True, slots=True)
class Clocks:
    """What admission waits and measures with (the consumer's, so tests inject a fake)."""

    sleep: Callable[[float], None]
    now: Callable[[], float]  # epoch seconds, the limiter's clock
    monotonic: Callable[[], float]  # the clock `ActionResult.request_sent_at` is read on
    rng: random.Random
    metrics: MetricSink


@runtime_checkable
class RateHolder(Protocol):
    """A limiter that holds a scope's rate as a vendor stated it (sweeper.admission.learned)."""

    def hold_rate(
        self,
        scope: str,
        rate: float,
        *,
        unset_only: bool = False,
        within: float = 0.0,
        only_from: float | None = None,
        stated: float | None = None,
    ) -> bool: ...

    def held_rate(self, scope: str) -> HeldRate | None: ...


@runtime_checkable
class CostSlots(Protocol):
    """A limiter whose slots may weigh several units of a rate (a call's cost), and that gives
    back units a call reserved and did not spend (sweeper.admission.costs)."""

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        not_before: float | None = None,
        slack: float = 0.0,
        tolerance: float = 0.0,
        units: int = 1,
    ) -> Grant | Denial: ...

    def refund(
        self, scope: str, units: int, interval: float, adaptive: Adaptive | None = None
    ) -> bool: ...


@dataclass(frozen=True, slots=True)
class Abilities:
    """What a batch's limiter can do beyond the `Limiter` protocol, asked once, here: a regime
    uses what is there (None: the limiter cannot) and never asks the limiter what it is."""

    gates: GateReader | None = None  # reads several gates in one request
    paired: PairedSource | None = None  # reserves two rates on the wide limit's item
    several: SlotSource | None = None  # holds a call in several limits (`reserve_all`)
    leases: LeaseSource | None = None  # holds concurrency leases
    notes: ThrottleNotes | None = None  # routes a 429 to a wider limit
    rates: RateHolder | None = None  # holds a rate the vendor stated (learned.py)
    live: LiveSource | None = None  # holds the operators' live limits
    spend: SpendSource | None = None  # counts sweeper's own calls fleet-wide (shared.py)
    budgets: BudgetSource | None = None  # counts budgets (budget.py)
    costs: CostSlots | None = None  # weighs a slot by a call's cost, refunds it (costs.py)

    @classmethod
    def of(cls, limiter: object) -> Abilities:
        return cls(
            gates=limiter if isinstance(limiter, GateReader) else None,
            paired=limiter if isinstance(limiter, PairedSource) else None,
            several=limiter if isinstance(limiter, SlotSource) else None,
            leases=limiter if isinstance(limiter, LeaseSource) else None,
            notes=limiter if isinstance(limiter, ThrottleNotes) else None,
            rates=limiter if isinstance(limiter, RateHolder) else None,
            live=limiter if isinstance(limiter, LiveSource) else None,
            spend=limiter if isinstance(limiter, SpendSource) else None,
            budgets=limiter if isinstance(limiter, BudgetSource) else None,
            costs=limiter if isinstance(limiter, CostSlots) else None,
        )


class Deferring(SweeperError):
    """Raised inside a regime's wait to leave it with a deferral (admit returns it)."""

    def __init__(self, deferral: Deferral) -> None:
        super().__init__(f"deferred for {deferral.wait:.1f}s ({deferral.reason})")
        self.deferral = deferral


class Admission(Protocol):
    """One call's admission under every limit it is under (one per record, per delivery)."""

    def admit(self, time_left: TimeLeft) -> Permit | Deferral:
        """A permit to call now, after any wait in place; or when to come back."""
        ...

    def ended(self, request_sent_at: float | None, reading: VendorReading | None = None) -> None:
        """The request is over (answered, failed, timed out): what it held only while at the
        vendor goes now (a lease), and a request that left later than its slot allows spends
        another (`request_sent_at` on the clocks' monotonic; None: unknown). `reading` is what
        the answer said of the vendor's limits (a limit's `learn`; None: nothing read)."""
        ...

    def close(
        self, outcome: OutcomeClass, retry_after_seconds: float | None, limit_value: str | None
    ) -> Closure:
        """A 429 (THROTTLED: the limit it names, else the narrowest and the wider ones it
        implicates) or an auth failure (AUTH) closes the call's limits until a reopening."""
        ...

    def done(self) -> None:
        """The record is finished with, called or not: what it still holds is given back."""
        ...
