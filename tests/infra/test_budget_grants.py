"""A budget's items are granted to its policy's consumer only (sweeper.limiter.keys)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.infra.conftest import FIXTURES, Synth
from tests.infra.test_tables import _consumer_table_grants, _leading_keys, _limit_grants


def test_a_consumer_may_count_its_own_limits_budgets_and_no_other_item(
    synth_variant: Callable[[dict[str, Any]], Synth],
) -> None:
    # Given a policy whose scope has a budget per tenant, and an app-wide budget on a constant
    synth = synth_variant({"config": str(FIXTURES / "budget.toml")})
    grants = _limit_grants(_consumer_table_grants(synth, "orgs")["Limiter"])
    # Then its consumer may touch its scopes, each tenant's budget windows, and the app's (and
    # the latest closure's end, which its gate closes raise)
    assert [_leading_keys(s) for s in grants] == [
        ["scope#orgs:*", "budget#orgs:*", "budget#app:shared-app#*", "closures#latest"]
    ]
