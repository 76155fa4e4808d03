"""Hints and intake: `sweeper bench webhook` (`schedule --stack` lives with `schedule`)."""

from __future__ import annotations

import click

from sweeper_cli.base import emit, friendly_errors, json_option, local_stack_required
from sweeper_cli.bench import bench


@bench.command("webhook")
@click.option("--requests", default=400, type=click.IntRange(1, 100_000), help="Requests sent.")
@click.option(
    "--hints-per-request", default=10, type=click.IntRange(1, 1000), help="Hints per request."
)
@click.option("--workers", default=8, type=click.IntRange(1, 64), help="Concurrent senders.")
@json_option
@friendly_errors
def bench_webhook(requests: int, hints_per_request: int, workers: int, as_json: bool) -> None:
    """Webhook hints accepted per second: signed requests over loopback HTTP, each verified,
    replay-checked and on the intake queue before its 202."""
    with local_stack_required():
        from sweeper_bench.webhook import run_webhook_bench

    emit(run_webhook_bench(requests, hints_per_request, workers), as_json)
