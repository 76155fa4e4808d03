"""The per-batch audit against the real local PostgreSQL: which batch carries a job, and each
batch's outcome counters, kept by the statements that make the changes they count."""

from __future__ import annotations

import json
import random
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from sweeper.audit import BatchReport, batch_audit
from sweeper.config import ConsumerConfig, HttpActionConfig, Policy, Quota, RetryConfig
from sweeper.ledger.store import Ledger
from sweeper.models import NewJob, OutcomeClass
from sweeper.producer.run import run_producer
from sweeper_cli import main
from sweeper_local.pipeline import LocalPipeline
from sweeper_local.stack import LocalStack
from tests.conftest import PgServer
from tests.fakes import FakePublisher

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
POLICY = "exports"


def add(ledger: Ledger, n: int, due: datetime = T0) -> list[str]:
    jobs = [NewJob(f"t{i % 3}", f"o{i:05d}", due) for i in range(n)]
    ledger.schedule(POLICY, 1, lambda j: POLICY, jobs, T0)
    return [f"{POLICY}:t{i % 3}:o{i:05d}:v1" for i in range(n)]


def start(ledger: Ledger, batch: str, at: datetime) -> None:
    assert not ledger.start_run(POLICY, at, batch, at).duplicate


def finish(ledger: Ledger, batch: str, at: datetime, published: int, resent: int = 0) -> None:
    ledger.finish_run(
        batch,
        at,
        reclaimed=0,
        discovered=published,
        published=published,
        publish_failures=0,
        oldest_age_seconds=None,
        stop_reason="drained",
        resent=resent,
    )


def report(ledger: Ledger) -> dict[str, BatchReport]:
    return {r.batch_id: r for r in batch_audit(POLICY, ledger, since=T0 - timedelta(days=1))}


def test_a_claim_makes_its_batch_the_carrier_and_settlement_keeps_it(ledger: Ledger) -> None:
    # Given a job claimed by batch b1
    (key,) = add(ledger, 1)
    start(ledger, "b1", T0)
    (claimed,) = ledger.claim(POLICY, "b1", T0, LEASE, 10)
    assert claimed.resent is False
    assert claimed.eligible_since == T0
    # When it succeeds
    ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, T0 + timedelta(seconds=5))
    # Then the settled job still says which batch carried it
    job = ledger.get(key)
    assert job is not None
    assert job.batch_id == "b1"


def test_a_release_of_an_unpublished_claim_leaves_the_job_with_no_carrier(
    ledger: Ledger,
) -> None:
    (key,) = add(ledger, 1)
    start(ledger, "b1", T0)
    (claimed,) = ledger.claim(POLICY, "b1", T0, LEASE, 10)
    ledger.release([claimed.id], "b1", T0)
    job = ledger.get(key)
    assert job is not None
    assert job.batch_id is None
    # and the next batch that publishes it carries it, not as a re-send
    start(ledger, "b2", T0 + LEASE)
    (again,) = ledger.claim(POLICY, "b2", T0 + LEASE, LEASE, 10)
    assert again.resent is False
    job = ledger.get(key)
    assert job is not None
    assert job.batch_id == "b2"


def test_a_resend_after_an_expired_lease_stays_with_the_first_batch(ledger: Ledger) -> None:
    # Given a job b1 published whose lease expired and was reclaimed
    (key,) = add(ledger, 1)
    start(ledger, "b1", T0)
    ledger.claim(POLICY, "b1", T0, LEASE, 10)
    finish(ledger, "b1", T0, published=1)
    later = T0 + 2 * LEASE
    assert ledger.reclaim_expired(POLICY, later, 10) == 1
    # When b2 sends it again, and a release of b2's claim gives it back
    start(ledger, "b2", later)
    (resend,) = ledger.claim(POLICY, "b2", later, LEASE, 10)
    assert resend.resent is True
    ledger.release([resend.id], "b2", later)
    job = ledger.get(key)
    assert job is not None
    assert job.batch_id == "b1"
    # and b3 sends it again and it settles
    start(ledger, "b3", later + LEASE)
    (resend,) = ledger.claim(POLICY, "b3", later + LEASE, LEASE, 10)
    finish(ledger, "b3", later + LEASE, published=1, resent=1)
    ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, later + LEASE)
    # Then b1 carried it and succeeded; b3 only re-sent it; both reconcile
    got = report(ledger)
    assert (got["b1"].carried, got["b1"].succeeded, got["b1"].in_flight) == (1, 1, 0)
    assert (got["b3"].published, got["b3"].resent, got["b3"].carried, got["b3"].settled) == (
        1,
        1,
        0,
        0,
    )
    assert all(r.reconciles for r in got.values())


