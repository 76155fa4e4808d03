"""The limiter keys a consumer writes always match the patterns its role is confined to, and a
policy's confined patterns match no other policy's keys (sweeper_tools.deploy.limiter_keys)."""

from __future__ import annotations

import random
import re
import time
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweeper.admission import Clocks, admission_for
from sweeper.admission.budget import budget_rule
from sweeper.config import Policy, SweeperConfig
from sweeper.limiter import Grant, Reason, ScopeState
from sweeper.limiter.dynamodb import DynamoLimiter
from sweeper.limiter.items import scope_key
from sweeper.limiter.leases import LeaseCap
from sweeper.models import ActionCall, NewJob, OutcomeClass
from sweeper.scheduling import scope_for
from sweeper_tools.deploy.limiter_keys import key_pattern, limiter_key_patterns, unconfined_limits
from tests.calls import action_call


def _limit(name: str, key: str, **kind: object) -> dict[str, object]:
    return {"name": name, "key": key, **kind}


RATE = {"rate": {"limit": 2, "period_seconds": 1}}
BUDGET = {"limit": 1000, "period_seconds": 60}
#: listings: a scope per store under its name, a call's seller under the API's host, a constant
#: (IAM's wildcards in it) capped, the store and the constant each with a budget, and a cap per
#: seller; a 429 may name the store, the constant and the seller's cap (not the seller's rate);
#: listings-eu: the endpoint's one scope; listings-us: the policy's one scope (`{policy}`), a
#: name that begins with another policy's; refunds: a store's rate, its day's budget (a 429
#: may name it) and a cap per store that no 429 names.
POLICIES = {
    "policies": [
        {
            "name": "listings",
            "limits": [
                _limit("store", "{policy}:{tenant_id}", **RATE, budget=BUDGET),
                _limit("seller", "{host}/{params.seller}", **RATE),
                _limit("app", "app*?$", max_in_flight=4, budget=BUDGET),
                _limit("sellers", "{params.seller}", max_in_flight=2),
            ],
            "action": {
                "api_url": "https://api.example.com",
                "limit_header": "X-RateLimit-Scope",
                "limit_header_values": {
                    "shop": "store",
                    "concurrency": "app",
                    "seller-concurrency": "sellers",
                },
            },
        },
        {
            "name": "listings-eu",
            "scope": {"kind": "endpoint"},
            "action": {"api_url": "https://eu.example.com"},
        },
        {"name": "listings-us", "action": {"api_url": "https://api.example.com"}},
        {
            "name": "refunds",
            "limits": [
                _limit("store", "{policy}:{tenant_id}", **RATE),
                _limit("day", "{policy}:{tenant_id}", budget=BUDGET),
                _limit("stores", "{policy}:{tenant_id}", max_in_flight=3),
            ],
            "action": {
                "api_url": "https://api.example.com",
                "limit_header": "X-RateLimit-Scope",
                "limit_header_values": {"daily": "day"},
            },
        },
    ]
}

ids = st.text(min_size=1, max_size=40)


def string_like(pattern: str) -> re.Pattern[str]:
    """IAM's StringLike: `*` any run, `?` one character, `${*}` `${?}` `${$}` themselves."""
    parts = re.split(r"(\$\{[*?$]\}|\*|\?)", pattern)
    wild = {"*": ".*", "?": "."}
    return re.compile(
        "".join(wild.get(p) or re.escape(p[2] if p.startswith("${") else p) for p in parts),
        re.DOTALL,
    )


class _Sink:
    def add_metric(self, name: str, unit: str, value: float) -> None:
        return None


class _Closing:
    """A limiter that records the gates a 429 closes and the wider limits it notes a 429 on
    (every wider rate implicated: the most a bare 429 closes)."""

    def __init__(self) -> None:
        self.written: list[str] = []

    def reserve(self, scope: str, *args: object, **kwargs: object) -> Grant:
        raise AssertionError("no call is admitted here")

    def close(self, scope: str, until: float, reason: Reason) -> float:
        self.written.append(scope)
        return until

    def cut(self, scope: str, adaptive: object) -> float:
        raise AssertionError("no adaptive rate here")

    def state(self, scope: str) -> ScopeState:
        return ScopeState(scope, None, None, None, None)

    def note_throttle(self, scope: str, source: str, within: float) -> bool:
        self.written.append(scope)
        return True

    def budgets(self) -> object:
        return object()  # a budget's units are not taken here


def closed_keys(policy: Policy, job: ActionCall) -> list[str]:
    """The limiter keys a 429 on the call closes, by the consumer's close path: each value of
    the limit header the policy maps, and none (a bare 429)."""
    limiter = _Closing()
    clocks = Clocks(lambda _: None, time.time, time.monotonic, random.Random(0), _Sink())
    batch = admission_for(policy, limiter, clocks, 1, {job.scope: 1})
    for value in [*policy.action.limit_values, None]:
        batch.call(job, {}).close(OutcomeClass.THROTTLED, 5.0, value)
    return limiter.written


