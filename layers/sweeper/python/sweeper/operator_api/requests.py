"""What the operator API accepts: one small model per console command, on `command`.

A request names a command and its arguments and nothing else: an unknown command, an unknown
field, a wrong type or a value out of range is refused before anything runs (and counted by the
handler). Who asks is never a field: the actor is the caller's IAM principal, which the function
URL's authorizer gives the handler, and the direct path's `--actor`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from sweeper.config import Quota
from sweeper.errors import ConfigError
from sweeper.models import ControlAction, ObligationId, OutcomeClass

#: Within what one operator command may ask for; the CLI's own ranges are the same.
MAX_ROWS = 10_000
MAX_JOBS = 100_000
MAX_KEYS = 1000
MAX_REASON_CHARS = 500
MAX_NAME_CHARS = 256
#: A console search is an operation key or a tenant id, so no longer than a key.
MAX_QUERY_CHARS = 1024
#: Upper bounds of the numbers without a natural one: past them a value is a mistake (or an
#: attack on the date arithmetic), refused as invalid rather than overflowing later.
MAX_STUCK_AFTER_SECONDS = 366 * 86_400
MAX_PRUNE_AGE_DAYS = 3660
MAX_REDRIVE_MESSAGES = 1_000_000

Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]
Reason = Annotated[str, Field(min_length=1, max_length=MAX_REASON_CHARS)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _PolicyRequest(_Request):
    """A command that may name its policy (`--policy`)."""

    policy: Name | None = None


class StatusRequest(_PolicyRequest):
    command: Literal["status"] = "status"


class RunsRequest(_PolicyRequest):
    command: Literal["runs"] = "runs"
    since: AwareDatetime
    limit: int = Field(default=500, ge=1, le=MAX_ROWS)


class InspectRequest(_PolicyRequest):
    command: Literal["inspect"] = "inspect"
    stuck_after_seconds: float = Field(
        default=3600.0,
        ge=0,
        le=MAX_STUCK_AFTER_SECONDS,
        description="a pending job overdue this long counts as stuck; at most a year (366 days)",
    )
    limit: int = Field(default=100, ge=1, le=MAX_ROWS)


class OverviewRequest(_Request):
    """The console page's summary of one policy (`ConsoleBackend.overview`)."""

    command: Literal["overview"] = "overview"
    policy: Name


class ActivityRequest(_Request):
    """Claims and completions per time bucket over the last hours, for the page's chart."""

    command: Literal["activity"] = "activity"
    policy: Name


class SearchRequest(_Request):
    """The job with this operation key, or this tenant's jobs."""

    command: Literal["search"] = "search"
    policy: Name
    query: Annotated[str, Field(max_length=MAX_QUERY_CHARS)]
    #: The page shows `sweeper.operations.page.SEARCH_LIMIT` hits; a retry's preview counts more.
    limit: int = Field(default=100, ge=1, le=MAX_ROWS)


class JobRequest(_Request):
    """One job's history: its row and its operator events."""

    command: Literal["job"] = "job"
    key: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]


class RetryRequest(_PolicyRequest):
    command: Literal["retry"] = "retry"
    keys: tuple[ObligationId, ...] | None = Field(default=None, min_length=1, max_length=MAX_KEYS)
    outcomes: tuple[OutcomeClass, ...] | None = Field(default=None, min_length=1)
    tenant_id: Name | None = None
    limit: int = Field(default=1000, ge=1, le=MAX_JOBS)
    reason: Reason | None = None


class RedriveCommand(_PolicyRequest):
    command: Literal["redrive"] = "redrive"
    tenant_id: Name | None = None
    scope: Name | None = None
    outcomes: tuple[OutcomeClass, ...] | None = Field(default=None, min_length=1)
    max_messages: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REDRIVE_MESSAGES,
        description="move at most this many dead letters (at most a million); None: all",
    )
    rate_per_second: float | None = Field(default=None, gt=0, le=1000)
    dry_run: bool = False
    include_terminal: bool = False
    budget_seconds: float = Field(default=600.0, ge=10, le=3600)


