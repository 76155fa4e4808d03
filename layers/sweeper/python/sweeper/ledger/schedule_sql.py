"""The schedulers' statements (`ledger.scheduling`): obligations staged and upserted by key.

Parameterised; the upsert never writes a job's status, so a repeat cannot revive or unhold it.
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
