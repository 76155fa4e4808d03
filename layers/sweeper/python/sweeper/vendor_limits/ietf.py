"""The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy` names
each quota policy (`"burst";q=100;w=60`: 100 units per 60 s, `qu` the unit when not requests)
and `RateLimit` its state now (`"burst";r=50;t=30`: 50 left, the quota resetting in 30 s).

Both are Lists of Items (`sweeper.vendor_limits.structured`); an Item's value, a String or a
Token, names the policy, and the two fields are joined by that name. A policy is kept only
with a valid `q` (RateLimit-Policy) or `r` (RateLimit); a `w` or `t` out of bounds is dropped
alone (with a diagnostic), and a `t` past its policy's `w` is read as `w`: a window turns within
its length, so a closure from a reset lasts one window at most. The partition key (`pk`) is
never kept: it may identify an account.
"""

from __future__ import annotations

from typing import Final

from sweeper.actions.answer_match import Answer
from sweeper.vendor_limits.structured import Member, Token, parse_list
from sweeper.vendor_reading import LimitReading, VendorReading, count, name, seconds

POLICY_FIELD: Final = "RateLimit-Policy"
STATE_FIELD: Final = "RateLimit"
#: The unit a quota counts when `qu` is absent.
DEFAULT_UNIT: Final = "requests"
#: A `w` or `t` that is not a whole number of seconds in bounds (a window of 0 s included):
#: left aside alone, the member's count stands.
UNREAD_TIME: Final = "a window or reset not in bounds; ignored"
#: A `t` longer than its policy's `w`: read as the window.
LONG_RESET: Final = "a reset past the window of its policy; read as the window"


def _policy_name(member: Member) -> str | None:
    item = member.item
    return name(item.text if isinstance(item, Token) else item)


def _integer(member: Member, key: str) -> object:
    value = member.params.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_ratelimit(answer: Answer) -> VendorReading:
    """The limits an answer's RateLimit-Policy and RateLimit fields state, joined by name."""
    diagnostics: list[str] = []
    policies: dict[str, LimitReading] = {}
    states: dict[str, LimitReading] = {}
    for field, into in ((POLICY_FIELD, policies), (STATE_FIELD, states)):
        text = answer.header(field)
        if text is None:
            continue
        members = parse_list(text)
        if members is None:
            diagnostics.append(f"{field}: not a list of policies within bounds; ignored")
            continue
        for member in members:
            reading = _policy(member) if into is policies else _state(member)
            if reading is None:
                diagnostics.append(f"{field}: a member without a valid name and count; ignored")
                continue
            if _dropped(member, "w" if into is policies else "t", reading):
                diagnostics.append(f"{field}: {UNREAD_TIME}")
            if reading.name not in into:  # the first statement of a name stands
                into[reading.name] = reading
    limits = []
    for policy_name in [*policies, *(n for n in states if n not in policies)]:
        policy, state = policies.get(policy_name), states.get(policy_name)
        window = policy.window_seconds if policy else None
        reset = state.reset_seconds if state else None
        if reset is not None and window is not None and reset > window:
            reset = window  # a window turns within its length: the reset says more than it can
            diagnostics.append(f"{STATE_FIELD}: {LONG_RESET}")
        limits.append(
            LimitReading(
                name=policy_name,
                quota=policy.quota if policy else None,
                window_seconds=window,
                remaining=state.remaining if state else None,
                reset_seconds=reset,
                unit=policy.unit if policy else None,
            )
        )
    return VendorReading(tuple(limits), None, tuple(diagnostics))


def _dropped(member: Member, key: str, reading: LimitReading) -> bool:
    """Whether the member states `key` (`w` or `t`) and the reading kept none of it."""
    kept = reading.window_seconds if key == "w" else reading.reset_seconds
    return key in member.params and kept is None


def _policy(member: Member) -> LimitReading | None:
    policy_name, quota = _policy_name(member), count(_integer(member, "q"))
    if policy_name is None or quota is None:
        return None
    window = seconds(_integer(member, "w"))
    unit = member.params.get("qu")
    return LimitReading(
        name=policy_name,
        quota=quota,
        window_seconds=window if window else None,  # a window of 0 s says nothing
        unit=name(unit) if isinstance(unit, str) and unit != DEFAULT_UNIT else None,
    )


def _state(member: Member) -> LimitReading | None:
    policy_name, remaining = _policy_name(member), count(_integer(member, "r"))
    if policy_name is None or remaining is None:
        return None
    return LimitReading(
        name=policy_name, remaining=remaining, reset_seconds=seconds(_integer(member, "t"))
    )


def policy_for(
    limits: tuple[LimitReading, ...],
    *,
    limit_name: str,
    policy: str | None = None,
    told_window_seconds: float | None = None,
) -> LimitReading | None:
    """Which stated policy a sweeper limit follows: the one configured (`policy`), else the one
    named as the limit, else the only one whose window is the limit's told window. None when
    none fits, or when two policies share that window (a guess could pick the wrong one)."""
    wanted = policy or limit_name
    named = next((limit for limit in limits if limit.name == wanted), None)
    if named is not None or policy is not None or told_window_seconds is None:
        return named
    same_window = [limit for limit in limits if limit.window_seconds == told_window_seconds]
    return same_window[0] if len(same_window) == 1 else None
