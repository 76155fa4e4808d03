"""The console's HTML, rendered on the server with the standard library: every value escaped,
the chart a plain SVG (no script library, nothing fetched at runtime, works offline)."""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import urlencode

from sweeper_cli.shares import share_line
from sweeper_cli.webconsole.backend import ACTIONS
from sweeper_cli.webconsole.failures import failures_card

CHART_WIDTH = 1200
CHART_HEIGHT = 180
CHART_LEFT = 36
CHART_BOTTOM = 20


def e(value: Any) -> str:
    """Escaped text; a dash for nothing."""
    return "-" if value is None else escape(str(value), quote=True)


def link(path: str, **params: str) -> str:
    return escape(f"{path}?{urlencode(params)}" if params else path, quote=True)


def layout(title: str, body: str, *, token: str, operator: str, target: str) -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="sweeper-token" content="{e(token)}">
<meta name="referrer" content="no-referrer">
<title>{e(title)} · sweeper console</title>
<link rel="stylesheet" href="/static/console.css">
<script src="/static/console.js" defer></script>
</head><body>
<header><a href="/" class="brand">sweeper console</a>
<span class="who">reading the {e(target)} · acting as <b id="operator">{e(operator)}</b></span>
</header>
<main>{body}</main>
</body></html>
"""


def search_form(policies: list[str], policy: str | None, query: str = "") -> str:
    options = "".join(
        f'<option value="{e(p)}"{" selected" if p == policy else ""}>{e(p)}</option>'
        for p in policies
    )
    return f"""<form class="search" method="get" action="/search">
<select name="policy" aria-label="policy">{options}</select>
<input name="q" id="search-q" value="{e(query)}" placeholder="operation key or tenant id"
 aria-label="operation key or tenant id" size="40">
