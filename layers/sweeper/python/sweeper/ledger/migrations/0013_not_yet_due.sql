-- Eligibility at the point of the call (issue 40): a delivery whose job's time has not come
-- (due_at, next_attempt_at or postponed_until ahead) is acknowledged uncalled; the batch audit
-- counts such deliveries per carrying batch beside its duplicates.
ALTER TABLE sweeper_runs
    ADD COLUMN not_yet_due integer NOT NULL DEFAULT 0;