def written_keys(policy: Policy, tenant_id: str, object_id: str, seller: str) -> list[str]:
    """Every limiter item key the consumer's call writes, as the limiter builds it: its
    reservations, leases and budget units, and the gates a 429 closes."""
    job = NewJob(tenant_id=tenant_id, object_id=object_id, due_at=datetime.now(UTC))
    scope = scope_for(policy, job)
    call = action_call(policy.name, tenant_id, object_id, seller=seller)
    call = call.model_copy(update={"scope": scope})
    keys = [scope_key(key)["pk"]["S"] for key in closed_keys(policy, call)]
    keys.append(scope_key(scope)["pk"]["S"])
    for index, limit in enumerate(policy.limits):
        key = scope
        if index:
            key = limit.limiter_key(
                policy=policy.name,
                tenant_id=tenant_id,
                object_id=object_id,
                host=policy.action.scope_host,
                params={"seller": seller},
            )
        if index and limit.rate is not None:
            keys.append(scope_key(key)["pk"]["S"])
        if limit.max_in_flight is not None:
            keys.append(LeaseCap._key(key)["pk"]["S"])
        rule = budget_rule(limit)
        if rule is not None:
            keys.append(rule.item_key(key, time.time()))
    return keys


@pytest.fixture(scope="module")
def policies() -> list[Policy]:
    return list(SweeperConfig.model_validate(POLICIES).policies)


@given(tenant_id=ids, object_id=ids, seller=ids)
def test_every_key_a_consumer_writes_matches_its_own_patterns_only(
    policies: list[Policy], tenant_id: str, object_id: str, seller: str
) -> None:
    patterns = {p.name: [string_like(x) for x in limiter_key_patterns(p)] for p in policies}
    for policy in policies:
        for key in written_keys(policy, tenant_id, object_id, seller):
            assert any(p.fullmatch(key) for p in patterns[policy.name]), key
            for other in policies:
                if other is not policy:
                    assert not any(p.fullmatch(key) for p in patterns[other.name]), key


def test_the_patterns_name_each_limit_by_its_policy_wide_prefix(policies: list[Policy]) -> None:
    listings, eu, us, refunds = policies
    assert limiter_key_patterns(listings) == [
        "scope#listings:*",  # a bucket per store, under the policy's name
        "budget#listings:*",  # its budget's items, one per store and window
        "scope#seller:api.example.com/*",  # the host filled in, the seller a call's
        "scope#app:app${*}${?}${$}",  # a constant key, shared by design: as it is, escaped;
        "lease#app:app${*}${?}${$}",  # its gate (a 429 names it), its leases
        "budget#app:app${*}${?}${$}#*",  # and its budget's windows
        "scope#sellers:*",  # a seller's cap a 429 names: its gate, its leases
        "lease#sellers:*",
        "closures#latest",  # the latest closure's end, one item every gate close raises
    ]
    # the endpoint's own, and the policy's one, exactly
    assert limiter_key_patterns(eu) == ["scope#eu.example.com", "closures#latest"]
    assert limiter_key_patterns(us) == ["scope#listings-us", "closures#latest"]
    assert limiter_key_patterns(refunds) == [
        "scope#refunds:*",
        "scope#day:refunds:*",  # a day's budget a 429 names: its gate, its windows
        "budget#day:refunds:*",
        "lease#stores:refunds:*",  # a cap no 429 names: its leases, no gate
        "closures#latest",
    ]
    assert unconfined_limits(listings) == unconfined_limits(eu) == unconfined_limits(us) == []


def test_a_scope_beginning_with_a_per_call_field_is_named_unconfined(
    policies: list[Policy],
) -> None:
    listings = policies[0]
    tenant_scoped = listings.model_copy(
        update={"scope": listings.scope.model_copy(update={"template": "{tenant_id}/x"})}
    )
    assert key_pattern("scope#", "{tenant_id}/x", tenant_scoped) == "scope#*"
    assert unconfined_limits(tenant_scoped) == ["{tenant_id}/x"]


class _UpdatedKeys:
    """A DynamoDB client that accepts every update and notes the key it names."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def update_item(self, **request: object) -> dict[str, object]:
        key = request["Key"]
        assert isinstance(key, dict)
        self.keys.append(key["pk"]["S"])
        return {}


@given(tenant_id=ids, object_id=ids, seller=ids)
def test_every_key_a_gate_close_writes_is_granted_the_latest_closure_included(
    policies: list[Policy], tenant_id: str, object_id: str, seller: str
) -> None:
    # Given each policy's consumer limiter, and the keys a 429 on a call closes
    for policy in policies:
        job = NewJob(tenant_id=tenant_id, object_id=object_id, due_at=datetime.now(UTC))
        call = action_call(policy.name, tenant_id, object_id, seller=seller)
        call = call.model_copy(update={"scope": scope_for(policy, job)})
        client = _UpdatedKeys()
        limiter = DynamoLimiter(client, "limiter")  # type: ignore[arg-type]
        # When the limiter closes each of their gates
        for key in closed_keys(policy, call):
            limiter.close(key, time.time() + 5, "throttled")
        # Then it raised the latest closure's marker, and wrote only keys its role is granted
        granted = [string_like(x) for x in limiter_key_patterns(policy)]
        assert "closures#latest" in client.keys
        for key in client.keys:
            assert any(p.fullmatch(key) for p in granted), key