def test_settlements_retries_and_duplicates_are_counted_per_batch(ledger: Ledger) -> None:
    # Given four jobs published by b1 and two by b2
    keys = add(ledger, 6)
    start(ledger, "b1", T0)
    ledger.claim(POLICY, "b1", T0, LEASE, 4)
    finish(ledger, "b1", T0, published=4)
    start(ledger, "b2", T0 + timedelta(minutes=5))
    ledger.claim(POLICY, "b2", T0, LEASE, 4)
    finish(ledger, "b2", T0 + timedelta(minutes=5), published=2)
    by_batch: dict[str, list[str]] = {}
    for key in keys:
        job = ledger.get(key)
        assert job is not None
        assert job.batch_id is not None
        by_batch.setdefault(job.batch_id, []).append(key)
    a, b, c, d = by_batch["b1"]
    e, _f = by_batch["b2"]
    # When the consumer reads a batch of deliveries naming five of them (one twice)
    ledger.targets([a, b, c, d, a, e])
    # and a succeeds, b fails for good, c is retried (an attempt below the maximum), d's attempt
    # exhausts its budget, e succeeds, and a second delivery of a then settles nothing
    t = T0 + timedelta(seconds=30)
    assert ledger.mark_succeeded(a, OutcomeClass.ACCEPTED, t)
    ledger.mark_failed(b, OutcomeClass.PERMANENT, "http_400", t, count_attempt=True)
    attempts = ledger.record_unsettled(
        c,
        t,
        next_attempt_at=t,
        lease_until=t,
        outcome=OutcomeClass.TRANSIENT,
        count_attempt=True,
        max_attempts=3,
    )
    assert attempts == 1
    ledger.record_unsettled(d, t, next_attempt_at=t, lease_until=t, max_attempts=1)  # a wait
    ledger.record_unsettled(
        d,
        t,
        next_attempt_at=t,
        lease_until=t,
        outcome=OutcomeClass.UNKNOWN,
        count_attempt=True,
        max_attempts=1,
    )
    ledger.mark_failed(d, OutcomeClass.UNKNOWN, "exhausted", t, count_attempt=False)
    assert ledger.mark_succeeded(e, OutcomeClass.ACCEPTED, t + timedelta(seconds=10))
    assert not ledger.mark_succeeded(a, OutcomeClass.ACCEPTED, t + timedelta(seconds=20))
    ledger.targets([a])  # a delivery of a settled job: acknowledged, a duplicate
    # Then each batch's counters say what happened to its own jobs
    got = report(ledger)
    b1, b2 = got["b1"], got["b2"]
    assert (b1.consumed, b1.succeeded, b1.terminal, b1.retried, b1.duplicates) == (6, 1, 2, 1, 2)
    assert (b1.settled, b1.in_flight, b1.reconciles, b1.drained) == (3, 1, True, False)
    assert b1.time_to_drain_seconds is None
    assert (b2.consumed, b2.succeeded, b2.terminal, b2.retried, b2.duplicates) == (1, 1, 0, 0, 0)
    assert (b2.in_flight, b2.reconciles) == (1, True)


