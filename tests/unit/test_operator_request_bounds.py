"""Every number an operator API request carries has an upper bound: a huge or non-finite value
is refused as an invalid request (400) before anything runs, never an unhandled error."""

from __future__ import annotations

import json
import math
from typing import Any, Union, get_args, get_origin

import annotated_types
import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from sweeper.operator_api.requests import OperatorRequest
from sweeper.operator_api.service import INVALID, serve

CALLER = "arn:aws:iam::123456789012:user/ana"
#: What each command needs besides its numbers to be a valid request.
REQUIRED: dict[str, dict[str, Any]] = {
    "runs": {"since": "2026-01-01T00:00:00Z"},
    "overview": {"policy": "exports"},
    "activity": {"policy": "exports"},
    "search": {"policy": "exports", "query": "t1"},
    "job": {"key": "exports:t1:o1:v1"},
    "catch-up": {"since": "2026-01-01T00:00:00Z"},
    "prune": {"older_than_days": 30, "reason": "r"},
}
HUGE = (1e300, 10**30, math.inf, math.nan)


def _models() -> list[type[BaseModel]]:
    union = get_args(OperatorRequest)[0]
    return list(get_args(union))


def _numeric(info: FieldInfo) -> bool:
    annotation = info.annotation
    kinds = get_args(annotation) if get_origin(annotation) is Union else (annotation,)
    kinds = tuple(get_args(k)[0] if get_args(k) else k for k in kinds)
    return any(k in (int, float) for k in kinds if k is not bool)


NUMERIC_FIELDS = [
    pytest.param(model, name, id=f"{model.__name__}.{name}")
    for model in _models()
    for name, info in model.model_fields.items()
    if _numeric(info)
]


def test_the_requests_have_numeric_fields_to_check() -> None:
    # (so that the tests below cannot pass by finding nothing)
    names = {param.id for param in NUMERIC_FIELDS}
    assert {"InspectRequest.stuck_after_seconds", "PruneRequest.older_than_days"} <= names


@pytest.mark.parametrize(("model", "name"), NUMERIC_FIELDS)
def test_every_numeric_request_field_has_an_upper_bound(model: type[BaseModel], name: str) -> None:
    metadata = model.model_fields[name].metadata
    bounds = [m for m in metadata if isinstance(m, (annotated_types.Le, annotated_types.Lt))]
    assert bounds, f"{model.__name__}.{name} needs le= (a sane upper bound, in its description)"


class _Unreachable:
    """A backend a refused request never reaches."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the request ran ({name}) although it should have been refused")


@pytest.mark.parametrize("value", HUGE, ids=["1e300", "10**30", "inf", "nan"])
@pytest.mark.parametrize(("model", "name"), NUMERIC_FIELDS)
def test_a_huge_number_is_an_invalid_request_and_nothing_runs(
    model: type[BaseModel], name: str, value: float
) -> None:
    # Given a request of the command whose field is out of any sane range
    command = get_args(model.model_fields["command"].annotation)[0]
    body = {"command": command, **REQUIRED.get(command, {}), name: value}
    # When the operator API serves it (json.dumps writes inf and nan as Python's json reads them)
    reply = serve(json.dumps(body), caller=CALLER, access="operate", backend=_Unreachable())  # type: ignore[arg-type]
    # Then it is refused as invalid, naming the field, and no command ran
    assert (reply.outcome, reply.status_code) == (INVALID, 400), reply.body
    assert name in reply.body["error"]


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "--stuck-after", "1e300"],
        ["prune", "--older-than-days", "1e300"],
        ["redrive", "--max", str(10**30)],
    ],
    ids=["inspect", "prune", "redrive"],
)
def test_the_cli_refuses_the_same_numbers_as_a_usage_error(args: list[str]) -> None:
    # Given the operator's CLI (its options' ranges are the requests' bounds)
    from click.testing import CliRunner

    from sweeper_cli import main

    # When a command is given a number past its request's bound
    result = CliRunner().invoke(main, args)
    # Then it is a one-line usage error naming the option, before anything is reached
    assert result.exit_code == 2, result.output
    assert "Invalid value for" in result.output
    assert args[1] in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
