"""The console commands as plain functions: one per command, each taking a `Backend` and its
request and returning the data `sweeper <command> --json` prints.

The CLI calls them directly (`--database-url`, or the local stack), and the operator API's
function calls the very same ones (`--stack`), so both paths answer alike by construction. A
command that changes something takes `actor`: the operator's login name on the direct path, the
caller's IAM principal ARN through the API; the ledger records it with the reason.

`run_command` picks the command for a request: the reading ones are `reads`, those that change
something `changes`, what they run against `backend`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sweeper.operator_api.backend import Backend
from sweeper.operator_api.changes import (
    ConfirmationNeededError,
    catch_up,
    control,
    pause,
    prune,
    redrive,
    release,
    resume,
    retry,
)
from sweeper.operator_api.limits import limits_set, limits_show
from sweeper.operator_api.reads import activity, inspect, job, overview, runs, search, status
from sweeper.operator_api.requests import (
    ActivityRequest,
    CatchUpRequest,
    ControlRequest,
    InspectRequest,
    JobRequest,
    LimitsSetRequest,
    LimitsShowRequest,
    OperatorRequest,
    OverviewRequest,
    PauseRequest,
    PruneRequest,
    RedriveCommand,
    ReleaseRequest,
    ResumeRequest,
    RetryRequest,
    RunsRequest,
    SearchRequest,
    StatusRequest,
)

#: What the CLI, the operator API and the local stack import from here besides `run_command`.
__all__ = ["Backend", "ConfirmationNeededError", "run_command"]


#: Each request's command: the reading ones take the request, the changing ones the actor too.
_READS: dict[type[Any], Callable[[Backend, Any], dict[str, Any]]] = {
    StatusRequest: status,
    RunsRequest: runs,
    InspectRequest: inspect,
    OverviewRequest: overview,
    ActivityRequest: activity,
    SearchRequest: search,
    JobRequest: job,
    LimitsShowRequest: limits_show,
}
_CHANGES: dict[type[Any], Callable[..., dict[str, Any]]] = {
    RetryRequest: retry,
    RedriveCommand: redrive,
    PauseRequest: pause,
    ResumeRequest: resume,
    ReleaseRequest: release,
    CatchUpRequest: catch_up,
    PruneRequest: prune,
    ControlRequest: control,
    LimitsSetRequest: limits_set,
}


def run_command(backend: Backend, request: OperatorRequest, *, actor: str) -> dict[str, Any]:
    """Run one console command; the data its `--json` prints."""
    if (read := _READS.get(type(request))) is not None:
        return read(backend, request)
    return _CHANGES[type(request)](backend, request, actor=actor)
