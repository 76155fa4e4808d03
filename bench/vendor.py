"""Limits the vendor tells: the `vendor` part of `sweeper bench rate` (issue 43's targets).

Each scenario runs the real pipeline on the local stack against a vendor simulator that states
its limits in its answers (sweeper_local.limit_dialects, sweeper_local.graphql_cost), through
the harness of sweeper_bench.vendor_harness; sweeper learns them (`learn` on its first limit,
sweeper.admission.learned). Each prints its figures with the targets beside them:

- (e) the quota not told (sweeper is told a ceiling of twice it), the vendor sends the IETF
  RateLimit fields: utilization from the 5th second on, on a 1 s and a 5 s window, and the
  self-caused 429s over the whole run;
- (f) the vendor halves its limit mid-run and says so from its next answer: the 429s beside the
  calls in flight at the change, and the utilization of the new limit from two of its windows
  after the change;
- (h) a points bucket (Shopify's: 1,000 points restoring 50/s, each call requesting 20 and
  costing 1-20, its cost known only from its answer): the share of the restore rate spent, and
  the throttled answers.

The scenarios are registered in VENDOR_SCENARIOS, one line each (see there).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sweeper.config import HttpActionConfig, LimitConfig, Quota, ScopeConfig
from sweeper_bench.rate import (
    ADAPTIVE_CAP_FACTOR,
    BACKLOG_FACTOR,
    REAL_RATE_LATENCY_SECONDS,
    Scenario,
    _stack,
)
from sweeper_bench.vendor_budget import run_budget
from sweeper_bench.vendor_harness import (
    VendorRun,
    VendorRunOptions,
    VendorSetup,
    common_figures,
    held_at,
    run_vendor,
    utilization,
    vendor_base_args,
)
from sweeper_bench.vendor_redrive import REOPENING, run_reopening
from sweeper_bench.vendor_shared import run_shared
from sweeper_local.graphql_cost import DEFAULT_MAXIMUM, DEFAULT_RESTORE_RATE, GRAPHQL_PATH
from sweeper_local.stack import LocalStack
from sweeper_local.vendor import VendorProcess

#: The vendor's quota in (e) and (f), calls per second on either window: what the several
#: limits' scenario (d) carries on this machine, on one scope (4 environments of 768 MB).
LEARN_RATE_PER_SECOND = 50
#: (e): utilization is read from the 5th second of the run on (the first four are the ramp).
FROM_SECOND = 5
#: (f): the vendor's limit is halved at this share of the run.
HALVE_AT_SHARE = 0.5
#: (f): the new limit's utilization is read from this many of its windows after the change.
SETTLE_WINDOWS = 2
#: (h): the GraphQL mutation and the outcome rule for a call throttled with HTTP 200 (Shopify).
PRODUCT_DELETE = "mutation($id: ID!) { productDelete(input: {id: $id}) { deletedProductId } }"
GRAPHQL_THROTTLED = {
    "status": 200,
    "json_path": {"path": "errors[0].extensions.code", "equals": "THROTTLED"},
    "outcome": "throttled",
    "code": "graphql_throttled",
}
#: (h): each call costs 1-20 points (uniform, the simulator's default), known from its answer.
COST_RANGE = (1, 20)
#: (h): the cost a call reserves before it goes: its requested cost, as a user states it (the
#: query's `requestedQueryCost`, which every answer states: the simulator requests its highest
#: cost). The answer's lower actual cost gives the rest back (sweeper.admission.costs).
REQUESTED_POINTS = COST_RANGE[1]

Runner = Callable[[LocalStack, VendorRunOptions], dict[str, Any]]


@dataclass(frozen=True)
class VendorScenario:
    """One scenario of the part: what it measures, and its runner, which takes the local stack
    and the options (each run's length, the windows) and returns its figures with its targets
    (`targets`) beside them."""

    what: str
    run: Runner


def _scenario(name: str, period: int, latency: float = REAL_RATE_LATENCY_SECONDS) -> Scenario:
    """One scope at LEARN_RATE_PER_SECOND on a `period`-second window, as the several limits'
    scenarios run: 4 environments of 768 MB held to their CPU share, 10 calls at a time, the
    batch `sweeper plan` recommends."""
    return Scenario(
        name,
        "shared",
        LEARN_RATE_PER_SECOND * period,
        float(period),
        None,
        latency_seconds=latency,
        environments=4,
        parallel_calls=10,
        batch_size=None,
        memory_mb=768,
        cap_cpu=True,
    )


def _learning_setup(scenario: Scenario) -> VendorSetup:
    """The vendor states its quota in the IETF fields; sweeper is told a ceiling of
    ADAPTIVE_CAP_FACTOR times it (as the adaptive scenario is), and learns the rest."""
    told = Quota(limit=scenario.limit * ADAPTIVE_CAP_FACTOR, period_seconds=scenario.period_seconds)
    global_key = ScopeConfig(kind="global").key_template
    return VendorSetup(
        scenario=scenario,
        vendor_args=(
            *("--rate", f"{scenario.limit}/{scenario.period_seconds:g}s", "--scope", "global"),
            *("--limit-dialect", "ratelimit", "--retry-after-ms-header"),
            *vendor_base_args(scenario),
        ),
        # named as the simulator's IETF policy ("quota"): followed by name
        limit=LimitConfig.model_validate(
            {"name": "quota", "key": global_key, "rate": told, "learn": "ratelimit"}
        ),
    )


def _quota_figures(run: VendorRun, scenario: Scenario) -> dict[str, Any]:
    audit = run.audit
    first = audit.arrivals[0] if audit.arrivals else run.started
    per_second = scenario.limit / scenario.period_seconds
    return {
        "quota": f"{scenario.limit}/{scenario.period_seconds:g}s",
        "told_ceiling": f"{scenario.limit * ADAPTIVE_CAP_FACTOR}/{scenario.period_seconds:g}s",
        "utilization_whole_run": utilization(audit, per_second, first, run.ended),
        "max_calls_in_any_window": audit.max_calls_in_window,
        **common_figures(run),
    }


def run_quota_not_told(stack: LocalStack, options: VendorRunOptions) -> dict[str, Any]:
    """(e): see the module docstring."""
    runs = []
    for period in options.periods:
        scenario = _scenario("e", period)
        run = run_vendor(stack, _learning_setup(scenario), seconds=options.seconds)
        first = run.audit.arrivals[0] if run.audit.arrivals else run.started
        per_second = scenario.limit / scenario.period_seconds
        runs.append(
            {
                "window_seconds": period,
                f"utilization_from_second_{FROM_SECOND}": utilization(
                    run.audit, per_second, first + FROM_SECOND - 1, run.ended
                ),
                **_quota_figures(run, scenario),
            }
        )
    return {
        "scenario": "e",
        "what": VENDOR_SCENARIOS["e"].what,
        **{
            f"utilization_{r['window_seconds']}s_window_from_second_{FROM_SECOND}": r[
                f"utilization_from_second_{FROM_SECOND}"
            ]
            for r in runs
        },
        "self_caused_429s": sum(r["self_caused_429s"] for r in runs),
        "targets": {
            f"utilization_5s_window_from_second_{FROM_SECOND}_min": 0.95,
            f"utilization_1s_window_from_second_{FROM_SECOND}_min": 0.90,
            "self_caused_429s": 0,
        },
        "runs": runs,
    }


def _halve(period: int, at_seconds: float) -> Callable[[VendorProcess], float]:
    limit = LEARN_RATE_PER_SECOND * period // 2

    def during(vendor: VendorProcess) -> float:
        return vendor.schedule_quota(limit, period, at_seconds)

    return during


def in_flight_at(run: VendorRun, instant: float) -> int:
    """Calls the vendor held at `instant`: arrived before it, answered after it (or never)."""
    return int(held_at(run.audit, instant))  # sweeper_bench is untyped to mypy (pyproject)


def first_answer_after(run: VendorRun, instant: float) -> float | None:
    """When the vendor first answered a call that arrived from `instant` on: the first answer
    that can state a change made then (an earlier call's answer states the quota it arrived
    under). None: no such answer."""
    return min((answer for at, answer in run.audit.answered if at >= instant), default=None)


def _rejections_after_change(run: VendorRun, changed: float) -> dict[str, Any]:
    """(f): the 429s of calls arriving from the change on, split by whether they arrived before
    the vendor's first answer that could state the new limit (no rule could know of it then)
    or after it (sent before the fleet had followed that answer), with their times."""
    after = [at for at in run.audit.quota_rejected_at if at >= changed]
    told = first_answer_after(run, changed)
    before_told = [at for at in after if told is None or at < told]
    return {
        "429s_after_change": len(after),
        "first_answer_after_change_seconds": None if told is None else round(told - changed, 3),
        "429s_before_its_first_answer": len(before_told),
        "429s_after_its_first_answer": len(after) - len(before_told),
        "429s_after_change_at_seconds": [round(at - changed, 3) for at in after],
    }


def run_halved(stack: LocalStack, options: VendorRunOptions) -> dict[str, Any]:
    """(f): see the module docstring."""
    runs = []
    for period in options.periods:
        scenario = _scenario("f", period)
        at_seconds = options.seconds * HALVE_AT_SHARE
        run = run_vendor(
            stack,
            _learning_setup(scenario),
            seconds=options.seconds,
            during=_halve(period, at_seconds),
        )
        changed: float = run.during
        new_per_second = LEARN_RATE_PER_SECOND * period // 2 / period
        settled_from = changed + SETTLE_WINDOWS * period
        rejected = _rejections_after_change(run, changed)
        runs.append(
            {
                "window_seconds": period,
                "halved_after_seconds": round(at_seconds, 1),
                "new_quota": f"{LEARN_RATE_PER_SECOND * period // 2}/{period}s",
                "quota_changed": bool(run.audit.quota_changed_at),
                "in_flight_at_change": in_flight_at(run, changed),
                **rejected,
                "429s_before_change": run.audit.quota_rejections - rejected["429s_after_change"],
                "utilization_before_change": utilization(
                    run.audit,
                    LEARN_RATE_PER_SECOND,
                    (run.audit.arrivals or (run.started,))[0] + FROM_SECOND - 1,
                    changed,
                ),
                f"utilization_of_new_limit_from_{SETTLE_WINDOWS}_windows_after": utilization(
                    run.audit, new_per_second, settled_from, run.ended
                ),
                **_quota_figures(run, scenario),
            }
        )
    return {
        "scenario": "f",
        "what": VENDOR_SCENARIOS["f"].what,
        "429s_vs_in_flight_at_change": [
            [r["429s_after_change"], r["in_flight_at_change"]] for r in runs
        ],
        # of those 429s, the calls that arrived before any answer could state the change
        "429s_before_first_answer_of_change": [r["429s_before_its_first_answer"] for r in runs],
        "utilization_of_new_limit": [
            r[f"utilization_of_new_limit_from_{SETTLE_WINDOWS}_windows_after"] for r in runs
        ],
        "targets": {
            "429s_max": "the calls in flight at the change",
            f"utilization_of_new_limit_from_{SETTLE_WINDOWS}_windows_after_min": 0.90,
        },
        "runs": runs,
    }


def _graphql_action(url: str) -> HttpActionConfig:
    """A `productDelete` mutation per job: the query a constant, its variables filled."""
    return HttpActionConfig.model_validate(
        {
            "api_url": url,
            "allow_plain_http": True,
            "read_timeout_seconds": 5,
            "method": "POST",
            "url_template": f"{{api_url}}{GRAPHQL_PATH}",
            "body": {"query": PRODUCT_DELETE, "variables": {"id": "{object_id}"}},
            "outcome_rules": [GRAPHQL_THROTTLED],
        }
    )


def _points_setup(seconds: float) -> VendorSetup:
    """The vendor's bucket; sweeper told its restore rate in points (a 1 s window), each call
    reserving its requested cost and corrected by the actual one its answer states, the
    bucket's level read from `throttleStatus`; the policy's default wait in place."""
    scenario = _scenario("h", 1)
    restore = int(DEFAULT_RESTORE_RATE)
    low, high = COST_RANGE
    rate = Quota(limit=restore, period_seconds=1)
    mean_cost = (low + high) / 2
    learn = {
        "cost": {
            "reserve": REQUESTED_POINTS,
            "actual": {"json_path": "extensions.cost.actualQueryCost"},
            "bucket": "shopify",
        }
    }
    return VendorSetup(
        scenario=scenario,
        vendor_args=(
            *("--graphql-bucket", f"{DEFAULT_MAXIMUM:g}:{restore}"),
            *("--graphql-costs", f"{low}-{high}"),
            *vendor_base_args(scenario),
        ),
        limit=LimitConfig.model_validate(
            {
                "name": "points",
                "key": ScopeConfig(kind="global").key_template,
                "rate": rate,
                "learn": learn,
            }
        ),
        action=_graphql_action,
        # the calls the bucket pays for in the run (what it holds, and restores), a quarter
        # more (rate.py's factor)
        backlog=int((DEFAULT_MAXIMUM + restore * seconds) / mean_cost * BACKLOG_FACTOR),
    )


def _points_figures(run: VendorRun) -> dict[str, Any]:
    """The restore rate's use: what the run spent less what it took from the bucket's level
    (full at the start), per second of the span, over the restore rate; 1.0 when every point
    restored was spent, whatever the bucket held."""
    points = run.graphql_at_end
    first = points.first_call_at if points.first_call_at is not None else run.started
    span = max(1e-9, run.ended - first)
    # what the run took from the buckets' start (each store's: the scenario calls one)
    drawn = sum(DEFAULT_MAXIMUM - level for level in points.levels.values())
    spent = points.points_charged - drawn
    return {
        "points_utilization_of_restore_rate": round(spent / (DEFAULT_RESTORE_RATE * span), 3),
        "throttled_answers": points.throttled_total,
        "points_charged": run.graphql.points_charged,  # the run's, its end included
        "points_per_second": round(points.points_charged / span, 2),
        "bucket_levels_at_end": {k: round(v, 1) for k, v in points.levels.items()},
        "graphql_calls": run.graphql.calls_total,
        "reserve_points": REQUESTED_POINTS,
        **common_figures(run),
    }


def run_points(stack: LocalStack, options: VendorRunOptions) -> dict[str, Any]:
    """(h): see the module docstring."""
    figures = _points_figures(
        run_vendor(stack, _points_setup(options.seconds), seconds=options.seconds)
    )
    return {
        "scenario": "h",
        "what": VENDOR_SCENARIOS["h"].what,
        "points_utilization_of_restore_rate": figures["points_utilization_of_restore_rate"],
        "throttled_answers": figures["throttled_answers"],
        "targets": {"points_utilization_of_restore_rate_min": 0.90, "throttled_answers": 0},
        "runs": [figures],
    }


def _shared(stack: LocalStack, options: VendorRunOptions) -> dict[str, Any]:
    """(g), sweeper_bench.vendor_shared's, on the part's stack."""
    return {
        "scenario": "g",
        "what": VENDOR_SCENARIOS["g"].what,
        **run_shared(options.seconds, stack=stack),
    }


def _budget(stack: LocalStack, options: VendorRunOptions) -> dict[str, Any]:
    """(i), sweeper_bench.vendor_budget's: one budget day of 60 s and the next day's start, on
    a stack of its own (its length is the day's, not the part's)."""
    with contextlib.redirect_stdout(sys.stderr):  # its own lines: stdout is --json's
        figures = run_budget(options.database_url)
    return {
        **figures,
        "scenario": "i",
        "what": VENDOR_SCENARIOS["i"].what,
        "targets": {"max_fraction_max": 0.80, "max_deviation_from_even_max": 0.05},
    }


#: The vendor part's scenarios, by letter: one line each. A runner takes the local stack and
#: the VendorRunOptions and returns its figures with `targets` beside them. To add one, import
#: its runner (or a wrapper of it, as (g) and (i) are) and add its line here, in letter order;
#: a scenario's module builds on sweeper_bench.vendor_harness, never on this module.
VENDOR_SCENARIOS: dict[str, VendorScenario] = {
    "e": VendorScenario(
        f"the quota not told ({LEARN_RATE_PER_SECOND}/s; told a ceiling of twice it), stated "
        "in the IETF RateLimit fields",
        run_quota_not_told,
    ),
    "f": VendorScenario(
        f"the vendor halves its limit ({LEARN_RATE_PER_SECOND}/s) mid-run and states the new "
        "one from its next answer",
        run_halved,
    ),
    "g": VendorScenario("another client spends 30 % of the same quota (the IETF fields)", _shared),
    "h": VendorScenario(
        "a points bucket of 1,000 restoring 50/s, calls costing 1-20, the cost known from the "
        "answer",
        run_points,
    ),
    "i": VendorScenario("a budget of 6,000 calls per 60 s day, 0.2 reserved", _budget),
    "j": VendorScenario(REOPENING, run_reopening),
}


def run_vendor_part(
    names: tuple[str, ...], options: VendorRunOptions, database_url: str | None
) -> list[dict[str, Any]]:
    """The chosen scenarios, in letter order, on one local stack (SQS and DynamoDB on the
    stand-in, as the real rates and several limits run)."""
    options = dataclasses.replace(options, database_url=database_url)
    with _stack(database_url, lite=True) as stack:
        return [VENDOR_SCENARIOS[name].run(stack, options) for name in sorted(names)]
