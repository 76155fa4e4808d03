"""The environment of one Lambda function (or of the CLI): `Settings`, validated once.

A function receives its one policy as JSON in `SWEEPER_POLICY` and its resources (queue URLs,
table names, the database's secret) as `SWEEPER_*` variables; `load_settings` validates them at
cold start and caches the result, so logic receives values and never reads `os.environ`. A bad
environment fails the cold start with a `ConfigError` that names each setting.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal, Self

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sweeper.actions.rehearsal import Rehearsal
from sweeper.config.loading import describe_validation_error
from sweeper.config.policy import Policy
from sweeper.errors import ConfigError


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
    #: The table holding each policy's wake item (sweeper.ledger.wake): every ledger write that
    #: makes work due earlier lowers it, and the producer skips the ledger while it is later
    #: than now. Unset: no item is kept, and the producer connects on every run.
    wake_table: str | None = None
    #: The ledger's cluster may pause (minimum 0 ACU, no RDS Proxy): each run closes its
    #: session at its end, so a warm environment does not keep the cluster awake.
    ledger_may_pause: bool = False
    dlq_url: str | None = None
    intake_queue_url: str | None = None
    #: The webhook's replay markers (DynamoDB) and its signing secret (Secrets Manager).
    replay_table: str | None = None
    webhook_secret_arn: str | None = None
    idempotency_expiry_seconds: int = Field(default=7 * 86_400, ge=60)
    #: Set by the local stack on the functions it runs (a rehearsal's gate); never deployed.
    local_stack: bool = False
    #: A rehearsal: every call of an http action goes to this origin instead of its own host
    #: (`sweeper.actions.rehearsal`). The local stack's only: refused without `local_stack`.
    rehearsal_url: str | None = None
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
    def _rehearsals_only_on_the_local_stack(self) -> Self:
        # A deployed consumer told to send its calls elsewhere would hand its credentials to
        # whoever set the variable: refuse to start instead.
        if self.rehearsal_url is None:
            return self
        if not (self.local_stack and self.database_url):
            raise ValueError(
                "SWEEPER_REHEARSAL_URL sends every vendor call elsewhere; only the local stack "
                "may set it (SWEEPER_LOCAL_STACK=1 with SWEEPER_DATABASE_URL): unset it"
            )
        Rehearsal.parse(self.rehearsal_url)
        return self

    @property
    def rehearsal(self) -> Rehearsal | None:
        """Where a rehearsal sends every call; None in production."""
        return None if self.rehearsal_url is None else Rehearsal.parse(self.rehearsal_url)

    @property
    def database_prepare_threshold(self) -> int | None:
        return 5 if self.database_prepare else None

    @classmethod
    def from_environment(cls) -> Self:
        """These settings from the environment; a ConfigError naming each bad one."""
        try:
            return cls()  # fields come from the environment
        except ValidationError as exc:
            raise ConfigError(f"environment: {describe_validation_error(exc)}") from exc

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
    return Settings.from_environment()
