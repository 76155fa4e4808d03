"""Each action kind has its deploy-time provider (sweeper_tools.deploy), keyed by its name."""

from __future__ import annotations

import pytest

from sweeper.config import KINDS, HttpActionConfig
from sweeper_tools.deploy import DEPLOY_KINDS, deploy_for
from sweeper_tools.deploy.http import HttpDeploy


def test_every_action_kind_has_its_deploy_provider() -> None:
    # Given the kinds the policy's union knows, Then each has a deploy provider, and no more
    assert set(DEPLOY_KINDS) == set(KINDS)


def test_the_provider_is_picked_by_the_actions_kind() -> None:
    # Given an http action, When its deploy provider is asked for, Then it is the http one
    # over that config
    config = HttpActionConfig(api_url="https://api.example.com")
    provider = deploy_for(config)
    assert isinstance(provider, HttpDeploy)
    assert provider.config is config


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_provider_states_its_grants_and_network_path(name: str) -> None:
    # Given each provider class, Then it is a complete deploy contract (nothing abstract left)
    assert not getattr(DEPLOY_KINDS[name], "__abstractmethods__", frozenset())
