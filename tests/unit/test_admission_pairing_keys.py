"""Which wide limits are paired: a key the same for every call of the policy, constant or not.

`{host}` (api_url's host) and `{policy}` are one per policy, so a wide limit keyed by them is one
item, as a constant key is: docs/examples/listings.toml's app limit (`{host}`) is reserved with
its store's in one write on that item (pairing.py), not one limit at a time (composed.py).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sweeper.admission import Clocks, admission_for
from sweeper.admission.pairing import PairedLimits
from sweeper.config import LimitConfig, Policy
from sweeper.limiter import ScopeState
from sweeper_tools.policy_file import load_config

LISTINGS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "listings.toml"


class _PairedLimiter:
    """A limiter that can reserve two rates on the wide limit's item (nothing is called)."""

    def reserve_paired(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not called here")

    def close_narrow(self, wide: str, key: str, until: float) -> None:
        raise AssertionError("not called here")

    def paired_states(self, wide: str, keys: Sequence[str]) -> dict[str, ScopeState]:
        raise AssertionError("not called here")


class _Sink:
    def add_metric(self, name: str, unit: str, value: float) -> None:
        return None


def _listings() -> Policy:
    return load_config(LISTINGS).policy("listings")


def _with_app_key(key: str) -> Policy:
    policy = _listings()
    store, app = policy.limits
    limits = [store, LimitConfig(name="app", key=key, rate=app.rate)]
    return policy.model_copy(update={"limits": limits})


def _wide_key_of_a_call(policy: Policy) -> str:
    """The limiter key a call of the policy holds in its wide limit (as a ticket renders it)."""
    return policy.further_limits[0].limiter_key(
        policy=policy.name,
        tenant_id="store-7",
        object_id="listing-1",
        host=policy.action.scope_host,
        params={},
    )


def test_the_listings_examples_app_limit_keyed_by_host_is_paired_on_its_one_item() -> None:
    # Given the shipped listings example: 2/s per `{host}/{tenant_id}` under 40/s per `{host}`
    policy = _listings()
    # When its batch asks whether the two limits can be reserved together
    paired = PairedLimits.of(policy, _PairedLimiter())
    # Then they are, on the item every call's app limit renders to
    assert paired is not None
    assert paired.wide == _wide_key_of_a_call(policy)
    assert paired.wide == "app:marketplace.example.com"


@pytest.mark.parametrize("key", ["{policy}", "app", "{host}:{policy}"])
def test_a_wide_key_over_policy_wide_fields_only_is_paired_as_rendered(key: str) -> None:
    policy = _with_app_key(key)
    paired = PairedLimits.of(policy, _PairedLimiter())
    assert paired is not None
    assert paired.wide == _wide_key_of_a_call(policy)


@pytest.mark.parametrize("key", ["{host}/{tenant_id}", "{params.account}", "{object_id}"])
def test_a_wide_key_that_differs_between_calls_is_not_paired(key: str) -> None:
    assert PairedLimits.of(_with_app_key(key), _PairedLimiter()) is None


def test_a_listings_batch_reserves_on_the_paired_bank_not_one_limit_at_a_time() -> None:
    # Given a batch of the listings example on a limiter that can pair
    clocks = Clocks(lambda _: None, lambda: 0.0, lambda: 0.0, random.Random(0), _Sink())
    limiter: Any = _PairedLimiter()
    # When its admission is built
    batch = admission_for(_listings(), limiter, clocks, 4, {"marketplace.example.com/s": 1})
    # Then its slots are both limits' slots, each block one write on the app's item
    assert batch.slots.paired is not None
    assert batch.slots.paired.wide == "app:marketplace.example.com"
