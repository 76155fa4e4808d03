"""A budget's count on the limiter table (sweeper.limiter.budget): environments taking units of
one budget side by side never take more than it, each unit at its own even slot."""

from __future__ import annotations

import itertools
import threading
import time

from sweeper.limiter import Denial
from sweeper.limiter.budget import BudgetBook, BudgetRule, BudgetSlot
from sweeper_local.aws import LocalAws

#: 48 calls a window of an hour (60 less a fifth): slots 75 s apart, all far ahead of now.
RULE = BudgetRule(spendable=48, period_seconds=3600.0)


def test_two_environments_taking_side_by_side_never_take_more_than_the_budget(
    local_aws: LocalAws, table: str
) -> None:
    # Given two environments (a book each), four threads each, all asking at once, 80 asks
    books = [BudgetBook(local_aws.dynamodb(), table) for _ in range(2)]
    taken: list[tuple[int, BudgetSlot]] = []
    refused: list[Denial] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def work(index: int) -> None:
        book = books[index % 2]
        barrier.wait()
        for _ in range(10):
            got = book.take("org:t1", RULE, horizon=1e9)
            with lock:
                if isinstance(got, Denial):
                    refused.append(got)
                else:
                    taken.append((index % 2, got))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly the budget's 48 units were taken, by both environments
    assert len(taken) == 48
    assert {book for book, _ in taken} == {0, 1}
    # And every slot is its own, evenly spread over the rest of the window
    window = RULE.window_of(time.time())
    assert window is not None
    slots = sorted(slot.slot_at for _, slot in taken)
    gaps = [b - a for a, b in itertools.pairwise(slots)]
    assert min(gaps) > 0
    assert max(gaps) - min(gaps) < 1.0  # each (end - slot) / left, from a first within seconds
    assert slots[-1] < window[1]
    # And the asks past them were refused until the next window (or, having lost a run of
    # races to the other environment, for a moment), never granted from the reserve
    assert refused
    assert {d.retry_at for d in refused if d.retry_at > time.time() + 1} == {window[1]}
    assert books[0].spent("org:t1", RULE) == 48


def test_a_unit_given_back_is_counted_out_and_taken_again(local_aws: LocalAws, table: str) -> None:
    # Given a budget of 2 a window, both taken
    rule = BudgetRule(spendable=2, period_seconds=3600.0)
    book = BudgetBook(local_aws.dynamodb(), table)
    first = book.take("k", rule, horizon=1e9)
    second = book.take("k", rule, horizon=1e9)
    assert isinstance(first, BudgetSlot)
    assert isinstance(second, BudgetSlot)
    assert isinstance(book.take("k", rule, horizon=1e9), Denial)
    # When the second is given back (its call was not made)
    book.give_back(second)
    # Then the window counts one, and another environment takes a unit again
    assert book.spent("k", rule) == 1
    other = BudgetBook(local_aws.dynamodb(), table)
    assert isinstance(other.take("k", rule, horizon=1e9), BudgetSlot)
    assert book.spent("k", rule) == 2


def test_a_unit_given_back_leaves_the_line_where_its_take_found_it(
    local_aws: LocalAws, table: str
) -> None:
    # Given 100 a window of an hour (a slot every 36 s), its first unit taken at the start,
    # and a call 14 s behind the line taking the next (made up at once: within 1 % of the hour)
    now = [1_800_057_600.0]
    rule = BudgetRule(spendable=100, period_seconds=3600.0)
    book = BudgetBook(local_aws.dynamodb(), table, clock=lambda: now[0])
    assert isinstance(book.take("k", rule, horizon=2.0), BudgetSlot)
    now[0] += 50.0
    late = book.take("k", rule, horizon=2.0)
    assert isinstance(late, BudgetSlot)
    assert late.slot_at == now[0]
    # When its call is not made and the unit is given back
    book.give_back(late)
    # Then the next call takes the same unit from the same line, the 14 s still to make up
    again = book.take("k", rule, horizon=2.0)
    assert isinstance(again, BudgetSlot)
    assert (again.slot_at, again.after) == (late.slot_at, late.after)
    assert book.spent("k", rule) == 2
