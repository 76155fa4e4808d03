"""Observability: alarms on what an operator must act on, one topic, one dashboard.

Every alarm notifies the topic on ALARM and on OK. Thresholds come from the policy's `alarms`
section, or are derived from the policy (the backlog threshold is what the quota drains within
the queue-age threshold). Application metrics are emitted by Powertools Metrics in namespace
`Sweeper` with dimensions `service` and `policy`.

Names: an alarm has a stable id in PascalCase (`QueueAge`); it is named `<stack>-<policy>-<id>`
when it watches one policy and `<stack>-<id>` when it watches the stack (the ledger, its secrets).
docs/runbook.md has one section per id, headed by the id (tests/infra/test_runbook.py holds the
two to each other). Add alarms through `AlarmBoard.add_alarm` so they follow the convention.

The modules: `base` (the topic, the stack's dashboard, `AlarmSpec` and `add_alarm`, and
`PolicyHome`: where a policy's alarms and its own dashboard go, in its nested stack), `helpers`
(metrics, graphs and the figures thresholds derive from), one `*_alarms` module per part it
watches (pipeline, retention, ledger, discovery, intake), and `construct` (`Observability`, the
construct the stack composes, with one `watch*` method per part).
"""

from infra.observability.base import (
    ALARM_PERIOD_SECONDS,
    AlarmBoard,
    AlarmSpec,
    PolicyHome,
    policy_dashboard_name,
)
from infra.observability.construct import Observability
from infra.observability.helpers import (
    backlog_threshold,
    lag_alarm_window,
    rotation_function_name,
    slots_per_period,
)
from infra.observability.retention_alarms import (
    PRUNE_ALARM_PERIOD_SECONDS,
    PRUNE_BEHIND_EVALUATION_PERIODS,
)

__all__ = [
    "ALARM_PERIOD_SECONDS",
    "PRUNE_ALARM_PERIOD_SECONDS",
    "PRUNE_BEHIND_EVALUATION_PERIODS",
    "AlarmBoard",
    "AlarmSpec",
    "Observability",
    "PolicyHome",
    "backlog_threshold",
    "lag_alarm_window",
    "policy_dashboard_name",
    "rotation_function_name",
    "slots_per_period",
]
