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
the calls made by each tenth of the day against an even pace (`pace_by_tenth`), and the
largest deviation from it from the tenth even step on (`max_deviation_from_even`: within 0.05
is the target). The even pace is the rule's: the day's 4,800 spread over the time left at the
first call (the backlog's first messages reach the consumers a second or two into the day).
"""

from __future__ import annotations

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
#: A deviation from even is judged from this many even steps after the day's start.
FROM_STEPS = 10


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
    step = (day_end - first) / spendable  # the even step over the time left at the first call
    deviations = [
        abs((k + 1) / ((at - first) / step) - 1.0)
        for k, at in enumerate(in_day)
        if at - first >= FROM_STEPS * step
    ]
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
        "max_deviation_from_even": round(max(deviations, default=0.0), 4),
        "pace_by_tenth": tenths,
        "first_call_after_seconds": round(first - day_start, 3),
        "calls_before_day": sum(1 for a in arrivals if a < day_start),
        "next_day_first_call_after_seconds": (
            round(next_day[0] - day_end, 3) if next_day else None
        ),
    }


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
        f"max deviation from an even pace {result['max_deviation_from_even']} (target <= 0.05)"
    )
    for tenth in result["pace_by_tenth"]:
        print(f"  by {tenth['by_seconds']:>5} s: spent {tenth['spent']:>5}, even {tenth['even']}")
    return result


if __name__ == "__main__":
    print(json.dumps(run_budget(), indent=2))
