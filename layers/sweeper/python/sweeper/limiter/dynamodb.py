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

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate

from sweeper.limiter.budget import BudgetBook
from sweeper.limiter.closures import LatestClosure
from sweeper.limiter.gates import Gates
from sweeper.limiter.gcra import Reservations
from sweeper.limiter.held import HeldRates
from sweeper.limiter.items import ScopeItems
from sweeper.limiter.leases import LeaseCap
from sweeper.limiter.live import LiveLimitStore
from sweeper.limiter.paired_writes import PairedWrites
from sweeper.limiter.spend import SpendTally

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def _part[**P, R](
    name: str, method: Callable[Concatenate[Any, P], R]
) -> Callable[Concatenate[Any, P], R]:
    """`method` of the part this limiter holds as `name`, as a method of the limiter: one
    signature and docstring, the part's, for what the limiter only hands on (`inspect`,
    `help()` and a fake kept to it read the part's, through `__wrapped__`)."""

    def call(limiter: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(getattr(limiter, name), *args, **kwargs)

    functools.update_wrapper(call, method)
    return call


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
        self._live = LiveLimitStore(client, table)
        self._spend = SpendTally(client, table)
        self._budgets = BudgetBook(client, table, clock=clock)

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

    def live(self) -> LiveLimitStore:
        """The operators' live limits on this table, read through its cache (live.py)."""
        return self._live

    def spend(self) -> SpendTally:
        """Sweeper's own calls per scope, counted on the scopes' items (spend.py)."""
        return self._spend

    def leases(self) -> LeaseCap:
        """The concurrency caps' leases, on this limiter's table and client."""
        return LeaseCap(self._client, self._table, clock=self._clock)

    def budgets(self) -> BudgetBook:
        """The budgets' counts, on this limiter's table and client (one book per limiter)."""
        return self._budgets

    # -- each call below is its part's own (a method of the part, bound to this limiter's) --------

    # the rate: GCRA slots (gcra) and the shared rate they are taken at (held)
    reserve = _part("_reservations", Reservations.reserve)
    refund = _part("_reservations", Reservations.refund)
    give_back = _part("_reservations", Reservations.give_back)
    cut = _part("_rates", HeldRates.cut)
    hold_rate = _part("_rates", HeldRates.hold)
    held_rate = _part("_rates", HeldRates.held)
    # two limits on the wide limit's item (paired_writes)
    reserve_paired = _part("_paired", PairedWrites.reserve)
    close_narrow = _part("_paired", PairedWrites.close_narrow)
    paired_states = _part("_paired", PairedWrites.states)
    # the gates (gates)
    note_throttle = _part("_gates", Gates.note_throttle)
    close = _part("_gates", Gates.close)
    state = _part("_gates", Gates.state)
    states = _part("_gates", Gates.states)
