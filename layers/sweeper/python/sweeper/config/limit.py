"""The limits of a policy, as a vendor publishes them: each a name, a key template and a rate.

A policy lists its limits (`[[limits]]`), narrowest first; one with a single limit may write
the shorthand `[quota]` + `[scope]`, which loads as the limit `quota` keyed by the scope's
template (sweeper.config.policy). The first limit's key is the job's scope (the ledger keeps
it, the producer takes turns by it, a throttle closes it), so it may use only the fields a job
has when it is scheduled; every other limit's key is rendered for each call, and may use a call's
params (`{params.NAME}`). A constant key (`"app"`) is one limiter item shared by every call, and
by every policy naming the same key: a vendor's app-wide limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import Field, model_validator

from sweeper.config.base import _Strict
from sweeper.config.budget import BudgetConfig
from sweeper.config.key_template import KEY_FIELD_RE as _FIELD_RE
from sweeper.config.learn import Learn, check_learn_against_limit
from sweeper.config.quota import Quota

#: The name of the one limit a policy written with `[quota]` and `[scope]` states: the name the
#: claim's bounds and the plan gave it before it was a limit.
SHORTHAND_LIMIT_NAME = "quota"
#: Fields every key template may use; the first limit's key may use only these.
JOB_KEY_FIELDS = frozenset({"policy", "tenant_id", "object_id", "host"})
_PARAM_RE = re.compile(r"^params\.([A-Za-z_]\w{0,63})$")


def template_fields(template: str) -> frozenset[str]:
    """The fields a key template names (`tenant_id`, `params.account`...)."""
    return frozenset(_FIELD_RE.findall(template))


#: The fields whose values are one per policy: a key over them alone is the same for every job.
POLICY_WIDE_FIELDS = frozenset({"policy", "host"})
#: ... and with the tenant's id, one per tenant.
TENANT_FIELDS = POLICY_WIDE_FIELDS | {"tenant_id"}

Reach = Literal["policy", "tenant", "call"]


def reach(template: str) -> Reach:
    """Which calls share one key of the template: all the policy's, a tenant's, or fewer."""
    fields = template_fields(template)
    if fields <= POLICY_WIDE_FIELDS:
        return "policy"
    if fields <= TENANT_FIELDS:
        return "tenant"
    return "call"


class LimitConfig(_Strict):
    """One limit: `rate` calls of every call whose key renders alike, as the vendor counts them."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,39}$")
    key: str = Field(min_length=1, max_length=256, description="a template, e.g. {tenant_id}")
    rate: Quota | None = None
    max_in_flight: int | None = Field(
        default=None, ge=1, le=1000, description="calls at the vendor at once, fleet-wide, per key"
    )
    #: Where the vendor states this limit in its answers (sweeper.config.learn).
    learn: Learn | None = None
    #: Calls per day (or another window) spread evenly, a share kept (sweeper.config.budget).
    budget: BudgetConfig | None = None
    #: What one call costs against `rate` when the vendor counts points, not calls (GitHub's
    #: secondary limit: 900 points a minute, a mutation 5): a call takes this many. A
    #: further limit's only (the first limit's cost varies by call: `learn.cost`).
    cost_per_call: int = Field(default=1, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _known_fields(self) -> Self:
        if self.rate is None and self.max_in_flight is None and self.budget is None:
            raise ValueError(
                f"limit {self.name!r} needs a rate, a max_in_flight or a budget (or several)"
            )
        for field in _FIELD_RE.findall(self.key):
            if field not in JOB_KEY_FIELDS and not _PARAM_RE.match(field):
                raise ValueError(
                    f"limit {self.name!r}: key uses unknown field {{{field}}} (known: "
                    f"{', '.join(sorted(JOB_KEY_FIELDS))}, params.NAME)"
                )
        points = self.cost_per_call
        if points > 1 and (self.rate is None or points > self.rate.limit):
            raise ValueError(
                f"limit {self.name!r}: cost_per_call counts points of its rate: give a rate of "
                f"at least {points} points"
            )
        if self.learn is not None:
            if self.rate is not None and self.rate.adaptive:
                raise ValueError(f"limit {self.name!r}: learn replaces adaptive; leave it out")
            told = None if self.rate is None else self.rate.period_seconds
            check_learn_against_limit(self.learn, self.name, told)
        return self

    @property
    def call_rate(self) -> Quota | None:
        """`rate` in calls: its points over `cost_per_call` (or over the constant a learned
        cost reserves), whole calls, at least one."""
        reserve = None if self.learn is None or self.learn.cost is None else self.learn.cost.reserve
        points = reserve if isinstance(reserve, int | float) else self.cost_per_call
        if self.rate is None or points == 1:
            return self.rate
        calls = max(1, int(self.rate.limit // points))
        return Quota.model_validate({**self.rate.model_dump(exclude_unset=True), "limit": calls})

    @property
    def uses_params(self) -> bool:
        return any(_PARAM_RE.match(field) for field in _FIELD_RE.findall(self.key))

    def render(
        self, *, policy: str, tenant_id: str, object_id: str, host: str, params: Mapping[str, Any]
    ) -> str:
        """The key template with one call's fields filled in."""
        values = {"policy": policy, "tenant_id": tenant_id, "object_id": object_id, "host": host}

        def fill(match: re.Match[str]) -> str:
            field = match.group(1)
            param = _PARAM_RE.match(field)
            if param:
                return str(params.get(param.group(1), ""))
            return values[field]

        return _FIELD_RE.sub(fill, self.key)

    def limiter_key(
        self, *, policy: str, tenant_id: str, object_id: str, host: str, params: Mapping[str, Any]
    ) -> str:
        """The limiter's key of one call (its slots, closures and leases): `NAME:RENDERED`, so
        that two limits whose templates render alike keep apart. The consumer and the
        producer's claim bounds both key a limit by this."""
        rendered = self.render(
            policy=policy, tenant_id=tenant_id, object_id=object_id, host=host, params=params
        )
        return f"{self.name}:{rendered}"
