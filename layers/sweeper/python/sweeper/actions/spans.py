"""How an action's call shows in a trace: a span named by the policy's action that carries the
URL's template and the outcome's code, never a value the template was filled with.

The functions' tracer (`sweeper.observability.XRaySpans`) is one implementation; outside Lambda
there is none (`no_spans`). The HTTP client itself is not patched for tracing: X-Ray's patches
record each request's URL, ids and params included.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol


class Span(Protocol):
    def ended(self, code: str, status_code: int | None) -> None:
        """How the call ended: its short code, and the vendor's status when it answered."""
        ...


class CallSpans(Protocol):
    def __call__(
        self, name: str, *, method: str, url_template: str
    ) -> AbstractContextManager[Span]:
        """A span around one call, named `name`, describing it by `method` and `url_template`
        (the template with only `{api_url}` filled)."""
        ...


class _Untraced:
    def ended(self, code: str, status_code: int | None) -> None:
        pass


@contextmanager
def no_spans(name: str, *, method: str, url_template: str) -> Iterator[Span]:
    """No trace (the CLI, the local stack, tests)."""
    yield _Untraced()
