"""The console page's card of what is failing: jobs retrying by outcome class and code, and the
policy's scopes closed now, with why and until when (`sweeper.failing`)."""

from __future__ import annotations

from typing import Any


def failures_card(item: dict[str, Any]) -> str:
    """A card: one row per (class, code) of retrying jobs, then one per closed scope."""
    from sweeper_cli.webconsole.page import e  # the page draws this card: imported when drawn

    retrying = "".join(
        f'<tr class="retrying" data-outcome="{e(g["outcome"])}" data-code="{e(g["code"])}">'
        f'<th>{e(g["outcome"])} {e(g["code"])}</th><td class="n">{g["jobs"]}</td>'
        f"<td>jobs, oldest {g['oldest_seconds']:.0f} s, up to {g['most_attempts']} attempts"
        f"</td></tr>"
        for g in item.get("retrying") or []
    )
    closed_scopes = item.get("closed_scopes")
    if closed_scopes is None:
        closed = '<tr><td colspan="3">closed scopes are not read from this target</td></tr>'
    else:
        closed = "".join(
            f'<tr class="closed-scope" data-scope="{e(c["scope"])}"><th>{e(c["scope"])}</th>'
            f'<td class="closed">closed until {e(c["reopens_at"])} ({e(c["reason"])})</td>'
            f"<td>{e(c['why'])}</td></tr>"
            for c in closed_scopes
        )
        if item.get("closed_scopes_unlisted"):
            closed += (
                f'<tr><td colspan="3">and {item["closed_scopes_unlisted"]} more closed</td></tr>'
            )
    rows = retrying + closed or '<tr><td colspan="3">nothing retrying, no scope closed</td></tr>'
    return f'<div class="card wide"><h3>failing now</h3><table class="failing">{rows}</table></div>'
