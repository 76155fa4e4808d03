"""Configuration: one validated model for the policies, one for the runtime environment.

The policy file (TOML) is validated by `SweeperConfig`, shared by the Lambdas, the CLI, the local
stack and the CDK app. A Lambda receives its one policy as JSON in `SWEEPER_POLICY`; `Settings`
validates the environment once per cold start (`load_settings` caches it). Logic never reads
`os.environ`: it receives values. A small package, split by concern: `base` (the strict model
every section derives from), `quota`, `action`, `consumer`, `discovery`, `policy` (the policy and
its other sections), `loading` (the policy file) and `settings` (the environment); the
platform's limits they hold a policy to are in `sweeper.limits`. This facade re-exports the
names callers take from it, so they import from `sweeper.config` and not from a module.
"""

from sweeper.config.action import DEFAULT_URL_TEMPLATE, KINDS, HttpActionConfig
from sweeper.config.consumer import (
    DEFAULT_CONSUMER_MEMORY_MB,
    MAX_PARALLEL_CALLS,
    MIN_CONSUMER_TIMEOUT_SECONDS,
    ConsumerConfig,
)
from sweeper.config.discovery import S3Discovery, SqlDiscovery
from sweeper.config.limit import SHORTHAND_LIMIT_NAME, LimitConfig, reach
from sweeper.config.loading import SweeperConfig, describe_validation_error
from sweeper.config.policy import (
    LEASE_DRAIN_FRACTION,
    MIN_SETTLED_JOB_RETENTION_DAYS,
    RETENTION_MAX_BUDGET_SECONDS,
    IntakeConfig,
    Policy,
    RetentionConfig,
    RetryConfig,
    ScopeConfig,
    SmokeConfig,
    ThrottleConfig,
)
from sweeper.config.quota import (
    DEFAULT_ARRIVAL_JITTER_SECONDS,
    LATE_SLOT_TOLERANCE_SECONDS,
    MAX_BUCKET_HEADROOM,
    Quota,
)
from sweeper.config.settings import Settings, load_settings

__all__ = [
    "DEFAULT_ARRIVAL_JITTER_SECONDS",
    "DEFAULT_CONSUMER_MEMORY_MB",
    "DEFAULT_URL_TEMPLATE",
    "KINDS",
    "LATE_SLOT_TOLERANCE_SECONDS",
    "LEASE_DRAIN_FRACTION",
    "MAX_BUCKET_HEADROOM",
    "MAX_PARALLEL_CALLS",
    "MIN_CONSUMER_TIMEOUT_SECONDS",
    "MIN_SETTLED_JOB_RETENTION_DAYS",
    "RETENTION_MAX_BUDGET_SECONDS",
    "SHORTHAND_LIMIT_NAME",
    "ConsumerConfig",
    "HttpActionConfig",
    "IntakeConfig",
    "LimitConfig",
    "Policy",
    "Quota",
    "RetentionConfig",
    "RetryConfig",
    "S3Discovery",
    "ScopeConfig",
    "Settings",
    "SmokeConfig",
    "SqlDiscovery",
    "SweeperConfig",
    "ThrottleConfig",
    "describe_validation_error",
    "load_settings",
    "reach",
]
