"""A call's cost in units of its scope's rate: reserved with its slot, corrected by its answer.

A learned limit that counts costs (`learn.cost`, sweeper.config.learn) paces its scope in cost
units (points), as the vendor's bucket does. Shopify's rule is the model: a call runs only when
the bucket holds its requested cost, is charged its actual cost, and the difference is
returned. So a call reserves its expected cost (`reserve`: the requested cost when the user
states it) in the same write as its slot (`slot_units`: the slot weighs that many units,
sweeper.limiter.gcra), and its answer's actual cost corrects the reservation in both
directions (`correction`): lower gives the difference back on the scope's shared item (every
consumer's next slot moves that much earlier), higher takes the rest. A reservation at the
requested cost thus never moves later after the fact: a record that found its slot within
the throttle's wait keeps it, and no wait need cover the costs of the calls in flight.

A cost taken from a job's param (`"{params.NAME}"`) differs per record, while a batch's slots
are reserved in blocks: its slots weigh one unit and the rest is taken when the call is
admitted, as the answer's excess is.
"""

from __future__ import annotations

import math

from sweeper.adaptive_rate import Adaptive
from sweeper.admission.ticket import Ticket
from sweeper.config import Policy
from sweeper.config.learn import CostConfig

#: How far ahead the units a call's cost takes beyond its slot may lie (seconds): they are
#: spent, not waited for; a gate closed refuses them.
COST_HORIZON_SECONDS = 3600.0


def cost_of(policy: Policy) -> CostConfig | None:
    """The cost the policy's scope counts (its first limit's `learn.cost`), if any."""
    first = policy.limits[0] if policy.limits else None
    learn = None if first is None else first.learn
    return None if learn is None else learn.cost


def slot_units(policy: Policy) -> int:
    """The units a call's slot of the scope weighs: its constant expected cost, rounded up; 1
    for a scope counting no cost or a cost per job (a param)."""
    cost = cost_of(policy)
    if cost is None or isinstance(cost.reserve, str):
        return 1
    return max(1, math.ceil(cost.reserve))


def correction(reserved: int, actual: float | None) -> int:
    """The units to take (positive) or give back (negative) once the answer states the call's
    actual cost; 0 when it states none (a throttled call's: its gate says the rest)."""
    return 0 if actual is None else math.ceil(actual) - reserved


def next_cost(expected: int, requested: float | None) -> float:
    """The cost the bucket must hold for the scope's next call: the vendor's requested cost
    when its answer states it (Shopify runs a call only with that much available), else the
    expected one."""
    return float(expected) if requested is None else max(float(expected), requested)


def correct(ticket: Ticket, units: int, spec: Adaptive | None) -> None:
    """Take `units` more of the scope's rate (positive: unused slots), or give back as many
    (negative: the scope's next slot moves earlier for every consumer); `spec` is the rate
    the scope is reserved at (the learned one)."""
    if units == 0:
        return
    scope = ticket.job.scope
    quota = ticket.policy.quota
    if units > 0:
        ticket.limiter.reserve(scope, quota.interval_seconds, COST_HORIZON_SECONDS, units, spec)
        return
    costs = ticket.abilities.costs
    if costs is not None:
        costs.refund(scope, -units, quota.interval_seconds, spec)
