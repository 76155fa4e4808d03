-- Jobs retrying (issue 41): `status`, `inspect` and the console page count the unsettled jobs
-- whose last attempt came to a class that retries, by class and code
-- (view_sql.RETRYING_BY_CODE, whose predicate this is word for word, so the planner may use it).
-- Partial: only the failing jobs are in it, so the read costs them and not the backlog, and a
-- job that waits without an outcome, settles or is held writes nothing to it.
CREATE INDEX sweeper_jobs_retrying
    ON sweeper_jobs (policy, last_outcome, last_error_code, due_at)
    WHERE status IN ('pending', 'leased')
      AND last_outcome IN ('throttled', 'transient', 'unknown', 'auth', 'snooze');
