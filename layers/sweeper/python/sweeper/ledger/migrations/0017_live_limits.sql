-- An operator's live change to a limit (issue 43: `sweeper limits set`, a rate, a pause, a
-- resume or a reset) is an operator action too, recorded with its actor and reason.
ALTER TABLE sweeper_operator_actions DROP CONSTRAINT sweeper_operator_actions_action_check;
ALTER TABLE sweeper_operator_actions ADD CONSTRAINT sweeper_operator_actions_action_check
    CHECK (action IN ('pause', 'resume', 'retry', 'catch_up', 'prune', 'redrive',
                      'cancel', 'hold', 'unhold', 'postpone', 'release', 'limits_set'));
