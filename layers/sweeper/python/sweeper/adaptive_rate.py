"""The adaptive rate: the controller of a scope whose quota is not known (`quota.adaptive`).

`Adaptive` is the controller's arithmetic alone, additive increase and multiplicative decrease
with a slow band near the last peak: the rate at a moment, and the rate after a 429. It holds no
state, does no I/O and imports nothing of sweeper: a ground-floor module, so that the policy
(`sweeper.config.quota`) builds one from a quota's settings without importing the limiter, the
consumer passes it to any limiter, and its maths is tested on its own; where the rate lives (the
scope's DynamoDB item, so that every consumer follows one value) is the DynamoDB limiter's
business (`sweeper.limiter.dynamodb`). The limiter's facade re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Adaptive:
    """The rate controller of a scope whose quota is not known (`quota.adaptive`).

    Additive increase, multiplicative decrease, in calls per second: the rate starts at `floor`,
    rises by `increase` every second while no 429 arrives, and a 429 cuts it to `cut` times what
    it was (at least `floor`), at most once per `cooldown` seconds (one overshoot brings several
    429s; they are one signal). It never exceeds `cap`. The rate lives in the scope's limiter
    item, so every consumer follows the same value.

    After a cut the rate that drew the 429 is kept as the `peak`. Climbing back, the rate rises
    at `increase` until it is within `approach_band` of the peak, then at `approach_slow` of
    that through the band, and at `increase` again past the peak (the quota may have grown).
    Plain AIMD climbs back into the same 429 every `(1 - cut) * peak / increase` seconds; the
    slow band makes each overshoot rarer and keeps the rate near the quota between them
    (the idea of TCP CUBIC's plateau, as two straight lines).
    """

    floor: float
    cap: float
    increase: float
    cut: float
    cooldown: float
    approach_band: float = 0.1
    approach_slow: float = 0.1

    def rate_at(self, rate: float, since: float, now: float, peak: float | None = None) -> float:
        """The rate at `now`, set to `rate` at `since` and raised since then (see the class)."""
        left = max(0.0, now - since)
        if peak is not None and rate < peak:
            below = peak * (1.0 - self.approach_band)
            if rate < below:  # far below the peak: the usual slope, up to the band
                spent = min(left, (below - rate) / self.increase)
                rate, left = rate + self.increase * spent, left - spent
            slow = self.increase * self.approach_slow
            spent = min(left, max(0.0, peak - rate) / slow)  # through the band, slowly
            rate, left = rate + slow * spent, left - spent
        return max(self.floor, min(self.cap, rate + self.increase * left))

    def after_cut(self, rate: float) -> float:
        """The rate after a 429 arrived while it was `rate`."""
        return max(self.floor, min(self.cap, rate * self.cut))
