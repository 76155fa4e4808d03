"""Running one discovery pass now: in this process against a ledger URL, or by invoking the
deployed discovery function (`sweeper discover`)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.errors import OperatorError
from sweeper.release import release_event


def invoke_discovery(
    client: Any, function_name: str, policy: str, at: datetime, *, region: str
) -> dict[str, Any]:
    """Invoke the deployed discovery function synchronously; its report, or OperatorError.

    The event is the scheduler's shape at `at` (the run's identity), as a release marks it.
    """
    payload = json.dumps(release_event(policy, at, region=region)).encode()
    try:
        response = client.invoke(
            FunctionName=function_name, InvocationType="RequestResponse", Payload=payload
        )
        body = response["Payload"].read()
    except (ClientError, BotoCoreError) as exc:
        raise OperatorError(
            f"cannot invoke the discovery function {function_name}: {type(exc).__name__} "
            "(check --stack, --region, --profile and lambda:InvokeFunction)"
        ) from exc
    try:
        report: Any = json.loads(body) if body else None
    except ValueError:
        report = None
    if response.get("FunctionError"):
        kind = report.get("errorType") if isinstance(report, dict) else None
        raise OperatorError(
            f"the discovery function {function_name} failed ({kind or 'unknown error'}); "
            "its last run is in `sweeper status`, its error in its logs"
        )
    if not isinstance(report, dict):
        raise OperatorError(f"the discovery function {function_name} returned no report")
    return report
