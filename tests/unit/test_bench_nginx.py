"""`sweeper bench nginx` reads the share of nginx's rate its accepted calls used."""

from __future__ import annotations

from sweeper_bench.nginx import bucket_use


def test_calls_spaced_at_the_rate_use_all_of_it_and_twice_as_far_half() -> None:
    assert bucket_use([0.0, 0.1, 0.2, 0.3], 10) == 1.0
    assert bucket_use([0.0, 0.2, 0.4, 0.6], 10) == 0.5


def test_fewer_than_two_calls_have_no_span_to_measure() -> None:
    assert bucket_use([], 15) is None
    assert bucket_use([1.0], 15) is None
