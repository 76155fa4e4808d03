"""The README's Configure section shows a vendor's contract (its limits and its latency), a
policy that loads, and nothing of how sweeper paces calls (slots, slack, turnovers)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from sweeper.config import SweeperConfig

README = Path(__file__).resolve().parents[2] / "README.md"


def _configure() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("\n## Configure\n", 1)[1].split("\n## ", 1)[0]


def test_the_configure_example_is_a_vendors_contract_that_loads() -> None:
    (example,) = re.findall(r"```toml\n(.*?)```", _configure(), flags=re.S)
    (policy,) = SweeperConfig.model_validate(tomllib.loads(example)).policies
    # its limits as the vendor publishes them, and how long the vendor answers
    assert "limits" in policy.model_fields_set
    assert len(policy.limits) == 2
    assert policy.action.latency_p50_seconds is not None
    assert policy.action.latency_p95_seconds is not None
    # and nothing of the consumer's sizing: that follows from them
    assert not {"parallel_calls", "batch_size", "batch_window_seconds", "timeout_seconds"} & (
        policy.consumer.model_fields_set
    )


def test_the_configure_section_says_nothing_of_slots_slack_or_turnovers() -> None:
    assert not re.search(r"\b(slots?|slack|turnovers?)\b", _configure(), flags=re.I)


def test_the_readme_stays_within_300_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300
