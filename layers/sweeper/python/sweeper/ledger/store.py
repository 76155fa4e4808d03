"""The job store: the only code that reads or writes ledger rows.

`Ledger` is one object for every caller, joined from one part per caller over one executor
(`sweeper.ledger.executor`: one connection, one transaction at a time under one lock):
scheduling (`sweeper.ledger.scheduling`), the producer (`claims`), the consumer and redrive
(`outcomes`), the operator, audit and the pause switch (`console`), and retention
(`retention`). The row types are in `sweeper.ledger.rows`. Each method is one short
transaction: a claim commits before anything is published, so no lock is ever held across a
network call.
"""

from __future__ import annotations

from sweeper.ledger.claims import (
    CLAIM_FALLBACK_PAGES,
    CLAIM_WINDOW_PAGES,
    ProducerLedger,
    taking_turns,
)
from sweeper.ledger.console import OperatorLedger
from sweeper.ledger.executor import connect_failure
from sweeper.ledger.outcomes import ConsumerLedger
from sweeper.ledger.retention import RetentionLedger
from sweeper.ledger.rows import BatchAudit, InspectRow, PolicyState, ScheduleResult
from sweeper.ledger.scheduling import (
    SCHEDULE_ATTEMPTS,
    SCHEDULE_BACKOFF_SECONDS,
    SchedulerLedger,
    _backoff,
)

__all__ = [
    "CLAIM_FALLBACK_PAGES",
    "CLAIM_WINDOW_PAGES",
    "SCHEDULE_ATTEMPTS",
    "SCHEDULE_BACKOFF_SECONDS",
    "BatchAudit",
    "InspectRow",
    "Ledger",
    "PolicyState",
    "ScheduleResult",
    "_backoff",
    "connect_failure",
    "taking_turns",
]


class Ledger(SchedulerLedger, ProducerLedger, ConsumerLedger, OperatorLedger, RetentionLedger):
    """PostgreSQL job store. One connection, opened on first use and reopened if it broke.

    Shared by the threads of one consumer batch (`consumer.parallel_calls`), which take turns on
    the connection: each statement is one short transaction, held under a lock, so ledger writes
    are serialised, never interleaved (a write takes milliseconds, a vendor call far longer).
    Separate processes and the local poller's workers each build their own.
    """
