"""`DynamoLimiter` hands each call on to one of its parts (dynamodb.py `_part`): what a caller,
a fake or a tool reads of the call is the part's own."""

import inspect
from collections.abc import Callable

import pytest

from sweeper.limiter import DynamoLimiter
from sweeper.limiter.base import SlotReserver
from sweeper.limiter.gates import Gates
from sweeper.limiter.gcra import Reservations
from sweeper.limiter.held import HeldRates
from sweeper.limiter.paired_writes import PairedWrites

HANDED_ON: dict[str, Callable[..., object]] = {
    "reserve": Reservations.reserve,
    "refund": Reservations.refund,
    "give_back": Reservations.give_back,
    "cut": HeldRates.cut,
    "hold_rate": HeldRates.hold,
    "held_rate": HeldRates.held,
    "reserve_paired": PairedWrites.reserve,
    "close_narrow": PairedWrites.close_narrow,
    "paired_states": PairedWrites.states,
    "note_throttle": Gates.note_throttle,
    "close": Gates.close,
    "state": Gates.state,
    "states": Gates.states,
}


@pytest.mark.parametrize("name", sorted(HANDED_ON))
def test_a_handed_on_call_reads_as_its_parts_own(name: str) -> None:
    # Given a call the limiter only hands on to its part
    part = HANDED_ON[name]
    # When it is read as a tool reads it (help(), an IDE, a fake kept to its signature)
    call = getattr(DynamoLimiter, name)
    # Then it has the part's signature (its keywords, e.g. hold's `stated`) and docstring
    assert inspect.signature(call) == inspect.signature(part)
    assert call.__doc__ == part.__doc__


def test_the_limiters_reserve_takes_every_keyword_the_protocols_name() -> None:
    # The consumer reserves with the protocols' keywords (slack, tolerance, units), as the
    # benchmark's baselines are checked to (test_baseline_limiters)
    wanted = list(inspect.signature(SlotReserver.reserve).parameters)
    assert list(inspect.signature(DynamoLimiter.reserve).parameters) == wanted


class _NoCalls:
    """A DynamoDB client that fails the test on any call made of it."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the limiter called {name} while it was being built")


def test_a_limiter_is_built_without_a_call_to_its_table() -> None:
    # Given a client that takes no call
    # When a limiter is built on it (at a cold start, with its live limits, spend and budgets)
    limiter = DynamoLimiter(_NoCalls(), "limits")  # type: ignore[arg-type]
    # Then its parts are there and none of them reached the table
    assert limiter.live() is limiter.live()
    assert limiter.spend() is limiter.spend()
    assert limiter.budgets() is limiter.budgets()
    assert (limiter.writes, limiter.reads) == (0, 0)