class PauseRequest(_PolicyRequest):
    command: Literal["pause"] = "pause"
    reason: Reason | None = None


class ResumeRequest(_PolicyRequest):
    command: Literal["resume"] = "resume"
    reason: Reason | None = None


class ReleaseRequest(_PolicyRequest):
    command: Literal["release"] = "release"


class CatchUpRequest(_PolicyRequest):
    command: Literal["catch-up"] = "catch-up"
    since: AwareDatetime
    until: AwareDatetime | None = None
    dry_run: bool = False


class PruneRequest(_PolicyRequest):
    command: Literal["prune"] = "prune"
    older_than_days: float = Field(
        ge=1, le=MAX_PRUNE_AGE_DAYS, description="age in days, from 1 to 3660 (ten years)"
    )
    batch_rows: int = Field(default=1000, ge=1, le=50_000)
    #: Recorded with the prune's action before anything is deleted; required.
    reason: Reason


class ControlRequest(_PolicyRequest):
    """cancel, hold, unhold, postpone: by key or by filter, as `sweeper cancel` takes them."""

    command: Literal["cancel", "hold", "unhold", "postpone"]
    keys: tuple[ObligationId, ...] | None = Field(default=None, min_length=1, max_length=MAX_KEYS)
    tenant_id: Name | None = None
    statuses: tuple[Literal["pending", "leased", "held", "failed"], ...] | None = Field(
        default=None, min_length=1
    )
    outcomes: tuple[OutcomeClass, ...] | None = Field(default=None, min_length=1)
    due_from: AwareDatetime | None = None
    due_before: AwareDatetime | None = None
    until: AwareDatetime | None = None
    limit: int = Field(default=1000, ge=1, le=MAX_JOBS)
    dry_run: bool = False
    reason: Reason | None = None
    #: The operator confirmed a move of more jobs than the threshold (`--yes`, or the prompt).
    confirmed: bool = False

    @property
    def action(self) -> ControlAction:
        return ControlAction(self.command)


class LimitsShowRequest(_PolicyRequest):
    command: Literal["limits-show"] = "limits-show"


class LimitsSetRequest(_PolicyRequest):
    """One limit's live change: exactly one of a rate (`N/T`, e.g. `5/1s`), a pause, a resume
    or a reset to the told rate (sweeper.operator_api.limits)."""

    command: Literal["limits-set"] = "limits-set"
    limit: Name
    live_rate: Annotated[str, Field(min_length=3, max_length=40)] | None = None
    pause: bool = False
    resume: bool = False
    reset: bool = False
    #: The operator said a rate above the told quota is meant (`--above-told`).
    above_told: bool = False
    reason: Reason

    @field_validator("live_rate")
    @classmethod
    def _reads_as_a_rate(cls, text: str | None) -> str | None:
        """A rate that does not read as N/T is refused with the request, before any ledger or
        AWS call (whether it fits the limit is the command's to say: it needs the policy)."""
        if text is not None:
            try:
                Quota.parse(text)
            except ConfigError as exc:
                raise ValueError(str(exc)) from exc
        return text


OperatorRequest = Annotated[
    StatusRequest
    | RunsRequest
    | InspectRequest
    | OverviewRequest
    | ActivityRequest
    | SearchRequest
    | JobRequest
    | RetryRequest
    | RedriveCommand
    | PauseRequest
    | ResumeRequest
    | ReleaseRequest
    | CatchUpRequest
    | PruneRequest
    | ControlRequest
    | LimitsShowRequest
    | LimitsSetRequest,
    Field(discriminator="command"),
]

REQUEST_ADAPTER: TypeAdapter[OperatorRequest] = TypeAdapter(OperatorRequest)

#: The commands that only read: all a read-only principal may run.
READ_COMMANDS = frozenset(
    {"status", "runs", "inspect", "overview", "activity", "search", "job", "limits-show"}
)
