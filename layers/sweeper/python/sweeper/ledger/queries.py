"""Every statement the job store runs, parameterised, each with what it guarantees.

Every UPDATE names the state(s) it moves from (`status = ANY(%(from)s)` with the sources taken
from `sweeper.models.TRANSITIONS`), so a stale worker can never move a row the wrong way.
"""

from typing import Final

# Idempotent upsert on the operation key. A repeat never duplicates a row and can only move due_at
# earlier; next_attempt_at follows only for a row never attempted, so an earlier due date cannot
# override a retry delay or a vendor's Retry-After. Returns one row per insert or move.
UPSERT_JOBS: Final = """
INSERT INTO sweeper_jobs AS j (policy, policy_version, tenant_id, object_id, scope, operation_key,
                               due_at, next_attempt_at, created_at, updated_at)
SELECT %(policy)s, %(policy_version)s, t.tenant_id, t.object_id, t.scope, t.operation_key,
       t.due_at, t.due_at, %(now)s, %(now)s
FROM unnest(%(tenant_ids)s::text[], %(object_ids)s::text[], %(scopes)s::text[],
            %(keys)s::text[], %(due)s::timestamptz[])
     AS t(tenant_id, object_id, scope, operation_key, due_at)
ON CONFLICT (operation_key) DO UPDATE
SET due_at = EXCLUDED.due_at,
    next_attempt_at = CASE WHEN j.status = 'pending' AND j.attempt_count = 0
                           THEN LEAST(j.next_attempt_at, EXCLUDED.due_at)
                           ELSE j.next_attempt_at END,
    updated_at = EXCLUDED.updated_at
WHERE EXCLUDED.due_at < j.due_at
RETURNING (xmax = 0) AS inserted
"""

# Return expired leases to pending. SKIP LOCKED: a row a consumer is settling right now is left to
# it. Uses sweeper_jobs_leased_expiry; a page at a time.
RECLAIM_EXPIRED: Final = """
WITH expired AS (
    SELECT id FROM sweeper_jobs
    WHERE policy = %(policy)s AND status = 'leased' AND lease_expires_at <= %(now)s
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE sweeper_jobs j
SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = %(now)s
FROM expired
WHERE j.id = expired.id AND j.status = ANY(%(from)s)
RETURNING j.id
"""

# Claim the earliest due pending rows of one policy and lease them to a batch. SKIP LOCKED: two
# claimers never wait on, or return, the same row. Uses sweeper_jobs_pending_due, so the cost is
# the page returned. The caller commits at once: no lock outlives this statement's transaction.
CLAIM_DUE: Final = """
WITH due AS (
    SELECT id FROM sweeper_jobs
    WHERE policy = %(policy)s AND status = 'pending' AND next_attempt_at <= %(now)s
    ORDER BY next_attempt_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE sweeper_jobs j
SET status = 'leased', lease_owner = %(owner)s, lease_expires_at = %(expires)s,
    updated_at = %(now)s
FROM due
WHERE j.id = due.id AND j.status = ANY(%(from)s)
RETURNING j.id, j.policy_version, j.tenant_id, j.object_id, j.scope, j.operation_key,
          j.attempt_count, j.next_attempt_at
"""

# Give back rows whose messages were not published. Only this batch's own leases are touched.
RELEASE_LEASES: Final = """
UPDATE sweeper_jobs
SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = %(now)s
WHERE id = ANY(%(ids)s) AND status = ANY(%(from)s) AND lease_owner = %(owner)s
RETURNING id
"""

# Unexpired leases of one policy: what is in flight (sweeper_jobs_leased_expiry).
COUNT_IN_FLIGHT: Final = """
SELECT count(*) FROM sweeper_jobs
WHERE policy = %(policy)s AND status = 'leased' AND lease_expires_at > %(now)s
"""

# The due time of the oldest eligible pending row (first entry of sweeper_jobs_pending_due).
OLDEST_ELIGIBLE: Final = """
SELECT min(next_attempt_at) FROM sweeper_jobs
WHERE policy = %(policy)s AND status = 'pending' AND next_attempt_at <= %(now)s
"""

# One query per consumer batch: the state of every job the batch names.
STATUS_BY_KEYS: Final = """
SELECT operation_key, status FROM sweeper_jobs WHERE operation_key = ANY(%(keys)s)
"""

# The action settled the job (accepted or already absent). Counts the attempt.
MARK_SUCCEEDED: Final = """
UPDATE sweeper_jobs
SET status = 'succeeded', last_outcome = %(outcome)s, last_error_code = NULL,
    lease_owner = NULL, lease_expires_at = NULL, attempt_count = attempt_count + 1,
    completed_at = %(now)s, updated_at = %(now)s
WHERE operation_key = %(key)s AND status = ANY(%(from)s)
RETURNING id
"""

# Terminal: a permanent outcome, or attempts exhausted.
MARK_FAILED: Final = """
UPDATE sweeper_jobs
SET status = 'failed', last_outcome = %(outcome)s, last_error_code = %(code)s,
    lease_owner = NULL, lease_expires_at = NULL, attempt_count = attempt_count + %(attempts)s,
    completed_at = %(now)s, updated_at = %(now)s
WHERE operation_key = %(key)s AND status = ANY(%(from)s)
RETURNING id
"""

# A delivery that settled nothing: a retry later, a throttle, a closed gate or a wait for a token.
# The status stays; next_attempt_at moves to when the job may run again (so the producer does not
# republish it earlier) and a live lease is stretched to cover the wait. Only real attempts
# (transient, unknown) count toward the policy's max attempts.
RECORD_UNSETTLED: Final = """
UPDATE sweeper_jobs
SET last_outcome = coalesce(%(outcome)s, last_outcome),
    last_error_code = coalesce(%(code)s, last_error_code),
    attempt_count = attempt_count + %(attempts)s,
    next_attempt_at = %(next_attempt_at)s,
    lease_expires_at = CASE WHEN status = 'leased'
                            THEN GREATEST(lease_expires_at, %(lease_until)s)
                            ELSE lease_expires_at END,
    updated_at = %(now)s
WHERE operation_key = %(key)s AND status IN ('pending', 'leased')
RETURNING attempt_count
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
    oldest_eligible_age_seconds = %(oldest_age)s, stop_reason = %(stop_reason)s
WHERE batch_id = %(batch_id)s
"""

COUNT_BY_STATUS: Final = """
SELECT status, count(*) FROM sweeper_jobs WHERE policy = %(policy)s GROUP BY status
"""

SELECT_JOB: Final = """
SELECT id, policy, policy_version, tenant_id, object_id, scope, operation_key, status, due_at,
       next_attempt_at, attempt_count, lease_owner, lease_expires_at, last_outcome,
       last_error_code, created_at, updated_at, completed_at
FROM sweeper_jobs WHERE operation_key = %(key)s
"""

SELECT_RUNS: Final = """
SELECT batch_id, policy, scheduled_at, started_at, finished_at, invocations, reclaimed,
       discovered, published, publish_failures, oldest_eligible_age_seconds, stop_reason
FROM sweeper_runs WHERE policy = %(policy)s ORDER BY scheduled_at DESC LIMIT %(limit)s
"""
