"""A learned limit when the vendor's window is full, and when it lowers its limit
(sweeper.admission.learned, sweeper.vendor_limits.full; issue 43, target (f)).

Each test drives a batch's admission of a learned scope on the limiter stand-in with one fake
clock for the limiter and the admission: a call is admitted, then ended with the reading its
answer would carry. Two DynamoLimiters are two environments (each knows the shared item as its
own writes and reads left it).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from sweeper.admission import (
    Admission,
    BatchAdmission,
    Clocks,
    Deferral,
    Permit,
    admission_for,
)
from sweeper.config import Policy
from sweeper.limiter import DynamoLimiter, Reason, ScopeState
from sweeper.models import ActionCall
from sweeper.vendor_reading import LimitReading, VendorReading
from sweeper_local.aws import LocalAws
from tests.calls import action_call

pytestmark = pytest.mark.integration

SCOPE = "p"  # the key "{policy}" of policy "p"
#: The ceiling sweeper is told (the vendor states less): calls per second.
TOLD = 100


class _Clock:
    """The limiter's and the admission's clock: moves only when the admission sleeps."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))
        self.during: Callable[[], None] | None = None

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        during, self.during = self.during, None
        if during is not None:  # what another thread does while this one waits
            during()
        self.now += max(0.0, seconds)


class _Sink:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.counts[name] += int(value)


class _Recording(DynamoLimiter):
    """The limiter, with the order of its gate closures and rate writes kept."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log: list[str] = []

    def close(self, scope: str, until: float, reason: Reason) -> float:
        self.log.append("close")
        return super().close(scope, until, reason)

    def hold_rate(self, scope: str, rate: float, **kwargs: Any) -> bool:
        changed = super().hold_rate(scope, rate, **kwargs)
        if changed:
            self.log.append("hold")
        return changed


def _policy(learn: object = "ratelimit") -> Policy:
    data = Policy(name="p").model_dump(exclude={"quota", "scope"})
    data["limits"] = [
        {
            "name": "quota",
            "key": "{policy}",
            "rate": {"limit": TOLD, "period_seconds": 1},
            "learn": learn,
        }
    ]
    return Policy.model_validate(data)


#: A quota others spend too: sweeper leaves them a tenth (sweeper.admission.shared).
SHARED = {"source": "ratelimit", "reserve_fraction": 0.1}


def _env(
    local_aws: LocalAws, table: str, clock: _Clock, learn: object = "ratelimit"
) -> tuple[_Recording, BatchAdmission]:
    """One environment's limiter and a batch of 40 records of the scope, 10 calls at a time."""
    limiter = _Recording(local_aws.dynamodb(), table, clock=clock)
    clocks = Clocks(clock.sleep, clock, clock, random.Random(0), _Sink())
    return limiter, admission_for(_policy(learn), limiter, clocks, 10, {SCOPE: 40})


_calls = iter(range(1_000_000))


def _job() -> ActionCall:
    return action_call("p", "t", f"o{next(_calls)}")  # its scope is the policy's name


def _admit(batch: BatchAdmission, clock: _Clock) -> tuple[Admission, float]:
    """One call admitted, and its send time (on the fake clock)."""
    admission = batch.call(_job(), {})
    assert isinstance(admission.admit(lambda: None), Permit)
    return admission, clock.now


def _end(admission: Admission, sent: float, reading: VendorReading | None) -> None:
    """The call's answer is back, with `reading`."""
    admission.ended(sent, reading)
    admission.done()


def _call(batch: BatchAdmission, clock: _Clock, reading: VendorReading | None) -> float:
    """One call admitted (its send time) and ended with `reading`."""
    admission, sent = _admit(batch, clock)
    _end(admission, sent, reading)
    return sent


def _says(quota: int, remaining: int, reset: float = 1.0) -> VendorReading:
    """An answer's IETF fields: `quota` a second, `remaining` of it, the reset in `reset` s."""
    return VendorReading((LimitReading("quota", quota, 1.0, remaining, reset),))


def _closed(limiter: DynamoLimiter, clock: _Clock) -> bool:
    return limiter.state(SCOPE).closed(clock.now)


