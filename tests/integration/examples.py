"""What the worked examples' end-to-end tests share: a local stack running an example file as
shipped, its vendor simulator, and waiting (with a deadline, never a fixed sleep) for jobs to
end."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sweeper.actions.http import HttpActionConfig
from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.models import Job, JobStatus
from sweeper_local.background import LocalConsoleStack
from sweeper_local.vendor import VendorProcess, VendorSimulator
from sweeper_tools.policy_file import load_config
from tests.conftest import PgServer

FINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED})
POLL_SECONDS = 0.2
#: How often an example's producer ticks on the local stack.
EXAMPLE_TICK_SECONDS = 0.5


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


@contextmanager
def example_against(
    path: Path,
    vendor: VendorProcess,
    secret_values: dict[str, str],
    databases: tuple[PgServer, str, str],
) -> Iterator[LocalConsoleStack]:
    """The local stack running the policy file at `path` against `vendor`, a simulator process
    of its own, as `local up --api-url` runs it (the secrets' values given); a ledger database
    of its own (`databases`: the server, its template, the new database's name), dropped after,
    and the vendor stopped."""
    pg_server, template, name = databases
    try:
        url = pg_server.create_database(name, template=template)
        stack = LocalConsoleStack(
            load_config(path),
            config_path=str(path),
            database_url=url,
            api_url=vendor.url,
            tick_seconds=EXAMPLE_TICK_SECONDS,
            secret_values=secret_values,
        )
        try:
            stack.start()
            assert stack.stack.vendor is None  # the vendor is the process
            yield stack
        finally:
            stack.stop()
            pg_server.drop_database(name)
    finally:
        vendor.stop()


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


def tenant_secrets(policy: Policy, tenants: Iterable[str], prefix: str) -> dict[str, str]:
    """A made-up value for each tenant's secret, by its filled ARN, as SWEEPER_LOCAL_SECRETS
    gives them to `local up --api-url` (the policy's auth names a secret per tenant)."""
    action = policy.action
    assert isinstance(action, HttpActionConfig)
    template = action.effective_auth.secret_template()
    assert template is not None, "the policy's auth names one secret, not one per tenant"
    filled = {tenant: template.arn_for(tenant) for tenant in tenants}
    return {arn: f"{prefix}{tenant}" for tenant, arn in filled.items() if arn is not None}
