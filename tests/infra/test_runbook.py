"""The runbook and the template name the same alarms, and the runbook reads only the dashboard.

Convention (infra/observability/, docs/runbook.md): an alarm is named `<stack>-<policy>-<id>`
or `<stack>-<id>`, its id in PascalCase; the runbook's `## Alarms` section has one `### ` heading
per alarm, naming its id (or several ids, `A / B`, when they share a section). Both sides are
read from their sources: the synthesized templates and the markdown, never a list kept by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.infra.conftest import REPO_ROOT, Synth
from tests.infra.signals import ALARM_ID, dashboard_signals, template_alarm_ids

RUNBOOK = REPO_ROOT / "docs" / "runbook.md"
ALARMS_HEADING = "## Alarms"
CAUSES_HEADING = "## Telling the causes apart"


def _lines_outside_code(text: str) -> Iterator[str]:
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield line


def _section(text: str, heading: str) -> list[str]:
    """The lines of a level-2 section, up to the next level-2 (or level-1) heading."""
    lines: list[str] = []
    inside = False
    for line in _lines_outside_code(text):
        if line.startswith("## ") or line.startswith("# "):
            if inside:
                break
            inside = line.strip() == heading
        elif inside:
            lines.append(line)
    assert inside or lines, f"docs/runbook.md has no {heading!r} section"
    return lines


def runbook_alarm_ids(text: str) -> list[str]:
    """Every id the `### ` headings of the Alarms section name, in order (repeats kept)."""
    ids: list[str] = []
    for line in _section(text, ALARMS_HEADING):
        if line.startswith("### "):
            ids.extend(part.strip() for part in line.removeprefix("### ").split(" / "))
    return ids


def test_runbook_alarm_headings_are_ids_each_named_once() -> None:
    ids = runbook_alarm_ids(RUNBOOK.read_text(encoding="utf-8"))
    assert ids, "the runbook's Alarms section has no ### headings"
    bad = [i for i in ids if not ALARM_ID.match(i)]
    assert not bad, f"runbook alarm headings must be ids only (`### QueueAge`): {bad}"
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    assert not repeated, f"ids with more than one runbook section: {repeated}"


def test_every_alarm_in_the_template_has_a_runbook_section(every_variant: Synth) -> None:
    documented = set(runbook_alarm_ids(RUNBOOK.read_text(encoding="utf-8")))
    missing = sorted(
        name
        for name, alarm_id in template_alarm_ids(every_variant).items()
        if alarm_id not in documented
    )
    assert not missing, (
        f"alarms without a `### <id>` section under `{ALARMS_HEADING}` in docs/runbook.md: "
        f"{missing}"
    )


def test_every_alarm_the_runbook_names_exists_in_a_template(
    default: Synth, proxied: Synth, imported: Synth
) -> None:
    # Some alarms exist only for some deployments (the ledger's only for a new cluster, the
    # limiter's only for a single-scope policy): the three variants together hold every one.
    synthesized: set[str] = set()
    for variant in (default, proxied, imported):
        synthesized |= set(template_alarm_ids(variant).values())
    stale = [
        i for i in runbook_alarm_ids(RUNBOOK.read_text(encoding="utf-8")) if i not in synthesized
    ]
    assert not stale, f"docs/runbook.md has sections for alarms no template defines: {stale}"


def causes_table_signals(text: str) -> list[str]:
    """Every `code` span in the first column of the "telling the causes apart" table."""
    signals: list[str] = []
    rows = [line for line in _section(text, CAUSES_HEADING) if line.startswith("|")]
    for row in rows[2:]:  # below the header and its rule
        first_cell = row.split("|")[1]
        signals.extend(re.findall(r"`([^`]+)`", first_cell))
    return signals


@pytest.mark.parametrize("variant", ["default", "proxied"])
def test_telling_the_causes_apart_uses_only_signals_on_the_dashboard(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    signals = dashboard_signals(synth)
    named = causes_table_signals(RUNBOOK.read_text(encoding="utf-8"))
    assert named, "the causes table names no signal"
    prefixes = {s.removesuffix("*") for s in named if s.endswith("*")}
    off_dashboard = [
        s
        for s in named
        if s not in signals and not (s.endswith("*") and any(x.startswith(s[:-1]) for x in signals))
    ]
    assert prefixes <= {"Attempts_"}, prefixes
    assert not off_dashboard, (
        f"the causes table reads signals not on the dashboard: {off_dashboard}"
    )
