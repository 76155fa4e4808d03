"""Every statement the job store runs, parameterised, each with what it guarantees.

Every UPDATE names the state(s) it moves from (`status = ANY(%(from)s)` with the sources taken
from `sweeper.models.TRANSITIONS`), so a stale worker can never move a row the wrong way.
"""

from typing import Final

# Scheduling copies its rows into a staging table of the session (binary COPY: no parameter
# arrays to format), then upserts them with one statement. Temporary, so each session has its own
# and nothing is logged; emptied at every commit, so a retried or failed transaction leaves
# nothing behind. Created on first use in a session (a session holding a temporary table is
# pinned by RDS Proxy: only the schedulers, intake and discovery, ever create it).
CREATE_SCHEDULE_STAGE: Final = """
CREATE TEMPORARY TABLE IF NOT EXISTS sweeper_schedule_stage (
    tenant_id     text        NOT NULL,
    object_id     text        NOT NULL,
    scope         text        NOT NULL,
    operation_key text        NOT NULL,
    due_at        timestamptz NOT NULL,
    params        jsonb       NOT NULL
) ON COMMIT DELETE ROWS
"""

COPY_SCHEDULE_STAGE: Final = """
COPY sweeper_schedule_stage (tenant_id, object_id, scope, operation_key, due_at, params)
FROM STDIN (FORMAT BINARY)
"""

# A schedule inside a caller's transaction (no commit since the last one) starts from empty.
EMPTY_SCHEDULE_STAGE: Final = "DELETE FROM sweeper_schedule_stage"

# Idempotent upsert on the operation key, from the staging table. A repeat never duplicates a row
# and can only move due_at earlier; next_attempt_at follows only for a row never attempted, so an
# earlier due date cannot override a retry delay or a vendor's Retry-After. It never writes the
# status, so it cannot revive or unhold a job; it leaves a cancelled row as it is, and never
# moves a postponed row's due time (an operator's act, undone only by another).
#
# Params (migration 0010), for a key already held with other params: before the job's first
# claim (pending or held, never attempted, carried by no batch, in its first round) the newest
# win, and a `params_replaced` job event keeps what they replaced; once claimed, the row's
# params are kept (a call may already have carried them under this operation key, which the
# vendor replays as the first call's effect) and the repeat is counted as kept. `prior` locks
# the rows that exist, in key order, and reads them as they are now (FOR UPDATE re-reads a row
# a concurrent writer changed), which the upsert's RETURNING (new values only) cannot show.
#
# Counts the inserts, the due-time moves, the params replaced and the params kept. Rows are
# taken in operation-key order (the caller stages each key once), so concurrent upserts of the
# same rows take their row locks in the same order: they wait, never deadlock.
UPSERT_STAGED_JOBS: Final = """
WITH prior AS (
    SELECT j.id, j.operation_key, j.params, j.due_at, j.status, j.attempt_count,
           j.last_outcome, j.last_error_code, j.batch_id,
           (j.status IN ('pending', 'held') AND j.attempt_count = 0 AND j.batch_id IS NULL
            AND j.retry_round = 0) AS unclaimed
    FROM sweeper_jobs j JOIN sweeper_schedule_stage s ON s.operation_key = j.operation_key
    ORDER BY j.operation_key
    FOR UPDATE OF j
), upserted AS (
    INSERT INTO sweeper_jobs AS j (policy, policy_version, tenant_id, object_id, scope,
                                   operation_key, due_at, next_attempt_at, created_at, updated_at,
                                   params)
    SELECT %(policy)s, %(policy_version)s, s.tenant_id, s.object_id, s.scope, s.operation_key,
           s.due_at, s.due_at, %(now)s, %(now)s, s.params
    FROM sweeper_schedule_stage s
    CROSS JOIN (SELECT count(*) FROM prior) AS locked_first  -- prior runs (and locks) first
    ORDER BY s.operation_key
    ON CONFLICT (operation_key) DO UPDATE
    SET due_at = CASE WHEN EXCLUDED.due_at < j.due_at AND j.postponed_until IS NULL
                      THEN EXCLUDED.due_at ELSE j.due_at END,
        next_attempt_at = CASE WHEN EXCLUDED.due_at < j.due_at AND j.postponed_until IS NULL
                                    AND j.status IN ('pending', 'held') AND j.attempt_count = 0
                               THEN LEAST(j.next_attempt_at, EXCLUDED.due_at)
                               ELSE j.next_attempt_at END,
        params = CASE WHEN j.status IN ('pending', 'held') AND j.attempt_count = 0
                           AND j.batch_id IS NULL AND j.retry_round = 0
                      THEN EXCLUDED.params ELSE j.params END,
        updated_at = EXCLUDED.updated_at
    WHERE j.status <> 'cancelled' AND (
        (EXCLUDED.due_at < j.due_at AND j.postponed_until IS NULL)
        OR (j.params IS DISTINCT FROM EXCLUDED.params
            AND j.status IN ('pending', 'held') AND j.attempt_count = 0
            AND j.batch_id IS NULL AND j.retry_round = 0))
    RETURNING j.id, (xmax = 0) AS inserted, j.due_at, j.params
), changed AS (
    SELECT u.id, u.inserted, p.id IS NOT NULL AND u.due_at <> p.due_at AS moved,
           p.id IS NOT NULL AND u.params <> p.params AS replaced
    FROM upserted u LEFT JOIN prior p ON p.id = u.id
), events AS (
    INSERT INTO sweeper_job_events (job_id, action_id, event, from_status, to_status,
                                    previous_attempts, previous_outcome, previous_error_code, at,
                                    batch_id, previous_params)
    SELECT p.id, NULL, 'params_replaced', p.status, p.status, p.attempt_count, p.last_outcome,
           p.last_error_code, %(now)s, p.batch_id, p.params
    FROM changed c JOIN prior p ON p.id = c.id
    WHERE c.replaced
)
SELECT (SELECT count(*) FROM changed WHERE inserted),
       (SELECT count(*) FROM changed WHERE moved),
       (SELECT count(*) FROM changed WHERE replaced),
       (SELECT count(*) FROM prior p JOIN sweeper_schedule_stage s
                                     ON s.operation_key = p.operation_key
        WHERE NOT p.unclaimed AND p.status <> 'cancelled' AND p.params <> s.params),
       (SELECT count(*) FROM changed WHERE NOT inserted)
"""

