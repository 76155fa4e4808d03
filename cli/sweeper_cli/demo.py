"""`sweeper demo`: the whole pipeline, locally, in one command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from sweeper.config import Policy, Quota
from sweeper.limits import MAX_BATCH_SIZE
from sweeper_cli.base import (
    database_option,
    emit,
    friendly_errors,
    json_option,
    local_file_option,
    local_stack_required,
    main,
)
from sweeper_tools.policy_file import load_config

#: The doors of sweeper_local.doors.DOORS, named here so that `--help` works without the harness
#: (a test checks the two agree).
DOOR_NAMES = ("sql", "s3", "webhook", "file")


@main.command()
@click.option("--jobs", default=500, type=click.IntRange(1, 1_000_000), help="Obligations to seed.")
@click.option(
    "--tenants", default=5, type=click.IntRange(1, 100_000), help="Tenants to spread them over."
)
@click.option(
    "--consumers",
    default=4,
    type=click.IntRange(2, 64),
    help="Consumer concurrency (the event source's maximum concurrency).",
)
@click.option(
    "--batch-size",
    default=None,
    type=click.IntRange(1, MAX_BATCH_SIZE),
    help="Records per consumer batch (default: planned from the rate and measured latency; "
    "above 10 with a 1 s batching window, as Lambda requires).",
)
@click.option(
    "--parallel-calls",
    default=None,
    type=click.IntRange(1, 10),
    help="Calls one consumer makes at once (default: planned, as `sweeper plan` would).",
)
@click.option(
    "--config",
    "config_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="A policy file (TOML): run its policy as it is, against the simulator or --api-url.",
)
@click.option(
    "--policy",
    "policy_name",
    default=None,
    help="The policy of --config (optional when the file has only one).",
)
@click.option(
    "--rate",
    default=None,
    metavar="N/PERIOD",
    help="The vendor's quota for the default scope, e.g. 40/1s (simulator and limiter).",
)
@database_option
@click.option(
    "--api-url",
    envvar="SWEEPER_API_URL",
    show_envvar=True,
    help="Send every vendor call here (http(s)://host[:port]), whatever host the policy "
    "names, instead of to the simulator.",
)
@click.option(
    "--timeout",
    "timeout_seconds",
    default=300.0,
    type=click.FloatRange(1),
    help="Give up after this many seconds.",
)
@click.option(
    "--source",
    "sources",
    type=click.Choice([*DOOR_NAMES, "all"]),
    multiple=True,
    default=("all",),
    show_default=True,
    help="The door(s) obligations come in by, sharing --jobs (repeat for several).",
)
@local_file_option
@json_option
@friendly_errors
def demo(
    jobs: int,
    tenants: int,
    consumers: int,
    batch_size: int | None,
    parallel_calls: int | None,
    config_path: str | None,
    policy_name: str | None,
    rate: str | None,
    database_url: str | None,
    api_url: str | None,
    timeout_seconds: float,
    sources: tuple[str, ...],
    local_file: str,
    as_json: bool,
) -> None:
    """Run the whole pipeline locally (PostgreSQL, AWS emulators, vendor simulator) and report.

    Obligations come in by each --source door: discovery of a system-of-record database and
    of a bucket, signed hints to the webhook on loopback, a file through the intake queue.
    While it runs, --local-file names its endpoints (webhook_url, webhook_secret, queues), as
    `local up` writes them, unless another local stack owns that file. Exits 0 only when every
    obligation is final.

    Unless given, parallel calls and batch size come from the rate and the vendor latency the
    demo measures first (a few calls on probe objects of their own), as `sweeper plan` computes
    them. With --config (and --policy) a team's own policy runs as it is: its quota, consumers
    and action, the action aimed at the simulator or --api-url.
    """
    policy = _team_policy(config_path, policy_name, consumers, batch_size, parallel_calls, rate)
    with local_stack_required():
        from sweeper_local.demo import run_demo
        from sweeper_local.demo_report import DemoOptions
        from sweeper_local.doors import DOORS

    options = DemoOptions(
        jobs=jobs,
        tenants=tenants,
        consumers=policy.consumer.environments if policy is not None else consumers,
        batch_size=batch_size,
        parallel_calls=parallel_calls,
        policy=policy,
        database_url=database_url,
        api_url=api_url.rstrip("/") if api_url else None,
        rate=Quota.parse(rate) if rate else None,
        timeout_seconds=timeout_seconds,
        sources=tuple(DOORS) if "all" in sources else tuple(dict.fromkeys(sources)),
        local_file=Path(local_file),
    )
    if as_json or not sys.stderr.isatty():
        report = run_demo(options)
    else:
        with click.progressbar(length=jobs, label="settling", file=sys.stderr) as bar:
            seen = [0]

            def progress(done: int, total: int) -> None:
                bar.update(done - seen[0])
                seen[0] = done

            report = run_demo(options, progress)
    if as_json:
        emit(report.as_dict(), as_json=True)
    else:
        click.echo("\n".join(render_report(report.as_dict())))
    if not report.all_final:
        problem = report.problem() or "not every obligation is final: see the report"
        click.echo(f"Error: demo: {problem}", err=True)
        sys.exit(1)


def _team_policy(
    config_path: str | None,
    policy_name: str | None,
    consumers: int,
    batch_size: int | None,
    parallel_calls: int | None,
    rate: str | None,
) -> Policy | None:
    """The policy of --config, or None; the demo's own sizing flags do not mix with it."""
    if config_path is None:
        if policy_name is not None:
            raise click.UsageError("--policy needs --config (the policy file)")
        return None
    context = click.get_current_context()
    given = [
        f"--{name.replace('_', '-')}"
        for name in ("consumers", "batch_size", "parallel_calls", "rate")
        if context.get_parameter_source(name) is not ParameterSource.DEFAULT
    ]
    if given:
        raise click.UsageError(
            f"{', '.join(given)} cannot be used with --config: the policy file sets them"
        )
    from sweeper_tools.planning.consumer_defaults import deployed_config

    # run as synth deploys it: the consumer's sizing the file leaves out, derived
    config = deployed_config(load_config(config_path))
    if policy_name is None:
        if len(config.policies) != 1:
            names = [p.name for p in config.policies]
            raise click.UsageError(f"--policy is required (the policy file has {names})")
        return config.policies[0]
    return config.policy(policy_name)


