"""The local stack in the background (`local up|down|scenario`) and the failure drills."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from sweeper.redaction import redact
from sweeper_cli.base import (
    config_option,
    database_option,
    friendly_errors,
    interactive,
    json_option,
    local_file_option,
    local_stack_required,
    main,
)
from sweeper_tools.event_source import check_policy_event_source
from sweeper_tools.policy_file import load_config


@main.group()
def local() -> None:
    """The local stack in the background, for the console commands (`local up` / `local down`)."""


@local.command("up")
@config_option
@local_file_option
@database_option
@click.option(
    "--api-url",
    envvar="SWEEPER_API_URL",
    show_envvar=True,
    help="Send every vendor call of every policy here (http(s)://host[:port]), whatever host "
    "it names, instead of to the simulator.",
)
@click.option(
    "--tick-seconds",
    type=click.FloatRange(0.1),
    default=None,
    help="Run each producer this often instead of at its policy's schedule.",
)
@click.option(
    "--visibility-timeout",
    "visibility_timeout_seconds",
    default=None,
    type=click.IntRange(1, 43_200),
    help="The work queues' visibility timeout [default: each policy's, as deployed: six "
    "consumer timeouts plus the batching window]; never below the consumer timeout.",
)
@json_option
@friendly_errors
def local_up(
    config_path: str,
    local_file: str,
    database_url: str | None,
    api_url: str | None,
    tick_seconds: float | None,
    visibility_timeout_seconds: int | None,
    as_json: bool,
) -> None:
    """Start the local stack (PostgreSQL, AWS emulator, vendor simulator, consumers, producer
    tickers) in the background and write where it listens to --local-file."""
    with local_stack_required():
        from sweeper_local.action_secrets import (
            LOCAL_SECRETS_ENV,
            missing_local_secrets,
            parse_local_secrets,
        )
        from sweeper_local.background import start_background
        from sweeper_local.rehearsal import check_rehearsal

    config = load_config(config_path)  # a bad policy file is refused here, not in the background
    check_rehearsal(config.policies, api_url.rstrip("/") if api_url else None)
    if api_url:
        # An outside vendor's credentials are the user's; the simulator's are made up.
        given = parse_local_secrets(os.environ.get(LOCAL_SECRETS_ENV))
        missing = missing_local_secrets(config.policies, given)
        if missing:
            raise click.UsageError(
                f"with --api-url, {LOCAL_SECRETS_ENV} must give a value (a JSON object of "
                f"secret ARN to value) for {', '.join(missing)}"
            )
    if visibility_timeout_seconds is not None:
        for policy in config.policies:
            check_policy_event_source(policy, visibility_timeout_seconds)
    if interactive(as_json):
        click.echo("starting the local stack ...", err=True)
    found = start_background(
        config_path,
        Path(local_file),
        database_url=database_url,
        tick_seconds=tick_seconds,
        visibility_timeout_seconds=visibility_timeout_seconds,
        api_url=api_url.rstrip("/") if api_url else None,
    )
    data = found.model_dump(mode="json")
    data["database_url"] = redact(data["database_url"])
    if data.get("webhook_secret"):
        data["webhook_secret"] = f"(in {local_file})"  # a secret is not printed
    if as_json:
        click.echo(json.dumps(data))
        return
    click.echo(f"local stack running (pid {found.pid}); endpoints in {local_file}")
    for key in ("database_url", "aws_endpoint_url", "vendor_url", "webhook_url", "log_file"):
        click.echo(f"  {key:<17} {data[key]}")
    for service, url in found.service_endpoint_urls.items():
        click.echo(f"  {service + '_endpoint_url':<17} {url}")
    for name, where in found.policies.items():
        click.echo(f"  policy {name}: queue {where.queue_url}  dlq {where.dlq_url}")
        click.echo(f"  policy {name}: intake {where.intake_queue_url}")


@local.command("down")
@local_file_option
@json_option
@friendly_errors
def local_down(local_file: str, as_json: bool) -> None:
    """Stop the local stack started by `local up` and remove its file."""
    with local_stack_required():
        from sweeper_local.background import stop_background

    pid = stop_background(Path(local_file))
    if as_json:
        click.echo(json.dumps({"stopped": pid is not None, "pid": pid}))
        return
    click.echo("no local stack running" if pid is None else f"local stack (pid {pid}) stopped")


@local.command("scenario")
@click.argument("name", type=click.Choice(["dlq", "catch-up"]))
@database_option
@json_option
@friendly_errors
def local_scenario(name: str, database_url: str | None, as_json: bool) -> None:
    """Run a scripted operator scenario on a local stack of its own, printing each command.

    dlq: a vendor incident fills the DLQ; status, redrive --dry-run, redrive; all succeed once.
    catch-up: pause, scheduled runs pass, resume, catch-up releases them in order.
    """
    with local_stack_required():
        from sweeper_local.scenarios import run_scenario

    report = run_scenario(name, database_url=database_url, echo=None if as_json else click.echo)
    if as_json:
        click.echo(json.dumps(report.as_dict(), default=str))
        return
    click.echo(f"scenario {name}: every check passed in {report.elapsed_seconds} s")


@main.command("drill")
@click.argument("name", required=False)
@click.option("--list", "list_only", is_flag=True, help="List the drills and their alarms.")
@json_option
@friendly_errors
def drill(name: str | None, list_only: bool, as_json: bool) -> None:
    """Run a failure drill (NAME, or `all`) on a local stack of its own and print its figures;
    exit 0 only when every job ended final with one effect per object and nothing lost."""
    with local_stack_required():
        from sweeper_local import drills

    if list_only:
        rows = [
            {"name": d.name, "description": d.description, "alarm": d.alarm}
            for d in drills.DRILLS.values()
        ]
        if as_json:
            click.echo(json.dumps({"drills": rows}))
        for row in [] if as_json else rows:
            click.echo(f"{row['name']:<20} {row['description']}  [alarm: {row['alarm']}]")
        return
    if name is None:
        raise click.UsageError("name a drill, or `all` (`sweeper drill --list` shows them)")
    echo = None if as_json else lambda text: click.echo(text, err=True)
    reports = [drills.run_drill(n, echo=echo) for n in drills.resolve(name)]
    if as_json:
        passed = all(r.passed for r in reports)
        click.echo(
            json.dumps({"passed": passed, "drills": [r.as_dict() for r in reports]}, default=str)
        )
    else:
        for report in reports:
            click.echo("\n".join(drills.render(report)))
        if len(reports) > 1:
            click.echo("\n".join(drills.summary(reports)))
    if not all(r.passed for r in reports):
        sys.exit(1)
