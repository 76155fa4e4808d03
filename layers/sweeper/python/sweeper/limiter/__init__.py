"""The rate cap shared by every consumer, and the throttle gate, per limiter scope.

A small package, split as Powertools splits a utility: `base` holds what every limiter speaks
(`Grant`, `Denial`, `ScopeState`, the `Limiter` protocol, and `GateReader` for a limiter reading
several gates at once), `dynamodb` the production limiter (one DynamoDB item per scope: its slots,
its gate, its adaptive rate; composed of `items`, `gcra`, `held`, `gates` and `paired_writes`)
and the producer's read of the closed gates, and `backoff` the throttle and retry delays. The
arithmetic of the rate for a quota not known lives a floor below, in `sweeper.adaptive_rate`,
which the policy models import too. This facade re-exports their public names (`Adaptive`
included), so callers import from `sweeper.limiter` and not from a module.
"""

from sweeper.adaptive_rate import Adaptive
from sweeper.limiter.backoff import MIN_RECOVERY_SECONDS, close_delay, recovery_seconds, retry_delay
from sweeper.limiter.base import (
    MAX_GATES_PER_READ,
    Denial,
    GateReader,
    Grant,
    Limiter,
    Reason,
    ScopeState,
)
from sweeper.limiter.dynamodb import DynamoLimiter
from sweeper.limiter.gates import closed_gates, closed_scopes
from sweeper.limiter.held import MILLI
from sweeper.limiter.items import (
    FIRST_LEAD_SECONDS,
    ITEM_TTL_SECONDS,
    LEAD_SAMPLES,
    MAX_LEAD_SECONDS,
    MAX_RACES,
    US,
)

__all__ = [
    "FIRST_LEAD_SECONDS",
    "ITEM_TTL_SECONDS",
    "LEAD_SAMPLES",
    "MAX_GATES_PER_READ",
    "MAX_LEAD_SECONDS",
    "MAX_RACES",
    "MILLI",
    "MIN_RECOVERY_SECONDS",
    "US",
    "Adaptive",
    "Denial",
    "DynamoLimiter",
    "GateReader",
    "Grant",
    "Limiter",
    "Reason",
    "ScopeState",
    "close_delay",
    "closed_gates",
    "closed_scopes",
    "recovery_seconds",
    "retry_delay",
]
