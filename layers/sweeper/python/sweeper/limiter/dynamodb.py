"""The shared limiter on DynamoDB: the rate cap every consumer keeps to, and the throttle gate.

One DynamoDB item per scope holds the whole of its state:

- `tat`: the GCRA theoretical arrival time, in microseconds since the epoch. A consumer *reserves*
  the next slot (`slot = max(tat - tau, now)`, `tat = max(tat, now) + interval`) with one
  conditional UpdateItem, then sleeps until its slot. tau is the caller's burst tolerance
  (`Quota.pacing`, derived from the vendor's rule in sweeper.pacing_rule; 0: spacing only), so
  any k + 1 slots, whichever consumer takes them, span at least `k * interval - tau`, which the
  rule keeps within the quota despite arrival jitter. No worker keeps its own guess of the rate;
  more workers do not multiply it.
- `closed_until` / `reason`: the gate. A vendor's Retry-After (or an auth failure) closes the
  scope for every consumer; a reservation is refused while it is closed.
- `ar`, `ar_at`, `ar_v`, `ar_peak`, `ar_cut_at`: the adaptive rate of a scope whose quota is
  not known (its arithmetic is `sweeper.adaptive_rate`'s); a reservation at it is conditional
  on `ar_v`.
- `sp`, `sh_own`, `sh_oth`, `sh_q`, `sh_at`: sweeper's own calls, counted fleet-wide, and a
  shared quota's split as a consumer last saw it (`spend`).

Cost per acquisition: one conditional write (1 WCU) on the busy path, two when the bucket goes
from idle to busy, no reads; a consumer whose slot is far from its batch's last look at an open
gate reads the gate once more (1 RCU: strongly consistent, under 4 KB) before calling, and one
such look serves the batch's next slots of the scope that follow within the re-check lead; it
reads in the same request (`states`, one BatchGetItem, 1 RCU per scope) the gates of the
batch's other scopes whose slots come within that lead.
One write may reserve `count` consecutive slots (`tat += count * interval`): each slot keeps
its own exact time, so the spacing, and the bound above, are those of single reservations; a
batch calling several records at once takes them in one write.
One item takes about 1,000 writes/s, so one scope carries about 1,000 x (slots per write)
calls/s (README, "The rate cap").

A reservation reaches DynamoDB some milliseconds after it was asked, and its answer comes back as
late again. A slot granted at the time the request was made would have passed by the time the
consumer learns of it: under a slow write (a latency spike on AWS, a loaded emulator here) every
idle-bucket slot would arrive later than the consumer's late-slot tolerance and be let go unused.
So each limiter reserves as of `now + lead`, where the lead is the slowest of its recent write
round trips (at most MAX_LEAD_SECONDS): a slot is at least that far ahead when it is granted, and
the consumer waits for it. Spacing is unchanged (every slot is still `interval` after the last),
so the bound above holds; an idle scope's first call is only delayed by the lead. A rate with a
slack (`quota.slack_seconds`) has its slots used up to the slack after their time, so its lead
is cut by the slack (to nothing, for any lead up to MAX_LEAD_SECONDS and a slack as long).

Hand-written because no maintained Python library implements a shared GCRA over DynamoDB
conditional writes.

The limiter is composed of small parts, one per concern, which share the scope items (`items`:
the client, the counts, the lead): the GCRA reservation writes and the hints of which to try
first (`gcra`), the adaptive or held rate (`held`), the gates and their reads (`gates`), and the
paired block's write on the wide item (`paired_writes`). `DynamoLimiter` hands each call to one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sweeper.adaptive_rate import Adaptive
from sweeper.limiter.base import Denial, Grant, Reason, ScopeState
from sweeper.limiter.budget import BudgetBook
from sweeper.limiter.closures import LatestClosure
from sweeper.limiter.gates import Gates, closed_gates, closed_scopes
from sweeper.limiter.gcra import Reservations
from sweeper.limiter.held import MILLI, HeldRate, HeldRates
from sweeper.limiter.items import (
    FIRST_LEAD_SECONDS,
    ITEM_TTL_SECONDS,
    LEAD_SAMPLES,
    MAX_LEAD_SECONDS,
    MAX_RACES,
    US,
    ScopeItems,
    scope_key,
)
from sweeper.limiter.leases import LeaseCap
from sweeper.limiter.live import LiveLimitStore
from sweeper.limiter.paired import Want
from sweeper.limiter.paired_writes import PairedWrites
from sweeper.limiter.spend import SpendTally

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: The names this module held before its parts were split out, still importable from it.
__all__ = [
    "FIRST_LEAD_SECONDS",
    "ITEM_TTL_SECONDS",
    "LEAD_SAMPLES",
    "MAX_LEAD_SECONDS",
    "MAX_RACES",
    "MILLI",
    "US",
    "DynamoLimiter",
    "closed_gates",
    "closed_scopes",
]


class DynamoLimiter:
    """The shared limiter and gate (production)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client, self._table, self._clock = client, table, clock
        self._items = ScopeItems(client, table, clock)
        self._rates = HeldRates(self._items)
        self._reservations = Reservations(self._items, self._rates)
        self._gates = Gates(self._items, self._reservations, LatestClosure(client, table))
        self._paired = PairedWrites(self._items)
        self._live: LiveLimitStore | None = None
        self._spend: SpendTally | None = None
        self._budgets: BudgetBook | None = None

    @property
    def writes(self) -> int:
        """Conditional writes made, for the benchmark's cost figure."""
        return self._items.writes

    @property
    def reads(self) -> int:
        """Reads made (a BatchGetItem counts once)."""
        return self._items.reads

    @property
    def lead(self) -> float:
        """How far ahead of now a reservation is made: the slowest recent write round trip."""
        return self._items.lead

    @staticmethod
    def _key(scope: str) -> dict[str, Any]:
        return scope_key(scope)

    def live(self) -> LiveLimitStore:
        """The operators' live limits on this table, read through its cache (live.py)."""
        if self._live is None:
            self._live = LiveLimitStore(self._client, self._table)
        return self._live

    def spend(self) -> SpendTally:
        """Sweeper's own calls per scope, counted on the scopes' items (spend.py)."""
        if self._spend is None:
            self._spend = SpendTally(self._client, self._table)
        return self._spend

    def leases(self) -> LeaseCap:
        """The concurrency caps' leases, on this limiter's table and client."""
        return LeaseCap(self._client, self._table, clock=self._clock)

    def budgets(self) -> BudgetBook:
        """The budgets' counts, on this limiter's table and client (one book per limiter)."""
        self._budgets = self._budgets or BudgetBook(self._client, self._table, clock=self._clock)
        return self._budgets

    # -- the rate: GCRA slots (gcra) and the shared rate they are taken at (held) ----------------

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
    ) -> Grant | Denial:
        """Reserve the next `count` slots of `scope`, each `units` intervals long
        (`Reservations.reserve`)."""
        return self._reservations.reserve(
            scope, interval, horizon, count, adaptive, not_before, slack, tolerance, units
        )

    def refund(
        self, scope: str, units: int, interval: float, adaptive: Adaptive | None = None
    ) -> bool:
        """Give back `units` intervals a call reserved and did not use (`Reservations.refund`)."""
        return self._reservations.refund(scope, units, interval, adaptive)

    def give_back(self, scope: str, slot_at: float, interval: float) -> bool:
        """Return an unused slot if it is still the scope's last (`Reservations.give_back`)."""
        return self._reservations.give_back(scope, slot_at, interval)

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        """A 429 arrived: cut the scope's shared rate; returns the rate now (`HeldRates.cut`)."""
        return self._rates.cut(scope, adaptive)

    def hold_rate(
        self,
        scope: str,
        rate: float,
        *,
        unset_only: bool = False,
        within: float = 0.0,
        only_from: float | None = None,
        stated: float | None = None,
    ) -> bool:
        """Hold `rate` as the scope's shared rate; True when it changed it (`HeldRates.hold`)."""
        return self._rates.hold(
            scope, rate, unset_only=unset_only, within=within, only_from=only_from, stated=stated
        )

    def held_rate(self, scope: str) -> HeldRate | None:
        """The scope's shared rate as this process last saw it (`HeldRates.held`)."""
        return self._rates.held(scope)

    # -- two limits on the wide limit's item (paired_writes) ---------------------------------------

    def reserve_paired(
        self,
        wide: str,
        wide_interval: float,
        wants: list[Want],
        horizon: float,
        span: float,
        most: int,
    ) -> tuple[dict[str, list[float]], Denial | None]:
        """A block of slots of `wide` and its narrow keys in one write (`PairedWrites.reserve`)."""
        return self._paired.reserve(wide, wide_interval, wants, horizon, span, most)

    def close_narrow(self, wide: str, key: str, until: float) -> None:
        """Close the narrow key's gate as the wide item keeps it (`PairedWrites.close_narrow`)."""
        self._paired.close_narrow(wide, key, until)

    def paired_states(self, wide: str, keys: Sequence[str]) -> dict[str, ScopeState]:
        """The narrow keys' and the wide limit's gates in one read (`PairedWrites.states`)."""
        return self._paired.states(wide, keys)

    # -- the gates (gates) -------------------------------------------------------------------------

    def note_throttle(self, scope: str, source: str, within: float) -> bool:
        """Record a 429 under the wider limit; True when it refuses (`Gates.note_throttle`)."""
        return self._gates.note_throttle(scope, source, within)

    def close(self, scope: str, until: float, reason: Reason) -> float:
        """Close the gate until `until` (never shortens a closure); returns the closure's end."""
        return self._gates.close(scope, until, reason)

    def state(self, scope: str) -> ScopeState:
        """The scope's state, read consistently (`Gates.state`)."""
        return self._gates.state(scope)

    def states(self, scopes: Sequence[str]) -> dict[str, ScopeState]:
        """The state of each of `scopes` in one BatchGetItem (`Gates.states`)."""
        return self._gates.states(scopes)
