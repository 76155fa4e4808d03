"""A full read of the ledger that raises the policy's wake item, by whichever run is connected.

The producer makes one after each run that connected (read the item before the run, raise it
after). On a cluster that may pause, every other run that connected makes one as it ends
(`end_run`), before it closes its session: discovery's (it connects on its schedule whatever is
due) sets the item's `checked_at`, so an idle producer does not wake the cluster for a full read
of its own while discovery runs at least every `producer_idle_check_seconds`; the consumer's,
after the last job of a release settles, raises the item past the leases' expiry the producer's
raise left in it, so no producer run wakes the cluster to find those leases settled.

The rule is the producer's (sweeper.ledger.wake): the raise is made only when every write that
lowered the item before it was read had ended before the full read's snapshot, and only on the
version read, so a lowering made meanwhile wins; who reads changes nothing of that. A refresh
that fails leaves the item early: a connection, never a miss.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sweeper.errors import LedgerError
from sweeper.ledger.wake import Wake, WakeError

if TYPE_CHECKING:
    from sweeper.ledger.store import Ledger


def read_wake(ledger: Ledger, policy: str) -> Wake | None:
    """The policy's wake item; None without one or when it cannot be read (a producer run then
    connects, and nothing raises it)."""
    if ledger.wake is None:
        return None
    try:
        return ledger.wake.read(policy)
    except WakeError:
        return None


def raise_wake(ledger: Ledger, policy: str, read: Wake, checked_at: datetime) -> bool:
    """Raise the item to the ledger's next claimable time, only when every write that lowered
    it before `read` had ended by then and no lowering was counted since; `checked_at` is no
    later than the moment `read` was taken. True when it was raised."""
    try:
        at, settled = ledger.next_wake(policy, read.writer)
        return (
            settled
            and ledger.wake is not None
            and ledger.wake.raise_to(policy, at, read.version, checked_at)
        )
    except (WakeError, LedgerError):
        return False


def refresh_wake(ledger: Ledger, policy: str, now: datetime) -> bool:
    """A connected run's full read for the producer: read the item at `now`, then raise it."""
    read = read_wake(ledger, policy)
    return read is not None and raise_wake(ledger, policy, read, now)


def end_run(ledger: Ledger, policy: str, now: datetime) -> None:
    """A run of a function of `policy` ended: on a cluster that may pause, one that connected
    refreshes the wake item, then its session is closed (`Ledger.end_run`), whatever the
    refresh raised: an open session would keep the cluster awake."""
    try:
        if ledger.may_pause and ledger.connected:
            refresh_wake(ledger, policy, now)
    finally:
        ledger.end_run()
