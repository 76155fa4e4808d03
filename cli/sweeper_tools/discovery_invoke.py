"""Running one discovery pass now: in this process against a ledger URL, or by invoking the
deployed discovery function (`sweeper discover`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sweeper.producer.release import invoke_scheduled_function


def invoke_discovery(
    client: Any, function_name: str, policy: str, at: datetime, *, region: str
) -> dict[str, Any]:
    """Invoke the deployed discovery function synchronously; its report, or OperatorError.

    The event is the scheduler's shape at `at` (the run's identity), as a release marks it.
    """
    return invoke_scheduled_function(
        client,
        function_name,
        policy,
        at,
        region=region,
        what="the discovery function",
        after="its last run is in `sweeper status`, its error in its logs",
    )
