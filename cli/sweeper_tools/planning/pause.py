"""How long a ledger that may pause (minimum 0 ACU) is awake in a month, by what wakes it.

Aurora Serverless v2 pauses an instance once it has had no user connection for its
SecondsUntilAutoPause (infra/database.py: 300 s, Aurora's floor), and resumes it when a
connection is requested; a paused instance bills no capacity, a running one at least
MIN_ACTIVE_ACU. On such a cluster every function ends its run by refreshing the policy's wake
item if it connected and closing its session (sweeper.ledger.wake_refresh.end_run,
SWEEPER_LEDGER_MAY_PAUSE): no warm environment holds one. So the cluster is awake for each run
that connects, plus the pause delay after it, plus its resume:

- each scheduled run that connects whatever is due: discovery's and retention's, on the
  policy's schedules (the redrive connects only for a dead letter: none at rest);
- the producer's full read every `producer_idle_check_seconds` (its wake item's trust bound,
  sweeper.ledger.wake), at most once a producer run; an idle producer otherwise reads only its
  wake item. Discovery's run ends with that read, so with discovery at least as often as the
  bound the producer makes none of its own (one falling due as discovery runs is inside
  discovery's window); less often, one each bound between two discovery runs (a cron's runs
  taken as evenly spread);
- each arrival of work (ARRIVALS_PER_DAY): the write that brings it (intake), the producer's
  next run that releases it, at most one producer interval later (awake that long, or the pause
  delay and a resume when the interval is longer), and the pause delay after the drain: the
  consumer's run that settles the last job raises the wake item, so no producer run wakes the
  cluster at the leases' expiry. A policy whose only door is discovery (no webhook, no event
  patterns) writes new work only in discovery's runs, already counted: an arrival adds its
  release (at most one interval after the run) or, for work discovered ahead of its due time,
  a run of its own (resume, run, pause delay), whichever is longer. The drain itself is billed
  per job ("Aurora while draining").

Without the pause (a minimum above 0) the refreshes are not made: the producer reads the ledger
every bound, and it wakes at the leases' expiry; only the connections are counted then (for
the secret reads). Windows that overlap otherwise are counted twice: at most; the total is
capped at the month.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sweeper.config import Policy
from sweeper.schedule_expression import RateSchedule, occurrences, parse_schedule

HOURS_PER_MONTH = 730.0
#: infra/database.py AUTO_PAUSE_AFTER_MINUTES (tests/infra/test_plan_costs.py holds them equal).
AUTO_PAUSE_AFTER_SECONDS = 300.0
#: Estimate, at most: Aurora's documentation gives about 15 s to resume a paused instance
#: (longer after a day paused); billed here as awake.
RESUME_SECONDS = 15.0
#: Estimate: a scheduled run with nothing to do (0.5 s; costs.IDLE_RUN_GB_SECONDS at 512 MB).
IDLE_RUN_SECONDS = 0.5
#: Times a day new work arrives and wakes a paused ledger ("a few times a day").
ARRIVALS_PER_DAY = 4


def runs_per_month(expression: str, timezone: str = "UTC") -> float:
    """How often a schedule fires in an average month (a cron counted day by day over a week)."""
    schedule = parse_schedule(expression, timezone)
    if isinstance(schedule, RateSchedule):
        return HOURS_PER_MONTH * 3600 / schedule.every.total_seconds()
    monday = datetime(2026, 1, 5, tzinfo=UTC)  # any week serves
    days = [monday + timedelta(days=n) for n in range(7)]
    week = sum(
        len(occurrences(expression, timezone, day, day + timedelta(days=1, seconds=-1)))
        for day in days
    )
    return week / (7 * 24) * HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class Wakes:
    """One reason the cluster is awake: how often a month, how long each time, and the runs
    that connect to the ledger each time."""

    name: str
    per_month: float
    seconds_each: float
    connections_each: int = 1

    @property
    def hours(self) -> float:
        return self.per_month * self.seconds_each / 3600

    @property
    def connections(self) -> float:
        return self.per_month * self.connections_each

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "per_month": round(self.per_month, 3),
            "seconds_each": round(self.seconds_each, 1),
            "hours": round(self.hours, 3),
        }


def _window(gap_seconds: float) -> float:
    """Awake time from one connection to the next one `gap_seconds` later: the whole gap when
    it is shorter than the pause delay, else the pause delay and the next one's resume."""
    if gap_seconds <= AUTO_PAUSE_AFTER_SECONDS:
        return gap_seconds
    return AUTO_PAUSE_AFTER_SECONDS + RESUME_SECONDS


