"""Live limits through the consumer as on AWS: an operator's pause or lower rate, read from the
limiter table, in force without a redeploy (sweeper.admission.live)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from sweeper import runtime
from sweeper.config import Policy
from sweeper.config.limit import SHORTHAND_LIMIT_NAME
from sweeper.limiter.live import LIVE_READ_SECONDS, LiveLimit, LiveLimitStore
from sweeper.models import JobMessage, JobStatus
from sweeper_local.vendor import VendorAudit, max_calls_in_window
from tests.conftest import Pipeline
from tests.integration.test_consumer import failed_ids, publish_all
from tests.integration.test_parallel_calls import invoke

pytestmark = pytest.mark.integration


def store(p: Pipeline) -> LiveLimitStore:
    return LiveLimitStore(p.aws.dynamodb(), p.resources.limiter_table)


def change(p: Pipeline, **fields: object) -> LiveLimit:
    return LiveLimit(
        policy=p.policy.name,
        limit=SHORTHAND_LIMIT_NAME,
        actor="ops",
        reason="vendor incident",
        set_at=time.time(),
        **fields,  # type: ignore[arg-type]
    )


def test_a_paused_limit_sends_every_record_back_uncalled_with_its_own_reason(
    pipeline: Pipeline,
) -> None:
    # Given three due jobs and their policy's limit paused live by an operator
    pipeline.seed(3)
    records = publish_all(pipeline)
    store(pipeline).put(change(pipeline, paused=True))
    runtime.reset()
    # When one batch carries them
    response = invoke(pipeline, records)
    # Then none was called: each came back, its job waiting for the pause's reason
    assert failed_ids(response) == {r["messageId"] for r in records}
    assert pipeline.vendor.audit().calls_total == 0
    for record in records:
        job = pipeline.ledger.get(JobMessage.model_validate_json(record["body"]).key)
        assert job is not None
        assert (job.status, job.last_error_code) == (JobStatus.LEASED, "wait_paused")


def six_calls_at_a_live_rate_of_two_per_second(pipeline: Pipeline) -> VendorAudit:
    """Six due jobs, a live rate of 2/s set, one batch carrying them: what the vendor saw."""
    pipeline.seed(6)
    records = publish_all(pipeline)
    store(pipeline).put(change(pipeline, rate_limit=2, rate_period_seconds=1.0))
    runtime.reset()
    invoke(pipeline, records)
    return pipeline.vendor.audit()


def test_a_live_rate_below_the_told_one_paces_the_calls_at_it(pipeline: Pipeline) -> None:
    # Given six due jobs, a told quota of 50/s and a live rate of 2 per second
    # When one batch carries them
    audit = six_calls_at_a_live_rate_of_two_per_second(pipeline)
    # Then the vendor never saw more than two calls in a second
    assert audit.calls_total >= 2
    assert max_calls_in_window(audit.arrivals, 1.0) <= 2


def test_a_live_rate_caps_a_quota_that_is_being_found(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a quota not known (adaptive: it starts at 5/s, a tenth of its 50/s cap), six due
    # jobs and a live rate of 2 per second
    data = pipeline.policy.model_dump(exclude={"limits"})
    data["quota"].update(limit=50, period_seconds=1.0, adaptive=True)
    policy = Policy.model_validate(data)
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    # When one batch carries them
    audit = six_calls_at_a_live_rate_of_two_per_second(replace(pipeline, policy=policy))
    # Then the rate being found stayed under the live one
    assert audit.calls_total >= 1
    assert max_calls_in_window(audit.arrivals, 1.0) <= 2


def test_a_reset_live_limit_lets_the_told_rate_back(pipeline: Pipeline) -> None:
    # Given a paused limit the operator then reset
    pipeline.seed(3)
    records = publish_all(pipeline)
    live = store(pipeline)
    live.put(change(pipeline, paused=True))
    live.put(change(pipeline))  # a reset: the item changes nothing
    runtime.reset()
    # When one batch carries them
    response = invoke(pipeline, records)
    # Then every job settled
    assert failed_ids(response) == set()
    assert pipeline.ledger.counts(pipeline.policy.name)[JobStatus.SUCCEEDED] == 3


def test_a_consumer_sees_a_change_within_one_read_interval_and_not_sooner(
    pipeline: Pipeline,
) -> None:
    # Given a consumer's cached read of its policy's live limits, made with none set
    live = store(pipeline)
    clock = iter([100.0, 100.5, 100.0 + LIVE_READ_SECONDS])
    names = [SHORTHAND_LIMIT_NAME]
    first = live.current(pipeline.policy.name, names, lambda: next(clock))
    # When an operator pauses the limit, and the consumer looks half an interval, then an
    # interval, after its read
    live.put(change(pipeline, paused=True))
    soon = live.current(pipeline.policy.name, names, lambda: next(clock))
    later = live.current(pipeline.policy.name, names, lambda: next(clock))
    # Then the pause is unseen until the interval has passed (one read per interval), then seen
    assert (first, soon) == ({}, {})
    assert later[SHORTHAND_LIMIT_NAME].paused is True
