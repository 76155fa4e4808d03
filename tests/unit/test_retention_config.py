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
