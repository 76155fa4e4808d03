"""`sweeper plan` as a CI gate: exit 1 only for a claim the policy cannot keep, else advisories."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sweeper_cli import main
from sweeper_tools.policy_file import load_config

#: Every policy file the project ships: the deployed one and the documented examples.
SHIPPED_FILES = ["sweeper.toml", *sorted(str(p) for p in Path("docs/examples").glob("*.toml"))]
#: The vendor sweeper.toml's comments plan against, for a policy that states no latency.
STATED_VENDOR = ["--latency-p50", "0.15", "--latency-p95", "0.4"]


def _shipped_policies() -> list[tuple[str, str]]:
    return [(path, policy.name) for path in SHIPPED_FILES for policy in load_config(path).policies]


def _plan(*args: str) -> Result:
    return CliRunner().invoke(main, ["plan", *args], prog_name="sweeper")


def _lines(result: Result, label: str) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith(f"{label}: ")]


def _write(tmp_path: Path, text: str) -> str:
    config = tmp_path / "policy.toml"
    config.write_text(text, "utf-8")
    return str(config)


@pytest.mark.parametrize(("path", "policy"), _shipped_policies())
def test_every_shipped_policy_plans_without_an_error(path: str, policy: str) -> None:
    # Given a shipped policy, at its own latency or the vendor sweeper.toml states
    latency = [] if load_config(path).policy(policy).action.latency else STATED_VENDOR
    # When CI plans it
    result = _plan("--config", path, "--policy", policy, *latency)
    # Then it passes: whatever the plan notices is an advisory
    assert result.exit_code == 0, result.output
    assert _lines(result, "error") == []
    assert "warning:" not in result.output


REFUNDS = """
[[policies]]
name = "refunds"

[[policies.limits]]
name = "account"
key = "{tenant_id}"
rate = { limit = 100, period_seconds = 1 }

[[policies.limits]]
name = "inflight"
key = "{tenant_id}"
max_in_flight = 20

[policies.action]
api_url = "https://api.example.com"
latency_p50_seconds = 0.1

[policies.consumer]
reserved_concurrency = 4
max_concurrency = 4
parallel_calls = 10
timeout_seconds = 18
memory_mb = 1024
"""


def test_a_safety_cap_that_a_rate_always_binds_first_is_an_advisory(tmp_path: Path) -> None:
    # Given 100/s an account and at most 20 in flight: at 0.13 s a call the cap allows 150/s
    result = _plan("--config", _write(tmp_path, REFUNDS))
    # Then the cap is never reached, which is a fact, not a failure
    assert result.exit_code == 0, result.output
    (advisory,) = _lines(result, "advisory")
    assert "limit inflight of policy refunds is never reached" in advisory
    assert _lines(result, "error") == []


def test_the_default_consumer_timeout_is_not_judged_against_a_fast_batch(tmp_path: Path) -> None:
    # Given a fast batch that needs 18 s and a policy that leaves the timeout at its default
    body = REFUNDS.replace("timeout_seconds = 18\n", "")
    assert load_config(_write(tmp_path, body)).policies[0].consumer.timeout_seconds == 60
    result = _plan("--config", _write(tmp_path, body))
    # Then the default (there to cover slow rates too) draws no remark
    assert result.exit_code == 0, result.output
    assert not [line for line in result.output.splitlines() if "over 2x" in line]
    # But a timeout the policy sets far above the need is an advisory that says what it costs
    stated = _plan("--config", _write(tmp_path, body + "timeout_seconds = 60\n"))
    assert stated.exit_code == 0, stated.output
    assert any("over 2x the 18 s a batch needs" in line for line in _lines(stated, "advisory"))


@pytest.mark.parametrize(
    ("scope", "rate"),
    [
        ('kind = "global"', "94.3/s"),
        ('kind = "endpoint"', "94.3/s"),
        ('template = "{host}"', "94.3/s"),
        ('kind = "tenant"', "1886.0/s"),
    ],
)
def test_scopes_multiply_only_a_key_that_varies_with_the_tenant(
    tmp_path: Path, scope: str, rate: str
) -> None:
    # Given the real-rate example's one-scope policy, its scope keyed as given
    body = Path("docs/examples/plan-real-rates.toml").read_text("utf-8").split("[[policies]]")[1]
    body = "[[policies]]" + body.replace('kind = "global"', scope, 1)
    # When 20 tenants are busy
    result = _plan("--config", _write(tmp_path, body), "--scopes", "20", "--cpu-ms", "0")
    # Then only a key that names the tenant counts 20 keys; one that does not says so
    assert f"  rate             {rate} " in result.output, result.output
    said = [line for line in _lines(result, "advisory") if "20 busy scopes count one key" in line]
    assert len(said) == (rate == "94.3/s")


def test_a_first_limit_keyed_by_host_counts_one_key_whatever_the_scopes(tmp_path: Path) -> None:
    body = REFUNDS.replace('key = "{tenant_id}"', 'key = "{host}"', 1)
    result = _plan("--config", _write(tmp_path, body), "--scopes", "20")
    assert "  limit account    94.3/s a key ({host}) x 1 key = 94.3/s" in result.output


SLOW = """
[[policies]]
name = "slow"

