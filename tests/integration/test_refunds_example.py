"""docs/examples/refunds.toml end to end on the local stack (issue 41, build point 4).

The policy file as shipped, on the stack `sweeper local up` runs: the vendor simulator's
refunds provider (sweeper_local.refunds) checks each form body, the idempotency key and both
limits per account; the producer ticks; consumers call `POST /v1/refunds`. The provider's
answers are classed by the file's outcome rules (a JSON error code, `Stripe-Should-Retry`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob, OutcomeClass, operation_key
from sweeper.scheduling import schedule_jobs
from sweeper_local.background import LocalConsoleStack
from sweeper_local.refunds import RefundsAudit
from tests.integration.examples import (
    all_final,
    example_stack,
    final_jobs,
    simulator,
    wait_for,
)

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "refunds.toml"
TICK_SECONDS = 0.5
DEADLINE_SECONDS = 90.0
#: Long enough that the account's burst would hold more than 20 calls at once, but for the cap.
LATENCY_SECONDS = 0.3
BURST = 40
#: A charge id a form would split at, were it spliced: it stays one `charge` value.
TRICKY = "ch_&amount=99999&metadata[account]=acct_9"

SPECIAL = {  # charge: (amount, the job's status, outcome, code)
    "ch_done": (100, JobStatus.SUCCEEDED, OutcomeClass.ABSENT, None),  # nothing left to refund
    "ch_locked": (200, JobStatus.SUCCEEDED, OutcomeClass.ACCEPTED, None),
    "ch_broken": (300, JobStatus.FAILED, OutcomeClass.PERMANENT, "http_500"),
    "ch_small": (900, JobStatus.FAILED, OutcomeClass.PERMANENT, "http_400"),
    TRICKY: (150, JobStatus.SUCCEEDED, OutcomeClass.ACCEPTED, None),
}


@pytest.fixture
def refunds(db_url: str) -> Iterator[LocalConsoleStack]:
    with example_stack(EXAMPLE, db_url, TICK_SECONDS) as stack:
        yield stack


def _schedule(ledger: Ledger, policy: Policy, rows: list[tuple[str, str, int]]) -> list[str]:
    now = datetime.now(UTC)
    jobs = [NewJob(t, c, now, params={"amount": a}) for t, c, a in rows]
    schedule_jobs(ledger, policy, jobs, now)
    return [operation_key(policy.name, t, c, policy.version) for t, c, _ in rows]


def test_the_refunds_example_refunds_each_charge_once_within_its_limits(
    refunds: LocalConsoleStack, db_url: str
) -> None:
    policy, vendor = refunds.policies["refunds"].policy, simulator(refunds)
    # Given the provider: a charge already refunded, one locked twice (Stripe-Should-Retry:
    # true), one that fails for good (500, Stripe-Should-Retry: false), one smaller than its
    # refund, and calls slow enough that one account's burst would pass 20 at once
    vendor.refunds.latency_seconds = LATENCY_SECONDS
    vendor.refunds.add_charge("ch_done", 5000, refunded=5000)
    vendor.refunds.lock("ch_locked", 2)
    vendor.refunds.fail("ch_broken")
    vendor.refunds.add_charge("ch_small", 500)
    burst = [("acct_1", f"ch_a{i}", 100 + i) for i in range(BURST)]
    special = [("acct_2", charge, amount) for charge, (amount, *_) in SPECIAL.items()]
    ledger = Ledger(db_url)
    try:
        # When the example's policy runs their refunds
        keys = _schedule(ledger, policy, burst + special)
        wait_for("every refund final", partial(all_final, ledger, keys), DEADLINE_SECONDS)
        jobs = final_jobs(ledger, keys)
    finally:
        ledger.close()
    audit = vendor.refunds.audit()

    # Then each job ends as its answers call for
    by_charge = {job.object_id: job for job in jobs.values()}
    for charge, (_, status, outcome, code) in SPECIAL.items():
        job = by_charge[charge]
        assert (job.status, job.last_outcome) == (status, outcome), charge
        if code is not None:
            assert job.last_error_code == code, charge
    assert by_charge["ch_broken"].attempt_count == 1  # "should not retry": not retried
    assert by_charge["ch_locked"].attempt_count == 3  # twice locked, retried, then refunded
    assert all(by_charge[c].status is JobStatus.SUCCEEDED for _, c, _ in burst)
    # ... and the provider refunded each refundable charge once, from the form sweeper sent
    _assert_refunded_once(audit, [*burst, ("acct_2", "ch_locked", 200), ("acct_2", TRICKY, 150)])
    # ... never more than 20 calls of one account at the provider at once, nor 100 in a second
    assert audit.limited == {}
    assert max(audit.max_in_flight_by_account.values()) <= 20
    assert max(audit.busiest_window_by_account.values()) <= 100


def _assert_refunded_once(audit: RefundsAudit, rows: list[tuple[str, str, int]]) -> None:
    assert audit.effects_by_charge == {charge: 1 for _, charge, _ in rows}
    for account, charge, amount in rows:
        assert audit.forms_by_charge[charge] == {
            "charge": charge,
            "amount": str(amount),
            "reason": "requested_by_customer",
            "metadata[account]": account,
            "metadata[source]": "sweeper",
        }
