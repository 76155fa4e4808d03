"""How the CLI and its web console say a gate's shared quota."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def share_line(share: Mapping[str, Any]) -> str:
    """How `status` and the console say a gate's `share` (a ShareView as its dict)."""
    return (
        f"shared quota: sweeper {share['own']} ({share['own_percent']:g} %), others "
        f"{share['others']} ({share['others_percent']:g} %) of {share['quota']}, "
        f"seen {share['seen_at']}"
    )
