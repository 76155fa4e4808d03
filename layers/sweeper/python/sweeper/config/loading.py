"""The policy file: `SweeperConfig` (every policy, names unique) and `load_config`, which reads it.

`load_config` reads a TOML file and validates it whole; any problem raises one `ConfigError`
naming the file and each bad field (`describe_validation_error`), never echoing the values, so
the CLI can print it as one line. The same model serves the Lambdas, the CLI, the local stack
and the CDK app.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import Field, ValidationError, field_validator

from sweeper.config.base import _Strict
from sweeper.config.limit import as_written
from sweeper.config.policy import Policy
from sweeper.errors import ConfigError


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


def describe_validation_error(exc: ValidationError) -> str:
    """Every problem, each naming its field, without echoing the input values."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(part) for part in as_written(err["loc"])) or "(root)"
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