# Return leases that expired at or before %(expired_before)s to pending (the producer passes a time
# one visibility timeout after the last publish: sweeper.backpressure). SKIP LOCKED: a row a
# consumer is settling right now is left to it. Uses sweeper_jobs_leased_expiry; a page at a time.
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
# closed key of a tenant-keyed limit, sweeper.claim_bounds) are passed over, unchanged: their
# due time and attempts stay as they are (a filter, so a closed scope's due rows ahead of a
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

# Unexpired leases of one policy: what is in flight (sweeper_jobs_leased_expiry).
COUNT_IN_FLIGHT: Final = """
SELECT count(*) FROM sweeper_jobs
WHERE policy = %(policy)s AND status = 'leased' AND lease_expires_at > %(now)s
"""

# Leased rows of one policy the consumers may still hold: not reclaimable yet and not sent back
# to wait (a deferred row's next_attempt_at is ahead, its message hidden until then). The depth
# the producer's budget is compared with (sweeper.backpressure; sweeper_jobs_leased_expiry).
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

# The ledger's side of a job named by key, in the order `outcomes.ConsumerLedger` reads it into a
# models.LedgerTarget: the one column list of the consumer's and redrive's reads. `not_before` is
# the job's time as one value: the latest of its due time, next attempt and postponement
# (GREATEST skips a NULL postponed_until); LedgerTarget.callable_at judges it.
TARGET_COLUMNS: Final = """
    operation_key, status, policy, policy_version, tenant_id, object_id, scope, retry_round,
    last_outcome, GREATEST(due_at, next_attempt_at, postponed_until) AS not_before, params,
    snoozed_seconds"""

