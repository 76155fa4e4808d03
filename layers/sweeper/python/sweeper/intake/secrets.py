"""The webhook's signing secrets during a rotation: the current version and the previous one.

Secrets Manager keeps a rotated secret's former value under the AWSPREVIOUS stage. Accepting it
as well as AWSCURRENT lets senders move to the new secret at their own pace: both are accepted
until the next rotation (docs/runbook.md, "Rotate the webhook secret").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

PREVIOUS_STAGE = "AWSPREVIOUS"


class RotatingSecret:
    """The secret's values to accept, current first; each version cached for `max_age_seconds`.

    Two providers, because Powertools caches a value by name only (not by version stage).
    A secret never rotated has no previous version: that answer is remembered for
    `max_age_seconds` too, so a flood of requests is not a flood of Secrets Manager calls.
    """

    def __init__(
        self,
        secret_arn: str,
        max_age_seconds: int,
        current: SecretsProvider,
        previous: SecretsProvider,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._arn = secret_arn
        self._max_age = max_age_seconds
        self._current = current
        self._previous = previous
        self._clock = clock
        self._lock = threading.Lock()
        self._no_previous_until = float("-inf")

    def __call__(self) -> tuple[str, ...]:
        """Raises GetParameterError when the current version cannot be read."""
        current = str(self._current.get(self._arn, max_age=self._max_age))
        previous = self._previous_value()
        if previous is None or previous == current:
            return (current,)
        return (current, previous)

    def _previous_value(self) -> str | None:
        with self._lock:
            if self._clock() < self._no_previous_until:
                return None
        try:
            value = self._previous.get(
                self._arn, max_age=self._max_age, VersionStage=PREVIOUS_STAGE
            )
        except GetParameterError:
            # No previous version (never rotated), or it cannot be read now: the current one
            # alone is accepted until the next look.
            with self._lock:
                self._no_previous_until = self._clock() + self._max_age
            return None
        return str(value)
