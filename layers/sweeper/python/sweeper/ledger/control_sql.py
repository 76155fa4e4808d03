"""The operator's writes (`ledger.console`): job control (migration 0008: cancel, hold, unhold,
postpone) and retry, pause and resume, a skipped run released, the action record and its steps.

Each job control and retry is one statement: the operator action recorded, the chosen rows locked
(SKIP LOCKED), the move guarded by the states it leaves (`status = ANY(%(from)s)`, from
`sweeper.models`), and one job event per moved row. Kept apart from the pipeline's statements
because only the operator's tools run them; parameterised like every statement of the ledger.
"""

from typing import Final

# The jobs a job control reaches: the policy's rows in the states it moves from, matching every
# filter given (NULL matches everything; the due range is [due_from, due_before)), and for a
# postponement only those due before the new time. Joined into the statements below (constants
# only: every value is a parameter).
_CONTROL_FILTER: Final = """
    WHERE policy = %(policy)s AND status = ANY(%(from)s)
      AND (%(keys)s::text[] IS NULL OR operation_key = ANY(%(keys)s::text[]))
      AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s::text)
      AND (%(statuses)s::text[] IS NULL OR status = ANY(%(statuses)s::text[]))
      AND (%(outcomes)s::text[] IS NULL OR last_outcome = ANY(%(outcomes)s::text[]))
      AND (%(due_from)s::timestamptz IS NULL OR due_at >= %(due_from)s::timestamptz)
      AND (%(due_before)s::timestamptz IS NULL OR due_at < %(due_before)s::timestamptz)
      AND (%(until)s::timestamptz IS NULL OR due_at < %(until)s::timestamptz)
    ORDER BY id
    LIMIT %(limit)s"""

# A dry run: the keys and states a job control would move now, changing nothing.
PREVIEW_CONTROL: Final = (
    "SELECT operation_key, status FROM sweeper_jobs" + _CONTROL_FILTER  # noqa: S608
)

# The operator action, the chosen rows locked (SKIP LOCKED: a row a consumer is settling right
# now, or a concurrent control holds, is left out, never waited on), the move guarded by the
# states it leaves, and one job event per moved row with what it left behind: one statement.
_CONTROL_HEAD: Final = (
    """
WITH action AS (
    INSERT INTO sweeper_operator_actions (policy, action, actor, reason, detail, at)
    VALUES (%(policy)s, %(action)s, %(actor)s, %(reason)s, %(detail)s, %(now)s)
    RETURNING id
), chosen AS (
    SELECT id, status, attempt_count, last_outcome, last_error_code, batch_id, due_at
    FROM sweeper_jobs"""  # noqa: S608
    + _CONTROL_FILTER
    + """
    FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE sweeper_jobs j
    SET updated_at = %(now)s,"""
)

_CONTROL_TAIL: Final = """
    WHERE j.id = ANY(ARRAY(SELECT id FROM chosen))  -- by primary key: see CLAIM_DUE's lock step
      AND (j.status = ANY(%(from)s)) IS TRUE
    RETURNING j.id, j.operation_key, j.status
), events AS (
    INSERT INTO sweeper_job_events (job_id, action_id, event, from_status, to_status,
                                    previous_attempts, previous_outcome, previous_error_code, at,
                                    batch_id, previous_due_at)
    SELECT chosen.id, action.id, %(event)s, chosen.status, moved.status, chosen.attempt_count,
           chosen.last_outcome, chosen.last_error_code, %(now)s, chosen.batch_id, chosen.due_at
    FROM moved JOIN chosen ON chosen.id = moved.id CROSS JOIN action
)
SELECT moved.operation_key, chosen.status FROM moved JOIN chosen ON chosen.id = moved.id
ORDER BY moved.id
"""

# Cancel: terminal. A lease and a hold end with it; a failed job keeps its completion time.
CANCEL_JOBS: Final = (
    _CONTROL_HEAD
    + """
        status = 'cancelled', cancelled_at = %(now)s, cancel_reason = %(reason)s,
        lease_owner = NULL, lease_expires_at = NULL, held_at = NULL, hold_reason = NULL"""
    + _CONTROL_TAIL
)

# Hold: out of every claim until an unhold. A leased job's lease ends (its message, when
# delivered, is acknowledged uncalled: the consumer calls only pending or leased jobs).
HOLD_JOBS: Final = (
    _CONTROL_HEAD
    + """
        status = 'held', held_at = %(now)s, hold_reason = %(reason)s,
        lease_owner = NULL, lease_expires_at = NULL"""
    + _CONTROL_TAIL
)

# Unhold: back to pending as it was; eligible again at its next_attempt_at.
UNHOLD_JOBS: Final = (
    _CONTROL_HEAD
    + """
        status = 'pending', held_at = NULL, hold_reason = NULL"""
    + _CONTROL_TAIL
)

# Postpone: due later (the filter takes only rows due before %(until)s), never eligible before
# it, in the state the job was in (pending or held).
POSTPONE_JOBS: Final = (
    _CONTROL_HEAD
    + """
        due_at = %(until)s, postponed_until = %(until)s,
        next_attempt_at = greatest(j.next_attempt_at, %(until)s)"""
    + _CONTROL_TAIL
)

# One step of a long operator action recorded before it began (migration 0015): a page of dead
# letters moved, a missed run released. Appended, never updated; the action's row says who and
# why, each step what was done by then.
INSERT_ACTION_STEP: Final = """
INSERT INTO sweeper_operator_action_steps (action_id, at, detail)
VALUES (%(action_id)s, %(at)s, %(detail)s)
"""

# -- the policy's pause and release, the action record, retry (migration 0002) -----------------

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

# Resume: a row (its resumed_at, now) only when the policy was paused, so a repeat reports
# "not paused".
SET_RESUMED: Final = """
UPDATE sweeper_policy_state
SET paused = false, resumed_at = %(now)s, updated_at = %(now)s
WHERE policy = %(policy)s AND paused
RETURNING resumed_at
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
