"""The redrive function's two events: the scheduler's, and an on-demand request."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sweeper.models import OutcomeClass
from sweeper.redrive import RedriveRequest, request_from_event
from tests.conftest import load_event


def test_the_scheduler_event_is_a_plain_run_for_its_policy() -> None:
    request = request_from_event(load_event("scheduler_event.json"), "exports")
    assert request == RedriveRequest(policy="exports")
    assert not request.dry_run
    assert not request.include_terminal


def test_the_on_demand_sample_is_a_valid_request() -> None:
    request = request_from_event(load_event("redrive_request.json"), "exports")
    assert request.policy == "exports"
    assert request.outcome == [OutcomeClass.THROTTLED, OutcomeClass.TRANSIENT]
    assert (request.max_messages, request.rate_per_second, request.dry_run) == (500, 5, True)


def test_an_empty_request_is_a_run_for_the_functions_own_policy() -> None:
    assert request_from_event({}, "exports").policy == "exports"


@pytest.mark.parametrize(
    "event",
    [{"max_messages": 0}, {"rate_per_second": -1}, {"outcome": ["late"]}, {"dryrun": True}],
)
def test_a_bad_request_is_refused_naming_the_field(event: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        request_from_event(event, "exports")
