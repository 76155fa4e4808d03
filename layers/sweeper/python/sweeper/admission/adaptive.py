"""An adaptive rate: a quota not known, found from the vendor's 429s (a wrapper).

A policy whose quota is `adaptive` reserves its scope's slots at the rate the limiter's item
holds (bank.py passes the spec with every reservation: the rate recovers there, AIMD, in
sweeper.adaptive_rate); each 429 says "slower": the scope's rate is cut before its gate is
closed. Everything else is the wrapped regime's.
"""

from __future__ import annotations

from dataclasses import replace

from sweeper.adaptive_rate import Adaptive
from sweeper.admission.around import Around
from sweeper.admission.base import Admission, Closure
from sweeper.admission.ticket import Ticket
from sweeper.limiter import Limiter
from sweeper.models import ActionCall, OutcomeClass


class AdaptiveRate(Around):
    """`inner`'s admission, with the scope's rate cut on each 429."""

    @classmethod
    def around(cls, inner: Admission, ticket: Ticket) -> Admission:
        """`inner` wrapped when the policy's quota is adaptive, else `inner` itself."""
        spec = ticket.policy.quota.adaptive_spec
        return inner if spec is None else cls(inner, ticket.limiter, ticket.job, spec)

    def __init__(self, inner: Admission, limiter: Limiter, job: ActionCall, spec: Adaptive) -> None:
        super().__init__(inner)
        self._limiter = limiter
        self._scope = job.scope
        self._spec = spec

    def close(
        self, outcome: OutcomeClass, retry_after_seconds: float | None, limit_value: str | None
    ) -> Closure:
        if outcome is not OutcomeClass.THROTTLED:
            return self._inner.close(outcome, retry_after_seconds, limit_value)
        rate = self._limiter.cut(self._scope, self._spec)  # the quota is being found: slower
        closure = self._inner.close(outcome, retry_after_seconds, limit_value)
        return replace(closure, rate_per_second=rate)
