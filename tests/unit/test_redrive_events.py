"""The redrive function's two events: the scheduler's, and an on-demand request."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sweeper.errors import RedriveIncompleteError
from sweeper.models import OutcomeClass
from sweeper.redrive.run import RedriveReport, RedriveRequest, request_from_event
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


def test_a_request_naming_another_policy_keeps_it() -> None:
    assert request_from_event({"policy": "imports"}, "exports").policy == "imports"


@pytest.mark.parametrize("missing", ["detail-type", "source"])
def test_a_scheduler_event_missing_a_field_is_refused_as_a_scheduler_event(missing: str) -> None:
    # Either mark (the scheduler's source, or an EventBridge detail-type) makes it a scheduler
    # event: the error names the scheduler event's missing field, not "extra fields" of a request.
    event = {k: v for k, v in load_event("scheduler_event.json").items() if k != missing}
    with pytest.raises(ValidationError) as refused:
        request_from_event(event, "exports")
    assert refused.value.title == "ScheduleEvent"
    assert [e["loc"] for e in refused.value.errors()] == [(missing,)]


def test_a_report_with_errors_fails_the_run_naming_how_many() -> None:
    report = RedriveReport(policy="exports", dry_run=False, errors=2)
    with pytest.raises(RedriveIncompleteError) as failed:
        report.raise_for_errors()
    assert failed.value.errors == 2
    assert str(failed.value) == "redrive left 2 dead letter(s) it could not read or match"
    assert failed.value.report is report
    RedriveReport(policy="exports", dry_run=False).raise_for_errors()  # no errors: no raise
