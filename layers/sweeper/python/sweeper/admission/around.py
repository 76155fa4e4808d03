"""A wrapping regime's base: each part of the `Admission` contract is the wrapped one's unless
the wrapper says otherwise (adaptive.py, live.py: a wrapper changes one or two of them)."""

from __future__ import annotations

from sweeper.admission.base import Admission, Closure, Deferral, Permit, TimeLeft
from sweeper.models import OutcomeClass
from sweeper.vendor_reading import VendorReading


class Around:
    """`inner`'s admission, part for part."""

    def __init__(self, inner: Admission) -> None:
        self._inner = inner

    def admit(self, time_left: TimeLeft) -> Permit | Deferral:
        return self._inner.admit(time_left)

    def ended(self, request_sent_at: float | None, reading: VendorReading | None = None) -> None:
        self._inner.ended(request_sent_at, reading)

    def close(
        self, outcome: OutcomeClass, retry_after_seconds: float | None, limit_value: str | None
    ) -> Closure:
        return self._inner.close(outcome, retry_after_seconds, limit_value)

    def done(self) -> None:
        self._inner.done()
