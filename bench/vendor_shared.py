"""Target (g) of issue 43: a quota another client spends 30 % of; sweeper learns it and keeps
its reserve.

One run of the real pipeline on the local stack (producer and consumer handlers in worker
processes, PostgreSQL, the AWS stand-in), as bench/rate.py runs its scenarios, against the
vendor simulator in its own process: a sliding window of `quota` calls per `window` seconds,
stated in the IETF RateLimit fields, of which another client spends `others_share` evenly
(`--other-client-share`: its calls are in the Remaining sweeper reads). The policy's one limit
is told the quota (a ceiling) and learns from the answers, keeping `reserve_fraction` of the
quota for the other client (sweeper.admission.shared).

Figures: what the other client leaves less the reserve, per second
(`(quota x (1 - others_share) - reserve) / window`, the target's "what is left, less its
reserve"); sweeper's utilization of it (calls the vendor accepted per second, from sweeper's
first call one window on, so the first answers have been read, to the end); the 429s sweeper
drew and those the other client drew; and the least any of sweeper's calls left remaining of
the window, against the reserve (`reserve_touched`: it left less). The target: 0 429s and a
utilization of at least 0.90. Beside them, where a run loses its pace (the other vendor
scenarios' figures of the same names): slots given up at a call's last look, late slots and
sends, deferrals (for the rate, for a closed gate), sweeper's calls per second, and DynamoDB
requests per call accepted in the span.

A variant (`lower_at_share`, `--lower-at` when run as a module): (f) on a shared quota, the
vendor halving its limit at that share of the run; beside the figures, sweeper's 429s from the
change on against the calls the vendor held at it, (f)'s target (the utilization stays of
what was left before the change).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator
from typing import Any

from sweeper.config import ConsumerConfig, HttpActionConfig, LimitConfig, Policy, ThrottleConfig
from sweeper.observability import Metric
from sweeper_bench.rate import DYNAMODB_READS, DYNAMODB_WRITES, _aws_requests, _diff, _per_second
from sweeper_bench.vendor_harness import accepted_between, held_at
from sweeper_local.aws import LocalAws
from sweeper_local.pipeline import LocalPipeline
from sweeper_local.stack import LocalStack
from sweeper_local.vendor import VendorAudit, VendorProcess

#: 300 calls per 10 s: 30 a second, what the stand-in carries with the spend counter's writes.
DEFAULT_QUOTA = (300, 10.0)
OTHERS_SHARE = 0.3
RESERVE_FRACTION = 0.1
#: The vendor's latency: lognormal around this median (as bench/rate.py's scenarios).
VENDOR_MEDIAN_LATENCY_SECONDS = 0.02
VENDOR_LATENCY_SIGMA = 0.4
#: The backlog, in multiples of what the told quota lets through in the run: never runs dry.
BACKLOG_FACTOR = 1.25
UTILIZATION_MIN = 0.90


def left_per_second(quota: tuple[int, float], others_share: float, reserve: float) -> float:
    """What the other client leaves of the quota, less the reserve, per second."""
    limit, window = quota
    return (limit * (1 - others_share) - reserve) / window


def utilization(audit: VendorAudit, ended: float, window: float, target: float) -> float:
    """Sweeper's accepted calls per second from one window after its first call to `ended`
    (the vendor's monotonic clock), over `target` per second."""
    if not audit.arrivals:
        return 0.0
    start = audit.arrivals[0] + window
    counted = sum(1 for at in audit.arrivals if at >= start)
    accepted = counted - audit.quota_rejections  # a 429 is counted by arrival too
    return accepted / max(1e-9, (ended - start) * target)


def _policy(url: str, quota: tuple[int, float], reserve_fraction: float, consumers: int) -> Policy:
    limit, window = quota
    learned = LimitConfig.model_validate(
        {
            "name": "quota",
            "key": "{policy}",
            "rate": {"limit": limit, "period_seconds": window},
            "learn": {"source": "ratelimit", "reserve_fraction": reserve_fraction},
        }
    )
    return Policy(
        name=f"bench-{secrets.token_hex(3)}",
        limits=[learned],
        action=HttpActionConfig(api_url=url, allow_plain_http=True, read_timeout_seconds=5),
        consumer=ConsumerConfig(
            reserved_concurrency=consumers,
            max_concurrency=consumers,
            batch_size=10,
            batch_window_seconds=0,
            timeout_seconds=60,
            parallel_calls=2,
        ),
        throttle=ThrottleConfig(reopen_jitter_seconds=0.05),
        lease_seconds=600,
    )


@contextlib.contextmanager
def _local_stack(stack: LocalStack | None, database_url: str | None) -> Iterator[LocalStack]:
    if stack is not None:
        yield stack
        return
    # api_url is set so the stack starts no simulator of its own: the run starts one.
    with LocalStack(
        database_url=database_url, api_url="http://127.0.0.1:9", aws=LocalAws(lite=True)
    ) as started:
        yield started


def run_shared(
    seconds: float,
    *,
    stack: LocalStack | None = None,
    database_url: str | None = None,
    quota: tuple[int, float] = DEFAULT_QUOTA,
    others_share: float = OTHERS_SHARE,
    reserve_fraction: float = RESERVE_FRACTION,
    consumers: int = 2,
    lower_at_share: float | None = None,
) -> dict[str, Any]:
    """One run of target (g) for `seconds` (see the module docstring); prints nothing, returns
    its figures. `stack`: a local stack already running (else one on lite_aws is started);
    `lower_at_share`: the vendor halves its limit at that share of the run (the variant)."""
    limit, window = quota
    reserve = limit * reserve_fraction
    target = left_per_second(quota, others_share, reserve)
    vendor = VendorProcess(
        *("--rate", f"{limit}/{window:g}s", "--scope", "global", "--limit-dialect", "ratelimit"),
        *("--other-client-share", str(others_share)),
        *("--latency", str(VENDOR_MEDIAN_LATENCY_SECONDS)),
        *("--latency-distribution", "lognormal", "--latency-sigma", str(VENDOR_LATENCY_SIGMA)),
        *("--seed", "7"),
    )
    try:  # the vendor is stopped whatever fails after it started
        policy = _policy(vendor.url, quota, reserve_fraction, consumers)
        with (
            _local_stack(stack, database_url) as local,
            LocalPipeline(
                local,
                policy,
                extra_env={"POWERTOOLS_LOG_LEVEL": "WARNING"},
                prefix=f"bench-{policy.name}",
                log_prefix="sweeper-bench-",
                rehearsal_url=vendor.url,
            ) as run,
        ):
            run.seed(int(limit / window * seconds * BACKLOG_FACTOR), tenants=10, spread_seconds=1)
            requests_before = _aws_requests(local)
            started = time.monotonic()
            changed = (
                None
                if lower_at_share is None
                else vendor.schedule_quota(limit // 2, window, seconds * lower_at_share)
            )
            run.run(lambda: time.monotonic() - started >= seconds, timeout_seconds=seconds + 5)
            ended = time.monotonic()
            requests = _diff(_aws_requests(local), requests_before)
            audit = vendor.audit()
            settled = run.final()
            metrics = run.metrics()
    finally:
        vendor.stop()
    return {
        "target": "g",
        "seconds": seconds,
        "quota": f"{limit}/{window:g}s",
        "others_share": others_share,
        "reserve": reserve,
        "left_less_reserve_per_second": round(target, 3),
        "utilization_of_left_less_reserve": round(utilization(audit, ended, window, target), 3),
        "self_caused_429s": audit.quota_rejections,
        "other_client_429s": audit.other_rejections,
        "other_client_calls": audit.other_calls,
        "least_remaining": audit.least_remaining,
        "reserve_touched": audit.least_remaining is not None and audit.least_remaining < reserve,
        "accepted": audit.accepted_total,
        "settled": settled,
        "learned_closures": int(metrics.get(Metric.LEARNED_CLOSURES, 0)),
        **({} if changed is None else _after_lowering(audit, changed, limit // 2, window)),
        **_pace_figures(metrics, audit, requests, started, ended),
        "targets": {"self_caused_429s": 0, "utilization_min": UTILIZATION_MIN},
    }


def _after_lowering(
    audit: VendorAudit, changed: float, limit: int, window: float
) -> dict[str, Any]:
    """The variant's: sweeper's 429s from the vendor's halving on, against the calls it held
    at the change ((f)'s target: at most those)."""
    return {
        "lowered_to": f"{limit}/{window:g}s",
        "in_flight_at_change": held_at(audit, changed),
        "429s_after_change": sum(1 for at in audit.quota_rejected_at if at >= changed),
    }


def _pace_figures(
    metrics: dict[str, float],
    audit: VendorAudit,
    requests: dict[str, int] | None,
    started: float,
    ended: float,
) -> dict[str, Any]:
    """Where a run loses its pace: the last looks' slots given up, late slots and sends,
    deferrals for the rate and for a closed gate, sweeper's calls per second and DynamoDB
    requests per call accepted in the span."""
    figures: dict[str, Any] = {
        name: int(metrics.get(metric, 0))
        for name, metric in (
            ("stale_slots", Metric.STALE_SLOTS),
            ("late_slots", Metric.LATE_SLOTS),
            ("late_sends", Metric.LATE_SENDS),
            ("limiter_deferrals", Metric.LIMITER_DEFERRALS),
            ("gate_deferrals", Metric.GATE_DEFERRALS),
        )
    }
    figures["calls_per_second"] = _per_second(audit.arrivals)
    if requests is not None:
        jobs = max(1, accepted_between(audit, started, ended))
        for name, operations in (("writes", DYNAMODB_WRITES), ("reads", DYNAMODB_READS)):
            total = sum(requests.get(f"dynamodb:{op}", 0) for op in operations)
            figures[f"dynamodb_{name}_per_job"] = round(total / jobs, 3)
    return figures


__all__ = ["run_shared"]

if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Target (g) of issue 43, one run.")
    parser.add_argument("seconds", type=float, nargs="?", default=60.0)
    parser.add_argument("--lower-at", type=float, help="halve the limit at this share of the run")
    args = parser.parse_args()
    print(json.dumps(run_shared(args.seconds, lower_at_share=args.lower_at), indent=2))
