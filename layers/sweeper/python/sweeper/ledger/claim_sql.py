"""The producer's statements (`ledger.claims`): its runs, and claiming, releasing and reclaiming
leases, with the counts its budget is taken from.

Every UPDATE names the state(s) it moves from (`status = ANY(%(from)s)` with the sources taken
from `sweeper.models.TRANSITIONS`), so a stale worker can never move a row the wrong way.
"""

from typing import Final

# Return leases that expired at or before %(expired_before)s to pending (the producer passes a time
# one visibility timeout after the last publish: sweeper.producer.backpressure). SKIP LOCKED: a row
# a consumer is settling right now is left to it. Uses sweeper_jobs_leased_expiry; a page at a time.
RECLAIM_EXPIRED: Final = """
WITH expired AS (
    SELECT id FROM sweeper_jobs
    WHERE policy = %(policy)s AND status = 'leased' AND lease_expires_at <= %(expired_before)s
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE sweeper_jobs j
SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = %(now)s
WHERE j.id = ANY(ARRAY(SELECT id FROM expired))  -- by primary key: see CLAIM_DUE's lock step
  AND (j.status = ANY(%(from)s)) IS TRUE
RETURNING j.id
"""

# Claim due pending rows of one policy, fairly, and lease them to a batch. The caller commits at
# once: no lock outlives this statement's transaction. The batch (the owner) becomes the job's
# carrier unless an earlier batch already carries it (a resend after its lease expired): `resent`
# says which (migration 0005).
#
# Fairness: tenants take turns. The candidates are each tenant's earliest due rows (an equal
# share of the page, found by a loose index scan over sweeper_jobs_pending_tenant_due: one probe
# per tenant holding pending rows) plus the policy's %(window)s earliest due rows
# (sweeper_jobs_pending_due, so a page fills whatever the tenants hold). A row's turn is its rank
# within its tenant by due time; the page is taken by turn, then due time: every tenant with due
# work has its first row in the page before any tenant has its second, so a backlog delays no
# other tenant's due work by more than one claim (while the tenants with due work are fewer than
# the page).
#
# Per-scope cap: a scope never holds more than %(scope_cap)s unexpired leases (NULL: no cap), its
# rows counted in the order they would be taken, so a capped scope leaves its room to the others.
# Rows of the scopes in %(closed)s (gate closed) and of the tenants in %(closed_tenants)s (a
# closed key of a tenant-keyed limit, sweeper.producer.claim_bounds) are passed over, unchanged:
# their due time and attempts stay as they are (a filter, so a closed scope's due rows ahead of a
# tenant's first open one add to the cost; a closed tenant takes no share of the page).
#
# Locking: the candidates are read without locks (a window function cannot lock); then, in turn
# order, each is locked by its primary key FOR UPDATE SKIP LOCKED and re-checked as it is now
# (still pending, still due) until the page is full: the LIMIT counts only rows this claim locked,
# so two claimers never wait on, or return, the same row, and no more than a page is locked. When
# concurrent claimers hold the candidates, the page goes on in due order through the next
# %(fallback)s due rows (sweeper_jobs_pending_due, read only that far) of the scopes that a whole
# page more cannot take past their cap: a claimer is not left empty-handed while due rows nobody
# holds remain.
# Run before CLAIM_DUE in its transaction. The planner cannot see the per-tenant LIMIT, so it
# estimates the candidates at thousands of times their number, and past jit_above_cost it would
# spend most of a second compiling a statement that runs in milliseconds (measured on 1M rows).
CLAIM_WITHOUT_JIT: Final = "SET LOCAL jit = off"

