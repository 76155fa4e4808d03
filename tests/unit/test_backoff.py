"""Retry and closure delays: their bounds hold for every input (property tests)."""

import random
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from sweeper.limiter import ScopeState, close_delay, recovery_seconds, retry_delay
from sweeper.limiter.backoff import ledger_return_delay
from sweeper.vendor_reading import MAX_WAIT_SECONDS

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)
POSITIVE = st.floats(min_value=0.001, max_value=3600, allow_nan=False)


@given(attempt=st.integers(min_value=1, max_value=200), base=POSITIVE, cap=POSITIVE, seed=SEEDS)
def test_a_retry_delay_is_full_jitter_under_the_exponential_ceiling(
    attempt: int, base: float, cap: float, seed: int
) -> None:
    delay = retry_delay(attempt, base=base, cap=cap, rng=random.Random(seed))
    assert 0.0 <= delay <= min(cap, base * 2.0 ** (attempt - 1))


@given(
    retry_after=st.floats(min_value=0, max_value=MAX_WAIT_SECONDS),
    jitter=st.floats(0, 5),
    seed=SEEDS,
)
def test_a_stated_retry_after_is_never_shortened_and_jitter_stays_bounded(
    retry_after: float, jitter: float, seed: int
) -> None:
    rng = random.Random(seed)
    delay = close_delay(retry_after, None, None, 0.0, base=1, cap=300, jitter=jitter, rng=rng)
    assert retry_after <= delay <= retry_after + jitter


@given(last=st.one_of(st.none(), POSITIVE), base=POSITIVE, cap=POSITIVE, seed=SEEDS)
def test_a_bare_throttle_right_after_the_reopening_doubles_from_base_up_to_the_cap(
    last: float | None, base: float, cap: float, seed: int
) -> None:
    # The call was sent at the reopening itself: the vendor refused the first call after it
    reopened = None if last is None else 1_000.0
    rng = random.Random(seed)
    delay = close_delay(None, last, reopened, 1_000.0, base=base, cap=cap, jitter=0.0, rng=rng)
    assert delay == min(cap, max(base, 2.0 * (last or 0.0)))
    assert delay <= cap


def test_a_gate_is_closed_only_strictly_before_its_end() -> None:
    assert not ScopeState("s", None, None, None, None).closed(100.0)
    assert ScopeState("s", None, 100.5, "throttled", 1.0).closed(100.0)
    assert not ScopeState("s", None, 100.0, "throttled", 1.0).closed(100.0)


class TopOfRange(random.Random):
    """Draws the top of every range, so a delay shows the bound it was drawn under."""

    def uniform(self, a: float, b: float) -> float:
        return b


@given(attempt=st.integers(min_value=1, max_value=60), base=POSITIVE, cap=POSITIVE)
def test_a_retry_delay_can_reach_its_exponential_ceiling(
    attempt: int, base: float, cap: float
) -> None:
    delay = retry_delay(attempt, base=base, cap=cap, rng=TopOfRange())
    assert delay == min(cap, base * 2.0 ** (attempt - 1))


@given(last=st.one_of(st.none(), POSITIVE), base=POSITIVE, cap=POSITIVE, jitter=st.floats(0, 5))
def test_a_closure_adds_its_whole_jitter_at_the_top_of_the_range(
    last: float | None, base: float, cap: float, jitter: float
) -> None:
    top = TopOfRange()
    reopened = None if last is None else 50.0
    assert close_delay(None, last, reopened, 50.0, base=base, cap=cap, jitter=jitter, rng=top) == (
        min(cap, max(base, 2.0 * (last or 0.0))) + jitter
    )
    assert close_delay(3.0, last, reopened, 50.0, base=base, cap=cap, jitter=jitter, rng=top) == (
        3.0 + jitter
    )


# -- a scope's closures over any sequence of answers -------------------------------------------


@dataclass
class Gate:
    """The closure state a scope's item holds, written as DynamoLimiter.close writes it: a
    closure never shortens the gate, and records its end and its length."""

    closed_until: float | None = None
    last_close_seconds: float | None = None

    def close(self, now: float, delay: float) -> None:
        until = now + delay
        if self.closed_until is None or self.closed_until < until:
            self.closed_until, self.last_close_seconds = until, delay


#: One answer: seconds since the last one, how long its call took, and the vendor's word:
#: "ok" (a success), None (a bare 429) or a Retry-After in seconds.
ANSWERS = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=900),
        st.floats(min_value=0, max_value=30),
        st.one_of(st.just("ok"), st.none(), st.floats(min_value=0, max_value=3_600)),
    ),
    max_size=60,
)


