"""Pause and resume a policy: the ledger's flag, and on AWS the consumer's event source."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sweeper.ledger.store import Ledger
from sweeper.pause_switch import EventSourceSwitch


@dataclass(frozen=True, slots=True)
class PauseResult:
    policy: str
    paused: bool
    changed: bool  # False when it already was in that state
    event_source_mappings: list[str]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pause_policy(
    policy: str,
    ledger: Ledger,
    switch: EventSourceSwitch | None,
    *,
    actor: str,
    reason: str | None,
    now: datetime,
) -> PauseResult:
    """Pause: the producer skips (and records the skipped runs), consumers stop, messages stay.

    The ledger flag is set first, so no new work is released while the consumers are stopped;
    on AWS `switch` disables the consumer's event source mapping, locally the stack polls the flag.
    """
    changed = ledger.pause(policy, actor, reason, now)
    mappings = switch.set_enabled(False) if switch is not None else []
    return PauseResult(policy, True, changed, mappings)


def resume_policy(
    policy: str,
    ledger: Ledger,
    switch: EventSourceSwitch | None,
    *,
    actor: str,
    reason: str | None,
    now: datetime,
) -> PauseResult:
    """Resume: consumers first (queued work drains), then the producer's flag."""
    mappings = switch.set_enabled(True) if switch is not None else []
    changed = ledger.resume(policy, actor, reason, now)
    return PauseResult(policy, False, changed, mappings)
