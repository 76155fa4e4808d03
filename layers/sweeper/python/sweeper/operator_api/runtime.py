"""The operator API function's environment and backend, validated and built once per cold start.

The function serves every policy, so it is given the whole policy file instead of one policy: as
a JSON file in a layer of its own (`SWEEPER_CONFIG_FILE`), not in its environment, which Lambda
caps at 4 KB whatever the number of policies (docs/decisions.md, "A nested stack per policy").
Also the stack whose outputs name the queues, functions and tables
(`SWEEPER_STACK_NAME`, read as `sweeper status --stack` reads them), its access
(`SWEEPER_OPERATOR_ACCESS`: `read` or `operate`) and the ledger's usual connection settings.
"""

from __future__ import annotations

from functools import cached_property, lru_cache, partial
from pathlib import Path
from typing import Literal

import boto3
from pydantic import Field, ValidationError

from sweeper.config import Policy, SweeperConfig
from sweeper.config.loading import describe_validation_error
from sweeper.config.settings import Settings
from sweeper.endpoints import Endpoints
from sweeper.errors import ConfigError
from sweeper.ledger.store import Ledger
from sweeper.operator_api.commands import Backend
from sweeper.runtime import conninfo_from, wake_store_of


class OperatorSettings(Settings):
    """The function's environment: the ledger's settings, the policy file, its stack, its access."""

    #: Not one policy: the whole file, read from `config_file` (`config`).
    policy: Policy | None = None  # type: ignore[assignment]
    config_file: Path
    stack_name: str = Field(min_length=1)
    operator_access: Literal["read", "operate"]

    @cached_property
    def config(self) -> SweeperConfig:
        """The policy file the stack was synthesized from, validated as every reader does."""
        try:
            return SweeperConfig.model_validate_json(self.config_file.read_bytes())
        except OSError as exc:
            raise ConfigError(f"{self.config_file}: {exc.strerror}") from exc
        except ValidationError as exc:
            raise ConfigError(f"{self.config_file}: {describe_validation_error(exc)}") from exc


@lru_cache(maxsize=1)
def operator_settings() -> OperatorSettings:
    return OperatorSettings.from_environment()


@lru_cache(maxsize=1)
def backend() -> Backend:
    """The deployed backend: the stack's outputs for queues and functions, the ledger."""
    current = operator_settings()
    endpoints = Endpoints("aws", boto3.Session(), None, stack=current.stack_name)
    return Backend(
        config=current.config,
        endpoints=endpoints,
        open_ledger=lambda: Ledger(
            partial(conninfo_from, current),
            prepare_threshold=current.database_prepare_threshold,
            wake=wake_store_of(current),
            may_pause=current.ledger_may_pause,
        ),
    )
