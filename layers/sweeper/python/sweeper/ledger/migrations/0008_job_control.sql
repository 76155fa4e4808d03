-- Operator job control: cancel, hold and unhold, postpone (sweeper.models.TRANSITIONS).
--
-- `held` is a status, not a flag beside one: every claim, reclaim and partial index already reads
-- `status = 'pending'` or `status = 'leased'`, so a held row is in none of them, and no door can
-- lift a hold (the schedule upsert never writes status). `cancelled` is terminal and never
-- pruned: its row is the tombstone that keeps a later discovery or hint of the same key from
-- scheduling it again.
ALTER TABLE sweeper_jobs DROP CONSTRAINT sweeper_jobs_status_check;
ALTER TABLE sweeper_jobs ADD CONSTRAINT sweeper_jobs_status_check
    CHECK (status IN ('pending', 'leased', 'succeeded', 'failed', 'held', 'cancelled'));

ALTER TABLE sweeper_jobs
    ADD COLUMN held_at         timestamptz,
    ADD COLUMN hold_reason     text CHECK (char_length(hold_reason) <= 500),
    ADD COLUMN cancelled_at    timestamptz,
    ADD COLUMN cancel_reason   text CHECK (char_length(cancel_reason) <= 500),
    -- The latest postponement: the schedule upsert never moves such a row's due time earlier.
    ADD COLUMN postponed_until timestamptz;

ALTER TABLE sweeper_jobs ADD CONSTRAINT sweeper_jobs_held_has_time
    CHECK ((status = 'held') = (held_at IS NOT NULL));
ALTER TABLE sweeper_jobs ADD CONSTRAINT sweeper_jobs_cancelled_has_time
    CHECK ((status = 'cancelled') = (cancelled_at IS NOT NULL));

-- A cancelled job keeps the completion time it had (a failed job's), or none.
ALTER TABLE sweeper_jobs DROP CONSTRAINT sweeper_jobs_completed_iff_settled;
ALTER TABLE sweeper_jobs ADD CONSTRAINT sweeper_jobs_completed_iff_settled CHECK (
    status = 'cancelled' OR (status IN ('succeeded', 'failed')) = (completed_at IS NOT NULL)
);

ALTER TABLE sweeper_operator_actions DROP CONSTRAINT sweeper_operator_actions_action_check;
ALTER TABLE sweeper_operator_actions ADD CONSTRAINT sweeper_operator_actions_action_check
    CHECK (action IN ('pause', 'resume', 'retry', 'catch_up', 'prune', 'redrive',
                      'cancel', 'hold', 'unhold', 'postpone'));

ALTER TABLE sweeper_job_events DROP CONSTRAINT sweeper_job_events_event_check;
ALTER TABLE sweeper_job_events ADD CONSTRAINT sweeper_job_events_event_check
    CHECK (event IN ('retried', 'cancelled', 'held', 'unheld', 'postponed'));
-- What a postponement moved: the due time the job had before.
ALTER TABLE sweeper_job_events
    ADD COLUMN previous_due_at timestamptz;

-- The held jobs of a policy, by tenant: what `status` counts and an unhold by tenant reads.
CREATE INDEX sweeper_jobs_held ON sweeper_jobs (policy, tenant_id) WHERE status = 'held';
