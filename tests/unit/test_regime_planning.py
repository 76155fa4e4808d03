"""Each limit regime has its planning provider (sweeper_tools.planning.regimes), keyed by its
config arm's name, and `sweeper plan` asks it without asking which kind a limit is."""

from __future__ import annotations

import pytest

from sweeper.admission.rate_terms import RateTerm
from sweeper.admission.regimes import REGIMES
from sweeper.config import LimitConfig
from sweeper.config.limit import ARMS
from sweeper_tools.planning.regimes import PLANNING, planning_for, planning_of
from sweeper_tools.planning.regimes.rate import RatePlanning
from tests.unit.test_limit_regimes import APP_RATE_AND_CAP


def test_every_regime_arm_has_its_planning_provider_in_the_unions_order() -> None:
    # Given the arms the config's union knows, Then each has a planning provider, and no more,
    # in the order a plan shows their figures
    assert list(PLANNING) == [arm.tag() for arm in ARMS]
    # and each regime's terms name an arm that has one
    assert [term.ARM.tag() for term in REGIMES] == list(PLANNING)


@pytest.mark.parametrize("name", sorted(PLANNING))
def test_each_provider_is_a_complete_planning_contract(name: str) -> None:
    # Given each provider class, Then nothing abstract is left, it names its figures and the
    # plan's name for it when it binds (which its looks are priced by), its own
    assert not getattr(PLANNING[name], "__abstractmethods__", frozenset())
    assert PLANNING[name].FIGURES
    assert PLANNING[name].BINDS
    assert len({kind.BINDS for kind in PLANNING.values()}) == len(PLANNING)


def test_the_provider_is_picked_by_its_terms_arm() -> None:
    # Given a limit with a rate and a cap (40/s, 2 in flight), When its planning is asked for
    limit = LimitConfig.model_validate(APP_RATE_AND_CAP)
    planning = planning_of(limit)
    # Then each of its terms is planned by its arm's provider, over that term, in their order
    assert [type(term).__name__ for term in planning.terms] == ["RatePlanning", "CapPlanning"]
    (rate, _) = planning.terms
    assert isinstance(rate, RatePlanning)
    assert rate.term == RateTerm.of(limit)
    assert isinstance(planning_for(rate.term), RatePlanning)
