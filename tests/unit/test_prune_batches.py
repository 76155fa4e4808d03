"""The batch loop the operator's prune and the scheduled retention share
(sweeper.prune.retention)."""

from __future__ import annotations

from collections.abc import Callable

from sweeper.prune.retention import delete_in_batches


def batches_of(sizes: list[int], seen: list[str], name: str) -> Callable[[], int]:
    """A delete that deletes `sizes` rows in turn, noting each call in `seen`."""
    left = iter(sizes)

    def delete() -> int:
        seen.append(name)
        return next(left)

    return delete


def test_each_kind_is_deleted_until_a_batch_comes_back_short_then_the_next() -> None:
    # Given jobs with two full batches and a short one, then runs with one short batch
    seen: list[str] = []
    jobs = batches_of([3, 3, 1], seen, "jobs")
    runs = batches_of([0], seen, "runs")

    # When they are deleted in batches of 3
    finished = delete_in_batches((jobs, runs), 3)

    # Then each kind ran to its short batch, in order, and the loop says it finished
    assert seen == ["jobs", "jobs", "jobs", "runs"]
    assert finished is True


def test_no_batch_starts_once_there_is_no_room_and_the_loop_says_so() -> None:
    # Given room for two batches only, and jobs with more full batches than that
    seen: list[str] = []
    rooms = iter([True, True, False])
    done: list[int] = []

    # When they are deleted in batches of 2
    finished = delete_in_batches(
        (batches_of([2, 2, 2], seen, "jobs"), batches_of([0], seen, "runs")),
        2,
        room=lambda: next(rooms),
        after=lambda: done.append(len(seen)),
    )

    # Then two batches ran, each followed by `after`, no kind after them, and it did not finish
    assert seen == ["jobs", "jobs"]
    assert done == [1, 2]
    assert finished is False
