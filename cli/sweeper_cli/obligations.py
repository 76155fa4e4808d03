"""Getting work in and out: `schedule`, `release`, `catch-up`, `retry`."""

from __future__ import annotations

import json
from datetime import UTC
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from sweeper.config import Policy
from sweeper_cli.base import (
    OUTCOMES,
    Console,
    actor_option,
    current_time,
    emit,
    execute,
    friendly_errors,
    json_option,
    main,
    next_run_hint,
    open_console,
    parse_time,
    policy_option,
    progress_bar,
    reason_option,
    target_options,
    through_api,
)

if TYPE_CHECKING:
    from sweeper.operator_api.backend import Backend
    from sweeper.operator_api.requests import CatchUpRequest


@main.command()
@click.argument("source", type=click.File("rb"), default="-")
@click.option(
    "--policy", "policy_name", required=True, help="The policy the obligations belong to."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "jsonl"]),
    default=None,
    help="Input format (default: from the file name, else jsonl).",
)
@target_options
@json_option
@friendly_errors
def schedule(
    source: Any,
    policy_name: str,
    fmt: str | None,
    as_json: bool,
    **target: Any,
) -> None:
    """Add obligations from CSV (header tenant_id,object_id[,due_at]) or JSON lines; idempotent.

    The whole input is checked before anything is written, then written in one transaction:
    a bad line (or an empty input) writes nothing. A repeat never duplicates an obligation and
    can only move its due time earlier. Reaches the local stack when it runs.
    """
    from sweeper.errors import InputError
    from sweeper.params import ParamsRules
    from sweeper.scheduling import schedule_jobs
    from sweeper_tools.obligation_file import decode_input, parse_jobs

    name = str(getattr(source, "name", "-"))
    chosen: Any = fmt or ("csv" if name.endswith(".csv") else "jsonl")
    now = current_time()
    # `--stack S` on the command line: through the stack's intake queue, no database needed.
    via_intake = (
        click.get_current_context().get_parameter_source("stack") is ParameterSource.COMMANDLINE
    )
    with open_console(**target) as console:
        policy = console.policy(policy_name)
        try:
            jobs = parse_jobs(decode_input(source.read()), chosen, now, ParamsRules.of(policy))
        except InputError as exc:
            where = "standard input" if name in ("-", "<stdin>") else name
            raise click.ClickException(
                f"{where}, {exc}; nothing was scheduled (fix the input and run again)"
            ) from exc
        if via_intake:
            emit(send_to_intake(console, policy, jobs), as_json)
            return
        result = schedule_jobs(console.ledger, policy, jobs, now)
        hint = next_run_hint(console, policy) if console.endpoints.local is not None else None
    emit(
        {
            "policy": policy.name,
            "inserted": result.inserted,
            "moved_earlier": result.moved_earlier,
            "unchanged": result.unchanged,
            "params_replaced": result.params_replaced,
            "params_kept": result.params_kept,
        },
        as_json,
    )
    if hint is not None and not as_json:
        click.echo(hint, err=True)


def send_to_intake(console: Any, policy: Any, jobs: list[Any]) -> dict[str, Any]:
    """Put validated obligations on the policy's intake queue; the intake function upserts them."""
    from sweeper.errors import OperatorError
    from sweeper.intake.send import send_hints
    from sweeper.sqs_queue import SqsPublisher

    url = console.endpoints.policy(policy.name).intake_queue_url
    if not url:
        where = "the local stack" if console.endpoints.local is not None else "the stack"
        raise OperatorError(
            f"{where} has no intake queue for policy {policy.name!r} (deploy this version, "
            "or schedule without --stack to write to the ledger directly)"
        )
    report = send_hints(SqsPublisher(console.endpoints.sqs(), url), policy.name, "file", jobs)
    return {
        "policy": policy.name,
        "sent": report.hints,
        "messages": report.messages,
        "request_id": report.request_id,
        "via": "intake queue",
    }


@main.command()
@policy_option
@actor_option
@target_options
@json_option
@friendly_errors
def release(policy_name: str | None, actor: str, as_json: bool, **target: Any) -> None:
    """Run the policy's producer now instead of waiting for its schedule: the local stack's
    producer, or on AWS the deployed producer function (Lambda Invoke). Refused while paused."""
    from sweeper.operator_api.requests import ReleaseRequest

    report = execute(ReleaseRequest(policy=policy_name), target=target, actor=actor)
    if as_json:
        click.echo(json.dumps(report, default=str))
        return
    click.echo(
        f"policy {report.get('policy', policy_name)}: released {report.get('published', 0)} of "
        f"{report.get('discovered', 0)} due job(s) ({report.get('stop_reason')}); "
        f"batch {report.get('batch_id')}"
    )


