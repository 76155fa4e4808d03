"""Configuration: one validated model for the policies, one for the runtime environment.

The policy file (TOML) is validated by `SweeperConfig`, shared by the Lambdas, the CLI, the local
stack and the CDK app. A Lambda receives its one policy as JSON in `SWEEPER_POLICY`; `Settings`
validates the environment once per cold start (`load_settings` caches it). Logic never reads
`os.environ`: it receives values.
"""

from __future__ import annotations

import math
import re
import tomllib
import zoneinfo
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from sweeper.adaptive_rate import Adaptive
from sweeper.errors import ConfigError
from sweeper.limits import (
    LAMBDA_MAX_TIMEOUT_SECONDS,
    MAX_BATCH_SIZE,
    MAX_BATCH_SIZE_WITHOUT_WINDOW,
    MIN_MAXIMUM_CONCURRENCY,
    recommended_visibility_timeout_seconds,
)
from sweeper.schedule_expression import parse_schedule

#: A leased row's message must be consumable at the quota rate within this fraction of the lease,
#: so that leases do not expire while their messages still wait in the queue.
LEASE_DRAIN_FRACTION = 0.5
#: A consumer sends its call at most this long after its slot, or lets the slot go unused.
LATE_SLOT_TOLERANCE_SECONDS = 0.035
#: The default of `quota.arrival_jitter_seconds`: how much the time from a call's send to its
#: arrival at the vendor varies (connection, network, the vendor's accept). The docs quote this
#: figure; tests/unit/test_config.py checks that they do.
DEFAULT_ARRIVAL_JITTER_SECONDS = 0.025
#: The shortest consumer timeout that can make a call: the consumer leaves Lambda's last 5 s
#: unused (runtime.LAMBDA_SAFETY_MARGIN_SECONDS) and never starts a call with less than 1 s
#: (consumer.MIN_CALL_SECONDS); a shorter timeout would return every record uncalled until each
#: reached the DLQ. One more second for the batch's ledger read (a unit test checks the sum).
MIN_CONSUMER_TIMEOUT_SECONDS = 7
#: The consumer function's memory unless a policy sets `consumer.memory_mb`, and Lambda's range
#: (128 MB to 10,240 MB, the Lambda Developer Guide's "Configure Lambda function memory").
DEFAULT_CONSUMER_MEMORY_MB = 512
LAMBDA_MIN_MEMORY_MB = 128
LAMBDA_MAX_MEMORY_MB = 10_240
#: Lambda gives a function one vCPU (one vCPU-second of credits per second) at 1,769 MB, and a
#: share in proportion below (the same page).
MB_PER_VCPU = 1769


def vcpu_for(memory_mb: int) -> float:
    """The vCPU share Lambda gives a function of this memory."""
    return memory_mb / MB_PER_VCPU


#: The most records one environment calls at once (`consumer.parallel_calls`).
MAX_PARALLEL_CALLS = 10
#: botocore's default connection pool per client: more concurrent calls would queue for one.
MAX_PUBLISH_CONCURRENCY = 10
#: Settled jobs are kept at least as long as a dead letter can wait for redrive.
MIN_SETTLED_JOB_RETENTION_DAYS = 14
#: The scheduled prune's budget stays well inside Lambda's 15 minutes.
RETENTION_MAX_BUDGET_SECONDS = 600.0
#: Fields a scope template may use.
SCOPE_FIELDS = frozenset({"policy", "tenant_id", "object_id", "host"})
DEFAULT_URL_TEMPLATE = "{api_url}/v1/tenants/{tenant_id}/objects/{object_id}"

_RATE_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d*(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_PERIOD_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}

