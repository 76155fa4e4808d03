"""The producer against the real ledger, with the real SQS (moto) or a publisher that fails."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sweeper.config import ConsumerConfig, Policy, Quota
from sweeper.errors import PublishError
from sweeper.ledger.store import Ledger
from sweeper.models import JobMessage, JobStatus, NewJob, OutcomeClass
from sweeper.operations import policy_status
from sweeper.producer import backpressure
from sweeper.producer.backpressure import floor as budget_floor
from sweeper.producer.backpressure import republish_delay_seconds
from sweeper.producer.run import MIN_REMAINING_SECONDS, on_consumers, run_producer
from sweeper.sqs_queue import OutgoingMessage, Publisher, SqsPublisher
from sweeper_local.aws import LocalAws, provision
from tests.fakes import FakePublisher, unexpired_leases

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)


def seed(ledger: Ledger, policy: Policy, n: int, due: datetime = T0) -> None:
    jobs = [NewJob(f"t{i % 4}", f"o{i:05d}", due - timedelta(seconds=i)) for i in range(n)]
    ledger.schedule(policy.name, policy.version, lambda j: policy.name, jobs, T0)


def run(ledger: Ledger, policy: Policy, publisher: Any, **kw: Any) -> Any:
    kw.setdefault("remaining_seconds", lambda: 100.0)
    return run_producer(
        policy,
        kw.pop("scheduled_at", T0),
        ledger,
        publisher,
        clock=kw.pop("clock", lambda: T0),
        **kw,
    )


def test_a_run_publishes_every_due_row_and_records_itself(ledger: Ledger) -> None:
    policy = Policy(name="exports", page_size=7)
    seed(ledger, policy, 30)
    publisher = FakePublisher()
    report = run(ledger, policy, publisher)
    assert (report.discovered, report.published, report.publish_failures) == (30, 30, 0)
    assert report.stop_reason == "drained"
    assert ledger.counts("exports")[JobStatus.LEASED] == 30
    bodies = [JobMessage.model_validate_json(m.body) for m in publisher.sent]
    assert len({b.key for b in bodies}) == 30
    assert {b.batch_id for b in bodies} == {report.batch_id}
    assert all(
        m.group_id == JobMessage.model_validate_json(m.body).tenant_id for m in publisher.sent
    )
    (recorded,) = ledger.runs("exports")
    assert (recorded.discovered, recorded.published, recorded.stop_reason) == (30, 30, "drained")
    assert recorded.finished_at is not None


def test_partly_failed_batch_releases_exactly_the_failed_rows(ledger: Ledger) -> None:
    # Given 25 due rows and a queue that rejects three entries
    policy = Policy(name="exports")
    seed(ledger, policy, 25)
    ids = [str(j.id) for j in ledger.claim("exports", "probe", T0, timedelta(seconds=1), 25)]
    ledger.release([int(i) for i in ids], "probe", T0)
    failing = {ids[0], ids[11], ids[24]}
    # When the producer publishes
    report = run(ledger, policy, FakePublisher(fail_ids=failing))
    # Then exactly those three are pending again, the rest are leased
    assert (report.published, report.publish_failures, report.released) == (22, 3, 3)
    pending = {str(j.id) for j in ledger.claim("exports", "after", T0, timedelta(seconds=1), 100)}
    assert pending == failing


def test_a_failed_call_releases_every_unsent_row_and_raises(ledger: Ledger) -> None:
    policy = Policy(name="exports", publish_concurrency=1)
    seed(ledger, policy, 35)
    with pytest.raises(PublishError):
        run(ledger, policy, FakePublisher(break_after=2))
    counts = ledger.counts("exports")
    assert (counts[JobStatus.LEASED], counts[JobStatus.PENDING]) == (20, 15)
    (recorded,) = ledger.runs("exports")
    assert (recorded.published, recorded.publish_failures) == (20, 15)
    assert recorded.stop_reason == "publish_error"


def test_a_second_invocation_for_the_same_scheduled_time_is_detected(ledger: Ledger) -> None:
    policy = Policy(name="exports")
    seed(ledger, policy, 5)
    first = run(ledger, policy, FakePublisher())
    second = run(ledger, policy, FakePublisher())
    assert not first.duplicate_invocation
    assert second.duplicate_invocation
    assert second.published == 0
    (recorded,) = ledger.runs("exports")
    assert recorded.invocations == 2


def test_in_flight_never_exceeds_the_cap_derived_from_rate_and_lease(ledger: Ledger) -> None:
    # 2/s for a 20 s lease drains 20 rows in half a lease: the cap
    policy = Policy(
        name="exports", quota=Quota(limit=2, period_seconds=1, headroom=1.0), lease_seconds=20
    )
    assert policy.max_in_flight == 20
    seed(ledger, policy, 50)
    first = run(ledger, policy, FakePublisher())
    second = run(ledger, policy, FakePublisher(), scheduled_at=T0 + timedelta(minutes=1))
    assert (first.published, first.stop_reason) == (20, "in_flight_cap")
    assert second.published == 0
    assert unexpired_leases(ledger, "exports", T0) == 20


def test_expired_leases_are_reclaimed_and_published_again(ledger: Ledger) -> None:
    policy = Policy(name="exports", lease_seconds=30)
    seed(ledger, policy, 5)
    run(ledger, policy, FakePublisher())
    later = T0 + timedelta(seconds=31 + republish_delay_seconds(policy))
    publisher = FakePublisher()
    report = run(ledger, policy, publisher, scheduled_at=later, clock=lambda: later)
    assert (report.reclaimed, report.published) == (5, 5)


def test_the_run_stops_when_its_time_budget_is_spent(ledger: Ledger) -> None:
    policy = Policy(name="exports", page_size=10)
    seed(ledger, policy, 50)
    publisher = FakePublisher()
    # the budget runs out once two pages are out
    report = run(
        ledger,
        policy,
        publisher,
        remaining_seconds=lambda: 100.0 if len(publisher.sent) < 20 else 0.5,
    )
    assert report.stop_reason == "budget"
    assert report.published == 20


def test_messages_reach_the_real_queue(
    ledger: Ledger, local_aws: LocalAws, unique_name: str
) -> None:
    policy = Policy(name="exports")
    resources = provision(local_aws.sqs(), local_aws.dynamodb(), policy, prefix=unique_name)
    seed(ledger, policy, 23)
    sqs = local_aws.sqs()
    report = run(ledger, policy, SqsPublisher(sqs, resources.queue_url))
    assert report.published == 23
    keys: set[str] = set()
    while True:
        got = sqs.receive_message(QueueUrl=resources.queue_url, MaxNumberOfMessages=10)
        messages = got.get("Messages", [])
        if not messages:
            break
        keys.update(JobMessage.model_validate_json(m["Body"]).key for m in messages)
    assert len(keys) == 23


def test_a_run_with_exactly_the_floor_of_its_budget_left_still_releases_work(
    ledger: Ledger,
) -> None:
    # The run stops only when *less* than the floor is left: at the floor, it reclaims and claims.
    policy = Policy(name="exports", page_size=3, lease_seconds=30)
    seed(ledger, policy, 8)
    run(ledger, policy, FakePublisher())
    later = T0 + timedelta(seconds=31 + republish_delay_seconds(policy))
    publisher = FakePublisher()
    report = run(
        ledger,
        policy,
        publisher,
        scheduled_at=later,
        clock=lambda: later,
        remaining_seconds=lambda: MIN_REMAINING_SECONDS,
    )
    assert (report.reclaimed, report.published, report.stop_reason) == (8, 8, "drained")


def test_leases_expired_beyond_one_page_are_all_reclaimed_and_recorded(ledger: Ledger) -> None:
    policy = Policy(name="exports", page_size=3, lease_seconds=30)
    seed(ledger, policy, 8)
    first = run(ledger, policy, FakePublisher())
    assert first.reclaimed == 0
    later = T0 + timedelta(seconds=31 + republish_delay_seconds(policy))
    publisher = FakePublisher()
    report = run(ledger, policy, publisher, scheduled_at=later, clock=lambda: later)
    # three reclaim pages (3 + 3 + 2), then every row published again
    assert (report.reclaimed, report.discovered, report.published) == (8, 8, 8)
    assert len(publisher.sent) == 8
    recorded = {r.batch_id: r for r in ledger.runs("exports")}[report.batch_id]
    assert (recorded.reclaimed, recorded.discovered, recorded.published) == (8, 8, 8)


def test_the_report_and_the_run_record_carry_every_figure(ledger: Ledger) -> None:
    # 12 due rows, the oldest due 11 s before the run, pages of 5; the queue always rejects the
    # 1st, 7th and 8th earliest. A rejected row is released, due at once, so the next page of the
    # same run claims it again: pages 5 (1 rejected), 5 (3), 5 (3), then 4 (3) < 5 ends the run.
    policy = Policy(name="exports", page_size=5)
    seed(ledger, policy, 12)
    ids = [str(j.id) for j in ledger.claim("exports", "probe", T0, timedelta(seconds=1), 12)]
    ledger.release([int(i) for i in ids], "probe", T0)
    failing = {ids[0], ids[6], ids[7]}
    report = run(ledger, policy, FakePublisher(fail_ids=failing), batch_id="batch-given")
    assert report.as_dict() == {
        "batch_id": "batch-given",
        "policy": "exports",
        "scheduled_at": T0.isoformat(),
        "duplicate_invocation": False,
        "reclaimed": 0,
        "discovered": 19,
        "published": 9,
        "publish_failures": 10,
        "released": 10,
        "in_flight": 9,
        "oldest_eligible_age_seconds": 11.0,
        "resent": 0,
        "oldest_released_age_seconds": 10.0,
        "stop_reason": "drained",
        "in_flight_budget": budget_floor(policy),  # nothing settled yet: the floor
    }
    (recorded,) = ledger.runs("exports")
    assert recorded.batch_id == "batch-given"
    assert (recorded.reclaimed, recorded.discovered, recorded.published) == (0, 19, 9)
    assert recorded.publish_failures == 10
    assert recorded.oldest_eligible_age_seconds == 11.0
    assert recorded.stop_reason == "drained"
    assert ledger.counts("exports")[JobStatus.PENDING] == 3


def test_each_run_has_a_batch_id_of_its_own(ledger: Ledger) -> None:
    policy = Policy(name="exports")
    seed(ledger, policy, 2)
    first = run(ledger, policy, FakePublisher())
    second = run(ledger, policy, FakePublisher(), scheduled_at=T0 + timedelta(minutes=1))
    assert first.batch_id != second.batch_id
    assert str(uuid.UUID(first.batch_id)) == first.batch_id


def test_a_duplicate_invocation_reports_the_first_runs_batch_and_publishes_nothing(
    ledger: Ledger,
) -> None:
    policy = Policy(name="exports")
    seed(ledger, policy, 5)
    first = run(ledger, policy, FakePublisher())
    publisher = FakePublisher()
    second = run(ledger, policy, publisher)
    assert second.as_dict() == {
        "batch_id": first.batch_id,
        "policy": "exports",
        "scheduled_at": T0.isoformat(),
        "duplicate_invocation": True,
        "reclaimed": 0,
        "discovered": 0,
        "published": 0,
        "publish_failures": 0,
        "released": 0,
        "in_flight": 0,
        "oldest_eligible_age_seconds": None,
        "resent": 0,
        "oldest_released_age_seconds": None,
        "stop_reason": "duplicate_invocation",
        "in_flight_budget": 0,
    }
    assert publisher.sent == []


def test_a_paused_policys_run_is_recorded_as_skipped_and_releases_nothing(
    ledger: Ledger,
) -> None:
    policy = Policy(name="exports")
    seed(ledger, policy, 5)
    ledger.pause("exports", "tester", None, T0)
    publisher = FakePublisher()
    report = run(ledger, policy, publisher, batch_id="paused-run")
    assert report.as_dict() == {
        "batch_id": "paused-run",
        "policy": "exports",
        "scheduled_at": T0.isoformat(),
        "duplicate_invocation": False,
        "reclaimed": 0,
        "discovered": 0,
        "published": 0,
        "publish_failures": 0,
        "released": 0,
        "in_flight": 0,
        "oldest_eligible_age_seconds": None,
        "resent": 0,
        "oldest_released_age_seconds": None,
        "stop_reason": "paused",
        "in_flight_budget": 0,
    }
    assert publisher.sent == []
    assert ledger.counts("exports")[JobStatus.PENDING] == 5
    (recorded,) = ledger.runs("exports")
    assert recorded.batch_id == "paused-run"
    assert recorded.finished_at == T0
    assert (recorded.reclaimed, recorded.discovered, recorded.published) == (0, 0, 0)
    assert (recorded.publish_failures, recorded.oldest_eligible_age_seconds) == (0, None)
    assert recorded.stop_reason == "paused"


def test_in_flight_counts_every_page_up_to_the_cap(ledger: Ledger) -> None:
    # pages of 7 against a cap of 20: 7 + 7 + 6, then the cap stops the run
    policy = Policy(
        name="exports",
        quota=Quota(limit=2, period_seconds=1, headroom=1.0),
        lease_seconds=20,
        page_size=7,
    )
    seed(ledger, policy, 50)
    report = run(ledger, policy, FakePublisher())
    assert (report.discovered, report.published, report.in_flight) == (20, 20, 20)
    assert report.stop_reason == "in_flight_cap"


def test_a_run_out_of_time_reclaims_one_page_only_and_claims_nothing(ledger: Ledger) -> None:
    policy = Policy(name="exports", page_size=3, lease_seconds=30)
    seed(ledger, policy, 8)
    run(ledger, policy, FakePublisher())
    later = T0 + timedelta(seconds=31 + republish_delay_seconds(policy))
    publisher = FakePublisher()
    report = run(
        ledger,
        policy,
        publisher,
        scheduled_at=later,
        clock=lambda: later,
        remaining_seconds=lambda: MIN_REMAINING_SECONDS / 2,
    )
    # each reclaim statement is bounded by the page size, and the budget stops the loop
    assert (report.reclaimed, report.published, report.stop_reason) == (3, 0, "budget")
    assert ledger.counts("exports")[JobStatus.PENDING] == 3


def test_room_for_one_more_row_is_used(ledger: Ledger) -> None:
    # a page of 19 against a cap of 20 leaves room for exactly one: it is claimed too
    policy = Policy(
        name="exports",
        quota=Quota(limit=2, period_seconds=1, headroom=1.0),
        lease_seconds=20,
        page_size=19,
    )
    seed(ledger, policy, 30)
    report = run(ledger, policy, FakePublisher())
    assert (report.published, report.in_flight, report.stop_reason) == (20, 20, "in_flight_cap")


def test_after_a_failed_concurrent_call_no_call_starts_and_every_unsent_row_is_released(
    ledger: Ledger,
) -> None:
    # Given 200 due rows (20 calls), four calls at once, and a queue that fails from call 3 on
    policy = Policy(name="exports", publish_concurrency=4)
    seed(ledger, policy, 200)
    publisher = FakePublisher(break_after=2)
    # When the producer publishes
    with pytest.raises(PublishError):
        run(ledger, policy, publisher)
    # Then no call started after the failure was seen (only those already under way ran)
    assert publisher.calls <= 2 + policy.publish_concurrency
    # and exactly the rows whose messages went out are leased; every other row is pending
    counts = ledger.counts("exports")
    (recorded,) = ledger.runs("exports")
    assert recorded.published == len(publisher.sent) == 20
    assert (counts[JobStatus.LEASED], counts[JobStatus.PENDING]) == (20, 180)
    assert (recorded.publish_failures, recorded.stop_reason) == (180, "publish_error")


class ConcurrencyProbe:
    """A publisher in front of another that holds its first `together` calls until that many
    are in flight at once (a sequential producer breaks the barrier), and records the peak."""

    def __init__(
        self, inner: Publisher, together: int, reject: frozenset[str] = frozenset()
    ) -> None:
        self.inner = inner
        self.reject = reject
        self.barrier = threading.Barrier(together, timeout=30)
        self.lock = threading.Lock()
        self.calls = self.in_flight = self.peak = 0

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        with self.lock:
            self.calls += 1
            first = self.calls <= self.barrier.parties
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            if first:
                self.barrier.wait()
            kept = [m for m in messages if m.entry_id not in self.reject]
            refused = [m.entry_id for m in messages if m.entry_id in self.reject]
            return self.inner.send_batch(kept) + refused
        finally:
            with self.lock:
                self.in_flight -= 1


def drain(sqs: Any, queue_url: str) -> list[str]:
    keys: list[str] = []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
        messages = got.get("Messages", [])
        if not messages:
            return keys
        keys.extend(JobMessage.model_validate_json(m["Body"]).key for m in messages)


def test_many_batches_are_sent_concurrently_within_the_bound_and_all_land(
    ledger: Ledger, local_aws: LocalAws, unique_name: str
) -> None:
    # Given 250 due rows in one page, four calls at once, and the real queue (moto)
    policy = Policy(name="exports", page_size=250, publish_concurrency=4)
    resources = provision(local_aws.sqs(), local_aws.dynamodb(), policy, prefix=unique_name)
    seed(ledger, policy, 250)
    sqs = local_aws.sqs()
    probe = ConcurrencyProbe(SqsPublisher(sqs, resources.queue_url), together=4)
    # When the producer runs
    report = run(ledger, policy, probe)
    # Then its 25 calls ran four at a time, never more
    assert (probe.calls, probe.peak) == (25, 4)
    # and every message is on the queue, once
    keys = drain(sqs, resources.queue_url)
    assert report.published == 250
    assert len(keys) == len(set(keys)) == 250


def test_entries_rejected_in_concurrent_calls_are_released_and_counted(
    ledger: Ledger, local_aws: LocalAws, unique_name: str
) -> None:
    # Given 95 due rows, three of them in different calls rejected by the queue
    policy = Policy(name="exports", publish_concurrency=3)
    resources = provision(local_aws.sqs(), local_aws.dynamodb(), policy, prefix=unique_name)
    seed(ledger, policy, 95)
    ids = [j.id for j in ledger.claim("exports", "probe", T0, timedelta(seconds=1), 95)]
    ledger.release(ids, "probe", T0)
    rejected = {str(ids[3]), str(ids[47]), str(ids[90])}
    sqs = local_aws.sqs()
    probe = ConcurrencyProbe(SqsPublisher(sqs, resources.queue_url), 3, frozenset(rejected))
    # When the producer publishes them, three calls at once
    report = run(ledger, policy, probe)
    # Then the rejected rows are pending again and counted as publish failures
    assert (report.published, report.publish_failures, report.released) == (92, 3, 3)
    pending = {str(j.id) for j in ledger.claim("exports", "after", T0, timedelta(seconds=1), 100)}
    assert pending == rejected
    # and every other row's message is on the queue
    assert len(set(drain(sqs, resources.queue_url))) == 92


# -- backpressure: the budget follows what the consumers settle (sweeper.producer.backpressure)
# ----------

#: The demo's shape: 40/s for a 120 s lease (cap 2,400), consumers timing out at 30 s (a 180 s
#: visibility timeout), four environments of ten.
SLOW = Policy(
    name="exports",
    quota=Quota(limit=40, period_seconds=1, headroom=1.0),
    lease_seconds=120,
    consumer=ConsumerConfig(timeout_seconds=30),
)


def consume(
    ledger: Ledger, publisher: FakePublisher, *, seconds: int, per_second: int, policy: Policy
) -> dict[str, int]:
    """Simulated time: a producer run every second, consumers taking `per_second` messages a
    second from the queue in publish order; what was published, settled, reclaimed."""
    taken = settled = reclaimed = 0
    for second in range(1, seconds + 1):
        now = T0 + timedelta(seconds=second)
        for message in publisher.sent[taken : taken + per_second]:
            key = JobMessage.model_validate_json(message.body).key
            settled += ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, now)
        taken = min(len(publisher.sent), taken + per_second)
        report = run(ledger, policy, publisher, scheduled_at=now, clock=lambda at=now: at)
        reclaimed += report.reclaimed
    return {"published": len(publisher.sent), "settled": settled, "reclaimed": reclaimed}


def test_the_budget_follows_a_slow_settle_rate_without_a_reclaim_storm(ledger: Ledger) -> None:
    # Given 1,200 due jobs at a 40/s quota and consumers that settle 5 a second (8x slower)
    seed(ledger, SLOW, 1200)
    publisher = FakePublisher()
    first = run(ledger, SLOW, publisher)
    # Then a fresh policy starts at the floor, not at the quota's 2,400
    assert (first.published, first.stop_reason) == (budget_floor(SLOW), "backpressure")
    assert budget_floor(SLOW) == 150
    # When the consumers work it off
    totals = consume(ledger, publisher, seconds=260, per_second=5, policy=SLOW)
    # Then every job is settled, no lease expired, and no job was published twice
    assert totals == {"published": 1200, "settled": 1200, "reclaimed": 0}


def test_the_budget_is_what_the_achieved_rate_drains_in_half_a_lease(ledger: Ledger) -> None:
    seed(ledger, SLOW, 1200)
    publisher = FakePublisher()
    run(ledger, SLOW, publisher)
    consume(ledger, publisher, seconds=90, per_second=5, policy=SLOW)
    at = T0 + timedelta(seconds=91)
    report = run(ledger, SLOW, publisher, scheduled_at=at, clock=lambda: at)
    # 5/s for 60 s: about 300 (5 per burst, so the estimate is a little above)
    assert 280 <= report.in_flight_budget <= 330
    assert report.in_flight <= report.in_flight_budget


def test_consumers_faster_than_the_quota_reach_its_formula_within_seconds(ledger: Ledger) -> None:
    # The rate is taken over the span of the settlements, not the whole window: consumers that
    # drain the floor in seconds show their speed at once, and the budget is the formula's
    seed(ledger, SLOW, 3000)
    publisher = FakePublisher()
    run(ledger, SLOW, publisher)
    consume(ledger, publisher, seconds=8, per_second=60, policy=SLOW)
    at = T0 + timedelta(seconds=9)
    report = run(ledger, SLOW, publisher, scheduled_at=at, clock=lambda: at)
    assert (report.in_flight_budget, report.stop_reason) == (2400, "in_flight_cap")


def test_stalled_consumers_get_no_more_than_the_floor(ledger: Ledger) -> None:
    seed(ledger, SLOW, 1200)
    publisher = FakePublisher()
    run(ledger, SLOW, publisher)
    # nothing settles for a minute: every run stops at the floor, nothing more is published
    consume(ledger, publisher, seconds=60, per_second=0, policy=SLOW)
    assert len(publisher.sent) == budget_floor(SLOW)


def test_without_the_budget_the_same_consumers_cause_a_reclaim_storm(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The control case: a floor as high as the quota's formula, i.e. the formula alone
    monkeypatch.setattr(backpressure, "FLOOR_FRACTION", 1.0)
    seed(ledger, SLOW, 1200)
    publisher = FakePublisher()
    totals = consume(ledger, publisher, seconds=260, per_second=5, policy=SLOW)
    assert totals["reclaimed"] > 100
    assert totals["published"] > 1.05 * 1200


def test_a_reclaim_within_one_visibility_timeout_does_not_publish_again(ledger: Ledger) -> None:
    # Given a 30 s lease on a queue whose visibility timeout is 42 s (consumers time out at 7 s)
    policy = Policy(name="exports", lease_seconds=30, consumer=ConsumerConfig(timeout_seconds=7))
    assert policy.consumer.visibility_timeout_seconds == 42
    seed(ledger, policy, 5)
    run(ledger, policy, FakePublisher())
    # When the lease has expired but the publish is younger than the visibility timeout
    publisher = FakePublisher()
    early = T0 + timedelta(seconds=41)
    report = run(ledger, policy, publisher, scheduled_at=early, clock=lambda: early)
    # Then nothing is reclaimed or published, and the rows still count as on the consumers
    assert (report.reclaimed, report.published, report.in_flight) == (0, 0, 5)
    # And once the publish is a visibility timeout old, they are published again
    later = T0 + timedelta(seconds=42)
    report = run(ledger, policy, publisher, scheduled_at=later, clock=lambda: later)
    assert (report.reclaimed, report.published) == (5, 5)


def test_deferred_work_does_not_hold_back_due_work(ledger: Ledger) -> None:
    # Given the floor's worth of work on the consumers, every row of it sent back to wait (a
    # throttle, a closed gate): their next attempt is a minute away, their messages hidden
    seed(ledger, SLOW, 150)
    first = FakePublisher()
    run(ledger, SLOW, first)
    now = T0 + timedelta(seconds=5)
    for key in keys_of(first):
        ledger.record_unsettled(
            key,
            now,
            next_attempt_at=now + timedelta(minutes=1),
            lease_until=now + timedelta(seconds=SLOW.lease_seconds),
            outcome=OutcomeClass.THROTTLED,
        )
    # When 40 more jobs become due
    seed_more(ledger, SLOW, 40, now)
    publisher = FakePublisher()
    report = run(ledger, SLOW, publisher, scheduled_at=now, clock=lambda: now)
    # Then they are published: deferred work is not on the consumers
    assert (report.published, report.in_flight) == (40, 40)


def test_dead_lettered_and_paused_work_does_not_hold_back_due_work(ledger: Ledger) -> None:
    # Given six jobs throttled into the DLQ (leased, their waits over, nothing ever settled) ...
    seed(ledger, SLOW, 6)
    first = FakePublisher()
    run(ledger, SLOW, first)
    throttle(ledger, keys_of(first), at=T0 + timedelta(seconds=2), until=timedelta(seconds=1))
    # ... and a pause over the next minute
    ledger.pause("exports", "tester", None, T0 + timedelta(seconds=5))
    paused_at = T0 + timedelta(seconds=30)
    paused = run(ledger, SLOW, FakePublisher(), scheduled_at=paused_at, clock=lambda: paused_at)
    assert paused.stop_reason == "paused"
    ledger.resume("exports", "tester", None, T0 + timedelta(seconds=60))
    # When one more job becomes due and the producer runs (nothing settled in the window)
    now = T0 + timedelta(seconds=61)
    seed_more(ledger, SLOW, 1, now)
    publisher = FakePublisher()
    report = run(ledger, SLOW, publisher, scheduled_at=now, clock=lambda: now)
    # Then it is published
    assert (report.published, report.stop_reason) == (1, "drained")


def test_status_shows_the_work_on_consumers_as_the_producers_budget_counts_it(
    ledger: Ledger,
) -> None:
    # Given ten published jobs, four of them sent back to wait (a throttle: next attempt ahead)
    seed(ledger, SLOW, 10)
    first = FakePublisher()
    run(ledger, SLOW, first)
    throttle(ledger, keys_of(first)[:4], at=T0 + timedelta(seconds=1), until=timedelta(seconds=89))
    # When the operator asks where the policy stands
    now = T0 + timedelta(seconds=10)
    status = policy_status(SLOW, ledger, now=now)
    # Then it shows the six the consumers hold, the figure the producer's budget compares with,
    # not every unexpired lease (ten)
    assert status.leased_in_flight == on_consumers(ledger, SLOW, now) == 6
    assert unexpired_leases(ledger, SLOW.name, now) == 10


def throttle(ledger: Ledger, keys: list[str], *, at: datetime, until: timedelta) -> None:
    """As a consumer settles a 429: the next attempt `until` after `at`, the lease renewed."""
    for key in keys:
        ledger.record_unsettled(
            key,
            at,
            next_attempt_at=at + until,
            lease_until=at + timedelta(seconds=SLOW.lease_seconds),
            outcome=OutcomeClass.THROTTLED,
        )


def keys_of(publisher: FakePublisher) -> list[str]:
    return [JobMessage.model_validate_json(m.body).key for m in publisher.sent]


def seed_more(ledger: Ledger, policy: Policy, n: int, due: datetime) -> None:
    jobs = [NewJob(f"t{i % 4}", f"more{i:05d}", due) for i in range(n)]
    ledger.schedule(policy.name, policy.version, lambda j: policy.name, jobs, due)


def test_the_oldest_released_age_keeps_its_fraction_of_a_second(ledger: Ledger) -> None:
    # Given one row that became due 0.25 s before the run
    policy = Policy(name="exports")
    ledger.schedule(
        policy.name,
        policy.version,
        lambda j: policy.name,
        [NewJob("t0", "o1", T0 - timedelta(seconds=0.25))],
        T0,
    )
    # When the producer publishes it
    report = run(ledger, policy, FakePublisher())
    # Then the age it reports is that quarter of a second, not rounded up
    assert report.oldest_released_age_seconds == 0.25


class CountingReclaims(Ledger):
    """The real ledger, counting the reclaim pages a run asks for."""

    reclaims = 0

    def reclaim_expired(self, *args: Any, **kwargs: Any) -> int:
        self.reclaims += 1
        return super().reclaim_expired(*args, **kwargs)


def test_a_reclaim_page_short_of_a_full_page_is_the_last_one(ledger: Ledger, db_url: str) -> None:
    # Given time enough left (ten seconds less at each look), and fewer expired leases than a
    # page (none here)
    policy = Policy(name="exports", page_size=5)
    seed(ledger, policy, 3)
    counting = CountingReclaims(db_url)
    left = iter(range(300, 0, -10))
    # When the producer runs
    report = run(counting, policy, FakePublisher(), remaining_seconds=lambda: next(left, 0.0))
    counting.close()
    assert report.published == 3
    # Then it asked for one reclaim page, not one after another until its time ran out
    assert counting.reclaims == 1


TRACE_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


def _sent_trace_headers(
    ledger: Ledger, local_aws: LocalAws, unique_name: str, jobs: int
) -> list[str | None]:
    """Publish `jobs` jobs to a real (moto) queue; each entry's AWSTraceHeader as sent.

    Read from the SendMessageBatch requests the SDK validated and sent (moto accepts the
    attribute but drops it from batched messages, so a receive would not show it).
    """
    policy = Policy(name="exports")
    resources = provision(local_aws.sqs(), local_aws.dynamodb(), policy, prefix=unique_name)
    seed(ledger, policy, jobs)
    sqs = local_aws.sqs()
    sent: list[dict[str, Any]] = []

    def capture(params: dict[str, Any], **_: Any) -> None:
        sent.extend(params["Entries"])

    sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", capture)
    assert run(ledger, policy, SqsPublisher(sqs, resources.queue_url)).published == jobs
    got = sqs.receive_message(QueueUrl=resources.queue_url, MaxNumberOfMessages=10)
    assert got.get("Messages")  # the queue took the batches
    assert len(sent) == jobs
    return [
        entry.get("MessageSystemAttributes", {}).get("AWSTraceHeader", {}).get("StringValue")
        for entry in sent
    ]


def test_each_message_carries_the_invocations_trace_header(
    ledger: Ledger, local_aws: LocalAws, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a producer invocation that Lambda traces (it sets the header per invocation)
    monkeypatch.setenv("_X_AMZN_TRACE_ID", TRACE_HEADER)
    # When it publishes twelve jobs (two SendMessageBatch calls)
    headers = _sent_trace_headers(ledger, local_aws, unique_name, 12)
    # Then every message carries it as SQS's AWSTraceHeader: X-Ray follows it to the consumer
    assert headers == [TRACE_HEADER] * 12


def test_without_a_trace_header_messages_carry_none(
    ledger: Ledger, local_aws: LocalAws, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    assert _sent_trace_headers(ledger, local_aws, unique_name, 3) == [None] * 3
