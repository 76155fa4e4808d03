"""The producer's part of the ledger: its runs, and claiming, releasing and reclaiming leases.

Called by `sweeper.producer.run` (and discovery's runs, the webhook intake's claim). Each claim
commits before anything is published, so no lock is ever held across a network call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from sweeper.ledger import claim_sql
from sweeper.ledger.executor import Executor, _moves, _serialised, statement_failure
from sweeper.ledger.rows import RunStart, Settled
from sweeper.ledger.wake import NEXT_CLAIMABLE
from sweeper.models import ClaimedJob, JobStatus

#: A claim also reads this many pages of the policy's earliest due rows besides each tenant's
#: share, so a page fills when few tenants hold work and when concurrent claimers hold some of
#: the candidates locked (those are skipped, never waited for).
CLAIM_WINDOW_PAGES = 2
#: When concurrent claimers hold every candidate, a claim goes on through at most this many pages
#: of further due rows in due order (the pages those claimers are taking).
CLAIM_FALLBACK_PAGES = 8


class ProducerLedger(Executor):
    """The producer's side of `sweeper.ledger.store.Ledger`."""

    @_serialised
    def _claim_rows(self, params: dict[str, Any]) -> list[TupleRow]:
        conn = self._connection()
        try:
            with conn.transaction():
                conn.execute(claim_sql.CLAIM_WITHOUT_JIT)
                return conn.execute(claim_sql.CLAIM_DUE, params).fetchall()
        except psycopg.Error as exc:
            raise statement_failure(exc) from exc

    def next_wake(self, policy: str, writer: int) -> tuple[datetime | None, bool]:
        """The ledger's next claimable time for the policy, and whether every transaction up
        to `writer` (the wake item's, as read before the run) had ended when it was read: only
        then does that time cover every write that lowered the item (sweeper.ledger.wake)."""
        rows = self._execute(NEXT_CLAIMABLE, {"policy": policy, "writer": writer})
        at, settled = rows[0]
        return at, bool(settled)

    def start_run(
        self, policy: str, scheduled_at: datetime, batch_id: str, now: datetime
    ) -> RunStart:
        rows = self._execute(
            claim_sql.START_RUN,
            {"batch_id": batch_id, "policy": policy, "scheduled_at": scheduled_at, "now": now},
        )
        holder, invocations = rows[0]
        return RunStart(batch_id=str(holder), duplicate=invocations > 1)

    def finish_run(
        self,
        batch_id: str,
        now: datetime,
        *,
        stop_reason: str,
        reclaimed: int = 0,
        discovered: int = 0,
        published: int = 0,
        publish_failures: int = 0,
        oldest_age_seconds: float | None = None,
        resent: int = 0,
        oldest_released_age_seconds: float | None = None,
    ) -> None:
        self._execute(
            claim_sql.FINISH_RUN,
            {
                "resent": resent,
                "oldest_released_age": oldest_released_age_seconds,
                "batch_id": batch_id,
                "now": now,
                "reclaimed": reclaimed,
                "discovered": discovered,
                "published": published,
                "publish_failures": publish_failures,
                "oldest_age": oldest_age_seconds,
                "stop_reason": stop_reason,
            },
        )

    def reclaim_expired(
        self, policy: str, now: datetime, limit: int, *, expired_before: datetime | None = None
    ) -> int:
        """Return up to `limit` leases expired by `expired_before` (default: now) to pending."""
        rows = self._execute(
            claim_sql.RECLAIM_EXPIRED,
            {
                "policy": policy,
                "now": now,
                "expired_before": now if expired_before is None else expired_before,
                "limit": limit,
                "from": _moves(JobStatus.PENDING, JobStatus.LEASED),
            },
        )
        return len(rows)

    def claim(
        self,
        policy: str,
        owner: str,
        now: datetime,
        lease: timedelta,
        limit: int,
        closed_scopes: Sequence[str] = (),
        scope_cap: int | None = None,
        expired_before: datetime | None = None,
        closed_tenants: Sequence[str] = (),
    ) -> list[ClaimedJob]:
        """Lease up to `limit` due rows to `owner`, tenants taking turns, and commit.

        Each tenant with due work has its earliest row in the page before any tenant has a
        second one; within a turn, earliest due first. The rows come back in that order (see
        `taking_turns`), which is the order they are published in. A scope never holds more than
        `scope_cap` rows on the consumers (None: no cap), counted as `count_on_consumers`
        counts them: leases not reclaimable by `expired_before` (default: now) and not deferred
        past `now`. Rows of `closed_scopes` (whose gate is closed) are left as they are, due
        time included: leased and published now, they would only come back from the consumer;
        so are the rows of `closed_tenants` (a tenant-keyed limit closed for them).
        """
        if limit <= 0 or (scope_cap is not None and scope_cap <= 0):
            return []
        rows = self._claim_rows(
            {
                "policy": policy,
                "owner": owner,
                "now": now,
                "expires": now + lease,
                "limit": limit,
                "window": limit * CLAIM_WINDOW_PAGES,
                "fallback": limit * CLAIM_FALLBACK_PAGES,
                "scope_cap": scope_cap,
                "expired_before": now if expired_before is None else expired_before,
                "from": _moves(JobStatus.LEASED, JobStatus.PENDING),
                "closed": list(closed_scopes),
                "closed_tenants": list(closed_tenants),
            },
        )
        # A claimed row's columns are ClaimedJob's fields in order (claim_sql's RETURNING).
        return taking_turns(ClaimedJob(*(*row[:8], bool(row[8]), row[9])) for row in rows)

    def release(self, ids: Sequence[int], owner: str, now: datetime) -> int:
        """Put back to pending the rows of this batch whose messages were not published."""
        if not ids:
            return 0
        rows = self._execute(
            claim_sql.RELEASE_LEASES,
            {
                "ids": list(ids),
                "owner": owner,
                "now": now,
                "from": _moves(JobStatus.PENDING, JobStatus.LEASED),
            },
        )
        return len(rows)

    def count_on_consumers(self, policy: str, now: datetime, expired_before: datetime) -> int:
        """Leased rows not reclaimable by `expired_before` and not deferred past `now`."""
        rows = self._execute(
            claim_sql.COUNT_ON_CONSUMERS,
            {"policy": policy, "now": now, "expired_before": expired_before},
        )
        return int(rows[0][0])

    def settled_between(self, policy: str, since: datetime, now: datetime) -> Settled:
        """How many of the policy's jobs settled in (since, now], and the first and last time."""
        rows = self._execute(
            claim_sql.SETTLED_BETWEEN, {"policy": policy, "since": since, "now": now}
        )
        count, first, last = rows[0]
        return Settled(int(count), first, last)

    def oldest_eligible_age(self, policy: str, now: datetime) -> float | None:
        """Seconds since the oldest eligible pending row became due; None when none is due."""
        rows = self._execute(claim_sql.OLDEST_ELIGIBLE, {"policy": policy, "now": now})
        oldest = rows[0][0]
        return None if oldest is None else max(0.0, (now - oldest).total_seconds())


