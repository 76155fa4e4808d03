"""Paired limits: a policy's two rate limits reserved in one write, the batch's side.

A policy whose calls are held by a narrow rate per scope and one wide rate whose key is the same
for every call (a constant, or `{host}` / `{policy}` alone: one item) reserves both on the wide
limit's item (sweeper.limiter.paired): one write gives a block of slots, each both limits'
slot, to the scopes of the batch's records. A mixin of `BatchSlots`
(bank.py), under its one lock; a call whose pair the item is too full to take holds its limits
one at a time (composed.py).
"""

from __future__ import annotations

import math
import threading
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from sweeper.admission.base import BLOCK_SHARE_OF_THREADS, BLOCK_SPAN_SECONDS, Abilities
from sweeper.config import Policy, reach
from sweeper.limiter import Denial, Grant, Limiter
from sweeper.limiter.paired import PairedSource, Want


def _step_us(interval: float) -> int:
    """A narrow key's slot spacing as paired limits count it (`Want.step`: whole µs, > 0)."""
    return max(1, round(interval * 1_000_000))


@dataclass(frozen=True, slots=True)
class PairedLimits:
    """A policy's two rate limits reserved in one write (sweeper.limiter.paired): the job's
    scope (narrow) and one further limit with one key for every call (`wide`, its limiter key)."""

    wide: str
    wide_interval: float
    wide_slack: float = 0.0  # the wide rate's slack_seconds

    @classmethod
    def of(cls, policy: Policy, limiter: object) -> PairedLimits | None:
        """The pair, when the policy has exactly two limits, both rates, the second's key the
        same for every call (a constant, or over `{host}` and `{policy}` alone: one item), its
        quota not adaptive, and the limiter can reserve them together."""
        return None if Abilities.of(limiter).paired is None else cls.wanted(policy)

    @classmethod
    def wanted(cls, policy: Policy) -> PairedLimits | None:
        """The pair the policy's limits make (see `of`), whatever its limiter can do."""
        further = policy.further_limits
        if len(further) != 1:
            return None
        wide = further[0]
        rate = wide.call_rate
        if rate is None or wide.max_in_flight is not None or reach(wide.key) != "policy":
            return None
        if policy.quota.adaptive_spec is not None:
            return None
        # the key every call's ticket renders for it (ticket.py `keys`): one item, one gate
        key = wide.limiter_key(
            policy=policy.name, tenant_id="", object_id="", host=policy.action.scope_host, params={}
        )
        return cls(key, rate.interval_seconds, rate.slack_seconds)


class PairedBank:
    """The paired writes of a batch's slots (see the module)."""

    _lock: threading.Lock
    _limiter: Limiter
    _now: Callable[[], float]
    _parallel: int
    _calling: int
    _pending: Counter[str]
    _banked: dict[str, deque[float]]
    _holding: dict[object, tuple[str, float]]
    _closures: Counter[str]

    if TYPE_CHECKING:

        def _saw_open(self, scope: str, at: float) -> None: ...

    def _paired_block(
        self, scope: str, interval: float, paired: PairedLimits
    ) -> tuple[list[Want], int]:
        """What one paired write asks for (under the lock): a slot for each record of the
        batch not yet holding or banked one, the asking scope first, and how many at most (as
        `_block_size`, counted in the wide limit's spacing, over every scope's records)."""
        step = _step_us(interval)
        holding = Counter(held for held, _ in self._holding.values())

        def wanted(key: str) -> int:
            banked = len(self._banked.get(key, ()))
            return self._pending[key] - banked - holding[key]

        wants = [Want(scope, step, max(1, wanted(scope)))]
        wants += [Want(k, step, wanted(k)) for k in self._pending if k != scope and wanted(k) > 0]
        free = self._parallel - self._calling - len(self._holding)
        asking = max(free, self._parallel * BLOCK_SHARE_OF_THREADS)
        span = 1 + math.floor(BLOCK_SPAN_SECONDS / paired.wide_interval + 1e-9)
        total = sum(want.count for want in wants)
        return wants, max(1, min(total, math.ceil(asking), span))

    def _reserve_paired(
        self,
        scope: str,
        holder: object,
        horizon: float,
        paired: PairedLimits,
        wants: list[Want],
        most: int,
        closures: Counter[str],
    ) -> tuple[float, Grant | Denial]:
        """One paired write (the wide limit's lock held): the asking record's slot, or its
        denial; the block's other slots banked for their scopes, unless a gate closed during
        the write (then they are spent without a call)."""
        source = cast(PairedSource, self._limiter)  # a batch is paired only then (`of`)
        requested = self._now()
        by_key, denial = source.reserve_paired(
            paired.wide, paired.wide_interval, wants, horizon, BLOCK_SPAN_SECONDS, most
        )
        with self._lock:
            still_open = self._closures[paired.wide] == closures[paired.wide]
            mine = by_key.pop(scope, [])
            for key, slots in by_key.items():
                if still_open and self._closures[key] == closures[key]:
                    self._saw_open(key, requested)
                    self._banked.setdefault(key, deque()).extend(slots)
            if not mine:
                return requested, denial or Denial(requested, "rate")
            self._holding[holder] = (scope, mine[0])
            if still_open and self._closures[scope] == closures[scope]:
                self._saw_open(scope, requested)
                self._banked.setdefault(scope, deque()).extend(mine[1:])
            return requested, Grant(mine[0])

    def _spend_paired(
        self, scope: str, interval: float, horizon: float, paired: PairedLimits
    ) -> bool:
        """One slot of both limits given up without a call (`BatchSlots.spend_one`)."""
        source = cast(PairedSource, self._limiter)  # a batch is paired only then (`of`)
        step = _step_us(interval)
        by_key, _ = source.reserve_paired(
            paired.wide, paired.wide_interval, [Want(scope, step, 1)], horizon, horizon, 1
        )
        return bool(by_key.get(scope))
