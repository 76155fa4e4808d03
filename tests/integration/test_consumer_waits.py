"""The consumer's way to a rate slot, on a fake clock: every wait is exact, none is slept.

The ledger is the real PostgreSQL; the limiter is a scripted one (the `Limiter` seam has three
implementations already), so that each answer a limiter can give — a slot now, later, further
than the re-check lead, already past; a refusal for rate or a closed gate, within the wait or
beyond it — is asserted on its own: what is slept, what is measured, when the record comes back
and what the ledger learns. tests/integration/test_outcomes.py drives the same paths against
the real limiter on DynamoDB with wall-clock bounds.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
)

import sweeper.admission as admission_module
from sweeper.admission import GATE_READ_LEAD_SECONDS, GATE_RECHECK_LEAD_SECONDS, BatchSlots
from sweeper.admission import bank as slots_module
from sweeper.admission import composed as composed_module
from sweeper.admission import rate as rate_module
from sweeper.admission.pairing import PairedLimits
from sweeper.config import LimitConfig, Policy, Quota, RetryConfig, ThrottleConfig
from sweeper.consumer import (
    RATE_DEFERRAL_JITTER_SECONDS,
    ConsumerDeps,
    GuardedCall,
    ParallelBatchProcessor,
    Prepare,
    delivery,
    guard_with_idempotency,
    process_batch,
)
from sweeper.ledger.store import Ledger
from sweeper.limiter import Adaptive, Denial, Grant, ScopeState
from sweeper.models import (
    ActionCall,
    ActionResult,
    Job,
    JobMessage,
    JobStatus,
    NewJob,
    OutcomeClass,
)
from sweeper.observability import Metric
from sweeper.sqs_queue import Hide
from sweeper_local.lambda_runtime import LocalLambdaContext
from sweeper_local.metric_totals import CountingSink

pytestmark = pytest.mark.integration

START = 1_800_000_000.0  # epoch seconds: the fake clock's origin


class FakeTime:
    """Epoch seconds that move only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = START
        self.sleeps: list[float] = []
        self.overslept: list[float] = []  # how late each next sleep wakes (a loaded machine)

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(round(seconds, 6))
        self.now += seconds + (self.overslept.pop(0) if self.overslept else 0.0)

    def utc(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)


@dataclass
class ScriptedLimiter:
    """Answers each reservation from a script of functions of the current fake time."""

    time: FakeTime
    answers: list[Any]
    states: list[ScopeState] = field(default_factory=list)
    reserved: list[tuple[str, float, float]] = field(default_factory=list)
    state_reads: int = 0
    closed: list[tuple[str, float, str]] = field(default_factory=list)
    #: How long each write and each gate read takes on the fake clock (0: instant).
    reserve_seconds: float = 0.0
    state_seconds: float = 0.0

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        *,
        slack: float = 0.0,
        tolerance: float = 0.0,
    ) -> Grant | Denial:
        # One record a batch here: the consumer never asks for a block of slots.
        assert count == 1
        assert adaptive is None  # a known quota
        self.reserved.append((scope, interval, round(horizon, 6)))
        self.time.now += self.reserve_seconds
        answer: Grant | Denial = self.answers.pop(0)(self.time.now)
        return answer

    def close(self, scope: str, until: float, reason: Any) -> float:
        self.closed.append((scope, until, reason))
        return until

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        raise AssertionError("a known quota is never cut")

    def state(self, scope: str) -> ScopeState:
        """The next scripted state if it is of `scope` (a limiter's state is per scope)."""
        self.state_reads += 1
        self.time.now += self.state_seconds
        if self.states and self.states[0].scope == scope:
            return self.states.pop(0)
        return ScopeState(scope, None, None, None, None)


class TopOfRange(random.Random):
    """Draws the top of every range, so a jitter shows the bound it was drawn from."""

    def uniform(self, a: float, b: float) -> float:
        return b


class BottomOfRange(random.Random):
    """Draws the bottom of every range."""

    def uniform(self, a: float, b: float) -> float:
        return a


@dataclass
class Calls:
    """The guarded call: records the timeout `prepare` gave and when the call was sent."""

    time: FakeTime
    sent_at: list[float] = field(default_factory=list)
    timeouts: list[float | None] = field(default_factory=list)

    def __call__(self, job: ActionCall, prepare: Prepare) -> ActionResult:
        self.timeouts.append(prepare())
        self.sent_at.append(self.time.now)
        return ActionResult(outcome=OutcomeClass.ACCEPTED, status_code=200, code="http_200")


class Hidden:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def hide_for(self, receipt_handle: str, seconds: float) -> None:
        self.seconds[receipt_handle] = seconds

    def hide_each(self, hides: Sequence[Hide]) -> list[str]:
        self.seconds.update((hide.receipt_handle, hide.seconds) for hide in hides)
        return []


@dataclass
class Rig:
    ledger: Ledger
    time: FakeTime
    limiter: ScriptedLimiter
    calls: Calls
    hidden: Hidden
    metrics: CountingSink
    policy: Policy
    key: str = ""
    body: str = ""
    guarded: GuardedCall | None = None  # instead of `calls`, when a test gives its own
    #: The action's warm hook (ConsumerDeps.warm): nothing to prepare unless a test gives one.
    warm: Callable[[ActionCall, float | None], None] = lambda job, timeout_seconds: None

    def deliver(
        self,
        *,
        timeout: float | None = 30.0,
        rng: random.Random | None = None,
        processor: BatchProcessor | None = None,
    ) -> bool:
        """Deliver the one job's message; True when the record was reported back (failed)."""
        deps = self.deps(rng)
        if not self.body:
            (claimed,) = self.ledger.claim(
                self.policy.name, "b-1", self.time.utc(), timedelta(seconds=900), 1
            )
            self.key = claimed.operation_key
            self.body = JobMessage.for_claim(self.policy.name, claimed, "b-1").to_body()
        body = self.body
        record: dict[str, Any] = {"messageId": "m-1", "receiptHandle": "r-1", "body": body}
        record |= {"attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs"}
        processor = processor or BatchProcessor(
            event_type=EventType.SQS, raise_on_entire_batch_failure=False
        )
        response = process_batch(
            {"Records": [record]},
            LocalLambdaContext(function_name="sweeper-consumer", timeout_seconds=60),
            deps,
            processor,
            call_timeout=lambda: timeout,
        )
        return bool(response["batchItemFailures"])

    def deps(self, rng: random.Random | None = None) -> ConsumerDeps:
        return ConsumerDeps(
            self.policy,
            self.ledger,
            self.guarded or self.calls,
            self.time.utc,
            self.metrics,
            self.limiter,
            self.hidden,
            sleep=self.time.sleep,
            now=lambda: self.time.now,
            rng=rng or TopOfRange(),
            warm=self.warm,
            monotonic=lambda: self.time.now,  # when a request left, on the same fake clock
        )

    def redeliver(self, **kw: Any) -> bool:
        """The same message delivered again (a later batch), when the queue shows it again:
        the fake clock moves on by what the consumer hid it for, in the whole seconds SQS
        takes (sweeper.sqs_queue truncates)."""
        self.time.now += int(self.hidden.seconds.pop("r-1", 0.0))
        return self.deliver(**kw)

    def job(self) -> Job:
        job = self.ledger.get(self.key)
        assert job is not None
        return job

    def count(self, metric: str) -> float:
        return self.metrics.totals.get(metric, 0.0)


@pytest.fixture
def rig(ledger: Ledger) -> Rig:
    policy = Policy(
        name="exports",
        quota=Quota(limit=4, period_seconds=1.0, headroom=1.0),  # a slot every 0.25 s
        throttle=ThrottleConfig(max_wait_seconds=2.0, reopen_jitter_seconds=0.5),
    )
    time = FakeTime()
    now = time.utc()
    ledger.schedule(policy.name, policy.version, lambda j: "scope-a", [NewJob("t", "o", now)], now)
    limiter = ScriptedLimiter(time, [])
    return Rig(ledger, time, limiter, Calls(time), Hidden(), CountingSink(), policy)


def grant(after: float) -> Any:
    return lambda now: Grant(now + after)


def denial(after: float, reason: str) -> Any:
    return lambda now: Denial(now + after, reason)  # type: ignore[arg-type]


def test_a_slot_due_now_is_called_at_once_with_the_scope_interval_and_the_full_wait(
    rig: Rig,
) -> None:
    rig.limiter.answers = [grant(0.0)]
    assert rig.deliver() is False
    assert rig.limiter.reserved == [("scope-a", 0.25, 2.0)]  # interval, horizon = max wait
    assert rig.time.sleeps == []
    assert rig.calls.sent_at == [START]
    assert rig.calls.timeouts == [30.0]
    assert rig.limiter.state_reads == 0
    assert rig.count(Metric.LIMITER_WAITS) == 0
    assert rig.job().status is JobStatus.SUCCEEDED


@dataclass
class Warms:
    """An action's warm hook: records what the delivery had done when it was called."""

    rig: Rig
    #: (operation key, time budget given, sleeps and reservations made before it) per call.
    seen: list[tuple[str, float | None, int, int]] = field(default_factory=list)

    def __call__(self, job: ActionCall, timeout_seconds: float | None) -> None:
        self.seen.append(
            (job.key, timeout_seconds, len(self.rig.time.sleeps), len(self.rig.limiter.reserved))
        )


def test_the_action_is_warmed_once_before_the_wait_for_its_slot(rig: Rig) -> None:
    # Given a slot further away than the gate's re-check lead (two sleeps before the call),
    # refused once for rate first (a third sleep, and a second reservation)
    rig.limiter.answers = [denial(0.3, "rate"), grant(1.5)]
    warms = Warms(rig)
    rig.warm = warms
    # When the record is delivered
    assert rig.deliver(timeout=30.0) is False
    # Then the action was warmed once, before any sleep and before its slot was reserved,
    # with the time a call would not need
    assert warms.seen == [(rig.key, 30.0 - delivery.MIN_CALL_SECONDS, 0, 0)]
    assert len(rig.time.sleeps) == 3
    assert rig.calls.sent_at == [pytest.approx(START + 0.3 + 1.5)]


