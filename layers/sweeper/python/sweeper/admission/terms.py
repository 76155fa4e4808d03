"""What a limit's regime says outside the consumer: the producer's share, `status`, its items.

A limit (`sweeper.config.LimitConfig`) states one regime or several (a rate, a concurrency cap,
or both on one key). Beside what a consumer asks of it (`sweeper.admission.base.Admission`),
each regime answers for the code that never calls the vendor, through a `LimitTerm`: how many
calls one of its keys lets through per second for the producer's claim (`claim_per_second`),
what one key allows as `status` and the console show it (`allows`), and which limiter items
one key has (`ITEMS`: what a 429 closes, what the CDK app grants). One module per regime
implements it (rate_terms.py, cap_terms.py, budget_terms.py), each naming its config arm
(`ARM`, sweeper.config.regimes); sweeper.admission.regimes picks them from a limit, and its
callers (claim bounds, status, console) never ask which kind a limit is. What `sweeper plan`
says of a regime is its planning provider's, with the operator tools (sweeper_tools.planning).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol, Self

from sweeper.config import LimitConfig
from sweeper.config.regimes import Arm
from sweeper.limiter.keys import SCOPE_KEY_PREFIX


@dataclass(frozen=True, slots=True)
class LimiterItem:
    """A kind of limiter item one key of a limit has, by its prefix: `prefix + KEY`, and for a
    budget's, `#WINDOW` after it (sweeper.limiter.keys; the CDK app's patterns of them are
    sweeper_tools.deploy.limiter_keys')."""

    prefix: str


#: A limit's gate (`scope#KEY`), which a 429 closes; a rate's bucket is on the same item.
GATE_ITEM = LimiterItem(SCOPE_KEY_PREFIX)


class LimitTerm(Protocol):
    """One regime of one limit, as the producer and `status` see it."""

    #: The regime's config arm (sweeper.config.regimes): a member of the config's union.
    ARM: ClassVar[type[Arm]]
    #: The limiter items one key of the regime has (a rate's bucket, a cap's leases).
    ITEMS: ClassVar[tuple[LimiterItem, ...]]

    @classmethod
    def of(cls, limit: LimitConfig) -> Self | None:
        """The regime's term of `limit`, None when the limit does not state it."""
        ...

    def claim_per_second(self, latency_p50: float | None) -> float | None:
        """The calls one key lets through per second, as the claim counts them (None: the claim
        cannot tell, the consumers hold the limit alone)."""
        ...

    def allows(self) -> str:
        """What one key allows, as `status` and the console show it ("2 calls per 1 s")."""
        ...