[policies.quota]
limit = 100
period_seconds = 1

[policies.action]
api_url = "https://api.example.com"

[policies.consumer]
reserved_concurrency = 1
max_concurrency = 2
timeout_seconds = 18
"""


@pytest.mark.parametrize(
    ("consumer", "says"),
    [
        # One environment of one call at 0.5 s carries 2/s, not the 94.3/s it states
        ({}, "policy slow cannot reach its quota"),
        # 100 environments carry the rate, but a batch of 10 slots and calls needs 39 s
        (
            {"reserved_concurrency": "100", "max_concurrency": "100", "timeout_seconds": "17"},
            "is below the 39 s that covers them; raise timeout_seconds to 39",
        ),
    ],
)
def test_a_policy_that_cannot_do_what_it_claims_exits_1_with_a_one_line_reason(
    tmp_path: Path, consumer: dict[str, str], says: str
) -> None:
    body = SLOW
    for name, value in consumer.items():
        body = re.sub(rf"^{name} = \d+$", f"{name} = {value}", body, flags=re.MULTILINE)
    result = _plan("--config", _write(tmp_path, body), "--latency-p50", "0.5", "--cpu-ms", "0")
    assert result.exit_code == 1
    (error,) = _lines(result, "error")
    assert says in error
    assert "Traceback" not in result.output


def test_a_backlog_that_outlasts_the_age_the_policy_alarms_at_is_an_error(tmp_path: Path) -> None:
    # Given the shipped policy (32/s, every 5 minutes, alarmed at 30 minutes' oldest age)
    args = ["--config", "sweeper.toml", *STATED_VENDOR]
    # When a backlog drains within it, the plan passes
    assert _plan(*args, "--backlog", "40000").exit_code == 0
    # But one that leaves the oldest job past the alarm's age fails, naming the alarm
    result = _plan(*args, "--backlog", "60000")
    assert result.exit_code == 1
    (error,) = _lines(result, "error")
    assert "alarms.oldest_eligible_age_seconds (1800 s)" in error


def test_a_rate_the_policy_never_stated_is_not_a_claim() -> None:
    # Given the s3-exports example: no quota of its own, so S3's published 3,500/s a prefix
    result = _plan("--config", "docs/examples/s3-exports.toml", *STATED_VENDOR)
    # Then its consumers completing less is an advisory that says whose rate it is
    assert result.exit_code == 0, result.output
    calls, cpu = _lines(result, "advisory")
    for advisory in (calls, cpu):
        assert advisory.startswith(
            "advisory: policy s3-exports runs below its kind's published rate (s3_delete), "
            "a ceiling it does not claim (it states no quota): "
        )
    assert "its consumers complete at most 9.6 jobs/s against a rate of 3300.5/s" in calls
