"""The consumer Lambda on a benchmark baseline instead of the shared limiter (local stack only).

The rate benchmark names one of these as its consumer's handler (`module:attribute`, as Lambda's
handler setting does: sweeper_local.lambda_runtime.load_handler). At an environment's first batch
the baseline takes the place of the shared limiter in `sweeper.runtime`; the consumer's own
handler then runs unchanged. The Lambda layer holds neither this module nor the baselines.
"""

from __future__ import annotations

import os
from functools import cache, lru_cache
from typing import Any

from sweeper import runtime
from sweeper.limiter import Limiter
from sweeper_bench.baselines import NoLimiter, PerWorkerLimiter
from sweeper_local.lambda_runtime import load_handler

#: The workers a per-worker baseline divides the quota among (the run's consumers).
WORKERS_VARIABLE = "SWEEPER_BENCH_LIMITER_WORKERS"
#: A scenario's mode -> the consumer handler it runs ("shared": the consumer's own).
HANDLERS = {
    "shared": "consumer",
    "per_worker": "sweeper_bench.baseline_consumer:per_worker",
    "off": "sweeper_bench.baseline_consumer:concurrency_cap_only",
}


def baseline(mode: str) -> Limiter:
    """The baseline for `mode`: "per_worker" (Celery's way) or "off" (the concurrency cap)."""
    limiter: Limiter
    if mode == "per_worker":
        limiter = PerWorkerLimiter(int(os.environ[WORKERS_VARIABLE]))
    elif mode == "off":
        limiter = NoLimiter()
    else:
        raise ValueError(f"no baseline limiter {mode!r}: per_worker or off")
    return limiter


@cache
def install(mode: str) -> None:
    """Make `mode`'s baseline what this environment's consumer asks for slots (once a process)."""
    limiter = baseline(mode)
    runtime.consumer_limiter = lru_cache(maxsize=1)(lambda: limiter)


def per_worker(event: dict[str, Any], context: Any) -> Any:
    """The consumer, each environment spacing its own calls at quota / workers."""
    install("per_worker")
    return load_handler("consumer")(event, context)


def concurrency_cap_only(event: dict[str, Any], context: Any) -> Any:
    """The consumer with reserved concurrency as its only limit."""
    install("off")
    return load_handler("consumer")(event, context)
