"""A limit's regimes are arms of one discriminated union, as an action's kinds are.

Each regime (a rate, a concurrency cap, a budget) owns its config arm (`regime = "..."`) and its
terms (sweeper.admission.regimes.REGIMES); a limit carries the arms it states. Today's spellings
(`rate = ...`, `max_in_flight = N`, `budget = {...}`, `cost_per_call`) load as arms, so every
policy file of today loads the limits it loaded before; and a new regime is its arm, its terms,
its planning provider (sweeper_tools.planning.regimes), and one line in each of the three.
"""

from __future__ import annotations

import functools
import operator
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

import pytest
from pydantic import Field, ValidationError
from pydantic.fields import FieldInfo

from sweeper.admission import regimes
from sweeper.admission.terms import LimiterItem
from sweeper.config import LimitConfig, Policy, Quota, SweeperConfig
from sweeper.config import limit as limit_module
from sweeper.config.budget import BudgetConfig
from sweeper.config.limit import ARMS
from sweeper.config.regimes import Arm, BudgetArm, CapArm, RateArm
from sweeper.errors import ConfigError
from sweeper.operator_api.reads import limits_of
from sweeper.producer.claim_bounds import claim_bounds
from sweeper_cli.plan import render
from sweeper_tools.deploy.limiter_keys import limiter_key_patterns
from sweeper_tools.planning.plan import PlanInput, make_plan
from sweeper_tools.planning.regimes import PLANNING, PlanTerm, RegimePlanning
from sweeper_tools.policy_file import load_config

REPO = Path(__file__).resolve().parents[2]
GIVEN = PlanInput(latency_p50_seconds=0.1, latency_p95_seconds=0.3, scopes=4)
STORE = {"name": "store", "key": "{tenant_id}", "rate": {"limit": 2, "period_seconds": 1}}


def test_the_config_union_and_the_regimes_terms_list_the_same_regimes() -> None:
    # Each arm of the config's union has its terms in REGIMES, in the same order, and no term
    # is without an arm: a regime in one and not the other would load and be ignored, or be
    # planned and never load
    assert [term.ARM for term in regimes.REGIMES] == list(ARMS)
    assert [arm.model_fields["regime"].default for arm in ARMS] == [
        "rate",
        "max_in_flight",
        "budget",
    ]
    # and a field of a limit's table belongs to one regime alone (its tag, or one beside it)
    fields = [field for arm in ARMS for field in arm.model_fields if field != "regime"]
    assert len(fields) == len(set(fields))
    assert all(arm.tag() in arm.model_fields for arm in ARMS)


@pytest.mark.parametrize(
    ("spelled", "arms"),
    [
        (
            {"rate": {"limit": 900, "period_seconds": 60}, "cost_per_call": 5},
            (RateArm(rate=Quota(limit=900, period_seconds=60), cost_per_call=5),),
        ),
        ({"max_in_flight": 20}, (CapArm(max_in_flight=20),)),
        (
            {"budget": {"limit": 100_000, "reserve_fraction": 0.2}},
            (BudgetArm(budget=BudgetConfig(limit=100_000, reserve_fraction=0.2)),),
        ),
        (
            # several on one key: in the union's order, whatever the table's
            {
                "budget": {"limit": 600},
                "max_in_flight": 2,
                "rate": {"limit": 40, "period_seconds": 1},
            },
            (
                RateArm(rate=Quota(limit=40, period_seconds=1)),
                CapArm(max_in_flight=2),
                BudgetArm(budget=BudgetConfig(limit=600)),
            ),
        ),
    ],
)
def test_each_spelling_of_today_loads_as_its_arm(
    spelled: dict[str, Any], arms: tuple[Arm, ...]
) -> None:
    # Given a limit table as a policy file of today writes it
    limit = LimitConfig.model_validate({"name": "app", "key": "app", **spelled})
    # Then it carries the arms it spells, and reads as it did
    assert limit.regimes == arms
    assert limit.max_in_flight == spelled.get("max_in_flight")
    # and stated as arms it is the same limit, which a function's environment carries whole
    as_arms = LimitConfig.model_validate({"name": "app", "key": "app", "regimes": arms})
    assert as_arms == limit
    assert LimitConfig.model_validate_json(limit.model_dump_json()) == limit
    assert LimitConfig.model_validate_json(limit.model_dump_json(exclude_unset=True)) == limit


