"""The sample events in events/ are the events a real account sends, and our models read them."""

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel, SqsModel

from sweeper.events import ScheduleEvent
from sweeper.models import JobMessage
from tests.conftest import load_event


def test_the_scheduler_sample_is_an_eventbridge_event_with_a_policy() -> None:
    raw = load_event("scheduler_event.json")
    EventBridgeModel.model_validate(raw)
    event = ScheduleEvent.model_validate(raw)
    assert event.detail.policy == "exports"
    assert event.time.tzinfo is not None


def test_the_sqs_sample_is_an_sqs_event_carrying_job_messages() -> None:
    event = SqsModel.model_validate(load_event("sqs_batch.json"))
    messages = [JobMessage.model_validate_json(str(r.body)) for r in event.Records]
    assert [m.key for m in messages] == [
        f"{m.policy}:{m.tenant_id}:{m.object_id}:v{m.policy_version}" for m in messages
    ]


def test_the_local_scheduler_event_has_the_sample_shape() -> None:
    # the local stack's producer runs get the event the deployed schedule sends
    from datetime import UTC, datetime

    from sweeper_local.pipeline import scheduler_event

    built = scheduler_event("exports", datetime(2026, 11, 29, 2, 0, tzinfo=UTC))
    sample = load_event("scheduler_event.json")
    assert built.keys() == sample.keys()
    assert built["detail"].keys() == sample["detail"].keys()
    event = ScheduleEvent.model_validate(built)
    assert (event.detail.policy, event.time.isoformat()) == ("exports", "2026-11-29T02:00:00+00:00")
