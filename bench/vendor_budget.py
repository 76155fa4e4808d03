"""Target (i) of issue 43: a budget per "day", spread evenly, its reserve never spent.

The real pipeline on the local stack (producer and consumer handlers in worker processes, SQS
and DynamoDB on the stand-in, PostgreSQL) calls a vendor simulator whose own rate is far above
the budget, so that only the budget paces the calls: 6,000 calls per "day" of 60 s, 0.2 kept
for others, so sweeper may spend 4,800 a day, 80/s on average. The day is placed to start as
the measured span does (`offset_seconds`), so the whole span is one day spread evenly, then
the start of the next. The backlog is more than the day lets through, so demand exceeds the
pace throughout.

Figures, from the vendor's arrival times (its own process, monotonic, mapped to epoch seconds):
the calls in the day (`spent`) against its 4,800 and its 6,000 (`max_fraction`: at most 0.80);
the calls made by each tenth of the day and by each second against an even pace
(`pace_by_tenth`, `per_second`). The even pace is the rule's: the day's 4,800 spread over the
time left at the first call (the backlog's first messages reach the consumers a second or so
into the day), a line from the first call to the day's end. The deviation from it
(`max_deviation_from_even`, the target's: within 0.05) is the calls made by a time less the
line's there, as a share of the day's 4,800, the largest over the day (before and after each
call, and at the day's end): "spent within ±5 % of an even pace" is the day's spend, as "never
past 80 %" is. Beside it, the stricter reading, the same difference as a share of the line's
own count there (`max_relative_deviation_from_tenth`), judged from the first tenth of the day
on: before it the line holds few calls, and one call early or late is percents (at 10 calls,
the earlier measure's first point, one call was 10 %).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

from sweeper.config import (
    ConsumerConfig,
    HttpActionConfig,
    LimitConfig,
    Policy,
    Quota,
    ThrottleConfig,
)
from sweeper.config.budget import BudgetConfig
from sweeper_local.aws import LocalAws
from sweeper_local.pipeline import LocalPipeline
from sweeper_local.stack import LocalStack
from sweeper_local.vendor import VendorProcess

#: The budget of target (i): 6,000 calls per 60-second "day", 20 % kept for others.
BUDGET_LIMIT = 6000
DAY_SECONDS = 60.0
RESERVE_FRACTION = 0.2
#: The vendor's own rate: well above the budget's 80/s, so only the budget paces the calls.
VENDOR_RATE = "400/1s"
VENDOR_LATENCY_SECONDS = 0.02
#: The day starts this long after the run is set up to start (its pipeline starts meanwhile);
#: the backlog is seeded when it starts, so that no call falls in the day before.
START_LEAD_SECONDS = 20.0
#: After the day, this much of the next is measured: its calls start at its start.
NEXT_DAY_SECONDS = 4.0
#: The backlog, in multiples of the day's spendable calls: demand exceeds the pace throughout.
BACKLOG_FACTOR = 1.2
#: Records a batch and calls at once per environment (bench/rate.py's real-rate scenarios).
BATCH_SIZE = 100
PARALLEL_CALLS = 10


@contextlib.contextmanager
def _stack(database_url: str | None) -> Iterator[LocalStack]:
    # api_url set so the stack starts no simulator of its own: the run starts its own.
    with LocalStack(
        database_url=database_url, api_url="http://127.0.0.1:9", aws=LocalAws(lite=True)
    ) as stack:
        yield stack


def _policy(vendor_url: str, day_starts_at: float, environments: int) -> Policy:
    budget = BudgetConfig(
        limit=BUDGET_LIMIT,
        period_seconds=DAY_SECONDS,
        window="fixed",
        reserve_fraction=RESERVE_FRACTION,
        offset_seconds=round(day_starts_at % DAY_SECONDS, 3),
    )
    return Policy(
        name=f"budget-{secrets.token_hex(3)}",
        limits=[
            LimitConfig(
                name="org",
                key="{policy}",
                rate=Quota(limit=int(VENDOR_RATE.split("/")[0]), period_seconds=1.0),
                budget=budget,
            )
        ],
        action=HttpActionConfig(api_url=vendor_url, allow_plain_http=True, read_timeout_seconds=5),
        # as the rate benchmark's real rates (100/s, 4 environments): the consumers carry more
        # than the budget's 80/s on the stand-in, so that the budget, not they, sets the pace
        consumer=ConsumerConfig(
            reserved_concurrency=environments,
            max_concurrency=environments,
            batch_size=BATCH_SIZE,
            batch_window_seconds=1,
            timeout_seconds=60,
            parallel_calls=PARALLEL_CALLS,
        ),
        throttle=ThrottleConfig(reopen_jitter_seconds=0.05),
        lease_seconds=600,
    )


def spend_figures(arrivals: list[float], day_start: float) -> dict[str, Any]:
    """The day's spend against its budget and against an even pace (`arrivals`: epoch s)."""
    spendable = int(BUDGET_LIMIT * (1 - RESERVE_FRACTION))
    day_end = day_start + DAY_SECONDS
    in_day = sorted(a for a in arrivals if day_start <= a < day_end)
    first = in_day[0] if in_day else day_start
    absolute, relative = deviations(in_day, first, day_end, spendable)
    tenths = []
    for i in range(1, 11):
        by = first + (day_end - first) * i / 10
        tenths.append(
            {
                "by_seconds": round(by - day_start, 1),
                "spent": sum(1 for a in in_day if a < by),
                "even": round(spendable * i / 10),
            }
        )
    next_day = sorted(a for a in arrivals if a >= day_end)
    return {
        "budget": f"{BUDGET_LIMIT}/{DAY_SECONDS:g}s, reserve {RESERVE_FRACTION}",
        "spendable": spendable,
        "spent": len(in_day),
        "max_fraction": round(len(in_day) / BUDGET_LIMIT, 4),
        "max_deviation_from_even": round(absolute[0], 4),
        "max_deviation_from_even_at_seconds": round(absolute[1] - day_start, 3),
        "max_relative_deviation_from_tenth": round(relative[0], 4),
        "max_relative_deviation_from_tenth_at_seconds": round(relative[1] - day_start, 3),
        "pace_by_tenth": tenths,
        "per_second": per_second(arrivals, day_start, first, spendable),
        "first_call_after_seconds": round(first - day_start, 3),
        "calls_before_day": sum(1 for a in arrivals if a < day_start),
        "next_day_first_call_after_seconds": (
            round(next_day[0] - day_end, 3) if next_day else None
        ),
    }


