"""Typed shapes shared by every layer: job states, outcome classes, ledger rows, wire messages."""

from __future__ import annotations

import enum
import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Final, Literal
from urllib.parse import quote

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from sweeper.errors import IllegalTransitionError
from sweeper.vendor_reading import VendorReading

#: Longest tenant or object id accepted: the operation key must fit an idempotency record key.
MAX_ID_LENGTH = 256

#: Unicode categories no id may hold: controls (Cc, NUL included, which PostgreSQL text cannot
#: store), invisible format characters (Cf: bidi overrides, zero-width ones), lone surrogates
#: (Cs: not UTF-8) and the line and paragraph separators (Zl, Zp).
REFUSED_ID_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

#: Why an id is refused: error code -> reason. Neither ever quotes the id (it may be customer data).
ID_PROBLEMS: Final = {
    "id_missing": "missing",
    "id_too_long": f"longer than {MAX_ID_LENGTH} characters",
    "id_dot_segment": "a dot segment, . or ..",
    "id_edge_whitespace": "leading or trailing whitespace",
    "id_control_character": "a control, invisible or line-separator character",
}


def id_problem(value: str) -> str | None:
    """The code (a key of ID_PROBLEMS) of why `value` cannot be a tenant or object id, or None.

    The one rule every door applies: an id is taken exactly as given, never trimmed, and is
    never `.` or `..`, which URL clients and servers read as "this" or "the parent" path segment.
    """
    if not value:
        return "id_missing"
    if len(value) > MAX_ID_LENGTH:
        return "id_too_long"
    if _UNRESERVED.fullmatch(value):  # the common id: no whitespace, no control character
        return "id_dot_segment" if value in (".", "..") else None
    if value != value.strip():
        return "id_edge_whitespace"
    if any(unicodedata.category(char) in REFUSED_ID_CATEGORIES for char in value):
        return "id_control_character"
    return None


def _checked_id(value: str) -> str:
    code = id_problem(value)
    if code is not None:
        raise PydanticCustomError(code, ID_PROBLEMS[code])
    return value


#: A tenant or object id as every door takes it (see `id_problem`).
ObligationId = Annotated[
    str, Field(min_length=1, max_length=MAX_ID_LENGTH), AfterValidator(_checked_id)
]


class JobStatus(enum.StrEnum):
    """Where a cleanup obligation stands in the ledger."""

    PENDING = "pending"
    LEASED = "leased"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    #: An operator's hold: ineligible whatever its due time until an operator releases it.
    HELD = "held"
    #: Terminal, by an operator's decision: never called again, never revived by a door.
    CANCELLED = "cancelled"


#: Every allowed move, and nothing else (docs/architecture.md draws it). Each guarded UPDATE in
#: the ledger takes its source states from this table through `check_transition`, so SQL and
#: code cannot disagree about which moves exist.
TRANSITIONS: frozenset[tuple[JobStatus, JobStatus]] = frozenset(
    {
        (JobStatus.PENDING, JobStatus.LEASED),  # claimed by a producer run
        (JobStatus.LEASED, JobStatus.PENDING),  # publish failed, lease expired, or retry later
        (JobStatus.LEASED, JobStatus.SUCCEEDED),  # the action settled the job
        (JobStatus.LEASED, JobStatus.FAILED),  # terminal: permanent outcome or attempts exhausted
        # A consumer that finishes after its lease expired still records the real effect.
        (JobStatus.PENDING, JobStatus.SUCCEEDED),
        (JobStatus.PENDING, JobStatus.FAILED),
        (JobStatus.FAILED, JobStatus.PENDING),  # operator retry with a fresh attempt budget
        # Operator job control (migration 0008). A hold takes a job out of every claim (and a
        # leased job's message is acknowledged uncalled) until an unhold; no door lifts it.
        (JobStatus.PENDING, JobStatus.HELD),
        (JobStatus.LEASED, JobStatus.HELD),
        (JobStatus.HELD, JobStatus.PENDING),  # unhold
        # A call already under way when the hold came still records its real effect.
        (JobStatus.HELD, JobStatus.SUCCEEDED),
        (JobStatus.HELD, JobStatus.FAILED),
        # Cancel: terminal, nothing leaves it (a failed job's cancel stops any retry or redrive).
        (JobStatus.PENDING, JobStatus.CANCELLED),
        (JobStatus.LEASED, JobStatus.CANCELLED),
        (JobStatus.HELD, JobStatus.CANCELLED),
        (JobStatus.FAILED, JobStatus.CANCELLED),
    }
)

