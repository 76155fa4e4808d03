"""The gate of a limit with no rate that a 429 can name, obeyed before a call (a wrapper).

A limit's gate belongs to the limit, whatever its regimes: a vendor may refuse a call under a
concurrency cap or a day's budget with a 429 that names that limit (`action.limit_header`,
mapped by `limit_header_values`) and a Retry-After, and the call's closure (ticket.py `close`)
closes that limit's gate, `scope#NAME:KEY`, for every consumer. A rate's gate is obeyed by each
reservation of its slots (the write is conditional on it); a cap's leases and a budget's units
are items of their own, which know no gate. So a call under such a limit:

- waits in place for a reopening its batch knows of (a closure it made, or a look found),
  when that is within the throttle's longest wait, with the reopening's jitter; else it goes
  back to the queue until then, with no read;
- once its regime admits it, is sent only if the batch's last look at the limit's gate found it
  open less than GATE_RECHECK_LEAD_SECONDS before (as a rate's look covers its calls); else the
  gates of the limits the call is under are read again, in one request (a `GateReader`), and a
  closed one sends the record back until the reopening (its slot is spent, its leases go back).

Only a limit a 429 can name has such a gate (`sweeper.admission.regimes.has_gate`): a policy that
names none reads nothing more, and one that does reads it at most once per look's lead per
batch, never more than once per call.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

from sweeper.admission.around import Around
from sweeper.admission.base import (
    GATE_RECHECK_LEAD_SECONDS,
    Admission,
    Clocks,
    Closure,
    Deferral,
    Deferring,
    Permit,
    TimeLeft,
    read_gates,
)
from sweeper.admission.regimes import has_gate
from sweeper.admission.ticket import Ticket
from sweeper.config import Policy
from sweeper.limiter import GateReader, Limiter
from sweeper.models import OutcomeClass
from sweeper.observability import Metric


def unreserved_gates(policy: Policy) -> frozenset[str]:
    """The names of the policy's limits that have a gate no reservation reads: each further
    limit with no rate that a 429 can name."""
    return frozenset(
        limit.name
        for index, limit in enumerate(policy.limits)
        if index and limit.rate is None and has_gate(policy, index)
    )


class LimitGates:
    """A batch's looks at the gates of its policy's limits that no reservation reads: when a
    look found each open (covering the batch's calls for the lead after it), and the
    reopenings it knows of. Shared by the batch's threads."""

    def __init__(
        self, policy: Policy, limiter: Limiter, reader: GateReader | None, clocks: Clocks
    ) -> None:
        self._names = unreserved_gates(policy)
        self._limiter = limiter
        self._reader = reader
        self._clocks = clocks
        self._lock = threading.Lock()  # the two maps below; never held across a read
        self._open_until: dict[str, float] = {}  # key: a look found it open, covers until
        self._closed_until: dict[str, float] = {}  # key: the reopening the batch knows of

    def around(self, inner: Admission, ticket: Ticket) -> Admission:
        """`inner` wrapped when the call is under such a limit, else `inner` itself."""
        if not self._names:
            return inner
        policy = ticket.policy
        keys = {
            limit.name: key
            for limit, key in zip(policy.further_limits, ticket.keys[1:], strict=True)
            if limit.name in self._names
        }
        return GatedLimits(inner, ticket, self, keys) if keys else inner

    def known_closed(self, keys: list[str], now: float) -> float | None:
        """The last reopening the batch knows of among `keys` closed at `now` (None: none)."""
        with self._lock:
            ends = [self._closed_until.get(key, -math.inf) for key in keys]
        latest = max(ends)
        return latest if latest > now else None

    def look(self, keys: list[str], now: float) -> float | None:
        """As `known_closed`, after reading (in one request) the gates of `keys` that no look
        of the batch covers at `now`."""
        with self._lock:
            stale = [key for key in keys if self._open_until.get(key, -math.inf) < now]
        if stale:
            asked = self._clocks.now()
            states = read_gates(self._limiter, self._reader, stale)
            answered = self._clocks.now()
            with self._lock:
                for key, state in states.items():
                    if state.closed(answered) and state.closed_until is not None:
                        self._shut(key, state.closed_until)
                    else:
                        covers = asked + GATE_RECHECK_LEAD_SECONDS
                        self._open_until[key] = max(self._open_until.get(key, -math.inf), covers)
        return self.known_closed(keys, now)

    def shut(self, key: str, until: float) -> None:
        """The batch closed `key` until `until` (a 429 named its limit)."""
        with self._lock:
            self._shut(key, until)

    def _shut(self, key: str, until: float) -> None:
        self._closed_until[key] = max(self._closed_until.get(key, -math.inf), until)
        self._open_until.pop(key, None)  # no earlier look counts as open


class GatedLimits(Around):
    """`inner`'s admission, within the gates of the call's limits that no reservation reads
    (`keys`: by limit name)."""

    def __init__(
        self, inner: Admission, ticket: Ticket, gates: LimitGates, keys: Mapping[str, str]
    ) -> None:
        super().__init__(inner)
        self._ticket = ticket
        self._gates = gates
        self._by_name = dict(keys)
        self._keys = list(keys.values())

    def admit(self, time_left: TimeLeft) -> Permit | Deferral:
        t = self._ticket
        clocks = t.clocks
        waited = False
        while True:
            reopens = self._gates.known_closed(self._keys, clocks.now())
            if reopens is None:
                break
            wait = (
                reopens
                - clocks.now()
                + clocks.rng.uniform(0.0, t.policy.throttle.reopen_jitter_seconds)
            )
            try:
                horizon = t.horizon(time_left)
            except Deferring as deferring:
                return deferring.deferral
            if not waited:
                waited = True
                clocks.metrics.add_metric(Metric.GATE_DEFERRALS, "Count", 1)
            if wait > horizon:
                return Deferral(wait, "throttled")
            clocks.sleep(max(0.0, wait))
        admitted = self._inner.admit(time_left)
        if isinstance(admitted, Deferral):
            return admitted
        now = clocks.now()
        reopens = self._gates.look(self._keys, now)
        if reopens is None:
            return admitted
        # Closed since the batch last looked: the permit goes unused (its slot is spent, its
        # leases go back when the record is done), as a rate's look that finds its gate closed.
        clocks.metrics.add_metric(Metric.GATE_DEFERRALS, "Count", 1)
        return Deferral(reopens - now, "throttled")

    def close(
        self, outcome: OutcomeClass, retry_after_seconds: float | None, limit_value: str | None
    ) -> Closure:
        closure = self._inner.close(outcome, retry_after_seconds, limit_value)
        if outcome is OutcomeClass.THROTTLED and limit_value is not None:
            named = self._ticket.policy.action.limit_values.get(limit_value)
            key = self._by_name.get(named) if named is not None else None
            if key is not None:  # the 429 closed this limit alone, until the closure's end
                self._gates.shut(key, closure.until)
        return closure
