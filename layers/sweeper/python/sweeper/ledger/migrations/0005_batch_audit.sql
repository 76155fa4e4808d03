-- Per-batch audit: which batch carried a job, and what became of each batch's jobs.
--
-- A job's batch is the producer run (or release) that first published it in its retry round. A
-- claim sets it when the job has none; a later run that re-sends the job after its lease expired
-- leaves it (and counts the message as resent); a release of an unpublished claim clears what
-- the claim set; an operator retry or a redrive clears it (the job event keeps it), so the fresh
-- round belongs to the batch that publishes it next. Settlement leaves it: a settled job says
-- which batch carried it.
ALTER TABLE sweeper_jobs
    ADD COLUMN batch_id text CHECK (char_length(batch_id) <= 64);

-- The unsettled jobs of a batch: what `sweeper runs` reports as still in flight. Partial, so it
-- holds only unsettled rows that some batch published: settlement takes a row out.
CREATE INDEX sweeper_jobs_unsettled_batch ON sweeper_jobs (batch_id)
    WHERE status IN ('pending', 'leased') AND batch_id IS NOT NULL;

-- Outcome counters per batch, kept in the run record and incremented in the same statement as
-- the ledger change they count (the consumer's batch read, a settlement, a retry): no extra
-- round trip. `resent` counts the published messages for jobs an earlier batch carries, so the
-- jobs a batch carries are published - resent, and they reconcile: published - resent =
-- succeeded + terminal + jobs still unsettled.
ALTER TABLE sweeper_runs
    ADD COLUMN resent                      integer NOT NULL DEFAULT 0,
    ADD COLUMN oldest_released_age_seconds double precision,
    ADD COLUMN consumed                    integer NOT NULL DEFAULT 0,
    ADD COLUMN succeeded                   integer NOT NULL DEFAULT 0,
    ADD COLUMN retried                     integer NOT NULL DEFAULT 0,
    ADD COLUMN terminal                    integer NOT NULL DEFAULT 0,
    ADD COLUMN duplicates                  integer NOT NULL DEFAULT 0,
    ADD COLUMN last_settled_at             timestamptz;

-- The batch that carried a job before an operator moved it: its history outlives the move.
ALTER TABLE sweeper_job_events
    ADD COLUMN batch_id text;

-- Retention deletes an operator action only when no job event names it; this index answers that
-- (and the foreign key's own check on each delete) without reading every event.
CREATE INDEX sweeper_job_events_action ON sweeper_job_events (action_id);
