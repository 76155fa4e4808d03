"""The policy's retention settings: sensible defaults, and refusals that name the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sweeper.config import (
    MIN_SETTLED_JOB_RETENTION_DAYS,
    RETENTION_MAX_BUDGET_SECONDS,
    Policy,
    RetentionConfig,
)


def test_a_policy_prunes_daily_by_default_keeping_jobs_a_month() -> None:
    retention = Policy(name="exports").retention
    assert retention.enabled is True
    assert retention.schedule == "rate(1 day)"
    assert (retention.settled_job_days, retention.run_days, retention.operator_action_days) == (
        30.0,
        90.0,
        365.0,
    )
    assert 0 < retention.budget_seconds <= RETENTION_MAX_BUDGET_SECONDS


@pytest.mark.parametrize(
    ("fields", "names"),
    [
        ({"settled_job_days": 60, "run_days": 30}, "run_days"),
        ({"settled_job_days": 60, "operator_action_days": 30}, "operator_action_days"),
        ({"settled_job_days": MIN_SETTLED_JOB_RETENTION_DAYS - 1}, "settled_job_days"),
        ({"schedule": "rate(0 days)"}, "schedule"),
        ({"schedule": "cron(0 2 * *)"}, "schedule"),
        ({"schedule": "at(2026-11-29T02:00:00)"}, "schedule"),
        ({"budget_seconds": RETENTION_MAX_BUDGET_SECONDS + 1}, "budget_seconds"),
        ({"batch_rows": 0}, "batch_rows"),
        ({"keep_forever": True}, "keep_forever"),
    ],
)
def test_retention_refuses_what_would_lose_records_or_never_run(
    fields: dict[str, object], names: str
) -> None:
    with pytest.raises(ValidationError, match=names):
        RetentionConfig.model_validate(fields)


def test_a_failed_job_is_kept_ninety_days_and_never_less_than_a_succeeded_one() -> None:
    assert Policy(name="exports").retention.failed_retention_days == 90.0
    longer = RetentionConfig(settled_job_days=120, run_days=120, operator_action_days=365)
    assert longer.failed_retention_days == 120.0
    for days in (MIN_SETTLED_JOB_RETENTION_DAYS - 1, 3651):
        with pytest.raises(ValidationError, match="failed_job_days"):
            RetentionConfig(failed_job_days=days)


def test_a_postponement_is_bounded_at_a_year_unless_the_policy_says_otherwise() -> None:
    assert Policy(name="exports").max_postpone_days == 365.0
    assert Policy(name="exports", max_postpone_days=30).max_postpone_days == 30.0
    for days in (0, 3651):
        with pytest.raises(ValidationError, match="max_postpone_days"):
            Policy(name="exports", max_postpone_days=days)
