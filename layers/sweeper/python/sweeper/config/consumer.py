"""How a policy's consumers read the work queue and call the vendor (`ConsumerConfig`).

The `[consumer]` section of a policy: the two caps on parallelism (reserved concurrency and the
event source's maximum), the batch size and window, the function's timeout and memory, and how
many records one environment calls at once. Its validators hold it to Lambda's and SQS's limits
(`sweeper.limits`); the consumer itself is the package `sweeper.consumer`.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from sweeper.config.base import _Strict
from sweeper.limits import (
    LAMBDA_MAX_MEMORY_MB,
    LAMBDA_MAX_TIMEOUT_SECONDS,
    LAMBDA_MIN_MEMORY_MB,
    MAX_BATCH_SIZE,
    MAX_BATCH_SIZE_WITHOUT_WINDOW,
    MIN_MAXIMUM_CONCURRENCY,
    recommended_visibility_timeout_seconds,
)

#: The shortest consumer timeout that can make a call: the consumer leaves Lambda's last 5 s
#: unused (runtime.LAMBDA_SAFETY_MARGIN_SECONDS) and never starts a call with less than 1 s
#: (consumer.MIN_CALL_SECONDS); a shorter timeout would return every record uncalled until each
#: reached the DLQ. One more second for the batch's ledger read (a unit test checks the sum).
MIN_CONSUMER_TIMEOUT_SECONDS = 7
#: The consumer function's memory unless a policy sets `consumer.memory_mb`.
DEFAULT_CONSUMER_MEMORY_MB = 512
#: The most records one environment calls at once (`consumer.parallel_calls`).
MAX_PARALLEL_CALLS = 10
#: AWS's advice for an SQS event source ("set the maxReceiveCount on the source queue's redrive
#: policy to at least 5"): a batch the poller received and Lambda throttled comes back with a
#: receive spent. It holds where that can happen: a cautious start, whose event source maximum
#: (Lambda's floor, 2) is above its reserved concurrency (1).
AWS_ADVISED_MIN_RECEIVES = 5
#: Fewer receives than this are refused anywhere: a record waits for a closed gate or its slot
#: by going back to the queue (a receive, sweeper.consumer.delivery), so it needs one receive to
#: wait and one to be called.
MIN_RECEIVES = 2


class ConsumerConfig(_Strict):
    """How consumers read the queue. Parallelism is capped twice, on purpose (docs/decisions.md).

    A cautious start runs one execution environment: `reserved_concurrency = 1`. The event
    source's maximum cannot go below 2 (Lambda's floor), so that one case pairs reserved 1 with
    maximum 2: the mapping may hold a second batch that Lambda throttles, which costs its
    messages a receive (docs/decisions.md, "A cautious start").
    """

    reserved_concurrency: int = Field(default=4, ge=1, le=1000)
    max_concurrency: int = Field(
        default=4, ge=MIN_MAXIMUM_CONCURRENCY, le=1000, description="event source maximum"
    )
    #: Records per invocation. Above 10, Lambda requires a batching window of at least 1 s;
    #: larger batches let `parallel_calls` threads stay busy through a batch instead of waiting
    #: for its slowest call (a vendor at 150 ms needs them to fill a quota with few environments).
    batch_size: int = Field(default=10, ge=1, le=MAX_BATCH_SIZE)
    batch_window_seconds: int = Field(default=0, ge=0, le=300)
    timeout_seconds: int = Field(
        default=60, ge=MIN_CONSUMER_TIMEOUT_SECONDS, le=LAMBDA_MAX_TIMEOUT_SECONDS
    )
    #: Receives before a message moves to the DLQ: at least AWS_ADVISED_MIN_RECEIVES, or down to
    #: MIN_RECEIVES where the event source's maximum is at most the reserved concurrency (the
    #: poller then receives no batch Lambda would throttle; `_receives_within_advice`).
    max_receive_count: int = Field(default=AWS_ADVISED_MIN_RECEIVES, le=1000)
    #: Records of one batch called at the same time by one environment (threads; the work is
    #: waiting on the vendor). 1 calls them one after another. Every call still takes its slot
    #: from the shared limiter, so this raises what one environment can do, never the rate.
    parallel_calls: int = Field(default=1, ge=1, le=MAX_PARALLEL_CALLS)
    #: The function's memory, and with it its CPU: Lambda gives one vCPU at 1,769 MB and a
    #: proportional share below. The threads of `parallel_calls` share that CPU, so a busy
    #: environment can run out of it before it runs out of threads (`sweeper plan` says when).
    memory_mb: int = Field(
        default=DEFAULT_CONSUMER_MEMORY_MB, ge=LAMBDA_MIN_MEMORY_MB, le=LAMBDA_MAX_MEMORY_MB
    )
    #: The function's log level (POWERTOOLS_LOG_LEVEL). At INFO a batch writes one line of
    #: counts, with the keys of what went wrong and a line for each of those; DEBUG adds a line
    #: per job (a success, a duplicate, a snooze), for an incident (docs/runbook.md).
    log_level: Literal["DEBUG", "INFO", "WARNING"] = "INFO"
    #: The function's X-Ray mode, one of Lambda's two (its TracingConfig; docs/runbook.md).
    #: "passthrough" records no consumer trace: Lambda forwards the trace header and sends
    #: nothing. "active" records every invocation its producer run sampled, which is every one:
    #: Lambda follows the messages' sampling decision, and takes no X-Ray sampling rule.
    tracing: Literal["active", "passthrough"] = "passthrough"

    @model_validator(mode="after")
    def _window_for_large_batches(self) -> Self:
        if self.batch_size > MAX_BATCH_SIZE_WITHOUT_WINDOW and self.batch_window_seconds < 1:
            raise ValueError(
                f"batch_size {self.batch_size} is above {MAX_BATCH_SIZE_WITHOUT_WINDOW}: Lambda "
                "then requires batch_window_seconds of at least 1"
            )
        return self

    @model_validator(mode="after")
    def _parallel_within_batch(self) -> Self:
        if self.parallel_calls > self.batch_size:
            raise ValueError(
                f"parallel_calls ({self.parallel_calls}) must not exceed batch_size "
                f"({self.batch_size}): a batch never has more records to call at once"
            )
        return self

    @model_validator(mode="after")
    def _max_not_above_reserved(self) -> Self:
        if self.max_concurrency > self.reserved_concurrency and not self.single_environment:
            raise ValueError(
                "max_concurrency must not exceed reserved_concurrency: the event source would "
                "keep receiving while invocations are throttled (the one exception: "
                f"reserved_concurrency = 1 with max_concurrency = {MIN_MAXIMUM_CONCURRENCY}, "
                "Lambda's floor, for a cautious start)"
            )
        return self

    @model_validator(mode="after")
    def _receives_within_advice(self) -> Self:
        if self.max_receive_count < MIN_RECEIVES:
            raise ValueError(
                f"max_receive_count must be at least {MIN_RECEIVES}: a record waiting for a "
                "closed gate or its slot goes back to the queue (a receive) before its call"
            )
        if self.max_receive_count < AWS_ADVISED_MIN_RECEIVES and self.single_environment:
            raise ValueError(
                f"max_receive_count below {AWS_ADVISED_MIN_RECEIVES} needs max_concurrency <= "
                "reserved_concurrency: with reserved_concurrency = 1 and max_concurrency = "
                f"{MIN_MAXIMUM_CONCURRENCY} the event source receives batches Lambda throttles, "
                f"each a receive (AWS advises at least {AWS_ADVISED_MIN_RECEIVES}); raise "
                "reserved_concurrency to 2 or keep max_receive_count at 5"
            )
        return self

    @property
    def single_environment(self) -> bool:
        """One execution environment: reserved 1, with the event source at Lambda's floor."""
        return self.reserved_concurrency == 1 and self.max_concurrency == MIN_MAXIMUM_CONCURRENCY

    @property
    def environments(self) -> int:
        """How many execution environments can run at once: the lower of the two caps."""
        return min(self.reserved_concurrency, self.max_concurrency)

    @property
    def visibility_timeout_seconds(self) -> int:
        """AWS's guidance: at least six times the function timeout, plus the batch window."""
        return recommended_visibility_timeout_seconds(
            self.timeout_seconds, self.batch_window_seconds
        )
