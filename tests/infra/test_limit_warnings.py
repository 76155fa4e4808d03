"""`make synth` warns about a limit no load can reach (planning.plan.limit_warnings)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from aws_cdk.assertions import Annotations, Match

from tests.infra.conftest import FIXTURES, Synth


def _limit_warnings(synth: Synth) -> dict[str, str]:
    """The synth's LimitUnreachable warnings, by the policy whose pipeline carries each."""
    found = Annotations.from_stack(synth.stack).find_warning(
        "*", Match.string_like_regexp("is never reached")
    )
    by_policy: dict[str, str] = {}
    for entry in found:
        pipeline = re.search(r"/Pipeline-([^/]+)", str(entry.id))
        assert pipeline is not None, entry.id
        by_policy[pipeline.group(1)] = str(entry.entry.data)
    return by_policy


def test_synth_warns_about_each_limit_no_load_can_reach_and_no_other(
    synth_variant: Callable[[dict[str, Any]], Synth],
) -> None:
    synth = synth_variant({"config": str(FIXTURES / "limits_reach.toml")})
    warnings = _limit_warnings(synth)
    # Then listings-slow's app limit is past its consumers, and shared-b's store limit above
    # its app limit; not shared-a, whose consumers reach the app limit it shares with shared-b
    assert sorted(warnings) == ["listings-slow", "shared-b"]
    assert warnings["listings-slow"].startswith(
        "limit app of policy listings-slow is never reached: it allows 37.7/s a key, but the "
        "consumers complete at most 15.4 jobs/s"
    )
    assert warnings["shared-b"].startswith(
        "limit store of policy shared-b is never reached: it allows 47.1/s a key, but every "
        "call under one of its keys is under one key of limit app, which allows 23.6/s"
    )
