"""Per-obligation params: the one check every door applies before anything is written.

An obligation may carry params, a JSON object of at most MAX_PARAMS_BYTES in its compact
encoding (`models.params_json`). A policy may give a JSON Schema they must pass, and name
identity params, whose values join the operation key. A refusal names the rule broken (a key of
PARAMS_PROBLEMS, with the schema keyword and where in the schema), never a value: params may be
customer data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sweeper.errors import SweeperError
from sweeper.models import id_problem, params_json

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

    from sweeper.config import Policy

#: The largest params accepted, in bytes of their compact UTF-8 JSON encoding.
MAX_PARAMS_BYTES: Final = 4096

#: Why params are refused: rule -> reason. Neither ever quotes a value.
PARAMS_PROBLEMS: Final = {
    "params_not_object": "params is not a JSON object",
    "params_too_large": f"params is larger than {MAX_PARAMS_BYTES} bytes encoded",
    "params_schema": "params fails the policy's params_schema",
    "identity_param_missing": "params lacks an identity param",
    "identity_param_invalid": "an identity param is not a valid string or integer",
    "params_unstorable": "params holds a NUL character or a lone surrogate",
}


class ParamsError(SweeperError):
    """Params that a door refuses: `rule` is a key of PARAMS_PROBLEMS, `detail` names no value."""

    def __init__(self, rule: str, detail: str = "") -> None:
        self.rule = rule
        self.detail = detail
        super().__init__(self.reason)

    @property
    def reason(self) -> str:
        text = f"{PARAMS_PROBLEMS[self.rule]} ({self.rule}"
        return f"{text}: {self.detail})" if self.detail else f"{text})"


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise ValueError unless `schema` is a valid JSON Schema (draft 2020-12)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"params_schema is not a valid JSON Schema ({exc.validator})") from exc


@dataclass(frozen=True)
class ParamsRules:
    """What a policy asks of params: its schema's validator and its identity params."""

    validator: Validator | None = None
    identity: tuple[str, ...] = ()

    @classmethod
    def of(cls, policy: Policy) -> ParamsRules:
        """The rules of one policy (build once per input, file or page, not per obligation)."""
        validator = None
        if policy.params_schema is not None:
            from jsonschema import Draft202012Validator

            validator = Draft202012Validator(policy.params_schema)
        return cls(validator, tuple(policy.identity_params))

    def check(self, value: object) -> dict[str, Any]:
        """The params `value` stands for (None: none given), or raise ParamsError."""
        params = _as_object(value)
        if self.validator is not None:
            error = next(iter(self.validator.iter_errors(params)), None)
            if error is not None:
                # The keyword that failed and where in the policy's schema: no value, no key of
                # the input that the schema does not itself name.
                where = "/".join(str(p) for p in error.relative_schema_path)
                raise ParamsError("params_schema", f"{error.validator} at {where}")
        for name in self.identity:
            if name not in params:
                raise ParamsError("identity_param_missing", name)
            if identity_value(params[name]) is None:
                raise ParamsError("identity_param_invalid", name)
        return params

    def identity_of(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        """The identity params' values for the operation key (checked by `check`)."""
        return identity_values(params, self.identity)


def identity_value(value: object) -> str | None:
    """An identity param's value as it joins the operation key, or None when it cannot."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and id_problem(value) is None:
        return value
    return None


def identity_values(params: Mapping[str, Any], names: Sequence[str]) -> tuple[str, ...]:
    """The values of the identity params `names`, in that order, as the operation key takes
    them; raise ParamsError when one is missing or invalid."""
    values = []
    for name in names:
        if name not in params:
            raise ParamsError("identity_param_missing", name)
        value = identity_value(params[name])
        if value is None:
            raise ParamsError("identity_param_invalid", name)
        values.append(value)
    return tuple(values)


def _as_object(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParamsError("params_not_object")
    try:
        encoded = params_json(value)
    except (TypeError, ValueError, RecursionError) as exc:  # not JSON, or nested too deep
        raise ParamsError("params_not_object") from exc
    try:
        size = len(encoded.encode())
    except UnicodeEncodeError as exc:  # a lone surrogate: not UTF-8
        raise ParamsError("params_unstorable") from exc
    if size > MAX_PARAMS_BYTES:
        raise ParamsError("params_too_large")
    if _NUL.search(encoded):  # PostgreSQL's jsonb cannot hold U+0000
        raise ParamsError("params_unstorable")
    return value


#: U+0000 in the compact encoding: an escape `\u0000` not itself escaped.
_NUL: Final = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
