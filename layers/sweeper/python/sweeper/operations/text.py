"""How the console's views write the ledger's values: a time as ISO 8601 text, or None."""

from __future__ import annotations

from datetime import datetime


def iso(value: datetime | None) -> str | None:
    """`value` as ISO 8601 text; None stays None."""
    return None if value is None else value.isoformat()
