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
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from sweeper.adaptive_rate import Adaptive
from sweeper.errors import LimiterError
from sweeper.limiter.base import MAX_GATES_PER_READ, Denial, Grant, Reason, ScopeState
from sweeper.limiter.budget import BudgetBook
from sweeper.limiter.keys import SCOPE_KEY_PREFIX
from sweeper.limiter.leases import LeaseCap
from sweeper.limiter.live import LiveLimitStore
from sweeper.limiter.paired import (
    CLOSED_PREFIX,
    HOLES_ATTRIBUTE,
    NEXT_PREFIX,
    PRUNE_MARGIN_SECONDS,
    PRUNE_PER_WRITE,
    SAFE_ITEM_BYTES,
    Block,
    PairedItemFull,
    SharedItem,
    Want,
    grown_bytes,
    holes_value,
    item_bytes,
    plan_block,
    stale_keys,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = logging.getLogger(__name__)

US = 1_000_000
#: Limiter items of idle scopes expire (DynamoDB TTL) after this long.
ITEM_TTL_SECONDS = 86_400
#: A reservation that loses this many races in a row gives up with a short denial.
MAX_RACES = 8
#: The lead of a limiter that has not measured a write yet (its first round trip also opens
#: the connection), and the most any lead may be: slower writes than this are an incident, not
#: something to plan every slot around.
FIRST_LEAD_SECONDS = 0.05
MAX_LEAD_SECONDS = 0.25
#: How many recent write round trips the lead is taken from (their slowest).
LEAD_SAMPLES = 8
#: The adaptive rate is stored in thousandths of a call per second.
MILLI = 1000


@dataclass(frozen=True, slots=True)
class _KnownRate:
    """The adaptive rate of a scope as its item held it when this process last saw it."""

    rate: float  # calls per second
    since: int  # set at, epoch µs
    version: int
    peak: float | None  # the rate that drew the last 429 (None: no cut yet)


@dataclass(frozen=True, slots=True)
class _RateGuard:
    """A reservation at the adaptive rate: its spacing (µs) and the rate's known version."""

    step: int
    version: int
    floor: float
    now: int


def _n(value: float | int) -> dict[str, str]:
    return {"N": str(int(value))}


def _grant(first_us: int, count: int, step_us: int) -> Grant:
    if count == 1:
        return Grant(first_us / US)
    return Grant(first_us / US, count, step_us / US)


class DynamoLimiter:
    """The shared limiter and gate (production)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._table = table
        self._clock = clock
        self.writes = 0  # conditional writes made, for the benchmark's cost figure
        self.reads = 0
        self._last_tat: dict[str, int] = {}  # per scope: which path to try first (a hint only)
        self._busy_seen: dict[str, bool] = {}  # per scope: was it busy at the last write (a hint)
        # per scope: the last slot this process was granted, and the tat its write left
        self._last_grant: dict[str, tuple[int, int]] = {}
        self._round_trips: deque[float] = deque(maxlen=LEAD_SAMPLES)
        self._rates: dict[str, _KnownRate] = {}  # per scope, the adaptive rate last seen
        self._shared: dict[str, SharedItem] = {}  # per wide key, its item as last seen (paired)
        self._live: LiveLimitStore | None = None
        self._budgets: BudgetBook | None = None

    def live(self) -> LiveLimitStore:
        """The operators' live limits on this table, read through its cache (live.py)."""
        if self._live is None:
            self._live = LiveLimitStore(self._client, self._table)
        return self._live

    @property
    def lead(self) -> float:
        """How far ahead of now a reservation is made: the slowest recent write round trip."""
        if not self._round_trips:
            return FIRST_LEAD_SECONDS
        return min(MAX_LEAD_SECONDS, max(self._round_trips))

    @staticmethod
    def _key(scope: str) -> dict[str, Any]:
        return {"pk": {"S": SCOPE_KEY_PREFIX + scope}}

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
    ) -> Grant | Denial:
        """Reserve the next `count` slots of `scope` (fewer if not all fall within `horizon`).

        With `tolerance` (tau, seconds: the rate's `Quota.pacing().tolerance_seconds`) the first
        slot is `max(tat - tau, now)`: slots that went unused up to tau ago are granted now, a
        burst; a block's later slots keep the interval from its first. 0 is spacing only.

        With `slack` (the rate's `slack_seconds`: the caller may use a slot that long after its
        time) the lead is cut by it: a slot at the time of asking is still usable when the
        answer is back, so an idle scope's first call need not wait for the lead.

        With `not_before` (epoch seconds) no slot is earlier than it: the idle path's "now" is
        moved on to it, so a call that holds a later slot of another limit gets this limit's
        first free slot at or after that one (sweeper.limiter.several).

        Two conditional writes exist: the busy path (the bucket is ahead of now: take the next
        slots, `tat += n * interval`) and the idle path (behind now: the first slot is now, where
        "now" is the real time plus the lead, as with every comparison here).
        Which one to try first is guessed from the last `tat` this process saw and the regime
        its last write found, so that one write is usual in either regime; a wrong guess costs
        one failed write, which returns the item and so corrects the guess. The guess only
        picks the order: it never decides a slot. Every slot granted lies within `horizon`:
        when fewer than `count` do, fewer are taken, and the first slot alone decides a denial.

        With `adaptive`, `interval` is ignored: the spacing is that of the rate held in the item,
        and the write is conditional on the rate's version this process knows, so that no slot
        is taken at a rate another consumer has cut (a stale version costs one failed write,
        which returns the item, and a reservation at the current rate).
        """
        horizon_us = int(horizon * US)
        tau = max(0, int(tolerance * US))
        fits = max(1, count)
        for _ in range(MAX_RACES):
            # "now" is the earliest slot this reservation can still use: the time its answer
            # is back (see the module's docstring). The horizon stays counted from the real now.
            real = int(self._clock() * US)
            lead = max(0.0, self.lead - slack)
            now = real + min(int(lead * US), horizon_us)
            if not_before is not None:
                now = max(now, int(not_before * US))
            reach = real + horizon_us
            guard = self._guard(scope, adaptive, real) if adaptive else None
            step = guard.step if guard else max(1, round(interval * US))
            want = max(1, min(fits, horizon_us // step + 1))
            # Busy if the last tat seen is still ahead, or if the last write found the bucket
            # busy: other consumers moved it on since (a backlog several consumers share), which
            # this process cannot see, and a bucket with a backlog stays busy.
            busy_first = self._last_tat.get(scope, 0) > now or self._busy_seen.get(scope, False)
            for busy in (busy_first, not busy_first):
                outcome = (
                    self._busy(scope, step, now, reach, want, guard, tau)
                    if busy
                    else self._idle(scope, step, now, want, guard)
                )
                if isinstance(outcome, (Grant, Denial)):
                    return outcome
                # A failed condition returned the item: remember its tat, maybe refuse.
                tat = int(outcome["tat"]["N"]) if "tat" in outcome else 0
                self._last_tat[scope] = tat
                self._busy_seen[scope] = tat > now
                denial = self._denial(outcome, now, reach, horizon_us, tau)
                if denial is not None:
                    return denial
                if guard and self._learn_rate(scope, outcome) != guard.version:
                    break  # another consumer changed the rate: reserve again at the new one
                if tat > now:  # busy, first slot within reach: take what fits before it ends
                    fits = want = max(1, min(want, (reach - max(tat - tau, now)) // step + 1))
                    if busy:
                        break  # the busy path again, with fewer slots (not the idle path)
        return Denial(self._clock() + interval, "rate")  # lost every race: try again shortly

    def _busy(
        self,
        scope: str,
        step: int,
        now: int,
        reach: int,
        want: int,
        guard: _RateGuard | None,
        tau: int,
    ) -> Grant | dict[str, Any]:
        update, condition, values = self._guarded(
            "SET tat = tat + :i, expires_at = :ttl",
            "tat > :now AND tat <= :h AND "
            "(attribute_not_exists(closed_until) OR closed_until <= :now)",
            {
                ":i": _n(want * step),
                ":now": _n(now),
                # the last of the slots taken, the first at tat - tau or later, lies within the
                # horizon (`reach`: epoch µs); later than that only by the lead, as when idle
                ":h": _n(reach - (want - 1) * step + tau),
                ":ttl": _n(now // US + ITEM_TTL_SECONDS),
            },
            guard,
        )
        result = self._update(scope, update, condition, values, returns="UPDATED_NEW")
        if isinstance(result, int):
            self._last_tat[scope] = result
            self._busy_seen[scope] = True
            self._settle_guard(scope, guard)
            first = max(result - want * step - tau, now)
            self._last_grant[scope] = (first + (want - 1) * step, result)
            return _grant(first, want, step)
        return result or {}

    def _idle(
        self, scope: str, step: int, now: int, want: int, guard: _RateGuard | None
    ) -> Grant | dict[str, Any]:
        update, condition, values = self._guarded(
            "SET tat = :t, expires_at = :ttl",
            "(attribute_not_exists(tat) OR tat <= :now) AND "
            "(attribute_not_exists(closed_until) OR closed_until <= :now)",
            {
                ":t": _n(now + want * step),
                ":now": _n(now),
                ":ttl": _n(now // US + ITEM_TTL_SECONDS),
            },
            guard,
        )
        result = self._update(scope, update, condition, values, returns="NONE")
        if isinstance(result, int):
            self._last_tat[scope] = now + want * step
            self._busy_seen[scope] = False
            self._settle_guard(scope, guard)
            self._last_grant[scope] = (now + (want - 1) * step, now + want * step)
            return _grant(now, want, step)
        return result or {}

    # -- the adaptive rate (quota.adaptive) -------------------------------------------------------

    def _guard(self, scope: str, adaptive: Adaptive, now: int) -> _RateGuard:
        """The spacing at the scope's shared rate as this process knows it, and its version."""
        known = self._rates.get(scope)
        if known is None:  # not seen yet: the first reservation ever sets the floor
            return _RateGuard(max(1, round(US / adaptive.floor)), 0, adaptive.floor, now)
        current = adaptive.rate_at(known.rate, known.since / US, now / US, known.peak)
        return _RateGuard(max(1, round(US / current)), known.version, adaptive.floor, now)

    @staticmethod
    def _guarded(
        update: str, condition: str, values: dict[str, Any], guard: _RateGuard | None
    ) -> tuple[str, str, dict[str, Any]]:
        if guard is None:
            return update, condition, values
        if guard.version == 0:  # the first to use the scope adaptively sets its starting rate
            return (
                update + ", ar = :ar, ar_at = :ar_at, ar_v = :ar_v",
                condition + " AND attribute_not_exists(ar_v)",
                {
                    **values,
                    ":ar": _n(guard.floor * MILLI),
                    ":ar_at": _n(guard.now),
                    ":ar_v": _n(1),
                },
            )
        return update, condition + " AND ar_v = :ar_v", {**values, ":ar_v": _n(guard.version)}

    def _settle_guard(self, scope: str, guard: _RateGuard | None) -> None:
        if guard is not None and guard.version == 0:
            self._rates[scope] = _KnownRate(guard.floor, guard.now, 1, None)

    def _learn_rate(self, scope: str, item: dict[str, Any]) -> int:
        """Remember the rate an item holds; returns its version (0: none yet)."""
        if "ar_v" not in item:
            self._rates.pop(scope, None)
            return 0
        version = int(item["ar_v"]["N"])
        peak = int(item["ar_peak"]["N"]) / MILLI if "ar_peak" in item else None
        rate = int(item["ar"]["N"]) / MILLI
        self._rates[scope] = _KnownRate(rate, int(item["ar_at"]["N"]), version, peak)
        return version

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        """A 429 arrived: cut the scope's shared rate (once per cooldown); returns the rate now.

        Conditional on the version this process knows and on no cut within the cooldown: of
        several consumers throttled by one overshoot, one cuts; the others learn the new rate.
        The rate it cut from is kept as the peak the climb back slows down near.
        """
        for _ in range(MAX_RACES):
            now = int(self._clock() * US)
            known = self._rates.get(scope) or _KnownRate(adaptive.floor, now, 0, None)
            version = known.version
            peak = adaptive.rate_at(known.rate, known.since / US, now / US, known.peak)
            new = adaptive.after_cut(peak)
            failed = self._update(
                scope,
                "SET ar = :ar, ar_at = :now, ar_v = :next, ar_cut_at = :now, ar_peak = :peak, "
                "expires_at = :ttl",
                ("attribute_not_exists(ar_v)" if version == 0 else "ar_v = :v")
                + " AND (attribute_not_exists(ar_cut_at) OR ar_cut_at <= :recent)",
                {
                    ":ar": _n(new * MILLI),
                    ":peak": _n(peak * MILLI),
                    ":now": _n(now),
                    ":next": _n(version + 1),
                    ":recent": _n(now - adaptive.cooldown * US),
                    ":ttl": _n(now // US + ITEM_TTL_SECONDS),
                    **({":v": _n(version)} if version else {}),
                },
                returns="NONE",
            )
            if isinstance(failed, dict):  # the condition failed: the item as it is
                self._learn_rate(scope, failed)
                cut_at = int(failed["ar_cut_at"]["N"]) if "ar_cut_at" in failed else 0
                if cut_at > now - adaptive.cooldown * US:
                    # cut by another consumer for this same overshoot: follow it
                    learned = self._rates.get(scope)
                    return learned.rate if learned else adaptive.floor
                continue  # a stale version: cut the current rate instead
            self._rates[scope] = _KnownRate(
                int(new * MILLI) / MILLI, now, version + 1, int(peak * MILLI) / MILLI
            )
            return new
        last = self._rates.get(scope)
        return last.rate if last else adaptive.floor

    def hold_rate(
        self, scope: str, rate: float, *, unset_only: bool = False, within: float = 0.0
    ) -> bool:
        """Hold `rate` (calls per second, a vendor's statement: sweeper.admission.learned) as
        the scope's shared rate; every consumer reserves at it from its next reservation (its
        write, conditional on the version it knew, fails once and learns it). With
        `unset_only`, only when the scope holds no rate yet. No write when this process knows
        the scope at that rate already (within a `within` share). Its next slot moves to the
        new interval after the last. True when it changed the rate."""
        for _ in range(MAX_RACES):
            known = self._rates.get(scope)
            if known is not None and (unset_only or abs(known.rate - rate) <= within * rate):
                return False
            now = int(self._clock() * US)
            version = 0 if known is None else known.version
            # the next slot is the new interval after the last, not the old one: later when
            # slowed down, earlier when sped up (a scope started at the floor)
            shift = 0 if known is None else round(US / rate) - round(US / known.rate)
            failed = self._update(
                scope,
                "SET ar = :ar, ar_at = :now, ar_v = :next, expires_at = :ttl, "
                "tat = if_not_exists(tat, :zero) + :shift REMOVE ar_peak, ar_cut_at",
                "attribute_not_exists(ar_v)" if version == 0 else "ar_v = :v",
                {
                    ":ar": _n(rate * MILLI),
                    ":now": _n(now),
                    ":next": _n(version + 1),
                    ":ttl": _n(now // US + ITEM_TTL_SECONDS),
                    ":zero": _n(0),
                    ":shift": _n(shift),
                    **({":v": _n(version)} if version else {}),
                },
                returns="NONE",
            )
            if isinstance(failed, dict):  # another consumer changed it: learn, then decide
                self._learn_rate(scope, failed)
                continue
            self._rates[scope] = _KnownRate(int(rate * MILLI) / MILLI, now, version + 1, None)
            return True
        return False  # lost every race: other consumers are writing the rate meanwhile

    def _denial(
        self, item: dict[str, Any] | None, now: int, reach: int, horizon: int, tau: int = 0
    ) -> Denial | None:
        """A refusal, if the returned item closes the gate or holds no slot before `reach`
        (epoch µs: its next slot is `tat - tau`); `horizon` (µs) says when its slots come
        within reach."""
        if item is None:
            return None
        closed = int(item["closed_until"]["N"]) if "closed_until" in item else 0
        if closed > now:
            reason = item.get("reason", {}).get("S", "throttled")
            return Denial(closed / US, "auth" if reason == "auth" else "throttled")
        tat = int(item["tat"]["N"]) if "tat" in item else 0
        if tat - tau > reach:
            return Denial((tat - tau - horizon) / US, "rate")
        return None

    # -- two limits on the wide limit's item (sweeper.limiter.paired) ------------------------------

    def reserve_paired(
        self,
        wide: str,
        wide_interval: float,
        wants: list[Want],
        horizon: float,
        span: float,
        most: int,
    ) -> tuple[dict[str, list[float]], Denial | None]:
        """A block of up to `most` slots of the wide limit `wide`, each also a slot of the
        narrow key it is given to (`wants`, the asking key first; their next free times are
        kept in `wide`'s item), in one conditional write (sweeper.limiter.paired).

        Returns the slots by narrow key (epoch seconds) and, when the asking key got none, its
        denial. Planned from the item as this process last saw it; a stale view costs a failed
        write, which returns the item, and the block is planned again. The write also removes
        a few keys whose times are past (`stale_keys`); raises PairedItemFull, without a write,
        when it would grow the item beyond SAFE_ITEM_BYTES.
        """
        wide_step = max(1, round(wide_interval * US))
        for _ in range(MAX_RACES):
            real = int(self._clock() * US)
            horizon_us = int(horizon * US)
            now = real + min(int(self.lead * US), horizon_us)
            seen = self._shared.get(wide, SharedItem())
            plan = plan_block(
                seen,
                wide_step,
                wants,
                real=real,
                now=now,
                horizon=horizon_us,
                span=int(span * US),
                most=most,
            )
            if isinstance(plan, Denial):
                return {}, plan
            cut = real - int(PRUNE_MARGIN_SECONDS * US)
            removed = stale_keys(seen, cut, set(plan.next_free), PRUNE_PER_WRITE)
            before = item_bytes(seen)
            after = grown_bytes(seen, set(plan.next_free), removed, plan.holes)
            if after > SAFE_ITEM_BYTES and after > before:
                logger.warning(
                    "paired item full; limits reserved one by one",
                    extra={"scope": wide, "code": "paired_item_full", "item_bytes": before},
                )
                raise PairedItemFull(f"the paired item of scope {wide!r} is full")
            failed = self._write_block(wide, seen, plan, now, removed, cut)
            if failed is None:
                by_key: dict[str, list[float]] = {}
                for key, slot in plan.slots:
                    by_key.setdefault(key, []).append(slot / US)
                return by_key, plan.asker
            self._shared[wide] = SharedItem.parse(failed)
        return {}, Denial(self._clock() + wide_interval, "rate")  # lost every race

    def _write_block(
        self,
        wide: str,
        seen: SharedItem,
        plan: Block,
        now: int,
        removed: list[str],
        cut: int,
    ) -> dict[str, Any] | None:
        """The block's compare-and-set; None when written, else the item as it is. It also
        writes the wide limit's holes after the block (covered by the version's condition) and
        removes the `removed` keys' attributes (stale as of `cut`, as `seen` holds them; a gate
        is removed only if it was not closed again since)."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {
            ":tat": _n(plan.tat),
            ":v": _n(seen.version + 1),
            ":now": _n(now),
            ":ttl": _n(now // US + ITEM_TTL_SECONDS),
        }
        sets = ["tat = :tat", "v = :v", "expires_at = :ttl"]
        gates = ["(attribute_not_exists(closed_until) OR closed_until <= :now)"]
        for i, (key, free) in enumerate(sorted(plan.next_free.items())):
            names[f"#n{i}"], names[f"#c{i}"] = NEXT_PREFIX + key, CLOSED_PREFIX + key
            values[f":n{i}"] = _n(free)
            sets.append(f"#n{i} = :n{i}")
            gates.append(f"(attribute_not_exists(#c{i}) OR #c{i} <= :now)")
        drops: list[str] = []
        if plan.holes or seen.holes:
            names["#h"] = HOLES_ATTRIBUTE
        if plan.holes:
            values[":h"] = holes_value(plan.holes)
            sets.append("#h = :h")
        elif seen.holes:
            drops.append("#h")
        for i, key in enumerate(removed):
            if key in seen.next_free:
                names[f"#rn{i}"] = NEXT_PREFIX + key
                drops.append(f"#rn{i}")
            if key in seen.closed:
                names[f"#rc{i}"] = CLOSED_PREFIX + key
                drops.append(f"#rc{i}")
                # close_narrow writes a gate without the version: keep one closed since.
                gates.append(f"(attribute_not_exists(#rc{i}) OR #rc{i} <= :cut)")
                values[":cut"] = _n(cut)
        if seen.version:
            values[":seen"] = _n(seen.version)
            values[":old"] = _n(seen.tat)
            same = "v = :seen AND tat = :old"
        elif seen.has_tat:
            values[":old"] = _n(seen.tat)
            same = "attribute_not_exists(v) AND tat = :old"
        else:
            same = "attribute_not_exists(v) AND attribute_not_exists(tat)"
        update = "SET " + ", ".join(sets)
        if drops:
            update += " REMOVE " + ", ".join(drops)
        result = self._update(
            wide,
            update,
            " AND ".join([same, *gates]),
            values,
            returns="NONE",
            names=names,
        )
        if isinstance(result, dict):
            return result
        gone = set(removed)
        self._shared[wide] = SharedItem(
            version=seen.version + 1,
            tat=plan.tat,
            closed_until=seen.closed_until,
            reason=seen.reason,
            next_free={
                **{k: t for k, t in seen.next_free.items() if k not in gone},
                **plan.next_free,
            },
            closed={k: t for k, t in seen.closed.items() if k not in gone},
            has_tat=True,
            holes=plan.holes,
        )
        return None

    def close_narrow(self, wide: str, key: str, until: float) -> None:
        """Close the narrow key `key`'s gate as the wide item keeps it (beside `close(key)`,
        which closes its own item): paired reservations then give it no slot until `until`."""
        self._update(
            wide,
            "SET #c = :u",
            "attribute_not_exists(#c) OR #c < :u",
            {":u": _n(until * US)},
            returns="NONE",
            names={"#c": CLOSED_PREFIX + key},
        )

    def paired_states(self, wide: str, keys: Sequence[str]) -> dict[str, ScopeState]:
        """The gates of every narrow key of `keys` (each both gates its paired call is under,
        `SharedItem.gate`) and the wide limit's own (under `wide`), in one read of the wide
        item, which holds them all (it also remembers the item: the next block is planned
        from it). A key the item does not hold is open as far as the item tells."""
        seen = SharedItem.parse(self._read_item(wide))
        self._shared[wide] = seen
        return {**{key: seen.gate(key) for key in keys}, wide: seen.wide_gate(wide)}

    def _update(
        self,
        scope: str,
        update: str,
        condition: str,
        values: dict[str, Any],
        returns: str,
        names: dict[str, str] | None = None,
    ) -> int | dict[str, Any] | None:
        """Run a conditional update; the new tat (or 0) on success, the old item on failure."""
        started = time.monotonic()
        extra: dict[str, Any] = {"ExpressionAttributeNames": names} if names else {}
        try:
            self.writes += 1
            response = self._client.update_item(
                TableName=self._table,
                Key=self._key(scope),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValues=returns,  # type: ignore[arg-type]
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **extra,
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                self._round_trips.append(time.monotonic() - started)
                item: dict[str, Any] = exc.response.get("Item") or {}  # type: ignore[assignment]
                return item
            raise LimiterError(f"limiter update failed for scope {scope!r}") from exc
        self._round_trips.append(time.monotonic() - started)
        attributes = response.get("Attributes", {})
        return int(attributes["tat"]["N"]) if "tat" in attributes else 0

    def leases(self) -> LeaseCap:
        """The concurrency caps' leases, on this limiter's table and client."""
        return LeaseCap(self._client, self._table, clock=self._clock)

    def budgets(self) -> BudgetBook:
        """The budgets' counts, on this limiter's table and client (one book per limiter)."""
        self._budgets = self._budgets or BudgetBook(self._client, self._table, clock=self._clock)
        return self._budgets

    def give_back(self, scope: str, slot_at: float, interval: float) -> bool:
        """Return an unused slot, if it is still the scope's last one taken: `tat` goes back an
        interval (to the slot itself without a tolerance), so the next reservation gets it at
        its own time (never earlier). One conditional write; when another slot was taken since,
        nothing changes and the slot is spent without a call. Returns whether it was given
        back."""
        slot_us = int(slot_at * US)
        step = max(1, round(interval * US))
        after = self._last_tat.get(scope)
        # without a tolerance the tat after a slot is the slot's next; with one, the tat the
        # slot's write left, if it is still the last this process knows of
        if after is None or (
            after != slot_us + step and self._last_grant.get(scope) != (slot_us, after)
        ):
            return False  # not ours to return (or not known to be): spent without a call
        result = self._update(
            scope,
            "SET tat = :slot",
            "tat = :after",
            {":slot": _n(after - step), ":after": _n(after)},
            returns="NONE",
        )
        if isinstance(result, int):
            self._last_tat[scope] = after - step
            self._last_grant.pop(scope, None)
            return True
        if result:
            self._last_tat[scope] = int(result["tat"]["N"]) if "tat" in result else 0
        return False

    def note_throttle(self, scope: str, source: str, within: float) -> bool:
        """A 429 from `source` (a narrower limit's key) under the wider limit `scope`: one
        conditional write on the wider limit's item records it. Returns True when another
        source's 429 was recorded there within the last `within` seconds: the wider limit is
        what refuses (sweeper.limiter.several)."""
        now = int(self._clock() * US)
        result = self._update(
            scope,
            "SET t429_at = :now, t429_src = :src, expires_at = :ttl",
            "attribute_not_exists(t429_at) OR t429_at <= :since OR t429_src = :src",
            {
                ":now": _n(now),
                ":src": {"S": source},
                ":since": _n(now - int(within * US)),
                ":ttl": _n(now // US + ITEM_TTL_SECONDS),
            },
            returns="NONE",
        )
        return isinstance(result, dict)

    def close(self, scope: str, until: float, reason: Reason) -> float:
        """Close the gate until `until` (never shortens a closure); returns the closure's end."""
        now = self._clock()
        try:
            self.writes += 1
            self._client.update_item(
                TableName=self._table,
                Key=self._key(scope),
                UpdateExpression=(
                    "SET closed_until = :u, reason = :r, last_close_us = :d, "
                    "expires_at = :ttl ADD closures :one"
                ),
                ConditionExpression="attribute_not_exists(closed_until) OR closed_until < :u",
                ExpressionAttributeValues={
                    ":u": _n(until * US),
                    ":r": {"S": reason},
                    ":one": _n(1),
                    ":d": _n(max(0.0, until - now) * US),
                    ":ttl": _n(until + ITEM_TTL_SECONDS),
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise LimiterError(f"gate close failed for scope {scope!r}") from exc
            return max(until, self.state(scope).closed_until or until)
        return until

    def _read_item(self, scope: str) -> dict[str, Any]:
        """The scope's item, read consistently ({} when it has none yet)."""
        self.reads += 1
        try:
            item: dict[str, Any] = self._client.get_item(
                TableName=self._table, Key=self._key(scope), ConsistentRead=True
            ).get("Item", {})
        except ClientError as exc:
            raise LimiterError(f"limiter read failed for scope {scope!r}") from exc
        return item

    def state(self, scope: str) -> ScopeState:
        asked = self._clock()
        item = self._read_item(scope)
        self._hint(scope, item, asked)
        return _scope_state(scope, item)

    def _hint(self, scope: str, item: dict[str, Any], asked: float) -> None:
        """A read of a scope's item (a look at its gate) is the freshest word this process has
        of the scope's regime, fresher than its own last write (other consumers write between
        them): remember its tat for `reserve`'s guess of which write to try first. A hint
        only, as the writes' are: it never decides a slot. Measured in scenario (d) (ten
        scopes at 10/s, four environments): half the failed reservations were an idle write
        tried on a scope that another consumer had made busy since this one's last write,
        0.4-1.3 s before."""
        if "tat" not in item:
            return
        tat = int(item["tat"]["N"])
        self._last_tat[scope] = tat
        self._busy_seen[scope] = tat > int((asked + self.lead) * US)

    def states(self, scopes: Sequence[str]) -> dict[str, ScopeState]:
        """The state of each of `scopes` in one strongly consistent BatchGetItem (each item
        under 4 KB: one read unit per scope, as many as GetItems would cost, in one round trip).

        A key DynamoDB returns unprocessed (its table's throughput exceeded, or the answer's
        16 MB) is left out of the answer: not read, so never taken for an open gate; the caller
        reads it on its own if it must. A scope with no item yet is open, as `state` says.
        """
        wanted = list(dict.fromkeys(scopes))  # a key twice is refused by DynamoDB
        if not wanted:
            return {}
        if len(wanted) > MAX_GATES_PER_READ:
            raise LimiterError(f"at most {MAX_GATES_PER_READ} gates in one read")
        self.reads += 1
        asked = self._clock()
        try:
            answer = self._client.batch_get_item(
                RequestItems={
                    self._table: {
                        "Keys": [self._key(scope) for scope in wanted],
                        "ConsistentRead": True,
                    }
                }
            )
        except ClientError as exc:
            raise LimiterError(f"limiter read failed for {len(wanted)} scopes") from exc
        unprocessed: dict[str, Any] = dict(answer.get("UnprocessedKeys", {}))
        skipped = {key["pk"]["S"] for key in unprocessed.get(self._table, {}).get("Keys", [])}
        responses: dict[str, Any] = dict(answer.get("Responses", {}))
        items = {item["pk"]["S"]: item for item in responses.get(self._table, [])}
        for scope in wanted:
            self._hint(scope, items.get(SCOPE_KEY_PREFIX + scope, {}), asked)
        return {
            scope: _scope_state(scope, items.get(SCOPE_KEY_PREFIX + scope, {}))
            for scope in wanted
            if SCOPE_KEY_PREFIX + scope not in skipped
        }


def _scope_state(scope: str, item: dict[str, Any]) -> ScopeState:
    """A scope's state as its item holds it ({}: no item yet, an open gate and no slot)."""

    def num(name: str) -> float | None:
        return int(item[name]["N"]) / US if name in item else None

    reason = item.get("reason", {}).get("S")
    return ScopeState(scope, num("tat"), num("closed_until"), reason, num("last_close_us"))


def closed_scopes(client: DynamoDBClient, table: str, now: float) -> set[str]:
    """Every scope whose gate is closed at `now`: one Scan of the limiter table (an item per
    scope used within a day, about 100 bytes each), eventually consistent.

    For the producer, which passes over their rows: a closure it does not see yet only means
    rows are claimed that the consumer returns, as without this read.
    """
    return {gate.scope for gate in closed_gates(client, table, now)}


def closed_gates(client: DynamoDBClient, table: str, now: float) -> list[ScopeState]:
    """Every limiter key closed at `now`, with its closure's end, reason and length: the read
    `closed_scopes` makes (one Scan, eventually consistent), for `sweeper status`, which names
    a closed further limit (`NAME:KEY`) as well as a closed scope. No `tat`: not read."""
    closed: list[ScopeState] = []
    start: dict[str, Any] | None = None
    while True:
        args: dict[str, Any] = {
            "TableName": table,
            "FilterExpression": "#until > :now",
            "ProjectionExpression": "#pk, #until, #reason, #length",
            "ExpressionAttributeNames": {
                "#pk": "pk",
                "#until": "closed_until",
                "#reason": "reason",
                "#length": "last_close_us",
            },
            "ExpressionAttributeValues": {":now": _n(now * US)},
        }
        if start:
            args["ExclusiveStartKey"] = start
        try:
            page = client.scan(**args)
        except ClientError as exc:
            raise LimiterError("limiter read of closed scopes failed") from exc
        for item in page.get("Items", []):

            def num(name: str, item: dict[str, Any] = item) -> float | None:
                return int(item[name]["N"]) / US if name in item else None

            scope = item["pk"]["S"].removeprefix(SCOPE_KEY_PREFIX)
            reason = item.get("reason", {}).get("S")
            length = num("last_close_us")
            closed.append(ScopeState(scope, None, num("closed_until"), reason, length))
        start = page.get("LastEvaluatedKey")
        if not start:
            return closed
