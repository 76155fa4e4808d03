"""`sweeper limits show` and `sweeper limits set` on the local stack, directly and through the
operator API: a live change is written, shown, recorded with its caller and reason, reverted by
`--reset`, refused above the told quota unless said, and refused for the read-only role."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sweeper.operator_api.service import serve
from sweeper_local.operator_api import OperatorApiStandIn
from tests.integration.test_operator_api import CALLER, actions, api, sweeper

__all__ = ["api"]  # the fixture, shared with the operator API's tests


def one_limit(shown: dict[str, Any]) -> dict[str, Any]:
    limits: list[dict[str, Any]] = shown["limits"]
    assert len(limits) == 1
    return limits[0]


def test_a_live_rate_is_shown_recorded_with_its_caller_and_reset_to_the_told_one(
    api: tuple[Path, Path], db_url: str
) -> None:
    # Given the local stack's policy and its one limit, as told
    _, through = api
    told = one_limit(sweeper(through, "limits", "show", api=True))
    assert told["live"] is None
    name = str(told["limit"])
    # When an operator lowers it through the API, then resets it
    sweeper(
        through,
        "limits",
        "set",
        "--limit",
        name,
        "--rate",
        "2/1s",
        "--reason",
        "vendor asked",
        api=True,
    )
    lowered = one_limit(sweeper(through, "limits", "show", api=True))
    sweeper(through, "limits", "set", "--limit", name, "--reset", "--reason", "over", api=True)
    back = one_limit(sweeper(through, "limits", "show", api=True))
    # Then the lowered rate was shown with who set it and why, and the reset took it away
    assert lowered["live"] == {
        "paused": False,
        "live_rate": "2/1s",
        "above_told": False,
        "actor": CALLER,
        "reason": "vendor asked",
        "set_at": lowered["live"]["set_at"],
    }
    assert back["live"] is None
    # And the ledger records both changes with the IAM caller and the reason
    recorded = [(a, who, r) for a, who, r in actions(db_url) if a == "limits_set"]
    assert recorded == [
        ("limits_set", CALLER, "vendor asked"),
        ("limits_set", CALLER, "over"),
    ]


def test_a_rate_above_the_told_quota_is_refused_in_one_line_unless_the_operator_says_so(
    api: tuple[Path, Path], db_url: str
) -> None:
    # Given the local stack's limit as told
    direct, _ = api
    name = str(one_limit(sweeper(direct, "limits", "show"))["limit"])
    # When an operator asks for ten thousand calls a second, then says it is meant
    args = ("limits", "set", "--limit", name, "--rate", "10000/1s", "--reason", "r")
    refused = sweeper(direct, *args, code=1)
    allowed = sweeper(direct, *args, "--above-told")
    # Then the first is refused in one line, naming the fix, and nothing was written or recorded
    assert refused.strip().count("\n") == 0
    assert "pass --above-told" in refused
    assert [a for a, _, _ in actions(db_url)].count("limits_set") == 1
    assert allowed["now"]["above_told"] is True
    # And a pause is shown as such
    sweeper(direct, "limits", "set", "--limit", name, "--pause", "--reason", "incident")
    assert one_limit(sweeper(direct, "limits", "show"))["live"]["paused"] is True


def test_the_read_only_function_refuses_a_live_change_and_serves_the_show(
    api: tuple[Path, Path], db_url: str
) -> None:
    # Given the stand-in's read-only backend
    direct, _ = api
    stand_in = OperatorApiStandIn(direct)
    read = stand_in.backends["read"]
    name = str(one_limit(sweeper(direct, "limits", "show"))["limit"])
    body = {"command": "limits-set", "limit": name, "pause": True, "reason": "x"}
    # When a read-only principal asks to pause the limit, then to see it
    refused = serve(json.dumps(body), caller=CALLER, access="read", backend=read)
    shown = serve(
        json.dumps({"command": "limits-show"}), caller=CALLER, access="read", backend=read
    )
    # Then the change is forbidden, nothing was written or recorded, and the show is served
    assert (refused.outcome, refused.status_code) == ("forbidden", 403)
    assert shown.outcome == "ok", shown.body
    assert one_limit(sweeper(direct, "limits", "show"))["live"] is None
    assert "limits_set" not in [a for a, _, _ in actions(db_url)]


def test_a_pause_keeps_the_live_rate_and_a_resume_lifts_only_the_pause(
    api: tuple[Path, Path], db_url: str
) -> None:
    # Given a limit lowered live
    direct, _ = api
    name = str(one_limit(sweeper(direct, "limits", "show"))["limit"])
    sweeper(direct, "limits", "set", "--limit", name, "--rate", "2/1s", "--reason", "slow")
    # When it is paused, then resumed
    sweeper(direct, "limits", "set", "--limit", name, "--pause", "--reason", "stop")
    paused = one_limit(sweeper(direct, "limits", "show"))["live"]
    sweeper(direct, "limits", "set", "--limit", name, "--resume", "--reason", "go")
    resumed = one_limit(sweeper(direct, "limits", "show"))["live"]
    # Then the pause kept the rate, and the resume left the rate in force, unpaused
    assert (paused["paused"], paused["live_rate"]) == (True, "2/1s")
    assert (resumed["paused"], resumed["live_rate"], resumed["reason"]) == (False, "2/1s", "go")
