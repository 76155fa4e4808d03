"""Another client of the vendor simulator spending a share of the same quota (a shared API key).

A team's own application often uses the key sweeper uses: the vendor counts both in one window
and states what remains of it to each (sweeper_local.limit_dialects). `OtherClient` spends
`share` of a quota's calls per period, evenly, in every quota scope's sliding window, as
if it had been calling at that pace for a whole period before the scope's first call (its
window is full of its calls from the start). Its calls are made when a real call arrives
(everything due by then, each at its own time, in order), so they cost no thread.

It counts what the shared-quota target asks of the simulator: its calls, those of them the
quota refused (the team's traffic sweeper took the room of), and the least any real call left
remaining of the window (what sweeper left untouched of the team's reserve).
"""

from __future__ import annotations

from collections import deque


class OtherClient:
    """Calls at `share` of the quota in every scope, and what it saw (see the module docstring)."""

    def __init__(self, share: float = 0.0) -> None:
        if not 0.0 <= share < 1.0:
            raise ValueError("other_client_share must be in [0, 1)")
        self.share = share
        self.calls = 0
        self.rejections = 0
        self.least_remaining: int | None = None
        self._next_at: dict[str, float] = {}

    def spend(
        self, scope: str, window: deque[float], limit: int, period: float, now: float
    ) -> None:
        """Add its calls due by `now` to `scope`'s window (arrival times, oldest first)."""
        if self.share <= 0:
            return
        step = period / (self.share * limit)
        at = self._next_at.get(scope, now - period + step / 2)  # mid-slot: no float edge
        while at <= now:
            while window and window[0] <= at - period:
                window.popleft()
            window.append(at)
            self.calls += 1
            if len(window) > limit:
                self.rejections += 1
            at += step
        self._next_at[scope] = at

    def called(self, remaining: int) -> None:
        """A real call was counted, leaving `remaining` of its window (below 0: over quota)."""
        if self.least_remaining is None or remaining < self.least_remaining:
            self.least_remaining = remaining
