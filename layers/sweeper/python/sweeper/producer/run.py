"""The producer: release due work from the ledger into the queue, then exit.

Per run: reclaim expired leases, then claim a page, commit, publish it (`publish_concurrency`
SendMessageBatch calls at once), release what failed; repeat until nothing is due, the in-flight
budget is reached, a limit every row holds is closed, or the time budget runs out. Claims are
short transactions and commit before any network call. The in-flight budget follows what the
consumers settle, within what the policy's limits drain in half a lease
(sweeper.producer.backpressure, sweeper.producer.claim_bounds).

When the ledger keeps a wake item (sweeper.ledger.wake), a run reads it first and returns without
connecting while nothing can be claimable yet and the last full read of the ledger is within the
policy's `producer_idle_check_seconds` (`not_due`); after it ran, it raises the item to the
ledger's next claimable time, unless a write lowered it meanwhile or may still commit.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from sweeper.config import Policy
from sweeper.errors import PublishError
from sweeper.ledger.store import Ledger
from sweeper.ledger.wake import may_skip
from sweeper.ledger.wake_refresh import raise_wake, read_wake
from sweeper.models import ClaimedJob, JobMessage
from sweeper.producer.backpressure import in_flight_budget, republish_delay_seconds, window_seconds
from sweeper.producer.claim_bounds import claim_bounds, held_rows
from sweeper.sqs_queue import SQS_MAX_BATCH, OutgoingMessage, Publisher

#: Stop when less than this many page-durations of budget are left (and never below the floor).
PAGE_TIME_MARGIN = 2.0
MIN_REMAINING_SECONDS = 1.0
#: The stop reason of a run skipped because its policy is paused.
PAUSED = "paused"
#: The stop reason of a run that found a limit every row holds closed (an app-wide limit).
LIMIT_CLOSED = "limit_closed"
#: The stop reason of a run that did not connect: the wake item says nothing can be claimable.
NOT_DUE = "not_due"
#: The stop reason of a second invocation for a scheduled time a run already holds.
DUPLICATE = "duplicate_invocation"

Clock = Callable[[], datetime]
#: The limiter keys whose gate is closed right now: scopes, and further limits' `NAME:KEY` (read
#: from the shared limiter before each claim; sweeper.producer.claim_bounds finds which rows they
#: hold).
ClosedScopes = Callable[[], Collection[str]]


def no_closed_scopes() -> Collection[str]:
    return ()


@dataclass(frozen=True, slots=True)
class ProducerReport:
    """What one run did; it is recorded in the run table, logged and turned into metrics."""

    batch_id: str
    policy: str
    scheduled_at: datetime
    duplicate_invocation: bool
    reclaimed: int = 0
    discovered: int = 0
    published: int = 0
    publish_failures: int = 0
    released: int = 0
    in_flight: int = 0
    oldest_eligible_age_seconds: float | None = None
    stop_reason: str = "drained"
    #: Published messages for jobs an earlier batch carries (their lease expired): re-sends.
    resent: int = 0
    #: The longest any published job had been eligible when this run claimed it.
    oldest_released_age_seconds: float | None = None
    #: The most rows this run would leave on the consumers (sweeper.producer.backpressure); 0 when
    #: the run did not get that far.
    in_flight_budget: int = 0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scheduled_at"] = self.scheduled_at.isoformat()
        return data


def new_batch_id() -> str:
    return str(uuid.uuid4())


def on_consumers(ledger: Ledger, policy: Policy, now: datetime) -> int:
    """The work a policy has on its consumers: leased rows not yet reclaimable and not sent back
    to wait. What the producer's budget is compared with, and what `sweeper status` shows."""
    republish_delay = timedelta(seconds=republish_delay_seconds(policy))
    return ledger.count_on_consumers(policy.name, now, now - republish_delay)