SETTLED_STATUSES: frozenset[JobStatus] = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED})

#: The only states in which a delivered message may lead to a call: a delivery for a job in any
#: other state (settled, held, cancelled) is acknowledged without one.
#: A job in one of them is called only once its time has come as well (LedgerTarget.callable_at).
CALLABLE_STATUSES: frozenset[JobStatus] = frozenset({JobStatus.PENDING, JobStatus.LEASED})

#: The states `postpone` moves the due time of, staying in them (a leased job's message is
#: already out: hold it first).
POSTPONABLE_STATUSES: tuple[JobStatus, ...] = (JobStatus.HELD, JobStatus.PENDING)


def sources_of(target: JobStatus) -> tuple[JobStatus, ...]:
    """The states a job may move to `target` from, in a stable order (for SQL parameters)."""
    return tuple(sorted((s for s, t in TRANSITIONS if t is target), key=lambda s: s.value))


def check_transition(source: JobStatus, target: JobStatus) -> None:
    """Raise IllegalTransitionError unless the state machine connects source to target."""
    if (source, target) not in TRANSITIONS:
        raise IllegalTransitionError(source.value, target.value)


class OutcomeClass(enum.StrEnum):
    """What an attempt at the external action came to; each class has its own path."""

    ACCEPTED = "accepted"
    ABSENT = "absent"  # already gone: success for a deletion
    THROTTLED = "throttled"
    TRANSIENT = "transient"
    UNKNOWN = "unknown"  # may have happened remotely: retry with the same key
    PERMANENT = "permanent"
    AUTH = "auth"
    SNOOZE = "snooze"

    @property
    def settled(self) -> bool:
        """True when no later attempt can change the job's fate."""
        return self in (OutcomeClass.ACCEPTED, OutcomeClass.ABSENT, OutcomeClass.PERMANENT)

    @property
    def succeeded(self) -> bool:
        return self in (OutcomeClass.ACCEPTED, OutcomeClass.ABSENT)


def operation_key(
    policy: str,
    tenant_id: str,
    object_id: str,
    policy_version: int,
    identity: Sequence[str] = (),
) -> str:
    """The stable, deterministic key of one obligation: `{policy}:{tenant}:{object}:v{version}`.

    `identity` holds the values of the policy's identity params, in the policy's order
    (`payments:acct_1:pay_9:2026-11-30:v1`); without any the key is exactly as it always was.
    Ids and values are percent-encoded so that a ':' inside one can never make two obligations
    share a key; plain ones read as they are.
    """
    parts = [_encoded(tenant_id), _encoded(object_id), *(_encoded(v) for v in identity)]
    return f"{policy}:{':'.join(parts)}:v{policy_version}"


def identity_value(value: object) -> str | None:
    """An identity param's value as it joins the operation key (a string that passes the id
    rule, or an integer), or None when it cannot."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and id_problem(value) is None:
        return value
    return None


def identity_values(params: Mapping[str, Any], names: Sequence[str]) -> tuple[str, ...]:
    """The values of the identity params `names`, in that order, as the operation key takes
    them. Raises KeyError (missing) or ValueError (not a valid value), naming the param only:
    every door checks them first (sweeper.params)."""
    values = []
    for name in names:
        if name not in params:
            raise KeyError(name)
        value = identity_value(params[name])
        if value is None:
            raise ValueError(name)
        values.append(value)
    return tuple(values)


#: Exactly the characters `quote(..., safe="")` leaves as they are.
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")


def _encoded(value: str) -> str:
    """`quote(value, safe="")`, without its cost for the common id that needs no escaping
    (discovery computes a key per source row)."""
    return value if _UNRESERVED.fullmatch(value) else quote(value, safe="")


@dataclass(frozen=True, slots=True)
class NewJob:
    """An obligation to add to the ledger (input of `schedule`)."""

    tenant_id: str
    object_id: str
    due_at: datetime
    #: The obligation's params (a JSON object, checked by its door: sweeper.params).
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Job:
    """One ledger row."""

    id: int
    policy: str
    policy_version: int
    tenant_id: str
    object_id: str
    scope: str
    operation_key: str
    status: JobStatus
    due_at: datetime
    next_attempt_at: datetime
    attempt_count: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    last_outcome: OutcomeClass | None
    last_error_code: str | None
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None
    retry_round: int = 0
    #: The batch that first published it in this retry round (migration 0005); kept when settled.
    batch_id: str | None = None
    #: Operator job control (migration 0008): the hold, the cancel and the latest postponement.
    held_at: datetime | None = None
    hold_reason: str | None = None
    cancelled_at: datetime | None = None
    cancel_reason: str | None = None
    #: A door (schedule, discovery, hint) never moves a postponed job's due time earlier.
    postponed_until: datetime | None = None
    #: The X-Ray trace of the delivery that last recorded an outcome (migration 0009).
    last_trace_id: str | None = None
    #: The obligation's params (migration 0010): what reaches the action, from this row.
    params: Mapping[str, Any] = field(default_factory=dict)
    #: Seconds this job has been snoozed in all, bounded by the policy (migration 0011).
    snoozed_seconds: float = 0.0


class ControlAction(enum.StrEnum):
    """An operator's job control: its name in the operator actions."""

    CANCEL = "cancel"
    HOLD = "hold"
    UNHOLD = "unhold"
    POSTPONE = "postpone"