# One query per consumer batch: the ledger's side of every job the batch names. What the consumer
# calls, under which scope and idempotency round, comes from here, never from the message body.
# The same statement counts the deliveries per carrying batch (consumed, and duplicates: those of
# an already settled job), attributed by the ledger's batch id, never the body's. The run rows are
# locked in batch-id order, so two consumers counting the same batches never deadlock.
# Joined from constants only (no value is ever formatted into SQL: values are parameters).
# The source columns TARGET_COLUMNS reads, and the carrying batch: what TARGETS_BY_KEYS' `found`
# keeps of each row (a CTE read twice is materialized: only these, not the whole row).
TARGET_SOURCE_COLUMNS: Final = """
    operation_key, status, policy, policy_version, tenant_id, object_id, scope, retry_round,
    last_outcome, due_at, next_attempt_at, postponed_until, params, snoozed_seconds, batch_id"""

TARGETS_BY_KEYS: Final = (
    """
WITH found AS (
    SELECT"""  # noqa: S608
    + TARGET_SOURCE_COLUMNS
    + """
    FROM sweeper_jobs WHERE operation_key = ANY(%(keys)s)
), deliveries AS (
    SELECT f.batch_id, count(*) AS consumed,
           count(*) FILTER (WHERE f.status IN ('succeeded', 'failed')) AS duplicates
    FROM unnest(%(keys)s::text[]) AS k(key) JOIN found f ON f.operation_key = k.key
    WHERE f.batch_id IS NOT NULL
    GROUP BY f.batch_id
), locked AS (
    SELECT r.batch_id FROM sweeper_runs r
    WHERE r.batch_id IN (SELECT batch_id FROM deliveries)
    ORDER BY r.batch_id
    FOR UPDATE
), counted AS (
    UPDATE sweeper_runs r
    SET consumed = r.consumed + d.consumed, duplicates = r.duplicates + d.duplicates
    FROM deliveries d JOIN locked l ON l.batch_id = d.batch_id
    WHERE r.batch_id = d.batch_id
)
SELECT"""
    + TARGET_COLUMNS
    + """
FROM found
"""
)

# Deliveries the consumer acknowledged uncalled because their job's time had not come
# (models.LedgerTarget.early_at, judged on the batch's read): counted per carrying batch,
# attributed by the ledger's batch id as TARGETS_BY_KEYS counts consumed; a key named twice
# counts twice. Only the run rows change: the job rows are read, never written. Run rows are
# locked in batch-id order, as in TARGETS_BY_KEYS.
COUNT_NOT_YET_DUE: Final = """
WITH early AS (
    SELECT j.batch_id, count(*) AS n
    FROM unnest(%(keys)s::text[]) AS k(key) JOIN sweeper_jobs j ON j.operation_key = k.key
    WHERE j.batch_id IS NOT NULL
    GROUP BY j.batch_id
), locked AS (
    SELECT r.batch_id FROM sweeper_runs r
    WHERE r.batch_id IN (SELECT batch_id FROM early)
    ORDER BY r.batch_id
    FOR UPDATE
)
UPDATE sweeper_runs r SET not_yet_due = r.not_yet_due + e.n
FROM early e JOIN locked l ON l.batch_id = e.batch_id
WHERE r.batch_id = e.batch_id
"""

# The action settled the job (accepted or already absent). Counts the attempt, and in the same
# statement its carrying batch's succeeded (or, when another delivery settled it first, its
# duplicates). The job row is locked before the run row, as in every settlement.
MARK_SUCCEEDED: Final = """
WITH job AS (
    SELECT batch_id FROM sweeper_jobs WHERE operation_key = %(key)s
), moved AS (
    UPDATE sweeper_jobs
    SET status = 'succeeded', last_outcome = %(outcome)s, last_error_code = NULL,
        lease_owner = NULL, lease_expires_at = NULL, attempt_count = attempt_count + 1,
        completed_at = %(now)s, updated_at = %(now)s,
        last_trace_id = %(trace_id)s
    WHERE operation_key = %(key)s AND status = ANY(%(from)s)
    RETURNING id
), counted AS (
    UPDATE sweeper_runs r
    SET succeeded = r.succeeded + (SELECT count(*) FROM moved),
        duplicates = r.duplicates + 1 - (SELECT count(*) FROM moved),
        last_settled_at = CASE WHEN EXISTS (SELECT 1 FROM moved)
                               THEN greatest(r.last_settled_at, %(now)s)
                               ELSE r.last_settled_at END
    FROM job WHERE r.batch_id = job.batch_id
)
SELECT id FROM moved
"""

