"""`sweeper bench nginx`: the demo against nginx's `limit_req`, a rule sweeper did not write.

nginx counts calls in a leaky bucket (`limit_req` at 15 r/s, no burst: each call at least 1/15 s
after the one before, else 429), with or without `Retry-After` on its 429s
(sweeper_local.nginx). The demo (`sweeper demo --jobs 300 --tenants 1 --consumers 4 --rate
"15/1s bucket" --api-url URL`) deletes its jobs through it, told the bucket. From nginx's own
access log, the demo's calls only (under `/v1/`, its latency probes left out): how many nginx
refused, and the share of the bucket's rate the accepted calls used between the first and the last.

`python -m sweeper_bench.nginx [--retry-after] [--jobs 300]`, or `sweeper bench nginx`.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from sweeper.config import Quota
from sweeper_local.demo import PROBE_TENANT, run_demo
from sweeper_local.demo_report import DemoOptions
from sweeper_local.nginx import NginxVendor, nginx_binary

RATE_PER_SECOND = 15
JOBS = 300
CONSUMERS = 4


def bucket_use(accepted: list[float], rate: float) -> float | None:
    """The share of `rate` the accepted arrivals used from the first to the last (None with
    fewer than two): n - 1 intervals over the span, as a bucket spaces them."""
    if len(accepted) < 2:
        return None
    span = max(accepted) - min(accepted)
    return None if span <= 0 else round((len(accepted) - 1) / span / rate, 3)


def run_nginx_bench(
    *, retry_after: bool, jobs: int = JOBS, database_url: str | None = None
) -> dict[str, Any]:
    """One demo against nginx (see the module docstring), and its figures."""
    before = os.getloadavg()
    with (
        tempfile.TemporaryDirectory(prefix="sweeper-nginx-") as folder,
        NginxVendor(
            nginx_binary(), Path(folder), rate=RATE_PER_SECOND, retry_after=retry_after
        ) as nginx,
    ):
        report = run_demo(
            DemoOptions(
                jobs=jobs,
                tenants=1,
                consumers=CONSUMERS,
                rate=Quota.parse(f"{RATE_PER_SECOND}/1s bucket"),
                api_url=nginx.url,
                database_url=database_url,
                timeout_seconds=max(120.0, 4 * jobs / RATE_PER_SECOND),
            )
        )
        # the calls limit_req counts (`/v1/`), the latency probes left out: the demo's own reads
        # of a vendor's audit (`/_audit`, answered 404 by nginx) are not calls
        calls = [
            c for c in nginx.requests() if c[2].startswith("/v1/") and PROBE_TENANT not in c[2]
        ]
    accepted = [at for at, status, _ in calls if status != "429"]
    per_path = Counter(uri for _, _, uri in calls)
    return {
        "nginx": f"limit_req {RATE_PER_SECOND} r/s, no burst",
        "retry_after": retry_after,
        "jobs": jobs,
        "all_final": report.all_final,
        "succeeded": report.succeeded,
        "calls": len(calls),
        "refused_429": len(calls) - len(accepted),
        # each job's object is one path: more calls than paths are calls sent again
        "paths": len(per_path),
        "paths_called_more_than_once": {path: n for path, n in per_path.most_common() if n > 1},
        "bucket_use": bucket_use(accepted, RATE_PER_SECOND),
        "consumers": CONSUMERS,
        "load_before": [round(x, 2) for x in before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--retry-after", action="store_true")
    parser.add_argument("--jobs", type=int, default=JOBS)
    args = parser.parse_args()
    print(json.dumps(run_nginx_bench(retry_after=args.retry_after, jobs=args.jobs), indent=2))


if __name__ == "__main__":
    main()
