-- The operator API (issue 27) records the caller's IAM principal ARN as the actor: an ARN may
-- take up to 2048 characters (IAM's limit), more than the 128 migration 0002 allowed.
-- A release through the API is an operator action too, recorded with its caller.
ALTER TABLE sweeper_operator_actions DROP CONSTRAINT sweeper_operator_actions_actor_check;
ALTER TABLE sweeper_operator_actions ADD CONSTRAINT sweeper_operator_actions_actor_check
    CHECK (char_length(actor) <= 2048);

ALTER TABLE sweeper_policy_state DROP CONSTRAINT sweeper_policy_state_paused_by_check;
ALTER TABLE sweeper_policy_state ADD CONSTRAINT sweeper_policy_state_paused_by_check
    CHECK (char_length(paused_by) <= 2048);

ALTER TABLE sweeper_operator_actions DROP CONSTRAINT sweeper_operator_actions_action_check;
ALTER TABLE sweeper_operator_actions ADD CONSTRAINT sweeper_operator_actions_action_check
    CHECK (action IN ('pause', 'resume', 'retry', 'catch_up', 'prune', 'redrive',
                      'cancel', 'hold', 'unhold', 'postpone', 'release'));
