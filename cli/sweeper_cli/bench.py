"""`sweeper bench`: benchmarks that print their figures."""

from __future__ import annotations

import click

from sweeper_cli.base import (
    database_option,
    emit,
    friendly_errors,
    json_option,
    local_stack_required,
    main,
)


@main.group()
def bench() -> None:
    """Benchmarks (figures printed, never asserted by timing)."""


@bench.command("ledger")
@click.option(
    "--sizes",
    default="10000,1000000",
    show_default=True,
    help="Ledger sizes (rows) to measure, comma-separated.",
)
@click.option("--claimers", default=8, type=click.IntRange(1, 64), help="Concurrent claimers.")
@click.option("--page", default=100, type=click.IntRange(1, 10_000), help="Rows per claim.")
@click.option(
    "--rows-per-round",
    default=4000,
    type=click.IntRange(1, 1_000_000),
    help="Rows claimed and settled per timed round.",
)
@click.option("--rounds", default=5, type=click.IntRange(1, 100), help="Timed rounds per size.")
@database_option
@json_option
@friendly_errors
def bench_ledger(
    sizes: str,
    claimers: int,
    page: int,
    rows_per_round: int,
    rounds: int,
    database_url: str | None,
    as_json: bool,
) -> None:
    """The claim -> settle cycle with concurrent claimers on a small and a large ledger, without
    a VACUUM between rounds: its cost is the work, not the table."""
    with local_stack_required():
        from sweeper_bench.ledger import run_ledger_bench

    try:
        parsed = [int(s) for s in sizes.split(",")]
    except ValueError:
        raise click.BadParameter(
            "give row counts like 10000,1000000", param_hint="--sizes"
        ) from None
    if any(n < 1 for n in parsed):
        raise click.BadParameter("every size must be at least 1", param_hint="--sizes")
    result = run_ledger_bench(
        parsed,
        claimers=claimers,
        page=page,
        rows_per_round=rows_per_round,
        rounds=rounds,
        database_url=database_url,
    )
    emit(result, as_json)


@bench.command("rate")
@click.option("--consumers", default=8, type=click.IntRange(2, 64), help="Concurrent consumers.")
@click.option(
    "--seconds", default=20.0, type=click.FloatRange(5), help="Each baseline scenario's length."
)
@click.option(
    "--real-seconds",
    default=60.0,
    type=click.FloatRange(5),
    help="Each real-rate scenario's length (its first second is the ramp).",
)
@click.option(
    "--quota",
    default="15/1s",
    metavar="N/PERIOD",
    help="The vendor's quota on the short window for the baselines part (the long window is "
    "5 s at the same rate). 15/s is what moto carries on 2 cores with room to spare.",
)
@click.option(
    "--only",
    "parts",
    type=click.Choice(["baselines", "adaptive", "real", "limits", "vendor"]),
    multiple=True,
    help="Run only these parts (repeat for several): the comparison with the baselines at "
    "--quota on moto; the adaptive rate, not told that quota; the real rates (100/s on one "
    "scope, 10 scopes at 50/s, vendor p50 150 ms); the several limits' scenarios, or the "
    "limits the vendor states (see --scenario). The last four run SQS and DynamoDB on the "
    "lite stand-in.",
)
@click.option(
    "--scenario",
    "limit_names",
    type=click.Choice(list("abcdefghij")),
    multiple=True,
    help="The scenarios to run (repeat for several; all of a part by default; alone, only "
    "these run). Several limits, each on a 1 s and a 5 s window: a, 20 stores at 2/s under an "
    "app limit of 30/s; b, 10 stores at 5/s under 100/s; c, one scope at 100/s with at most 10 "
    "calls in flight, vendor p50 300 ms; d, ten scopes at 10/s. Limits the vendor states: e, "
    "the quota not told, stated in the IETF fields; f, the vendor halves its limit mid-run; "
    "g, another client spends 30 % of the quota; h, a points bucket; i, a budget per day; j, "
    "a 60 s throttle that fills the DLQ, redriven at the reopening (sweeper_bench.vendor's "
    "VENDOR_SCENARIOS).",
)
@click.option(
    "--vendor-seconds",
    default=60.0,
    type=click.FloatRange(5),
    show_default=True,
    help="Each run of a vendor-stated limits scenario.",
)
@click.option(
    "--limits-seconds",
    default=60.0,  # as long as a real-rate run: a shorter one understates by its ramp
    type=click.FloatRange(5),
    show_default=True,
    help="Each run of a several-limits scenario (two per scenario).",
)
@database_option
@json_option
@friendly_errors
def bench_rate(
    consumers: int,
    seconds: float,
    real_seconds: float,
    quota: str,
    parts: tuple[str, ...],
    limit_names: tuple[str, ...],
    limits_seconds: float,
    vendor_seconds: float,
    database_url: str | None,
    as_json: bool,
) -> None:
    """Close to the quota, never over it: sweeper's shared limiter against two baselines,
    a vendor incident, the adaptive rate, real rates, then several limits per call.
    Utilization, self-caused 429s (per limit), the most calls in any window, AWS requests and
    cost per job."""
    with local_stack_required():
        from sweeper_bench.rate import LIMIT_SCENARIOS, PARTS, run_rate_bench

    chosen = tuple(dict.fromkeys(limit_names))
    vendor_names = tuple(n for n in chosen if n not in LIMIT_SCENARIOS)
    limit_names = tuple(n for n in chosen if n in LIMIT_SCENARIOS)
    named = {"limits": limit_names, "vendor": vendor_names}
    for part, names in named.items():
        if names and parts and part not in parts:
            raise click.BadParameter(
                f"--scenario {', '.join(names)} needs the {part} part", param_hint="--only"
            )
    if not parts and chosen:
        parts = tuple(part for part, names in named.items() if names)
    result = run_rate_bench(
        consumers=consumers,
        seconds=seconds,
        real_seconds=real_seconds,
        quota=quota,
        database_url=database_url,
        parts=parts or PARTS,
        limit_names=limit_names or tuple(LIMIT_SCENARIOS),
        limits_seconds=limits_seconds,
        vendor_names=vendor_names or None,
        vendor_seconds=vendor_seconds,
    )
    emit(result, as_json)