def _arms_spelled(table: Mapping[str, Any]) -> tuple[Arm, ...]:
    """The arms a limit table of today means, read off the table by hand."""
    arms: list[Arm] = []
    if "rate" in table:
        rate = Quota.model_validate(table["rate"])
        arms.append(RateArm(rate=rate, cost_per_call=table.get("cost_per_call", 1)))
    if "max_in_flight" in table:
        arms.append(CapArm(max_in_flight=table["max_in_flight"]))
    if "budget" in table:
        arms.append(BudgetArm(budget=BudgetConfig.model_validate(table["budget"])))
    return tuple(arms)


def _shipped_files() -> list[Path]:
    return [REPO / "sweeper.toml", *sorted((REPO / "docs" / "examples").glob("*.toml"))]


@pytest.mark.parametrize("path", _shipped_files(), ids=lambda path: path.name)
def test_every_shipped_policy_file_loads_the_limits_its_tables_spell(path: Path) -> None:
    # Given a policy file of today, read raw and loaded
    raw = tomllib.loads(path.read_text(encoding="utf-8"))["policies"]
    loaded = load_config(path).policies
    for table, policy in zip(raw, loaded, strict=True):
        tables = table.get("limits")
        if tables is None:
            # Then a [quota] + [scope] file is its one limit: the quota's rate on the scope's key
            (limit,) = policy.limits
            assert limit.regimes == (RateArm(rate=policy.quota),)
            assert limit.key == policy.scope.key_template
            continue
        # Then each [[limits]] table is the limit of its name and key, its arms those it spells
        assert [(limit.name, limit.key) for limit in policy.limits] == [
            (t["name"], t["key"]) for t in tables
        ]
        assert [limit.regimes for limit in policy.limits] == [_arms_spelled(t) for t in tables]
        # and the views of today read what the table says
        assert [(limit.max_in_flight, limit.cost_per_call) for limit in policy.limits] == [
            (t.get("max_in_flight"), t.get("cost_per_call", 1)) for t in tables
        ]
        # and the function's environment carries the same policy
        assert Policy.model_validate_json(policy.model_dump_json(exclude_unset=True)) == policy


def test_a_limit_stating_no_regime_names_each_the_union_has() -> None:
    with pytest.raises(ValidationError, match=r"needs a rate, a max_in_flight or a budget \(or"):
        LimitConfig.model_validate({"name": "a", "key": "x", "regimes": []})


