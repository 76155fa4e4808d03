"""The contract shared by the `lambda` and `python` kinds: the team's own code as the action.

The code receives a `Call` (the operation key, this round's idempotency key, tenant, object,
params, the attempt and the seconds left for it) and returns an `Answer`: an outcome class
(accepted, absent, throttled with an optional Retry-After, transient, unknown, permanent, auth,
snooze) and an optional short code. An exception is classified too, never raised through:
`NotSent` says the request was never sent (transient: retried, nothing happened), any other
exception is unknown (it may have happened: retried with the same operation key).

Idempotency, the limiter and the ledger stay sweeper's: the code is called at most once per
limiter slot, with the operation key to pass on to whatever it calls, and never asked to retry.
The `lambda` kind carries the same shapes as JSON (`Call.to_payload`, `Answer.from_payload`);
docs/actions.md writes the contract out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sweeper.models import ActionCall, ActionResult, OutcomeClass

#: Longest code an answer may name (it is the ledger's last_error_code).
MAX_CODE_LENGTH: Final = 64


class NotSent(Exception):
    """Raised by the team's code when its request was never sent: the call is TRANSIENT.

    `code` (short, no customer data) is recorded as the attempt's code.
    """

    def __init__(self, code: str = "not_sent") -> None:
        super().__init__(code)
        self.code = code[:MAX_CODE_LENGTH] or "not_sent"


@dataclass(frozen=True, slots=True)
class Call:
    """What the team's code is asked to do for one job."""

    operation_key: str
    idempotency_key: str
    tenant_id: str
    object_id: str
    attempt: int
    #: Seconds the call may still take; the code must answer within them.
    time_left_seconds: float
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def for_job(cls, job: ActionCall, time_left_seconds: float) -> Call:
        return cls(
            operation_key=job.key,
            idempotency_key=job.idempotency_key,
            tenant_id=job.tenant_id,
            object_id=job.object_id,
            attempt=job.attempt,
            time_left_seconds=time_left_seconds,
            params=dict(job.params),
        )

    def to_payload(self) -> dict[str, Any]:
        """The JSON event the `lambda` kind sends."""
        return {
            "operation_key": self.operation_key,
            "idempotency_key": self.idempotency_key,
            "tenant_id": self.tenant_id,
            "object_id": self.object_id,
            "params": dict(self.params),
            "attempt": self.attempt,
            "time_left_seconds": round(self.time_left_seconds, 3),
        }


class Answer(BaseModel):
    """What the team's code answers: an outcome class, an optional code, an optional wait."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: OutcomeClass
    code: str | None = Field(default=None, min_length=1, max_length=MAX_CODE_LENGTH)
    #: Only with `throttled` or `snooze`: how long the vendor asked to wait (Retry-After).
    retry_after_seconds: float | None = Field(default=None, ge=0, le=86_400)

    @classmethod
    def from_payload(cls, payload: Any) -> Answer:
        """An answer from its JSON shape; raises BadAnswerError when it is not one."""
        try:
            return cls.model_validate(payload)
        except ValidationError as exc:
            raise BadAnswerError from exc

    def result(self) -> ActionResult:
        return ActionResult(
            outcome=self.outcome,
            code=self.code or self.outcome.value,
            retry_after_seconds=self.retry_after_seconds,
        )


class BadAnswerError(Exception):
    """The code answered something that is not an `Answer` (it ran: the outcome is UNKNOWN)."""


#: The result of code that answered what the contract does not allow.
BAD_ANSWER: Final = ActionResult(outcome=OutcomeClass.UNKNOWN, code="bad_answer")


def result_of_exception(exc: BaseException) -> ActionResult:
    """The outcome of an exception from the team's code: TRANSIENT for `NotSent`, else UNKNOWN
    (named by its class only: an exception's message may hold customer data)."""
    if isinstance(exc, NotSent):
        return ActionResult(outcome=OutcomeClass.TRANSIENT, code=exc.code)
    return ActionResult(
        outcome=OutcomeClass.UNKNOWN, code=f"raised:{type(exc).__name__}"[:MAX_CODE_LENGTH]
    )


def result_of_answer(answer: Any) -> ActionResult:
    """The outcome of what the code returned: an `Answer`, or its JSON shape (a dict)."""
    if isinstance(answer, Answer):
        return answer.result()
    try:
        return Answer.from_payload(answer).result()
    except BadAnswerError:
        return BAD_ANSWER
