"""The consumer's statements (`ledger.outcomes`): the rows a batch names, read with their
deliveries counted, and settling, deferring or snoozing them; redrive's read of the same rows.

Every UPDATE names the state(s) it moves from (`status = ANY(%(from)s)` with the sources taken
from `sweeper.models.TRANSITIONS`), so a stale worker can never move a row the wrong way.
"""

from typing import Final

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

# What a wait writes (RECORD_UNSETTLED, RECORD_SNOOZE) after its own columns: the job's next
# attempt, a live lease stretched over the wait, and which row it may write (see below).
_WAIT: Final = """
        next_attempt_at = %(next_attempt_at)s,
        lease_expires_at = CASE WHEN status = 'leased'
                                THEN GREATEST(lease_expires_at, %(lease_until)s)
                                ELSE lease_expires_at END,
        updated_at = %(now)s,
        last_trace_id = coalesce(%(trace_id)s, last_trace_id)
    WHERE operation_key = %(key)s AND status IN ('pending', 'leased')
      AND (%(lowered)s OR status = 'leased' OR next_attempt_at <= %(next_attempt_at)s)  -- wake"""

# A delivery that settled nothing: a retry later, a throttle, a closed gate or a wait for a token.
# The status stays; next_attempt_at moves to when the job may run again (so the producer does not
# republish it earlier) and a live lease is stretched to cover the wait. Only real attempts
# (transient, unknown) count toward the policy's max attempts. A counted attempt that leaves
# attempts to spare (below %(retry_below)s) is its carrying batch's retry, counted in the same
# statement; one that exhausts them is counted as terminal when MARK_FAILED settles it.
# Unless %(lowered)s (the wake item lowered for it), only a row whose claimable time cannot move
# earlier is written (a leased row's lease only stretches; sweeper.ledger.outcomes).
RECORD_UNSETTLED: Final = (
    """
WITH moved AS (
    UPDATE sweeper_jobs
    SET last_outcome = coalesce(%(outcome)s, last_outcome),
        last_error_code = coalesce(%(code)s, last_error_code),
        attempt_count = attempt_count + %(attempts)s,"""  # noqa: S608
    + _WAIT
    + """
    RETURNING attempt_count, batch_id
), counted AS (
    UPDATE sweeper_runs r SET retried = r.retried + 1
    FROM moved
    WHERE r.batch_id = moved.batch_id AND %(attempts)s > 0
      AND moved.attempt_count < %(retry_below)s
)
SELECT attempt_count FROM moved
"""
)

# A snooze (migration 0011): the vendor said "not now" for this job. Like RECORD_UNSETTLED, the
# status stays and next_attempt_at moves to the end of the wait (a live lease stretched over it),
# but no attempt is counted and no scope is closed; the wait is added to the job's snoozed
# seconds, only while the sum stays within %(max_snooze)s (no row: settled meanwhile, or the
# bound is reached and the caller makes the job terminal). Counted as its carrying batch's
# snoozed in the same statement.
RECORD_SNOOZE: Final = (
    """
WITH moved AS (
    UPDATE sweeper_jobs
    SET last_outcome = 'snooze', last_error_code = %(code)s,
        snoozed_seconds = snoozed_seconds + %(seconds)s,"""  # noqa: S608
    + _WAIT
    + """
      AND snoozed_seconds + %(seconds)s <= %(max_snooze)s
    RETURNING snoozed_seconds, batch_id
), counted AS (
    UPDATE sweeper_runs r SET snoozed = r.snoozed + 1
    FROM moved WHERE r.batch_id = moved.batch_id
)
SELECT snoozed_seconds FROM moved
"""
)

# What redrive needs to decide on a dead letter: one query per received batch. The same rows
# as the consumer's read (TARGET_COLUMNS), counting nothing, and the last error code: why the
# letter died (a wait for a limit, `wait_<reason>`, or an answer's code; sweeper.redrive.auto).
JOBS_FOR_REDRIVE: Final = (
    "SELECT"
    + TARGET_COLUMNS
    + """, last_error_code
FROM sweeper_jobs WHERE operation_key = ANY(%(keys)s)
"""
)
