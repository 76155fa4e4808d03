"""One policy (`Policy`): one kind of cleanup obligation and everything that governs how it runs.

A policy composes its sections: the limiter scope, the quota (`quota.py`), the action
(`action.py`), the consumers (`consumer.py`), retry and throttle backoff, alarms, retention of
settled rows, the smoke canary, the intake of hints and the discovery source (`discovery.py`).
The sections with no module of their own are here; so is the cap on leased rows that the quota
drains within part of a lease (`LEASE_DRAIN_FRACTION`).
"""

from __future__ import annotations

import math
import re
import zoneinfo
from typing import Annotated, Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from sweeper.config.action import KINDS, ActionConfig, HttpActionConfig
from sweeper.config.base import _Strict
from sweeper.config.consumer import ConsumerConfig
from sweeper.config.discovery import DiscoveryConfig
from sweeper.config.limit import SHORTHAND_LIMIT_NAME, LimitConfig, told_rate
from sweeper.config.quota import Quota
from sweeper.config.redrive import RedriveConfig
from sweeper.config.retired import drop_retired_keys
from sweeper.errors import ConfigError
from sweeper.limits import (
    LAMBDA_MAX_TIMEOUT_SECONDS,
    MAX_PUBLISH_CONCURRENCY,
    recommended_visibility_timeout_seconds,
)
from sweeper.schedule_expression import parse_schedule

#: A leased row's message must be consumable at the quota rate within this fraction of the lease,
#: so that leases do not expire while their messages still wait in the queue.
LEASE_DRAIN_FRACTION = 0.5
#: Settled jobs are kept at least as long as a dead letter can wait for redrive.
MIN_SETTLED_JOB_RETENTION_DAYS = 14
#: A failed job is an obligation not fulfilled: kept this long unless the policy says longer.
DEFAULT_FAILED_JOB_RETENTION_DAYS = 90.0
#: How far ahead an operator may postpone a job unless the policy says otherwise: further is a
#: cancel in disguise (issue 40).
DEFAULT_MAX_POSTPONE_DAYS = 365.0
#: The scheduled prune's budget stays well inside Lambda's 15 minutes.
RETENTION_MAX_BUDGET_SECONDS = 600.0
#: Fields a scope template may use.
SCOPE_FIELDS = frozenset({"policy", "tenant_id", "object_id", "host"})

PolicyName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,39}$")]
IdentityParamName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]


class ScopeConfig(_Strict):
    """What one limiter bucket covers, as a key template over the job's fields."""

    kind: Literal["global", "tenant", "credential", "endpoint"] = "global"
    template: str | None = Field(default=None, description="defaults by kind")

    @model_validator(mode="after")
    def _check_template(self) -> Self:
        fields = set(re.findall(r"{(\w+)}", self.key_template))
        unknown = fields - SCOPE_FIELDS
        if unknown:
            raise ValueError(f"scope template uses unknown fields {sorted(unknown)}")
        return self

    @property
    def key_template(self) -> str:
        if self.template is not None:
            return self.template
        return {
            "global": "{policy}",
            "tenant": "{policy}:{tenant_id}",
            "credential": "{policy}:credential",
            "endpoint": "{host}",
        }[self.kind]


class RetryConfig(_Strict):
    """Backoff for transient and unknown outcomes: full jitter, exponential, capped."""

    base_seconds: float = Field(default=2.0, gt=0, le=3600)
    cap_seconds: float = Field(default=300.0, gt=0, le=43_200)


class ThrottleConfig(_Strict):
    """How the gate reacts to the vendor's signals, and how long a consumer waits in place."""

    #: Closure without a Retry-After: doubles from here up to the cap.
    close_base_seconds: float = Field(default=1.0, gt=0, le=3600)
    close_cap_seconds: float = Field(default=300.0, gt=0, le=43_200)
    #: Added after the vendor's stated time (never before it), so consumers don't stampede.
    reopen_jitter_seconds: float = Field(default=0.1, ge=0, le=60)
    #: An auth failure opens the circuit for this long (a configuration incident).
    auth_cooloff_seconds: float = Field(default=300.0, gt=0, le=43_200)
    #: A consumer sleeps for a token or a reopening at most this long; longer waits return
    #: the message to the queue, visible again when the wait is over.
    max_wait_seconds: float = Field(default=2.0, ge=0, le=60)


class AlarmConfig(_Strict):
    queue_age_seconds: int = Field(default=900, gt=0)
    oldest_eligible_age_seconds: int = Field(default=1800, gt=0)
    terminal_failures: int = Field(default=1, ge=1)
    #: Share of the vendor calls in a period answered 5xx / connection refused (transient) ...
    transient_rate_percent: float = Field(default=10.0, gt=0, le=100)
    #: ... or with no answer once sent (unknown: timeout, connection lost), which alarms sooner.
    unknown_rate_percent: float = Field(default=5.0, gt=0, le=100)


