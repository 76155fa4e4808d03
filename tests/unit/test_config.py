"""The one configuration model: policies, quotas and the environment."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from sweeper.config import ConsumerConfig, HttpActionConfig, Policy, Quota, Settings
from sweeper.errors import ConfigError
from sweeper_tools.policy_file import load_config

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "limit", "seconds"),
    [("40/1s", 40, 1.0), ("600/m", 600, 60.0), ("5/500ms", 5, 0.5), ("100/1h", 100, 3600.0)],
)
def test_a_rate_parses_as_limit_per_period(text: str, limit: int, seconds: float) -> None:
    quota = Quota.parse(text)
    assert (quota.limit, quota.period_seconds) == (limit, seconds)


@pytest.mark.parametrize("text", ["40", "0/1s", "x/1s", "40/1y", ""])
def test_a_bad_rate_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError):
        Quota.parse(text)


def test_max_concurrency_above_reserved_is_refused() -> None:
    with pytest.raises(ValueError, match="max_concurrency must not exceed"):
        ConsumerConfig(reserved_concurrency=2, max_concurrency=3)


def test_one_environment_pairs_reserved_one_with_the_event_sources_floor() -> None:
    # Lambda refuses an SQS event source maximum below 2, so one environment is reserved 1
    consumer = ConsumerConfig(reserved_concurrency=1, max_concurrency=2)
    assert consumer.single_environment
    assert consumer.environments == 1


@pytest.mark.parametrize(("reserved", "maximum"), [(1, 3), (2, 3), (3, 4)])
def test_only_reserved_one_may_sit_below_the_event_sources_maximum(
    reserved: int, maximum: int
) -> None:
    with pytest.raises(ValueError, match="the one exception: reserved_concurrency = 1"):
        ConsumerConfig(reserved_concurrency=reserved, max_concurrency=maximum)


def test_environments_is_the_lower_cap() -> None:
    assert ConsumerConfig(reserved_concurrency=6, max_concurrency=4).environments == 4
    assert not ConsumerConfig(reserved_concurrency=2, max_concurrency=2).single_environment


def test_the_smoke_target_is_absent_unless_configured() -> None:
    assert Policy(name="p").smoke is None
    policy = Policy.model_validate({"name": "p", "smoke": {"tenant_id": "sandbox-1"}})
    assert policy.smoke is not None
    assert (policy.smoke.tenant_id, policy.smoke.object_prefix) == ("sandbox-1", "sweeper-smoke-")


@pytest.mark.parametrize("tenant", ["", "a b", "t/1", "x" * 257])
def test_a_smoke_tenant_must_be_a_plain_id(tenant: str) -> None:
    with pytest.raises(ValueError, match=r"smoke\.tenant_id"):
        Policy.model_validate({"name": "p", "smoke": {"tenant_id": tenant}})


def test_visibility_timeout_is_six_function_timeouts_plus_the_window() -> None:
    assert (
        ConsumerConfig(timeout_seconds=30, batch_window_seconds=5).visibility_timeout_seconds == 185
    )


def test_the_in_flight_cap_drains_within_half_a_lease() -> None:
    policy = Policy(
        name="p", quota=Quota(limit=40, period_seconds=1, headroom=0.5), lease_seconds=100
    )
    assert policy.max_in_flight == 1000


def test_a_bad_policy_file_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "sweeper.toml"
    path.write_text('[[policies]]\nname = "exports"\n[policies.consumer]\nbatch_size = 20000\n')
    with pytest.raises(ConfigError, match=r"policies\.0\.consumer\.batch_size"):
        load_config(path)


def test_a_batch_above_ten_needs_a_batching_window_as_lambda_does() -> None:
    with pytest.raises(ValidationError, match="batch_window_seconds of at least 1"):
        ConsumerConfig(batch_size=11)
    assert ConsumerConfig(batch_size=50, batch_window_seconds=1, parallel_calls=10).batch_size == 50


def test_a_missing_policy_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


def test_settings_need_exactly_one_database_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEEPER_POLICY", Policy(name="p").model_dump_json())
    with pytest.raises(ValueError, match="exactly one"):
        Settings()
    monkeypatch.setenv("SWEEPER_DATABASE_URL", "postgresql://x@localhost/db")
    assert Settings().policy.name == "p"


def test_a_consumer_timeout_too_short_to_make_a_call_is_refused() -> None:
    from pydantic import ValidationError

    from sweeper.config import MIN_CONSUMER_TIMEOUT_SECONDS
    from sweeper.consumer import MIN_CALL_SECONDS
    from sweeper.runtime import LAMBDA_SAFETY_MARGIN_SECONDS

    # the floor leaves room for the safety margin, the shortest call and the ledger read
    assert MIN_CONSUMER_TIMEOUT_SECONDS >= LAMBDA_SAFETY_MARGIN_SECONDS + MIN_CALL_SECONDS + 1
    with pytest.raises(ValidationError, match="timeout_seconds"):
        ConsumerConfig(timeout_seconds=MIN_CONSUMER_TIMEOUT_SECONDS - 1)
    assert ConsumerConfig(timeout_seconds=MIN_CONSUMER_TIMEOUT_SECONDS).timeout_seconds == 7


def test_only_a_function_without_database_may_start_without_a_database_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SWEEPER_POLICY", Policy(name="p").model_dump_json())
    monkeypatch.setenv("SWEEPER_NEEDS_DATABASE", "false")
    assert Settings().database_url is None
    monkeypatch.setenv("SWEEPER_DATABASE_URL", "postgresql://x@localhost/db")
    monkeypatch.setenv("SWEEPER_DATABASE_SECRET_ARN", "arn:aws:secretsmanager:eu-west-1:1:secret:x")
    with pytest.raises(ValueError, match="exactly one"):
        Settings()


def test_parallel_calls_default_to_one_after_another_and_start_cautiously_at_one() -> None:
    assert ConsumerConfig().parallel_calls == 1
    assert ConsumerConfig(parallel_calls=1, batch_size=1).parallel_calls == 1
    assert ConsumerConfig(parallel_calls=10).parallel_calls == 10


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"parallel_calls": 0}, "greater than or equal to 1"),
        ({"parallel_calls": 11}, "less than or equal to 10"),
        ({"parallel_calls": 5, "batch_size": 4}, "must not exceed batch_size"),
    ],
)
def test_parallel_calls_outside_one_to_the_batch_size_are_refused(
    fields: dict[str, int], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        ConsumerConfig(**fields)


def test_consumer_memory_defaults_to_512_mb_within_lambdas_range() -> None:
    assert ConsumerConfig().memory_mb == 512
    assert ConsumerConfig(memory_mb=128).memory_mb == 128
    assert ConsumerConfig(memory_mb=10_240).memory_mb == 10_240
    with pytest.raises(ValidationError, match="greater than or equal to 128"):
        ConsumerConfig(memory_mb=127)
    with pytest.raises(ValidationError, match="less than or equal to 10240"):
        ConsumerConfig(memory_mb=10_241)


def test_a_plain_http_api_url_is_refused_naming_the_field_and_the_fix(tmp_path: Path) -> None:
    # Given a policy whose vendor is reached over http:// (the bearer token would travel in clear)
    path = tmp_path / "sweeper.toml"
    path.write_text(
        '[[policies]]\nname = "exports"\n[policies.action]\napi_url = "http://api.example.com"\n'
    )
    # Then the file is refused, saying which field and how to fix it
    with pytest.raises(ConfigError, match=r"api_url uses http://.*allow_plain_http = true"):
        load_config(path)


def test_allow_plain_http_admits_an_http_api_url() -> None:
    action = HttpActionConfig(api_url="http://127.0.0.1:8900", allow_plain_http=True)
    assert action.api_url == "http://127.0.0.1:8900"
    assert HttpActionConfig(api_url="https://api.example.com").allow_plain_http is False


@pytest.mark.parametrize(
    "name", ["sweeper.toml", *sorted(p.name for p in (REPO / "docs" / "examples").glob("*.toml"))]
)
def test_the_shipped_policy_files_still_validate(name: str) -> None:
    path = REPO / name if name == "sweeper.toml" else REPO / "docs" / "examples" / name
    assert load_config(path).policies
