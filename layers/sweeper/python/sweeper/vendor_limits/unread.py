"""What an answer's reading left aside, counted and logged by the call's ids (never quoted).

A value a vendor sent that cannot be read (non-numeric, negative, out of bounds, the wrong kind
of reset for the configuration, a window of 0 s, a cost that is not a number) teaches nothing:
the last good state stands. It is still a fault of the vendor's answer an operator should see,
so each answer with one adds 1 to `VendorValuesIgnored`, and an execution environment logs each
distinct diagnostic at most once every SAID_EVERY_SECONDS: one line carrying the call's ids, the
code `vendor_values_ignored` and the diagnostics not said within that time (a field's configured
name and a fixed phrase: never a value, sweeper.vendor_reading).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Final

from sweeper.observability import Metric, MetricSink
from sweeper.vendor_reading import VendorReading

logger = logging.getLogger(__name__)

#: The code of the log line.
CODE = "vendor_values_ignored"
#: An environment logs a diagnostic again this long after it last did, at the earliest. Once a
#: minute rather than once a cold start: a warm environment lives for hours, and a fault that
#: persists (an epoch reset where seconds are configured, in every answer) stays in the last
#: minute's logs with a call's ids to follow, at a line a minute whatever the call rate.
SAID_EVERY_SECONDS: Final = 60.0


class Said:
    """When this environment last logged each diagnostic, on the admission's monotonic clock.

    The diagnostics are fixed phrases after a configured field's name (never a value): a few
    per policy, so each is kept for the environment's life."""

    def __init__(self) -> None:
        self._at: dict[str, float] = {}
        self._lock = threading.Lock()  # a batch's calls end on their own threads

    def due(self, diagnostics: Iterable[str], now: float) -> list[str]:
        """Those of `diagnostics` not logged within SAID_EVERY_SECONDS before `now`, sorted,
        each marked as logged at `now`."""
        with self._lock:
            due = sorted(
                diagnostic
                for diagnostic in set(diagnostics)
                if (last := self._at.get(diagnostic)) is None
                or not 0.0 <= now - last < SAID_EVERY_SECONDS
            )
            self._at.update(dict.fromkeys(due, now))
        return due


#: This execution environment's: built empty with the module, filled by its calls.
SAID = Said()


def report_unread(
    reading: VendorReading, ids: Mapping[str, object], metrics: MetricSink, now: float
) -> None:
    """Count what `reading` left aside, if anything, and log what was not said lately (`now`:
    the admission's monotonic clock; never raises for a reading)."""
    if not reading.diagnostics:
        return
    metrics.add_metric(Metric.VENDOR_VALUES_IGNORED, "Count", 1)
    ignored = SAID.due(reading.diagnostics, now)
    if ignored:
        logger.warning("vendor values ignored", extra={**ids, "code": CODE, "ignored": ignored})
