"""The reads behind `status`, `inspect` and the console (`ledger.console`): a job, the counts, the
runs and their audit, the policy's state. Read-only and parameterised.
"""

from typing import Final

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

# Is the policy paused? A primary-key lookup, once per producer run and once a second locally.
SELECT_PAUSED: Final = """
SELECT paused FROM sweeper_policy_state WHERE policy = %(policy)s
"""

SELECT_POLICY_STATE: Final = """
SELECT policy, paused, paused_at, paused_by, reason, resumed_at
FROM sweeper_policy_state WHERE policy = %(policy)s
"""

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