def test_deliveries_before_their_time_are_counted_for_the_batch_the_ledger_names(
    ledger: Ledger,
) -> None:
    # Given two jobs carried by b1, one by b2 and one carried by no batch
    keys = add(ledger, 4)
    start(ledger, "b1", T0)
    a, b = (c.operation_key for c in ledger.claim(POLICY, "b1", T0, LEASE, 2))
    start(ledger, "b2", T0 + timedelta(minutes=5))
    (c,) = (j.operation_key for j in ledger.claim(POLICY, "b2", T0, LEASE, 1))
    (unclaimed,) = set(keys) - {a, b, c}
    # When deliveries early for their time are counted (a twice), whatever their bodies said
    ledger.count_not_yet_due([a, a, b, c, unclaimed])
    # Then each batch counts its own, and the job carried by none counts for no batch
    got = report(ledger)
    assert (got["b1"].not_yet_due, got["b2"].not_yet_due) == (3, 1)
    assert (got["b1"].consumed, got["b1"].duplicates) == (0, 0)


def test_a_drained_batch_reports_the_time_from_its_start_to_its_last_settlement(
    ledger: Ledger,
) -> None:
    keys = add(ledger, 2)
    start(ledger, "b1", T0)
    claimed = ledger.claim(POLICY, "b1", T0 + timedelta(seconds=30), LEASE, 10)
    finish(ledger, "b1", T0 + timedelta(seconds=1), published=2)
    ledger.mark_succeeded(keys[0], OutcomeClass.ACCEPTED, T0 + timedelta(seconds=40))
    ledger.mark_failed(
        keys[1], OutcomeClass.PERMANENT, "http_404", T0 + timedelta(seconds=90), count_attempt=True
    )
    (got,) = report(ledger).values()
    assert len(claimed) == 2
    assert (got.drained, got.time_to_drain_seconds, got.in_flight) == (True, 90.0, 0)


def test_an_operator_retry_moves_the_job_out_of_its_batch_and_its_event_keeps_it(
    ledger: Ledger, db_url: str
) -> None:
    # Given a job b1 carried to a terminal failure
    (key,) = add(ledger, 1)
    start(ledger, "b1", T0)
    ledger.claim(POLICY, "b1", T0, LEASE, 10)
    finish(ledger, "b1", T0, published=1)
    ledger.mark_failed(key, OutcomeClass.PERMANENT, "http_400", T0, count_attempt=True)
    # When an operator retries it
    assert ledger.retry_failed(POLICY, "ops", T0 + LEASE, keys=[key]) == [key]
    # Then b1 still says it ended terminal, the job has no carrier until a batch publishes it
    # again, and the job event names b1
    (b1,) = report(ledger).values()
    assert (b1.terminal, b1.in_flight, b1.reconciles, b1.drained) == (1, 0, True, True)
    job = ledger.get(key)
    assert job is not None
    assert job.batch_id is None
    with psycopg.connect(db_url) as conn:
        (event_batch,) = conn.execute("SELECT batch_id FROM sweeper_job_events").fetchone() or ()
    assert event_batch == "b1"
    start(ledger, "b2", T0 + 2 * LEASE)
    (again,) = ledger.claim(POLICY, "b2", T0 + 2 * LEASE, LEASE, 10)
    assert again.resent is False


