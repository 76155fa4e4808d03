"""The consumer: settle each delivered job at most once, recording every outcome in the ledger.

This facade re-exports the package's public names, split the way Powertools splits a utility:
batch.py (the SQS batch: parse, one ledger read, the parallel processor and the order its
threads take records in), delivery.py (one record's way through its admission, the call and
the outcome paths: the limits themselves are sweeper.admission's), and idempotency.py (the
guarded call and all of sweeper's Powertools idempotency assembly). A test that replaces a
module constant replaces it in the module that reads it.
"""

from sweeper.consumer.batch import (
    InOrder,
    ParallelBatchProcessor,
    RecordOrder,
    parse_body,
    process_batch,
)
from sweeper.consumer.delivery import (
    MIN_CALL_SECONDS,
    RATE_DEFERRAL_JITTER_SECONDS,
    Clock,
    ConsumerDeps,
    Deferred,
)
from sweeper.consumer.idempotency import (
    Attempt,
    GuardedCall,
    Idempotent,
    Prepare,
    dynamodb_idempotent,
    guard_with_idempotency,
    job_idempotency_config,
)

__all__ = [
    "MIN_CALL_SECONDS",
    "RATE_DEFERRAL_JITTER_SECONDS",
    "Attempt",
    "Clock",
    "ConsumerDeps",
    "Deferred",
    "GuardedCall",
    "Idempotent",
    "InOrder",
    "ParallelBatchProcessor",
    "Prepare",
    "RecordOrder",
    "dynamodb_idempotent",
    "guard_with_idempotency",
    "job_idempotency_config",
    "parse_body",
    "process_batch",
]
