"""Every operator request is dispatched by exactly one table (sweeper.operator_api.commands), and
the read-only function's allow-list (READ_COMMANDS) is exactly the commands of the reading table:
a changing command listed as a read would run for a read-only principal."""

from __future__ import annotations

from typing import Any, get_args

from sweeper.operator_api import commands
from sweeper.operator_api.requests import READ_COMMANDS, OperatorRequest


def _names(request_type: Any) -> set[str]:
    return set(get_args(request_type.model_fields["command"].annotation))


def test_each_request_type_has_exactly_one_command_table() -> None:
    union = set(get_args(get_args(OperatorRequest)[0]))
    assert set(commands._READS).isdisjoint(commands._CHANGES)
    assert set(commands._READS) | set(commands._CHANGES) == union


def test_the_read_only_allow_list_is_the_reading_table() -> None:
    reads = set().union(*map(_names, commands._READS))
    changes = set().union(*map(_names, commands._CHANGES))
    assert set(READ_COMMANDS) == reads
    assert not READ_COMMANDS & changes
