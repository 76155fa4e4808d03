"""Job control: `cancel`, `hold`, `unhold`, `postpone`, by key or by filter."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from sweeper_cli.base import (
    OUTCOMES,
    actor_option,
    execute,
    friendly_errors,
    interactive,
    json_option,
    main,
    parse_time,
    policy_option,
    target_options,
)

STATUSES = ["pending", "leased", "held", "failed"]


def selection_options[F: Callable[..., Any]](fn: F) -> F:
    """The filters every job control takes, with --max, --dry-run and --yes."""
    options = [
        click.option("--key", "keys", multiple=True, help="An operation key (repeatable)."),
        click.option("--tenant", "tenant_id", help="Only this tenant's jobs."),
        click.option(
            "--status",
            "statuses",
            multiple=True,
            type=click.Choice(STATUSES),
            help="Only jobs in this state (repeatable).",
        ),
        click.option(
            "--outcome",
            "outcomes",
            multiple=True,
            type=click.Choice(OUTCOMES),
            help="Only jobs whose last outcome is this class (repeatable).",
        ),
        click.option("--due-from", help="Only jobs due at or after this time (ISO 8601)."),
        click.option("--due-before", help="Only jobs due before this time (ISO 8601)."),
        click.option(
            "--max",
            "limit",
            default=1000,
            type=click.IntRange(1, 100_000),
            help="Move at most this many jobs.",
        ),
        click.option("--dry-run", is_flag=True, help="List the jobs it would move; change none."),
        click.option("--yes", is_flag=True, help="Confirm a move of more jobs than the threshold."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _run(
    action_name: str,
    *,
    policy_name: str | None,
    keys: tuple[str, ...],
    tenant_id: str | None,
    statuses: tuple[str, ...],
    outcomes: tuple[str, ...],
    due_from: str | None,
    due_before: str | None,
    limit: int,
    dry_run: bool,
    yes: bool,
    actor: str,
    reason: str | None,
    as_json: bool,
    until: str | None = None,
    **target: Any,
) -> None:
    from sweeper.models import OutcomeClass
    from sweeper.operator_api.commands import ConfirmationNeededError
    from sweeper.operator_api.requests import ControlRequest

    request = ControlRequest(
        command=action_name,  # one of the four, by _command
        policy=policy_name,
        keys=keys or None,
        tenant_id=tenant_id,
        statuses=statuses or None,  # click.Choice(STATUSES)
        outcomes=tuple(OutcomeClass(o) for o in outcomes) or None,
        due_from=parse_time(due_from, "--due-from") if due_from else None,
        due_before=parse_time(due_before, "--due-before") if due_before else None,
        until=parse_time(until, "--until") if until else None,
        limit=limit,
        dry_run=dry_run,
        reason=reason,
        confirmed=yes,
    )
    try:
        data = execute(request, target=target, actor=actor)
    except ConfirmationNeededError as exc:
        if not interactive(as_json):
            raise click.UsageError(
                f"{exc.moved} jobs match, more than {exc.threshold}: pass --yes to "
                f"{action_name} them, or narrow the filters or --max"
            ) from exc
        question = f"{action_name} {exc.moved} jobs of policy {exc.policy or policy_name}?"
        if not click.confirm(question, err=True):
            raise click.ClickException("nothing changed (not confirmed)") from exc
        data = execute(request.model_copy(update={"confirmed": True}), target=target, actor=actor)
    if as_json:
        click.echo(json.dumps(data))
        return
    verb = "would move" if data["dry_run"] else "moved"
    states = ", ".join(f"{n} {s}" for s, n in sorted(data["from_states"].items())) or "none"
    click.echo(f"policy {data['policy']}: {action_name} {verb} {data['moved']} job(s) ({states})")


def _command(name: str, doc: str, *, needs_reason: bool, needs_until: bool = False) -> None:
    def body(**kwargs: Any) -> None:
        _run(name, **kwargs)

    body.__doc__ = doc
    fn: Callable[..., Any] = body
    fn = friendly_errors(fn)
    fn = json_option(fn)
    fn = target_options(fn)
    fn = actor_option(fn)
    fn = click.option(
        "--reason",
        required=needs_reason,
        help="Why, as recorded in the ledger (no customer data)"
        + (", required." if needs_reason else "."),
    )(fn)
    if needs_until:
        fn = click.option(
            "--until", required=True, help="The new due time (ISO 8601 with a time zone)."
        )(fn)
    fn = selection_options(fn)
    fn = policy_option(fn)
    main.command(name)(wraps(body)(fn))


_command(
    "cancel",
    "Cancel the chosen jobs: terminal, never called again; no redrive, schedule, discovery or "
    "hint brings them back. Recorded with who and why.",
    needs_reason=True,
)
_command(
    "hold",
    "Hold the chosen pending or leased jobs: no claim takes them and a delivered message is "
    "acknowledged uncalled, whatever their due time, until `unhold`. No door lifts a hold.",
    needs_reason=True,
)
_command(
    "unhold",
    "Release held jobs back to pending: eligible again at their due time.",
    needs_reason=False,
)
_command(
    "postpone",
    "Move the chosen pending or held jobs' due time later, to --until (at most the policy's "
    "max_postpone_days ahead); no door moves it back. Recorded with who and why.",
    needs_reason=True,
    needs_until=True,
)
