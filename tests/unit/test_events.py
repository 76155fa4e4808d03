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
