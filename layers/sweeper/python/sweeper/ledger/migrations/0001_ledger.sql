-- The ledger: one row per cleanup obligation. It is the truth; queues and caches are delivery.

CREATE TABLE sweeper_jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    policy           text        NOT NULL,
    policy_version   integer     NOT NULL CHECK (policy_version >= 1),
    tenant_id        text        NOT NULL,
    object_id        text        NOT NULL,
    scope            text        NOT NULL,
    -- {policy}:{tenant}:{object}:v{version}; the idempotency key everywhere downstream.
    operation_key    text        NOT NULL UNIQUE,
    status           text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'leased', 'succeeded', 'failed')),
    due_at           timestamptz NOT NULL,
    next_attempt_at  timestamptz NOT NULL,
    attempt_count    integer     NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    lease_owner      text,
    lease_expires_at timestamptz,
    last_outcome     text CHECK (last_outcome IN
                     ('accepted', 'absent', 'throttled', 'transient', 'unknown', 'permanent', 'auth')),
    -- A short code (http_503, read_timeout), never a response body or customer data.
    last_error_code  text CHECK (char_length(last_error_code) <= 64),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    -- A lease exists exactly while the row is leased.
    CONSTRAINT sweeper_jobs_lease_iff_leased CHECK (
        (status = 'leased') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)
    ),
    CONSTRAINT sweeper_jobs_completed_iff_settled CHECK (
        (status IN ('succeeded', 'failed')) = (completed_at IS NOT NULL)
    )
);

-- Partial indexes: a claim reads the due end of the pending set and a reclaim the expired end of
-- the leased set, so either costs the page it returns, not the table. Settled rows are in neither.
CREATE INDEX sweeper_jobs_pending_due ON sweeper_jobs (policy, next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX sweeper_jobs_leased_expiry ON sweeper_jobs (policy, lease_expires_at)
    WHERE status = 'leased';
CREATE INDEX sweeper_jobs_failed ON sweeper_jobs (policy, updated_at)
    WHERE status = 'failed';
CREATE INDEX sweeper_jobs_settled_completed ON sweeper_jobs (completed_at)
    WHERE status IN ('succeeded', 'failed');

-- One row per producer run. (policy, scheduled_at) is unique, so a second invocation for the
-- same scheduled time (the scheduler delivers at least once) is detected and counted.
CREATE TABLE sweeper_runs (
    batch_id          text        PRIMARY KEY,
    policy            text        NOT NULL,
    scheduled_at      timestamptz NOT NULL,
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz,
    invocations       integer     NOT NULL DEFAULT 1,
    reclaimed         integer     NOT NULL DEFAULT 0,
    discovered        integer     NOT NULL DEFAULT 0,
    published         integer     NOT NULL DEFAULT 0,
    publish_failures  integer     NOT NULL DEFAULT 0,
    oldest_eligible_age_seconds double precision,
    stop_reason       text,
    CONSTRAINT sweeper_runs_once_per_schedule UNIQUE (policy, scheduled_at)
);
CREATE INDEX sweeper_runs_recent ON sweeper_runs (policy, scheduled_at DESC);