def deviations(
    in_day: list[float], first: float, day_end: float, spendable: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """The largest deviation of the calls made (`in_day`, sorted) from the even line, as a share
    of `spendable` over the whole day and as a share of the line from its first tenth on; each
    with its time. Judged just before and just after each call, and at the day's end."""
    absolute, relative = (0.0, first), (0.0, first)
    tenth = first + (day_end - first) / 10
    points = [(at, made) for k, at in enumerate(in_day) for made in (k, k + 1)]
    for at, made in [*points, (day_end, len(in_day))]:
        even = even_line(at, first, day_end, spendable)
        off = abs(made - even)
        if off / spendable > absolute[0]:
            absolute = (off / spendable, at)
        if at >= tenth and off / even > relative[0]:
            relative = (off / even, at)
    return absolute, relative


def per_second(
    arrivals: list[float], day_start: float, first: float, spendable: int
) -> list[dict[str, Any]]:
    """Each second of the day and of the next day's start: its calls, the calls made by its
    end and the even line there (`spendable` spread from the first call to the day's end)."""
    day_end = day_start + DAY_SECONDS
    ordered = sorted(arrivals)
    trace = []
    for second in range(int(DAY_SECONDS + NEXT_DAY_SECONDS)):
        start, end = day_start + second, day_start + second + 1
        by = min(end, day_end)
        trace.append(
            {
                "second": second,
                "calls": bisect.bisect_left(ordered, end) - bisect.bisect_left(ordered, start),
                "spent": bisect.bisect_left(ordered, by) - bisect.bisect_left(ordered, day_start),
                "even": round(even_line(by, first, day_end, spendable), 1),
            }
        )
    return trace


def even_line(at: float, first: float, day_end: float, spendable: int) -> float:
    """The calls an even pace has made by `at`: `spendable` spread from `first` to the end."""
    if at <= first:
        return 0.0
    return spendable * min(1.0, (at - first) / (day_end - first))


def run_budget(database_url: str | None = None, *, environments: int = 4) -> dict[str, Any]:
    """Target (i): run one budget "day" of 60 s and the start of the next; print and return
    the spend against the budget and against an even pace."""
    vendor = VendorProcess(
        *("--rate", VENDOR_RATE, "--scope", "global", "--latency", str(VENDOR_LATENCY_SECONDS)),
        *("--seed", "7"),
    )
    try:
        with _stack(database_url) as stack:
            day_start = time.time() + START_LEAD_SECONDS
            policy = _policy(vendor.url, day_start, environments)
            with LocalPipeline(
                stack,
                policy,
                extra_env={"POWERTOOLS_LOG_LEVEL": "WARNING"},
                prefix=f"bench-{policy.name}",
                log_prefix="sweeper-bench-",
                rehearsal_url=vendor.url,
            ) as run:
                spendable = int(BUDGET_LIMIT * (1 - RESERVE_FRACTION))
                time.sleep(max(0.0, day_start - time.time()))
                run.seed(int(spendable * BACKLOG_FACTOR), tenants=10, spread_seconds=1)
                until = day_start + DAY_SECONDS + NEXT_DAY_SECONDS
                run.run(lambda: time.time() >= until, timeout_seconds=until - time.time() + 5)
                audit = vendor.audit()
                offset = time.time() - time.monotonic()  # one machine: one offset
                settled = run.final()
    finally:
        vendor.stop()
    result = {
        "scenario": "budget",
        **spend_figures([a + offset for a in audit.arrivals], day_start),
        "calls": audit.calls_total,
        "settled": settled,
        "environments": environments,
    }
    print(
        f"budget {result['budget']}: spent {result['spent']} of {result['spendable']} in the day "
        f"(max fraction {result['max_fraction']}, target <= 0.80); "
        f"max deviation from an even pace {result['max_deviation_from_even']} of the day's "
        f"budget (target <= 0.05), {result['max_relative_deviation_from_tenth']} of the pace's "
        "count from the first tenth on"
    )
    for tenth in result["pace_by_tenth"]:
        print(f"  by {tenth['by_seconds']:>5} s: spent {tenth['spent']:>5}, even {tenth['even']}")
    return result


if __name__ == "__main__":
    print(json.dumps(run_budget(), indent=2))
