"""Hints as they cross a wire: a webhook body, an intake queue message, an EventBridge event.

A hint names one obligation (tenant, object, optional due time, optional params). It may only
insert the job idempotently, move its due time earlier, or give a job not yet claimed newer
params (ledger.schedule_sql.UPSERT_STAGED_JOBS). Params are checked against the policy's rules
(`sweeper.params`) here, on the webhook and again on the intake queue. Nothing here
trusts its input: every shape is validated whole by pydantic, and a refusal names positions and
error codes, never a value (ids may be customer data).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from sweeper.errors import HintRejectedError
from sweeper.models import NewJob, ObligationId
from sweeper.params import ParamsError, ParamsRules
from sweeper.scheduling import JobInput

#: The `kind` of every message sweeper itself puts on an intake queue.
HINT_MESSAGE_KIND: Final = "sweeper.hints"
#: One message carries at most this many hints ...
MAX_HINTS_PER_MESSAGE = 500
#: ... and at most this many bytes: below SQS's 256 KiB for one message, so that a body cut
#: here always fits, and a SendMessageBatch call (256 KiB in all) takes one at least.
MESSAGE_TARGET_BYTES = 200_000
#: SQS's ceiling on one message and on one SendMessageBatch call, in bytes.
SQS_MAX_MESSAGE_BYTES = 262_144

HintSource = Literal["webhook", "file", "event"]


class QueuedHint(BaseModel):
    """One hint on the intake queue: its due time is already fixed (UTC, set on receipt)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant_id: ObligationId
    object_id: ObligationId
    due_at: AwareDatetime
    #: Left out when the hint has none (a body as before params existed).
    params: dict[str, Any] | None = None