@dataclass(frozen=True, slots=True)
class JobSelection:
    """Which jobs an operator's job control reaches: every filter set must match (None: any)."""

    keys: tuple[str, ...] | None = None
    tenant_id: str | None = None
    statuses: tuple[JobStatus, ...] | None = None
    outcomes: tuple[OutcomeClass, ...] | None = None
    #: Due range, [due_from, due_before).
    due_from: datetime | None = None
    due_before: datetime | None = None

    @property
    def empty(self) -> bool:
        """True when no filter is set (it would reach every job of the policy)."""
        return all(
            value is None
            for value in (
                self.keys,
                self.tenant_id,
                self.statuses,
                self.outcomes,
                self.due_from,
                self.due_before,
            )
        )


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """What a claim returns: the fields a message needs, and what the run record counts."""

    id: int
    policy_version: int
    tenant_id: str
    object_id: str
    scope: str
    operation_key: str
    attempt_count: int
    #: When it became eligible: the run record's oldest age at release is measured from here.
    eligible_since: datetime | None = None
    #: An earlier batch carries it (its lease expired); this batch only sends it again.
    resent: bool = False
    #: Its params: only their digest goes on the wire (`params_digest`).
    params: Mapping[str, Any] = field(default_factory=dict)


MESSAGE_SCHEMA_VERSION: Literal[1] = 1