def taking_turns(jobs: Iterable[ClaimedJob]) -> list[ClaimedJob]:
    """Claimed jobs in the order they are published: tenants take turns, and scopes do.

    The claim chose its rows fairly; the queue then hands them to the consumers about in the
    order they were sent. In due order one tenant's old backlog would fill whole batches, and a
    batch of one scope waits on that scope's rate alone while its threads could be calling
    others (measured: ten scopes at 10/s, 4 environments: 0.33 of the quota in due order, 0.93
    taking turns). So:

    - within a tenant, each of its scopes' n-th job before any of its scopes' (n+1)-th;
    - then each tenant's n-th job (in that order) before any tenant's (n+1)-th;
    - within a turn, each scope's n-th job overall first (scopes shared by tenants), then
      earliest due, then id.
    """
    earliest = datetime.min.replace(tzinfo=UTC)
    by_due = sorted(jobs, key=lambda j: (j.eligible_since or earliest, j.id))
    own_turn: Counter[tuple[str, str]] = Counter()  # per (tenant, scope)
    ranked: list[tuple[int, int, ClaimedJob]] = []
    for due_rank, job in enumerate(by_due):
        own_turn[job.tenant_id, job.scope] += 1
        ranked.append((own_turn[job.tenant_id, job.scope], due_rank, job))
    ranked.sort(key=lambda r: (r[0], r[1]))  # a tenant's scopes take turns, earliest due first
    tenant_turn: Counter[str] = Counter()
    scope_turn: Counter[str] = Counter()
    keyed: list[tuple[tuple[int, int, int], ClaimedJob]] = []
    for _, due_rank, job in ranked:
        tenant_turn[job.tenant_id] += 1
        scope_turn[job.scope] += 1
        keyed.append(((tenant_turn[job.tenant_id], scope_turn[job.scope], due_rank), job))
    keyed.sort(key=lambda k: k[0])
    return [job for _, job in keyed]
