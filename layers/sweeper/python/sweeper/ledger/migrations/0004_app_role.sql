-- The application role: what the producer, consumer and redrive may do to the ledger, and no
-- more. Data only (SELECT, INSERT, UPDATE, DELETE on sweeper's tables); no DDL: it owns nothing
-- and, on PostgreSQL 15+, has no CREATE on the public schema.
--
-- NOLOGIN and without a password: the functions log in as a user that is a member of this role.
-- On AWS the migrations function creates that user with the password of its own generated
-- secret (sweeper.ledger.roles), so no password is ever written in a migration.
DO $$
BEGIN
    CREATE ROLE sweeper_app NOLOGIN;
EXCEPTION
    -- Roles belong to the whole server: another database on it (a second stack, a test's
    -- template) may have made it already, possibly at the same moment.
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

GRANT USAGE ON SCHEMA public TO sweeper_app;
GRANT SELECT, INSERT, UPDATE, DELETE
    ON sweeper_jobs, sweeper_runs, sweeper_policy_state, sweeper_operator_actions,
       sweeper_job_events
    TO sweeper_app;

-- Tables and sequences later migrations create (as this same migrating user) get the same
-- grants, so a new table is never unreachable by the functions. Identity columns need no
-- sequence grant; a serial column's sequence would.
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO sweeper_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO sweeper_app;
