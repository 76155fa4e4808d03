"""The local event source keeps the rules of Lambda's SQS event source mapping.

Each rule is asserted on the event source itself, against the real SQS emulator, with a tiny
handler (tests/event_source_handlers.py) whose journal shows what each invocation received.
Function timeouts are short (1-2 s) so that the queue's visibility timeout, six function
timeouts plus the batching window as deployed, stays short too.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from sweeper.errors import ConfigError
from sweeper.limits import recommended_visibility_timeout_seconds
from sweeper_cli import main
from sweeper_local.aws import LocalAws
from sweeper_local.poller import (
    RECEIVE_WAIT_SECONDS,
    EventSourceConfig,
    LocalEventSource,
    run_until,
)
from tests.event_source_handlers import JOURNAL_ENV

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

pytestmark = pytest.mark.integration

HANDLER = "tests.event_source_handlers:handler"


@dataclass
class Harness:
    """One queue, one event source on it, and the journal of its handler's invocations."""

    sqs: SQSClient
    queue_url: str
    config: EventSourceConfig
    journal: Path
    sources: list[LocalEventSource] = field(default_factory=list)

    def start(self) -> LocalEventSource:
        source = LocalEventSource(self.sqs, self.config, {JOURNAL_ENV: str(self.journal)}).start()
        self.sources.append(source)
        source.wait_until_warm(60)
        return source

    def send(self, *bodies: dict[str, Any]) -> list[str]:
        return [
            self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=json.dumps(body))[
                "MessageId"
            ]
            for body in bodies
        ]

    def entries(self, event: str) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        lines = self.journal.read_text(encoding="utf-8").splitlines()
        return [e for e in map(json.loads, lines) if e["event"] == event]

    def deliveries(self, message_id: str) -> list[dict[str, Any]]:
        """The invocations that received this message, in order."""
        return [e for e in self.entries("start") if message_id in e["ids"]]

    def ended(self, message_id: str) -> int:
        return sum(1 for e in self.entries("end") if message_id in e["ids"])

    def remaining(self) -> int:
        """Messages still in the queue, visible or in flight."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )


MakeHarness = Callable[..., Harness]


@pytest.fixture
def harness(local_aws: LocalAws, tmp_path: Path) -> Iterator[MakeHarness]:
    made: list[Harness] = []

    def make(visibility_timeout_seconds: int | None = None, **overrides: Any) -> Harness:
        sqs = local_aws.sqs()
        config = EventSourceConfig(
            queue_url="",
            queue_arn="",
            function=HANDLER,
            function_name="test-handler",
            batch_size=10,
            max_concurrency=2,
            timeout_seconds=1,
        )
        config = replace(config, **overrides)
        visibility = visibility_timeout_seconds
        if visibility is None:
            visibility = recommended_visibility_timeout_seconds(
                config.timeout_seconds, config.batch_window_seconds
            )
        url = sqs.create_queue(
            QueueName=f"evsrc-{uuid.uuid4().hex[:12]}",
            Attributes={"VisibilityTimeout": str(visibility)},
        )["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        made.append(
            Harness(
                sqs,
                url,
                replace(config, queue_url=url, queue_arn=arn),
                tmp_path / f"journal-{len(made)}.jsonl",
            )
        )
        return made[-1]

    yield make
    for built in made:
        for source in built.sources:
            source.stop()


# -- batches and concurrency ------------------------------------------------------------------


def test_a_batch_never_holds_more_than_the_batch_size(harness: MakeHarness) -> None:
    # Given a mapping of batch size 3 with a window to gather full batches, and 10 messages
    h = harness(batch_size=3, batch_window_seconds=1)
    ids = h.send(*[{} for _ in range(10)])
    source = h.start()
    # When it delivers them all
    assert run_until(lambda: all(h.ended(i) == 1 for i in ids), timeout_seconds=30)
    # Then no batch held more than 3 records, and batches did fill up to 3
    sizes = [len(e["ids"]) for e in h.entries("start")]
    assert max(sizes) == 3
    assert sum(sizes) == 10
    assert source.stats.largest_batch == 3
    assert run_until(lambda: h.remaining() == 0, timeout_seconds=10)


def test_invocations_in_flight_never_exceed_the_maximum_concurrency(
    harness: MakeHarness,
) -> None:
    # Given a maximum concurrency of 2, batches of one, and a handler that takes a while
    h = harness(batch_size=1, max_concurrency=2, timeout_seconds=3)
    ids = h.send(*[{"sleep": 0.4} for _ in range(8)])
    h.start()
    # When every message has been handled
    assert run_until(lambda: all(h.ended(i) == 1 for i in ids), timeout_seconds=60)
    # Then, from the handler's own journal, two invocations overlapped and never three
    edges = sorted(
        [(e["at"], 1) for e in h.entries("start")] + [(e["at"], -1) for e in h.entries("end")],
        key=lambda edge: (edge[0], edge[1]),
    )
    running = highest = 0
    for _, step in edges:
        running += step
        highest = max(highest, running)
    assert highest == 2
    assert len({e["pid"] for e in h.entries("start")}) == 2  # two environments, reused


def test_the_batching_window_gathers_records_that_arrive_after_the_first(
    harness: MakeHarness,
) -> None:
    # Given a 3 s batching window and a batch size of 10
    h = harness(batch_window_seconds=3)
    h.start()
    # When one message arrives, and two more once the first has been received
    (first,) = h.send({})
    assert run_until(lambda: h.remaining() == 1 and _in_flight(h) == 1, timeout_seconds=10)
    later = h.send({}, {})
    # Then one invocation gets all three
    assert run_until(lambda: h.ended(first) == 1, timeout_seconds=20)
    (batch,) = h.deliveries(first)
    assert sorted(batch["ids"]) == sorted([first, *later])


def test_a_full_batch_is_invoked_before_the_window_closes(harness: MakeHarness) -> None:
    # Given a long batching window and a batch size of 2, and two messages waiting
    h = harness(batch_size=2, batch_window_seconds=30)
    ids = h.send({}, {})
    # When the event source starts
    h.start()
    # Then the full batch is invoked long before the window would close
    assert run_until(lambda: all(h.ended(i) == 1 for i in ids), timeout_seconds=10)


def test_a_paused_source_takes_nothing_sent_once_pause_receiving_returns(
    harness: MakeHarness,
) -> None:
    # Given an idle event source, long-polling its empty queue
    h = harness()
    source = h.start()
    # When it is paused, waiting for the receive under way to end, and a message is sent then
    assert source.pause_receiving(timeout_seconds=RECEIVE_WAIT_SECONDS + 10)
    (held,) = h.send({})
    # Then no receive takes it while paused (a poll under way would have, within its wait) ...
    assert not run_until(
        lambda: _in_flight(h) > 0 or bool(h.deliveries(held)),
        timeout_seconds=RECEIVE_WAIT_SECONDS + 1,
    )
    # ... and it is delivered once the source resumes
    source.resume()
    assert run_until(lambda: h.ended(held) == 1, timeout_seconds=15)


# -- what comes back ------------------------------------------------------------------------


def test_a_function_error_returns_the_whole_batch(harness: MakeHarness) -> None:
    # Given a batch of three whose invocation raises
    h = harness()
    ids = h.send({"raise": True}, {}, {})
    source = h.start()
    # When the visibility timeout has passed
    assert run_until(lambda: all(h.ended(i) == 1 for i in ids), timeout_seconds=30)
    # Then every record came back and was delivered a second time
    for message_id in ids:
        assert [len(d["receive_counts"]) > 0 for d in h.deliveries(message_id)] == [True, True]
        assert h.deliveries(message_id)[-1]["receive_counts"] == [2] * len(
            h.deliveries(message_id)[-1]["ids"]
        )
    assert source.stats.function_errors == 1
    assert run_until(lambda: h.remaining() == 0, timeout_seconds=10)


@pytest.mark.parametrize("bad", ["unknown", "empty", "null", "bad_key"])
def test_a_response_naming_no_record_of_the_batch_fails_the_whole_batch(
    harness: MakeHarness, bad: str
) -> None:
    # Given a batch of three whose response names one real failure and one bad identifier
    h = harness()
    ids = h.send({"fail": "self"}, {"fail": bad}, {})
    source = h.start()
    # When the invocation has returned (it did not time out or fail: its response is invalid)
    assert run_until(lambda: source.stats.invocations >= 1, timeout_seconds=15)
    assert source.stats.invalid_responses == 1
    assert (source.stats.function_errors, source.stats.timeouts) == (0, 0)
    # Then nothing was deleted: all three come back after the visibility timeout
    assert run_until(lambda: all(len(h.deliveries(i)) == 2 for i in ids), timeout_seconds=30)
    assert run_until(lambda: h.remaining() == 0, timeout_seconds=15)


def test_a_valid_partial_response_returns_only_the_named_record(harness: MakeHarness) -> None:
    # Given a batch of three whose response names one of them, and an empty list otherwise
    h = harness()
    failed, *others = h.send({"fail": "self"}, {}, {})
    source = h.start()
    # When the named record has come back and succeeded
    assert run_until(lambda: h.ended(failed) == 2, timeout_seconds=30)
    # Then only it was delivered twice; the others were deleted after the first
    assert [len(h.deliveries(i)) for i in others] == [1, 1]
    assert source.stats.invalid_responses == 0
    assert run_until(lambda: h.remaining() == 0, timeout_seconds=10)


def test_a_timed_out_invocation_is_killed_and_its_whole_batch_comes_back(
    harness: MakeHarness,
) -> None:
    # Given a batch that the handler journals as settled, then works on past the timeout
    h = harness(timeout_seconds=1)
    ids = h.send({"settle": True, "sleep": 30}, {})
    source = h.start()
    assert run_until(lambda: len(h.entries("settled")) == 1, timeout_seconds=15)
    (settled,) = h.entries("settled")
    # When the function's timeout passes
    assert run_until(lambda: source.stats.timeouts == 1, timeout_seconds=10)
    # Then its environment is gone (the process killed), not left running
    assert run_until(lambda: not _process_exists(settled["pid"]), timeout_seconds=5)
    # And every record of the batch, the settled ones too, comes back after the visibility
    # timeout, to a new environment (a cold start), and succeeds
    assert run_until(lambda: all(h.ended(i) == 1 for i in ids), timeout_seconds=30)
    for message_id in ids:
        first, second = h.deliveries(message_id)
        assert second["at"] - first["at"] >= 6 - 0.5  # the queue's visibility timeout
        assert second["pid"] != settled["pid"]
    assert source.stats.environments_lost == 1
    assert sum(e.cold_starts for e in source.environments) == 3  # two at start, one new


def test_a_dead_environment_is_replaced_and_the_event_source_keeps_delivering(
    harness: MakeHarness,
) -> None:
    # Given an event source whose handler is killed (SIGKILL) in the middle of a batch
    h = harness()
    source = h.start()
    (doomed,) = h.send({"kill": True})
    assert run_until(lambda: source.stats.environments_lost == 1, timeout_seconds=15)
    killed = h.deliveries(doomed)[0]["pid"]
    # When more work arrives
    after = h.send({}, {}, {})
    # Then it is delivered, the killed batch comes back after the visibility timeout, and a
    # new environment replaced the dead one
    assert run_until(lambda: all(h.ended(i) == 1 for i in [*after, doomed]), timeout_seconds=30)
    assert h.deliveries(doomed)[-1]["receive_counts"] == [2]
    assert h.deliveries(doomed)[-1]["pid"] != killed
    assert source.error is None
    assert sum(e.cold_starts for e in source.environments) == 3
    assert run_until(lambda: h.remaining() == 0, timeout_seconds=10)


# -- refused configurations ---------------------------------------------------------------------


def test_a_visibility_timeout_below_the_function_timeout_is_refused_at_start(
    harness: MakeHarness,
) -> None:
    # Given a queue whose visibility timeout is shorter than the function's timeout
    h = harness(visibility_timeout_seconds=5, timeout_seconds=10)
    # When the event source is started on it
    with pytest.raises(ConfigError, match="visibility timeout 5 s is less than the function"):
        h.start()
    # Then it refused before polling: the message is still waiting, never delivered
    h.send({})
    assert h.entries("start") == []


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"batch_size": 11}, "batch size 11 is above 10 without a batching window"),
        ({"max_concurrency": 1}, "maximum concurrency 1 is outside 2-1000"),
        ({"max_concurrency": 1001}, "maximum concurrency 1001 is outside 2-1000"),
        ({"batch_window_seconds": 301}, "batching window 301 s is outside 0-300 s"),
        ({"timeout_seconds": 901}, "function timeout 901 s is outside"),
    ],
)
def test_a_mapping_lambda_refuses_is_refused(
    harness: MakeHarness, overrides: dict[str, int], reason: str
) -> None:
    h = harness(visibility_timeout_seconds=43_200, **overrides)
    with pytest.raises(ConfigError, match=reason):
        h.start()


def test_an_invocation_still_running_counts_in_the_busy_time_up_to_now(
    harness: MakeHarness,
) -> None:
    # Given one environment handed a batch that takes 2 s
    h = harness(batch_size=1, max_concurrency=2, timeout_seconds=5)
    ids = h.send({"sleep": 2.0})
    source = h.start()
    assert run_until(lambda: len(h.entries("start")) == 1, timeout_seconds=30)
    # When the busy time is read twice while it runs, half a second apart
    started = time.monotonic()
    first = source.busy_seconds_now()
    time.sleep(0.5)  # the time that passes is what is measured
    second = source.busy_seconds_now()
    apart = time.monotonic() - started
    # Then it grew with the running invocation, which no ended one has counted yet
    assert source.stats.busy_seconds == 0
    assert second - first == pytest.approx(apart, abs=0.05)
    # And once it ended it counts once, as its duration
    assert run_until(
        lambda: h.ended(ids[0]) == 1 and source.stats.invocations == 1, timeout_seconds=30
    )
    assert source.busy_seconds_now() == pytest.approx(source.stats.busy_seconds)
    assert source.stats.busy_seconds >= 2.0


def _in_flight(h: Harness) -> int:
    attributes = h.sqs.get_queue_attributes(
        QueueUrl=h.queue_url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessagesNotVisible"])


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_local_up_refuses_a_visibility_timeout_below_the_consumer_timeout(
    console_config: Path, tmp_path: Path
) -> None:
    # Given a policy whose consumer times out after 10 s
    # When the local stack is asked for work queues with a 5 s visibility timeout
    result = CliRunner().invoke(
        main,
        [
            "local",
            "up",
            *("--config", str(console_config), "--local-file", str(tmp_path / "local.json")),
            *("--visibility-timeout", "5"),
        ],
    )
    # Then it refuses in one line, naming the rule, and starts nothing
    assert result.exit_code != 0
    assert "visibility timeout 5 s is less than the function timeout 10 s" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "local.json").exists()
    assert not (tmp_path / "local.log").exists()  # no background process was even spawned