def _alone() -> float:
    """Awake time of one connecting run on a paused cluster: resume, run, pause delay."""
    return RESUME_SECONDS + IDLE_RUN_SECONDS + AUTO_PAUSE_AFTER_SECONDS


def _producer_checks(policy: Policy, *, may_pause: bool) -> float:
    """The producer's own full reads of an idle ledger a month (its trust bound)."""
    producer_runs = runs_per_month(policy.schedule, policy.timezone)
    trust = policy.producer_idle_check_seconds
    if policy.discovery is None or not may_pause:
        return min(producer_runs, HOURS_PER_MONTH * 3600 / trust)
    runs = runs_per_month(policy.discovery.schedule, policy.timezone)
    between = HOURS_PER_MONTH * 3600 / runs
    return min(producer_runs, runs * (math.ceil(between / trust - 1e-9) - 1))


def only_door_is_discovery(policy: Policy) -> bool:
    """New work reaches the ledger only in discovery's runs (and operator commands)."""
    return policy.discovery is not None and not (
        policy.intake.webhook or policy.intake.event_patterns
    )


def _arrival(policy: Policy, *, may_pause: bool) -> Wakes:
    """One arrival of work: how long it keeps the cluster awake, and the runs that connect."""
    interval = HOURS_PER_MONTH * 3600 / runs_per_month(policy.schedule, policy.timezone)
    release = _window(interval) + IDLE_RUN_SECONDS
    settled = AUTO_PAUSE_AFTER_SECONDS
    if not may_pause:  # no refresh: the producer reads again at the leases' expiry
        settled = _window(policy.lease_seconds) + AUTO_PAUSE_AFTER_SECONDS
    per_month = ARRIVALS_PER_DAY * HOURS_PER_MONTH / 24
    name = f"{policy.name}: arrivals of work"
    if only_door_is_discovery(policy) and may_pause:
        # The write is discovery's run: its window already holds the wait for the release.
        seconds = max(release, _alone())
        return Wakes(f"{name} (in discovery's runs)", per_month, seconds, 2)
    return Wakes(name, per_month, RESUME_SECONDS + release + settled, 3)


def policy_wakes(policy: Policy, *, may_pause: bool = True) -> list[Wakes]:
    """What keeps the ledger awake for one policy, per month (see the module docstring)."""
    checks = _producer_checks(policy, may_pause=may_pause)
    found = [Wakes(f"{policy.name}: producer's full read (trust bound)", checks, _alone())]
    if policy.discovery is not None:
        runs = runs_per_month(policy.discovery.schedule, policy.timezone)
        found.append(Wakes(f"{policy.name}: discovery runs", runs, _alone()))
    if policy.retention.enabled:
        runs = runs_per_month(policy.retention.schedule, policy.timezone)
        found.append(Wakes(f"{policy.name}: retention runs", runs, _alone()))
    found.append(_arrival(policy, may_pause=may_pause))
    return found


def ledger_wakes(policies: Sequence[Policy], *, may_pause: bool = True) -> list[Wakes]:
    return [wake for p in policies for wake in policy_wakes(p, may_pause=may_pause)]


def awake_hours(policies: Sequence[Policy]) -> float:
    """Hours a month a cluster with minimum 0 is awake (at most the month)."""
    return min(HOURS_PER_MONTH, sum(w.hours for w in ledger_wakes(policies)))


def connecting_runs(policies: Sequence[Policy], *, may_pause: bool) -> float:
    """Runs a month that connect to the ledger at rest (each reads the ledger's secret)."""
    return sum(w.connections for w in ledger_wakes(policies, may_pause=may_pause))