def test_concurrent_consumer_reads_counting_the_same_batches_do_not_deadlock(
    ledger: Ledger, db_url: str
) -> None:
    # Given six batches of one job each, which four consumers read at once, each round in its
    # own shuffled order (the run rows they count are locked in batch-id order, whatever it is)
    keys = add(ledger, 6)
    for n in range(6):
        start(ledger, f"b{n}", T0 + n * LEASE)
        ledger.claim(POLICY, f"b{n}", T0, LEASE, 1)
    rounds, readers = 150, 4
    errors: list[BaseException] = []
    barrier = threading.Barrier(readers)

    def read(seed: int) -> None:
        shuffle = random.Random(seed)
        own = Ledger(db_url)
        try:
            barrier.wait()
            for _ in range(rounds):
                order = list(keys)
                shuffle.shuffle(order)
                own.targets(order)
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(readers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    # Then none failed (a deadlock would be a LedgerError) and every delivery was counted
    assert errors == []
    assert sum(r.consumed for r in report(ledger).values()) == rounds * readers * len(keys)


def test_runs_after_a_local_pipeline_run_reconcile_for_every_batch(
    pg_server: PgServer, tmp_path: Path
) -> None:
    # Given the local pipeline (producer and consumers as Lambda runs them, SQS, the vendor over
    # HTTP) and a vendor whose first answers are 503 (retried), then 400 (terminal)
    url = pg_server.create_database("sweeper_runs_audit")
    policy = Policy(
        name="audit",
        quota=Quota(limit=1000, period_seconds=1),
        consumer=ConsumerConfig(reserved_concurrency=2, max_concurrency=2, timeout_seconds=30),
        retry=RetryConfig(base_seconds=0.2, cap_seconds=1.0),
        lease_seconds=120,
        producer_budget_seconds=30,
    )
    with LocalStack(database_url=url) as stack:
        assert stack.vendor is not None
        assert stack.api_url is not None
        policy = policy.model_copy(
            update={
                "action": HttpActionConfig(
                    api_url=stack.api_url, allow_plain_http=True, read_timeout_seconds=5
                )
            }
        )
        stack.vendor.fail_next(3, 503)
        stack.vendor.fail_next(2, 400)
        with LocalPipeline(
            stack, policy, prefix="sweeper-audit", log_prefix="sweeper-audit-"
        ) as run:
            # When two scheduled runs each release their own obligations, and the pipeline
            # settles every job
            run.seed(15, 3)
            first = run.tick()
            run.seed(25, 3)
            second = run.tick()
            assert run.run(lambda: run.final() == 25, timeout_seconds=240)
        assert first is not None
        assert second is not None
        # and the operator asks `sweeper runs`
        config = tmp_path / "sweeper.toml"
        config.write_text(f'[[policies]]\nname = "{policy.name}"\n', encoding="utf-8")
        result = CliRunner().invoke(
            main,
            [
                "runs",
                *("--policy", policy.name, "--since", "1h", "--limit", "10000", "--json"),
                *("--database-url", url, "--config", str(config)),
                *("--local-file", str(tmp_path / "absent.json")),
            ],
        )
    # Then every batch reconciles, and the two that released work say what became of it
    assert result.exit_code == 0, result.output
    audit = json.loads(result.output)
    assert audit["reconciled"] is True
    batches = {b["batch_id"]: b for b in audit["batches"]}
    one, two = batches[first["batch_id"]], batches[second["batch_id"]]
    # (the second run also claims those of the first run's jobs that came due again by then,
    # after a transient answer: how many depends on how fast the consumers were)
    assert (one["discovered"], one["published"], one["resent"]) == (15, 15, 0)
    assert two["discovered"] == two["published"] >= 10
    for batch in (one, two):
        assert batch["carried"] == batch["succeeded"] + batch["terminal"] + batch["in_flight"]
        assert batch["drained"] is True
        assert batch["in_flight"] == 0
        assert batch["time_to_drain_seconds"] is not None
        assert batch["time_to_drain_seconds"] > 0
        assert batch["oldest_age_at_release_seconds"] is not None
        assert batch["consumed"] >= batch["published"]
    totals = {
        name: sum(b[name] for b in audit["batches"])
        for name in ("succeeded", "terminal", "retried", "consumed", "published")
    }
    assert (totals["succeeded"], totals["terminal"], totals["retried"]) == (23, 2, 3)
    # each message was delivered at least once, and each retried one once more
    assert totals["consumed"] >= totals["published"] + totals["retried"]


def test_runs_prints_a_line_per_batch_and_refuses_a_since_it_cannot_read(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    # Given one batch that published two jobs, one settled
    keys = add(ledger, 2, due=datetime.now(UTC) - timedelta(minutes=5))
    now = datetime.now(UTC)
    start(ledger, "b1", now)
    ledger.claim(POLICY, "b1", now, LEASE, 10)
    finish(ledger, "b1", now, published=2)
    ledger.mark_succeeded(keys[0], OutcomeClass.ACCEPTED, now)
    config = tmp_path / "sweeper.toml"
    config.write_text(f'[[policies]]\nname = "{POLICY}"\n', encoding="utf-8")
    target = ["--database-url", db_url, "--config", str(config)]
    target += ["--local-file", str(tmp_path / "absent.json")]
    # When a person asks, and when the time cannot be read
    shown = CliRunner().invoke(main, ["runs", "--since", "2h", *target])
    refused = CliRunner().invoke(main, ["runs", "--since", "yesterday", *target])
    # Then the batch is one line with its figures; the bad time is one line naming the option
    assert shown.exit_code == 0, shown.output
    (line,) = [x for x in shown.output.splitlines() if "batch b1" in x]
    assert "published 2 (resent 0)" in line
    assert "succeeded 1" in line
    assert "1 in flight" in line
    assert "DOES NOT RECONCILE" not in line
    assert refused.exit_code == 2
    assert "--since" in refused.output
    assert "Traceback" not in refused.output


def test_the_producer_records_resends_and_the_oldest_age_at_release(ledger: Ledger) -> None:
    # Given three jobs due at T0 - 10 min, all published by a first run
    due = T0 - timedelta(minutes=10)
    add(ledger, 3, due=due)
    # (a 42 s visibility timeout: a reclaim may publish again as soon as the lease expires)
    policy = Policy(name=POLICY, lease_seconds=60, consumer=ConsumerConfig(timeout_seconds=7))
    first_publisher = FakePublisher(fail_ids=set())
    first = run_producer(
        policy,
        T0,
        ledger,
        first_publisher,
        clock=lambda: T0,
        remaining_seconds=lambda: 60.0,
        batch_id="b1",
    )
    # When their leases expire and a second run (with one publish failure) sends them again
    later = T0 + timedelta(minutes=5)
    failing = {first_publisher.sent[0].entry_id}
    second = run_producer(
        policy,
        later,
        ledger,
        FakePublisher(fail_ids=failing),
        clock=lambda: later,
        remaining_seconds=lambda: 60.0,
        batch_id="b2",
    )
    # Then the first run carries all three; the second only re-sent the two it published
    got = report(ledger)
    assert (first.published, second.published, second.resent) == (3, 2, 2)
    assert (got["b1"].carried, got["b1"].in_flight, got["b2"].carried) == (3, 3, 0)
    assert (got["b2"].resent, got["b2"].publish_failures) == (2, 1)
    assert got["b1"].oldest_age_at_release_seconds == 600.0
    assert got["b2"].oldest_age_at_release_seconds == 900.0
    assert all(r.reconciles for r in got.values())


def test_a_batchs_cancelled_and_held_jobs_are_counted_and_it_still_reconciles(
    ledger: Ledger,
) -> None:
    from sweeper.models import ControlAction, JobSelection
    from sweeper.operations import control_jobs

    # Given a batch of four published jobs, one failed before an operator came
    keys = add(ledger, 4)
    start(ledger, "b1", T0)
    assert len(ledger.claim(POLICY, "b1", T0, LEASE, 10)) == 4
    finish(ledger, "b1", T0, published=4)
    at = T0 + timedelta(seconds=5)
    ledger.mark_failed(keys[3], OutcomeClass.PERMANENT, "http_400", at, count_attempt=True)

    def control(action: ControlAction, *chosen: str) -> None:
        moved = control_jobs(
            action, POLICY, ledger, JobSelection(keys=chosen), actor="op", now=at, reason="why"
        )
        assert moved.moved == len(chosen)

    # When the operator cancels a leased one and the failed one, and holds another
    control(ControlAction.CANCEL, keys[0], keys[3])
    control(ControlAction.HOLD, keys[1])
    # Then the batch counts one cancelled (the failed one stays terminal), one held, one in
    # flight, and reconciles: 4 carried = 1 terminal + 1 cancelled + 1 held + 1 in flight
    batch = report(ledger)["b1"]
    assert (batch.terminal, batch.cancelled, batch.held, batch.in_flight) == (1, 1, 1, 1)
    assert batch.reconciles
    assert not batch.drained
    # And once the held one is cancelled too, it is counted once, as cancelled
    control(ControlAction.CANCEL, keys[1])
    batch = report(ledger)["b1"]
    assert (batch.cancelled, batch.held, batch.in_flight) == (2, 0, 1)
    assert batch.reconciles