CLAIM_DUE: Final = """
WITH RECURSIVE tenants AS (
    (SELECT tenant_id FROM sweeper_jobs
     WHERE policy = %(policy)s AND status = 'pending'
     ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT j.tenant_id FROM sweeper_jobs j
            WHERE j.policy = %(policy)s AND j.status = 'pending' AND j.tenant_id > t.tenant_id
            ORDER BY j.tenant_id LIMIT 1)
    FROM tenants t WHERE t.tenant_id IS NOT NULL
), share AS (
    SELECT ceil(%(limit)s::numeric / greatest(1, count(*)))::bigint AS per_tenant
    FROM tenants WHERE tenant_id IS NOT NULL AND tenant_id <> ALL(%(closed_tenants)s)
), candidates AS (
    SELECT c.id, c.tenant_id, c.scope, c.next_attempt_at,
           row_number() OVER (PARTITION BY c.tenant_id ORDER BY c.next_attempt_at, c.id) AS turn
    FROM (
        SELECT h.* FROM tenants t CROSS JOIN LATERAL (
            SELECT j.id, j.tenant_id, j.scope, j.next_attempt_at FROM sweeper_jobs j
            WHERE j.policy = %(policy)s AND j.status = 'pending' AND j.tenant_id = t.tenant_id
              AND j.next_attempt_at <= %(now)s AND j.scope <> ALL(%(closed)s)
            ORDER BY j.next_attempt_at, j.id
            LIMIT (SELECT per_tenant FROM share)
        ) h
        WHERE t.tenant_id IS NOT NULL AND t.tenant_id <> ALL(%(closed_tenants)s)
        UNION
        (SELECT id, tenant_id, scope, next_attempt_at FROM sweeper_jobs
         WHERE policy = %(policy)s AND status = 'pending' AND next_attempt_at <= %(now)s
           AND scope <> ALL(%(closed)s) AND tenant_id <> ALL(%(closed_tenants)s)
         ORDER BY next_attempt_at, id
         LIMIT %(window)s)
    ) c
), busy AS (
    -- per scope, what COUNT_ON_CONSUMERS counts for the policy: one definition of in flight
    SELECT scope, count(*) AS leases FROM sweeper_jobs
    WHERE %(scope_cap)s::bigint IS NOT NULL
      AND policy = %(policy)s AND status = 'leased' AND lease_expires_at > %(expired_before)s
      AND next_attempt_at <= %(now)s
    GROUP BY scope
), ranked AS (
    SELECT c.id, c.turn, c.next_attempt_at,
           coalesce(b.leases, 0) + row_number() OVER (
               PARTITION BY c.scope ORDER BY c.turn, c.next_attempt_at, c.id) AS scope_load
    FROM candidates c LEFT JOIN busy b ON b.scope = c.scope
), tight AS (
    SELECT s.scope FROM (
        SELECT scope, leases AS load FROM busy
        UNION ALL
        SELECT scope, count(*) FROM candidates GROUP BY scope
    ) s
    GROUP BY s.scope
    HAVING sum(s.load) + %(limit)s > %(scope_cap)s::bigint
), due AS (
    SELECT locked.id FROM (
        (SELECT r.id FROM ranked r
         WHERE %(scope_cap)s::bigint IS NULL OR r.scope_load <= %(scope_cap)s::bigint
         ORDER BY r.turn, r.next_attempt_at, r.id)
        UNION ALL
        (SELECT f.id FROM (
             SELECT id, scope FROM sweeper_jobs
             WHERE policy = %(policy)s AND status = 'pending' AND next_attempt_at <= %(now)s
               AND scope <> ALL(%(closed)s) AND tenant_id <> ALL(%(closed_tenants)s)
             ORDER BY next_attempt_at, id
             LIMIT %(fallback)s
         ) f
         WHERE f.id NOT IN (SELECT id FROM candidates)
           AND f.scope NOT IN (SELECT scope FROM tight))
    ) pick CROSS JOIN LATERAL (
        -- "(...) IS TRUE", the same test here (status is never NULL), does not imply the
        -- partial indexes' "status = 'pending'", so the row is found by its primary key. Written
        -- plainly, the planner may walk sweeper_jobs_pending_due for each pick instead: it does
        -- when the statistics still say few rows are pending (a large schedule into a ledger of
        -- settled rows, before the next ANALYZE): 10 s for a claim of 1,000 of 75,000 rows.
        SELECT j.id FROM sweeper_jobs j
        WHERE j.id = pick.id AND (j.status = 'pending') IS TRUE AND j.next_attempt_at <= %(now)s
        FOR UPDATE SKIP LOCKED
    ) locked
    LIMIT %(limit)s
)
UPDATE sweeper_jobs j
SET status = 'leased', lease_owner = %(owner)s, lease_expires_at = %(expires)s,
    updated_at = %(now)s, batch_id = coalesce(j.batch_id, %(owner)s)
WHERE j.id = ANY(ARRAY(SELECT id FROM due))  -- by primary key, as above: a join with `due`
  AND (j.status = ANY(%(from)s)) IS TRUE      -- could walk the table once per locked row
RETURNING j.id, j.policy_version, j.tenant_id, j.object_id, j.scope, j.operation_key,
          j.attempt_count, j.next_attempt_at, j.batch_id <> %(owner)s AS resent, j.params
"""

# Give back rows whose messages were not published. Only this batch's own leases are touched;
# a job this batch's claim made its carrier is carried by no batch again.
RELEASE_LEASES: Final = """
UPDATE sweeper_jobs
SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = %(now)s,
    batch_id = CASE WHEN batch_id = %(owner)s THEN NULL ELSE batch_id END
WHERE id = ANY(%(ids)s) AND status = ANY(%(from)s) AND lease_owner = %(owner)s
RETURNING id
"""

# Leased rows of one policy the consumers may still hold: not reclaimable yet and not sent back
# to wait (a deferred row's next_attempt_at is ahead, its message hidden until then). The depth
# the producer's budget is compared with (sweeper.producer.backpressure;
# sweeper_jobs_leased_expiry).
COUNT_ON_CONSUMERS: Final = """
SELECT count(*) FROM sweeper_jobs
WHERE policy = %(policy)s AND status = 'leased' AND lease_expires_at > %(expired_before)s
  AND next_attempt_at <= %(now)s
"""

# Jobs of one policy settled (succeeded or failed) in (since, now], with the first and last
# settlement: the consumers' achieved rate (sweeper_jobs_settled_completed).
SETTLED_BETWEEN: Final = """
SELECT count(*), min(completed_at), max(completed_at) FROM sweeper_jobs
WHERE status IN ('succeeded', 'failed') AND completed_at > %(since)s AND completed_at <= %(now)s
  AND policy = %(policy)s
"""

# The due time of the oldest eligible pending row (first entry of sweeper_jobs_pending_due).
OLDEST_ELIGIBLE: Final = """
SELECT min(next_attempt_at) FROM sweeper_jobs
WHERE policy = %(policy)s AND status = 'pending' AND next_attempt_at <= %(now)s
"""

START_RUN: Final = """
INSERT INTO sweeper_runs (batch_id, policy, scheduled_at, started_at)
VALUES (%(batch_id)s, %(policy)s, %(scheduled_at)s, %(now)s)
ON CONFLICT (policy, scheduled_at) DO UPDATE SET invocations = sweeper_runs.invocations + 1
RETURNING batch_id, invocations
"""

FINISH_RUN: Final = """
UPDATE sweeper_runs
SET finished_at = %(now)s, reclaimed = %(reclaimed)s, discovered = %(discovered)s,
    published = %(published)s, publish_failures = %(publish_failures)s,
    oldest_eligible_age_seconds = %(oldest_age)s, stop_reason = %(stop_reason)s,
    resent = %(resent)s, oldest_released_age_seconds = %(oldest_released_age)s
WHERE batch_id = %(batch_id)s
"""
