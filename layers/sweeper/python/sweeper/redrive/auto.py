"""The automatic redrive of throttled dead letters (`[policies.redrive] automatic = "throttled"`).

A dead letter keeps why it died in its job's ledger row: a record that waited for a limit
leaves `wait_<reason>` as the job's last code (sweeper.consumer.delivery), a 429 leaves the
outcome `throttled`. With the option, the redrive function runs every minute (EventBridge
Scheduler's finest rate), and each scheduled run is a `Watch`:

- it reads the DLQ's depth first (one GetQueueAttributes); when the DLQ is empty it returns,
  unless a limiter gate closed within its last period: a record deferred to a reopening may
  still die at it. It asks the latest closure's end first (one GetItem of `closures#latest`,
  sweeper.limiter.closures, raised by every gate close) and Scans the limiter table for the
  gates closed now or reopened since only when that end is after its period's start. Idle, a
  run is those two reads, a few ms and one read unit, whatever the number of limiter keys (a
  Scan reads every item: at 100,000 keys of ~100 bytes, ~1,220 read units a run);
- a letter whose job died of a limit moves back once every limit of the job is open and its
  time has come (never before); a reopening that falls within the run (the shared limiter
  item's `closed_until`, or the job's next attempt) is waited for in place, then the letters
  move paced by the limit;
- once it met such a letter the run keeps watch until its window ends, looking at the DLQ every
  WATCH_POLL_SECONDS: a record the consumer deferred to the reopening dies at the reopening (its
  last receive comes when it shows again), and is moved within a poll of it;
- a letter that died otherwise (a transient or unknown answer, an auth failure, a crash) stays
  for an operator (`kept_for_operator`), as do terminal and held jobs' letters.

The window ends WATCH_MARGIN_SECONDS before the schedule's next run, so two never overlap (the
function's reserved concurrency is 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sweeper.config.redrive import RedriveConfig
from sweeper.limiter import ScopeState
from sweeper.models import LedgerTarget, OutcomeClass
from sweeper.redrive.log import SCHEDULE_ACTOR

#: The prefix of the code a wait leaves (`_return_in(..., code=f"wait_{reason}")`).
WAIT_PREFIX = "wait_"
#: The waits that are a limit's (sweeper.limiter.base.Reason), not an auth failure's circuit.
LIMIT_WAITS = frozenset(
    f"{WAIT_PREFIX}{reason}" for reason in ("rate", "throttled", "backoff", "paused", "budget")
)
#: How often a run keeping watch looks for new letters (one ReceiveMessage each).
WATCH_POLL_SECONDS = 1.0
#: A run's window ends this long before the schedule's next run.
WATCH_MARGIN_SECONDS = 5.0


def died_of_limit(view: LedgerTarget) -> bool:
    """Did the job's last delivery end on a limit: a wait for one, or the vendor's 429?"""
    code = view.last_error_code or ""
    if code.startswith(WAIT_PREFIX):
        return code in LIMIT_WAITS
    return view.last_outcome is OutcomeClass.THROTTLED


#: The gates closed after an instant (epoch seconds): now, or reopened since
#: (`closed_gates_after`: a Scan only when the latest closure ends after it).
ClosedSince = Callable[[float], Sequence[ScopeState]]


def _none_closed(since: float) -> Sequence[ScopeState]:
    return ()


@dataclass(frozen=True)
class Watch:
    """A scheduled run of the throttled letters' redrive: it waits for a reopening, and keeps
    watch for new letters, until `until` (on the run's monotonic clock). `closed_since` reads
    the gates closed since an instant; a run on an empty DLQ keeps watch when one was within
    `lookback_seconds`."""

    until: float
    poll_seconds: float = WATCH_POLL_SECONDS
    closed_since: ClosedSince = _none_closed
    lookback_seconds: float = 0.0

    @classmethod
    def for_period(
        cls, period_seconds: float, started: float, closed_since: ClosedSince = _none_closed
    ) -> Watch:
        """The window of a run started at `started` by a schedule every `period_seconds`."""
        return cls(
            until=started + max(0.0, period_seconds - WATCH_MARGIN_SECONDS),
            closed_since=closed_since,
            lookback_seconds=float(period_seconds),
        )

    def gate_closed_lately(self, now: float) -> bool:
        """Was a gate closed within the lookback (closed now, or reopened since)?"""
        return bool(self.closed_since(now - self.lookback_seconds))


def scheduled_watch(
    config: RedriveConfig, actor: str, started: float, closed_since: ClosedSince
) -> Watch | None:
    """The run's watch when its schedule runs the throttled letters' redrive (else None: an
    operator's request, or a policy without the option, decides as always)."""
    if not config.watches or actor != SCHEDULE_ACTOR:
        return None
    return Watch.for_period(config.period_seconds, started, closed_since)
