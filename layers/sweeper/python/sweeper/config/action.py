"""The action's config: what a policy calls for each due obligation, one of several kinds.

`action.kind` selects a member of `ActionConfig`, a pydantic discriminated union. Each member is
owned by its kind's module under `sweeper.actions` (config, implementation, outcome mapping,
grants, network path, plan defaults; see `sweeper.actions.base`), so this module only lists
them. `KINDS` maps each kind's name to its model.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Union, get_args

from pydantic import BeforeValidator, Field

from sweeper.actions.base import ActionKind, OutcomeName
from sweeper.actions.http import HttpActionConfig
from sweeper.actions.http_spec import DEFAULT_URL_TEMPLATE
from sweeper.actions.lambda_invoke import LambdaActionConfig
from sweeper.actions.python_call import PythonActionConfig
from sweeper.actions.s3_delete import S3DeleteActionConfig

#: The kind of an action that names none (every policy written before there were kinds).
DEFAULT_KIND: Final = "http"


def _default_kind(value: Any) -> Any:
    if isinstance(value, dict) and "kind" not in value:
        return {"kind": DEFAULT_KIND, **value}
    return value


# Adding a kind: write its module under sweeper/actions/ (a subclass of ActionKind with its own
# `kind: Literal["name"]`), then add its model to this union, one line. Nothing else changes:
# the runtime builds it, the CDK app grants and routes it, and plan reads it through ActionKind.
ActionConfig = Annotated[
    Union[  # noqa: UP007 (one member per line, so that adding a kind is a one-line diff)
        HttpActionConfig,
        S3DeleteActionConfig,
        LambdaActionConfig,
        PythonActionConfig,
    ],
    Field(discriminator="kind"),
    BeforeValidator(_default_kind),
]

#: Each kind's name -> its config model, read off the union.
KINDS: Final[dict[str, type[ActionKind]]] = {
    model.model_fields["kind"].default: model
    # A union of one member is that member itself.
    for model in (get_args(get_args(ActionConfig)[0]) or (get_args(ActionConfig)[0],))
}

__all__ = [
    "DEFAULT_KIND",
    "DEFAULT_URL_TEMPLATE",
    "KINDS",
    "ActionConfig",
    "ActionKind",
    "HttpActionConfig",
    "OutcomeName",
]
