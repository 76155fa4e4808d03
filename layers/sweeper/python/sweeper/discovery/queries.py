"""The discovery store's statements (migration 0006), parameterised, each with its guarantee."""

from typing import Final

# The cursor of a policy's source, created on first use. One per source kind: a policy fed by
# two sources (the demo's doors) keeps two positions.
ENSURE_CURSOR: Final = """
INSERT INTO sweeper_discovery_cursors (policy, source, updated_at)
VALUES (%(policy)s, %(source)s, %(now)s)
ON CONFLICT (policy, source) DO NOTHING
"""

SELECT_CURSOR: Final = """
SELECT cursor, pass_number, pass_scanned, pass_started_at, last_complete_at
FROM sweeper_discovery_cursors WHERE policy = %(policy)s AND source = %(source)s
"""

# Advance the cursor after one committed page, in that page's transaction, and only from the
# position this run read (compare-and-set): a second run that read the same position finds no
# row here and rolls its page back. A completed pass resets the cursor and starts the next pass.
ADVANCE_CURSOR: Final = """
UPDATE sweeper_discovery_cursors
SET cursor = CASE WHEN %(complete)s THEN NULL ELSE %(cursor_after)s::jsonb END,
    pass_number = CASE WHEN %(complete)s THEN pass_number + 1 ELSE pass_number END,
    pass_scanned = CASE WHEN %(complete)s THEN 0 ELSE pass_scanned + %(scanned)s END,
    pass_started_at = CASE WHEN %(complete)s THEN NULL
                           ELSE coalesce(pass_started_at, %(now)s) END,
    last_complete_at = CASE WHEN %(complete)s THEN %(now)s ELSE last_complete_at END,
    updated_at = %(now)s
WHERE policy = %(policy)s AND source = %(source)s AND pass_number = %(pass_number)s
  AND pass_scanned = %(pass_scanned)s
  AND cursor IS NOT DISTINCT FROM %(cursor_before)s::jsonb
RETURNING pass_number
"""

# One run per (policy, source, scheduled time): a repeat delivery counts an invocation and
# does nothing.
START_RUN: Final = """
INSERT INTO sweeper_discovery_runs (run_id, policy, source, scheduled_at, started_at,
                                    pass_number, cursor_before)
VALUES (%(run_id)s, %(policy)s, %(source)s, %(scheduled_at)s, %(now)s, %(pass_number)s,
        %(cursor)s)
ON CONFLICT (policy, source, scheduled_at) DO UPDATE
SET invocations = sweeper_discovery_runs.invocations + 1
RETURNING run_id, invocations
"""

# A page's figures, added in the page's own transaction: a run killed later still shows exactly
# what it committed.
ADD_PAGE: Final = """
UPDATE sweeper_discovery_runs
SET scanned = scanned + %(scanned)s, inserted = inserted + %(inserted)s,
    moved_earlier = moved_earlier + %(moved)s, unchanged = unchanged + %(unchanged)s,
    not_due = not_due + %(not_due)s, rejected = rejected + %(rejected)s,
    rejected_sample = CASE WHEN jsonb_array_length(rejected_sample) >= %(sample_max)s
                           THEN rejected_sample
                           ELSE rejected_sample || %(sample)s::jsonb END,
    cursor_after = %(cursor_after)s::jsonb
WHERE run_id = %(run_id)s
"""

FINISH_RUN: Final = """
UPDATE sweeper_discovery_runs
SET finished_at = %(now)s, elapsed_seconds = %(elapsed)s, stop_reason = %(stop_reason)s
WHERE run_id = %(run_id)s
"""

SELECT_RUNS: Final = """
SELECT run_id, policy, source, scheduled_at, started_at, finished_at, invocations, pass_number,
       scanned, inserted, moved_earlier, unchanged, not_due, rejected, rejected_sample,
       cursor_before, cursor_after, elapsed_seconds, stop_reason
FROM sweeper_discovery_runs WHERE policy = %(policy)s
ORDER BY started_at DESC, run_id LIMIT %(limit)s
"""

SELECT_RUN: Final = """
SELECT run_id, policy, source, scheduled_at, started_at, finished_at, invocations, pass_number,
       scanned, inserted, moved_earlier, unchanged, not_due, rejected, rejected_sample,
       cursor_before, cursor_after, elapsed_seconds, stop_reason
FROM sweeper_discovery_runs WHERE run_id = %(run_id)s
"""
