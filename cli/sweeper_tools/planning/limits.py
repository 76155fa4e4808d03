"""The limits of a plan: what each allows at the keys busy at once, and which no load reaches.

A limit's ceiling is what one of its keys allows (its rate, headroom applied; a cap of N calls
in flight allows N / mean service time; with both, the smaller) times the keys it spans at once.
A key spans the busy scopes only when it names a field that differs between two calls of one
policy (`{tenant_id}`, `{params.account}`); a key the same for every call (a constant such as
`app`, or only `{policy}` and `{host}`) is one key however many tenants are busy. The rules of
a limit never reached are `unreachable`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.config import LimitConfig, Policy
from sweeper.config.key_template import KEY_FIELD_RE
from sweeper.errors import ConfigError
from sweeper_tools.planning.regimes import planning_of

#: Key fields that render alike for every call of one policy: a limit keyed by these alone has
#: one key per policy (an app-wide limit when its key is a constant), and a scope template
#: over these alone one scope per policy (sweeper_tools.planning.scope.single_scope).
POLICY_CONSTANT_FIELDS = frozenset({"policy", "host"})


@dataclass(frozen=True, slots=True)
class LimitCeiling:
    """The most calls per second one limit of a policy lets through at the planned keys."""

    name: str
    key: str  # the key template
    keys: int  # distinct keys busy at once
    #: Each regime's figures for one key (`LimitRegime.plan`: a rate's, a cap's; None where
    #: the limit states none).
    figures: Mapping[str, Any]
    per_key_per_second: float  # the smallest of its regimes'
    ceiling_per_second: float  # per key x keys
    bound: str  # which of the key's regimes gives its figure ("rate", "in flight")
    note: str  # said after the figure when that regime is not a rate: " (10 in flight)"

    def as_dict(self, throughput: float) -> dict[str, Any]:
        """Its figures, rounded, with the share of the ceiling the plan's throughput uses."""
        return {
            "name": self.name,
            "key": self.key,
            "keys": self.keys,
            **self.figures,
            "per_key_per_second": round(self.per_key_per_second, 3),
            "ceiling_per_second": round(self.ceiling_per_second, 2),
            "bound": self.bound,
            "used": round(throughput / self.ceiling_per_second, 3),
        }


def key_span(limit: LimitConfig) -> frozenset[str]:
    """The fields of a limit's key that may differ between two calls of one policy: none for
    an app-wide key (`app`, `{policy}`, `{host}`)."""
    return frozenset(KEY_FIELD_RE.findall(limit.key)) - POLICY_CONSTANT_FIELDS


def planned_keys(policy: Policy, scopes: int, keys: Mapping[str, int]) -> dict[str, int]:
    """Keys busy at once of each limit: one for a key the same for every call of the policy;
    else `scopes` for the first, and `keys[name]`, by default `scopes`, for the others."""
    names = [limit.name for limit in policy.limits]
    unknown = sorted(set(keys) - set(names))
    if unknown:
        raise ConfigError(
            f"keys are given for limits policy {policy.name} does not list: {unknown} (its "
            f"limits are {', '.join(names)})"
        )
    counts: dict[str, int] = {}
    for index, limit in enumerate(policy.limits):
        if limit.name in keys:
            if index == 0:
                raise ConfigError(
                    f"limit {limit.name} is the job's scope: its keys are the scopes, "
                    "give those instead"
                )
            if not key_span(limit):
                raise ConfigError(
                    f"limit {limit.name} has one key (the same for every call of the policy): "
                    "leave it out"
                )
            counts[limit.name] = keys[limit.name]
        else:
            counts[limit.name] = scopes if key_span(limit) else 1
    return counts


def limit_ceiling(limit: LimitConfig, keys: int, mean_service: float | None) -> LimitCeiling:
    """One limit's ceiling at `keys` keys: what its regimes allow one key
    (sweeper_tools.planning.regimes); a cap counts only when `mean_service` is known."""
    planned = planning_of(limit).plan(mean_service)
    per_key = math.inf if planned.per_second is None else planned.per_second
    return LimitCeiling(
        name=limit.name,
        key=limit.key,
        keys=keys,
        figures=planned.figures,
        per_key_per_second=per_key,
        ceiling_per_second=per_key * keys,
        bound=planned.bound,
        note=planned.note,
    )


