"""The vendor's bearer token, read per call through the Powertools parameters cache.

A call asks for the token each time: within `max_age` the cache answers without a network call,
so a rotated or revoked token reaches a warm environment within `max_age`. An AUTH answer may
mean the token was rotated since it was cached: the action then reads it once past the cache
(`refresh`) before the answer counts as AUTH (sweeper.actions.http_action).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from sweeper.errors import TokenError


class TokenSource(Protocol):
    def current(self) -> str | None:
        """The token to send now; raises TokenError when it cannot be had."""
        ...

    def refresh(self, sent: str | None) -> bool:
        """Read the token past any cache; True when it now differs from `sent`."""
        ...


class SecretReader(Protocol):
    """Powertools' SecretsProvider, as SecretToken reads it (or a per-tenant reader over it)."""

    def get(self, name: str, *, max_age: int = ..., force_fetch: bool = ...) -> Any: ...


def checked(token: str) -> str:
    """`token`, if it can travel in a header; TokenError otherwise (the value is not echoed)."""
    if not token or "\r" in token or "\n" in token:
        raise TokenError("token_invalid", "the bearer token must be one non-empty line")
    return token


class FixedToken:
    """A token given once (tests, the local stack): never changes."""

    def __init__(self, token: str) -> None:
        self._token = checked(token)

    def current(self) -> str:
        return self._token

    def refresh(self, sent: str | None) -> bool:
        return False


class SecretToken:
    """The SecretString of a Secrets Manager secret, cached by `provider` for `max_age_seconds`.

    `parse` checks the value and gives what is sent (by default: a token of one line); it
    raises TokenError for a value that cannot be used, and never echoes it.
    """

    def __init__(
        self,
        secret_arn: str,
        max_age_seconds: int,
        provider: SecretReader,
        *,
        parse: Callable[[str], str] = checked,
    ) -> None:
        self._arn = secret_arn
        self._max_age = max_age_seconds
        self._provider = provider
        self._parse = parse
        # One re-read at a time: the batch's other threads that got the same AUTH answer find
        # the token already changed, and do not read it again.
        self._refreshing = threading.Lock()

    def current(self) -> str:
        return self._read(force=False)

    def refresh(self, sent: str | None) -> bool:
        with self._refreshing:
            if self._read(force=False) != sent:
                return True  # already re-read (another thread, or the cache expired)
            return self._read(force=True) != sent

    def _read(self, *, force: bool) -> str:
        try:
            value = self._provider.get(self._arn, max_age=self._max_age, force_fetch=force)
        except GetParameterError as exc:
            raise TokenError("token_unavailable", "the API token secret cannot be read") from exc
        return self._parse(str(value))
