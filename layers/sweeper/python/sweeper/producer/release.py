"""`sweeper release` and the next run in `status`: run the producer now, say when it runs next.

A release is the producer's own run (`run_producer`) at the current time, so everything a
scheduled run guarantees holds: claims are short transactions, a paused policy releases nothing,
and the run is recorded. Its batch id starts with `release-`, so that it is never taken for a
scheduled time (a rate() schedule's series is anchored at the last *scheduled* run). Its time
keeps its microseconds, so it can never take the (policy, scheduled time) slot of a real run.

Locally the command runs the producer in its own process against the local stack's ledger and
queue, as `catch-up` does; on AWS it invokes the deployed producer function (Lambda Invoke), so
the run happens where it always does, with the function's role, logs and metrics.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.config import Policy
from sweeper.errors import ConfigError, OperatorError
from sweeper.ledger.store import Ledger
from sweeper.producer.run import ProducerReport, run_producer
from sweeper.schedule_expression import RateSchedule, parse_schedule
from sweeper.sqs_queue import Publisher

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

#: The batch ids of runs an operator released by hand (see the module docstring).
RELEASE_BATCH_PREFIX = "release-"
#: How far ahead `next_run` looks for a cron schedule's next time, a day at a time.
NEXT_RUN_HORIZON_DAYS = 5 * 366

Clock = Callable[[], datetime]


def release_batch_id() -> str:
    return f"{RELEASE_BATCH_PREFIX}{uuid.uuid4()}"


def release_now(
    policy: Policy,
    ledger: Ledger,
    publisher: Publisher,
    *,
    clock: Clock,
) -> ProducerReport:
    """Run the producer once, now, within the policy's producer budget."""
    if ledger.is_paused(policy.name):
        raise OperatorError(f"policy {policy.name} is paused: `sweeper resume` it first")
    end = clock() + timedelta(seconds=policy.producer_budget_seconds)
    return run_producer(
        policy,
        clock(),
        ledger,
        publisher,
        clock=clock,
        remaining_seconds=lambda: (end - clock()).total_seconds(),
        batch_id=release_batch_id(),
        connect_always=True,  # an operator's release reads the ledger, whatever the wake item
    )


def release_event(policy: str, at: datetime, *, region: str) -> dict[str, Any]:
    """The producer's event for a release: the scheduler's shape, marked as a release."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "sweeper.release",
        "account": "",
        "time": at.astimezone(UTC).isoformat(),
        "region": region,
        "resources": [],
        "detail": {"policy": policy, "attempt": "1", "release": True},
    }


def invoke_producer(
    client: LambdaClient, function_name: str, policy: str, at: datetime, *, region: str
) -> dict[str, Any]:
    """Invoke the deployed producer synchronously; its report, or OperatorError."""
    return invoke_scheduled_function(
        client, function_name, policy, at, region=region, what="the producer", after="see its logs"
    )


def invoke_scheduled_function(
    client: Any,
    function_name: str,
    policy: str,
    at: datetime,
    *,
    region: str,
    what: str,
    after: str,
) -> dict[str, Any]:
    """Invoke a deployed scheduled function (producer, discovery) synchronously with the
    scheduler's event at `at`; its report, or OperatorError naming `what` and, on a function
    error, what to look at (`after`)."""
    payload = json.dumps(release_event(policy, at, region=region)).encode()
    try:
        response = client.invoke(
            FunctionName=function_name, InvocationType="RequestResponse", Payload=payload
        )
        body = response["Payload"].read()
    except (ClientError, BotoCoreError) as exc:
        raise OperatorError(
            f"cannot invoke {what} {function_name}: {type(exc).__name__} "
            "(check --stack, --region, --profile and lambda:InvokeFunction)"
        ) from exc
    try:
        report: Any = json.loads(body) if body else None
    except ValueError:
        report = None
    if response.get("FunctionError"):
        kind = report.get("errorType") if isinstance(report, dict) else None
        raise OperatorError(f"{what} {function_name} failed ({kind or 'unknown error'}); {after}")
    if not isinstance(report, dict):
        raise OperatorError(f"{what} {function_name} returned no report")
    return report


def next_run(
    policy: Policy,
    now: datetime,
    *,
    last_scheduled: datetime | None,
    every: timedelta | None = None,
    anchor: datetime | None = None,
) -> datetime | None:
    """When the policy's producer runs next, strictly after `now`; None when it cannot be known.

    `every` overrides the schedule (the local stack's --tick-seconds), counted from `anchor`.
    A rate() schedule fires every N units from when it was created: the series is anchored at
    the last scheduled run (else `anchor`); with neither, the next time is unknown.
    """
    if every is None:
        try:
            schedule = parse_schedule(policy.schedule, policy.timezone)
        except ConfigError:
            return None  # a one-time at(...) schedule has no next run to show
        if not isinstance(schedule, RateSchedule):
            day = timedelta(days=1)
            for offset in range(NEXT_RUN_HORIZON_DAYS):
                since = now + offset * day
                for at in schedule.occurrences(since, since + day):
                    if at > now:
                        return at
            return None
        every = schedule.every
    start = last_scheduled or anchor
    if start is None:
        return None
    return start + ((now - start) // every + 1) * every
