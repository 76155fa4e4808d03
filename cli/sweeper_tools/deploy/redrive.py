"""The automatic redrive's schedule, as the CDK app writes it and the planner prices it."""

from __future__ import annotations

from sweeper.config.redrive import RedriveConfig


def redrive_schedule(redrive: RedriveConfig) -> str:
    """The schedule's EventBridge rate (infra/redrive.py)."""
    minutes = redrive.period_seconds // 60
    return f"rate({minutes} minute{'s' if minutes > 1 else ''})"
