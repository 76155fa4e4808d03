"""Fixtures for the operator's console: the local stack as `sweeper local up` runs it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sweeper_local.background import LocalConsoleStack
from sweeper_local.scenarios import SCENARIO_CONFIG
from sweeper_tools.endpoints import write_local_file
from sweeper_tools.policy_file import load_config
from tests.conftest import PgServer

StartConsole = Callable[..., tuple[LocalConsoleStack, Path]]


@pytest.fixture
def console_config(tmp_path: Path) -> Path:
    path = tmp_path / "sweeper.toml"
    path.write_text(SCENARIO_CONFIG, encoding="utf-8")
    return path


@pytest.fixture
def start_console(db_url: str, console_config: Path, tmp_path: Path) -> Iterator[StartConsole]:
    """Start the console's local stack in this process on the test's database; returns it and
    the local file every command reads."""
    started: list[LocalConsoleStack] = []

    def start(
        tick_seconds: float | None = None, *, intake_consumers: bool = True
    ) -> tuple[LocalConsoleStack, Path]:
        stack = LocalConsoleStack(
            load_config(console_config),
            config_path=str(console_config),
            database_url=db_url,
            tick_seconds=tick_seconds,
            intake_consumers=intake_consumers,
        ).start()
        started.append(stack)
        local_file = tmp_path / "local.json"
        write_local_file(stack.local_file(), local_file)
        return stack, local_file

    yield start
    for stack in started:
        stack.stop()


@contextlib.contextmanager
def module_console(
    pg_server: PgServer, pg_template: str, tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[tuple[Path, str]]:
    """One console stack for a module's tests that change nothing (starting one takes
    seconds), on a database of its own: (its local file, the database's URL)."""
    database = f"sweeper_t{os.getpid()}_{name}"
    db_url = pg_server.create_database(database, template=pg_template)
    folder = tmp_path_factory.mktemp(name)
    config_path = folder / "sweeper.toml"
    config_path.write_text(SCENARIO_CONFIG, encoding="utf-8")
    stack = LocalConsoleStack(
        load_config(config_path), config_path=str(config_path), database_url=db_url
    ).start()
    try:
        local_file = folder / "local.json"
        write_local_file(stack.local_file(), local_file)
        yield local_file, db_url
    finally:
        stack.stop()
        pg_server.drop_database(database)
