"""What an answer's reading left aside, counted and logged by the call's ids (never quoted).

A value a vendor sent that cannot be read (non-numeric, negative, out of bounds, the wrong kind
of reset for the configuration, a window of 0 s, a cost that is not a number) teaches nothing:
the last good state stands. It is still a fault of the vendor's answer an operator should see,
so each answer with one adds 1 to `VendorValuesIgnored` and logs one line carrying the call's
ids, the code `vendor_values_ignored` and the reading's diagnostics (a field's configured name
and a fixed phrase: never a value, sweeper.vendor_reading).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sweeper.observability import Metric, MetricSink
from sweeper.vendor_reading import VendorReading

logger = logging.getLogger(__name__)

#: The code of the log line.
CODE = "vendor_values_ignored"


def report_unread(reading: VendorReading, ids: Mapping[str, object], metrics: MetricSink) -> None:
    """Count and log what `reading` left aside, if anything (never raises for a reading)."""
    if not reading.diagnostics:
        return
    metrics.add_metric(Metric.VENDOR_VALUES_IGNORED, "Count", 1)
    ignored = sorted(set(reading.diagnostics))
    logger.warning("vendor values ignored", extra={**ids, "code": CODE, "ignored": ignored})
