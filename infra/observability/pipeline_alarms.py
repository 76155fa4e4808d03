"""The alarms and the dashboard rows of one policy's pipeline and its redrive.

Thresholds come from the policy's `alarms` section, or derive from the policy (the backlog
threshold is what the quota drains within the queue-age threshold). The alarms are added in one
fixed order: it is the order of the dashboard's alarm list.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from infra.observability.base import (
    ALARM_PERIOD_SECONDS,
    DASHBOARD_WIDGET_HEIGHT,
    DASHBOARD_WIDGET_WIDTH,
    GE,
    AlarmBoard,
    AlarmSpec,
    PolicyHome,
)
from infra.observability.helpers import (
    alarm_status,
    app_metric,
    backlog_threshold,
    graph,
    outcome_rate,
    slots_per_period,
    visible,
)
from infra.pipeline import Pipeline
from infra.redrive import Redrive
from sweeper.models import OutcomeClass
from sweeper.observability import Metric
from sweeper_tools.planning.scope import single_scope

#: The backlog alarm waits this many periods: a large page published at once is not an incident.
BACKLOG_EVALUATION_PERIODS = 3
#: Completions stalled while messages wait and consumers run: this many periods running (a gate
#: closed by a Retry-After of a few minutes is not yet an incident).
COMPLETION_STALL_PERIODS = 3
#: Outcome-class rates are judged over this many periods running (and only from
#: helpers.MIN_CALLS_FOR_RATE calls a period).
RATE_EVALUATION_PERIODS = 2
#: The limiter is saturated when its scope's slots are this used, this many periods running.
LIMITER_SATURATION_PERCENT = 90
LIMITER_SATURATION_PERIODS = 3


class PipelineWatch:
    """One policy's pipeline signals, the alarms on them, and its dashboard rows."""

    def __init__(self, pipeline: Pipeline, redrive: Redrive) -> None:
        self.pipeline = pipeline
        self.redrive = redrive
        self.policy = pipeline.policy
        self.period = Duration.seconds(ALARM_PERIOD_SECONDS)
        self.consumer = pipeline.consumer.function
        self.producer = pipeline.producer.function
        self.queue_age = pipeline.queue.metric_approximate_age_of_oldest_message(
            period=self.period, statistic="Maximum"
        )
        self.queue_visible = visible(pipeline.queue)
        self.dlq_visible = visible(pipeline.dead_letter_queue)
        self.schedule_dlq_visible = visible(pipeline.producer_schedule.dead_letter_queue)
        self.redrive_dlq_visible = visible(redrive.schedule.dead_letter_queue)
        self.oldest_eligible = self._sweeper(Metric.OLDEST_ELIGIBLE_AGE, "Maximum")
        self.terminal = self._sweeper(Metric.TERMINAL_FAILURES)
        self.snooze_exhausted = self._sweeper(Metric.SNOOZE_EXHAUSTED)
        self.auth_open = self._sweeper(Metric.AUTH_CIRCUIT_OPEN, "Maximum")
        self.mismatched = self._sweeper(Metric.MISMATCHED)
        self.claims = self._sweeper(Metric.DISCOVERED)
        self.published = self._sweeper(Metric.PUBLISHED)
        self.succeeded = self._sweeper(Metric.SUCCEEDED)
        self.retries = self._sweeper(Metric.RETRIES)
        self.reclaimed = self._sweeper(Metric.RECLAIMED)
        self.publish_failures = self._sweeper(Metric.PUBLISH_FAILURES)
        self.released = self._sweeper(Metric.RELEASED)
        self.attempts = {
            outcome.value: self._sweeper(Metric.ATTEMPTS_PREFIX + outcome.value)
            for outcome in OutcomeClass
        }
        self.transient_rate = outcome_rate(self.attempts, OutcomeClass.TRANSIENT, self.period)
        self.unknown_rate = outcome_rate(self.attempts, OutcomeClass.UNKNOWN, self.period)
        self.scope_name = single_scope(self.policy)
        self.slots_used = self._sweeper(Metric.LIMITER_SLOTS_USED)
        self.utilization = self._utilization()

    def apply(self, board: AlarmBoard, home: PolicyHome) -> None:
        """Add the alarms (under `home`'s `Policy-<name>`) and the dashboard rows to `board`."""
        scope = Construct(home, f"Policy-{self.policy.name}")
        specs = [
            *self._queue_alarms(),
            *self._function_alarms(),
            *self._job_alarms(),
            *self._redrive_alarms(),
            *self._stall_alarms(),
            *self._outcome_alarms(),
            *self._limiter_alarms(),
        ]
        alarms = board.add_alarms(scope, specs, self.policy)
        for row in self._dashboard_rows(alarms):
            home.dashboard.add_widgets(*row)

    def _sweeper(self, name: str, statistic: str = "Sum") -> cloudwatch.Metric:
        return app_metric(self.policy.name, name, statistic)

    def _utilization(self) -> cloudwatch.MathExpression:
        """The share (%) of one limiter scope's slots this policy used in a period."""
        return cloudwatch.MathExpression(
            expression=f"100 * FILL(used, 0) / {slots_per_period(self.policy)}",
            using_metrics={"used": self.slots_used},
            label=(
                f"Slots used (% of scope {self.scope_name})"
                if self.scope_name is not None
                else "Slots used, all scopes (% of one scope's)"
            ),
            period=self.period,
        )

    def _queue_alarms(self) -> list[AlarmSpec]:
        thresholds = self.policy.alarms
        backlog = backlog_threshold(self.policy.quota.rate_per_second, thresholds.queue_age_seconds)
        return [
            AlarmSpec(
                "QueueAge",
                self.queue_age,
                thresholds.queue_age_seconds,
                "the oldest message waits longer than the threshold: consumers fall behind",
            ),
            AlarmSpec(
                "QueueBacklog",
                self.queue_visible,
                backlog,
                "more messages wait than the quota drains within the queue-age threshold",
                periods=BACKLOG_EVALUATION_PERIODS,
            ),
            AlarmSpec(
                "DeadLetters",
                self.dlq_visible,
                0,
                "messages reached the work queue's DLQ (docs/deploy.md, runbook)",
            ),
        ]

    def _function_alarms(self) -> list[AlarmSpec]:
        return [
            AlarmSpec(
                "ConsumerThrottles",
                self.consumer.metric_throttles(period=self.period),
                0,
                "consumer invocations were throttled: maximum concurrency above reserved?",
            ),
            AlarmSpec(
                "ConsumerErrors",
                self.consumer.metric_errors(period=self.period),
                0,
                "consumer invocations failed as a whole (not a single job)",
            ),
            AlarmSpec(
                "ProducerErrors",
                self.producer.metric_errors(period=self.period),
                0,
                "a producer run failed",
            ),
            AlarmSpec(
                "ProducerScheduleDeadLetters",
                self.schedule_dlq_visible,
                0,
                "a scheduled producer run was not delivered or failed all its retries",
            ),
        ]

    def _job_alarms(self) -> list[AlarmSpec]:
        return [
            AlarmSpec(
                "OldestEligibleAge",
                self.oldest_eligible,
                self.policy.alarms.oldest_eligible_age_seconds,
                "a due job has waited longer than the threshold to be published",
            ),
            AlarmSpec(
                "TerminalFailures",
                self.terminal,
                self.policy.alarms.terminal_failures,
                "jobs failed terminally (permanent outcome or attempts exhausted)",
                operator=GE,
            ),
            AlarmSpec(
                "SnoozeExhausted",
                self.snooze_exhausted,
                1,
                "the vendor kept snoozing a job past max_snooze_seconds: it ended terminal",
                operator=GE,
            ),
            AlarmSpec(
                "AuthCircuitOpen",
                self.auth_open,
                1,
                "the API rejects the credential: consumers stopped calling it",
                operator=GE,
            ),
            AlarmSpec(
                "MismatchedMessages",
                self.mismatched,
                1,
                "a queue message named another target than its key's ledger row (never called)",
                operator=GE,
            ),
        ]

    def _redrive_alarms(self) -> list[AlarmSpec]:
        return [
            AlarmSpec(
                "RedriveErrors",
                self.redrive.function.function.metric_errors(period=self.period),
                0,
                "a redrive run failed",
            ),
            AlarmSpec(
                "RedriveScheduleDeadLetters",
                self.redrive_dlq_visible,
                0,
                "a scheduled redrive run was not delivered or failed all its retries",
            ),
        ]

    def _stall_alarms(self) -> list[AlarmSpec]:
        claims_stalled = cloudwatch.MathExpression(
            # A run that found due work (it reports the oldest age only then) and claimed none
            # of it. An idle or paused policy reports no age: quiet.
            expression="IF(FILL(age, -1) >= 0 AND FILL(claims, 0) == 0, 1, 0)",
            using_metrics={"age": self.oldest_eligible, "claims": self.claims},
            label="Runs with due work and no claim",
            period=self.period,
        )
        completions_stalled = cloudwatch.MathExpression(
            # Messages wait and consumers run, yet no job settles. An idle policy has no
            # messages; a paused one runs no consumer: both quiet.
            expression=(
                "IF(FILL(visible, 0) > 0 AND FILL(invocations, 0) > 0 AND "
                "FILL(succeeded, 0) + FILL(terminal, 0) == 0, 1, 0)"
            ),
            using_metrics={
                "visible": self.queue_visible,
                "invocations": self.consumer.metric_invocations(period=self.period),
                "succeeded": self.succeeded,
                "terminal": self.terminal,
            },
            label="Consumers run, messages wait, nothing settles",
            period=self.period,
        )
        return [
            AlarmSpec(
                "ClaimsStalled",
                claims_stalled,
                1,
                "a producer run found due work and claimed none (in-flight cap or budget)",
                operator=GE,
            ),
            AlarmSpec(
                "CompletionsStalled",
                completions_stalled,
                1,
                "consumers run and messages wait, but no job settled for 15 minutes",
                operator=GE,
                periods=COMPLETION_STALL_PERIODS,
            ),
            AlarmSpec(
                "LeaseExpiries",
                self.reclaimed,
                1,
                "leases expired unsettled and the producer reclaimed them (lost or slow work)",
                operator=GE,
            ),
        ]

    def _outcome_alarms(self) -> list[AlarmSpec]:
        """How vendor calls end (by outcome class) and whether claimed rows were published."""
        thresholds = self.policy.alarms
        # One alarm on both rates: they read the same eight counts, and CloudWatch bills an
        # alarm for each metric it reads ($0.10 a month each). Which rate passed is on the
        # dashboard's "Transient and unknown rate" graph.
        failing = cloudwatch.MathExpression(
            expression=(
                f"IF(transient_rate >= {thresholds.transient_rate_percent:g} "
                f"OR unknown_rate >= {thresholds.unknown_rate_percent:g}, 1, 0)"
            ),
            using_metrics={
                "transient_rate": self.transient_rate,
                "unknown_rate": self.unknown_rate,
            },
            label="Transient or unknown rate at its threshold",
            period=self.period,
        )
        return [
            AlarmSpec(
                "VendorFailureRate",
                failing,
                1,
                "too many vendor calls end transient (5xx, refused) or unknown (sent, no "
                "answer: timeouts)",
                operator=GE,
                periods=RATE_EVALUATION_PERIODS,
            ),
            AlarmSpec(
                "PublishFailures",
                self.publish_failures,
                1,
                "the producer could not publish claimed rows (they were released, not lost)",
                operator=GE,
            ),
        ]

    def _limiter_alarms(self) -> list[AlarmSpec]:
        if self.scope_name is None:
            # Per-scope utilization is this policy's when all its jobs share one scope; with a
            # scope per tenant or object it has no CloudWatch figure (docs/decisions.md).
            return []
        return [
            AlarmSpec(
                "LimiterSaturated",
                self.utilization,
                LIMITER_SATURATION_PERCENT,
                f"the limiter scope {self.scope_name} used nearly all its slots for 15 minutes",
                operator=GE,
                periods=LIMITER_SATURATION_PERIODS,
            )
        ]

    def _dashboard_rows(self, alarms: list[cloudwatch.Alarm]) -> list[list[cloudwatch.IWidget]]:
        """The policy's rows, top to bottom: its heading, then one row per concern."""
        return [
            [cloudwatch.TextWidget(markdown=f"## {self.policy.name}", width=24, height=1)],
            [
                graph("Work queue: age of oldest (s)", [self.queue_age]),
                graph("Work queue: visible", [self.queue_visible]),
                graph(
                    "Dead letters",
                    [self.dlq_visible, self.schedule_dlq_visible, self.redrive_dlq_visible],
                ),
            ],
            self._consumer_row(),
            [
                graph(
                    "Claims and completions (per 5 min)",
                    [self.claims, self.published, self.succeeded, self.terminal],
                ),
                graph("Lease expiries (reclaimed)", [self.reclaimed]),
                graph("Publish failures (released again)", [self.publish_failures, self.released]),
            ],
            self._calls_row(),
            [
                graph(
                    "Terminal failures; snoozes",
                    [self.terminal, self._sweeper(Metric.SNOOZES), self.snooze_exhausted],
                ),
                graph("Auth circuit open", [self.auth_open]),
                alarm_status(f"{self.policy.name} alarms", alarms),
            ],
        ]

    def _consumer_row(self) -> list[cloudwatch.IWidget]:
        consumer, period = self.consumer, self.period
        return [
            graph(
                "Consumer",
                [
                    consumer.metric_invocations(period=period),
                    consumer.metric_errors(period=period),
                    consumer.metric_throttles(period=period),
                ],
            ),
            graph(
                "Consumer duration p99 (ms)",
                [consumer.metric_duration(period=period, statistic="p99")],
            ),
            graph("Oldest eligible age (s)", [self.oldest_eligible]),
        ]

    def _calls_row(self) -> list[cloudwatch.IWidget]:
        """Vendor calls by outcome, their rates, and the limiter in front of them."""
        limiter = [
            self.slots_used,
            self._sweeper(Metric.LIMITER_WAITS),
            self._sweeper(Metric.GATE_DEFERRALS),
            self._sweeper(Metric.THROTTLE_EVENTS),
            # a vendor's limit fields that did not read as configured (the last good pace stands)
            self._sweeper(Metric.VENDOR_VALUES_IGNORED),
        ]
        return [
            graph("Attempts by outcome class", list(self.attempts.values())),
            cloudwatch.GraphWidget(
                title="Transient and unknown rate (%), retries",
                left=[self.transient_rate, self.unknown_rate],
                right=[self.retries],
                width=DASHBOARD_WIDGET_WIDTH,
                height=DASHBOARD_WIDGET_HEIGHT,
            ),
            cloudwatch.GraphWidget(
                title="Limiter utilization (%), slots, waits, gate, vendor values ignored",
                left=[self.utilization],
                right=limiter,
                width=DASHBOARD_WIDGET_WIDTH,
                height=DASHBOARD_WIDGET_HEIGHT,
            ),
        ]
