"""The limits of a policy, as a vendor publishes them: each a name, a key template and its regimes.

A limit states one regime or several (a rate, a concurrency cap, a budget), each an arm of the
discriminated union `RegimeArm` (sweeper.config.regimes), as an action's kinds are. A policy
file writes them on the limit's table as it always has (`rate = ...`, `max_in_flight = N`,
`budget = {...}`), or as arms (`regimes = [{ regime = "rate", rate = ... }]`); both load alike.

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
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, TypeVar, Union, get_args

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from sweeper.config.base import _Strict
from sweeper.config.budget import BudgetConfig
from sweeper.config.key_template import KEY_FIELD_RE as _FIELD_RE
from sweeper.config.learn import Learn, LearnConfig, check_learn_against_limit
from sweeper.config.quota import Quota
from sweeper.config.regimes import Arm, BudgetArm, CapArm, RateArm

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


# Adding a regime: write its arm under sweeper/config/regimes/ (a subclass of Arm with its own
# `regime: Literal["name"]`) and its terms under sweeper/admission/ (REGIMES, one line there),
# then add its arm to this union, one line. A policy file spells it `name = ...` on a limit's
# table, or as an arm: `regimes = [{ regime = "name", ... }]`.
RegimeArm = Annotated[
    Union[  # noqa: UP007 (one member per line, so that adding a regime is a one-line diff)
        RateArm,
        CapArm,
        BudgetArm,
    ],
    Field(discriminator="regime"),
]

#: Each regime's arm, in the union's order (the order a limit carries them in).
ARMS: tuple[type[Arm], ...] = get_args(get_args(RegimeArm)[0]) or (get_args(RegimeArm)[0],)

A = TypeVar("A", bound=Arm)


def _arms_of_the_table(data: Any) -> Any:
    """A limit table of today (`rate = ...`, `max_in_flight = N`, `budget = {...}` and the
    fields that go with them) as the arms it states, after any it states as arms."""
    if not isinstance(data, Mapping):
        return data
    rest = dict(data)
    given = rest.pop("regimes", ())
    if not isinstance(given, list | tuple):
        return data  # not a list of arms: the field says so
    arms: list[Any] = list(given)
    for arm in ARMS:
        tag = arm.tag()
        if tag not in rest:
            continue
        fields = [field for field in arm.model_fields if field != "regime"]
        arms.append({"regime": tag, **{f: rest.pop(f) for f in fields if f in rest}})
    for arm in ARMS:
        for field in arm.model_fields:
            if field != "regime" and field in rest:
                raise ValueError(arm.orphan(str(rest.get("name")), field, rest[field]))
    return {**rest, "regimes": sorted(arms, key=_union_order)}


def as_written(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """A validation error's location in a limit's arm, as a policy file writes it on the
    limit's table: `regimes.0.rate.rate.limit` is `rate.limit`, `regimes.1.rate.cost_per_call`
    is `cost_per_call`. A location under an unknown regime's tag is left as it is."""
    tags = {arm.tag() for arm in ARMS}
    for at in range(len(loc) - 2):
        regimes, index, tag = loc[at : at + 3]
        if regimes == "regimes" and isinstance(index, int) and tag in tags:
            rest = loc[at + 3 :]
            return (*loc[:at], *(as_written(rest) if rest else (tag,)))
    return loc


def told_rate(table: Mapping[str, Any]) -> Any | None:
    """The rate a limit's table (either spelling) states, as written; None when it states
    none or is not a limit (its own validation then says why)."""
    try:
        spelled = _arms_of_the_table(table)
    except ValueError:
        return None
    for arm in spelled["regimes"]:
        if isinstance(arm, RateArm):
            return arm.rate
        if isinstance(arm, Mapping) and arm.get("regime") == RateArm.tag():
            return arm.get("rate")
    return None


def _union_order(arm: Any) -> int:
    """Where an arm (a table or a model) stands in the union; one of no known regime, last."""
    tag = arm.get("regime") if isinstance(arm, Mapping) else getattr(arm, "regime", None)
    tags = [known.tag() for known in ARMS]
    return tags.index(tag) if tag in tags else len(tags)


class LimitConfig(_Strict):
    """One limit: the regimes it states (a rate, a cap, a budget: one arm each) on every call
    whose key renders alike, as the vendor counts them."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,39}$")
    key: str = Field(min_length=1, max_length=256, description="a template, e.g. {tenant_id}")
    #: The regimes it states, one arm each, in the union's order (sweeper.config.regimes).
    regimes: tuple[RegimeArm, ...] = ()
    #: Where the vendor states this limit in its answers (sweeper.config.learn).
    learn: Learn | None = None

    if TYPE_CHECKING:
        # Today's spellings as keywords, as a policy file writes them on a limit's table: the
        # before-validator makes them arms (a new regime is stated by `regimes`, or by name in
        # a file or a dict).
        def __init__(
            self,
            *,
            name: str,
            key: str,
            regimes: tuple[RegimeArm, ...] = (),
            learn: LearnConfig | None = None,
            rate: Quota | None = None,
            max_in_flight: int | None = None,
            budget: BudgetConfig | None = None,
            cost_per_call: int = 1,
        ) -> None: ...

    @model_validator(mode="before")
    @classmethod
    def _spelled_of_today(cls, data: Any) -> Any:
        return _arms_of_the_table(data)

    @model_validator(mode="after")
    def _known_fields(self) -> Self:
        if not self.regimes:
            tags = [f"a {arm.tag()}" for arm in ARMS]
            either = f"{', '.join(tags[:-1])} or {tags[-1]}" if len(tags) > 1 else tags[0]
            raise ValueError(f"limit {self.name!r} needs {either} (or several)")
        stated = [arm.regime for arm in self.regimes]
        for tag in stated:
            if stated.count(tag) > 1:
                raise ValueError(f"limit {self.name!r} states {tag} twice: keep one")
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

    @model_serializer(mode="wrap")
    def _as_a_file_writes_it(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A limit dumps as a policy file writes it, each arm's fields on the limit's table
        (`rate = ...`, `max_in_flight = N`): what a function's environment carries, and what
        loads again as the same arms."""
        data = handler(self)
        if not isinstance(data, dict):
            return data
        for arm in data.pop("regimes", None) or ():
            data.update({field: value for field, value in arm.items() if field != "regime"})
        return data

    def arm(self, kind: type[A]) -> A | None:
        """The limit's arm of one regime (None: it does not state that regime)."""
        return next((arm for arm in self.regimes if isinstance(arm, kind)), None)

    def with_arm(self, arm: Arm) -> LimitConfig:
        """The limit with `arm` in place of its arm of the same regime, or beside its others
        when it states none (an operator's live rate, sweeper.admission.live)."""
        arms = [mine for mine in self.regimes if mine.regime != arm.regime]
        return self.model_copy(update={"regimes": tuple(sorted([*arms, arm], key=_union_order))})

    # Today's spellings, read: the views the regimes' own modules (sweeper.admission) use.

    @property
    def rate(self) -> Quota | None:
        arm = self.arm(RateArm)
        return None if arm is None else arm.rate

    @property
    def cost_per_call(self) -> int:
        """What one call costs against `rate` when the vendor counts points, not calls."""
        arm = self.arm(RateArm)
        return 1 if arm is None else arm.cost_per_call

    @property
    def max_in_flight(self) -> int | None:
        arm = self.arm(CapArm)
        return None if arm is None else arm.max_in_flight

    @property
    def budget(self) -> BudgetConfig | None:
        arm = self.arm(BudgetArm)
        return None if arm is None else arm.budget

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
