"""Production wiring for the discovery function: the policy's source, built on first use.

The sql source connects with its own secret (a read-only user of the system of record), over
TLS verified against the RDS CA bundle, never with the ledger's; locally a URL stands in for it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities import parameters

from sweeper import runtime
from sweeper.config import S3Discovery, Settings, SqlDiscovery
from sweeper.discovery.rows import Source
from sweeper.discovery.s3 import S3Source
from sweeper.discovery.sql import SqlSource
from sweeper.errors import ConfigError
from sweeper.ledger.connection import secret_conninfo

#: How long a fetched source secret is reused (a rotation is picked up within this).
SOURCE_SECRET_MAX_AGE_SECONDS = 300


def source_for(settings: Settings) -> Source:
    """The source the policy names, with its own credentials."""
    config = settings.policy.discovery
    if config is None:
        raise ConfigError(f"policy {settings.policy.name!r} has no [policies.discovery]")
    if isinstance(config, S3Discovery):
        return S3Source(config, runtime.s3_client())
    return SqlSource(config, _source_conninfo(settings, config))


def _source_conninfo(settings: Settings, config: SqlDiscovery) -> Any:
    if settings.source_database_url is not None:
        return settings.source_database_url.get_secret_value()
    secret_arn = config.secret_arn
    if secret_arn is None:
        raise ConfigError(
            f"policy {settings.policy.name!r}: discovery.secret_arn must name the source "
            "database's read-only secret (or set SWEEPER_SOURCE_DATABASE_URL locally)"
        )

    def conninfo(refresh: bool) -> str:
        secret: Any = parameters.get_secret(
            secret_arn,
            transform="json",
            max_age=SOURCE_SECRET_MAX_AGE_SECONDS,
            force_fetch=refresh,
        )
        return secret_conninfo(
            secret,
            host=None,
            port=None,
            connect_timeout_seconds=runtime.DATABASE_CONNECT_TIMEOUT_SECONDS,
        )

    return conninfo


@lru_cache(maxsize=1)
def source() -> Source:
    return source_for(runtime.settings())


def reset() -> None:
    """Forget the cached source (a new "cold start"; for tests)."""
    source.cache_clear()
