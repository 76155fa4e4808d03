"""What every regime's config arm is: a strict model tagged by `regime`, one member of the union.

A limit (sweeper.config.limit) carries the arms it states, at most one of each regime. An arm's
tag is also how a policy file of today spells it on the limit's table (`rate = ...`,
`max_in_flight = N`, `budget = {...}`): the field named as the tag holds its value, and any
other field of the arm (`cost_per_call`) sits beside it on the table.
"""

from __future__ import annotations

from typing import ClassVar

from sweeper.config.base import _Strict


class Arm(_Strict):
    """One regime's config on one limit; a subclass sets `regime: Literal["NAME"] = "NAME"`."""

    regime: str

    @classmethod
    def tag(cls) -> str:
        """The regime's name: what a policy file writes on a limit's table for it."""
        default = cls.model_fields["regime"].default
        assert isinstance(default, str)  # each arm's `regime` is a Literal with its default
        return default

    #: Fields an arm's table may carry only beside its tag; the arm says what each one needs.
    ORPHAN_HINTS: ClassVar[dict[str, str]] = {}

    @classmethod
    def orphan(cls, limit_name: str, field: str, value: object) -> str:
        """The one line refusing `field` on a limit that does not state this regime."""
        hint = cls.ORPHAN_HINTS.get(field)
        if hint is not None:
            return f"limit {limit_name!r}: {hint.format(value=value)}"
        return (
            f"limit {limit_name!r}: {field} is part of a {cls.tag()}: give the limit a {cls.tag()}"
        )
