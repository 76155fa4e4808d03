-- The snooze outcome (issue 24): the vendor says "not now" (a 409 or 423 mapped to snooze, or a
-- callable's answer). The job waits without spending an attempt and without closing its scope;
-- the seconds it has waited so are summed here, and past the policy's max_snooze_seconds the
-- job ends failed with the code snooze_exhausted.
ALTER TABLE sweeper_jobs DROP CONSTRAINT sweeper_jobs_last_outcome_check;
ALTER TABLE sweeper_jobs ADD CONSTRAINT sweeper_jobs_last_outcome_check
    CHECK (last_outcome IN ('accepted', 'absent', 'throttled', 'transient', 'unknown',
                            'permanent', 'auth', 'snooze'));
ALTER TABLE sweeper_jobs
    ADD COLUMN snoozed_seconds double precision NOT NULL DEFAULT 0 CHECK (snoozed_seconds >= 0);

-- The batch audit counts a carried job's snoozes beside its retries.
ALTER TABLE sweeper_runs
    ADD COLUMN snoozed integer NOT NULL DEFAULT 0;
