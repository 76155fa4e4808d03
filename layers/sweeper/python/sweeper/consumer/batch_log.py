"""One log line per batch: its deliveries' outcomes as counts, keys only where something went wrong.

A line per job cost about 500 bytes of CloudWatch Logs for every success (measured on a batch
of 100 accepted calls, tests/integration/test_batch_log.py); the ledger already holds every
job's outcome, trace id and history (`sweeper inspect`). So a batch's deliveries count their
outcomes here, from its threads, and the batch writes one `batch` line when it ends:

    {"message": "batch", "records": 100, "outcomes": {"settled": 98, "terminal": 2},
     "problems": {"terminal": ["exports:t-1:o-7:v1", ...]}}

`problems` names the operation keys (message ids, for a body that names none) of the outcomes
in PROBLEM_OUTCOMES only, the first PROBLEM_KEYS_LISTED of them; `problems_unlisted` counts
the others. The per-job lines are still written: a warning or error for each
problem, as before (the runbook reads them), and at DEBUG for the rest, so an operator who sets
the consumer's `POWERTOOLS_LOG_LEVEL=DEBUG` sees a line per job again (docs/runbook.md).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from enum import StrEnum


class Outcome(StrEnum):
    """What became of one record of a batch, as the batch line counts it."""

    SETTLED = "settled"  # accepted or absent: succeeded in the ledger
    DUPLICATE = "duplicate"  # already settled: acknowledged uncalled
    HELD = "held"  # held or cancelled: acknowledged uncalled
    NOT_YET_DUE = "not_yet_due"  # before its job's time: acknowledged uncalled
    SNOOZED = "snoozed"  # the vendor's "not now": back later, no attempt spent
    DEFERRED = "deferred"  # a wait for its slot or gate, or no Lambda time left: back later
    IN_PROGRESS = "in_progress_elsewhere"  # another delivery of the job is calling
    RETRY = "will_retry"  # transient or unknown: an attempt spent, back after a backoff
    SCOPE_CLOSED = "scope_closed"  # throttled or auth: its scope closed, back at the reopening
    TERMINAL = "terminal"  # permanent: failed at once
    EXHAUSTED = "exhausted"  # failed after max_attempts
    SNOOZE_EXHAUSTED = "snooze_exhausted"  # failed after max_snooze_seconds
    MALFORMED = "malformed"  # a body that is not a job message: dropped
    ORPHAN = "orphan"  # names no ledger job: dropped
    MISMATCHED = "mismatched"  # disagrees with its ledger row: dropped
    LEDGER_UNREACHED = "ledger_unreached"  # met an unreachable ledger: back in seconds
    ERROR = "error"  # raised anything else (logged by Powertools' batch processor): back later


#: The outcomes whose keys the batch line names: something went wrong for those jobs.
PROBLEM_OUTCOMES = frozenset(
    {
        Outcome.RETRY,
        Outcome.SCOPE_CLOSED,
        Outcome.TERMINAL,
        Outcome.EXHAUSTED,
        Outcome.SNOOZE_EXHAUSTED,
        Outcome.MALFORMED,
        Outcome.ORPHAN,
        Outcome.MISMATCHED,
        Outcome.LEDGER_UNREACHED,
        Outcome.ERROR,
    }
)

#: The problem keys the batch line names at most (the first counted); the rest are counted.
PROBLEM_KEYS_LISTED = 50


class BatchLog:
    """The outcomes of one batch's records, counted from its threads, written as one line."""

    def __init__(self) -> None:
        self._counts: Counter[Outcome] = Counter()
        self._problems: dict[Outcome, list[str]] = {}
        self._listed = 0
        self._unlisted = 0
        self._lock = threading.Lock()

    def count(self, outcome: Outcome, key: str) -> None:
        """One record ended `outcome`; `key` (its operation key or message id) is kept for a
        problem only, while fewer than PROBLEM_KEYS_LISTED are."""
        with self._lock:
            self._counts[outcome] += 1
            if outcome not in PROBLEM_OUTCOMES:
                return
            if self._listed < PROBLEM_KEYS_LISTED:
                self._problems.setdefault(outcome, []).append(key)
                self._listed += 1
            else:
                self._unlisted += 1

    def fields(self, records: int) -> dict[str, object]:
        """The batch line's fields: its record count, outcome counts and problem keys."""
        with self._lock:
            fields: dict[str, object] = {
                "records": records,
                "outcomes": {o.value: n for o, n in sorted(self._counts.items())},
            }
            if self._problems:
                fields["problems"] = {o.value: list(k) for o, k in sorted(self._problems.items())}
            if self._unlisted:
                fields["problems_unlisted"] = self._unlisted
            return fields

    def write(self, logger: logging.Logger, records: int) -> None:
        """The batch line, at INFO: a warning's level is for the per-job lines it sums up."""
        logger.info("batch", extra=self.fields(records))
