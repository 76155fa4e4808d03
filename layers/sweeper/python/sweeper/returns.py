"""Work that met an unreachable ledger goes back to its queue in seconds, not a timeout later.

A consumer or intake record that could not be settled because the ledger was unreachable
(`LedgerUnavailableError`: a restart, a failover, a lost connection) is returned as a failure
like any other, but first its visibility is shortened to a bounded backoff: about
LEDGER_RETURN_BASE_SECONDS on its first receive, doubling with each receive up to
LEDGER_RETURN_CAP_SECONDS, jittered so a restart's returns spread. Left alone it would come back
after the queue's visibility timeout: six function timeouts.

The last FULL_TIMEOUT_RECEIVES receives before the DLQ keep the queue's own timeout, so an outage
longer than the short returns still has the old time to clear before a message dead-letters.
When the visibility call itself fails nothing is lost: the messages are logged by id and come
back after the queue's own timeout, as before.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.limiter.backoff import ledger_return_delay
from sweeper.observability import Metric, MetricSink
from sweeper.sqs_queue import Hide, Visibility

logger = logging.getLogger(__name__)

#: The ceiling of the first return's delay (it is drawn from half of it up to it).
LEDGER_RETURN_BASE_SECONDS = 2.0
#: The longest short return: a record back within seconds of the ledger coming back.
LEDGER_RETURN_CAP_SECONDS = 10.0
#: This many of a message's last receives before the DLQ keep the queue's visibility timeout.
FULL_TIMEOUT_RECEIVES = 2


@dataclass(frozen=True, slots=True)
class Unsettled:
    """A received message that met an unreachable ledger."""

    message_id: str
    receipt_handle: str
    receives: int  # its ApproximateReceiveCount, this receive included

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Unsettled:
        """The SQS event record (as Lambda delivers it) that met an unreachable ledger."""
        return cls(
            str(record.get("messageId", "")),
            str(record.get("receiptHandle", "")),
            receive_count(record.get("attributes")),
        )


def receive_count(attributes: object) -> int:
    """The ApproximateReceiveCount of an SQS event record's attributes (1 when unreadable)."""
    raw = attributes.get("ApproximateReceiveCount") if isinstance(attributes, dict) else None
    try:
        return max(1, int(str(raw)))
    except ValueError:
        return 1


def return_soon(
    unsettled: Sequence[Unsettled],
    visibility: Visibility,
    *,
    max_receive_count: int,
    rng: random.Random,
    metrics: MetricSink,
) -> list[str]:
    """Shorten the visibility of what met an unreachable ledger; the message ids shortened."""
    if not unsettled:
        return []
    metrics.add_metric(Metric.LEDGER_UNREACHED, "Count", len(unsettled))
    hides = [
        Hide(
            item.message_id,
            item.receipt_handle,
            ledger_return_delay(
                item.receives,
                base=LEDGER_RETURN_BASE_SECONDS,
                cap=LEDGER_RETURN_CAP_SECONDS,
                rng=rng,
            ),
        )
        for item in unsettled
        if item.receives + FULL_TIMEOUT_RECEIVES <= max_receive_count
    ]
    missed = set(visibility.hide_each(hides)) if hides else set()
    if missed:
        logger.warning(
            "ledger unreachable; visibility not shortened, back after the queue's timeout",
            extra={"message_ids": sorted(missed)},
        )
    shortened = [hide.message_id for hide in hides if hide.message_id not in missed]
    logger.warning(
        "ledger unreachable; returned",
        extra={
            "message_ids": [item.message_id for item in unsettled],
            "shortened": len(shortened),
        },
    )
    return shortened
