"""What the worked examples' end-to-end tests share: a local stack running an example file as
shipped, its vendor simulator, and waiting (with a deadline, never a fixed sleep) for jobs to
end."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sweeper.config import load_config
from sweeper.ledger.store import Ledger
from sweeper.models import Job, JobStatus
from sweeper_local.background import LocalConsoleStack
from sweeper_local.vendor import VendorSimulator

FINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED})
POLL_SECONDS = 0.2


@contextmanager
def example_stack(
    path: Path, database_url: str, tick_seconds: float
) -> Iterator[LocalConsoleStack]:
    """The local stack running the policy file at `path`, against its own vendor simulator."""
    stack = LocalConsoleStack(
        load_config(path),
        config_path=str(path),
        database_url=database_url,
        tick_seconds=tick_seconds,
    ).start()
    try:
        yield stack
    finally:
        stack.stop()


def simulator(stack: LocalConsoleStack) -> VendorSimulator:
    """The stack's own vendor simulator (the stack was started without `api_url`)."""
    assert stack.stack.vendor is not None
    return stack.stack.vendor


def wait_for(what: str, done: Callable[[], bool], deadline_seconds: float) -> None:
    """Poll `done` until it holds; fail naming `what` after `deadline_seconds`."""
    deadline = time.monotonic() + deadline_seconds
    while not done():
        assert time.monotonic() < deadline, f"not within {deadline_seconds} s: {what}"
        time.sleep(POLL_SECONDS)


def final_jobs(ledger: Ledger, keys: list[str]) -> dict[str, Job]:
    """The jobs of `keys` that have ended (succeeded or failed), by key."""
    jobs = {key: ledger.get(key) for key in keys}
    return {k: j for k, j in jobs.items() if j is not None and j.status in FINAL}


def all_final(ledger: Ledger, keys: list[str]) -> bool:
    """Whether every job of `keys` has ended."""
    return len(final_jobs(ledger, keys)) == len(keys)