<button type="submit" id="search-go">Search</button></form>"""


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "none eligible"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def chart(buckets: list[dict[str, Any]]) -> str:
    """Claims and completions per bucket as bars: claims left, completions right (succeeded
    with failed stacked on top); each bar group carries its figures as data attributes."""
    if not buckets:
        return "<p>no activity</p>"
    top = max(1, *(max(b["claimed"], b["succeeded"] + b["failed"]) for b in buckets))
    inner_w = CHART_WIDTH - CHART_LEFT
    inner_h = CHART_HEIGHT - CHART_BOTTOM
    slot = inner_w / len(buckets)
    bar = max(1.0, slot * 0.4)

    def height(n: int) -> float:
        return float(inner_h * n / top)

    parts = [
        f'<svg class="chart" viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" role="img" '
        f'aria-label="claims and completions">',
        f'<line x1="{CHART_LEFT}" y1="{inner_h}" x2="{CHART_WIDTH}" y2="{inner_h}" class="axis"/>',
        f'<text x="{CHART_LEFT - 4}" y="10" class="tick" text-anchor="end">{top}</text>',
        f'<text x="{CHART_LEFT - 4}" y="{inner_h}" class="tick" text-anchor="end">0</text>',
    ]
    for i, b in enumerate(buckets):
        x = CHART_LEFT + i * slot
        at = datetime.fromisoformat(b["at"])
        claimed, ok, failed = b["claimed"], b["succeeded"], b["failed"]
        parts.append(
            f'<g class="bucket" data-at="{e(b["at"])}" data-claimed="{claimed}" '
            f'data-succeeded="{ok}" data-failed="{failed}">'
            f"<title>{at:%H:%M} claimed {claimed}, succeeded {ok}, failed {failed}</title>"
            f'<rect class="claimed" x="{x:.1f}" y="{inner_h - height(claimed):.1f}" '
            f'width="{bar:.1f}" height="{height(claimed):.1f}"/>'
            f'<rect class="succeeded" x="{x + bar:.1f}" y="{inner_h - height(ok):.1f}" '
            f'width="{bar:.1f}" height="{height(ok):.1f}"/>'
            f'<rect class="failed" x="{x + bar:.1f}" y="{inner_h - height(ok + failed):.1f}" '
            f'width="{bar:.1f}" height="{height(failed):.1f}"/></g>'
        )
        if at.minute == 0:
            parts.append(f'<text x="{x:.1f}" y="{CHART_HEIGHT - 4}" class="tick">{at:%H:%M}</text>')
    parts.append("</svg>")
    return "".join(parts)


def overview(
    policy: str, item: dict[str, Any], buckets: list[dict[str, Any]], policies: list[str]
) -> str:
    counts = item["counts"]
    count_cells = "".join(
        f'<tr><th>{e(status)}</th><td class="n" data-status="{e(status)}">{n}</td></tr>'
        for status, n in counts.items()
    )
    claimed = sum(b["claimed"] for b in buckets)
    completed = sum(b["succeeded"] + b["failed"] for b in buckets)
    paused = (
        f'<p class="paused">PAUSED since {e(item["paused_at"])} by {e(item["paused_by"])}</p>'
        if item["paused"]
        else ""
    )
    limits = "".join(
        f"<tr><th>{e(name.replace('_', ' '))}</th><td>{e(value)}</td></tr>"
        for name, value in item["limits"].items()
    )
    if item["gates_read"]:
        gates = (
            "".join(
                f'<tr class="gate" data-scope="{e(g["scope"])}"><th>{e(g["scope"])}</th>'
                + (
                    f'<td class="closed">closed until {e(g["reopens_at"])} ({e(g["reason"])})</td>'
                    if g["closed"]
                    else '<td class="open">open</td>'
                )
                + f"<td>{g['unsettled_jobs']} unsettled</td>"
                + (f'<td class="share">{e(share_line(g["share"]))}</td>' if g.get("share") else "")
                + "</tr>"
                for g in item["gates"]
            )
            or '<tr><td colspan="3">no scope holds work</td></tr>'
        ) + "".join(
            f'<tr class="limit-gate" data-limit="{e(c["limit"])}" data-key="{e(c["key"])}">'
            f"<th>{e(c['key'])}</th>"
            f'<td class="closed">closed until {e(c["reopens_at"])} ({e(c["reason"])})</td>'
            f"<td>limit {e(c['limit'])}: {e(c['why'] or 'unknown')}</td></tr>"
            for c in item.get("closed_limits") or []
        )
    else:
        gates = '<tr><td colspan="3">gates are not read from this target</td></tr>'

    def queue(name: str, label: str) -> str:
        found = item.get(name)
        if found is None:
            return f'<tr><th>{label}</th><td id="{name}-{e(policy)}">not read</td></tr>'
        return (
            f'<tr><th>{label}</th><td class="n" id="{name}-{e(policy)}">{found["messages"]}</td>'
            f"<td>{found['in_flight']} in flight</td></tr>"
        )

    runs = (
        "".join(
            f'<tr class="run" data-batch="{e(r["batch_id"])}"><td>{e(r["scheduled_at"])}</td>'
            f'<td class="n">{r["published"]}</td><td class="n">{r["carried"]}</td>'
            f'<td class="n">{r["settled"]}</td><td class="n">{r["in_flight"]}</td>'
            f"<td>{e(r['stop_reason'])}</td>"
            f'<td class="{"ok" if r["reconciles"] else "bad"}">'
            f"{'reconciles' if r['reconciles'] else 'DOES NOT RECONCILE'}</td></tr>"
            for r in item["runs"]
        )
        or '<tr><td colspan="7">no runs yet</td></tr>'
    )
    actions = (
        "".join(
            f'<tr class="action"><td>{e(a["at"])}</td><td>{e(a["action"])}</td>'
            f'<td class="actor">{e(a["actor"])}</td><td class="reason">{e(a["reason"])}</td>'
            f'<td class="progress">{e(_progress(a.get("progress")))}</td></tr>'
            for a in item["actions"]
        )
        or '<tr><td colspan="5">none</td></tr>'
    )
    return f"""<section class="policy" id="policy-{e(policy)}" data-policy="{e(policy)}">