def _paced_at(
    local_aws: LocalAws, table: str, quota: int
) -> tuple[_Clock, _Recording, BatchAdmission]:
    """One environment whose scope was paced at `quota` a second by an answer."""
    clock = _Clock()
    limiter, batch = _env(local_aws, table, clock)
    _call(batch, clock, _says(quota, remaining=quota // 2))
    limiter.log.clear()
    return clock, limiter, batch


def test_nothing_remaining_at_the_pace_held_leaves_the_gate_open(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope paced at the 25 a second the vendor stated
    clock, limiter, batch = _paced_at(local_aws, table, 25)
    # When an answer at that pace says the window holds all 25 (remaining 0, reset in 1 s)
    _call(batch, clock, _says(25, remaining=0))
    # Then the window is full, not over: the gate stays open, the next call goes at the pace
    assert not _closed(limiter, clock)
    before = clock.now
    _call(batch, clock, _says(25, remaining=1))
    assert clock.now - before < 0.1


def test_nothing_remaining_at_a_lower_pace_than_held_closes_the_gate_before_the_rate_is_written(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope paced at 50 a second
    clock, limiter, batch = _paced_at(local_aws, table, 50)
    # When the vendor halves its limit and its answer says nothing remains
    _call(batch, clock, _says(25, remaining=0))
    # Then the gate is closed until the reset, before the lower rate is written (the closure
    # is what stops every consumer's calls at the old pace)
    assert _closed(limiter, clock)
    assert limiter.log == ["close", "hold"]


def test_a_call_waiting_for_its_slot_when_its_batch_reads_a_lowering_goes_back(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope paced at 50 a second, one call out, another waiting for its banked slot
    clock, _, batch = _paced_at(local_aws, table, 50)
    out, out_sent = _admit(batch, clock)
    waiting = batch.call(_job(), {})
    # When, while it waits, the call out comes back: the vendor halved its limit, nothing
    # remains
    clock.during = lambda: _end(out, out_sent, _says(25, remaining=0))
    admitted = waiting.admit(lambda: None)
    # Then the waiting call is not sent at the old pace: it goes back until the reopening
    assert isinstance(admitted, Deferral)
    assert admitted.reason == "throttled"


def test_nothing_remaining_beyond_what_sweepers_own_pace_spends_closes_the_gate(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope at its start, one call per round trip (far below the vendor's 25 a second)
    clock = _Clock()
    limiter, batch = _env(local_aws, table, clock)
    # When the first answer says the 25 are spent: others spend them, not sweeper
    _call(batch, clock, _says(25, remaining=0))
    # Then the window is over: the gate is closed until the reset
    assert _closed(limiter, clock)


@dataclass
class _Lowered:
    """Two environments paced at 50 a second, each with a block of slots banked, after the
    first read the vendor's answer stating 5 a second (something remaining: no closure)."""

    clock: _Clock
    other: DynamoLimiter  # the second environment's limiter
    second: BatchAdmission
    sent: float  # the second environment's call, from its block at 50 a second


def _lowered_by_the_first(local_aws: LocalAws, table: str) -> _Lowered:
    clock = _Clock()
    _, first = _env(local_aws, table, clock)
    other, second = _env(local_aws, table, clock)
    _call(first, clock, _says(50, remaining=40))
    out, out_sent = _admit(first, clock)  # its answer comes back after the second's call
    sent = _call(second, clock, _says(50, remaining=39))
    _end(out, out_sent, _says(5, remaining=3))
    return _Lowered(clock, other, second, sent)


def test_a_lowering_another_environment_held_drops_the_slots_banked_at_the_old_rate(
    local_aws: LocalAws, table: str
) -> None:
    # Given two environments at 50 a second, the first has held the vendor's 5 a second
    env = _lowered_by_the_first(local_aws, table)
    # When the second calls twice more, its block banked at 50 a second
    banked = _call(env.second, env.clock, _says(5, remaining=2))
    later = _call(env.second, env.clock, None)
    # Then neither goes on a slot of the old pace: its last look read the lowering, the bank
    # was dropped, and each waits the new interval after the last slot taken
    assert banked - env.sent >= 0.9 / 5
    assert later - banked >= 0.9 / 5


def test_a_lowering_read_from_the_shared_item_drops_the_slots_banked_at_the_old_rate(
    local_aws: LocalAws, table: str
) -> None:
    # Given two environments at 50 a second, the first has held the vendor's 5 a second
    env = _lowered_by_the_first(local_aws, table)
    # When the second looks at its gate (as a call whose slot is further than the lead does),
    # reading the scope's item
    env.other.state(SCOPE)
    # Then the second's next admission drops its banked slots: its call waits the new interval
    later = _call(env.second, env.clock, None)
    assert later - env.sent >= 0.9 / 5


@dataclass
class _Waiting:
    """Two environments at 50 a second: the first has a call out, the second has just called
    and holds its block's next slot at that pace, covered by its last look at the gate."""

    clock: _Clock
    out: Admission  # the first environment's call, its answer not back yet
    out_sent: float
    second: BatchAdmission
    sent: float  # the second environment's last call


def _second_waiting(local_aws: LocalAws, table: str, learn: object = "ratelimit") -> _Waiting:
    clock = _Clock()
    _, first = _env(local_aws, table, clock, learn)
    _, second = _env(local_aws, table, clock, learn)
    _call(first, clock, _says(50, remaining=40))
    out, out_sent = _admit(first, clock)
    sent = _call(second, clock, _says(50, remaining=39))
    return _Waiting(clock, out, out_sent, second, sent)


def _admit_while_the_first_reads(
    local_aws: LocalAws, table: str, reading: VendorReading, learn: object = "ratelimit"
) -> tuple[_Waiting, Permit | Deferral]:
    """Given two environments at 50 a second, the second waiting for a slot of that pace
    (`_second_waiting`): its next call, admitted while (during its wait for its slot) the
    first environment's answer comes back with `reading` and the first writes what it says."""
    env = _second_waiting(local_aws, table, learn)
    waiting = env.second.call(_job(), {})
    env.clock.during = lambda: _end(env.out, env.out_sent, reading)
    return env, waiting.admit(lambda: None)


def test_a_slot_granted_before_another_environment_wrote_a_lowering_is_not_spent_at_the_old_rate(
    local_aws: LocalAws, table: str
) -> None:
    # When the first writes the vendor's 5 a second (something remaining: no closure) while
    # the second waits for a slot of 50 a second
    env, admitted = _admit_while_the_first_reads(local_aws, table, _says(5, remaining=3))
    # Then the second's call is not sent on it: the slot is given up, the call goes at the new
    # pace
    assert isinstance(admitted, Permit)
    assert env.clock.now - env.sent >= 0.9 / 5


def test_a_call_whose_gate_another_environment_closed_on_a_lowering_is_not_sent(
    local_aws: LocalAws, table: str
) -> None:
    # When the first reads that the vendor halved its limit and nothing remains, and closes
    # the gate, while the second waits for a slot of 50 a second
    _, admitted = _admit_while_the_first_reads(local_aws, table, _says(25, remaining=0))
    # Then the second's call goes back until the reopening
    assert isinstance(admitted, Deferral)
    assert admitted.reason == "throttled"


def test_a_slot_granted_before_a_lowering_within_the_headroom_is_still_spent(
    local_aws: LocalAws, table: str
) -> None:
    # When the first writes the vendor's 49 a second while the second waits for a slot of 50
    # a second: the old pace, its headroom applied, is within what the vendor allows
    env, admitted = _admit_while_the_first_reads(local_aws, table, _says(49, remaining=30))
    # Then the second's call goes on its slot (only the slots banked after it are dropped)
    assert isinstance(admitted, Permit)
    assert env.clock.now - env.sent < 0.1


def _shared_call_after(local_aws: LocalAws, table: str, reading: VendorReading) -> float:
    """Of a quota others spend too (`SHARED`), `_admit_while_the_first_reads` with `reading`:
    how long after its last call the second environment's next call goes (admitted)."""
    env, admitted = _admit_while_the_first_reads(local_aws, table, reading, learn=SHARED)
    assert isinstance(admitted, Permit)
    return env.clock.now - env.sent


def test_a_slot_granted_before_a_shared_quotas_pace_moved_is_still_spent(
    local_aws: LocalAws, table: str
) -> None:
    # Given a quota others spend too: its pace moves with their spend, and its reserve's gate
    # bounds the vendor's count. When the first environment writes a lower pace (others spent
    # much) while the second waits for a slot at the old pace
    waited = _shared_call_after(local_aws, table, _says(50, remaining=30))
    # Then the second's call goes on its slot: giving it up would only leave it unused
    assert waited < 0.1


def test_a_slot_granted_before_a_shared_quotas_vendor_lowered_its_limit_is_not_spent(
    local_aws: LocalAws, table: str
) -> None:
    # Given a quota others spend too. When the first environment writes the vendor's 5 a
    # second (the vendor lowered its limit below the old pace, something remaining: no
    # closure) while the second waits for a slot of 50 a second
    waited = _shared_call_after(local_aws, table, _says(5, remaining=3))
    # Then the second's call is not sent on it: the item says the vendor moved the rate, not
    # the others' spend; the slot is given up, the call goes at the new pace
    assert waited >= 0.9 / 5


class _SlowReads(DynamoLimiter):
    """The limiter, each gate read taking 0.1 s of the fake clock (a loaded environment)."""

    def __init__(self, *args: Any, clock: _Clock, **kwargs: Any) -> None:
        super().__init__(*args, clock=clock, **kwargs)
        self._fake = clock

    def state(self, scope: str) -> ScopeState:
        self._fake.now += 0.1
        return super().state(scope)


def test_a_last_look_that_makes_the_first_call_late_still_lets_it_go(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope at its start (one call per round trip), whose gate reads are slow
    clock = _Clock()
    limiter = _SlowReads(local_aws.dynamodb(), table, clock=clock)
    clocks = Clocks(clock.sleep, clock, clock, random.Random(0), _Sink())
    batch = admission_for(_policy(), limiter, clocks, 10, {SCOPE: 40})
    # When its first call's last look ends past the slot's use
    admitted = batch.call(_job(), {}).admit(lambda: None)
    # Then the call goes (a late request spends another slot afterwards), rather than wait a
    # round trip for the next slot at the start's pace
    assert isinstance(admitted, Permit)
