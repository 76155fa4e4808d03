-- The reader role (issue 40): what the read-only operator API may do to the ledger, and no more.
-- SELECT on the tables its commands read (status, runs, inspect and the console's overview,
-- activity, search and job); no INSERT, UPDATE or DELETE, no DDL, no default privileges: a
-- table a later migration adds stays unreadable to it until that migration grants it here.
-- Discovery's cursors (a position in the system of record, source ids) and the schema version
-- are read by no read command, and are not granted.
--
-- NOLOGIN and without a password, as `sweeper_app` (migration 0004): on AWS the migrations
-- function makes the login user of the reader's own secret a member of this role.
DO $$
BEGIN
    CREATE ROLE sweeper_reader NOLOGIN;
EXCEPTION
    -- Roles belong to the whole server (another database on it may have made it already).
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

GRANT USAGE ON SCHEMA public TO sweeper_reader;
GRANT SELECT
    ON sweeper_jobs, sweeper_runs, sweeper_policy_state, sweeper_operator_actions,
       sweeper_job_events, sweeper_discovery_runs
    TO sweeper_reader;
