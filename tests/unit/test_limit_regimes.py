"""A limit's regimes answer for it: the producer's share, the console's line, the plan's terms.

The figures here are what main printed before the regimes held them (a rate, a cap, both on one
key, an adaptive rate); the last test plugs a regime in by the unions alone (its terms, its
planning provider) and sees every caller (claim bounds, console, plan) take it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

import pytest

from sweeper.admission import regimes
from sweeper.admission.regimes import regime_of
from sweeper.admission.terms import LimiterItem
from sweeper.config import LimitConfig, Policy
from sweeper.config.regimes import Arm
from sweeper.operator_api.reads import limits_of
from sweeper.producer.claim_bounds import claim_bounds
from sweeper_cli.plan import render
from sweeper_tools.planning.plan import PlanInput, make_plan
from sweeper_tools.planning.regimes import PLANNING, PlanTerm, RegimePlanning
from sweeper_tools.policy_file import load_config

REPO = Path(__file__).resolve().parents[2]
GIVEN = PlanInput(latency_p50_seconds=0.1, latency_p95_seconds=0.3, scopes=4)


#: An app-wide limit of 40/s and 2 calls in flight, on one key.
APP_RATE_AND_CAP = {
    "name": "app",
    "key": "app",
    "rate": {"limit": 40, "period_seconds": 1},
    "max_in_flight": 2,
}


def _limit_lines(policy: Policy) -> list[str]:
    return [line for line in render(make_plan(policy, GIVEN).as_dict()) if "limit " in line]


def _two_limits(further: dict[str, Any]) -> Policy:
    store = {"name": "store", "key": "{tenant_id}", "rate": {"limit": 2, "period_seconds": 1}}
    return Policy.model_validate({"name": "p", "limits": [store, further]})


def test_the_plan_prints_a_rate_and_a_cap_as_on_main() -> None:
    # Given the refunds example: 100/s an account, and 20 in flight an account
    refunds = load_config(REPO / "docs" / "examples" / "refunds.toml").policies[0]
    # Then each limit's line, and the advisory naming the cap, read as they did
    lines = _limit_lines(refunds)
    assert lines[:2] == [
        "  limit account    94.3/s a key ({host}/{tenant_id}) x 4 keys = 377.2/s; 0.43 used",
        "  limit inflight   20 in flight / 0.155 s = 129.04/s a key ({host}/{tenant_id}) x 4 "
        "keys = 516.17/s; 0.314 used",
    ]
    assert (
        "advisory: limit inflight of policy refunds is never reached: it allows 129.0/s (20 in "
        "flight) a key, but every call under one of its keys is under one key of limit account, "
        "which allows 94.3/s"
    ) in lines


def test_a_limit_with_a_rate_and_a_cap_is_bound_by_the_smaller() -> None:
    # Given an app-wide limit of 40/s and 2 in flight (2 / 0.155 s = 12.9/s)
    policy = _two_limits(APP_RATE_AND_CAP)
    # Then the plan shows both and binds it by the cap
    (limit,) = [limit for limit in make_plan(policy, GIVEN).limits if limit["name"] == "app"]
    assert (limit["rate_per_second"], limit["max_in_flight"], limit["bound"]) == (
        37.72,
        2,
        "in flight",
    )
    assert _limit_lines(policy)[1] == (
        "  limit app        37.72/s and 2 in flight / 0.155 s = 12.9/s a key (app) x 1 key = "
        "12.9/s; 0.585 used"
    )
    # and the console both, in the order they are stated
    assert limits_of(policy)["limit app"] == "40 calls per 1 s and 2 in flight a key of app"


def test_a_cap_without_a_latency_is_left_to_the_consumers_but_its_rate_still_bounds() -> None:
    # Given an app-wide rate and cap, and no latency planned for the action
    policy = _two_limits(APP_RATE_AND_CAP)
    assert policy.action.latency is None
    # Then the claim holds the policy to the rate's rows and leaves the cap to the consumers
    bounds = claim_bounds(policy)
    assert (bounds.policy_binding, bounds.to_consumers) == ("app", ("app",))
    share = regime_of(policy.limits[1]).claim_share(450.0, None)
    assert (share.rows, share.to_consumers) == (bounds.policy_cap, True)
    # and with a latency, by the cap: 2 / 0.1 s x 450 s
    assert regime_of(policy.limits[1]).claim_share(450.0, 0.1).rows == 9000


def test_the_console_says_a_rate_is_adaptive() -> None:
    policy = _two_limits(
        {"name": "app", "key": "app", "rate": {"limit": 40, "period_seconds": 1, "adaptive": True}}
    )
    assert limits_of(policy)["limit app"] == "40 calls per 1 s (adaptive) a key of app"


class _BurstArm(Arm):
    """The stand-in regime's arm (never in the config's union: a limit states it by its name)."""

    regime: Literal["burst"] = "burst"


@dataclass(frozen=True, slots=True)
class _Burst:
    """A regime no limit states but by its name: `burst` allows 5 calls a second."""

    ARM: ClassVar[type[Arm]] = _BurstArm
    ITEMS: ClassVar[tuple[LimiterItem, ...]] = ()

    @classmethod
    def of(cls, limit: LimitConfig) -> Self | None:
        return cls() if limit.name == "burst" else None

    def claim_per_second(self, latency_p50: float | None) -> float | None:
        return 5.0

    def allows(self) -> str:
        return "a burst of 5"


class _BurstPlanning(RegimePlanning[_Burst]):
    FIGURES: ClassVar[tuple[str, ...]] = ("burst_per_second",)

    def plan(self, mean_service: float | None) -> PlanTerm:
        return PlanTerm(5.0, "burst", " (burst)", {"burst_per_second": 5.0})

    @staticmethod
    def plan_line(figures: Mapping[str, Any], mean_service: float) -> str | None:
        burst = figures.get("burst_per_second")
        return None if burst is None else f"a burst of {burst}/s"


def test_a_new_regime_is_its_terms_its_planning_and_one_line_of_each_union(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a regime added to the union of terms and to the planning providers, and a policy
    # whose app-wide limit states it
    monkeypatch.setattr(regimes, "REGIMES", (*regimes.REGIMES, _Burst))
    monkeypatch.setitem(PLANNING, "burst", _BurstPlanning)
    policy = _two_limits(
        {"name": "burst", "key": "app", "rate": {"limit": 40, "period_seconds": 1}}
    )
    # Then the claim, the console and the plan take it, none of them changed
    assert (claim_bounds(policy).policy_cap, claim_bounds(policy).policy_binding) == (
        2250,
        "burst",
    )
    assert limits_of(policy)["limit burst"] == ("40 calls per 1 s and a burst of 5 a key of app")
    (limit,) = [limit for limit in make_plan(policy, GIVEN).limits if limit["name"] == "burst"]
    assert (limit["burst_per_second"], limit["bound"], limit["ceiling_per_second"]) == (
        5.0,
        "burst",
        5.0,
    )
    assert _limit_lines(policy)[1].startswith(
        "  limit burst      37.72/s and a burst of 5.0/s a key (app) x 1 key = 5.0/s"
    )
    # and a limit that does not state it shows its figure as None
    assert make_plan(policy, GIVEN).limits[0]["burst_per_second"] is None