def test_a_warm_that_raises_does_not_stop_the_call(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    # Given an action whose warm fails with a bug (its message naming what it touched)
    rig.limiter.answers = [grant(0.1)]

    def broken(job: ActionCall, timeout_seconds: float | None) -> None:
        raise AttributeError("_get_conn of vendor.example/v1/tenants/t1")

    rig.warm = broken
    # When the record is delivered
    with caplog.at_level(logging.WARNING, logger="sweeper.consumer"):
        assert rig.deliver() is False
    # Then the call went out at its slot all the same
    assert rig.calls.sent_at == [START + 0.1]
    assert rig.job().status is JobStatus.SUCCEEDED
    # And the warning names the error's type, not its message, and carries no traceback
    (line,) = [r for r in caplog.records if r.getMessage() == "warming the action failed"]
    assert line.__dict__["error"] == "AttributeError"
    assert line.exc_info is None
    assert "tenants" not in repr(line.__dict__)


def test_no_warm_when_no_call_can_follow(rig: Rig) -> None:
    # Given less Lambda time than a call needs
    warms = Warms(rig)
    rig.warm = warms
    # When the record is delivered
    assert rig.deliver(timeout=delivery.MIN_CALL_SECONDS / 2) is True
    # Then it went back uncalled, and nothing was warmed for it
    assert warms.seen == []
    assert rig.calls.sent_at == []


def test_a_slot_within_the_lead_is_slept_for_exactly(rig: Rig) -> None:
    rig.limiter.answers = [grant(GATE_RECHECK_LEAD_SECONDS)]
    assert rig.deliver() is False
    assert rig.time.sleeps == [GATE_RECHECK_LEAD_SECONDS]
    assert rig.limiter.state_reads == 0  # no re-check for a slot this close
    assert rig.calls.sent_at == [START + GATE_RECHECK_LEAD_SECONDS]
    assert rig.count(Metric.LIMITER_WAITS) == 1


def test_a_far_slot_rechecks_the_gate_the_read_lead_before_it_and_calls_on_time(
    rig: Rig,
) -> None:
    rig.limiter.answers = [grant(1.5)]
    assert rig.deliver() is False
    assert rig.time.sleeps == [1.5 - GATE_READ_LEAD_SECONDS, GATE_READ_LEAD_SECONDS]
    assert rig.limiter.state_reads == 1
    assert rig.calls.sent_at == [START + 1.5]
    assert rig.count(Metric.LIMITER_WAITS) == 1
    assert rig.count(Metric.GATE_DEFERRALS) == 0


def test_a_slot_just_past_the_lead_is_rechecked_the_read_lead_before_it(rig: Rig) -> None:
    rig.limiter.answers = [grant(GATE_RECHECK_LEAD_SECONDS + 0.01)]
    assert rig.deliver() is False
    assert rig.limiter.state_reads == 1
    before = GATE_RECHECK_LEAD_SECONDS + 0.01 - GATE_READ_LEAD_SECONDS
    assert rig.time.sleeps == [pytest.approx(before), GATE_READ_LEAD_SECONDS]
    assert rig.calls.sent_at == [pytest.approx(START + GATE_RECHECK_LEAD_SECONDS + 0.01)]


def test_a_slot_within_the_lead_of_now_but_not_of_the_request_is_read_the_read_lead_before_it(
    rig: Rig,
) -> None:
    # Given a write that took 40 ms and a slot 80 ms after its answer (120 ms after the request)
    rig.limiter.reserve_seconds = 0.04
    rig.limiter.answers = [grant(0.08)]
    assert rig.deliver() is False
    # Then the gate is read the read lead before the slot, not at once
    assert rig.limiter.state_reads == 1
    assert rig.time.sleeps == [pytest.approx(0.08 - GATE_READ_LEAD_SECONDS), GATE_READ_LEAD_SECONDS]
    assert rig.calls.sent_at == [pytest.approx(START + 0.12)]


def test_a_gate_closed_during_the_wait_gives_the_slot_up_and_returns_the_record(
    rig: Rig,
) -> None:
    rig.limiter.answers = [grant(1.5)]
    until = START + 1.45 + 7.8  # read at START + 1.45: closed for 7.8 s more
    rig.limiter.states = [ScopeState("scope-a", None, until, "throttled", 8.0)]
    assert rig.deliver() is True
    assert rig.calls.sent_at == []
    assert rig.hidden.seconds == {"r-1": 7}  # whole seconds, rounded down: never late
    assert rig.count(Metric.GATE_DEFERRALS) == 1
    job = rig.job()
    assert (job.status, job.attempt_count, job.last_error_code) == (
        JobStatus.LEASED,
        0,
        "wait_throttled",
    )
    assert job.next_attempt_at == datetime.fromtimestamp(START + 1.45 + 7, UTC)
    assert job.lease_expires_at == job.next_attempt_at + timedelta(seconds=900)


def test_a_gate_that_reopened_before_the_recheck_lets_the_call_go(rig: Rig) -> None:
    rig.limiter.answers = [grant(1.5)]
    ended = START + 1.0  # it was closed, but that ended before the re-check at START + 1.45
    rig.limiter.states = [ScopeState("scope-a", None, ended, "throttled", 1.0)]
    assert rig.deliver() is False
    assert rig.calls.sent_at == [START + 1.5]


def test_a_slot_already_past_is_let_go_and_another_taken(rig: Rig) -> None:
    rig.limiter.answers = [grant(-0.05), grant(0.0)]  # 50 ms late: beyond the 35 ms tolerance
    assert rig.deliver() is False
    assert len(rig.limiter.reserved) == 2
    assert rig.count(Metric.LATE_SLOTS) == 1
    assert rig.calls.sent_at == [START]


def test_a_slot_late_within_the_tolerance_is_used(rig: Rig) -> None:
    rig.limiter.answers = [grant(-0.03)]
    assert rig.deliver() is False
    assert len(rig.limiter.reserved) == 1
    assert rig.count(Metric.LATE_SLOTS) == 0
    assert rig.time.sleeps == []


def test_a_gate_read_so_slow_that_the_slot_passed_lets_it_go_and_takes_another(
    rig: Rig,
) -> None:
    # Given a far slot, and a gate read that answers 50 ms after that slot (beyond the 35 ms
    # tolerance): the read starts the read lead before the slot and takes that and 50 ms
    rig.limiter.answers = [grant(1.5), grant(0.0)]
    rig.limiter.state_seconds = GATE_READ_LEAD_SECONDS + 0.05
    # When the record is delivered
    assert rig.deliver() is False
    # Then that slot is let go, counted, and the call is made at a second slot
    assert len(rig.limiter.reserved) == 2
    assert rig.count(Metric.LATE_SLOTS) == 1
    assert rig.calls.sent_at == [pytest.approx(START + 1.55)]


def test_a_wait_that_wakes_past_the_tolerance_lets_the_slot_go_and_takes_another(
    rig: Rig,
) -> None:
    # Given a slot 50 ms away, and a sleep for it that wakes 50 ms late (beyond the 35 ms)
    rig.limiter.answers = [grant(0.05), grant(0.0)]
    rig.time.overslept = [0.05]
    # When the record is delivered
    assert rig.deliver() is False
    # Then that slot is let go, counted, and the call is made at the next slot, on time
    assert len(rig.limiter.reserved) == 2
    assert rig.count(Metric.LATE_SLOTS) == 1
    assert rig.calls.sent_at == [pytest.approx(START + 0.1)]


def test_a_wait_after_the_gate_read_that_wakes_late_lets_the_slot_go(rig: Rig) -> None:
    # Given a far slot: a sleep to the re-check, the read, and a last sleep that wakes 50 ms late
    rig.limiter.answers = [grant(1.5), grant(0.0)]
    rig.time.overslept = [0.0, 0.05]
    assert rig.deliver() is False
    assert rig.limiter.state_reads == 1
    assert (len(rig.limiter.reserved), rig.count(Metric.LATE_SLOTS)) == (2, 1)
    assert rig.calls.sent_at == [pytest.approx(START + 1.55)]


def leaves_after(rig: Rig, seconds: float) -> GuardedCall:
    """The real guard (no idempotency store) over an action whose request leaves `seconds`
    after the call was let go to its slot (a stall between the check and the last byte)."""

    def perform(job: ActionCall, timeout: float | None) -> ActionResult:
        rig.calls.sent_at.append(rig.time.now)
        return ActionResult(
            outcome=OutcomeClass.ACCEPTED,
            status_code=200,
            code="http_200",
            request_sent_at=rig.time.now + seconds,
        )

    return guard_with_idempotency(perform, lambda fn: fn)


def test_a_request_that_left_later_than_its_slot_allows_spends_a_slot_of_its_scope(
    rig: Rig,
) -> None:
    # Given a slot due now, and a request that leaves 50 ms after the check (beyond the 35 ms)
    rig.limiter.answers = [grant(0.0), grant(0.25)]
    rig.guarded = leaves_after(rig, 0.05)
    # When the record is delivered
    assert rig.deliver() is False
    # Then the call was made once, and the scope's next slot reserved and left empty (within
    # one period: a slot later than that could not be in the late call's window)
    assert rig.calls.sent_at == [START]
    assert rig.limiter.reserved == [("scope-a", 0.25, 2.0), ("scope-a", 0.25, 1.0)]
    assert rig.count(Metric.LATE_SENDS) == 1
    assert rig.job().status is JobStatus.SUCCEEDED


def test_a_request_that_left_within_the_tolerance_spends_nothing(rig: Rig) -> None:
    rig.limiter.answers = [grant(0.0)]
    rig.guarded = leaves_after(rig, 0.03)
    assert rig.deliver() is False
    assert (len(rig.limiter.reserved), rig.count(Metric.LATE_SENDS)) == (1, 0)


def test_a_late_check_and_a_late_request_add_up(rig: Rig) -> None:
    # Given a slot 20 ms past when the call is let go (within the tolerance), and a request
    # that leaves 20 ms after that: 40 ms after the slot in all
    rig.limiter.answers = [grant(-0.02), grant(0.25)]
    rig.guarded = leaves_after(rig, 0.02)
    assert rig.deliver() is False
    assert (len(rig.limiter.reserved), rig.count(Metric.LATE_SENDS)) == (2, 1)


# The boundaries of the two tolerances, on a clock where they are exact: binary fractions on
# whole epoch seconds add up without rounding.
EXACT_LEAD, EXACT_READ_LEAD, EXACT_TOLERANCE = 0.125, 0.03125, 0.0625


@pytest.fixture
def exact(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each in every module that reads it (a facade re-export is a copy of the name).
    for module in (rate_module, composed_module, slots_module):
        monkeypatch.setattr(module, "GATE_RECHECK_LEAD_SECONDS", EXACT_LEAD)
        monkeypatch.setattr(module, "LATE_SLOT_TOLERANCE_SECONDS", EXACT_TOLERANCE)
    for module in (rate_module, composed_module):
        monkeypatch.setattr(module, "GATE_READ_LEAD_SECONDS", EXACT_READ_LEAD)


@pytest.mark.usefixtures("exact")
def test_a_slot_late_by_exactly_the_tolerance_is_still_used(rig: Rig) -> None:
    rig.limiter.answers = [grant(-EXACT_TOLERANCE)]
    assert rig.deliver() is False
    assert (len(rig.limiter.reserved), rig.count(Metric.LATE_SLOTS)) == (1, 0)
    assert rig.calls.sent_at == [START]


@pytest.mark.usefixtures("exact")
def test_a_slot_late_by_exactly_the_tolerance_after_the_gate_read_is_still_used(
    rig: Rig,
) -> None:
    rig.limiter.answers = [grant(1.5)]
    rig.limiter.state_seconds = EXACT_READ_LEAD + EXACT_TOLERANCE  # the tolerance late
    assert rig.deliver() is False
    assert (len(rig.limiter.reserved), rig.count(Metric.LATE_SLOTS)) == (1, 0)
    assert rig.calls.sent_at == [START + 1.5 + EXACT_TOLERANCE]


@pytest.mark.usefixtures("exact")
def test_a_wait_that_wakes_exactly_the_tolerance_late_still_calls(rig: Rig) -> None:
    rig.limiter.answers = [grant(EXACT_LEAD)]
    rig.time.overslept = [EXACT_TOLERANCE]
    assert rig.deliver() is False
    assert (len(rig.limiter.reserved), rig.count(Metric.LATE_SLOTS)) == (1, 0)
    assert rig.calls.sent_at == [START + EXACT_LEAD + EXACT_TOLERANCE]


@pytest.mark.usefixtures("exact")
def test_a_slot_exactly_the_lead_after_the_request_is_not_read_again(rig: Rig) -> None:
    rig.limiter.answers = [grant(EXACT_LEAD)]
    assert rig.deliver() is False
    assert rig.limiter.state_reads == 0
    assert rig.time.sleeps == [EXACT_LEAD]


@pytest.mark.usefixtures("exact")
def test_a_gate_read_due_exactly_now_is_made_without_a_sleep_before_it(rig: Rig) -> None:
    # Given a write that took the lead and a slot the read lead after its answer: the slot is
    # more than the lead after the request, so the gate is read again, and that read is due now
    rig.limiter.reserve_seconds = EXACT_LEAD
    rig.limiter.answers = [grant(EXACT_READ_LEAD)]
    assert rig.deliver() is False
    assert rig.limiter.state_reads == 1
    assert rig.time.sleeps == [EXACT_READ_LEAD]  # only the wait from the read to the slot
    assert rig.calls.sent_at == [START + EXACT_LEAD + EXACT_READ_LEAD]


def test_a_rate_refusal_within_the_wait_is_slept_without_jitter(rig: Rig) -> None:
    rig.limiter.answers = [denial(2.0, "rate"), grant(0.0)]  # exactly the longest wait in place
    assert rig.deliver() is False
    assert rig.time.sleeps == [2.0]
    assert rig.calls.sent_at == [START + 2.0]
    assert rig.count(Metric.LIMITER_WAITS) == 1
    assert rig.count(Metric.GATE_DEFERRALS) == 0
    assert rig.job().attempt_count == 1


def test_a_closed_gate_within_the_wait_is_slept_with_the_reopening_jitter(rig: Rig) -> None:
    rig.limiter.answers = [denial(1.0, "throttled"), denial(0.2, "throttled"), grant(0.0)]
    assert rig.deliver() is False
    assert rig.time.sleeps == [1.5, 0.7]  # the wait plus the whole jitter (top of its range)
    assert rig.count(Metric.GATE_DEFERRALS) == 1  # counted once per record, not per wait
    assert rig.count(Metric.LIMITER_WAITS) == 0
    assert rig.calls.sent_at == [START + 2.2]


def test_a_closed_gate_within_the_wait_adds_a_jitter_from_zero(rig: Rig) -> None:
    # The bottom of the jitter's range: the wait is the closure's own, nothing added
    rig.limiter.answers = [denial(1.0, "throttled"), grant(0.0)]
    assert rig.deliver(rng=BottomOfRange()) is False
    assert rig.time.sleeps == [1.0]
    assert rig.calls.sent_at == [START + 1.0]


def test_a_rate_refusal_beyond_the_wait_returns_the_record_with_jitter(rig: Rig) -> None:
    rig.limiter.answers = [denial(3.2, "rate")]
    assert rig.deliver() is True
    assert rig.calls.sent_at == []
    # 3.2 s plus the deferral jitter's top (0.5 s), rounded down to whole seconds
    assert rig.hidden.seconds == {"r-1": int(3.2 + RATE_DEFERRAL_JITTER_SECONDS)}
    assert rig.count(Metric.LIMITER_DEFERRALS) == 1
    assert rig.count(Metric.LIMITER_WAITS) == 1
    job = rig.job()
    assert (job.attempt_count, job.last_error_code) == (0, "wait_rate")
    assert job.next_attempt_at == datetime.fromtimestamp(START + 3, UTC)


def test_a_closed_gate_beyond_the_wait_returns_the_record_without_the_rate_jitter(
    rig: Rig,
) -> None:
    rig.limiter.answers = [denial(4.2, "throttled")]
    assert rig.deliver() is True
    assert rig.hidden.seconds == {"r-1": 4}  # 4.2 + 0.5 reopening jitter = 4.7: 4 whole seconds
    assert rig.count(Metric.LIMITER_DEFERRALS) == 0
    assert rig.count(Metric.GATE_DEFERRALS) == 1
    assert rig.job().last_error_code == "wait_throttled"


def test_a_rate_refusal_beyond_the_wait_adds_a_jitter_from_zero(rig: Rig) -> None:
    rig.limiter.answers = [denial(3.2, "rate")]
    assert rig.deliver(rng=BottomOfRange()) is True
    assert rig.hidden.seconds == {"r-1": 3}  # 3.2 s plus nothing, rounded down


def test_a_closure_of_less_than_a_second_beyond_the_wait_returns_the_record_at_once(
    rig: Rig,
) -> None:
    # One second of Lambda time left: no wait in place; the gate reopens in 0.3 s (+ 0.5 jitter)
    rig.limiter.answers = [denial(0.3, "throttled")]
    assert rig.deliver(timeout=1.0) is True
    assert rig.hidden.seconds == {"r-1": 0}  # 0.8 s, rounded down: visible again at once
    assert rig.job().next_attempt_at == datetime.fromtimestamp(START, UTC)


def test_a_parallel_batch_whose_every_record_goes_back_is_a_partial_response(rig: Rig) -> None:
    # Given a batch processor calling records side by side, and a record that must go back
    rig.limiter.answers = [denial(3.2, "rate")]
    # When the batch is handled, every record of it returned
    returned = rig.deliver(processor=ParallelBatchProcessor(2))
    # Then the batch reports it back as an item failure, not as a failed invocation
    assert returned is True
    assert rig.count(Metric.LIMITER_DEFERRALS) == 1


def test_the_wait_in_place_never_reaches_into_the_last_second_of_lambda_time(rig: Rig) -> None:
    # 2.5 s of Lambda time left: the horizon is 1.5 s (not the 2 s max wait)
    rig.limiter.answers = [denial(1.6, "rate")]
    assert rig.deliver(timeout=2.5) is True
    assert rig.limiter.reserved == [("scope-a", 0.25, 1.5)]
    assert rig.calls.sent_at == []
    assert rig.count(Metric.LIMITER_DEFERRALS) == 1


def test_with_exactly_one_second_of_lambda_time_left_the_call_is_still_made(rig: Rig) -> None:
    rig.limiter.answers = [grant(0.0)]
    assert rig.deliver(timeout=1.0) is False
    assert rig.limiter.reserved == [("scope-a", 0.25, 0.0)]
    assert rig.calls.timeouts == [1.0]


def test_under_one_second_of_lambda_time_the_record_goes_back_at_once_uncalled(
    rig: Rig,
) -> None:
    rig.limiter.answers = [grant(0.0)]
    assert rig.deliver(timeout=0.99) is True
    assert rig.limiter.reserved == []
    assert rig.calls.sent_at == []
    assert rig.hidden.seconds == {"r-1": 0.0}
    job = rig.job()
    assert job.attempt_count == 0
    assert job.next_attempt_at == datetime.fromtimestamp(START, UTC)


# -- after the call: each outcome class's path, on the same fake clock --------------------------


@dataclass
class Answers:
    """The action: answers each call from a script, through the real idempotency guard's
    classification (settled outcomes returned, the others raised as retryable)."""

    time: FakeTime
    results: list[ActionResult]
    sent_at: list[float] = field(default_factory=list)

    def perform(self, job: ActionCall, timeout: float | None) -> ActionResult:
        self.sent_at.append(self.time.now)
        return self.results.pop(0)


def answered(rig: Rig, *results: ActionResult) -> Answers:
    answers = Answers(rig.time, list(results))
    rig.guarded = guard_with_idempotency(answers.perform, lambda f: f)
    rig.limiter.answers = [grant(0.0)] * len(results)
    return answers


def result(outcome: OutcomeClass, status: int, retry_after: float | None = None) -> ActionResult:
    return ActionResult(
        outcome=outcome, status_code=status, code=f"http_{status}", retry_after_seconds=retry_after
    )


def test_an_accepted_call_settles_the_job_and_a_redelivery_is_not_called(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    answers = answered(rig, result(OutcomeClass.ACCEPTED, 200))
    assert rig.deliver() is False
    assert rig.count(Metric.ATTEMPTS_PREFIX + "accepted") == 1
    assert rig.count(Metric.SUCCEEDED) == 1
    job = rig.job()
    assert (job.status, job.last_outcome, job.attempt_count) == (
        JobStatus.SUCCEEDED,
        OutcomeClass.ACCEPTED,
        1,
    )
    assert job.completed_at == datetime.fromtimestamp(START, UTC)
    with caplog.at_level(logging.DEBUG, logger="sweeper.consumer"):
        assert rig.redeliver() is False  # already settled: acknowledged without a call
    assert len(answers.sent_at) == 1
    assert rig.count(Metric.DUPLICATES) == 1
    # and the acknowledgement is logged (at DEBUG) by its ids and the status found, nothing else
    (line,) = [r for r in caplog.records if r.getMessage() == "already settled; acknowledged"]
    names = ("operation_key", "batch_id", "scope", "status")
    assert {name: getattr(line, name, None) for name in names} == {
        "operation_key": rig.key,
        "batch_id": "b-1",
        "scope": "scope-a",
        "status": JobStatus.SUCCEEDED,
    }


def test_a_job_settled_meanwhile_by_another_delivery_counts_one_duplicate(rig: Rig) -> None:
    # Given a call during which another delivery of the same job settles it in the ledger
    def settled_elsewhere(job: ActionCall, prepare: Prepare) -> ActionResult:
        prepare()
        assert rig.ledger.mark_succeeded(job.key, OutcomeClass.ACCEPTED, rig.time.utc())
        return ActionResult(outcome=OutcomeClass.ACCEPTED, status_code=200, code="http_200")

    rig.guarded = settled_elsewhere
    rig.limiter.answers = [grant(0.0)]
    # When this delivery's accepted answer comes back, the record is done with
    assert rig.deliver() is False
    # Then it counts as one duplicate, not as a second success
    assert (rig.count(Metric.DUPLICATES), rig.count(Metric.SUCCEEDED)) == (1, 0)
    assert rig.job().status is JobStatus.SUCCEEDED


def batch_line(caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    """The fields of the one `batch` line the consumer wrote (sweeper.consumer.batch_log)."""
    (line,) = [r for r in caplog.records if r.getMessage() == "batch"]
    return {name: getattr(line, name, None) for name in ("records", "outcomes", "problems")}


def test_a_permanent_answer_is_terminal_at_once_with_its_code(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    answered(rig, result(OutcomeClass.PERMANENT, 422))
    with caplog.at_level(logging.INFO, logger="sweeper.consumer"):
        assert rig.deliver() is False  # deleted: never retried
    # and its batch's line counts it terminal, by its key
    assert batch_line(caplog) == {
        "records": 1,
        "outcomes": {"terminal": 1},
        "problems": {"terminal": [rig.key]},
    }
    job = rig.job()
    assert (job.status, job.last_outcome, job.last_error_code, job.attempt_count) == (
        JobStatus.FAILED,
        OutcomeClass.PERMANENT,
        "http_422",
        1,
    )
    assert rig.count(Metric.TERMINAL_FAILURES) == 1
    assert rig.count(Metric.SUCCEEDED) == 0
    assert rig.hidden.seconds == {}


def test_a_throttle_closes_the_scope_for_retry_after_plus_jitter_and_burns_no_attempt(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    answered(rig, result(OutcomeClass.THROTTLED, 429, retry_after=3.0))
    with caplog.at_level(logging.INFO, logger="sweeper.consumer"):
        assert rig.deliver() is True
    # counted once, as the scope's closure (not also as the wait it returns with)
    assert batch_line(caplog)["problems"] == {"scope_closed": [rig.key]}
    assert batch_line(caplog)["outcomes"] == {"scope_closed": 1}
    # Retry-After 3 s plus the whole reopening jitter (0.5 s, the top of its range)
    assert rig.limiter.closed == [("scope-a", START + 3.5, "throttled")]
    assert rig.hidden.seconds == {"r-1": 3}  # back when the gate reopens, whole seconds
    assert rig.count(Metric.THROTTLE_EVENTS) == 1
    assert rig.count(Metric.ATTEMPTS_PREFIX + "throttled") == 1
    job = rig.job()
    assert (job.status, job.attempt_count, job.last_outcome, job.last_error_code) == (
        JobStatus.LEASED,
        0,
        OutcomeClass.THROTTLED,
        "http_429",
    )
    assert job.next_attempt_at == datetime.fromtimestamp(START + 3, UTC)


def test_a_throttle_logs_when_and_for_how_long_it_closed_the_scope(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    # The incident benchmark (bench/rate.py) reads this line: message "scope closed", closed_at
    answered(rig, result(OutcomeClass.THROTTLED, 429, retry_after=3.0))
    rig.time.now += 0.25  # a time with a fraction of a second
    with caplog.at_level(logging.WARNING, logger="sweeper.consumer"):
        assert rig.deliver() is True
    (line,) = [r for r in caplog.records if r.getMessage() == "scope closed"]
    names = ("closed_at", "closed_for_seconds", "outcome", "code", "scope", "operation_key")
    assert {name: getattr(line, name, None) for name in (*names, "batch_id")} == {
        "closed_at": START + 0.25,
        "closed_for_seconds": 3.5,
        "outcome": "throttled",
        "code": "http_429",
        "scope": "scope-a",
        "operation_key": rig.key,
        "batch_id": "b-1",  # the ids an operator searches by, with the outcome code
    }


def test_a_throttle_without_retry_after_right_after_a_reopening_doubles_the_last_closure(
    rig: Rig,
) -> None:
    # Given a scope closed for 4 s that reopened 0.2 s before the call was sent (at START)
    rig.limiter.states = [ScopeState("scope-a", None, START - 0.2, "throttled", 4.0)]
    answered(rig, result(OutcomeClass.THROTTLED, 429))
    # When the vendor answers a bare 429
    assert rig.deliver() is True
    # Then the scope closes for twice as long, plus the whole jitter (0.5 s)
    assert rig.limiter.closed == [("scope-a", START + 8.5, "backoff")]
    assert rig.hidden.seconds == {"r-1": 8}


def test_a_throttle_without_retry_after_after_the_recovery_window_closes_for_the_base(
    rig: Rig,
) -> None:
    # Given a scope closed for 4 s that reopened the recovery window (1 s base + 0.5 s jitter)
    # before the call was sent
    rig.limiter.states = [ScopeState("scope-a", None, START - 1.5, "throttled", 4.0)]
    answered(rig, result(OutcomeClass.THROTTLED, 429))
    # When the vendor answers a bare 429
    assert rig.deliver() is True
    # Then the closure starts afresh from the base (1 s), plus the jitter
    assert rig.limiter.closed == [("scope-a", START + 1.5, "backoff")]


def test_a_throttle_is_judged_by_when_its_call_was_sent_not_when_it_was_answered(
    rig: Rig,
) -> None:
    # Given a scope closed for 4 s until START + 0.1 and a call sent at START, answered 0.3 s
    # later (after the reopening): the call was in flight when the gate closed
    rig.limiter.states = [ScopeState("scope-a", None, START + 0.1, "throttled", 4.0)]
    answers = answered(rig, result(OutcomeClass.THROTTLED, 429))

    def slow(job: ActionCall, timeout: float | None) -> ActionResult:
        answer = answers.perform(job, timeout)
        rig.time.now += 0.3
        return answer

    rig.guarded = guard_with_idempotency(slow, lambda f: f)
    # When the vendor answers a bare 429
    assert rig.deliver() is True
    # Then its 429 echoes the one that closed the gate: as long again from the answer, not doubled
    assert answers.sent_at == [START]
    assert rig.limiter.closed == [("scope-a", START + 0.3 + 4.5, "backoff")]


def test_an_auth_failure_opens_the_circuit_for_the_cooloff(rig: Rig) -> None:
    rig.policy = rig.policy.model_copy(
        update={"throttle": rig.policy.throttle.model_copy(update={"auth_cooloff_seconds": 120})}
    )
    answered(rig, result(OutcomeClass.AUTH, 401))
    assert rig.deliver() is True
    assert rig.limiter.closed == [("scope-a", START + 120, "auth")]
    assert rig.hidden.seconds == {"r-1": 120}
    assert rig.count(Metric.AUTH_CIRCUIT_OPEN) == 1
    assert rig.count(Metric.THROTTLE_EVENTS) == 0
    job = rig.job()
    assert (job.attempt_count, job.last_outcome) == (0, OutcomeClass.AUTH)


def test_a_transient_answer_counts_an_attempt_and_backs_off(rig: Rig) -> None:
    rig.policy = rig.policy.model_copy(
        update={"retry": RetryConfig(base_seconds=4, cap_seconds=60), "max_attempts": 3}
    )
    answered(rig, result(OutcomeClass.TRANSIENT, 503))
    assert rig.deliver() is True
    assert rig.hidden.seconds == {"r-1": 4.0}  # full jitter over [0, 4]: the top
    assert rig.count(Metric.RETRIES) == 1
    assert rig.count(Metric.TERMINAL_FAILURES) == 0
    job = rig.job()
    assert (job.status, job.attempt_count, job.last_outcome, job.last_error_code) == (
        JobStatus.LEASED,
        1,
        OutcomeClass.TRANSIENT,
        "http_503",
    )
    assert job.next_attempt_at == datetime.fromtimestamp(START + 4, UTC)
    assert job.lease_expires_at == job.next_attempt_at + timedelta(seconds=900)


def test_a_retry_after_a_fractional_backoff_is_called_again_on_its_redelivery(
    rig: Rig,
) -> None:
    # Given a transient answer whose backoff is not whole seconds (2.5 s, the top of the range)
    rig.policy = rig.policy.model_copy(
        update={"retry": RetryConfig(base_seconds=2.5, cap_seconds=60), "max_attempts": 3}
    )
    transient, accepted = result(OutcomeClass.TRANSIENT, 503), result(OutcomeClass.ACCEPTED, 200)
    answers = answered(rig, transient, accepted)
    assert rig.deliver() is True
    retry_at = rig.job().next_attempt_at
    # When the queue shows the message again
    assert rig.redeliver() is False
    # Then the job is called again and settles: not acknowledged uncalled as not yet due
    assert answers.sent_at == [START, START + 3]
    assert rig.count(Metric.NOT_YET_DUE) == 0
    assert rig.job().status is JobStatus.SUCCEEDED
    # for the ledger's next attempt and the message's return agree, whole seconds rounded up
    assert retry_at == datetime.fromtimestamp(START + 3, UTC)


def test_the_last_allowed_attempt_makes_the_job_terminal(rig: Rig) -> None:
    rig.policy = rig.policy.model_copy(update={"max_attempts": 2})
    answered(rig, result(OutcomeClass.UNKNOWN, 504), result(OutcomeClass.UNKNOWN, 504))
    assert rig.deliver() is True  # attempt 1 of 2: retried
    assert rig.count(Metric.EXHAUSTED) == 0
    assert rig.redeliver() is False  # attempt 2 of 2: terminal, the message deleted
    job = rig.job()
    assert (job.status, job.attempt_count, job.last_error_code) == (
        JobStatus.FAILED,
        2,
        "exhausted",
    )
    assert rig.count(Metric.EXHAUSTED) == 1
    assert rig.count(Metric.TERMINAL_FAILURES) == 1
    assert rig.count(Metric.RETRIES) == 1


def test_only_attempts_below_the_limit_count_as_retries_of_their_batch(rig: Rig) -> None:
    # Given the run record of the batch that carries the job, and two attempts allowed
    rig.ledger.start_run(rig.policy.name, rig.time.utc(), "b-1", rig.time.utc())
    rig.policy = rig.policy.model_copy(update={"max_attempts": 2})
    answered(rig, result(OutcomeClass.UNKNOWN, 504), result(OutcomeClass.UNKNOWN, 504))
    # When both attempts fail (the first retried, the second the last allowed)
    rig.deliver()
    rig.redeliver()
    # Then the batch counts one retry and one terminal job, not two retries
    (audit,) = rig.ledger.batch_audit(rig.policy.name, rig.time.utc() - timedelta(hours=1), 10)
    assert (audit.batch_id, audit.retried, audit.terminal) == ("b-1", 1, 1)


def test_a_throttle_shorter_than_a_second_returns_the_record_at_once(rig: Rig) -> None:
    # Retry-After 0 s plus the reopening jitter's top (0.5 s): the gate reopens within a second
    answered(rig, result(OutcomeClass.THROTTLED, 429, retry_after=0.0))
    assert rig.deliver() is True
    assert rig.limiter.closed == [("scope-a", START + 0.5, "throttled")]
    assert rig.hidden.seconds == {"r-1": 0}  # whole seconds, rounded down: visible at once


def test_a_delivery_while_another_calls_comes_back_after_a_call_timeout(rig: Rig) -> None:
    def busy(job: ActionCall, prepare: Prepare) -> ActionResult:
        raise IdempotencyAlreadyInProgressError("in progress")

    rig.guarded = busy
    assert rig.deliver(timeout=7.2) is True
    assert rig.hidden.seconds == {"r-1": 8}  # the call's timeout, rounded up
    assert rig.count(Metric.IN_PROGRESS_ELSEWHERE) == 1
    job = rig.job()
    assert (job.status, job.attempt_count) == (JobStatus.LEASED, 0)
    assert job.next_attempt_at == datetime.fromtimestamp(START + 8, UTC)


def test_without_a_known_call_timeout_another_delivery_waits_five_seconds(rig: Rig) -> None:
    def busy(job: ActionCall, prepare: Prepare) -> ActionResult:
        raise IdempotencyAlreadyInProgressError("in progress")

    rig.guarded = busy
    assert rig.deliver(timeout=None) is True
    assert rig.hidden.seconds == {"r-1": 5}


# -- a batch's banked slots ----------------------------------------------------------------------


@dataclass
class BlockLimiter:
    """Grants every block of slots asked for, `first_after` from now and `spacing` apart,
    unless the scope is closed (by a consumer, or from `closes_at` for five seconds)."""

    time: FakeTime
    closed_until: float = 0.0
    reserved: int = 0
    first_after: float = 0.0
    spacing: float = 0.01
    closes_at: float | None = None
    state_reads: int = 0

    def _closed_until(self) -> float:
        if self.closes_at is not None and self.time.now >= self.closes_at:
            return max(self.closed_until, self.closes_at + 5.0)
        return self.closed_until

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        *,
        slack: float = 0.0,
        tolerance: float = 0.0,
    ) -> Grant | Denial:
        self.reserved += 1
        if self._closed_until() > self.time.now:
            return Denial(self._closed_until(), "throttled")
        return Grant(self.time.now + self.first_after, count, self.spacing)

    def close(self, scope: str, until: float, reason: Any) -> float:
        self.closed_until = max(self.closed_until, until)
        return self.closed_until

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        raise AssertionError("a known quota is never cut")

    def state(self, scope: str) -> ScopeState:
        self.state_reads += 1
        return ScopeState(scope, None, self._closed_until() or None, "throttled", None)


class OneByOne(ParallelBatchProcessor):
    """Banks slots as for `parallel_calls` threads, but handles the records one after another."""

    def process(self) -> list[tuple[Any, ...]]:
        return [self._process_record(record) for record in self.records]


class OneThreadOrdered(ParallelBatchProcessor):
    """Banks slots as for `parallel_calls` threads, and has one thread take the records in the
    batch's order, as each of its threads would."""

    def process(self) -> list[tuple[Any, ...]]:
        order = self._order(self.records)
        taken = []
        while (index := order.take()) is not None:
            taken.append(self._process_record(self.records[index]))
        return taken


def test_a_parallel_batch_takes_the_record_a_banked_slot_is_for_before_the_next_in_line(
    ledger: Ledger,
) -> None:
    # Given six jobs of three scopes, received with the scopes taking turns (x, y, z, x, y, z)
    batch = OneScopeBatch.of(ledger, 6, scopes=3)
    received = [body.scope for body in batch.bodies]
    assert received == received[:3] * 2
    assert len(set(received)) == 3
    called: list[str] = []

    def call(job: ActionCall, prepare: Prepare) -> ActionResult:
        prepare()
        called.append(job.scope)
        return ActionResult(outcome=OutcomeClass.ACCEPTED, status_code=200, code="http_200")

    limiter = BlockLimiter(batch.clock)
    # When the batch is handled, its threads taking records through the batch's order
    response = batch.run(call, limiter, OneThreadOrdered(3))
    # Then each scope's first record's write banked a slot for its other record (a block not
    # cut to the scope's third of the records), which is taken next, before the other scopes'
    # records in line: one write per scope
    assert response == {"batchItemFailures": []}
    assert called == [scope for scope in received[:3] for _ in range(2)]
    assert limiter.reserved == 3


def test_a_closure_drops_the_slots_the_batch_had_banked(ledger: Ledger) -> None:
    # Given three jobs of one scope in one batch, whose slots are banked in one block (10 ms
    # apart: close enough to be called without a second look at the gate)
    policy = Policy(name="exports", throttle=ThrottleConfig(max_wait_seconds=2.0))
    time = FakeTime()
    now = time.utc()
    jobs = [NewJob("t", f"o{i}", now) for i in range(3)]
    ledger.schedule(policy.name, policy.version, lambda j: "scope-a", jobs, now)
    claimed = ledger.claim(policy.name, "b-1", now, timedelta(seconds=900), 3)
    records: list[dict[str, Any]] = [
        {
            "messageId": f"m-{i}",
            "receiptHandle": f"r-{i}",
            "body": JobMessage.for_claim(policy.name, job, "b-1").to_body(),
            "attributes": {},
            "messageAttributes": {},
            "eventSource": "aws:sqs",
        }
        for i, job in enumerate(claimed)
    ]
    # and a vendor whose first answer is a 429 for five seconds
    calls: list[str] = []

    def perform(job: ActionCall, timeout: float | None) -> ActionResult:
        calls.append(job.key)
        return result(OutcomeClass.THROTTLED, 429, retry_after=5.0)

    limiter = BlockLimiter(time)
    deps = ConsumerDeps(
        policy,
        ledger,
        guard_with_idempotency(perform, lambda f: f),
        time.utc,
        CountingSink(),
        limiter,
        Hidden(),
        sleep=time.sleep,
        now=lambda: time.now,
        rng=TopOfRange(),
    )
    # When the batch is handled
    response = process_batch(
        {"Records": records},
        LocalLambdaContext(function_name="sweeper-consumer", timeout_seconds=60),
        deps,
        OneByOne(3),
        call_timeout=lambda: 30.0,
    )
    # Then only the first record called; the others asked the limiter again and went back
    assert len(calls) == 1
    assert limiter.reserved == 3
    assert len(response["batchItemFailures"]) == 3


def test_one_look_at_the_gate_serves_the_slots_of_its_block_within_the_lead(
    ledger: Ledger,
) -> None:
    # Given four records of one scope whose slots one write banks 1.5 s away, 20 ms apart
    batch = OneScopeBatch.of(ledger, 4)
    calls = Calls(batch.clock)
    limiter = BlockLimiter(batch.clock, first_after=1.5, spacing=0.02)
    # When the batch is handled
    assert batch.run(calls, limiter, OneByOne(4)) == {"batchItemFailures": []}
    # Then the first record's look, the read lead before its slot, covers the slots up to the
    # lead after that look (1.50, 1.52, 1.54); the fourth (1.56) is looked at again
    assert limiter.reserved == 1
    assert limiter.state_reads == 2
    expected = [START + 1.5 + 0.02 * i for i in range(4)]
    assert calls.sent_at == [pytest.approx(at) for at in expected]
    assert 1.5 - GATE_READ_LEAD_SECONDS + GATE_RECHECK_LEAD_SECONDS < 1.56


def test_a_look_another_thread_made_while_this_one_waited_serves_its_slot(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given one record whose slot is 1.5 s away, and the batch's slots kept for the test
    batch = OneScopeBatch.of(ledger, 1)
    made: list[BatchSlots] = []

    class Kept(BatchSlots):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(admission_module, "BatchSlots", Kept)

    def sleep(seconds: float) -> None:
        batch.clock.sleep(seconds)
        if len(batch.clock.sleeps) == 1:  # woken for the read: another thread has just looked
            with made[0]._lock:  # as a look notes a scope it read open
                made[0]._saw_open("scope-a", batch.clock.now)

    calls = Calls(batch.clock)
    limiter = BlockLimiter(batch.clock, first_after=1.5)
    # When the record is handled
    assert batch.run(calls, limiter, OneByOne(1), sleep=sleep) == {"batchItemFailures": []}
    # Then it calls on that look, without a read of its own
    assert limiter.state_reads == 0
    assert calls.sent_at == [pytest.approx(START + 1.5)]


def test_a_look_that_finds_the_gate_closed_drops_the_banked_slots(ledger: Ledger) -> None:
    # Given three records of one scope banked 80 ms away, 50 ms apart: the first is called on
    # its reservation's look; the second reads the gate before its slot and finds it closed
    batch = OneScopeBatch.of(ledger, 3)
    calls = Calls(batch.clock)
    limiter = BlockLimiter(batch.clock, first_after=0.08, spacing=0.05, closes_at=START + 0.08)
    # When the batch is handled
    response = batch.run(calls, limiter, OneByOne(3))
    # Then the third record takes no slot of that block: it asks the limiter, which refuses
    # while the gate is closed, and goes back with the second
    assert calls.sent_at == [pytest.approx(START + 0.08)]
    assert limiter.state_reads == 1
    assert limiter.reserved == 2
    assert len(response["batchItemFailures"]) == 2


@dataclass
class GatesLimiter:
    """Grants each scope's blocks `first_after[scope]` from now and `spacing[scope]` apart,
    unless its gate is closed (from `closes_at[scope]` for five seconds); reads several gates
    in one request (a GateReader), leaving out those `unread`. Records the scopes of each read
    (one request each) and of each reservation."""

    time: FakeTime
    first_after: dict[str, float]
    spacing: dict[str, float]
    closes_at: dict[str, float] = field(default_factory=dict)
    unread: set[str] = field(default_factory=set)
    reads: list[list[str]] = field(default_factory=list)
    reserved: list[str] = field(default_factory=list)

    def _closed_until(self, scope: str) -> float | None:
        at = self.closes_at.get(scope)
        return at + 5.0 if at is not None and self.time.now >= at else None

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        *,
        slack: float = 0.0,
        tolerance: float = 0.0,
    ) -> Grant | Denial:
        self.reserved.append(scope)
        closed = self._closed_until(scope)
        if closed is not None:
            return Denial(closed, "throttled")
        return Grant(self.time.now + self.first_after[scope], count, self.spacing[scope])

    def close(self, scope: str, until: float, reason: Any) -> float:
        raise AssertionError("no call here draws a 429")

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        raise AssertionError("a known quota is never cut")

    def _state(self, scope: str) -> ScopeState:
        closed = self._closed_until(scope)
        return ScopeState(scope, None, closed, None if closed is None else "throttled", None)

    def state(self, scope: str) -> ScopeState:
        self.reads.append([scope])
        return self._state(scope)

    def states(self, scopes: Sequence[str]) -> dict[str, ScopeState]:
        self.reads.append(list(scopes))
        return {scope: self._state(scope) for scope in scopes if scope not in self.unread}


def two_scopes_one_look_apart(
    ledger: Ledger, *, second_slot: float = 1.5, **kw: Any
) -> tuple[Any, Calls, GatesLimiter, list[str]]:
    """Three records, of scope-0, scope-1 and scope-0, handled one after another: the first
    reserves a block of two slots of scope-0, at once and `second_slot` later (banked); the
    second's slot, of scope-1, is 1.48 s away, so it looks at the gate the read lead before it
    (1.43 s), when the banked slot of scope-0 (1.5 s) is within the lead after that look.
    Returns the batch's response, its calls, the limiter and the records' operation keys."""
    batch = OneScopeBatch.of(ledger, 3, scopes=2)
    assert [body.scope for body in batch.bodies] == ["scope-0", "scope-1", "scope-0"]
    calls = Calls(batch.clock)
    limiter = GatesLimiter(
        batch.clock,
        first_after={"scope-0": 0.0, "scope-1": 1.48},
        spacing={"scope-0": second_slot, "scope-1": 0.01},
        **kw,
    )
    response = batch.run(calls, limiter, OneByOne(3))
    return response, calls, limiter, [body.key for body in batch.bodies]


def test_a_look_for_one_scope_covers_another_scopes_slot_within_the_lead(ledger: Ledger) -> None:
    # When the three records are handled
    response, calls, limiter, _ = two_scopes_one_look_apart(ledger)
    # Then the second record's look read both gates in one request, and the third record
    # called on its banked slot without a read of its own
    assert response == {"batchItemFailures": []}
    assert limiter.reads == [["scope-1", "scope-0"]]
    assert calls.sent_at == [pytest.approx(START + at) for at in (0.0, 1.48, 1.5)]
    assert 1.5 - (1.48 - GATE_READ_LEAD_SECONDS) <= GATE_RECHECK_LEAD_SECONDS


def test_a_scope_another_records_look_found_closed_is_not_called_and_waits_for_the_reopening(
    ledger: Ledger,
) -> None:
    # Given scope-0's gate closed a second in, for five seconds (until 6.0 s)
    response, calls, limiter, keys = two_scopes_one_look_apart(
        ledger, closes_at={"scope-0": START + 1.0}
    )
    # Then the look that found it closed dropped its banked slot: the third record asked the
    # limiter, was refused, and went back until the reopening, uncalled
    assert limiter.reads == [["scope-1", "scope-0"]]
    assert limiter.reserved == ["scope-0", "scope-1", "scope-0"]
    assert calls.sent_at == [pytest.approx(START + at) for at in (0.0, 1.48)]
    assert [failure["itemIdentifier"] for failure in response["batchItemFailures"]] == ["m-2"]
    waiting = ledger.get(keys[2])
    assert waiting is not None
    # (visible again the whole seconds of the wait rounded down, as any deferral)
    assert waiting.next_attempt_at.timestamp() > START + 6.0 - 1.0


def test_a_scope_whose_slot_is_beyond_the_lead_after_a_look_is_not_read_by_it(
    ledger: Ledger,
) -> None:
    # Given scope-0's banked slot at 1.6 s, further than the lead after the look at 1.43 s
    response, calls, limiter, _ = two_scopes_one_look_apart(ledger, second_slot=1.6)
    # Then that look read its own gate alone, and the third record looked itself before 1.6 s
    assert response == {"batchItemFailures": []}
    assert limiter.reads == [["scope-1"], ["scope-0"]]
    assert calls.sent_at == [pytest.approx(START + at) for at in (0.0, 1.48, 1.6)]


def test_a_gate_a_batch_read_left_unread_is_looked_at_by_its_own_record(ledger: Ledger) -> None:
    # Given a limiter that leaves scope-0's key unread (DynamoDB's UnprocessedKeys)
    response, calls, limiter, _ = two_scopes_one_look_apart(ledger, unread={"scope-0"})
    # Then scope-0 was not taken for open: its record read its gate itself
    assert response == {"batchItemFailures": []}
    assert limiter.reads == [["scope-1", "scope-0"], ["scope-0"]]
    assert calls.sent_at == [pytest.approx(START + at) for at in (0.0, 1.48, 1.5)]


def test_a_look_whose_own_gate_was_left_unread_reads_it_alone(ledger: Ledger) -> None:
    # Given a limiter that leaves scope-1's key unread, the scope of the record looking
    response, calls, limiter, _ = two_scopes_one_look_apart(ledger, unread={"scope-1"})
    # Then that record reads its own gate again, alone; scope-0's read still serves the third
    assert response == {"batchItemFailures": []}
    assert limiter.reads == [["scope-1", "scope-0"], ["scope-1"]]
    assert calls.sent_at == [pytest.approx(START + at) for at in (0.0, 1.48, 1.5)]


APP_KEY = "app:app"  # the app limit's limiter key: its name and its (constant) key


@dataclass
class PairedGates:
    """Two rate limits reserved in one write on the app's item (a PairedSource) on the fake
    clock: each write gives every key it wants `first_after[key]` from now and `spacing[key]`
    apart (at most `most` slots in all, the asking key's first), unless the app's gate or the
    key's is closed (from `closes_at[key]`, APP_KEY's the app's, for five seconds), as the
    app's item holds them. Records the keys of each read of that item (one request each) and
    each write's asking key."""

    time: FakeTime
    first_after: dict[str, float]
    spacing: dict[str, float]
    closes_at: dict[str, float] = field(default_factory=dict)
    reads: list[list[str]] = field(default_factory=list)
    reserved: list[str] = field(default_factory=list)

    def _closed_until(self, key: str) -> float | None:
        at = self.closes_at.get(key)
        return at + 5.0 if at is not None and self.time.now >= at else None

    def reserve_paired(
        self,
        wide: str,
        wide_interval: float,
        wants: list[Any],
        horizon: float,
        span: float,
        most: int,
    ) -> tuple[dict[str, list[float]], Denial | None]:
        assert wide == APP_KEY
        self.reserved.append(wants[0].key)
        closed = self._closed_until(wide) or self._closed_until(wants[0].key)
        if closed is not None:
            return {}, Denial(closed, "throttled")
        by_key: dict[str, list[float]] = {}
        for want in wants:
            if self._closed_until(want.key) is None:
                count = min(want.count, most - sum(map(len, by_key.values())))
                first = self.time.now + self.first_after[want.key]
                by_key[want.key] = [first + i * self.spacing[want.key] for i in range(count)]
        return by_key, None

    def close_narrow(self, wide: str, key: str, until: float) -> None:
        raise AssertionError("no call here draws a 429")

    def _state(self, key: str, wide: bool = False) -> ScopeState:
        closed = self._closed_until(APP_KEY)
        if not wide:
            closed = max(closed or 0.0, self._closed_until(key) or 0.0) or None
        return ScopeState(key, None, closed, None if closed is None else "throttled", None)

    def paired_states(self, wide: str, keys: Sequence[str]) -> dict[str, ScopeState]:
        self.reads.append(list(keys))
        return {**{key: self._state(key) for key in keys}, wide: self._state(wide, wide=True)}

    def reserve(self, *args: Any, **kwargs: Any) -> Grant | Denial:
        raise AssertionError("a paired batch reserves its scopes on the app's item")

    def close(self, scope: str, until: float, reason: Any) -> float:
        raise AssertionError("no call here draws a 429")

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        raise AssertionError("a known quota is never cut")

    def state(self, scope: str) -> ScopeState:
        raise AssertionError("a paired call's gates are read on the app's item")


def two_stores_one_paired_look_apart(
    ledger: Ledger, *, second_slot: float = 1.5, **kw: Any
) -> tuple[Any, Calls, PairedGates, list[str]]:
    """As `two_scopes_one_look_apart`, the two scopes stores under an app limit whose key is
    a constant (both reserved in one write on the app's item): the first record's write gives
    scope-0 two slots (at once and `second_slot` later) and scope-1 one 1.48 s away; scope-1's
    record looks at both gates, on the app's item, the read lead before its slot (1.43 s),
    when scope-0's banked slot (1.5 s) is within the lead after that look."""
    batch = OneScopeBatch.of(ledger, 3, scopes=2)
    assert [body.scope for body in batch.bodies] == ["scope-0", "scope-1", "scope-0"]
    batch.policy = Policy(
        name="exports",
        limits=[
            LimitConfig(
                name="store", key="{policy}:{tenant_id}", rate=Quota(limit=2, period_seconds=1)
            ),
            LimitConfig(name="app", key="app", rate=Quota(limit=100, period_seconds=1)),
        ],
        throttle=ThrottleConfig(max_wait_seconds=2.0),
    )
    calls = Calls(batch.clock)
    limiter = PairedGates(
        batch.clock,
        first_after={"scope-0": 0.0, "scope-1": 1.48},
        spacing={"scope-0": second_slot, "scope-1": 0.5},
        **kw,
    )
    assert PairedLimits.of(batch.policy, limiter) is not None
    response = batch.run(calls, limiter, OneByOne(3))
    return response, calls, limiter, [body.key for body in batch.bodies]


def test_a_paired_look_for_one_store_covers_another_stores_slot_within_the_lead(
    ledger: Ledger,
) -> None:
    # When the three records are handled
    response, calls, limiter, _ = two_stores_one_paired_look_apart(ledger)
    # Then one write reserved every slot, the second record's look read both stores' gates in
    # its one read of the app's item, and the third called on its banked slot with no read
    assert response == {"batchItemFailures": []}
    assert limiter.reserved == ["scope-0"]
    assert limiter.reads == [["scope-1", "scope-0"]]
    assert calls.sent_at == [pytest.approx(START + at) for at in (0.0, 1.48, 1.5)]


def test_a_store_a_paired_look_found_closed_is_not_called_and_waits_for_the_reopening(
    ledger: Ledger,
) -> None:
    # Given scope-0's closure, held on the app's item, from a second in until 6.0 s
    response, calls, limiter, keys = two_stores_one_paired_look_apart(
        ledger, closes_at={"scope-0": START + 1.0}
    )
    # Then scope-1's look found it closed and dropped its banked slot: the third record asked
    # for a slot, was refused, and went back until the reopening, uncalled
    assert limiter.reads == [["scope-1", "scope-0"]]
    assert limiter.reserved == ["scope-0", "scope-0"]
    assert calls.sent_at == [pytest.approx(START + at) for at in (0.0, 1.48)]
    assert [failure["itemIdentifier"] for failure in response["batchItemFailures"]] == ["m-2"]
    waiting = ledger.get(keys[2])
    assert waiting is not None
    assert waiting.next_attempt_at.timestamp() > START + 6.0 - 1.0


def test_a_paired_look_that_finds_the_app_closed_covers_no_store_and_nothing_is_called(
    ledger: Ledger,
) -> None:
    # Given the app's gate closed from a second in until 6.0 s
    response, calls, limiter, keys = two_stores_one_paired_look_apart(
        ledger, closes_at={APP_KEY: START + 1.0}
    )
    # Then the one look found every store closed: neither the looking record nor the one
    # whose banked slot it would have covered is called; both go back until the reopening
    assert limiter.reads == [["scope-1", "scope-0"]]
    assert limiter.reserved == ["scope-0", "scope-0"]
    assert calls.sent_at == [pytest.approx(START)]
    failed = [failure["itemIdentifier"] for failure in response["batchItemFailures"]]
    assert failed == ["m-1", "m-2"]
    for key in keys[1:]:
        waiting = ledger.get(key)
        assert waiting is not None
        assert waiting.next_attempt_at.timestamp() > START + 6.0 - 1.0


def test_a_store_whose_slot_is_beyond_the_lead_after_a_paired_look_is_not_covered_by_it(
    ledger: Ledger,
) -> None:
    # Given scope-0's banked slot at 1.6 s, further than the lead after the look at 1.43 s
    response, calls, limiter, _ = two_stores_one_paired_look_apart(ledger, second_slot=1.6)
    # Then that look covered its own store alone, and the third record looked itself
    assert response == {"batchItemFailures": []}
    assert limiter.reads == [["scope-1"], ["scope-0"]]
    assert calls.sent_at == [pytest.approx(START + at) for at in (0.0, 1.48, 1.6)]


@dataclass
class TwoLimitsLimiter:
    """Grants each limit's slot `after` seconds from now (or at `not_before`, if later); each
    key's gate closed until `closed[key]`; reads several gates in one request (a GateReader),
    leaving out those `unread`, and records the keys of each read (one request each)."""

    time: FakeTime
    after: float = 1.5
    closed: dict[str, float] = field(default_factory=dict)
    unread: set[str] = field(default_factory=set)
    reads: list[list[str]] = field(default_factory=list)
    lead: float = 0.0
    reserved: list[tuple[str, float]] = field(default_factory=list)  # (key, horizon) of each

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
        self.reserved.append((scope, horizon))
        return Grant(max(self.time.now + self.after, not_before or 0.0))

    def give_back(self, scope: str, slot_at: float, interval: float) -> bool:
        return False

    def close(self, scope: str, until: float, reason: Any) -> float:
        raise AssertionError("no call here draws a 429")

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        raise AssertionError("a known quota is never cut")

    def _state(self, key: str) -> ScopeState:
        until = self.closed.get(key)
        return ScopeState(key, None, until, None if until is None else "throttled", None)

    def state(self, scope: str) -> ScopeState:
        self.reads.append([scope])
        return self._state(scope)

    def states(self, scopes: Sequence[str]) -> dict[str, ScopeState]:
        self.reads.append(list(scopes))
        return {key: self._state(key) for key in scopes if key not in self.unread}


def two_limits_far_call(rig: Rig, **kw: Any) -> tuple[bool, TwoLimitsLimiter]:
    """The rig's job under a store limit (its scope) and an app limit, both slots 1.5 s away:
    the gates are read again the read lead before them. Whether it went back, and the limiter."""
    rig.policy = Policy(
        name="exports",
        limits=[
            LimitConfig(
                name="store", key="{policy}:{tenant_id}", rate=Quota(limit=2, period_seconds=1)
            ),
            LimitConfig(name="app", key="app", rate=Quota(limit=4, period_seconds=1)),
        ],
        throttle=ThrottleConfig(max_wait_seconds=2.0, reopen_jitter_seconds=0.5),
    )
    limiter = TwoLimitsLimiter(rig.time, **kw)
    rig.limiter = limiter  # type: ignore[assignment]
    return rig.deliver(), limiter


def test_a_far_call_under_two_limits_reads_both_gates_in_one_request(rig: Rig) -> None:
    # When the job is delivered, both gates open
    went_back, limiter = two_limits_far_call(rig)
    # Then one read looked at both, and the call went at its slots
    assert not went_back
    assert limiter.reads == [["scope-a", APP_KEY]]
    assert rig.calls.sent_at == [pytest.approx(START + 1.5)]


def test_a_call_under_two_limits_that_sleeps_to_its_slots_counts_as_a_limiter_wait(
    rig: Rig,
) -> None:
    # When the job is delivered, both slots 1.5 s away and granted at once (no denial)
    went_back, _ = two_limits_far_call(rig)
    # Then its sleep to them counts as a wait, as one limit's does (rate.py): once
    assert not went_back
    assert rig.calls.sent_at == [pytest.approx(START + 1.5)]
    assert rig.count(Metric.LIMITER_WAITS) == 1


def test_a_far_call_whose_wider_limit_closed_is_not_made_and_waits_for_the_reopening(
    rig: Rig,
) -> None:
    # Given the app limit's gate closed until 6 s
    went_back, limiter = two_limits_far_call(rig, closed={APP_KEY: START + 6.0})
    # Then the one read found it closed: no call, and the job is back by the reopening
    assert went_back
    assert rig.calls.sent_at == []
    assert limiter.reads == [["scope-a", APP_KEY]]
    assert rig.job().next_attempt_at.timestamp() > START + 6.0 - 1.0


def test_a_limits_gate_a_batch_read_left_unread_is_read_alone(rig: Rig) -> None:
    # Given the app limit's gate closed, and its key left unread by the batch read
    went_back, limiter = two_limits_far_call(rig, unread={APP_KEY}, closed={APP_KEY: START + 6.0})
    # Then it was read alone, found closed, and no call was made
    assert went_back
    assert rig.calls.sent_at == []
    assert limiter.reads == [["scope-a", APP_KEY], [APP_KEY]]


@dataclass
class OneSlotPerAsk:
    """Records the block each reservation asks for, and grants one slot of it at a time (a
    limiter may grant fewer than asked), or refuses the first ones it is told to."""

    time: FakeTime
    refuse_first: int = 0
    #: The first slot 1.5 s away, and the gate found closed when it is read again before it.
    far_first: bool = False
    asked: list[int] = field(default_factory=list)
    state_reads: int = 0

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        *,
        slack: float = 0.0,
        tolerance: float = 0.0,
    ) -> Grant | Denial:
        self.asked.append(count)
        if len(self.asked) <= self.refuse_first:
            return Denial(self.time.now + 60.0, "rate")  # beyond the wait: back to the queue
        if self.far_first and len(self.asked) == 1:
            return Grant(self.time.now + 1.5)
        return Grant(self.time.now)

    def close(self, scope: str, until: float, reason: Any) -> float:
        return until

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        raise AssertionError("a known quota is never cut")

    def state(self, scope: str) -> ScopeState:
        self.state_reads += 1
        if self.far_first and self.state_reads == 1:
            return ScopeState(scope, None, self.time.now + 10.0, "throttled", None)
        return ScopeState(scope, None, None, None, None)


@dataclass
class OneScopeBatch:
    """`n` claimed jobs of scope-a in one batch on a fake clock, and the consumer run over it."""

    ledger: Ledger
    policy: Policy
    clock: FakeTime
    bodies: list[JobMessage]

    @classmethod
    def of(cls, ledger: Ledger, n: int, scopes: int = 1) -> OneScopeBatch:
        """With `scopes` > 1, job i is of scope `scope-{i % scopes}` (and the claim's order
        has the scopes take turns)."""
        policy = Policy(name="exports", throttle=ThrottleConfig(max_wait_seconds=2.0))
        clock = FakeTime()
        now = clock.utc()
        jobs = [NewJob("t", f"o{i}", now) for i in range(n)]

        def scope(job: NewJob) -> str:
            return "scope-a" if scopes == 1 else f"scope-{int(job.object_id[1:]) % scopes}"

        ledger.schedule(policy.name, policy.version, scope, jobs, now)
        claimed = ledger.claim(policy.name, "b-1", now, timedelta(seconds=900), n)
        bodies = [JobMessage.for_claim(policy.name, job, "b-1") for job in claimed]
        return cls(ledger, policy, clock, bodies)

    def records(self) -> list[dict[str, Any]]:
        return [raw(f"m-{i}", body.to_body()) for i, body in enumerate(self.bodies)]

    def run(
        self,
        call: GuardedCall,
        limiter: Any,
        processor: BatchProcessor,
        *,
        sink: CountingSink | None = None,
        records: list[dict[str, Any]] | None = None,
        sleep: Any = None,
    ) -> Any:
        deps = ConsumerDeps(
            self.policy,
            self.ledger,
            call,
            self.clock.utc,
            sink or CountingSink(),
            limiter,
            Hidden(),
            sleep=sleep or self.clock.sleep,
            now=lambda: self.clock.now,
            rng=TopOfRange(),
        )
        return process_batch(
            {"Records": self.records() if records is None else records},
            LocalLambdaContext(function_name="sweeper-consumer", timeout_seconds=60),
            deps,
            processor,
            call_timeout=lambda: 30.0,
        )


def blocks_asked(
    ledger: Ledger,
    refuse_first: int,
    processor: BatchProcessor | None = None,
    *,
    jobs_in_batch: int = 4,
    far_first: bool = False,
) -> tuple[list[int], int]:
    """Four jobs of one scope in one batch, handled one after another as four threads would
    bank for them (or by `processor`): the block each reservation asked for, and the records
    called."""
    batch = OneScopeBatch.of(ledger, jobs_in_batch)
    calls = Calls(batch.clock)
    limiter = OneSlotPerAsk(batch.clock, refuse_first, far_first)
    batch.run(calls, limiter, processor or OneByOne(4))
    return limiter.asked, len(calls.sent_at)


def test_each_record_called_leaves_the_next_block_one_smaller(ledger: Ledger) -> None:
    # Four records, four threads free: the first asks for four slots; each record that has
    # called and finished is no longer pending, and no longer calling
    assert blocks_asked(ledger, refuse_first=0) == ([4, 3, 2, 1], 4)


def test_a_record_already_settled_is_not_counted_for_the_first_block(ledger: Ledger) -> None:
    # Given four jobs of one scope in a batch, one of them settled meanwhile by another delivery
    batch = OneScopeBatch.of(ledger, 4)
    ledger.mark_succeeded(batch.bodies[0].key, OutcomeClass.ACCEPTED, batch.clock.utc())
    calls = Calls(batch.clock)
    limiter = OneSlotPerAsk(batch.clock)
    # When the batch is handled, banking for four threads
    batch.run(calls, limiter, OneByOne(4))
    # Then the first block covers the three records that will call, not the settled one
    assert limiter.asked == [3, 2, 1]
    assert len(calls.sent_at) == 3


def test_a_record_sent_back_uncalled_is_no_longer_counted_for_the_next_block(
    ledger: Ledger,
) -> None:
    # The first record's slot is refused beyond the wait: it goes back to the queue uncalled,
    # and the next block is for the three records left
    assert blocks_asked(ledger, refuse_first=1) == ([4, 3, 2, 1], 3)


def test_a_record_that_gave_its_slot_up_holds_no_thread_for_the_next_blocks(
    ledger: Ledger,
) -> None:
    # Six records, four threads: the first takes a slot 1.5 s away and, reading the gate again
    # before it, finds it closed: it goes back uncalled, holding nothing. The next block is
    # again for four threads (not three), then for the records left
    asked, called = blocks_asked(ledger, refuse_first=0, jobs_in_batch=6, far_first=True)
    assert (asked, called) == ([4, 4, 4, 3, 2, 1], 5)


def test_without_parallel_calls_each_record_asks_for_its_own_slot_only(ledger: Ledger) -> None:
    sequential = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    assert blocks_asked(ledger, refuse_first=0, processor=sequential) == ([1, 1, 1, 1], 4)


# -- what arrives that is not a job of this ledger -----------------------------------------------


def run_batch(rig: Rig, event: dict[str, Any], processor: BatchProcessor | None = None) -> Any:
    return process_batch(
        event,
        LocalLambdaContext(function_name="sweeper-consumer", timeout_seconds=60),
        rig.deps(),
        processor or BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False),
        call_timeout=lambda: 30.0,
    )


def raw(message_id: str, body: str) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "receiptHandle": f"r-{message_id}",
        "body": body,
        "attributes": {},
        "messageAttributes": {},
        "eventSource": "aws:sqs",
    }


def test_a_body_that_does_not_parse_is_dropped_with_its_reason_logged_by_message_id(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="sweeper.consumer"):
        response = run_batch(rig, {"Records": [raw("m-9", "not json")]})
    assert response == {"batchItemFailures": []}  # never retried: nothing in it to retry
    assert rig.count(Metric.MALFORMED) == 1
    (line,) = [r for r in caplog.records if r.getMessage() == "malformed message dropped"]
    logged = (getattr(line, "message_id", None), getattr(line, "reason", None))
    assert logged == ("m-9", "invalid fields ['(body)']")


def test_a_message_naming_no_ledger_job_is_dropped_and_the_rest_of_its_batch_runs(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a batch of the rig's job and a well-formed body whose key the ledger never issued
    rig.limiter.answers = [grant(0.0)]
    (claimed,) = rig.ledger.claim(rig.policy.name, "b-1", rig.time.utc(), timedelta(seconds=900), 1)
    good = JobMessage.for_claim(rig.policy.name, claimed, "b-1")
    forged = good.model_copy(update={"key": "exports:forged"})
    event = {"Records": [raw("m-1", forged.to_body()), raw("m-2", good.to_body())]}
    # When the batch is handled
    with caplog.at_level(logging.WARNING, logger="sweeper.consumer"):
        assert run_batch(rig, event) == {"batchItemFailures": []}
    # Then the unknown key is counted as an orphan, logged by its ids, and the rig's job is
    # called once
    assert rig.count(Metric.ORPHANS) == 1
    (line,) = [
        r for r in caplog.records if r.getMessage() == "message names no ledger job; dropped"
    ]
    logged = (getattr(line, "message_id", None), getattr(line, "operation_key", None))
    assert logged == ("m-1", "exports:forged")
    assert len(rig.calls.sent_at) == 1


@pytest.mark.parametrize(
    ("change", "fields"),
    [
        ({"object_id": "another-object"}, ["object_id"]),
        ({"scope": "another-scope", "tenant_id": "another"}, ["tenant_id", "scope"]),
    ],
)
def test_a_body_that_disagrees_with_its_ledger_row_is_dropped_naming_the_fields(
    rig: Rig, caplog: pytest.LogCaptureFixture, change: dict[str, str], fields: list[str]
) -> None:
    (claimed,) = rig.ledger.claim(rig.policy.name, "b-1", rig.time.utc(), timedelta(seconds=900), 1)
    forged = JobMessage.for_claim(rig.policy.name, claimed, "b-1").model_copy(update=change)
    with caplog.at_level(logging.ERROR, logger="sweeper.consumer"):
        assert run_batch(rig, {"Records": [raw("m-1", forged.to_body())]}) == {
            "batchItemFailures": []
        }
    assert rig.count(Metric.MISMATCHED) == 1
    assert rig.calls.sent_at == []
    message = "message disagrees with its ledger row; dropped"
    (line,) = [r for r in caplog.records if r.getMessage() == message]
    assert getattr(line, "fields", None) == fields  # names only, never the values
    assert getattr(line, "operation_key", None) == claimed.operation_key


def test_a_job_of_another_policy_is_not_run_by_this_policys_consumer(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a job of another policy, whose body agrees with its own ledger row
    now = rig.time.utc()
    rig.ledger.schedule("uploads", 1, lambda j: "scope-u", [NewJob("t", "u1", now)], now)
    (claimed,) = rig.ledger.claim("uploads", "b-9", now, timedelta(seconds=900), 1)
    body = JobMessage.for_claim("uploads", claimed, "b-9").to_body()
    # When it reaches the exports consumer
    with caplog.at_level(logging.ERROR, logger="sweeper.consumer"):
        assert run_batch(rig, {"Records": [raw("m-1", body)]}) == {"batchItemFailures": []}
    # Then it is dropped uncalled, named as the consumer's policy disagreeing
    assert rig.count(Metric.MISMATCHED) == 1
    assert rig.calls.sent_at == []
    message = "message disagrees with its ledger row; dropped"
    (line,) = [r for r in caplog.records if r.getMessage() == message]
    assert getattr(line, "fields", None) == ["consumer_policy"]


class OverlapSink(CountingSink):
    """Counts metrics, and how often two threads were inside it at once (Powertools' Metrics
    is not safe to share between threads)."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = 0
        self.overlaps = 0
        self._guard = threading.Lock()

    def add_metric(self, name: str, unit: str, value: float) -> None:
        with self._guard:
            self.inside += 1
            self.overlaps += self.inside > 1
        time.sleep(0.002)  # long enough for another thread to come in, were it let
        super().add_metric(name, unit, value)
        with self._guard:
            self.inside -= 1


def test_a_parallel_batch_reports_its_metrics_one_thread_at_a_time(ledger: Ledger) -> None:
    # Given eight jobs of one scope handled by four threads, and a sink that notices overlaps
    batch = OneScopeBatch.of(ledger, 8)
    sink = OverlapSink()
    calls = Calls(batch.clock)
    # When the batch is handled (the fake clock is not moved by four threads at once)
    response = batch.run(
        calls,
        OneSlotPerAsk(batch.clock),
        ParallelBatchProcessor(4),
        sink=sink,
        sleep=lambda seconds: None,
    )
    # Then every job was called and counted, and no two threads were ever inside the sink
    assert response == {"batchItemFailures": []}
    assert len(calls.sent_at) == 8
    assert sink.totals[Metric.SUCCEEDED] == 8
    assert sink.overlaps == 0


def test_banked_slots_a_slow_call_outlived_are_let_go_counted_and_replaced(
    ledger: Ledger,
) -> None:
    # Given three jobs of one scope whose slots are banked in one block, 10 ms apart, and calls
    # that take 100 ms each: the banked slots have passed when the next records come for them
    batch = OneScopeBatch.of(ledger, 3)
    clock = batch.clock
    sent: list[float] = []

    def slow_call(job: ActionCall, prepare: Prepare) -> ActionResult:
        prepare()
        sent.append(clock.now)
        clock.now += 0.1
        return ActionResult(outcome=OutcomeClass.ACCEPTED, status_code=200, code="http_200")

    sink = CountingSink()
    limiter = BlockLimiter(clock)
    # When the batch is handled one record after another, banking for three threads
    response = batch.run(slow_call, limiter, OneByOne(3), sink=sink)
    # Then every job is called, each passed slot counted once, and new blocks reserved: the
    # first block's two banked slots, then the second block's one (for the last record)
    assert response == {"batchItemFailures": []}
    assert len(sent) == 3
    assert sink.totals[Metric.LATE_SLOTS] == 3
    assert limiter.reserved == 3
    # and each record's processing time is its call's 100 ms on the fake clock
    assert sink.totals[Metric.PROCESSING_SECONDS] == pytest.approx(0.3)


def test_only_records_returned_on_their_last_allowed_receive_are_counted_for_the_dlq(
    ledger: Ledger,
) -> None:
    # Given three jobs whose slots are refused beyond the wait (all three go back to the queue)
    # and an orphan that does not (dropped): on receives that are past the limit of 5, not a
    # number, missing, and at the limit
    batch = OneScopeBatch.of(ledger, 3)
    assert batch.policy.consumer.max_receive_count == 5
    bodies = batch.bodies
    orphan = raw("m-0", bodies[0].model_copy(update={"key": "exports:forged"}).to_body())
    orphan["attributes"] = {"ApproximateReceiveCount": "9"}
    bad = raw("m-1", bodies[0].to_body())
    bad["attributes"] = {"ApproximateReceiveCount": "not a number"}
    missing = raw("m-2", bodies[1].to_body())
    del missing["attributes"]
    last = raw("m-3", bodies[2].to_body())
    last["attributes"] = {"ApproximateReceiveCount": "5"}
    sink = CountingSink()
    # When the batch is handled
    response = batch.run(
        Calls(batch.clock),
        OneSlotPerAsk(batch.clock, refuse_first=3),
        BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False),
        sink=sink,
        records=[orphan, bad, missing, last],
    )
    # Then the three come back, and only the one at its last allowed receive is counted
    returned = {item["itemIdentifier"] for item in response["batchItemFailures"]}
    assert returned == {"m-1", "m-2", "m-3"}
    assert sink.totals[Metric.DEAD_LETTER_BOUND] == 1


# A rate with a slack: a slot may be called on up to the slack (and the tolerance) after its time.
SLACK = 0.5


@pytest.fixture
def slack_rig(rig: Rig) -> Rig:
    rig.policy = rig.policy.model_copy(
        update={"quota": Quota(limit=4, period_seconds=1.0, slack_seconds=SLACK)}
    )
    return rig


def test_a_slot_within_its_slack_is_called_at_once_without_another_write(
    slack_rig: Rig,
) -> None:
    # Given a slot 0.3 s past (beyond the 35 ms tolerance, within the 0.5 s slack)
    slack_rig.limiter.answers = [grant(-0.3)]
    # When the record is delivered
    assert slack_rig.deliver() is False
    # Then it is called at once on that slot: no second write, no sleep, nothing let go, and
    # no gate read (the write's own look is that moment's)
    assert len(slack_rig.limiter.reserved) == 1
    assert slack_rig.time.sleeps == []
    assert slack_rig.count(Metric.LATE_SLOTS) == 0
    assert slack_rig.limiter.state_reads == 0
    assert slack_rig.calls.sent_at == [START]


def test_a_slot_past_its_slack_and_tolerance_is_let_go(slack_rig: Rig) -> None:
    slack_rig.limiter.answers = [grant(-(SLACK + 0.04)), grant(0.0)]  # 5 ms past the two
    assert slack_rig.deliver() is False
    assert len(slack_rig.limiter.reserved) == 2
    assert slack_rig.count(Metric.LATE_SLOTS) == 1
    assert slack_rig.calls.sent_at == [START]


def test_a_slot_used_in_its_slack_past_the_lead_after_the_last_look_reads_the_gate_first(
    slack_rig: Rig,
) -> None:
    # Given a write that took 0.3 s (its look at the open gate is as of its request) and a
    # slot 0.05 s after that look (a banked slot's way): called now, 0.3 s after the look
    slack_rig.limiter.reserve_seconds = 0.3
    slack_rig.limiter.answers = [grant(-0.25)]
    # When the record is delivered
    assert slack_rig.deliver() is False
    # Then the gate is read before the call, which is then made at once on that slot
    assert slack_rig.limiter.state_reads == 1
    assert slack_rig.calls.sent_at == [START + 0.3]
    assert len(slack_rig.limiter.reserved) == 1


def test_a_gate_closed_since_the_last_look_stops_a_call_in_its_slack(slack_rig: Rig) -> None:
    # Given the same slow write, and the gate closed meanwhile (another consumer's 429)
    slack_rig.limiter.reserve_seconds = 0.3
    slack_rig.limiter.answers = [grant(-0.25)]
    until = START + 0.3 + 5.5
    slack_rig.limiter.states = [ScopeState("scope-a", None, until, "throttled", 6.0)]
    # When the record is delivered
    assert slack_rig.deliver() is True
    # Then no call went out past the lead after the last open look: the slot is given up and
    # the record goes back until the reopening
    assert slack_rig.calls.sent_at == []
    assert slack_rig.hidden.seconds == {"r-1": 5}
    assert slack_rig.count(Metric.GATE_DEFERRALS) == 1


@pytest.mark.parametrize(("leaves_after_seconds", "spent"), [(0.05, 1), (0.02, 0)])
def test_a_late_request_under_limits_taken_one_at_a_time_spends_a_slot_of_each(
    rig: Rig, leaves_after_seconds: float, spent: int
) -> None:
    # Given a call under a store and an app limit, slots taken one limit at a time, whose
    # request leaves 50 ms (beyond the 35 ms tolerance) or 20 ms after it was let go
    rig.guarded = leaves_after(rig, leaves_after_seconds)
    went_back, limiter = two_limits_far_call(rig)
    assert not went_back
    assert rig.calls.sent_at == [pytest.approx(START + 1.5)]
    # Then late, one slot of each limit was reserved after the call, within its period
    assert rig.count(Metric.LATE_SENDS) == spent
    spends = [("scope-a", 1.0), (APP_KEY, 1.0)]
    assert (limiter.reserved[-2:] == spends) is bool(spent)
    assert len(limiter.reserved) == 2 + 2 * spent


def test_a_slot_of_a_short_slack_is_called_on_at_its_time(rig: Rig) -> None:
    # Given a slack shorter than the limiter's longest lead, and a slot 0.08 s ahead
    rig.policy = rig.policy.model_copy(
        update={"quota": Quota(limit=4, period_seconds=1.0, slack_seconds=0.2)}
    )
    rig.limiter.answers = [grant(0.08)]
    assert rig.deliver() is False
    # Then the call waits for the slot's own time
    assert rig.time.sleeps == [pytest.approx(0.08)]
    assert rig.calls.sent_at == [pytest.approx(START + 0.08)]
