"""What the console commands run against: the policy file, where things are, and the ledger.

`Backend` is built once per caller (the CLI's direct path, the operator API's function, the
local stack) and handed to every command (`sweeper.operator_api.commands`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sweeper.config import Policy, SweeperConfig
from sweeper.errors import OperatorError

if TYPE_CHECKING:
    from sweeper.endpoints import Endpoints
    from sweeper.ledger.store import Ledger
    from sweeper.limiter import ScopeState

Clock = Callable[[], datetime]
#: Every limiter key closed at a time (epoch seconds): `sweeper.limiter.closed_gates`.
Closures = Callable[[float], "list[ScopeState]"]
#: Told the work done so far, for a progress bar on the direct path (the API has none).
Progress = Callable[[int], None]


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Backend:
    """What the commands run against: the policy file, where things are, and the ledger.

    `open_ledger` is called at most once, when a command first needs the ledger (a release on
    AWS without a ledger URL never does). `consumer_function` is the direct path's
    `--consumer-function`; the API always uses the stack's own. `remaining_seconds` bounds the
    long commands (redrive) by the caller's own deadline, e.g. Lambda's.
    """

    config: SweeperConfig
    endpoints: Endpoints
    open_ledger: Callable[[], Ledger] | None
    clock: Clock = utcnow
    consumer_function: str | None = None
    remaining_seconds: Callable[[], float] | None = None
    progress: Progress | None = None
    _ledger: Ledger | None = field(default=None, repr=False)

    @property
    def has_ledger(self) -> bool:
        return self.open_ledger is not None

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            if self.open_ledger is None:
                self.endpoints.require_database()  # raises with the fix
                raise OperatorError("no ledger")  # pragma: no cover - require_database raised
            self._ledger = self.open_ledger()
        return self._ledger

    def end_run(self) -> None:
        """A request ended: its ledger's session is closed when the cluster may pause (each
        write it made lowered the wake item already; `Ledger.end_run`)."""
        if self._ledger is not None:
            self._ledger.end_run()

    def policy(self, name: str | None) -> Policy:
        """The named policy, or the only one; OperatorError otherwise."""
        if name is None:
            if len(self.config.policies) != 1:
                names = [p.name for p in self.config.policies]
                raise OperatorError(f"--policy is required (the policy file has {names})")
            return self.config.policies[0]
        for policy in self.config.policies:
            if policy.name == name:
                return policy
        raise OperatorError(f"no policy named {name!r} (check --policy)")

    def gate(self) -> Callable[[str], ScopeState] | None:
        from sweeper.limiter import DynamoLimiter

        table = self.endpoints.limiter_table()
        if table is None:
            return None
        return DynamoLimiter(self.endpoints.dynamodb(), table).state

    def closures(self) -> Closures | None:
        """The read of every limiter key closed at a time (None: no limiter table known)."""
        return closures_reader(self.endpoints)

    def tell(self, done: int) -> None:
        if self.progress is not None:
            self.progress(done)


def closures_reader(endpoints: Endpoints) -> Closures | None:
    """The closed keys' read on the endpoints' limiter table (None: no table known)."""
    from sweeper.limiter import closed_gates

    table = endpoints.limiter_table()
    if table is None:
        return None
    client = endpoints.dynamodb()
    return lambda now: closed_gates(client, table, now)