class JobMessage(BaseModel):
    """The SQS body: ids, versions, attempt and batch id. No customer data, ever."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    v: Literal[1] = MESSAGE_SCHEMA_VERSION
    key: str = Field(min_length=1, max_length=1024, description="the operation key")
    policy: str = Field(min_length=1, max_length=64)
    policy_version: int = Field(ge=1)
    tenant_id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    object_id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    scope: str = Field(min_length=1, max_length=512)
    attempt: int = Field(ge=0, description="attempts made before this delivery")
    batch_id: str = Field(min_length=1, max_length=64)
    #: The digest of the job's params (`params_digest`), never the params (customer data):
    #: the consumer compares it with its ledger row's. Absent for a job without params.
    params_digest: str | None = Field(default=None, min_length=1, max_length=64)

    @classmethod
    def for_claim(cls, policy: str, job: ClaimedJob, batch_id: str) -> JobMessage:
        """Map a claimed ledger row to its message (explicitly: rows never leak onto the wire)."""
        return cls(
            key=job.operation_key,
            policy=policy,
            policy_version=job.policy_version,
            tenant_id=job.tenant_id,
            object_id=job.object_id,
            scope=job.scope,
            attempt=job.attempt_count,
            batch_id=batch_id,
            params_digest=params_digest(job.params),
        )

    def to_body(self) -> str:
        # A job without params has a body exactly as before params existed.
        return self.model_dump_json(exclude_none=True)

    def disagreements(self, target: LedgerTarget) -> list[str]:
        """The names of the fields in which this body and the ledger row for its key differ."""
        return [
            name
            for name, mine, ledger in (
                ("policy", self.policy, target.policy),
                ("policy_version", self.policy_version, target.policy_version),
                ("tenant_id", self.tenant_id, target.tenant_id),
                ("object_id", self.object_id, target.object_id),
                ("scope", self.scope, target.scope),
                ("params", self.params_digest, params_digest(target.params)),
            )
            if mine != ledger
        ]


@dataclass(frozen=True, slots=True)
class LedgerTarget:
    """The ledger's side of a job named by key: for a delivered message, what may be done for
    its key and nothing else (the consumer); for a dead letter, what redrive decides on."""

    operation_key: str
    status: JobStatus
    policy: str
    policy_version: int
    tenant_id: str
    object_id: str
    scope: str
    retry_round: int
    last_outcome: OutcomeClass | None
    #: The latest of the row's due_at, next_attempt_at and postponed_until
    #: (settle_sql.TARGET_COLUMNS): no call before it, whatever a message says.
    not_before: datetime
    #: The job's params as the ledger holds them: the only params an action ever sees.
    params: Mapping[str, Any] = field(default_factory=dict)
    #: Seconds the job has been snoozed in all (migration 0011).
    snoozed_seconds: float = 0.0
    #: The code of its last unsettled delivery (a wait: `wait_<reason>`); read by redrive only.
    last_error_code: str | None = None

    def callable_at(self, now: datetime) -> bool:
        """The one rule for a call: pending or leased, and its due time, next attempt and
        postponement (each when set) all at or before `now`. Held, cancelled, settled: never."""
        return self.status in CALLABLE_STATUSES and self.not_before <= now

    def early_at(self, now: datetime) -> bool:
        """Pending or leased, but not callable at `now`: its time has not come."""
        return self.status in CALLABLE_STATUSES and not self.callable_at(now)

    @property
    def idempotency_key(self) -> str:
        """The key of this round's idempotency record (see migration 0003_retry_round).

        Round 0 is the operation key itself, as records written before rounds existed are.
        """
        if self.retry_round == 0:
            return self.operation_key
        return f"{self.operation_key}#r{self.retry_round}"


class ActionCall(BaseModel):
    """What the external action is asked to do: built from the ledger row, never from a body.

    `key` is the operation key (the vendor's Idempotency-Key in every round); `idempotency_key`
    names the Powertools record that guards this round's call.
    """

    model_config = ConfigDict(frozen=True)

    key: str
    idempotency_key: str
    policy: str
    policy_version: int
    tenant_id: str
    object_id: str
    scope: str
    attempt: int
    batch_id: str
    params: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def for_delivery(cls, target: LedgerTarget, message: JobMessage) -> ActionCall:
        """The call for a message whose body agrees with its ledger row (checked by the caller)."""
        return cls(
            key=target.operation_key,
            idempotency_key=target.idempotency_key,
            policy=target.policy,
            policy_version=target.policy_version,
            tenant_id=target.tenant_id,
            object_id=target.object_id,
            scope=target.scope,
            attempt=message.attempt,
            batch_id=message.batch_id,
            params=dict(target.params),
        )


def params_json(params: Mapping[str, Any]) -> str:
    """The canonical encoding of params: compact, keys sorted, UTF-8 as it is (what the 4 KB
    bound measures, and what the digest is taken of)."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def params_digest(params: Mapping[str, Any]) -> str | None:
    """A digest of the params for the wire (SHA-256, hex, 32 characters), None when empty."""
    if not params:
        return None
    return hashlib.sha256(params_json(params).encode()).hexdigest()[:32]


class ActionResult(BaseModel):
    """What the external action reports: a class, a status and a short code, never a body."""

    model_config = ConfigDict(frozen=True)

    outcome: OutcomeClass
    status_code: int | None = None
    code: str = Field(max_length=64)
    retry_after_seconds: float | None = None
    #: A throttled answer's `action.limit_header` value, when it is one the policy maps.
    limit_value: str | None = Field(default=None, max_length=64)
    #: When the request had left (its last byte handed to the socket), on `time.monotonic()`;
    #: None when the kind cannot tell. The consumer compares it with the call's rate slot
    #: (consumer/delivery.py, late sends). Never stored with the idempotency record: a replay
    #: made no request.
    request_sent_at: float | None = Field(default=None, exclude=True)
    #: What the answer said of the vendor's limits (the policy's `learn`: sweeper.vendor_limits),
    #: checked numbers only; None when nothing was read. Never stored: a replay read nothing.
    reading: VendorReading | None = Field(default=None, exclude=True)