@given(
    answers=ANSWERS,
    base=st.floats(min_value=0.01, max_value=60),
    above=st.floats(min_value=0, max_value=3_600),
    jitter=st.floats(min_value=0, max_value=5),
    seed=SEEDS,
)
def test_every_closure_over_any_sequence_of_answers_is_bounded_and_recovers(
    answers: list[tuple[float, float, float | str | None]],
    base: float,
    above: float,
    jitter: float,
    seed: int,
) -> None:
    # Given a scope answering successes, bare 429s and 429s with Retry-After, in any order and
    # at any spacing, each call sent some time before its answer
    rng = random.Random(seed)
    cap = base + above
    gate = Gate()
    now = 1_700_000_000.0
    for gap, took, answer in answers:
        now += gap
        sent = now - took
        if answer == "ok":
            continue  # a success writes nothing: the rule needs no write per call
        retry_after = answer if isinstance(answer, float) else None
        reopened, last = gate.closed_until, gate.last_close_seconds
        # When a throttle closes the scope
        delay = close_delay(
            retry_after, last, reopened, sent, base=base, cap=cap, jitter=jitter, rng=rng
        )
        # Then a stated Retry-After is never shortened, and jitter only adds, boundedly
        if retry_after is not None:
            assert retry_after <= delay <= retry_after + jitter
        else:
            # and a bare closure lies within [base, cap], plus the jitter
            assert base <= delay <= cap + jitter
            # and at most doubles the last closure, and only after the reopening
            if last is not None and reopened is not None:
                grows = 2.0 if sent >= reopened else 1.0
                assert delay <= min(cap, max(base, grows * last)) + jitter
                # and once the scope was open and calling for the recovery window, it is
                # exactly base again
                if sent - reopened >= recovery_seconds(base, jitter):
                    assert base <= delay <= base + jitter
        gate.close(now, delay)


def _bare_closures(refused_after_reopening: float, times: int) -> list[float]:
    """The closures of a scope refused with a bare 429 `times` times, each time by a call sent
    `refused_after_reopening` seconds after the gate reopened (answered 50 ms later)."""
    gate = Gate()
    now = 1_700_000_000.0
    closures = []
    for _ in range(times):
        now = (gate.closed_until or now) + refused_after_reopening
        delay = close_delay(
            None,
            gate.last_close_seconds,
            gate.closed_until,
            now - 0.05,
            base=1.0,
            cap=300.0,
            jitter=0.0,
            rng=random.Random(0),
        )
        closures.append(delay)
        gate.close(now, delay)
    return closures


def test_throttles_that_come_now_and_then_while_calls_succeed_never_grow_the_closure() -> None:
    # Given a scope that a vendor refuses with a bare 429 every few seconds of calling (nginx's
    # limit_req refusing an early arrival), between which calls succeed: each refused call
    # was sent 3 s after the scope reopened
    closures = _bare_closures(refused_after_reopening=3.0, times=50)
    # Then every closure is the base, not doubled towards the cap
    assert closures == [1.0] * 50


def test_a_vendor_that_refuses_each_first_call_after_a_reopening_is_backed_off() -> None:
    # Given a vendor refusing the first call after each reopening
    closures = _bare_closures(refused_after_reopening=0.1, times=12)
    # Then each closure doubles, up to the cap
    assert closures == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]


def test_a_429_on_a_call_in_flight_when_the_gate_closed_does_not_double_the_closure() -> None:
    # Given a scope just closed for 4 s by a bare 429
    gate = Gate()
    gate.close(1_000.0, 4.0)
    # When a call sent before the closure is answered 429 during it
    delay = close_delay(
        None, 4.0, gate.closed_until, 999.9, base=1.0, cap=300.0, jitter=0.0, rng=random.Random(0)
    )
    # Then the closure is as long again, not twice as long
    assert delay == 4.0


@given(receives=st.integers(min_value=1, max_value=1000), base=POSITIVE, cap=POSITIVE, seed=SEEDS)
def test_a_ledger_return_is_at_least_half_its_exponential_ceiling_and_never_above_it(
    receives: int, base: float, cap: float, seed: int
) -> None:
    ceiling = min(cap, base * 2.0 ** min(receives - 1, 64))
    delay = ledger_return_delay(receives, base=base, cap=cap, rng=random.Random(seed))
    assert ceiling / 2.0 <= delay <= ceiling
