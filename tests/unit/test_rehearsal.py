"""A rehearsal's origin and redirect (sweeper.actions.rehearsal), and who may set one: the local
stack's environment only, never a policy file or a deployed function (issue 41, point 3)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sweeper.actions.rehearsal import Rehearsal
from sweeper.config import Policy, SweeperConfig
from sweeper.config.settings import Settings, load_settings
from sweeper.errors import ConfigError


def test_a_rehearsal_keeps_each_calls_path_and_names_its_host() -> None:
    rehearsal = Rehearsal.parse("http://127.0.0.1:8900")
    sent, original = rehearsal.redirect("https://acme.helpdesk.example/api/v2/t/7.json?x=%2F")
    assert sent == "http://127.0.0.1:8900/api/v2/t/7.json?x=%2F"
    assert original == "acme.helpdesk.example"


def test_a_port_other_than_the_schemes_is_named_with_the_host() -> None:
    rehearsal = Rehearsal.parse("https://sandbox.vendor.example/")
    sent, original = rehearsal.redirect("https://login.vendor.example:8443/oauth/token")
    assert (sent, original) == (
        "https://sandbox.vendor.example:443/oauth/token",
        "login.vendor.example:8443",
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8900/prefix",
        "http://127.0.0.1:8900?x=1",
        "http://user@127.0.0.1:8900",
        "ftp://127.0.0.1",
        "127.0.0.1:8900",
        "http://127.0.0.1:0",
        "https://{tenant_id}.vendor.example",
        "http://local host:8900",
    ],
)
def test_a_rehearsal_is_an_origin_and_nothing_more(url: str) -> None:
    with pytest.raises(ValueError, match=r"origin|port"):
        Rehearsal.parse(url)


def test_a_policy_file_cannot_name_a_rehearsal() -> None:
    action = {"kind": "http", "api_url": "https://api.vendor.example"}
    with pytest.raises(ValidationError, match="rehearsal_url"):
        SweeperConfig.model_validate(
            {"policies": [{"name": "p", "action": {**action, "rehearsal_url": "http://x:1"}}]}
        )


def test_a_deployed_function_refuses_a_rehearsal(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a deployed function's environment (a secret, no local-stack flag) told to rehearse
    monkeypatch.setenv("SWEEPER_POLICY", Policy(name="p").model_dump_json())
    monkeypatch.setenv("SWEEPER_DATABASE_SECRET_ARN", "arn:aws:secretsmanager:eu-west-1:1:secret:x")
    monkeypatch.setenv("SWEEPER_REHEARSAL_URL", "http://127.0.0.1:8900")
    monkeypatch.setenv("SWEEPER_LOCAL_STACK", "1")
    load_settings.cache_clear()
    try:
        # When its settings load at cold start, Then they refuse and name the setting
        with pytest.raises(ConfigError, match="SWEEPER_REHEARSAL_URL"):
            load_settings()
    finally:
        load_settings.cache_clear()


def test_the_local_stack_may_rehearse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEEPER_POLICY", Policy(name="p").model_dump_json())
    monkeypatch.setenv("SWEEPER_DATABASE_URL", "postgresql://x@localhost/db")
    monkeypatch.setenv("SWEEPER_REHEARSAL_URL", "http://127.0.0.1:8900")
    with pytest.raises(ValueError, match="SWEEPER_REHEARSAL_URL"):
        Settings()
    monkeypatch.setenv("SWEEPER_LOCAL_STACK", "1")
    assert Settings().rehearsal == Rehearsal("http", "127.0.0.1", 8900)
