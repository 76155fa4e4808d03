"""The local stack's own error, under the project's root error."""

from __future__ import annotations

from sweeper.errors import SweeperError


class LocalStackError(SweeperError):
    """A part of the local stack (database, AWS emulator, simulator) could not start."""
