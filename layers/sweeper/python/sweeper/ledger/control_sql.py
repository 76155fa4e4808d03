"""The operator's job control statements (migration 0008): cancel, hold, unhold, postpone.

Each is one statement: the operator action recorded, the chosen rows locked (SKIP LOCKED), the
move guarded by the states it leaves (`status = ANY(%(from)s)`, from `sweeper.models`), and one
job event per moved row. Kept apart from `queries` (the pipeline's statements) because only the
operator's console runs them; parameterised like every statement of the ledger.
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
