"""Every function traces into X-Ray through Powertools' Tracer; outside Lambda it is off.

Not a unit test only because the X-Ray SDK's emitter opens (and, outside Lambda, never uses) a
UDP socket when the handlers build their tracer.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sweeper import observability
from sweeper.sqs_queue import trace_id

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(p.parent.name for p in (ROOT / "functions").glob("*/app.py"))
pytestmark = pytest.mark.integration

CAPTURE = "Tracer.capture_lambda_handler.<locals>.decorate"


def _chain(fn: Callable[..., Any]) -> list[Any]:
    """The handler and every function it wraps (functools.wraps keeps `__wrapped__`)."""
    chain: list[Any] = []
    current: Any = fn
    while current is not None:
        chain.append(current)
        current = getattr(current, "__wrapped__", None)
    return chain


def test_every_function_is_found() -> None:
    assert len(FUNCTIONS) >= 8
    assert {"consumer", "producer"} <= set(FUNCTIONS)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_handler_is_captured_by_the_shared_tracer_without_its_response(name: str) -> None:
    module = importlib.import_module(f"functions.{name}.app")
    assert module.tracer is observability.tracer()
    (decorate,) = [f for f in _chain(module.handler) if f.__code__.co_qualname == CAPTURE]
    free = dict(zip(decorate.__code__.co_freevars, decorate.__closure__ or (), strict=True))
    # A response may hold customer ids: it is never put into the trace.
    assert free["capture_response"].cell_contents is False


def test_the_tracer_is_off_outside_lambda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAMBDA_TASK_ROOT", raising=False)
    assert observability.tracer().disabled


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            "1-5759e988-bd862e3fe1be46a994272793",
        ),
        ("Sampled=0;Root=1-abc", "1-abc"),
        ("Parent=53995c3f42cd8ad8", None),
        ("", None),
        (None, None),
    ],
)
def test_the_trace_id_is_the_headers_root(header: str | None, expected: str | None) -> None:
    assert trace_id(header) == expected
