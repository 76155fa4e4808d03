"""The text `status` and `inspect` print about what is failing: the jobs retrying, by outcome
class and code, and the policy's closed scopes with why and until when (`sweeper.failing`)."""

from __future__ import annotations

from typing import Any

import click


def print_failures(item: dict[str, Any], *, indent: str = "  ") -> None:
    """One line per (class, code) of retrying jobs, then one per closed scope."""
    for group in item.get("retrying") or []:
        click.echo(
            f"{indent}{'retrying':<15} {group['outcome']} {group['code'] or '-'}: "
            f"{group['jobs']} jobs, oldest {group['oldest_seconds']:.0f} s "
            f"(scopes {group['scopes']}, attempts up to {group['most_attempts']}, "
            f"last {group['last_at']})"
        )
    for closed in item.get("closed_scopes") or []:
        why = f": {closed['why']}" if closed["why"] else ""
        click.echo(
            f"{indent}{'scope closed':<15} {closed['scope']} until {closed['reopens_at']} "
            f"({closed['reason'] or 'unknown'}{why})"
        )
    if item.get("closed_scopes_unlisted"):
        click.echo(f"{indent}scope closed    ... and {item['closed_scopes_unlisted']} more")
