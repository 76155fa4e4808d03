"""Adding obligations: the shape a user writes one in, each job's limiter scope, the upsert.

Reading an obligations file (CSV or JSON lines) is the CLI's (`sweeper_tools.obligation_file`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, field_validator

from sweeper.config import Policy
from sweeper.ledger.scheduling import WithinSchedule
from sweeper.ledger.store import Ledger, ScheduleResult
from sweeper.models import NewJob, ObligationId


class JobInput(BaseModel):
    """One obligation as a user writes it; due_at defaults to now and must carry a time zone.

    Ids are taken exactly as written (ObligationId refuses, never trims, whitespace at an edge).
    """

    model_config = ConfigDict(extra="forbid")

    tenant_id: ObligationId
    object_id: ObligationId
    due_at: AwareDatetime | None = None
    #: A JSON object; checked by its door against the policy (`sweeper.params.ParamsRules`).
    params: Any = None

    @field_validator("due_at", mode="before")
    @classmethod
    def _strip_due_at(cls, value: object) -> object:
        # A time padded with spaces (`t1, o1, 2026-...` in a CSV) still means that time.
        return value.strip() if isinstance(value, str) else value


def scope_for(policy: Policy, job: NewJob) -> str:
    """The limiter scope of a job, from the policy's scope template."""
    return policy.scope.key_template.format(
        policy=policy.name,
        tenant_id=job.tenant_id,
        object_id=job.object_id,
        host=policy.action.scope_host,
    )


def schedule_jobs(
    ledger: Ledger,
    policy: Policy,
    jobs: Iterable[NewJob],
    now: datetime,
    within: WithinSchedule | None = None,
) -> ScheduleResult:
    """Idempotent upsert on the operation key: a repeat never duplicates, only moves due earlier;
    `within` runs in the same transaction (discovery's page commit)."""
    return ledger.schedule(
        policy.name,
        policy.version,
        lambda job: scope_for(policy, job),
        jobs,
        now,
        within=within,
        identity_params=policy.identity_params,
    )
