"""The consumer's receives before the DLQ, and the policy's automatic redrive."""

import pytest
from pydantic import ValidationError

from sweeper.config import ConsumerConfig, Policy, SweeperConfig
from sweeper.config.redrive import RedriveConfig
from sweeper_tools.planning.costs import Deployment, at_rest, total
from sweeper_tools.planning.pause import runs_per_month


def test_two_receives_are_accepted_when_the_event_source_never_outruns_the_function() -> None:
    # Given the event source's maximum at the function's reserved concurrency
    consumer = ConsumerConfig(reserved_concurrency=4, max_concurrency=4, max_receive_count=2)
    # Then two receives are enough: the poller receives nothing it cannot invoke
    assert consumer.max_receive_count == 2


def test_one_receive_is_refused_with_the_reason() -> None:
    with pytest.raises(ValidationError, match="max_receive_count must be at least 2"):
        ConsumerConfig(reserved_concurrency=4, max_concurrency=4, max_receive_count=1)


def test_fewer_than_five_receives_are_refused_for_a_cautious_start() -> None:
    # Given reserved 1 with the event source at Lambda's floor of 2: a batch can be throttled
    with pytest.raises(ValidationError, match="below 5 needs max_concurrency <= reserved"):
        ConsumerConfig(reserved_concurrency=1, max_concurrency=2, max_receive_count=4)


def test_five_receives_stay_the_default_and_serve_a_cautious_start() -> None:
    assert ConsumerConfig().max_receive_count == 5
    assert ConsumerConfig(reserved_concurrency=1, max_concurrency=2).max_receive_count == 5


def test_the_automatic_redrive_is_todays_schedule_unless_a_policy_asks() -> None:
    assert Policy(name="exports").redrive.automatic == "scheduled"
    policy = Policy.model_validate({"name": "exports", "redrive": {"automatic": "throttled"}})
    assert policy.redrive == RedriveConfig(automatic="throttled")


def test_an_unknown_automatic_redrive_is_refused() -> None:
    with pytest.raises(ValidationError, match="automatic"):
        Policy.model_validate({"name": "exports", "redrive": {"automatic": "off"}})


def test_the_throttled_option_costs_a_run_a_minute_at_rest() -> None:
    # Given one policy without the option, and the same with it
    today = SweeperConfig(policies=[Policy(name="exports")])
    watching = SweeperConfig(
        policies=[Policy.model_validate({"name": "exports", "redrive": {"automatic": "throttled"}})]
    )
    # Then the plan counts a redrive run a minute (Scheduler's finest rate), for under $0.20
    extra = total(at_rest(watching, Deployment())) - total(at_rest(today, Deployment()))
    assert runs_per_month("rate(1 minute)", "UTC") - runs_per_month("rate(15 minutes)", "UTC") == (
        40_880
    )
    assert 0 < extra < 0.20