class RetentionConfig(_Strict):
    """How long settled ledger rows are kept, and how the scheduled prune runs.

    The prune deletes, per policy, settled jobs (with their job events) completed more than
    `settled_job_days` ago, run records scheduled more than `run_days` ago and operator actions
    more than `operator_action_days` ago, `batch_rows` rows per short transaction, for at most
    `budget_seconds` per run. Unsettled jobs are never deleted.
    """

    enabled: bool = True
    schedule: str = Field(default="rate(1 day)", pattern=r"^(rate|cron)\(.+\)$")
    #: At least the DLQ's retention, so that a dead letter always finds its job (a unit test
    #: checks this floor against infra's DEAD_LETTER_RETENTION_DAYS).
    settled_job_days: float = Field(default=30.0, ge=MIN_SETTLED_JOB_RETENTION_DAYS, le=3650)
    run_days: float = Field(default=90.0, ge=MIN_SETTLED_JOB_RETENTION_DAYS, le=3650)
    operator_action_days: float = Field(default=365.0, ge=MIN_SETTLED_JOB_RETENTION_DAYS, le=3650)
    #: A failed job (an obligation not fulfilled) is kept this long after it failed, and never
    #: less than a succeeded one (`failed_retention_days`); `sweeper prune` keeps it too.
    failed_job_days: float = Field(
        default=DEFAULT_FAILED_JOB_RETENTION_DAYS, ge=MIN_SETTLED_JOB_RETENTION_DAYS, le=3650
    )
    batch_rows: int = Field(default=500, ge=1, le=10_000)
    budget_seconds: float = Field(default=120.0, ge=5, le=RETENTION_MAX_BUDGET_SECONDS)

    @field_validator("schedule")
    @classmethod
    def _parsable_schedule(cls, value: str) -> str:
        try:
            parse_schedule(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc
        return value

    @model_validator(mode="after")
    def _records_outlive_their_jobs(self) -> Self:
        # A batch's audit counts its jobs, and an operator action explains the jobs it moved:
        # neither may go before the jobs they describe.
        if self.run_days < self.settled_job_days:
            raise ValueError(
                f"run_days ({self.run_days:g}) must be at least settled_job_days "
                f"({self.settled_job_days:g}): a batch's record outlives its jobs"
            )
        if self.operator_action_days < self.settled_job_days:
            raise ValueError(
                f"operator_action_days ({self.operator_action_days:g}) must be at least "
                f"settled_job_days ({self.settled_job_days:g}): an action outlives its jobs"
            )
        return self

    @property
    def failed_retention_days(self) -> float:
        """How long a failed job is kept: `failed_job_days`, at least `settled_job_days`."""
        return max(self.failed_job_days, self.settled_job_days)


class SmokeConfig(_Strict):
    """The sandbox target of `sweeper smoke`: a tenant the vendor keeps for tests.

    The canary's object is always `object_prefix` plus a fresh random id under this tenant, so a
    smoke run never names an existing object; without this section `sweeper smoke` is refused.
    """

    tenant_id: str = Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9._:-]+$")
    object_prefix: str = Field(
        default="sweeper-smoke-", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:-]+$"
    )
    #: How long the canary may take from release to settlement before the smoke fails.
    timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    #: The canary's params (a policy with identity params or a schema needs them), checked
    #: against the policy's rules as every door checks params.
    params: dict[str, Any] = Field(default_factory=dict)


