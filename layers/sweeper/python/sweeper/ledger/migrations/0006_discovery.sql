-- Discovery: where each policy's reconciliation pass over its system of record stands, and one
-- row per discovery run with what it found. Ids, counts, cursors and times; never customer data
-- beyond the cursor (the last sort key read, which the source needs to resume).

-- One row per (policy, source kind) with discovery. The cursor is the position after the last page whose
-- obligations were committed, updated in the same transaction as that page's upsert, so a run
-- killed anywhere resumes exactly after what the ledger holds. `cursor` NULL: the next page is the
-- first of a new pass. A run writes it only if it still holds the value the run read
-- (compare-and-set), so two overlapping runs never both advance from the same position.
CREATE TABLE sweeper_discovery_cursors (
    policy            text        NOT NULL,
    source            text        NOT NULL CHECK (source IN ('sql', 's3')),
    cursor            jsonb,
    -- Passes started since the cursor was created; a pass may span several runs.
    pass_number       bigint      NOT NULL DEFAULT 1 CHECK (pass_number >= 1),
    -- Rows read so far in this pass: a bad row's position is its ordinal in the pass.
    pass_scanned      bigint      NOT NULL DEFAULT 0 CHECK (pass_scanned >= 0),
    pass_started_at   timestamptz,
    last_complete_at  timestamptz,
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (policy, source)
);

-- One row per discovery run. (policy, source, scheduled_at) is unique: the scheduler delivers at least
-- once, so a second invocation for the same time is detected and does nothing.
CREATE TABLE sweeper_discovery_runs (
    run_id            text        PRIMARY KEY,
    policy            text        NOT NULL,
    source            text        NOT NULL,
    scheduled_at      timestamptz NOT NULL,
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz,
    invocations       integer     NOT NULL DEFAULT 1,
    pass_number       bigint,
    scanned           bigint      NOT NULL DEFAULT 0,
    inserted          bigint      NOT NULL DEFAULT 0,
    moved_earlier     bigint      NOT NULL DEFAULT 0,
    unchanged         bigint      NOT NULL DEFAULT 0,
    -- Read but not yet due under the policy's rule (an S3 object too young): a later pass.
    not_due           bigint      NOT NULL DEFAULT 0,
    rejected          bigint      NOT NULL DEFAULT 0,
    -- The first rejected rows: {"position": n, "reason": "..."}; positions and reasons only.
    rejected_sample   jsonb       NOT NULL DEFAULT '[]'::jsonb,
    cursor_before     jsonb,
    cursor_after      jsonb,
    elapsed_seconds   double precision,
    stop_reason       text,
    CONSTRAINT sweeper_discovery_runs_once_per_schedule UNIQUE (policy, source, scheduled_at)
);
CREATE INDEX sweeper_discovery_runs_recent ON sweeper_discovery_runs (policy, started_at DESC);
