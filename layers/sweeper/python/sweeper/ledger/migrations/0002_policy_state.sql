-- The operator's console: pause state per policy, and what operators did, in the ledger.

-- One row per policy that was ever paused or resumed. The producer reads `paused` at the start of
-- every run (a primary-key lookup); the local stack polls it to stop its event source.
CREATE TABLE sweeper_policy_state (
    policy      text        PRIMARY KEY,
    paused      boolean     NOT NULL DEFAULT false,
    paused_at   timestamptz,
    paused_by   text CHECK (char_length(paused_by) <= 128),
    reason      text CHECK (char_length(reason) <= 500),
    resumed_at  timestamptz,
    updated_at  timestamptz NOT NULL,
    CONSTRAINT sweeper_policy_state_paused_has_time CHECK (NOT paused OR paused_at IS NOT NULL)
);

-- One row per operator action (pause, resume, retry, catch-up, prune, redrive): who, when, why,
-- and what it touched as counts and ids. Never customer data.
CREATE TABLE sweeper_operator_actions (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    policy  text,
    action  text        NOT NULL
            CHECK (action IN ('pause', 'resume', 'retry', 'catch_up', 'prune', 'redrive')),
    actor   text        NOT NULL CHECK (char_length(actor) <= 128),
    reason  text CHECK (char_length(reason) <= 500),
    detail  jsonb       NOT NULL DEFAULT '{}'::jsonb,
    at      timestamptz NOT NULL
);
CREATE INDEX sweeper_operator_actions_recent ON sweeper_operator_actions (policy, at DESC);

-- One row per job an operator moved by hand (a retry), with the state it left: the job's own
-- history survives its fresh attempt budget. Prune deletes a job's events with the job (no
-- foreign key, so that the jobs table can still be truncated on its own).
CREATE TABLE sweeper_job_events (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id            bigint      NOT NULL,
    action_id         bigint      NOT NULL REFERENCES sweeper_operator_actions (id),
    event             text        NOT NULL CHECK (event IN ('retried')),
    from_status       text        NOT NULL,
    to_status         text        NOT NULL,
    previous_attempts integer     NOT NULL,
    previous_outcome  text,
    previous_error_code text,
    at                timestamptz NOT NULL
);
CREATE INDEX sweeper_job_events_job ON sweeper_job_events (job_id);
