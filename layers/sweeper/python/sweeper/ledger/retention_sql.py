"""Retention's statements (`ledger.retention`): pruning settled jobs, runs and operator actions a
batch at a time, each batch with its record; `sweeper smoke`'s canary deleted.
"""

from typing import Final

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