class HintMessage(BaseModel):
    """The body of a message sweeper puts on a policy's intake queue."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["sweeper.hints"] = HINT_MESSAGE_KIND
    v: Literal[1] = 1
    policy: str
    source: HintSource
    #: Correlates the message with the webhook request or CLI run that sent it (logs only).
    request_id: str = Field(min_length=1, max_length=64)
    hints: list[QueuedHint] = Field(min_length=1, max_length=MAX_HINTS_PER_MESSAGE)

    def jobs(self, rules: ParamsRules) -> list[NewJob]:
        """The hints as jobs, their params checked again (the policy may have changed since)."""
        jobs = []
        for index, h in enumerate(self.hints):
            jobs.append(
                NewJob(h.tenant_id, h.object_id, h.due_at.astimezone(UTC), _params(index, h, rules))
            )
        return jobs


def _params(index: int, item: QueuedHint | JobInput, rules: ParamsRules) -> dict[str, Any]:
    try:
        return rules.check(item.params)
    except ParamsError as exc:
        raise HintRejectedError("invalid_hints", (f"[{index}].params: {exc.rule}",)) from exc


class _DetailHints(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hints: list[JobInput] = Field(min_length=1, max_length=MAX_HINTS_PER_MESSAGE)


_MANY: TypeAdapter[list[JobInput]] = TypeAdapter(list[JobInput])

#: What reading a body as JSON can raise besides a verdict on its shape: ValueError covers bad
#: UTF-8, bad JSON and an integer of more digits than Python converts (sys.int_info's limit);
#: RecursionError a nesting too deep. Each refuses the body; none may escape as a crash.
_UNREADABLE: Final = (ValueError, RecursionError)


def problems_of(exc: ValidationError) -> tuple[str, ...]:
    """Where each problem is and its error code (`[2].due_at: timezone_aware`); no values."""
    found = set()
    for error in exc.errors():
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
        found.add(f"{where.lstrip('.') or '(body)'}: {error['type']}")
    return tuple(sorted(found))


def to_jobs(
    items: Sequence[JobInput], default_due: datetime, rules: ParamsRules | None = None
) -> list[NewJob]:
    """Validated inputs as jobs; a hint without a due time is due at `default_due`; params
    checked against `rules` (None: size and shape only)."""
    rules = rules if rules is not None else ParamsRules()
    jobs = []
    for index, item in enumerate(items):
        try:
            due = (item.due_at or default_due).astimezone(UTC)
        except OverflowError as exc:
            raise HintRejectedError("invalid_hints", (f"[{index}].due_at: out_of_range",)) from exc
        jobs.append(NewJob(item.tenant_id, item.object_id, due, _params(index, item, rules)))
    return jobs


def parse_webhook_body(
    body: bytes, received_at: datetime, max_hints: int, rules: ParamsRules | None = None
) -> list[NewJob]:
    """A webhook body: one hint object or a list of them, JSON, UTF-8.

    Raises HintRejectedError: reason `too_many_hints` (answered 413) or `invalid_body` /
    `invalid_hints` (400).
    """
    try:
        raw: Any = json.loads(body.decode("utf-8"))
    except _UNREADABLE as exc:
        raise HintRejectedError("invalid_body", ("(body): not UTF-8 JSON",)) from exc
    if isinstance(raw, list):
        if not raw:
            raise HintRejectedError("invalid_body", ("(body): an empty list",))
        if len(raw) > max_hints:
            raise HintRejectedError("too_many_hints", (f"(body): more than {max_hints} hints",))
    try:
        items = (
            _MANY.validate_python(raw) if isinstance(raw, list) else [JobInput.model_validate(raw)]
        )
    except ValidationError as exc:
        raise HintRejectedError("invalid_hints", problems_of(exc)) from exc
    return to_jobs(items, received_at, rules)


def parse_queue_body(
    body: str, policy: str, rules: ParamsRules | None = None
) -> tuple[HintSource, list[NewJob]]:
    """An intake queue message: sweeper's own HintMessage, or an EventBridge event.

    An event's `detail` is one hint or `{"hints": [...]}`; a hint without a due time is due at
    the event's time. Raises HintRejectedError (never retried: the same body fails the same way).
    """
    rules = rules if rules is not None else ParamsRules()
    try:
        raw: Any = json.loads(body)
    except _UNREADABLE as exc:
        raise HintRejectedError("not_json") from exc
    if not isinstance(raw, dict):
        raise HintRejectedError("not_an_object")
    if raw.get("kind") == HINT_MESSAGE_KIND:
        try:
            message = HintMessage.model_validate(raw)
        except ValidationError as exc:
            raise HintRejectedError("invalid_message", problems_of(exc)) from exc
        if message.policy != policy:
            raise HintRejectedError("wrong_policy")
        try:
            return message.source, message.jobs(rules)
        except OverflowError as exc:  # a due time at the calendar's edge, not one in UTC
            raise HintRejectedError("invalid_message", ("hints: due_at out_of_range",)) from exc
    if "detail-type" in raw:
        try:
            event = EventBridgeModel.model_validate(raw)
            detail: Any = event.detail
            if isinstance(detail, dict) and "hints" in detail:
                items = _DetailHints.model_validate(detail).hints
            else:
                items = [JobInput.model_validate(detail)]
        except ValidationError as exc:
            raise HintRejectedError("invalid_event", problems_of(exc)) from exc
        return "event", to_jobs(items, event.time, rules)
    raise HintRejectedError("unknown_kind")


def hint_messages(
    policy: str, source: HintSource, request_id: str, jobs: Sequence[NewJob]
) -> list[str]:
    """Bodies for the intake queue, compact JSON, each within MESSAGE_TARGET_BYTES and
    MAX_HINTS_PER_MESSAGE: ids may hold multi-byte or escaped characters, so chunks are cut by
    size, not by count alone."""
    envelope = len(
        HintMessage.model_construct(
            policy=policy, source=source, request_id=request_id, hints=[]
        ).model_dump_json()
    )
    bodies: list[str] = []
    chunk: list[QueuedHint] = []
    size = envelope
    for job in jobs:
        hint = QueuedHint(
            tenant_id=job.tenant_id,
            object_id=job.object_id,
            due_at=job.due_at,
            params=dict(job.params) or None,
        )
        hint_bytes = len(hint.model_dump_json(exclude_none=True).encode()) + 1  # and its comma
        if chunk and (
            size + hint_bytes > MESSAGE_TARGET_BYTES or len(chunk) == MAX_HINTS_PER_MESSAGE
        ):
            bodies.append(_body(policy, source, request_id, chunk))
            chunk, size = [], envelope
        chunk.append(hint)
        size += hint_bytes
    if chunk:
        bodies.append(_body(policy, source, request_id, chunk))
    return bodies


def _body(policy: str, source: HintSource, request_id: str, hints: list[QueuedHint]) -> str:
    body = HintMessage(policy=policy, source=source, request_id=request_id, hints=hints)
    return body.model_dump_json(exclude_none=True)
