"""Webhook hints accepted per second, locally: signed requests over HTTP on loopback, each
verified, replay-checked (DynamoDB) and put on the intake queue (SQS) before its 202.

The AWS emulator is moto in a process of its own, as in the local stack, so every request pays
two DynamoDB writes and one SQS send over HTTP, as on AWS (where each is a network round trip
too, but served by a faster backend). `workers` senders post at once; the server admits
`concurrency` requests at a time, as the function's reserved concurrency would.

`python -m sweeper_bench.webhook [--json]` prints the figures.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sweeper.config import Policy
from sweeper_local.aws import LocalAws, provision_intake
from sweeper_local.metric_totals import CountingSink
from sweeper_local.webhook import LocalWebhook, local_webhook_deps, post_signed

POLICY = Policy(name="bench")


def run_webhook_bench(
    requests: int = 400, hints_per_request: int = 10, workers: int = 8, concurrency: int = 8
) -> dict[str, Any]:
    """Send `requests` signed requests of `hints_per_request` hints; report what was accepted."""
    secret = secrets.token_hex(32)
    with LocalAws() as aws:
        resources = provision_intake(
            aws.sqs(), aws.dynamodb(), aws.secretsmanager(), POLICY, secret_value=secret
        )
        metrics = CountingSink()
        deps = {POLICY.name: local_webhook_deps(aws, resources, POLICY, metrics)}
        with LocalWebhook(deps, concurrency=concurrency) as webhook:

            def send(index: int) -> tuple[int, float]:
                hints = [
                    {"tenant_id": f"t{index % 50}", "object_id": f"o{index}-{i}"}
                    for i in range(hints_per_request)
                ]
                started = time.perf_counter()
                while True:
                    status, _ = post_signed(webhook.url, POLICY.name, secret, hints)
                    if status != 429:  # shed: try again, as a sender would
                        return status, time.perf_counter() - started
                    time.sleep(0.01)

            send(-1)  # warm up: the secret, the clients, moto's first calls
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=workers) as pool:
                results = list(pool.map(send, range(requests)))
            elapsed = time.perf_counter() - started
        queued = int(
            aws.sqs().get_queue_attributes(
                QueueUrl=resources.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]["ApproximateNumberOfMessages"]
        )
    accepted = sum(1 for status, _ in results if status == 202)
    latencies = sorted(seconds for _, seconds in results)
    return {
        "requests": requests,
        "hints_per_request": hints_per_request,
        "workers": workers,
        "concurrency": concurrency,
        "accepted_requests": accepted,
        "messages_on_intake_queue": queued,
        "elapsed_seconds": round(elapsed, 3),
        "requests_per_second": round(accepted / elapsed, 1),
        "hints_per_second": round(accepted * hints_per_request / elapsed, 1),
        "latency_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "latency_p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--hints-per-request", type=int, default=10)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run_webhook_bench(args.requests, args.hints_per_request, args.workers)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"webhook: {result['hints_per_second']} hints/s accepted "
            f"({result['requests_per_second']} requests/s of {result['hints_per_request']} hints, "
            f"p50 {result['latency_p50_ms']} ms, p99 {result['latency_p99_ms']} ms)"
        )


if __name__ == "__main__":
    main()
