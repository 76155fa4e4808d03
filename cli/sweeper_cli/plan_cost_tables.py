"""`sweeper plan`'s cost tables: the stack's bill as Markdown tables (docs/deploy.md holds them)."""

from __future__ import annotations

from typing import Any


def cost_tables(costs: dict[str, Any]) -> list[str]:
    """At rest per month, then per million jobs, each a table with a column per profile."""
    proxy = costs["rds_proxy_per_month"]
    lines = ["At rest, per month (USD):", ""]
    lines += _table(costs["at_rest_per_month"])
    lines += _awake(costs["paused_ledger_awake"])
    lines += [
        f"{proxy['name']}: {_basis(proxy)} = + {proxy['usd']:.2f}",
        "",
        "Per million jobs (USD):",
        "",
    ]
    lines += _table(costs["per_million_jobs"])
    jobs = costs["jobs_per_month"]
    if jobs:
        month = ", ".join(f"{name} {usd:.2f}" for name, usd in costs["per_month"].items())
        lines += ["", f"A month at {jobs:,} jobs (USD): {month}"]
    return lines


def _awake(awake: dict[str, Any]) -> list[str]:
    """What keeps a ledger that may pause awake: the paused columns' Aurora hours, by reason."""
    lines = [
        "",
        f"Paused: awake {awake['hours']:,.2f} h a month at {awake['acu']:g} ACU (the cluster "
        f"pauses {awake['pause_after_seconds']:g} s after its last session closes):",
    ]
    for wake in awake["wakes"]:
        lines.append(
            f"- {wake['name']}: {wake['per_month']:,.6g} a month x {wake['seconds_each']:g} s"
            f" = {wake['hours']:,.2f} h"
        )
    return [*lines, ""]


def _table(profiles: dict[str, Any]) -> list[str]:
    """A row per item: its basis (quantity x price, the first profile's, and where another
    profile's quantity differs, that one too), then each profile's USD; then the totals."""
    names = list(profiles)
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for name in names:
        for item in profiles[name]["items"]:
            rows.setdefault(item["name"], {})[name] = item
    lines = [
        "| Item | Basis | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for item_name, by_profile in rows.items():
        first = next(iter(by_profile.values()))
        basis = _basis(first)
        others = [
            f"{name}: {by_profile[name]['quantity']:,.6g}"
            for name in names
            if name in by_profile and by_profile[name]["quantity"] != first["quantity"]
        ]
        if others:
            basis += f" ({'; '.join(others)})"
        cells = [f"{by_profile[n]['usd']:.2f}" if n in by_profile else "-" for n in names]
        lines.append(f"| {item_name} | {basis} | " + " | ".join(cells) + " |")
    totals = " | ".join(f"**{profiles[n]['total_usd']:.2f}**" for n in names)
    lines.append(f"| **Total** | | {totals} |")
    return lines


def _basis(item: dict[str, Any]) -> str:
    price = f"{item['unit_usd']:.10f}".rstrip("0").rstrip(".")
    return f"{item['quantity']:,.6g} {item['unit']} x ${price}"
