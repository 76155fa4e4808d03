"""A function's policy travels in its environment (4 KB in all): only what the file set."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from infra.function import policy_json
from sweeper.config import Policy, SweeperConfig

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted(
    [
        REPO / "sweeper.toml",
        *(REPO / "docs" / "examples").glob("*.toml"),
        *(
            path
            for path in (REPO / "tests" / "infra" / "fixtures").glob("*.toml")
            if not path.name.startswith("bad_")
        ),
    ]
)


def _policies() -> list[tuple[str, Policy]]:
    found = []
    for path in CONFIGS:
        config = SweeperConfig.model_validate(tomllib.loads(path.read_text("utf-8")))
        found += [(f"{path.name}:{policy.name}", policy) for policy in config.policies]
    return found


@pytest.mark.parametrize(("name", "policy"), _policies(), ids=lambda value: str(value)[:40])
def test_the_policy_a_function_reads_is_the_policy_the_file_gave(name: str, policy: Policy) -> None:
    # Given a policy as the CDK app reads it, when a function reads it back from its environment
    text = policy_json(policy)
    # Then it is the same policy, default for default (a kind's own default quota included)
    assert Policy.model_validate_json(text) == policy, name
    # and it takes less than half of what a dump of every default would
    assert len(text) < len(policy.model_dump_json()) / 1.5, name


def test_a_quota_equal_to_the_default_but_given_survives_a_kind_with_its_own_default() -> None:
    # An s3_delete policy that names the policy-wide default quota on purpose keeps it: a dump
    # leaving out values equal to their defaults would bring back S3's 3,500/s instead.
    policy = Policy.model_validate(
        {
            "name": "p",
            "quota": {"limit": 50, "period_seconds": 1.0},
            "action": {
                "kind": "s3_delete",
                "bucket": "acme-exports",
                "key_template": "e/{object_id}",
            },
        }
    )
    assert Policy.model_validate_json(policy_json(policy)).quota.limit == 50