# Terminal: a permanent outcome, or attempts exhausted. Counted as its carrying batch's terminal
# in the same statement.
MARK_FAILED: Final = """
WITH moved AS (
    UPDATE sweeper_jobs
    SET status = 'failed', last_outcome = %(outcome)s, last_error_code = %(code)s,
        lease_owner = NULL, lease_expires_at = NULL, attempt_count = attempt_count + %(attempts)s,
        completed_at = %(now)s, updated_at = %(now)s,
        last_trace_id = %(trace_id)s
    WHERE operation_key = %(key)s AND status = ANY(%(from)s)
    RETURNING id, batch_id
), counted AS (
    UPDATE sweeper_runs r
    SET terminal = r.terminal + 1, last_settled_at = greatest(r.last_settled_at, %(now)s)
    FROM moved WHERE r.batch_id = moved.batch_id
)
SELECT id FROM moved
"""

# A delivery that settled nothing: a retry later, a throttle, a closed gate or a wait for a token.
# The status stays; next_attempt_at moves to when the job may run again (so the producer does not
# republish it earlier) and a live lease is stretched to cover the wait. Only real attempts
# (transient, unknown) count toward the policy's max attempts. A counted attempt that leaves
# attempts to spare (below %(retry_below)s) is its carrying batch's retry, counted in the same
# statement; one that exhausts them is counted as terminal when MARK_FAILED settles it.
# Unless %(lowered)s (the wake item lowered for it), only a row whose claimable time cannot move
# earlier is written (a leased row's lease only stretches; sweeper.ledger.outcomes).
RECORD_UNSETTLED: Final = """
WITH moved AS (
    UPDATE sweeper_jobs
    SET last_outcome = coalesce(%(outcome)s, last_outcome),
        last_error_code = coalesce(%(code)s, last_error_code),
        attempt_count = attempt_count + %(attempts)s,
        next_attempt_at = %(next_attempt_at)s,
        lease_expires_at = CASE WHEN status = 'leased'
                                THEN GREATEST(lease_expires_at, %(lease_until)s)
                                ELSE lease_expires_at END,
        updated_at = %(now)s,
        last_trace_id = coalesce(%(trace_id)s, last_trace_id)
    WHERE operation_key = %(key)s AND status IN ('pending', 'leased')
      AND (%(lowered)s OR status = 'leased' OR next_attempt_at <= %(next_attempt_at)s)  -- wake
    RETURNING attempt_count, batch_id
), counted AS (
    UPDATE sweeper_runs r SET retried = r.retried + 1
    FROM moved
    WHERE r.batch_id = moved.batch_id AND %(attempts)s > 0
      AND moved.attempt_count < %(retry_below)s
)
SELECT attempt_count FROM moved
"""

