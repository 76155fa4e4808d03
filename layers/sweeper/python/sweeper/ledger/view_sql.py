"""The operator console page's reads (`sweeper console`): activity over time, a search, one
job's history. Read-only, parameterised, bounded by LIMIT or by a time window; kept apart from
the status reads (`status_sql`) because only the console page runs them.
"""

from typing import Final

# Claims over time: the jobs each producer run published (re-sends included, the run record's
# figure), summed per time bucket of the run's start. The window is small (hours), read through
# sweeper_runs_recent's policy prefix.
CLAIMS_BY_BUCKET: Final = """
SELECT date_bin(%(bucket)s, started_at, %(origin)s) AS at, sum(published)::bigint
FROM sweeper_runs
WHERE policy = %(policy)s AND started_at >= %(since)s AND started_at < %(until)s
GROUP BY 1 ORDER BY 1
"""

# Completions over time: settled jobs per time bucket of their completion, succeeded and failed
# apart (sweeper_jobs_settled_completed covers the window on completed_at).
COMPLETIONS_BY_BUCKET: Final = """
SELECT date_bin(%(bucket)s, completed_at, %(origin)s) AS at,
       count(*) FILTER (WHERE status = 'succeeded'),
       count(*) FILTER (WHERE status = 'failed')
FROM sweeper_jobs
WHERE policy = %(policy)s AND status IN ('succeeded', 'failed')
  AND completed_at >= %(since)s AND completed_at < %(until)s
GROUP BY 1 ORDER BY 1
"""

# A search: the job with this operation key (its unique index), or a tenant's jobs, newest
# first; ids, states, classes and times only.
SEARCH_JOBS: Final = """
SELECT operation_key, tenant_id, status, last_outcome, last_error_code, attempt_count, due_at,
       updated_at
FROM sweeper_jobs
WHERE policy = %(policy)s AND (operation_key = %(query)s OR tenant_id = %(query)s)
ORDER BY id DESC
LIMIT %(limit)s
"""

# One job's operator events, oldest first, each with who acted and why (the action it belongs
# to); sweeper_job_events_job covers the lookup.
JOB_EVENTS: Final = """
SELECT e.at, e.event, e.from_status, e.to_status, e.previous_attempts, e.previous_outcome,
       e.previous_error_code, e.previous_due_at, a.action, a.actor, a.reason
FROM sweeper_job_events e JOIN sweeper_operator_actions a ON a.id = e.action_id
WHERE e.job_id = %(job_id)s
ORDER BY e.id
LIMIT %(limit)s
"""

# The last operator actions on a policy, newest first (sweeper_operator_actions_recent), each
# with its progress (migration 0015): how many steps it recorded, the sums of their counts, and
# whether its last step says it finished (sweeper_operator_action_steps_action).
RECENT_ACTIONS: Final = """
SELECT a.at, a.action, a.actor, a.reason, p.steps, p.totals, p.done
FROM (SELECT * FROM sweeper_operator_actions
      WHERE policy = %(policy)s ORDER BY at DESC, id DESC LIMIT %(limit)s) a
CROSS JOIN LATERAL (
    SELECT count(*) AS steps,
           bool_or(coalesce((s.detail ->> 'done')::boolean, false)) AS done,
           (SELECT jsonb_object_agg(n.key, n.total) FROM (
               SELECT c.key, sum(c.value::numeric) AS total
               FROM sweeper_operator_action_steps t, jsonb_each(t.detail) c
               WHERE t.action_id = a.id AND jsonb_typeof(c.value) = 'number'
                 AND NOT coalesce((t.detail ->> 'done')::boolean, false)
               GROUP BY c.key) n) AS totals
    FROM sweeper_operator_action_steps s WHERE s.action_id = a.id
) p
ORDER BY a.at DESC, a.id DESC
"""

# Jobs retrying, by what their last attempt came to: unsettled (pending or leased) jobs whose
# last outcome is one that retries (every class but accepted, absent and permanent, which settle;
# a wait recorded without a call leaves the outcome as it was, NULL for a job never tried),
# grouped by class and code, the largest group first. `oldest` is the earliest due time among
# them. The predicate is sweeper_jobs_retrying's, word for word, so that partial index (migration
# 0016) serves the read: it costs the failing jobs, not the backlog. Read-only.
RETRYING_BY_CODE: Final = """
SELECT last_outcome, last_error_code, count(*), count(DISTINCT scope), min(due_at),
       max(attempt_count), max(updated_at)
FROM sweeper_jobs
WHERE policy = %(policy)s AND status IN ('pending', 'leased')
  AND last_outcome IN ('throttled', 'transient', 'unknown', 'auth', 'snooze')
GROUP BY last_outcome, last_error_code
ORDER BY count(*) DESC, last_outcome, last_error_code
LIMIT %(limit)s
"""