@bench.command("discovery")
@click.option(
    "--rows", default=200_000, type=click.IntRange(1, 10_000_000), help="Rows in the sql source."
)
@click.option(
    "--objects", default=5_000, type=click.IntRange(1, 1_000_000), help="Objects in the bucket."
)
@click.option("--page", default=5_000, type=click.IntRange(1, 10_000), help="Rows per page.")
@click.option(
    "--budget",
    default=5.0,
    type=click.FloatRange(2.0),
    help="Seconds per run for the pass spread over several runs (a run keeps at least a "
    "second in hand, so shorter budgets would read nothing).",
)
@click.option(
    "--only",
    "parts",
    type=click.Choice(["passes", "budgeted", "s3"]),
    multiple=True,
    help="Run only these parts (repeat for several): the sql source's first and second pass, "
    "its pass spread over budgeted runs (with the every-row-once count), the s3 source.",
)
@database_option
@json_option
@friendly_errors
def bench_discovery(
    rows: int,
    objects: int,
    page: int,
    budget: float,
    parts: tuple[str, ...],
    database_url: str | None,
    as_json: bool,
) -> None:
    """Rows discovered and upserted per second from an sql source (first and second pass, and a
    pass spread over budgeted runs) and from an s3 source."""
    with local_stack_required():
        from sweeper_bench.discovery import PARTS, run_discovery_bench

    result = run_discovery_bench(
        rows=rows,
        objects=objects,
        page_size=page,
        budget_run_seconds=budget,
        database_url=database_url,
        parts=parts or PARTS,
    )
    emit(result, as_json)


@bench.command("examples")
@click.option(
    "--example",
    "names",
    multiple=True,
    help="Run only this example (repeatable): a file's stem (listings) or stem:policy "
    "(plan-real-rates:one-scope). Default: every one.",
)
@click.option(
    "--memory-mb",
    type=click.IntRange(128, 10240),
    default=None,
    help="Run each consumer at this memory instead of the policy's (with --cap-cpu, at its "
    "CPU share).",
)
@click.option(
    "--cap-cpu",
    is_flag=True,
    help="Hold each consumer environment to the CPU share Lambda gives its memory.",
)
@database_option
@json_option
@friendly_errors
def bench_examples(
    names: tuple[str, ...],
    memory_mb: int | None,
    cap_cpu: bool,
    database_url: str | None,
    as_json: bool,
) -> None:
    """Each docs/examples file as shipped, through the demo against the vendor simulator
    enforcing its limits: utilization of its binding limit, 429s, and `sweeper plan`'s
    throughput for the same scopes and latency, with the ratio measured/plan."""
    with local_stack_required():
        from sweeper_bench.examples import example_names, run_examples_bench

    unknown = sorted(set(names) - set(example_names()))
    if unknown:
        raise click.BadParameter(
            f"no example {', '.join(unknown)}; one of {', '.join(example_names())}",
            param_hint="--example",
        )
    emit(run_examples_bench(names, database_url, memory_mb=memory_mb, cap_cpu=cap_cpu), as_json)


@bench.command("nginx")
@click.option(
    "--retry-after", is_flag=True, help="nginx sends Retry-After: 1 with each 429 it answers."
)
@click.option("--jobs", type=click.IntRange(2, 100_000), default=300, show_default=True)
@database_option
@json_option
@friendly_errors
def bench_nginx(retry_after: bool, jobs: int, database_url: str | None, as_json: bool) -> None:
    """The demo against nginx's limit_req at 15 r/s without burst (a leaky bucket sweeper did not
    write), told the bucket: the calls nginx refused, and the share of its rate used."""
    with local_stack_required():
        from sweeper_bench.nginx import run_nginx_bench

    emit(run_nginx_bench(retry_after=retry_after, jobs=jobs, database_url=database_url), as_json)