PolicyName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,39}$")]
OutcomeName = Literal[
    "accepted", "absent", "throttled", "transient", "unknown", "permanent", "auth"
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Quota(_Strict):
    """The vendor's documented rate for one scope: `limit` calls per `period_seconds`."""

    limit: int = Field(gt=0)
    period_seconds: float = Field(gt=0)
    headroom: float | None = Field(
        default=None, gt=0, le=1, description="fraction of the quota used; default: safe_headroom"
    )
    arrival_jitter_seconds: float = Field(
        default=DEFAULT_ARRIVAL_JITTER_SECONDS,
        ge=0,
        le=10,
        description="spread of send-to-arrival latency at the vendor (p99 - min); sets the "
        "default headroom",
    )
    adaptive: bool = Field(
        default=False,
        description="the vendor's quota is not known: find it (AIMD); limit/period is the cap",
    )
    adaptive_floor: float = Field(
        default=0.1, gt=0, le=1, description="adaptive: starting and lowest rate, share of the cap"
    )
    adaptive_increase: float = Field(
        default=0.02,
        gt=0,
        le=1,
        description="adaptive: rate added per second without a 429, share of the cap",
    )
    adaptive_cut: float = Field(
        default=0.7, gt=0, lt=1, description="adaptive: the rate is multiplied by this on a 429"
    )

    @classmethod
    def parse(cls, text: str, headroom: float | None = None) -> Quota:
        """Parse `N/PERIOD`, e.g. `40/1s`, `100/m`, `5/500ms`."""
        match = _RATE_RE.match(text)
        if not match:
            raise ConfigError(f"rate {text!r} is not N/PERIOD (e.g. 40/1s, 600/1m)")
        count, amount, unit = match.groups()
        seconds = (float(amount) if amount else 1.0) * _PERIOD_UNITS[unit or "s"]
        try:
            return cls(limit=int(count), period_seconds=seconds, headroom=headroom)
        except ValidationError as exc:
            raise ConfigError(f"rate {text!r}: {_first_error(exc)}") from exc

    @property
    def arrival_budget_seconds(self) -> float:
        """How late after its slot a call may reach the vendor: sent late, then delayed."""
        return LATE_SLOT_TOLERANCE_SECONDS + self.arrival_jitter_seconds

    @property
    def safe_headroom(self) -> float:
        """The largest headroom that never exceeds the quota, given arrival jitter.

        Slots of a zero-burst GCRA at `h * limit / period` put at most `floor((T + d) * h * N / T)
        + 1` calls in any window of T = period seconds when each call arrives up to d seconds
        after its slot; that is at most N exactly when `h < T / (T + d)`, whatever N is.
        """
        exact = self.period_seconds / (self.period_seconds + self.arrival_budget_seconds)
        return math.floor(exact * 1000) / 1000

    @property
    def effective_headroom(self) -> float:
        return self.headroom if self.headroom is not None else self.safe_headroom

    @property
    def rate_per_second(self) -> float:
        """The rate sweeper aims for, headroom applied."""
        return self.limit * self.effective_headroom / self.period_seconds

    @property
    def interval_seconds(self) -> float:
        """The spacing of calls in one scope (the GCRA emission interval)."""
        return 1.0 / self.rate_per_second

    @property
    def adaptive_spec(self) -> Adaptive | None:
        """The rate controller when the quota is to be found, else None (a known quota).

        The cap is the rate above (limit, headroom applied); several 429s of one overshoot
        arrive within about a window, so one cut per two windows.
        """
        if not self.adaptive:
            return None
        cap = self.rate_per_second
        return Adaptive(
            floor=cap * self.adaptive_floor,
            cap=cap,
            increase=cap * self.adaptive_increase,
            cut=self.adaptive_cut,
            cooldown=2 * self.period_seconds,
        )


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


class HttpActionConfig(_Strict):
    """The HTTP cleanup call: method and URL template; the operation key is the Idempotency-Key."""

    kind: Literal["http"] = "http"
    method: Literal["DELETE", "POST", "PUT", "PATCH", "GET"] = "DELETE"
    #: The vendor. The built-in default names no real host (".invalid" never resolves): a
    #: policy names its vendor, and the local stack puts its simulator here.
    api_url: str = Field(default="https://api.invalid", pattern=r"^https?://")
    #: An `http://` api_url sends the bearer token in clear: refused unless this says so (the
    #: local stack and the tests' loopback vendors set it).
    allow_plain_http: bool = False
    url_template: str = DEFAULT_URL_TEMPLATE
    connect_timeout_seconds: float = Field(default=2.0, gt=0, le=30)
    read_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    auth_secret_arn: str | None = Field(
        default=None, description="Secrets Manager secret with the API token (Bearer)"
    )
    #: Overrides of the default classification, e.g. {"409": "absent", "423": "throttled"}.
    outcomes: dict[int, OutcomeName] = Field(default_factory=dict)
    #: A vendor-specific rate-limit header read besides Retry-After, and its unit.
    retry_after_header: str | None = None
    retry_after_header_unit: Literal["s", "ms"] = "s"
    #: The vendor's measured latency (seconds): `sweeper plan` and synth use it to warn when the
    #: consumers cannot reach the quota. Unset: not checked.
    latency_p50_seconds: float | None = Field(default=None, gt=0, le=120)
    latency_p95_seconds: float | None = Field(default=None, gt=0, le=120)

    @model_validator(mode="after")
    def _plain_http_only_when_allowed(self) -> Self:
        if self.api_url.startswith("http://") and not self.allow_plain_http:
            raise ValueError(
                "api_url uses http://, which would send the API token in clear: use https://, "
                "or set allow_plain_http = true in [action] (a local vendor only)"
            )
        return self

    @model_validator(mode="after")
    def _p50_not_above_p95(self) -> Self:
        p50, p95 = self.latency_p50_seconds, self.latency_p95_seconds
        if p95 is not None and (p50 is None or p50 > p95):
            raise ValueError("latency_p95_seconds needs latency_p50_seconds, at most as large")
        return self

    @field_validator("outcomes")
    @classmethod
    def _statuses_are_http(cls, value: dict[int, str]) -> dict[int, str]:
        bad = sorted(status for status in value if not 100 <= status <= 599)
        if bad:
            raise ValueError(f"not HTTP statuses: {bad}")
        return value

    @field_validator("url_template")
    @classmethod
    def _check_url_template(cls, value: str) -> str:
        fields = set(re.findall(r"{(\w+)}", value))
        allowed = {"api_url", "tenant_id", "object_id", "operation_key"}
        if not fields <= allowed:
            raise ValueError(f"url template uses unknown fields {sorted(fields - allowed)}")
        return value


class ConsumerConfig(_Strict):
    """How consumers read the queue. Parallelism is capped twice, on purpose (docs/decisions.md).

    A cautious start runs one execution environment: `reserved_concurrency = 1`. The event
    source's maximum cannot go below 2 (Lambda's floor), so that one case pairs reserved 1 with
    maximum 2: the mapping may hold a second batch that Lambda throttles, which costs its
    messages a receive (docs/decisions.md, "A cautious start").
    """

    reserved_concurrency: int = Field(default=4, ge=1, le=1000)
    max_concurrency: int = Field(
        default=4, ge=MIN_MAXIMUM_CONCURRENCY, le=1000, description="event source maximum"
    )
    #: Records per invocation. Above 10, Lambda requires a batching window of at least 1 s;
    #: larger batches let `parallel_calls` threads stay busy through a batch instead of waiting
    #: for its slowest call (a vendor at 150 ms needs them to fill a quota with few environments).
    batch_size: int = Field(default=10, ge=1, le=MAX_BATCH_SIZE)
    batch_window_seconds: int = Field(default=0, ge=0, le=300)
    timeout_seconds: int = Field(
        default=60, ge=MIN_CONSUMER_TIMEOUT_SECONDS, le=LAMBDA_MAX_TIMEOUT_SECONDS
    )
    max_receive_count: int = Field(default=5, ge=5, le=1000)
    #: Records of one batch called at the same time by one environment (threads; the work is
    #: waiting on the vendor). 1 calls them one after another. Every call still takes its slot
    #: from the shared limiter, so this raises what one environment can do, never the rate.
    parallel_calls: int = Field(default=1, ge=1, le=MAX_PARALLEL_CALLS)
    #: The function's memory, and with it its CPU: Lambda gives one vCPU at 1,769 MB and a
    #: proportional share below. The threads of `parallel_calls` share that CPU, so a busy
    #: environment can run out of it before it runs out of threads (`sweeper plan` says when).
    memory_mb: int = Field(
        default=DEFAULT_CONSUMER_MEMORY_MB, ge=LAMBDA_MIN_MEMORY_MB, le=LAMBDA_MAX_MEMORY_MB
    )

    @model_validator(mode="after")
    def _window_for_large_batches(self) -> Self:
        if self.batch_size > MAX_BATCH_SIZE_WITHOUT_WINDOW and self.batch_window_seconds < 1:
            raise ValueError(
                f"batch_size {self.batch_size} is above {MAX_BATCH_SIZE_WITHOUT_WINDOW}: Lambda "
                "then requires batch_window_seconds of at least 1"
            )
        return self

    @model_validator(mode="after")
    def _parallel_within_batch(self) -> Self:
        if self.parallel_calls > self.batch_size:
            raise ValueError(
                f"parallel_calls ({self.parallel_calls}) must not exceed batch_size "
                f"({self.batch_size}): a batch never has more records to call at once"
            )
        return self

    @model_validator(mode="after")
    def _max_not_above_reserved(self) -> Self:
        if self.max_concurrency > self.reserved_concurrency and not self.single_environment:
            raise ValueError(
                "max_concurrency must not exceed reserved_concurrency: the event source would "
                "keep receiving while invocations are throttled (the one exception: "
                f"reserved_concurrency = 1 with max_concurrency = {MIN_MAXIMUM_CONCURRENCY}, "
                "Lambda's floor, for a cautious start)"
            )
        return self

    @property
    def single_environment(self) -> bool:
        """One execution environment: reserved 1, with the event source at Lambda's floor."""
        return self.reserved_concurrency == 1 and self.max_concurrency == MIN_MAXIMUM_CONCURRENCY

    @property
    def environments(self) -> int:
        """How many execution environments can run at once: the lower of the two caps."""
        return min(self.reserved_concurrency, self.max_concurrency)

    @property
    def visibility_timeout_seconds(self) -> int:
        """AWS's guidance: at least six times the function timeout, plus the batch window."""
        return recommended_visibility_timeout_seconds(
            self.timeout_seconds, self.batch_window_seconds
        )


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


#: Fields an S3 key template may name; each matches one or more characters other than "/".
KEY_TEMPLATE_FIELDS = frozenset({"tenant_id", "object_id"})


class _DiscoveryBase(_Strict):
    """What every discovery source shares: when a pass runs and how much one run may do."""

    #: EventBridge Scheduler expression of the discovery function (separate from the producer's).
    schedule: str = Field(default="rate(1 hour)", pattern=r"^(rate|cron|at)\(.+\)$")
    #: One run reads pages until this is spent; the next run resumes at the persisted cursor.
    budget_seconds: float = Field(default=240.0, gt=0, le=LAMBDA_MAX_TIMEOUT_SECONDS)
    page_size: int = Field(default=1000, ge=1, le=10_000)
    #: Discovery lag alarm: no complete pass for this long (a pass may span several runs).
    lag_alarm_seconds: int = Field(default=86_400, gt=0)


class SqlDiscovery(_DiscoveryBase):
    """A read-only query against a system-of-record PostgreSQL (never the ledger).

    `query` is one SELECT returning the columns `tenant_id`, `object_id` and `due_at`, none of
    them NULL; sweeper wraps it and pages it by keyset on (due_at, tenant_id, object_id), so an
    index on those columns makes every page cost its own size. Named parameters (`%(name)s`)
    come from `params`; `%(now)s` is the run's time. Never format values into the query.
    """

    kind: Literal["sql"] = "sql"
    query: str = Field(min_length=1, max_length=20_000)
    params: dict[str, str | int | float | bool] = Field(default_factory=dict)
    #: Secrets Manager secret of a read-only user on the source database (RDS JSON shape).
    secret_arn: str | None = None
    #: The source's PostgreSQL port: the function's only egress besides HTTPS to AWS.
    port: int = Field(default=5432, ge=1, le=65_535)
    statement_timeout_seconds: float = Field(default=30.0, gt=0, le=900)

    @field_validator("query")
    @classmethod
    def _one_select(cls, value: str) -> str:
        body = value.strip().rstrip(";").strip()
        if ";" in body:
            raise ValueError("query must be one statement (no ';' inside)")
        if not re.match(r"(?is)^(select|with)\b", body):
            raise ValueError("query must be a SELECT (or WITH ... SELECT)")
        return body

    @field_validator("params")
    @classmethod
    def _now_is_reserved(cls, value: dict[str, object]) -> dict[str, object]:
        if "now" in value:
            raise ValueError("params must not set 'now': it is the run's time")
        return value


class S3Discovery(_DiscoveryBase):
    """Objects under a bucket and prefix old enough for the policy's age rule.

    `key_template` is matched against the whole key: `{tenant_id}` and `{object_id}` each match
    one or more characters other than "/". An object is due `min_age_seconds` after its
    LastModified time; objects due later than `lookahead_seconds` from now wait for a later pass.
    """

    kind: Literal["s3"] = "s3"
    bucket: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
    prefix: str = Field(default="", max_length=1024)
    key_template: str = Field(min_length=1, max_length=1024)
    min_age_seconds: int = Field(default=30 * 86_400, ge=0)
    lookahead_seconds: int = Field(default=0, ge=0)

    @field_validator("key_template")
    @classmethod
    def _template_names_both_ids(cls, value: str) -> str:
        fields = re.findall(r"{(\w+)}", value)
        if sorted(fields) != sorted(KEY_TEMPLATE_FIELDS):
            raise ValueError("key_template must name {tenant_id} and {object_id} once each")
        return value

    @model_validator(mode="after")
    def _template_under_prefix(self) -> Self:
        if not self.key_template.startswith(self.prefix):
            raise ValueError("key_template must start with prefix")
        return self


DiscoveryConfig = Annotated[SqlDiscovery | S3Discovery, Field(discriminator="kind")]


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
    #: EventBridge event patterns (default bus) whose events become this policy's hints; each
    #: event's `detail` is one hint, or `{"hints": [...]}`.
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
    action: HttpActionConfig = HttpActionConfig()
    consumer: ConsumerConfig = ConsumerConfig()
    alarms: AlarmConfig = AlarmConfig()
    retry: RetryConfig = RetryConfig()
    throttle: ThrottleConfig = ThrottleConfig()
    retention: RetentionConfig = RetentionConfig()
    smoke: SmokeConfig | None = None
    intake: IntakeConfig = IntakeConfig()
    max_attempts: int = Field(default=8, ge=1, le=100)
    lease_seconds: int = Field(default=900, ge=10, le=86_400)
    page_size: int = Field(default=1000, ge=1, le=10_000)
    producer_budget_seconds: float = Field(default=240.0, gt=0, le=LAMBDA_MAX_TIMEOUT_SECONDS)
    #: SendMessageBatch calls the producer has in flight at once (threads; each call is a wait on
    #: SQS). At most botocore's default connection pool (10), so no call waits for a connection.
    publish_concurrency: int = Field(default=4, ge=1, le=MAX_PUBLISH_CONCURRENCY)
    #: Where obligations are found (a periodic reconciliation pass); none: scheduled by hand.
    discovery: DiscoveryConfig | None = None

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    @property
    def max_in_flight_per_scope(self) -> int:
        """Cap on one scope's leased rows: what its own rate drains within part of a lease.

        Every scope has the quota's rate, so more of one scope's work would wait in the queue
        while its leases run out; the claim leaves it due for a later one (sweeper.ledger).
        """
        return self.max_in_flight

    @property
    def max_in_flight(self) -> int:
        """Cap on leased rows per policy: what the quota drains within part of one lease."""
        return max(
            1, math.floor(self.quota.rate_per_second * self.lease_seconds * LEASE_DRAIN_FRACTION)
        )


class SweeperConfig(_Strict):
    """The policy file."""

    policies: list[Policy] = Field(min_length=1)

    @field_validator("policies")
    @classmethod
    def _unique_names(cls, value: list[Policy]) -> list[Policy]:
        names = [p.name for p in value]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"policy names must be unique: {duplicates}")
        return value

    def policy(self, name: str) -> Policy:
        for candidate in self.policies:
            if candidate.name == name:
                return candidate
        raise ConfigError(f"no policy named {name!r} (known: {[p.name for p in self.policies]})")


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"]) or "(root)"
    return f"{where}: {err['msg']}"


