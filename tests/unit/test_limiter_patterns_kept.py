"""The IAM patterns of every shipped policy file are those main synthesized before the limiter's
patterns were derived from the regimes' terms (written down here once, as main printed them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper_tools.deploy.limiter_keys import limiter_key_patterns, unconfined_limits
from sweeper_tools.policy_file import load_config

REPO = Path(__file__).resolve().parents[2]

#: (file, policy) -> the patterns its consumer's role is confined to, as main gave them.
ON_MAIN: dict[tuple[str, str], list[str]] = {
    ("sweeper.toml", "exports"): ["scope#exports:*", "closures#latest"],
    ("docs/examples/dumps.toml", "dumps"): ["scope#dumps:*", "closures#latest"],
    ("docs/examples/github-artifacts.toml", "github-artifacts"): [
        "scope#api.github.com/*",
        "scope#secondary:api.github.com/*",
        "lease#secondary:api.github.com/*",
        "closures#latest",
    ],
    ("docs/examples/helpdesk.toml", "helpdesk"): ["scope#helpdesk:*", "closures#latest"],
    ("docs/examples/listings.toml", "listings"): [
        "scope#marketplace.example.com/*",
        "scope#app:marketplace.example.com",
        "closures#latest",
    ],
    ("docs/examples/payments.toml", "payments"): ["scope#payments:*", "closures#latest"],
    ("docs/examples/plan-real-rates.toml", "one-scope"): ["scope#one-scope", "closures#latest"],
    ("docs/examples/plan-real-rates.toml", "ten-scopes"): [
        "scope#ten-scopes:*",
        "closures#latest",
    ],
    ("docs/examples/refunds.toml", "refunds"): [
        "scope#refunds.example.com/*",
        "lease#inflight:refunds.example.com/*",
        "closures#latest",
    ],
    ("docs/examples/s3-exports.toml", "s3-exports"): ["scope#s3-exports:*", "closures#latest"],
    ("docs/examples/shopify-graphql.toml", "shopify-graphql"): [
        "scope#shopify:*",
        "closures#latest",
    ],
}
FILES = [
    "sweeper.toml",
    *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs" / "examples").glob("*.toml")),
]


@pytest.mark.parametrize("name", FILES)
def test_each_shipped_policy_is_granted_the_limiter_items_main_granted(name: str) -> None:
    # Given each policy of a shipped file
    policies = load_config(REPO / name).policies
    # Then its role's patterns are main's, byte for byte, and none is unconfined
    assert {(name, p.name): limiter_key_patterns(p) for p in policies} == {
        key: patterns for key, patterns in ON_MAIN.items() if key[0] == name
    }
    assert [unconfined_limits(p) for p in policies] == [[] for _ in policies]
