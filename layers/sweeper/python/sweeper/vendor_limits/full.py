"""Whether a vendor's `remaining = 0` is its window full at sweeper's own pace, or over it.

An answer whose window holds exactly the quota says `remaining = 0` (the call it answers was
admitted) and a reset rounded up to whole seconds (the IETF fields, GitHub's epoch). Closing the
gate until that reset each time costs up to a second where the next slot was milliseconds away,
and the calls bunched after the reopening fill the window again. Whether the next call is
refused depends on whose calls fill the window, which sweeper's own pace predicts:

- The pace a learned limit holds is the stated one times the rate's headroom `h`, and `h` is
  what keeps calls at that pace, each arriving up to the arrival budget `a` after its slot,
  within the quota in any window: `h = W / (W + a)` (sweeper.config.quota `safe_headroom`). So
  sweeper's own calls at a held rate `r` put at most `r x W / h + 1` calls in a window of `W`
  (a span of length L holds floor(L x r) + 1 slots): the quota itself, at the pace held. A window
  they fill is full, not over: the next slot comes an interval after the last, once a call of
  the same pace has left the window.
- The window is over when the vendor counts more than that (others spend the quota too), or
  when the rate held is above this answer's pace (it lowers the limit: the window holds calls
  sent at the faster pace), or when nothing predicts sweeper's spend (no rate held yet, no
  quota stated). Then the gate closes until the stated reset, as before.
"""

from __future__ import annotations

from sweeper.vendor_reading import LimitReading


def window_over(
    reading: LimitReading,
    *,
    held_per_second: float | None,
    stated_per_second: float | None,
    headroom: float,
    window_seconds: float,
    within: float = 0.0,
) -> bool:
    """Whether `reading` says the window is spent beyond sweeper's own pace: close the gate until
    its reset (see the module docstring). `held_per_second` is the rate held before this answer
    (headroom applied), `stated_per_second` this answer's pace before the headroom, `within` the
    share of a rate within which a stated one is the rate held (learned.py's HOLD_WITHIN)."""
    if reading.remaining != 0 or not reading.reset_seconds:
        return False  # something remains, or no reset to wait for: nothing says it is spent
    used = reading.used
    if used is None or held_per_second is None or stated_per_second is None or headroom <= 0:
        return True
    if held_per_second > stated_per_second * headroom * (1 + within):
        return True  # a lowering: the window holds calls sent at the faster pace
    own_most = held_per_second * window_seconds / headroom + 1
    return used > own_most


__all__ = ["window_over"]
