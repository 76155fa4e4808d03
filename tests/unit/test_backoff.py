"""Retry and closure delays: their bounds hold for every input (property tests)."""

import random

from hypothesis import given
from hypothesis import strategies as st

from sweeper.limiter import ScopeState, close_delay, retry_delay
from sweeper.limiter.backoff import ledger_return_delay

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)
POSITIVE = st.floats(min_value=0.001, max_value=3600, allow_nan=False)


@given(attempt=st.integers(min_value=1, max_value=200), base=POSITIVE, cap=POSITIVE, seed=SEEDS)
def test_a_retry_delay_is_full_jitter_under_the_exponential_ceiling(
    attempt: int, base: float, cap: float, seed: int
) -> None:
    delay = retry_delay(attempt, base=base, cap=cap, rng=random.Random(seed))
    assert 0.0 <= delay <= min(cap, base * 2.0 ** (attempt - 1))


@given(retry_after=st.floats(min_value=0, max_value=86_400), jitter=st.floats(0, 5), seed=SEEDS)
def test_a_stated_retry_after_is_never_shortened_and_jitter_stays_bounded(
    retry_after: float, jitter: float, seed: int
) -> None:
    delay = close_delay(retry_after, None, base=1, cap=300, jitter=jitter, rng=random.Random(seed))
    assert retry_after <= delay <= retry_after + jitter


@given(last=st.one_of(st.none(), POSITIVE), base=POSITIVE, cap=POSITIVE, seed=SEEDS)
def test_without_retry_after_the_closure_doubles_from_base_up_to_the_cap(
    last: float | None, base: float, cap: float, seed: int
) -> None:
    delay = close_delay(None, last, base=base, cap=cap, jitter=0.0, rng=random.Random(seed))
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
    assert close_delay(None, last, base=base, cap=cap, jitter=jitter, rng=top) == (
        min(cap, max(base, 2.0 * (last or 0.0))) + jitter
    )
    assert close_delay(3.0, last, base=base, cap=cap, jitter=jitter, rng=top) == 3.0 + jitter


@given(receives=st.integers(min_value=1, max_value=1000), base=POSITIVE, cap=POSITIVE, seed=SEEDS)
def test_a_ledger_return_is_at_least_half_its_exponential_ceiling_and_never_above_it(
    receives: int, base: float, cap: float, seed: int
) -> None:
    ceiling = min(cap, base * 2.0 ** min(receives - 1, 64))
    delay = ledger_return_delay(receives, base=base, cap=cap, rng=random.Random(seed))
    assert ceiling / 2.0 <= delay <= ceiling