# A snooze (migration 0011): the vendor said "not now" for this job. Like RECORD_UNSETTLED, the
# status stays and next_attempt_at moves to the end of the wait (a live lease stretched over it),
# but no attempt is counted and no scope is closed; the wait is added to the job's snoozed
# seconds, only while the sum stays within %(max_snooze)s (no row: settled meanwhile, or the
# bound is reached and the caller makes the job terminal). Counted as its carrying batch's
# snoozed in the same statement.
RECORD_SNOOZE: Final = """
WITH moved AS (
    UPDATE sweeper_jobs
    SET last_outcome = 'snooze', last_error_code = %(code)s,
        snoozed_seconds = snoozed_seconds + %(seconds)s,
        next_attempt_at = %(next_attempt_at)s,
        lease_expires_at = CASE WHEN status = 'leased'
                                THEN GREATEST(lease_expires_at, %(lease_until)s)
                                ELSE lease_expires_at END,
        updated_at = %(now)s,
        last_trace_id = coalesce(%(trace_id)s, last_trace_id)
    WHERE operation_key = %(key)s AND status IN ('pending', 'leased')
      AND (%(lowered)s OR status = 'leased' OR next_attempt_at <= %(next_attempt_at)s)  -- wake
      AND snoozed_seconds + %(seconds)s <= %(max_snooze)s
    RETURNING snoozed_seconds, batch_id
), counted AS (
    UPDATE sweeper_runs r SET snoozed = r.snoozed + 1
    FROM moved WHERE r.batch_id = moved.batch_id
)
SELECT snoozed_seconds FROM moved
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

COUNT_BY_STATUS: Final = """
SELECT status, count(*) FROM sweeper_jobs WHERE policy = %(policy)s GROUP BY status
"""

SELECT_JOB: Final = """
SELECT id, policy, policy_version, tenant_id, object_id, scope, operation_key, status, due_at,
       next_attempt_at, attempt_count, lease_owner, lease_expires_at, last_outcome,
       last_error_code, created_at, updated_at, completed_at, retry_round, batch_id, held_at,
       hold_reason, cancelled_at, cancel_reason, postponed_until, last_trace_id, params,
       snoozed_seconds
FROM sweeper_jobs WHERE operation_key = %(key)s
"""

SELECT_RUNS: Final = """
SELECT batch_id, policy, scheduled_at, started_at, finished_at, invocations, reclaimed,
       discovered, published, publish_failures, oldest_eligible_age_seconds, stop_reason
FROM sweeper_runs WHERE policy = %(policy)s ORDER BY scheduled_at DESC LIMIT %(limit)s
"""

# -- the operator's console (migration 0002) -----------------------------------------------------

# Is the policy paused? A primary-key lookup, once per producer run and once a second locally.
SELECT_PAUSED: Final = """
SELECT paused FROM sweeper_policy_state WHERE policy = %(policy)s
"""

SELECT_POLICY_STATE: Final = """
SELECT policy, paused, paused_at, paused_by, reason, resumed_at
FROM sweeper_policy_state WHERE policy = %(policy)s
"""

# Pause (idempotent): a repeat keeps the first paused_at, so "paused since" stays true. Returns
# paused_at; it equals %(now)s only when this call did the pausing.
SET_PAUSED: Final = """
INSERT INTO sweeper_policy_state AS s (policy, paused, paused_at, paused_by, reason, updated_at)
VALUES (%(policy)s, true, %(now)s, %(actor)s, %(reason)s, %(now)s)
ON CONFLICT (policy) DO UPDATE
SET paused = true,
    paused_at = CASE WHEN s.paused THEN s.paused_at ELSE EXCLUDED.paused_at END,
    paused_by = CASE WHEN s.paused THEN s.paused_by ELSE EXCLUDED.paused_by END,
    reason = CASE WHEN s.paused THEN s.reason ELSE EXCLUDED.reason END,
    updated_at = EXCLUDED.updated_at