def release_policy(console: Console, policy: Policy) -> dict[str, Any]:
    """Run the policy's producer now (`smoke` sends its canary so): the local stack's, or the
    deployed function on AWS. Refused while paused."""
    from sweeper.operator_api.changes import release_report

    return release_report(console.backend(), policy)


@main.command("catch-up")
@policy_option
@click.option(
    "--since", required=True, help="Start of the range (ISO 8601 with a time zone), inclusive."
)
@click.option("--until", default=None, help="End of the range, inclusive (default: now).")
@click.option("--dry-run", is_flag=True, help="List the missed runs; release nothing.")
@actor_option
@target_options
@json_option
@friendly_errors
def catch_up(
    policy_name: str | None,
    since: str,
    until: str | None,
    dry_run: bool,
    actor: str,
    as_json: bool,
    **target: Any,
) -> None:
    """Release the scheduled runs missed in a range (the scheduler does not replay them), in
    order, each with its own batch id. Runs skipped while paused count as missed."""
    from sweeper.operator_api.requests import CatchUpRequest

    request = CatchUpRequest(
        policy=policy_name,
        since=parse_time(since, "--since"),
        until=parse_time(until, "--until") if until else current_time(),
        dry_run=dry_run,
    )
    if through_api():
        data = execute(request, target=target)
    else:
        from sweeper.operator_api.commands import run_command

        with open_console(**target) as console:
            total = missed_run_count(console.backend(), request)
            with progress_bar(as_json, total, "catching up") as advance:
                data = run_command(console.backend(progress=advance), request, actor=actor)
    report = SimpleNamespace(**{**data, "runs": [SimpleNamespace(**r) for r in data["runs"]]})
    if as_json:
        click.echo(json.dumps(data, default=str))
        return
    click.echo(
        f"policy {report.policy}: {report.missed} missed run(s) in {report.since} .. {report.until}"
    )
    for run in report.runs:
        click.echo(
            f"  {run.scheduled_at}  {run.was:<7}  batch {run.batch_id}  "
            f"published {run.published}/{run.discovered}  {run.stop_reason}"
        )


@main.command()
@policy_option
@click.option("--key", "keys", multiple=True, help="An operation key to retry (repeatable).")
@click.option(
    "--outcome",
    "outcomes",
    multiple=True,
    type=click.Choice(OUTCOMES),
    help="Retry terminal jobs whose last outcome is this class (repeatable).",
)
@click.option("--tenant", "tenant_id", help="Retry this tenant's terminal jobs.")
@click.option("--limit", default=1000, type=click.IntRange(1, 100_000), help="At most this many.")
@reason_option
@actor_option
@target_options
@json_option
@friendly_errors
def retry(
    policy_name: str | None,
    keys: tuple[str, ...],
    outcomes: tuple[str, ...],
    tenant_id: str | None,
    limit: int,
    reason: str | None,
    actor: str,
    as_json: bool,
    **target: Any,
) -> None:
    """Move chosen terminal jobs back to pending with a fresh attempt budget, due now; each move
    is recorded in the ledger with who did it and what the job had come to."""
    from sweeper.models import OutcomeClass
    from sweeper.operator_api.requests import RetryRequest

    request = RetryRequest(
        policy=policy_name,
        keys=keys or None,
        outcomes=tuple(OutcomeClass(o) for o in outcomes) or None,
        tenant_id=tenant_id,
        limit=limit,
        reason=reason,
    )
    data = execute(request, target=target, actor=actor)
    if as_json:
        click.echo(json.dumps(data))
        return
    click.echo(f"policy {data['policy']}: {data['retried']} job(s) back to pending")


def missed_run_count(backend: Backend, request: CatchUpRequest) -> int:
    """How many runs a catch-up would release (the direct path's progress bar length)."""
    from sweeper.operations.missed import missed_runs

    policy = backend.policy(request.policy)
    until = (request.until or backend.clock()).astimezone(UTC)
    return len(missed_runs(policy, backend.ledger, request.since.astimezone(UTC), until))
