"""Redrive that knows the limit: a dead letter whose job is under a closed or live-paused limit
stays (`kept_closed`), and moves back at the first run after the limit reopened."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from functions.redrive import app as redrive_app
from sweeper.config import LimitConfig, Policy, Quota
from sweeper.config.limit import SHORTHAND_LIMIT_NAME
from sweeper.limiter import DynamoLimiter
from sweeper.limiter.live import LiveLimit, LiveLimitStore
from sweeper.redrive.limits import LimitLook
from sweeper.redrive.run import RedriveRequest
from tests.conftest import Pipeline, load_event
from tests.integration.test_redrive import dead_letters, redrive, work_queue_bodies


def with_app_limit(p: Pipeline) -> Policy:
    data = p.policy.model_dump(exclude={"quota", "scope"})
    data["limits"] = [
        LimitConfig(name="store", key="exports", rate=Quota(limit=50, period_seconds=1)),
        LimitConfig(name="app", key="app", rate=Quota(limit=100, period_seconds=1)),
    ]
    return Policy.model_validate(data)


def test_letters_under_a_closed_further_limit_stay_and_move_once_it_reopened(
    pipeline: Pipeline,
) -> None:
    # Given three dead letters whose jobs are under the app's limit, closed by a 429 for a minute
    dead_letters(pipeline, 3)
    limits = LimitLook(with_app_limit(pipeline))
    limiter = DynamoLimiter(pipeline.aws.dynamodb(), pipeline.resources.limiter_table)
    limiter.close("app:app", time.time() + 60, "throttled")
    # When a run looks now, then another after the reopening
    closed = redrive(pipeline, limits=limits)
    later = datetime.now(UTC) + timedelta(seconds=61)
    reopened = redrive(pipeline, limits=limits, clock=lambda: later)
    # Then the first kept every letter, naming the closed key, and the second moved them all
    assert (closed.kept_closed, closed.moved, closed.left) == (3, 0, 3)
    assert closed.closed_scopes == ["app:app"]
    assert (reopened.kept_closed, reopened.moved, reopened.left) == (0, 3, 0)
    assert len(work_queue_bodies(pipeline)) == 3


def test_the_scheduled_run_keeps_letters_while_their_limit_is_paused_live_then_moves_them(
    pipeline: Pipeline,
) -> None:
    # Given two dead letters and the policy's limit paused live by an operator
    dead_letters(pipeline, 2)
    live = LiveLimitStore(pipeline.aws.dynamodb(), pipeline.resources.limiter_table)
    live.put(
        LiveLimit("exports", SHORTHAND_LIMIT_NAME, "ops", "incident", time.time(), paused=True)
    )
    event = load_event("scheduler_event.json")
    # When the scheduled redrive runs, then runs again after the operator's reset
    paused = redrive_app.handler(event, pipeline.lambda_context("redrive"))
    live.put(LiveLimit("exports", SHORTHAND_LIMIT_NAME, "ops", "over", time.time()))  # reset
    resumed = redrive_app.handler(event, pipeline.lambda_context("redrive"))
    # Then the first kept both, saying which limit is paused; the second moved both
    assert (paused["kept_closed"], paused["moved"], paused["left"]) == (2, 0, 2)
    assert paused["paused_limits"] == [SHORTHAND_LIMIT_NAME]
    assert (resumed["kept_closed"], resumed["moved"], resumed["left"]) == (0, 2, 0)


def test_a_paused_limit_keeps_letters_on_demand_too(pipeline: Pipeline) -> None:
    # Given a dead letter and its limit paused live
    dead_letters(pipeline, 1)
    live = LiveLimitStore(pipeline.aws.dynamodb(), pipeline.resources.limiter_table)
    live.put(
        LiveLimit("exports", SHORTHAND_LIMIT_NAME, "ops", "incident", time.time(), paused=True)
    )
    # When an operator redrives it
    report = redrive(pipeline, RedriveRequest(), limits=LimitLook(pipeline.policy, live))
    # Then it stays
    assert (report.kept_closed, report.moved, report.left) == (1, 0, 1)
