"""What every policy model shares: `_Strict`, a frozen pydantic model that refuses unknown keys.

A policy file is written by hand, so a misspelt key must fail validation rather than be ignored,
and a validated policy is never changed afterwards (the Lambdas, the CLI, the local stack and the
CDK app all hold the same value). Every section model of `sweeper.config` derives from it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
