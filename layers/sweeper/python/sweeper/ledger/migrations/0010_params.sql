-- Per-obligation params (issue 24): a small JSON object each door checks (at most 4 KB in its
-- compact encoding, the policy's schema, its identity params) before anything is written. The
-- action receives them from this column, never from a message body (the body carries only
-- their digest, which the consumer compares with this row's). The bound here is a backstop for
-- a writer that skipped the doors: jsonb's own rendering is a little longer than the compact one.
ALTER TABLE sweeper_jobs
    ADD COLUMN params jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE sweeper_jobs ADD CONSTRAINT sweeper_jobs_params_object
    CHECK (jsonb_typeof(params) = 'object' AND octet_length(params::text) <= 8192);

-- A re-schedule with other params before the job's first claim: the newest win, and the job's
-- history keeps what they replaced. No operator acted, so such an event names no action.
ALTER TABLE sweeper_job_events ALTER COLUMN action_id DROP NOT NULL;
ALTER TABLE sweeper_job_events DROP CONSTRAINT sweeper_job_events_event_check;
ALTER TABLE sweeper_job_events ADD CONSTRAINT sweeper_job_events_event_check
    CHECK (event IN ('retried', 'cancelled', 'held', 'unheld', 'postponed', 'params_replaced'));
ALTER TABLE sweeper_job_events
    ADD COLUMN previous_params jsonb;