RETURNING paused_at
"""

# Resume: a row only when the policy was paused, so a repeat reports "not paused".
SET_RESUMED: Final = """
UPDATE sweeper_policy_state
SET paused = false, resumed_at = %(now)s, updated_at = %(now)s
WHERE policy = %(policy)s AND paused
RETURNING paused_at
"""

INSERT_ACTION: Final = """
INSERT INTO sweeper_operator_actions (policy, action, actor, reason, detail, at)
VALUES (%(policy)s, %(action)s, %(actor)s, %(reason)s, %(detail)s, %(now)s)
RETURNING id
"""

# Terminal jobs back to pending with a fresh attempt budget (and snooze budget, migration 0011)
# and a new retry round (a fresh
# idempotency record: migration 0003) carried by no batch until one publishes it again (its job
# event keeps the batch that carried it: migration 0005), due now, in one statement: the
# operator action, the move (guarded by the state it leaves, SKIP LOCKED so a concurrent retry
# or prune is never waited on) and one job event per moved row with what it left behind.
# Unset filters (NULL) match everything.
RETRY_FAILED: Final = """
WITH action AS (
    INSERT INTO sweeper_operator_actions (policy, action, actor, reason, detail, at)
    VALUES (%(policy)s, 'retry', %(actor)s, %(reason)s, %(detail)s, %(now)s)
    RETURNING id
), chosen AS (
    SELECT id, status, attempt_count, last_outcome, last_error_code, batch_id FROM sweeper_jobs
    WHERE policy = %(policy)s AND status = ANY(%(from)s)
      AND (%(keys)s::text[] IS NULL OR operation_key = ANY(%(keys)s::text[]))
      AND (%(outcomes)s::text[] IS NULL OR last_outcome = ANY(%(outcomes)s::text[]))
      AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s::text)
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE sweeper_jobs j
    SET status = 'pending', attempt_count = 0, next_attempt_at = %(now)s, completed_at = NULL,
        updated_at = %(now)s, retry_round = j.retry_round + 1, batch_id = NULL,
        snoozed_seconds = 0
    WHERE j.id = ANY(ARRAY(SELECT id FROM chosen))  -- by primary key: see CLAIM_DUE's lock step
      AND (j.status = ANY(%(from)s)) IS TRUE
    RETURNING j.id, j.operation_key
), events AS (
    INSERT INTO sweeper_job_events (job_id, action_id, event, from_status, to_status,
                                    previous_attempts, previous_outcome, previous_error_code, at,
                                    batch_id)
    SELECT chosen.id, action.id, 'retried', chosen.status, 'pending', chosen.attempt_count,
           chosen.last_outcome, chosen.last_error_code, %(now)s, chosen.batch_id
    FROM moved JOIN chosen ON chosen.id = moved.id CROSS JOIN action
)
SELECT moved.operation_key FROM moved ORDER BY moved.id
"""

# What a prune's batch records, in the statement that deletes it (migration 0015): one step of
# the prune's operator action (%(action_id)s, recorded before the first batch) with the counts
# the batch deleted, written only when it deleted something. A deletion is never committed
# without its record. Joined into the statements below (a constant: every value a parameter).
_PRUNE_STEP: Final = """
, step AS (
    INSERT INTO sweeper_operator_action_steps (action_id, at, detail)
    SELECT %(action_id)s::bigint, %(now)s::timestamptz, {counts}
    WHERE %(action_id)s::bigint IS NOT NULL AND EXISTS (SELECT 1 FROM gone)
)
"""

# One batch of settled rows completed before the cutoff, oldest first, through
# sweeper_jobs_settled_completed. A failed job is an obligation not fulfilled: it is kept until
# its own, longer cutoff (%(failed_before)s; NULL keeps every one). SKIP LOCKED and a small LIMIT
# keep each transaction short; their job events go with them in the same statement
# (sweeper_job_events_job), and so does the batch's step (_PRUNE_STEP).
PRUNE_SETTLED: Final = (
    """
WITH old AS (
    SELECT id FROM sweeper_jobs
    WHERE status IN ('succeeded', 'failed') AND completed_at < %(before)s
      AND (status = 'succeeded' OR completed_at < %(failed_before)s::timestamptz)
      AND (%(policy)s::text IS NULL OR policy = %(policy)s::text)
    ORDER BY completed_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM sweeper_jobs j
    WHERE j.id = ANY(ARRAY(SELECT id FROM old))  -- by primary key: see CLAIM_DUE's lock step
      AND (j.status IN ('succeeded', 'failed')) IS TRUE
    RETURNING j.id, j.status
), events AS (
    DELETE FROM sweeper_job_events e USING gone WHERE e.job_id = gone.id
    RETURNING e.id
)"""  # noqa: S608
    + _PRUNE_STEP.format(
        counts="jsonb_build_object('jobs', (SELECT count(*) FROM gone), "
        "'failed_jobs', (SELECT count(*) FROM gone WHERE status = 'failed'), "
        "'job_events', (SELECT count(*) FROM events))"
    )
    + """SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM events)
