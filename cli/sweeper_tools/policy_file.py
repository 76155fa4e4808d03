"""Reading the policy file: `load_config` reads a TOML file and validates it whole.

Any problem raises one `ConfigError` naming the file and each bad field
(`sweeper.config.describe_validation_error`), never echoing the values, so the CLI can print it
as one line. The CLI, the local stack, the benchmark and the CDK app read the file; the Lambda
functions read the same `SweeperConfig` from their config layer (JSON) or environment.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from sweeper.config import SweeperConfig, describe_validation_error
from sweeper.errors import ConfigError


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
