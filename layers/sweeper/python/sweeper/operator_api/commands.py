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

from typing import Any

from sweeper.errors import OperatorError
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


def run_command(backend: Backend, request: OperatorRequest, *, actor: str) -> dict[str, Any]:
    """Run one console command; the data its `--json` prints."""
    match request:
        case StatusRequest():
            return status(backend, request)
        case RunsRequest():
            return runs(backend, request)
        case InspectRequest():
            return inspect(backend, request)
        case OverviewRequest():
            return overview(backend, request)
        case ActivityRequest():
            return activity(backend, request)
        case SearchRequest():
            return search(backend, request)
        case JobRequest():
            return job(backend, request)
        case RetryRequest():
            return retry(backend, request, actor=actor)
        case RedriveCommand():
            return redrive(backend, request, actor=actor)
        case PauseRequest():
            return pause(backend, request, actor=actor)
        case ResumeRequest():
            return resume(backend, request, actor=actor)
        case ReleaseRequest():
            return release(backend, request, actor=actor)
        case CatchUpRequest():
            return catch_up(backend, request, actor=actor)
        case PruneRequest():
            return prune(backend, request, actor=actor)
        case ControlRequest():
            return control(backend, request, actor=actor)
        case LimitsShowRequest():
            return limits_show(backend, request)
        case LimitsSetRequest():
            return limits_set(backend, request, actor=actor)
    raise OperatorError(f"unknown command {request.command!r}")  # pragma: no cover
