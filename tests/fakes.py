"""In-memory fakes for the seams that have more than one implementation."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

from sweeper.errors import PublishError
from sweeper.ledger.store import Ledger
from sweeper.sqs_queue import OutgoingMessage


class FakePublisher:
    """Accepts messages, except the entry ids told to fail, or every call after `break_after`.

    Safe to call from several threads (the producer publishes concurrently); calls are numbered
    in the order they arrive.
    """

    def __init__(self, fail_ids: set[str] | None = None, break_after: int | None = None) -> None:
        self.fail_ids = fail_ids or set()
        self.break_after = break_after
        self.sent: list[OutgoingMessage] = []
        self.calls = 0
        self._lock = threading.Lock()

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        assert len(messages) <= 10
        with self._lock:
            self.calls += 1
            if self.break_after is not None and self.calls > self.break_after:
                raise PublishError("SendMessageBatch failed: EndpointConnectionError")
            failed = [m.entry_id for m in messages if m.entry_id in self.fail_ids]
            self.sent.extend(m for m in messages if m.entry_id not in self.fail_ids)
            return failed


def unexpired_leases(ledger: Ledger, policy: str, now: datetime) -> int:
    """The policy's leased rows whose lease has not expired at `now`: what was in flight."""
    with ledger.transaction() as conn:
        row = conn.execute(
            "SELECT count(*) FROM sweeper_jobs"
            " WHERE policy = %s AND status = 'leased' AND lease_expires_at > %s",
            (policy, now),
        ).fetchone()
    assert row is not None
    return int(row[0])