def _refused(tmp_path: Path, limit_table: str) -> str:
    """The one line a policy file of one limit (`limit_table`, its lines) is refused with."""
    path = tmp_path / "sweeper.toml"
    path.write_text(f'[[policies]]\nname = "p"\n[[policies.limits]]\n{limit_table}', "utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_a_regime_stated_twice_on_one_limit_is_one_line(tmp_path: Path) -> None:
    # Given a limit with a cap spelled of today and again as an arm
    table = (
        'name = "app"\nkey = "app"\nrate = { limit = 2, period_seconds = 1 }\n'
        'max_in_flight = 3\nregimes = [{ regime = "max_in_flight", max_in_flight = 4 }]\n'
    )
    # Then the file is refused in one line naming the limit and the regime
    assert "limit 'app' states max_in_flight twice: keep one" in _refused(tmp_path, table)


def test_an_unknown_regime_names_the_known_ones(tmp_path: Path) -> None:
    table = 'name = "app"\nkey = "app"\nregimes = [{ regime = "burst", burst = 5 }]\n'
    message = _refused(tmp_path, table)
    assert "'burst'" in message
    assert "'rate', 'max_in_flight', 'budget'" in message


def test_a_cost_per_call_without_a_rate_says_what_it_needs() -> None:
    with pytest.raises(ValidationError, match=r"cost_per_call counts points of its rate: give a"):
        LimitConfig.model_validate(
            {"name": "a", "key": "x", "max_in_flight": 3, "cost_per_call": 5}
        )


# A regime the product does not have: `burst = N` allows N calls a second per key.


class _BurstArm(Arm):
    regime: Literal["burst"] = "burst"
    burst: float = Field(gt=0)


@dataclass(frozen=True, slots=True)
class _BurstTerm:
    per_second: float
    ARM: ClassVar[type[Arm]] = _BurstArm
    ITEMS: ClassVar[tuple[LimiterItem, ...]] = (LimiterItem("burst#"),)

    @classmethod
    def of(cls, limit: LimitConfig) -> Self | None:
        arm = limit.arm(_BurstArm)
        return None if arm is None else cls(arm.burst)

    def claim_per_second(self, latency_p50: float | None) -> float | None:
        return self.per_second

    def allows(self) -> str:
        return f"a burst of {self.per_second:g}"


class _BurstPlanning(RegimePlanning[_BurstTerm]):
    FIGURES: ClassVar[tuple[str, ...]] = ("burst_per_second",)

    def plan(self, mean_service: float | None) -> PlanTerm:
        figures = {"burst_per_second": self.term.per_second}
        return PlanTerm(self.term.per_second, "burst", " (burst)", figures)

    @staticmethod
    def plan_line(figures: Mapping[str, Any], mean_service: float) -> str | None:
        burst = figures.get("burst_per_second")
        return None if burst is None else f"a burst of {burst}/s"


def _use_union(union: object) -> None:
    """Rebuild the policy models on `union` as the limit's arms (as an import would)."""
    LimitConfig.__pydantic_fields__["regimes"] = FieldInfo.from_annotated_attribute(
        tuple[union, ...],  # type: ignore[valid-type]
        (),
    )
    for model in (LimitConfig, Policy, SweeperConfig):
        model.model_rebuild(force=True)


@pytest.fixture
def one_more_regime(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The three one-line diffs of a new regime: its arm in the config's union, its terms in
    # REGIMES, its planning provider in PLANNING (keyed by the arm's name)
    field = LimitConfig.__pydantic_fields__["regimes"]
    members: Any = functools.reduce(operator.or_, (*ARMS, _BurstArm))
    union: Any = Annotated[members, Field(discriminator="regime")]
    monkeypatch.setattr(limit_module, "ARMS", (*ARMS, _BurstArm))
    monkeypatch.setattr(regimes, "REGIMES", (*regimes.REGIMES, _BurstTerm))
    monkeypatch.setitem(PLANNING, "burst", _BurstPlanning)
    _use_union(union)
    yield
    LimitConfig.__pydantic_fields__["regimes"] = field
    for model in (LimitConfig, Policy, SweeperConfig):
        model.model_rebuild(force=True)


BURST_FILE = """
[[policies]]
name = "p"

[[policies.limits]]
name = "store"
key = "{tenant_id}"
rate = { limit = 2, period_seconds = 1 }

[[policies.limits]]
name = "burst"
key = "app"
rate = { limit = 40, period_seconds = 1 }
burst = 5
"""


@pytest.mark.usefixtures("one_more_regime")
def test_a_new_regime_is_its_arm_its_terms_and_one_line_in_each_union(tmp_path: Path) -> None:
    # Given a policy file whose app-wide limit states the new regime as today's regimes are
    path = tmp_path / "sweeper.toml"
    path.write_text(BURST_FILE, encoding="utf-8")
    policy = load_config(path).policies[0]
    # Then it loads as the limit's arm, as an arm too, and the function's environment keeps it
    app = policy.limits[1]
    stated: tuple[Arm, ...] = (RateArm(rate=Quota(limit=40, period_seconds=1)), _BurstArm(burst=5))
    assert app.regimes == stated
    as_arm = {**STORE, "name": "burst", "key": "app", "regimes": [{"regime": "burst", "burst": 5}]}
    assert LimitConfig.model_validate(as_arm).arm(_BurstArm) == _BurstArm(burst=5)
    assert Policy.model_validate_json(policy.model_dump_json()) == policy
    # and the claim, the console and the plan take it, none of them changed
    assert (claim_bounds(policy).policy_cap, claim_bounds(policy).policy_binding) == (2250, "burst")
    assert limits_of(policy)["limit burst"] == "40 calls per 1 s and a burst of 5 a key of app"
    plan = make_plan(policy, GIVEN)
    (limit,) = [limit for limit in plan.limits if limit["name"] == "burst"]
    assert (limit["burst_per_second"], limit["bound"], limit["ceiling_per_second"]) == (
        5.0,
        "burst",
        5.0,
    )
    lines = [line for line in render(plan.as_dict()) if "limit " in line]
    assert lines[1].startswith("  limit burst      37.72/s and a burst of 5.0/s a key (app)")
    # and a limit that does not state it shows its figure as None
    assert plan.limits[0]["burst_per_second"] is None
    # and the consumer's role is granted the items its terms name, under the limit's key
    assert "burst#burst:app" in limiter_key_patterns(policy)


def test_a_bad_value_in_an_arm_is_named_where_the_file_writes_it(tmp_path: Path) -> None:
    # Given a limit of today's spelling with a bad value in each regime
    table = (
        'name = "app"\nkey = "app"\nrate = { limit = 0, period_seconds = 1 }\n'
        "cost_per_call = 0\nmax_in_flight = 0\nbudget = { limit = 10, reserve_fraction = 1.5 }\n"
    )
    # Then each error names the field as the table writes it, not the arm it loads as
    assert _refused(tmp_path, table).split(": ", 1)[1].split("; ") == [
        "policies.0.quota.limit: Input should be greater than 0",
        "policies.0.limits.0.rate.limit: Input should be greater than 0",
        "policies.0.limits.0.cost_per_call: Input should be greater than or equal to 1",
        "policies.0.limits.0.max_in_flight: Input should be greater than or equal to 1",
        "policies.0.limits.0.budget.reserve_fraction: Input should be less than 1",
    ]


def test_an_arm_given_a_limit_takes_the_place_of_its_regimes_arm_or_stands_beside_them() -> None:
    # Given a limit of a rate of points and a cap (an operator's live rate replaces the rate)
    limit = LimitConfig.model_validate(
        {
            "name": "app",
            "key": "app",
            "rate": {"limit": 90, "period_seconds": 1},
            "cost_per_call": 3,
            "max_in_flight": 2,
        }
    )
    slower = RateArm(rate=Quota(limit=30, period_seconds=1), cost_per_call=3)
    # Then the rate is replaced in its place, the cap kept
    assert limit.with_arm(slower).regimes == (slower, CapArm(max_in_flight=2))
    # and a regime it did not state stands in the union's order
    budget = BudgetArm(budget=BudgetConfig(limit=600))
    capped = LimitConfig.model_validate({"name": "app", "key": "app", "max_in_flight": 2})
    assert capped.with_arm(budget).with_arm(slower).regimes == (
        slower,
        CapArm(max_in_flight=2),
        budget,
    )


def test_a_limit_dumps_as_a_policy_file_writes_it() -> None:
    # Given a limit of a rate of points and a cap, stated as arms
    arms = (
        RateArm(rate=Quota(limit=900, period_seconds=60), cost_per_call=5),
        CapArm(max_in_flight=9),
    )
    limit = LimitConfig.model_validate({"name": "app", "key": "app", "regimes": arms})
    # Then it dumps in today's spelling (what a function's environment and a reader of the
    # dump see), only what was set when asked so
    assert limit.model_dump(exclude_unset=True) == {
        "name": "app",
        "key": "app",
        "rate": {"limit": 900, "period_seconds": 60.0},
        "cost_per_call": 5,
        "max_in_flight": 9,
    }
    assert limit.model_dump()["learn"] is None
