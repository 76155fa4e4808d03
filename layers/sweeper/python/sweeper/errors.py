"""One root for every error sweeper raises.

Errors carry what an operator needs (operation key, outcome class, status code), never customer
data or a raw response body. Retryable and permanent branches are classes, not flags.
"""

from __future__ import annotations

from sweeper.vendor_reading import VendorReading


class SweeperError(Exception):
    """Root of every sweeper error."""


class ConfigError(SweeperError):
    """The configuration (environment or policy file) is invalid."""


class LedgerError(SweeperError):
    """The ledger could not do what was asked."""


class LedgerUnavailableError(LedgerError):
    """The ledger could not be reached (refused, lost, or the server restarting).

    A blip, not a refusal: the same statement may succeed seconds later, so the work that met it
    goes back to its queue soon (sweeper.returns) rather than after the visibility timeout.
    """


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE of the database error behind `exc` (itself or a cause), for a log line.

    Log this, never the error itself: a psycopg error's DETAIL can quote the row's values.
    """
    seen: BaseException | None = exc
    while seen is not None:
        state = getattr(seen, "sqlstate", None)
        if isinstance(state, str):
            return state
        seen = seen.__cause__
    return None


class MigrationError(LedgerError):
    """A migration file is missing, out of order or failed to apply."""


class IllegalTransitionError(LedgerError):
    """A job was asked to move between two states the state machine does not connect."""

    def __init__(self, source: str, target: str) -> None:
        super().__init__(f"illegal job transition {source} -> {target}")
        self.source = source
        self.target = target


class PublishError(SweeperError):
    """Publishing to the work queue failed as a whole (not entry by entry)."""


class MalformedMessageError(SweeperError):
    """A queue message body does not parse as a job message."""

    def __init__(self, message_id: str, reason: str) -> None:
        super().__init__(f"malformed message {message_id}: {reason}")
        self.message_id = message_id
        self.reason = reason


class ActionError(SweeperError):
    """The external action did not settle the job; the record is retried by SQS."""

    def __init__(
        self,
        operation_key: str,
        outcome: str,
        status_code: int | None,
        code: str,
        *,
        retry_after_seconds: float | None = None,
        limit_value: str | None = None,
        reading: VendorReading | None = None,
    ) -> None:
        super().__init__(
            f"action for {operation_key} ended {outcome} (status={status_code}, code={code})"
        )
        self.limit_value = limit_value
        #: What the answer said of the vendor's limits, when they were read.
        self.reading = reading
        self.operation_key = operation_key
        self.outcome = outcome
        self.status_code = status_code
        self.code = code
        self.retry_after_seconds = retry_after_seconds


class RetryableActionError(ActionError):
    """The outcome may change on a later attempt (throttled, transient, unknown, auth)."""


class TokenError(SweeperError):
    """The vendor's API token cannot be had, or cannot be sent (`code`: a short reason).

    Never carries the token.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class InputError(SweeperError):
    """Obligations to schedule are malformed; carries the line number (None: the whole input)."""

    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason if line is None else f"line {line}: {reason}")
        self.line = line
        self.reason = reason


class LimiterError(SweeperError):
    """The shared limiter's table could not be read or written."""


class QueueError(SweeperError):
    """A queue (work queue or DLQ) could not be read or written."""


class RedriveIncompleteError(SweeperError):
    """A redrive run met dead letters it could not handle; they stay in the DLQ.

    Raised after the report is logged and the metrics written, so that the function fails and
    its error alarm fires; `report` is what the run did.
    """

    def __init__(self, errors: int, report: object) -> None:
        super().__init__(f"redrive left {errors} dead letter(s) it could not read or match")
        self.errors = errors
        self.report = report


class OperatorError(SweeperError):
    """An operator command cannot do what was asked (paused policy, unknown target, ...)."""


class DiscoveryError(SweeperError):
    """A discovery run could not finish its work (a source or the ledger failed)."""


class DiscoverySourceError(DiscoveryError):
    """The system of record could not be read: names the source kind, never its rows."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"discovery source {source}: {reason}")
        self.source = source
        self.reason = reason


class CursorMovedError(DiscoveryError):
    """Another discovery run advanced the policy's cursor since this run read it."""


class DiscoveryFailedError(DiscoveryError):
    """A run stopped on an error after recording what it did; `report` is that record.

    Raised so that the function fails and its error alarm fires.
    """

    def __init__(self, reason: str, report: object) -> None:
        super().__init__(reason)
        self.reason = reason
        self.report = report


class SignatureError(SweeperError):
    """A webhook request's signature is missing, malformed, stale or wrong (answered 401).

    `reason` is a short code (`missing_signature`, `malformed_signature`, `stale_timestamp`,
    `signature_mismatch`); it never carries the header, the body or the secret.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"webhook signature refused: {reason}")
        self.reason = reason


class HintRejectedError(SweeperError):
    """An intake message or webhook body holds no valid hints; never retried.

    `problems` name positions and fields (`[3].due_at: missing`), never a value.
    """

    def __init__(self, reason: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(f"hints rejected: {reason}" + (f" {list(problems)}" if problems else ""))
        self.reason = reason
        self.problems = problems


class ReplayStoreError(SweeperError):
    """The webhook's replay markers (DynamoDB) could not be read or written."""