def describe_validation_error(exc: ValidationError) -> str:
    """Every problem, each naming its field, without echoing the input values."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "(root)"
        lines.append(f"{where}: {err['msg']}")
    return "; ".join(lines)


def load_config(path: str | Path) -> SweeperConfig:
    """Read and validate a policy file; a bad file raises ConfigError naming the field."""
    source = Path(path)
    try:
        raw = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"policy file {source} does not exist") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"policy file {source} is not UTF-8 text (is it a TOML file?)") from exc
    except OSError as exc:
        raise ConfigError(f"policy file {source} cannot be read ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"policy file {source} is not valid TOML: {exc}") from exc
    try:
        return SweeperConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"policy file {source}: {describe_validation_error(exc)}") from exc


class Settings(BaseSettings):
    """The environment of one Lambda function (or of the CLI), validated once."""

    model_config = SettingsConfigDict(env_prefix="SWEEPER_", extra="ignore", frozen=True)

    policy: Policy
    database_url: SecretStr | None = None
    database_secret_arn: str | None = None
    database_secret_max_age_seconds: int = Field(default=300, ge=0)
    #: How long a warm consumer may send a cached vendor API token: a rotation or revocation
    #: reaches it within this (and at once after an AUTH answer, see sweeper.actions.token).
    vendor_token_max_age_seconds: int = Field(default=300, ge=0)
    #: Where to connect instead of the secret's host (an RDS Proxy, an imported cluster).
    database_host: str | None = None
    database_port: int | None = Field(default=None, ge=1, le=65_535)
    queue_url: str | None = None
    #: The discovery function's system-of-record database: a URL locally, else the policy's
    #: `discovery.secret_arn` (never the ledger's connection).
    source_database_url: SecretStr | None = None
    idempotency_table: str | None = None
    limiter_table: str | None = None
    dlq_url: str | None = None
    intake_queue_url: str | None = None
    #: The webhook's replay markers (DynamoDB) and its signing secret (Secrets Manager).
    replay_table: str | None = None
    webhook_secret_arn: str | None = None
    idempotency_expiry_seconds: int = Field(default=7 * 86_400, ge=60)
    #: "shared" in production; the two others exist for the rate benchmark's baselines only,
    #: and are refused unless the local stack started the function (`local_stack` below).
    limiter_mode: Literal["shared", "per_worker", "off"] = "shared"
    #: Set by the local stack (and so the benchmark) on the functions it runs; never deployed.
    local_stack: bool = False
    limiter_workers: int = Field(default=1, ge=1, description="workers, for per_worker")
    database_prepare: bool = Field(
        default=True, description="off behind RDS Proxy: no server-side prepared statements"
    )
    service_name: str = "sweeper"
    #: False for the webhook function only: it never connects to the ledger, and is given no
    #: way to (no database environment, no grant, no network path).
    needs_database: bool = True

    @model_validator(mode="after")
    def _one_database_source(self) -> Self:
        sources = (self.database_url is not None) + (self.database_secret_arn is not None)
        if sources > 1 or (sources == 0 and self.needs_database):
            raise ValueError(
                "set exactly one of SWEEPER_DATABASE_URL or SWEEPER_DATABASE_SECRET_ARN"
            )
        return self

    @model_validator(mode="after")
    def _baselines_only_on_the_local_stack(self) -> Self:
        # A deployed function with a baseline limiter would ignore the vendor's quota: refuse
        # to start (cold start fails, the error names the setting) rather than run over it.
        if self.limiter_mode != "shared" and not (self.local_stack and self.database_url):
            raise ValueError(
                f"SWEEPER_LIMITER_MODE={self.limiter_mode} is a benchmark baseline that does not "
                "keep to the vendor's quota; only the local stack may set it "
                "(SWEEPER_LOCAL_STACK=1 with SWEEPER_DATABASE_URL): unset SWEEPER_LIMITER_MODE"
            )
        return self

    @property
    def database_prepare_threshold(self) -> int | None:
        return 5 if self.database_prepare else None

    def require(
        self,
        field: Literal[
            "queue_url",
            "idempotency_table",
            "limiter_table",
            "dlq_url",
            "intake_queue_url",
            "replay_table",
            "webhook_secret_arn",
        ],
    ) -> str:
        value = getattr(self, field)
        if not value:
            raise ConfigError(f"SWEEPER_{field.upper()} must be set for this function")
        return str(value)


@lru_cache(maxsize=1)
def load_settings() -> Settings:
    """Validate the environment once per cold start."""
    try:
        return Settings()  # fields come from the environment
    except ValidationError as exc:
        raise ConfigError(f"environment: {describe_validation_error(exc)}") from exc
