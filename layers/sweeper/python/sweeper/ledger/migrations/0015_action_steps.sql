-- Every change names its actor and reason before it happens (issue 40): a long operator action
-- (prune, retention's prune, redrive, catch-up) is recorded first, as its
-- sweeper_operator_actions row (who, why, with what parameters), and then step by step as it
-- goes, one row here per batch deleted, page of dead letters moved or run released. An
-- interrupted action so leaves a record of everything it did up to where it stopped; the last
-- step of one that finished says so (`"done": true` in its detail).
--
-- A prune's step is written by the very statement that deletes its batch, so a deletion is
-- never committed without its record. Counts and times only, never customer data. The steps go
-- with their action when retention deletes it (ON DELETE CASCADE).
CREATE TABLE sweeper_operator_action_steps (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action_id bigint      NOT NULL REFERENCES sweeper_operator_actions (id) ON DELETE CASCADE,
    at        timestamptz NOT NULL,
    detail    jsonb       NOT NULL DEFAULT '{}'::jsonb
);
-- An action's steps in order: what the console's progress sums and the cascade finds.
CREATE INDEX sweeper_operator_action_steps_action ON sweeper_operator_action_steps (action_id, id);

-- The console's overview (the read-only path) shows each action's progress: the reader role
-- (migration 0014) reads the steps as it reads the actions, and writes nothing.
GRANT SELECT ON sweeper_operator_action_steps TO sweeper_reader;