<h2>policy {e(policy)}</h2>{paused}
{search_form(policies, policy)}
<div class="grid">
<div class="card"><h3>obligations by state</h3><table class="counts">{count_cells}</table>
<p>oldest eligible: <b class="oldest">{_age(item["oldest_eligible_age_seconds"])}</b></p>
<p>leased on consumers: {item["leased_in_flight"]}</p></div>
<div class="card"><h3>queues</h3><table>{queue("queue", "queue")}{queue("dlq", "DLQ")}</table>
<h3>limits</h3><table>{limits}</table></div>
<div class="card"><h3>gates</h3><table>{gates}</table></div>
</div>
{failures_card(item)}
<div class="card wide"><h3>claims and completions, last {len(buckets) * 15 // 60} h (UTC)</h3>
<p class="legend"><span class="claimed">■</span> claimed <b class="total-claimed">{claimed}</b>
 · <span class="succeeded">■</span> succeeded / <span class="failed">■</span> failed
 <b class="total-completed">{completed}</b></p>{chart(buckets)}</div>
<div class="card wide"><h3>last runs and their reconciliation</h3>
<table class="runs"><tr><th>scheduled</th><th>published</th><th>carried</th><th>settled</th>
<th>in flight</th><th>stop</th><th>carried = settled + in flight</th></tr>{runs}</table></div>
<div class="card wide"><h3>last operator actions</h3><table>{actions}</table></div>
</section>"""


def _progress(progress: dict[str, Any] | None) -> str:
    """An action's recorded steps (migration 0015), as one cell: `3 steps: jobs 2500 · runs 10,
    done` (an action cut short says `not finished`)."""
    if not progress:
        return ""
    totals = " · ".join(f"{k} {v:g}" for k, v in sorted(progress["totals"].items()))
    state = "done" if progress["done"] else "not finished"
    return f"{progress['steps']} steps: {totals or 'nothing counted'}, {state}"


def action_form(policy: str, *, key: str | None = None, tenant: str | None = None) -> str:
    """The actions, each previewed (a dry run) and confirmed before it moves anything."""
    target = f"job {key}" if key is not None else f"every job of tenant {tenant}"
    options = "".join(f'<option value="{a}">{a}</option>' for a in ACTIONS)
    return f"""<form class="act card" id="act" data-policy="{e(policy)}"
 data-key="{e(key) if key is not None else ""}" data-tenant="{e(tenant) if tenant else ""}">
<h3>act on {e(target)}</h3>
<select name="action" id="act-action" aria-label="action">{options}</select>
<input name="reason" id="act-reason" placeholder="reason (recorded; no customer data)" size="40">
<input name="until" id="act-until" placeholder="postpone until, e.g. 2026-12-31T00:00:00Z">
<button type="button" id="act-preview" disabled>Preview…</button>
<div id="act-confirm" hidden><p id="act-question"></p>
<button type="button" id="act-yes">Confirm</button>
<button type="button" id="act-no">Cancel</button></div>
<p id="act-result" role="status"></p></form>"""


def search_page(policy: str, query: str, hits: list[dict[str, Any]], policies: list[str]) -> str:
    rows = (
        "".join(
            f'<tr class="hit"><td><a href="{link("/job", key=h["operation_key"])}">'
            f"{e(h['operation_key'])}</a></td><td>{e(h['tenant_id'])}</td>"
            f'<td class="status">{e(h["status"])}</td><td>{e(h["outcome"])}</td>'
            f'<td>{e(h["error_code"])}</td><td class="n">{h["attempts"]}</td>'
            f"<td>{e(h['due_at'])}</td></tr>"
            for h in hits
        )
        or '<tr><td colspan="7">no job has this key or tenant</td></tr>'
    )
    tenants = {h["tenant_id"] for h in hits}
    act = ""
    if len(tenants) == 1 and any(h["operation_key"] != query for h in hits):
        act = action_form(policy, tenant=next(iter(tenants)))
    return f"""<h2>search in {e(policy)}: {e(query)}</h2>{search_form(policies, policy, query)}
<table class="hits"><tr><th>key</th><th>tenant</th><th>status</th><th>outcome</th>
<th>error</th><th>attempts</th><th>due</th></tr>{rows}</table>{act}"""


def job_page(job: dict[str, Any]) -> str:
    fields = (
        "status",
        "tenant_id",
        "object_id",
        "scope",
        "due_at",
        "next_attempt_at",
        "attempts",
        "retry_round",
        "outcome",
        "error_code",
        "lease_expires_at",
        "created_at",
        "updated_at",
        "completed_at",
        "held_at",
        "hold_reason",
        "cancelled_at",
        "cancel_reason",
        "postponed_until",
        "batch_id",
        "trace_id",
    )
    rows = "".join(
        f'<tr><th>{e(name.replace("_", " "))}</th><td id="job-{name}">{e(job[name])}</td></tr>'
        for name in fields
    )
    events = (
        "".join(
            f'<tr class="event"><td>{e(ev["at"])}</td><td>{e(ev["event"])}</td>'
            f"<td>{e(ev['from_status'])} → {e(ev['to_status'])}</td>"
            f"<td>{ev['previous_attempts']}</td><td>{e(ev['previous_outcome'])}</td>"
            f'<td class="actor">{e(ev["actor"])}</td><td class="reason">{e(ev["reason"])}</td></tr>'
            for ev in job["events"]
        )
        or '<tr><td colspan="7">no operator events</td></tr>'
    )
    return f"""<h2>job {e(job["operation_key"])}</h2>
<p>policy <a href="/">{e(job["policy"])}</a>. The ledger keeps a job's attempt count and its last
outcome and error code; each operator event keeps what the job had before it.</p>
<div class="grid"><div class="card"><h3>as the ledger has it</h3><table>{rows}</table></div>
{action_form(job["policy"], key=job["operation_key"])}</div>
<div class="card wide"><h3>history</h3><table class="events"><tr><th>at</th><th>event</th>
<th>move</th><th>attempts before</th><th>outcome before</th><th>by</th><th>reason</th></tr>
{events}</table></div>"""


def message_page(title: str, text: str) -> str:
    return f"<h2>{e(title)}</h2><p>{e(text)}</p>"