class IntakeConfig(_Strict):
    """How hints come in: the intake queue and function, the signed webhook, EventBridge rules.

    A hint only inserts an idempotent job or moves its due time earlier (sweeper.intake).
    """

    #: Serve `POST /v1/hints/{policy}` (a Lambda function URL on AWS, loopback locally).
    webhook: bool = True
    #: A signature's timestamp may be this far from the receiver's clock, either way.
    signature_tolerance_seconds: int = Field(default=300, ge=30, le=3600)
    #: Larger request bodies are refused with 413 before their signature is checked. The
    #: ceiling keeps one request's hints, normalised, inside one SQS message (256 KiB).
    max_body_bytes: int = Field(default=65_536, ge=1024, le=131_072)
    max_hints_per_request: int = Field(default=500, ge=1, le=1000)
    #: Above this many messages waiting on the intake queue, the webhook sheds load (429).
    max_backlog: int = Field(default=100_000, ge=1)
    #: The webhook function's reserved concurrency: a function URL answers 429 beyond it.
    webhook_reserved_concurrency: int = Field(default=5, ge=1, le=1000)
    #: The intake function: at most this many ledger writers at once.
    reserved_concurrency: int = Field(default=2, ge=1, le=100)
    batch_size: int = Field(default=10, ge=1, le=10)
    timeout_seconds: int = Field(default=30, ge=5, le=900)
    max_receive_count: int = Field(default=5, ge=1, le=1000)
    #: The intake age alarm: the oldest hint on the intake queue is older than this.
    age_alarm_seconds: int = Field(default=300, gt=0)
    #: EventBridge event patterns (on the stack's intake bus) whose events become this policy's
    #: hints; each event's `detail` is one hint, or `{"hints": [...]}`.
    event_patterns: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("event_patterns")
    @classmethod
    def _patterns_match_something(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, pattern in enumerate(value):
            if not pattern:
                raise ValueError(f"event pattern {index} is empty (it would match every event)")
        return value

    @property
    def visibility_timeout_seconds(self) -> int:
        return recommended_visibility_timeout_seconds(self.timeout_seconds, 0)


class Policy(_Strict):
    """One kind of cleanup obligation and everything that governs how it runs."""

    name: PolicyName
    version: int = Field(default=1, ge=1)
    description: str = ""
    schedule: str = Field(default="rate(5 minutes)", pattern=r"^(rate|cron|at)\(.+\)$")
    timezone: str = "UTC"
    scope: ScopeConfig = ScopeConfig()
    quota: Quota = Quota(limit=50, period_seconds=1.0)
    #: Which kind of action, and its config (`kind = "http"` when left out).
    action: ActionConfig = HttpActionConfig()
    consumer: ConsumerConfig = ConsumerConfig()
    alarms: AlarmConfig = AlarmConfig()
    retry: RetryConfig = RetryConfig()
    throttle: ThrottleConfig = ThrottleConfig()
    retention: RetentionConfig = RetentionConfig()
    smoke: SmokeConfig | None = None
    intake: IntakeConfig = IntakeConfig()
    #: What the redrive function's schedule does (sweeper.config.redrive).
    redrive: RedriveConfig = RedriveConfig()
    max_attempts: int = Field(default=8, ge=1, le=100)
    lease_seconds: int = Field(default=900, ge=10, le=86_400)
    page_size: int = Field(default=1000, ge=1, le=10_000)
    producer_budget_seconds: float = Field(default=240.0, gt=0, le=LAMBDA_MAX_TIMEOUT_SECONDS)
    #: The wake item's trust bound (sweeper.ledger.wake): a scheduled producer run with nothing
    #: due by the item still reads the ledger when its last full read is this old, so a write
    #: that did not lower the item (a bare `--database-url` command) is released within it. On
    #: a cluster that may pause, a run that connected ends with that read (discovery's
    #: included: sweeper.ledger.wake_refresh); the cluster pauses between them (docs/deploy.md).
    producer_idle_check_seconds: int = Field(default=3600, ge=60, le=86_400)
    #: SendMessageBatch calls the producer has in flight at once (threads; each call is a wait on
    #: SQS). At most botocore's default connection pool (10), so no call waits for a connection.
    publish_concurrency: int = Field(default=4, ge=1, le=MAX_PUBLISH_CONCURRENCY)
    #: Where obligations are found (a periodic reconciliation pass); none: scheduled by hand.
    discovery: DiscoveryConfig | None = None
    #: A JSON Schema (draft 2020-12) every obligation's params must pass, at every door.
    params_schema: dict[str, Any] | None = None
    #: Params that are part of the obligation's identity: their values join the operation key
    #: in this order (`payments:acct_1:pay_9:2026-11-30:v1`). Every obligation must carry them,
    #: each a string or an integer. The other params are data (docs/obligations.md).
    identity_params: list[IdentityParamName] = Field(default_factory=list, max_length=4)
    #: A `snooze` answer without Retry-After defers the job this long (no attempt spent, the
    #: scope left open) ...
    snooze_delay_seconds: float = Field(default=60.0, gt=0, le=43_200)
    #: ... and a job snoozed longer than this in all ends failed (`snooze_exhausted`).
    max_snooze_seconds: float = Field(default=3600.0, gt=0, le=30 * 86_400)
    #: `sweeper postpone` refuses a time further ahead than this (a postponement past it would be
    #: a silent cancel, out of `inspect`); a longer wait is a hold, with its reason.
    max_postpone_days: float = Field(default=DEFAULT_MAX_POSTPONE_DAYS, gt=0, le=3650)

    @model_validator(mode="before")
    @classmethod
    def _retired_keys(cls, data: Any) -> Any:
        """A key that no longer does anything still loads, with a warning line (config.retired)."""
        return drop_retired_keys(data)

    @model_validator(mode="before")
    @classmethod
    def _kind_default_quota(cls, data: Any) -> Any:
        """A policy that names no quota takes its action kind's published rate, if it has one
        (s3_delete: S3's per-prefix rate); else the default above."""
        if not isinstance(data, dict) or "quota" in data:
            return data
        action = data.get("action")
        kind = action.get("kind") if isinstance(action, dict) else getattr(action, "kind", None)
        model = KINDS.get(kind) if isinstance(kind, str) else None
        if model is None or model.plan_defaults.quota_limit is None:
            return data
        defaults = model.plan_defaults
        quota = {"limit": defaults.quota_limit, "period_seconds": defaults.quota_period_seconds}
        return {**data, "quota": quota}

    #: The limits, narrowest first (sweeper.config.limit); the first one is the job's scope and
    #: quota. Left out, `quota` and `scope` are its one limit (`SHORTHAND_LIMIT_NAME`): after
    #: validation every policy lists at least one, and `quota`, `scope` and `further_limits`
    #: are views of them.
    limits: list[LimitConfig] = Field(default_factory=list, max_length=4)

    @model_validator(mode="before")
    @classmethod
    def _first_limit_is_the_scope(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not data.get("limits"):
            return data
        first = data["limits"][0]
        first = first.model_dump() if isinstance(first, LimitConfig) else first
        if not isinstance(first, dict):
            return data
        filled = dict(data)
        rate = told_rate(first)
        if rate is not None:
            filled.setdefault("quota", rate)
        filled.setdefault("scope", {"template": first.get("key")})
        return filled

    @model_validator(mode="after")
    def _limits_agree(self) -> Self:
        if not self.limits:
            # The shorthand: its one limit, derived here and not marked as set, so that a dump of
            # what the file set (the function's environment) stays the file's own.
            shorthand = LimitConfig(
                name=SHORTHAND_LIMIT_NAME, key=self.scope.key_template, rate=self.quota
            )
            object.__setattr__(self, "limits", [shorthand])
        listed = {limit.name for limit in self.limits}
        unknown = set(self.action.limit_values.values()) - listed
        if unknown:
            raise ValueError(
                f"action.limit_header_values names limits the policy does not list: "
                f"{sorted(unknown)}"
            )
        first = self.limits[0]
        if first.rate is None or first.max_in_flight is not None:
            raise ValueError(
                f"limit {first.name!r} is the job's scope (listed first): it needs a rate and "
                "no max_in_flight; list a concurrency cap after it"
            )
        if self.quota != first.rate or self.scope.key_template != first.key:
            raise ValueError(
                "with [[limits]], leave [quota] and [scope] out: the first limit is the job's "
                "scope and quota"
            )
        if first.uses_params:
            raise ValueError(
                f"limit {first.name!r} is the job's scope (listed first): its key may not use "
                "params; list a narrower limit first"
            )
        names = [limit.name for limit in self.limits]
        if len(set(names)) != len(names):
            raise ValueError(f"limit names must differ: {names}")
        if any(limit.learn is not None for limit in self.further_limits):
            raise ValueError("learn is read for the first limit (the job's scope) only: move it")
        if first.cost_per_call > 1:
            raise ValueError(
                f"limit {first.name!r} is the job's scope (listed first): a cost per call there "
                "is learn.cost; cost_per_call is for a further limit"
            )
        return self

    @model_validator(mode="after")
    def _tenant_secret_closes_the_tenant(self) -> Self:
        # An auth outcome closes the job's scope: with a secret per tenant, one tenant's
        # missing secret would otherwise stop every tenant of the policy.
        if self.action.credentials_per_tenant and "{tenant_id}" not in self.scope.key_template:
            raise ValueError(
                f"the action's secret is per tenant ({{tenant_id}}), so the scope "
                f"({self.scope.key_template!r}) must name {{tenant_id}} too, e.g. "
                'scope = {kind = "tenant"} or a first limit keyed "{host}:{tenant_id}": an auth '
                "failure closes the scope, which must be that tenant's alone"
            )
        return self

    @property
    def further_limits(self) -> list[LimitConfig]:
        """The limits a call holds beside its scope's (the first limit)."""
        return self.limits[1:]

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    @field_validator("params_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            # jsonschema is imported only when a policy gives a schema
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError

            try:
                Draft202012Validator.check_schema(value)
            except SchemaError as exc:
                raise ValueError(
                    f"params_schema is not a valid JSON Schema ({exc.validator})"
                ) from exc
        return value

    @field_validator("identity_params")
    @classmethod
    def _distinct_identity(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("identity_params names a param twice")
        return value

    @property
    def max_in_flight(self) -> int:
        """Cap on leased rows per policy: what the quota drains within part of one lease."""
        return max(
            1, math.floor(self.quota.rate_per_second * self.lease_seconds * LEASE_DRAIN_FRACTION)
        )