def run_producer(
    policy: Policy,
    scheduled_at: datetime,
    ledger: Ledger,
    publisher: Publisher,
    *,
    clock: Clock,
    remaining_seconds: Callable[[], float],
    batch_id: str | None = None,
    closed_scopes: ClosedScopes = no_closed_scopes,
    connect_always: bool = False,
) -> ProducerReport:
    """Release the policy's due work, within `remaining_seconds()`; see the module docstring.

    With a wake item, the run returns `not_due` without connecting while the item says nothing
    can be claimable within its trust bound (never when `connect_always`: an operator's
    release), and raises the item after it ran (sweeper.ledger.wake).

    Rows of scopes whose gate is closed are not claimed: they keep their due time and are
    claimed by the first run after the reopening, instead of bouncing off the closed gate. The
    same holds for every limit the claim can see (`sweeper.producer.claim_bounds`): a tenant-keyed
    limit's closed key holds its tenant's rows, and a closed app-wide limit ends the run
    (`limit_closed`) with nothing claimed. Each claim is bounded by every limit: the policy's
    rows on the consumers by the tightest app-wide limit, each scope's by its own.
    """
    batch_id = batch_id or new_batch_id()
    started = clock()
    wake = None if connect_always else read_wake(ledger, policy.name)
    trusted_for = timedelta(seconds=policy.producer_idle_check_seconds)
    if wake is not None and may_skip(wake, started, trusted_for):
        return _stopped_before_work(policy, scheduled_at, batch_id, NOT_DUE)
    try:
        report = _run_connected(
            policy,
            scheduled_at,
            ledger,
            publisher,
            batch_id,
            clock=clock,
            remaining_seconds=remaining_seconds,
            closed_scopes=closed_scopes,
        )
        if wake is not None and not report.duplicate_invocation:
            raise_wake(ledger, policy.name, wake, started)
    finally:
        if ledger.wake is not None:
            # No session is left open between runs: an idle cluster sees no connection.
            ledger.close()
    return report


def _stopped_before_work(
    policy: Policy, scheduled_at: datetime, batch_id: str, reason: str
) -> ProducerReport:
    """The report of a run that released nothing: not due, paused, or a duplicate."""
    return ProducerReport(
        batch_id, policy.name, scheduled_at, reason == DUPLICATE, stop_reason=reason
    )