#: The per-door table's columns: (the report's field, its heading).
DOOR_COLUMNS = (
    ("door", "door"),
    ("seeded", "seeded"),
    ("brought_in", "brought in"),
    ("rejected", "rejected"),
    ("not_due", "not due"),
    ("runs", "runs"),
)


def summary_line(report: dict[str, Any]) -> str:
    """The demo's outcome in one line: final or not, and the counts that say it was once each."""
    verdict = "every obligation final" if report["all_final"] else "NOT every obligation final"
    calls = report.get("vendor_calls")
    vendor = (
        "" if calls is None else f", {calls} vendor calls, {report['vendor_429s']} answered 429"
    )
    return (
        f"{verdict}: {report['succeeded']} succeeded, {report['terminal']} terminal, "
        f"{report['pending']} pending of {report['jobs']}, {report['duplicates']} duplicates"
        f"{vendor}, in {report['elapsed_seconds']:.1f} s"
    )


def door_table(doors: list[dict[str, Any]]) -> list[str]:
    """The per-door counts as an aligned table (door names left, counts right)."""
    rows = [[heading for _, heading in DOOR_COLUMNS]]
    rows += [[str(door[field]) for field, _ in DOOR_COLUMNS] for door in doors]
    widths = [max(len(row[i]) for row in rows) for i in range(len(DOOR_COLUMNS))]
    return [
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def render_report(report: dict[str, Any]) -> list[str]:
    """The demo's human report: one summary line, the figures, then a table per door."""
    figures = {key: value for key, value in report.items() if key != "doors"}
    width = max(len(key) for key in figures)
    lines = [summary_line(report), ""]
    lines += [f"{key.ljust(width)}  {value}" for key, value in figures.items()]
    if report.get("doors"):
        lines += ["", "obligations by door:", *door_table(report["doors"])]
    return lines