"""
)

# One batch of run records scheduled before the cutoff, and its step (_PRUNE_STEP).
PRUNE_RUNS: Final = (
    """
WITH old AS (
    SELECT batch_id FROM sweeper_runs
    WHERE scheduled_at < %(before)s AND (%(policy)s::text IS NULL OR policy = %(policy)s::text)
    ORDER BY scheduled_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM sweeper_runs r USING old WHERE r.batch_id = old.batch_id
    RETURNING r.batch_id
)"""  # noqa: S608
    + _PRUNE_STEP.format(counts="jsonb_build_object('runs', (SELECT count(*) FROM gone))")
    + "SELECT batch_id FROM gone\n"
)

# One batch of operator actions taken before the cutoff that no job event names (a job event
# keeps its action until the job itself is pruned). sweeper_operator_actions_recent finds them,
# sweeper_job_events_action answers the NOT EXISTS (and the foreign key's check on delete).
# The prune's own action (%(action_id)s) is never among them, and its step goes in the same
# statement (_PRUNE_STEP); an action's steps go with it (ON DELETE CASCADE, migration 0015).
PRUNE_ACTIONS: Final = (
    """
WITH old AS (
    SELECT a.id FROM sweeper_operator_actions a
    WHERE a.at < %(before)s AND (%(policy)s::text IS NULL OR a.policy = %(policy)s::text)
      AND NOT EXISTS (SELECT 1 FROM sweeper_job_events e WHERE e.action_id = a.id)
      AND a.id IS DISTINCT FROM %(action_id)s::bigint
    ORDER BY a.at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM sweeper_operator_actions a USING old WHERE a.id = old.id
    RETURNING a.id
)"""  # noqa: S608
    + _PRUNE_STEP.format(
        counts="jsonb_build_object('operator_actions', (SELECT count(*) FROM gone))"
    )
    + "SELECT id FROM gone\n"
)

# The runs recorded for a policy in a time range (sweeper_runs_recent), for catch-up.
RUNS_BETWEEN: Final = """
SELECT scheduled_at, stop_reason FROM sweeper_runs
WHERE policy = %(policy)s AND scheduled_at >= %(since)s AND scheduled_at <= %(until)s
ORDER BY scheduled_at
"""

# The latest run at or before a time: the phase of a rate() schedule.
# The last scheduled run: a rate() schedule's series is anchored there. A run an operator released
# by hand (`sweeper release`, batch id release-...) is at no scheduled time, so it is not one.
LAST_RUN_AT_OR_BEFORE: Final = """
SELECT max(scheduled_at) FROM sweeper_runs
WHERE policy = %(policy)s AND scheduled_at <= %(at)s AND batch_id NOT LIKE 'release-%%'
"""

# A run the producer skipped while paused is re-armed for exactly one more invocation under a
# new batch id: START_RUN's conflict branch then counts it as the first, so the released run is
# not taken for a duplicate while a second delivery still is.
REOPEN_SKIPPED_RUN: Final = """
UPDATE sweeper_runs
SET batch_id = %(batch_id)s, invocations = 0, started_at = %(now)s, finished_at = NULL,
    stop_reason = NULL
WHERE policy = %(policy)s AND scheduled_at = %(scheduled_at)s AND stop_reason = 'paused'
RETURNING batch_id
"""

# What redrive needs to decide on a dead letter: one query per received batch. The same rows
# as the consumer's read (TARGET_COLUMNS), counting nothing.
JOBS_FOR_REDRIVE: Final = (
    "SELECT"
    + TARGET_COLUMNS
    + """
FROM sweeper_jobs WHERE operation_key = ANY(%(keys)s)
"""
)

# Jobs needing a human: terminal ones, leases past expiry, and pending rows due long ago. Each
# branch reads its own partial index; ids, classes, codes and times only.
INSPECT_JOBS: Final = """
(SELECT operation_key, status, last_outcome, last_error_code, attempt_count, due_at,
        next_attempt_at, lease_expires_at, updated_at, completed_at, last_trace_id
 FROM sweeper_jobs WHERE policy = %(policy)s AND status = 'failed'
 ORDER BY updated_at DESC LIMIT %(limit)s)
