"""The batch line names the keys of its problems up to a cap, and counts the rest
(sweeper.consumer.batch_log): a batch of thousands that all failed stays one readable line."""

from __future__ import annotations

from sweeper.consumer.batch_log import PROBLEM_KEYS_LISTED, BatchLog, Outcome


def test_the_problem_keys_are_listed_up_to_the_cap_and_the_rest_counted() -> None:
    # Given a batch whose records all failed, more of them than the cap, and a few settled
    log = BatchLog()
    keys = [f"exports:t:o{i}:v1" for i in range(PROBLEM_KEYS_LISTED + 70)]
    for key in keys[:-5]:
        log.count(Outcome.TERMINAL, key)
    for key in keys[-5:]:
        log.count(Outcome.RETRY, key)
    log.count(Outcome.SETTLED, "exports:t:ok:v1")

    # When the batch line's fields are read
    fields = log.fields(len(keys) + 1)

    # Then the first keys up to the cap are named, the others counted, every outcome counted
    assert fields["problems"] == {"terminal": keys[:PROBLEM_KEYS_LISTED]}
    assert fields["problems_unlisted"] == 70
    assert fields["outcomes"] == {
        "settled": 1,
        "terminal": len(keys) - 5,
        "will_retry": 5,
    }


def test_a_batch_under_the_cap_lists_every_problem_and_counts_none_unlisted() -> None:
    log = BatchLog()
    log.count(Outcome.TERMINAL, "exports:t:o1:v1")

    fields = log.fields(1)

    assert fields["problems"] == {"terminal": ["exports:t:o1:v1"]}
    assert "problems_unlisted" not in fields