#: What a policy's consumers complete at its own measured latency; None when it has none.
CapacityOf = Callable[[Policy], float | None]


def unreachable(
    policy: Policy,
    mean_service: float | None,
    capacity: float | None,
    sharing: Sequence[Policy],
    capacity_of: CapacityOf,
    said: str | None = None,
) -> list[str]:
    """The limits of `policy` no load reaches (the rules: `planning.plan.limit_warnings`); a
    concurrency cap and the consumers are judged only when the service time and capacity are
    known. `capacity_of` gives what another policy sharing a key completes. `said`: a limit
    whose consumers' shortfall the plan has said already (it binds and they cannot reach it)."""
    ones = [limit_ceiling(limit, 1, mean_service) for limit in policy.limits]
    own_keys = _limiter_keys(policy)
    others_keys = {
        key for other in sharing if other.name != policy.name for key in _limiter_keys(other)
    }
    warnings: list[str] = []
    for index, (limit, one) in enumerate(zip(policy.limits, ones, strict=True)):
        if math.isinf(one.per_key_per_second):
            continue  # a cap alone, without a service time: not judged
        holders = [
            (other, other_one)
            for other, other_one in zip(policy.limits, ones, strict=True)
            if other is not limit
            and key_span(other) <= key_span(limit)
            and other_one.per_key_per_second < one.per_key_per_second
        ]
        # A key other policies hold too takes their calls besides this policy's: not judged.
        if holders and own_keys[index] not in others_keys:
            other, other_one = min(holders, key=lambda held: held[1].per_key_per_second)
            warnings.append(
                f"limit {limit.name} of policy {policy.name} is never reached: it allows "
                f"{_allows(one)} a key, but every call under one of its keys is under one key of "
                f"limit {other.name}, which allows {_allows(other_one)}"
            )
            continue
        if index == 0 or capacity is None or limit.name == said:
            continue
        shared = _shared_capacity(policy, own_keys[index], sharing, capacity_of)
        if shared is not None and capacity + shared < one.per_key_per_second:
            sharers = "" if not shared else " with the policies that share its key"
            warnings.append(
                f"limit {limit.name} of policy {policy.name} is never reached: it allows "
                f"{_allows(one)} a key, but the consumers{sharers} complete at most "
                f"{capacity + shared:.1f} jobs/s; raise their concurrency or parallel calls "
                "(sweeper plan says how far)"
            )
    return warnings


def _allows(ceiling: LimitCeiling) -> str:
    """One key's figure: "40.0/s", or "33.3/s (10 in flight)" when its cap gives it."""
    return f"{ceiling.per_key_per_second:.1f}/s{ceiling.note}"


def _limiter_keys(policy: Policy) -> list[str]:
    """The limiter key template of each of the policy's limits, its own fields filled in: the
    scope's as the ledger keeps it, then NAME:KEY for each further limit (as the consumer's
    delivery renders them), so that two policies' alike keys are one limiter item."""
    fixed = {"policy": policy.name, "host": policy.action.scope_host}

    def fill(template: str) -> str:
        return KEY_FIELD_RE.sub(lambda match: fixed.get(match.group(1), match.group(0)), template)

    first, *further = policy.limits
    return [fill(first.key), *(f"{limit.name}:{fill(limit.key)}" for limit in further)]


def _shared_capacity(
    policy: Policy, key: str, sharing: Sequence[Policy], capacity_of: CapacityOf
) -> float | None:
    """What the other policies holding the limiter key `key` complete, at their own latency;
    None when one of them has no latency (not judged)."""
    total = 0.0
    for other in sharing:
        if other.name == policy.name or key not in _limiter_keys(other):
            continue
        capacity = capacity_of(other)
        if capacity is None:
            return None
        total += capacity
    return total