UNION ALL
(SELECT operation_key, status, last_outcome, last_error_code, attempt_count, due_at,
        next_attempt_at, lease_expires_at, updated_at, completed_at, last_trace_id
 FROM sweeper_jobs WHERE policy = %(policy)s AND status = 'leased' AND lease_expires_at <= %(now)s
 ORDER BY lease_expires_at LIMIT %(limit)s)
UNION ALL
(SELECT operation_key, status, last_outcome, last_error_code, attempt_count, due_at,
        next_attempt_at, lease_expires_at, updated_at, completed_at, last_trace_id
 FROM sweeper_jobs
 WHERE policy = %(policy)s AND status = 'pending' AND next_attempt_at <= %(stuck_before)s
 ORDER BY next_attempt_at LIMIT %(limit)s)
UNION ALL
(SELECT operation_key, status, last_outcome, last_error_code, attempt_count, due_at,
        next_attempt_at, lease_expires_at, held_at, completed_at, last_trace_id
 FROM sweeper_jobs WHERE policy = %(policy)s AND status = 'held'  -- sweeper_jobs_held
 ORDER BY held_at LIMIT %(limit)s)
"""

# The scopes that hold unsettled work, busiest first: whose gates `status` reads.
ACTIVE_SCOPES: Final = """
SELECT scope, count(*) FROM sweeper_jobs
WHERE policy = %(policy)s AND status IN ('pending', 'leased')
GROUP BY scope ORDER BY count(*) DESC, scope LIMIT %(limit)s
"""


# -- the per-batch audit (migration 0005) -------------------------------------------------------

# A policy's batches scheduled at or after a time, newest first (sweeper_runs_recent), each with
# its unsettled jobs counted through sweeper_jobs_unsettled_batch: the page, not the table. Jobs
# an operator took out of a batch are counted too: held ones through sweeper_jobs_held (a job
# keeps its batch while held), cancelled ones by their `cancelled` events (the operator's moves,
# a small table; a failed job cancelled was already counted as terminal, so only cancellations
# of an unsettled job count).
BATCH_AUDIT: Final = """
SELECT r.batch_id, r.scheduled_at, r.started_at, r.finished_at, r.stop_reason, r.invocations,
       r.discovered, r.published, r.resent, r.publish_failures, r.oldest_released_age_seconds,
       r.consumed, r.succeeded, r.retried, r.terminal, r.duplicates, r.last_settled_at,
       (SELECT count(*) FROM sweeper_jobs j
        WHERE j.batch_id = r.batch_id AND j.status IN ('pending', 'leased')) AS in_flight,
       r.snoozed,
       (SELECT count(*) FROM sweeper_job_events e
        WHERE e.batch_id = r.batch_id AND e.event = 'cancelled'
          AND e.from_status IN ('pending', 'leased', 'held')) AS cancelled,
       (SELECT count(*) FROM sweeper_jobs h
        WHERE h.policy = r.policy AND h.status = 'held' AND h.batch_id = r.batch_id) AS held,
       r.not_yet_due
FROM sweeper_runs r
WHERE r.policy = %(policy)s AND r.scheduled_at >= %(since)s
ORDER BY r.scheduled_at DESC
LIMIT %(limit)s
"""

# `sweeper smoke`'s cleanup: its canary row, in any status, and its job events, in one statement.
# Only a row under the policy's sandbox tenant whose object id carries the canary prefix matches,
# so a mistyped key can never delete a customer's obligation.
DELETE_CANARY: Final = """
WITH gone AS (
    DELETE FROM sweeper_jobs
    WHERE operation_key = %(key)s AND policy = %(policy)s AND tenant_id = %(tenant_id)s
      AND starts_with(object_id, %(prefix)s)
    RETURNING id
), events AS (
    DELETE FROM sweeper_job_events e USING gone WHERE e.job_id = gone.id
)
SELECT id FROM gone
"""
