"""The events our Lambdas receive, as Powertools parser models."""

from __future__ import annotations

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Field


class ScheduleDetail(BaseModel):
    model_config = ConfigDict(extra="ignore")

    policy: str = Field(min_length=1)
    attempt: int = Field(default=1, ge=1)
    #: An operator's `sweeper release`, not the schedule: the run is recorded as a release.
    release: bool = False


class ScheduleEvent(EventBridgeModel):
    """EventBridge Scheduler's input for the producer.

    Scheduler passes its target a payload we define; the CDK app templates it as an EventBridge
    event (`time` = `<aws.scheduler.scheduled-time>`, `id` = `<aws.scheduler.execution-id>`) so
    that Powertools' EventBridgeModel validates it and the scheduled time is the run's identity.
    """

    detail: ScheduleDetail
