"""What every action kind provides at run time, and the plain data the planner reads from it.

An action kind is a provider, as Powertools' idempotency persistence layers are: one module per
kind under `sweeper.actions` holds its config model (a subclass of `ActionKind`, one member of
the discriminated union in `sweeper.config.action`), its implementation (an `Action`), its
outcome mapping and its defaults for `sweeper plan` (`PlanDefaults`). What only a deploy asks
of a kind (its IAM grants, network path, synth and doctor checks) is its deploy-time provider,
with the operator tools (`sweeper_tools.deploy`), not in the layer. The runtime builds
whatever kind a policy names through `ActionKind.build`; nothing outside the kind's module
branches on the kind.

This module imports nothing of `sweeper.config` (which imports the kinds): a kind's model
derives from `ActionKind`, which carries the policy models' strictness itself.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sweeper.actions.answer_match import Answer
from sweeper.actions.rehearsal import Rehearsal
from sweeper.actions.retry_after import parse_retry_after
from sweeper.actions.spans import CallSpans, no_spans
from sweeper.models import ActionCall, ActionResult, OutcomeClass
from sweeper.vendor_reading import VendorReading

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider
    from botocore.exceptions import ClientError


class Action(Protocol):
    def perform(self, job: ActionCall, timeout_seconds: float | None = None) -> ActionResult:
        """Carry out the job's effect once, sending its operation key as the idempotency key.

        `timeout_seconds` caps the whole call (connect + read); None means the action's own
        configured timeouts.
        """
        ...

    def warm(self, job: ActionCall, timeout_seconds: float | None = None) -> None:
        """Prepare what `perform(job)` will need so its request leaves without delay (the
        `http` kind: an open connection to the vendor); nothing for a kind without such a
        thing. Sends nothing, has no effect, never raises for a failure (the call that
        follows meets it and is classified); `timeout_seconds` caps the time it may take.
        """
        ...


#: The outcome classes (sweeper.models.OutcomeClass) a policy may name in a kind's mapping.
OutcomeName = Literal[
    "accepted", "absent", "throttled", "transient", "unknown", "permanent", "auth", "snooze"
]


@dataclass(frozen=True, slots=True)
class PlanDefaults:
    """What `sweeper plan` (and synth's quota check) assume for a kind when the policy does not
    say: latencies (seconds) standing in for the policy's measured ones."""

    latency_p50_seconds: float | None = None
    latency_p95_seconds: float | None = None
    #: The service's published rate (calls per `quota_period_seconds`): the policy's quota when
    #: it names none. None: the policy-wide default.
    quota_limit: int | None = None
    quota_period_seconds: float = 1.0


class AnswerReader(Protocol):
    """What reads the limits a vendor states in an answer (`sweeper.vendor_limits.Reader`)."""

    @property
    def reads_body(self) -> bool:
        """Whether it looks into the body (then the body is read for it)."""
        ...

    def read(self, answer: Answer, now_epoch: float) -> VendorReading: ...


@dataclass(frozen=True, slots=True)
class ActionContext:
    """What building an action may use besides its config: never the environment itself.

    `secrets` reads Secrets Manager through the Powertools cache; a secret is re-read at most
    every `secret_max_age_seconds` in a warm environment.
    """

    secrets: SecretsProvider
    secret_max_age_seconds: int
    #: How a kind's calls show in a trace (`sweeper.actions.spans`): none unless the functions'
    #: tracer is on.
    spans: CallSpans = no_spans
    #: Where a rehearsal sends every call (`sweeper.actions.rehearsal`): set by the local stack
    #: only, never from a policy; None in production.
    rehearsal: Rehearsal | None = None
    #: What reads the vendor's limits from each answer (its policy's `learn`,
    #: `sweeper.admission.learned.reader_for`); None: nothing is read.
    reader: AnswerReader | None = None


class ActionKind(BaseModel, ABC):
    """The config of one action kind: the members of `sweeper.config.action.ActionConfig`.

    Strict and frozen as every policy model (`sweeper.config.base._Strict`): a misspelt key
    fails validation.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Each kind narrows this to its own `Literal["name"]`: the union's discriminator.
    kind: str
    #: The kind's measured latency (seconds): `sweeper plan` and synth use it to warn when the
    #: consumers cannot reach the quota. Unset: the kind's `plan_defaults`, else not checked.
    latency_p50_seconds: float | None = Field(default=None, gt=0, le=120)
    latency_p95_seconds: float | None = Field(default=None, gt=0, le=120)

    #: What `sweeper plan` assumes for this kind when the policy does not say.
    plan_defaults: ClassVar[PlanDefaults] = PlanDefaults()

    @model_validator(mode="after")
    def _p50_not_above_p95(self) -> Self:
        p50, p95 = self.latency_p50_seconds, self.latency_p95_seconds
        if p95 is not None and (p50 is None or p50 > p95):
            raise ValueError("latency_p95_seconds needs latency_p50_seconds, at most as large")
        return self

    @abstractmethod
    def build(self, context: ActionContext) -> Action:
        """The production implementation of this config (built once per cold start)."""

    @property
    @abstractmethod
    def call_seconds(self) -> float:
        """The longest one call may take with the configured timeouts."""

    @property
    def scope_host(self) -> str:
        """The host a `{host}` scope template names: the vendor's, or "" for a kind without."""
        return ""

    @property
    def latency(self) -> tuple[float, float] | None:
        """(p50, p95) latency: the policy's measured one, else the kind's default, else None."""
        p50 = self.latency_p50_seconds or self.plan_defaults.latency_p50_seconds
        if p50 is None:
            return None
        p95 = self.latency_p95_seconds or self.plan_defaults.latency_p95_seconds or p50
        return p50, max(p50, p95)

    @property
    def credentials_per_tenant(self) -> bool:
        """True when each tenant authenticates with its own secret: an auth failure is then
        that tenant's, and the policy's scope must be keyed by the tenant to close it alone."""
        return False

    @property
    def limit_values(self) -> dict[str, str]:
        """What a throttled answer may name its limit by, mapped to the policy's limit names
        (the http kind's `limit_header_values`); none by default."""
        return {}


class AwsKind(ActionKind):
    """A kind carried out through one AWS client (the s3_delete and lambda kinds)."""

    connect_timeout_seconds: float = Field(default=2.0, gt=0, le=30)
    read_timeout_seconds: float = Field(default=10.0, gt=0, le=120)


@dataclass
class AwsAction[K: AwsKind]:
    """An action of an `AwsKind`: its client built on first use, once, under a lock (the
    batch's threads share it, and a kind that is configured but never called builds none)."""

    config: K
    #: Builds the client (boto3's, with the config's timeouts and no retries, by default).
    client_factory: Callable[[K], Any] | None = None
    #: The boto3 service the default client is of.
    service: ClassVar[str]

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._client: Any = None

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = (self.client_factory or self._boto3_client)(self.config)
            return self._client

    def warm(self, job: ActionCall, timeout_seconds: float | None = None) -> None:
        """Nothing prepared (boto3 builds its client and connection on the first request)."""

    def _boto3_client(self, config: K) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(  # type: ignore[call-overload]
            self.service,
            config=Config(
                connect_timeout=config.connect_timeout_seconds,
                read_timeout=config.read_timeout_seconds,
                # Retrying is sweeper's (the attempt budget, the limiter), never the client's.
                retries={"total_max_attempts": 1},
            ),
        )


def aws_retry_after(exc: ClientError) -> float | None:
    """The wait an AWS refusal names (its Retry-After), bounded: "inf" closes nothing."""
    headers: Mapping[str, str] = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return parse_retry_after(headers.get("retry-after"))


def aws_refusal(
    exc: ClientError,
    code: str,
    by_code: Mapping[OutcomeClass, frozenset[str]],
    server_error: OutcomeClass,
    *,
    service: str,
) -> ActionResult:
    """An AWS API's refusal (its error `code`, as the kind reads it) as an outcome: the class
    that lists the code (a throttle with the Retry-After it names), else `server_error` for
    another 5xx and permanent for another 4xx; coded `{service}_{code}`."""
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    outcome = next((o for o, codes in by_code.items() if code in codes), None)
    if outcome is None:
        five = isinstance(status, int) and status >= 500
        outcome = server_error if five else OutcomeClass.PERMANENT
    return ActionResult(
        outcome=outcome,
        status_code=status,
        code=f"{service}_{code}"[:64],
        retry_after_seconds=aws_retry_after(exc) if outcome is OutcomeClass.THROTTLED else None,
    )
