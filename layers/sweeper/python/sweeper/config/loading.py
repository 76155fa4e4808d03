"""The policy file: `SweeperConfig` (every policy, names unique).

The same model serves the Lambdas, the CLI, the local stack and the CDK app; the tools read the
TOML file (`sweeper_tools.policy_file.load_config`), the functions their config layer.
`describe_validation_error` says what is wrong, each bad field named, never echoing a value.
"""

from __future__ import annotations

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
