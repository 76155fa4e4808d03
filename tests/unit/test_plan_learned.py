"""`sweeper plan` on a limit that learns its rate from the vendor's answers."""

from __future__ import annotations

from sweeper_tools.planning.plan import make_plan
from tests.unit.test_plan import STORE, _limited, _rate, _vendor


def test_a_learned_limit_is_planned_at_its_told_rate_and_says_it_is_learned() -> None:
    # Given a store limit of 2/s whose rate the vendor states in its IETF fields
    learned = {**STORE, "rate": _rate(2), "learn": "ratelimit"}
    # When it is planned
    plan = make_plan(_limited(learned), _vendor(scopes=10))
    # Then the told rate is planned as the most it allows, and the plan says the vendor sets it
    assert plan.limits[0]["ceiling_per_second"] == 20.0
    assert "limit store of policy listings: rate learned from the vendor, at most 2/1s" in (
        plan.advisories
    )


def test_a_limit_that_learns_nothing_says_nothing_of_it() -> None:
    plan = make_plan(_limited(STORE), _vendor(scopes=10))
    assert not any("learned" in text for text in plan.advisories)