def _run_connected(
    policy: Policy,
    scheduled_at: datetime,
    ledger: Ledger,
    publisher: Publisher,
    batch_id: str,
    *,
    clock: Clock,
    remaining_seconds: Callable[[], float],
    closed_scopes: ClosedScopes,
) -> ProducerReport:
    start = ledger.start_run(policy.name, scheduled_at, batch_id, clock())
    if start.duplicate:
        # The scheduler delivers at least once: the run for this time exists, so this one skips.
        return _stopped_before_work(policy, scheduled_at, start.batch_id, DUPLICATE)
    if ledger.is_paused(policy.name):
        # An operator paused the policy: the run is recorded as skipped, so `sweeper catch-up`
        # can release it later under its own batch id.
        ledger.finish_run(batch_id, clock(), stop_reason=PAUSED)
        return _stopped_before_work(policy, scheduled_at, batch_id, PAUSED)

    reclaimed = 0
    republish_delay = timedelta(seconds=republish_delay_seconds(policy))
    while True:
        at = clock()
        got = ledger.reclaim_expired(
            policy.name, at, policy.page_size, expired_before=at - republish_delay
        )
        reclaimed += got
        if got < policy.page_size or remaining_seconds() < MIN_REMAINING_SECONDS:
            break

    now = clock()
    oldest_age = ledger.oldest_eligible_age(policy.name, now)
    in_flight = on_consumers(ledger, policy, now)
    since = now - timedelta(seconds=window_seconds(policy))
    budget = in_flight_budget(policy, ledger.settled_between(policy.name, since, now))
    bounds = claim_bounds(policy)
    lease = timedelta(seconds=policy.lease_seconds)
    discovered = published = failures = released = resent = 0
    oldest_released: float | None = None
    stop_reason = "drained"
    page_seconds = 0.0
    try:
        while True:
            if remaining_seconds() < max(MIN_REMAINING_SECONDS, PAGE_TIME_MARGIN * page_seconds):
                stop_reason = "budget"
                break
            room = budget.limit - in_flight
            if room <= 0:
                stop_reason = "in_flight_cap" if budget.reason == "quota" else "backpressure"
                break
            held = held_rows(policy, closed_scopes())
            if held.everything is not None:
                stop_reason = LIMIT_CLOSED
                break
            page_started = time.monotonic()
            claimed_at = clock()
            claimed = ledger.claim(
                policy.name,
                batch_id,
                claimed_at,
                lease,
                min(policy.page_size, room),
                closed_scopes=held.scopes,
                scope_cap=bounds.scope_cap,
                expired_before=claimed_at - republish_delay,
                closed_tenants=held.tenants,
            )
            if not claimed:
                break
            discovered += len(claimed)
            sent, failed_ids, error = _publish(
                policy.name, claimed, batch_id, publisher, policy.publish_concurrency
            )
            published += sent
            failures += len(failed_ids)
            not_sent = set(failed_ids)
            for job in claimed:
                if job.id in not_sent:
                    continue
                resent += job.resent
                if job.eligible_since is not None:
                    age = max(0.0, (claimed_at - job.eligible_since).total_seconds())
                    oldest_released = age if oldest_released is None else max(oldest_released, age)
            released += ledger.release(failed_ids, batch_id, clock())
            in_flight += sent
            if error is not None:
                stop_reason = "publish_error"
                raise error
            page_seconds = time.monotonic() - page_started
            if len(claimed) < min(policy.page_size, room):
                break
    finally:
        ledger.finish_run(
            batch_id,
            clock(),
            reclaimed=reclaimed,
            discovered=discovered,
            published=published,
            publish_failures=failures,
            oldest_age_seconds=oldest_age,
            stop_reason=stop_reason,
            resent=resent,
            oldest_released_age_seconds=oldest_released,
        )
    return ProducerReport(
        batch_id=batch_id,
        policy=policy.name,
        scheduled_at=scheduled_at,
        duplicate_invocation=False,
        reclaimed=reclaimed,
        discovered=discovered,
        published=published,
        publish_failures=failures,
        released=released,
        in_flight=in_flight,
        oldest_eligible_age_seconds=oldest_age,
        stop_reason=stop_reason,
        resent=resent,
        oldest_released_age_seconds=oldest_released,
        in_flight_budget=budget.limit,
    )


def _publish(
    policy: str,
    claimed: list[ClaimedJob],
    batch_id: str,
    publisher: Publisher,
    concurrency: int = 1,
) -> tuple[int, list[int], PublishError | None]:
    """Publish a claimed page ten at a time, `concurrency` calls at once.

    Returns (sent, ids not sent, the error that stopped it). Entries the queue rejects are not
    sent. When a whole call fails, its rows count as not sent, no further call starts, and the
    rows of every call not started count as not sent too, so the caller releases them all before
    the error propagates: nothing stays leased without a message.
    """
    chunks = [claimed[i : i + SQS_MAX_BATCH] for i in range(0, len(claimed), SQS_MAX_BATCH)]
    stop = threading.Event()

    def send(chunk: list[ClaimedJob]) -> tuple[int, list[int], PublishError | None]:
        if stop.is_set():
            return 0, [job.id for job in chunk], None
        messages = [
            OutgoingMessage(
                entry_id=str(job.id),
                body=JobMessage.for_claim(policy, job, batch_id).to_body(),
                group_id=job.tenant_id,
            )
            for job in chunk
        ]
        try:
            rejected = publisher.send_batch(messages)
        except PublishError as exc:
            stop.set()
            return 0, [job.id for job in chunk], exc
        return len(chunk) - len(rejected), [int(entry_id) for entry_id in rejected], None

    if concurrency <= 1 or len(chunks) <= 1:
        results = [send(chunk) for chunk in chunks]
    else:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(chunks))) as pool:
            results = list(pool.map(send, chunks))
    sent = sum(result[0] for result in results)
    failed = [job_id for result in results for job_id in result[1]]
    error = next((result[2] for result in results if result[2] is not None), None)
    return sent, failed, error
