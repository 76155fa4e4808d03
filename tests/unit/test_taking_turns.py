"""The order claimed jobs are published in: tenants take turns, and so do scopes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from sweeper.ledger.store import taking_turns
from sweeper.models import ClaimedJob

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def job(n: int, tenant: str, scope: str, age_seconds: float | None) -> ClaimedJob:
    """A claimed job due `age_seconds` before T0 (None: without a due time)."""
    return ClaimedJob(
        id=n,
        policy_version=1,
        tenant_id=tenant,
        object_id=f"o{n}",
        scope=scope,
        operation_key=f"k{n}",
        attempt_count=0,
        eligible_since=None if age_seconds is None else T0 - timedelta(seconds=age_seconds),
    )


def test_an_old_backlog_takes_its_turn_with_the_other_tenants() -> None:
    # Given tenant a with 6 jobs older than anyone's, b and c with 2 each, a scope per tenant
    jobs = [job(i, "a", "a", 100 + i) for i in range(6)]
    jobs += [job(10 + i, t, t, i) for t in ("b", "c") for i in range(2)]
    # When they are put in publishing order
    order = taking_turns(jobs)
    # Then each tenant's first comes before anyone's second, oldest first within a turn
    assert [j.tenant_id for j in order] == ["a", "b", "c", "a", "b", "c", "a", "a", "a", "a"]
    # and each tenant's own jobs stay earliest due first
    assert [j.id for j in order if j.tenant_id == "a"] == [5, 4, 3, 2, 1, 0]


def test_one_tenants_scopes_take_turns() -> None:
    # Given one tenant whose 4 oldest jobs are on host x, then 4 on host y (scope per host)
    jobs = [job(i, "a", "x", 100 - i) for i in range(4)]
    jobs += [job(10 + i, "a", "y", 50 - i) for i in range(4)]
    # When put in publishing order, the hosts alternate, each host's oldest first
    order = taking_turns(jobs)
    assert [j.scope for j in order] == ["x", "y"] * 4
    assert [j.id for j in order if j.scope == "x"] == [0, 1, 2, 3]


def test_tenants_sharing_one_scope_keep_due_order_within_a_turn() -> None:
    # Given three tenants of one global scope with two jobs each: c's the oldest, then b's
    ages = {"a": 0, "b": 10, "c": 20}
    jobs = [job(n, t, "global", age + i) for n, (t, age) in enumerate(ages.items()) for i in (0, 1)]
    # When put in publishing order: tenants take turns, the oldest first in each turn
    assert [j.tenant_id for j in taking_turns(jobs)] == ["c", "b", "a", "c", "b", "a"]


def test_within_a_turn_a_scope_shared_by_tenants_waits_for_the_other_scopes_first() -> None:
    # Given tenants a and b on host x (a's job the oldest, then b's) and tenant c on host y
    jobs = [job(1, "a", "x", 30), job(2, "b", "x", 20), job(3, "c", "y", 10)]
    # When put in publishing order: x's first job, then y's, and only then x's second
    assert [j.id for j in taking_turns(jobs)] == [1, 3, 2]


def test_a_job_without_a_due_time_comes_first_in_its_turn() -> None:
    jobs = [job(1, "a", "a", 50), job(9, "b", "b", None)]
    assert [j.id for j in taking_turns(jobs)] == [9, 1]


@given(
    st.lists(
        st.tuples(st.sampled_from("abcd"), st.sampled_from("wxyz"), st.integers(0, 1000)),
        max_size=60,
    )
)
def test_every_job_is_kept_and_no_tenant_gets_two_turns_ahead(
    rows: list[tuple[str, str, int]],
) -> None:
    jobs = [job(n, tenant, scope, age) for n, (tenant, scope, age) in enumerate(rows)]
    order = taking_turns(jobs)
    # The same jobs, each once
    assert sorted(j.id for j in order) == list(range(len(jobs)))
    # A tenant's (n+1)-th never comes before another tenant's n-th, while that one has an n-th
    total = {t: sum(1 for j in jobs if j.tenant_id == t) for t in "abcd"}
    seen = dict.fromkeys("abcd", 0)
    for j in order:
        seen[j.tenant_id] += 1
        for other in "abcd":
            assert seen[other] >= min(total[other], seen[j.tenant_id] - 1)
    # Within a tenant and a scope, earliest due first (then id)
    for t in "abcd":
        for s in "wxyz":
            mine = [j for j in order if j.tenant_id == t and j.scope == s]
            assert mine == sorted(mine, key=lambda j: (j.eligible_since, j.id))
