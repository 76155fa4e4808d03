"""What every part of the local stack is: something started, used, and stopped."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Service:
    """`with part:` starts it and always stops it; subclasses implement start() and stop()."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
